"""Per-phase metrics of a write (after Bilibili's per-stage metrics for Hudi's Flink writer).

Phases: tag (index lookup, in the tasks), write (the tasks' buffering, merging and flushing of
file groups, tag excluded), merge (the commit-time merge of file groups two tasks touched),
commit (publishing the instant), and the table services after it (clustering, clean, archive).
Task phases are summed over the tasks (CPU spent) and their slowest task is kept (the wall
time they cost).  One `WriteMetrics` per commit: logged as one line, returned by
`client.complete`, and appended as a JSON line to `hoodie.sink.metrics.file` when set.

Spark's Python DataSource API (PySpark 4.3) has no way to put custom metrics into a streaming
query's progress (`DataSourceStreamWriter` offers commit/abort only, no metrics hook), so a
stream's metrics are this log line and the metrics file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions


class PhaseClock:
    """Accumulates seconds per phase name; `with clock.phase("tag"): ...`."""

    def __init__(self) -> None:
        self.ms: dict[str, int] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0) + int((time.perf_counter() - started) * 1000)


@dataclass(frozen=True)
class WriteMetrics:
    instant: str
    action: str
    operation: str
    tasks: int
    rows_in: int
    inserts: int
    updates: int
    deletes: int
    bytes_written: int
    files_added: int
    files_updated: int
    phases_ms: dict[str, int] = field(default_factory=dict)  # tag, write (task sums), merge, commit, services
    slowest_task_ms: dict[str, int] = field(default_factory=dict)  # tag, write of the slowest task
    total_ms: int = 0  # from begin to the end of the services
    # CPU time of the commit's process while it merged and published (services excluded): the
    # driver-side cost of a write, which must not grow with the rows written (issue 27)
    commit_cpu_ms: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def summary(self) -> str:
        phases = " ".join(f"{k} {v / 1000:.2f}s" for k, v in self.phases_ms.items())
        return f"hoodie: metrics {self.action} {self.instant}: {phases}; total {self.total_ms / 1000:.2f}s"


def sum_task_phases(per_task: list[Mapping[str, int]]) -> tuple[dict[str, int], dict[str, int]]:
    """(sum over tasks, the slowest task's) of each phase."""
    total: dict[str, int] = {}
    slowest: dict[str, int] = {}
    for phases in per_task:
        for k, v in phases.items():
            total[k] = total.get(k, 0) + v
            slowest[k] = max(slowest.get(k, 0), v)
    return total, slowest


def append_metrics_line(target: str, metrics: WriteMetrics, options: StorageOptions | None = None) -> None:
    """One JSON line per commit.  A local file is appended to; on storage without append (object
    stores, HDFS through pyarrow) `target` is a folder and each commit writes `<instant>.json`
    into it, which scrapers list.  `options`: the write's S3 settings."""
    if "://" not in target or target.startswith("file://"):
        local = os.path.abspath(target.removeprefix("file://"))
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "a", encoding="utf-8") as f:
            f.write(metrics.to_json() + "\n")
    else:
        Storage(target, options or StorageOptions()).write_bytes(
            f"{metrics.instant}.json", (metrics.to_json() + "\n").encode()
        )
