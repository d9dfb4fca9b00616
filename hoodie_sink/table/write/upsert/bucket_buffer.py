"""The task's buffer of changes by bucket (partition, file group or new-file bucket), with the
sizes that decide when a bucket flushes (../upsert_task.py, step 3)."""

from __future__ import annotations

import pyarrow as pa


class BucketBuffer:
    def __init__(self, bucket_budget: int, task_budget: int):
        self.bucket_budget = bucket_budget
        self.task_budget = task_budget
        self._buckets: dict[tuple[str, str], list[pa.Table]] = {}  # (partition, bucket id) -> changes
        self._bytes: dict[tuple[str, str], int] = {}
        self._buffered = 0

    def add(self, key: tuple[str, str], rows: pa.Table) -> bool:
        """Buffer rows; True when their bucket has reached its budget."""
        self._buckets.setdefault(key, []).append(rows)
        self._bytes[key] = self._bytes.get(key, 0) + rows.nbytes
        self._buffered += rows.nbytes
        return self._bytes[key] >= self.bucket_budget

    def largest_over_budget(self) -> tuple[str, str] | None:
        """The bucket to flush while the task's buffer passes its budget (the largest first)."""
        if self._buffered >= self.task_budget and self._bytes:
            return max(self._bytes, key=lambda b: self._bytes[b])
        return None

    def buckets(self) -> list[tuple[str, str]]:
        return list(self._buckets)

    def size(self, key: tuple[str, str]) -> int:
        return self._bytes.get(key, 0)

    def pop(self, key: tuple[str, str]) -> list[pa.Table]:
        self._buffered -= self._bytes.pop(key, 0)
        return self._buckets.pop(key, [])
