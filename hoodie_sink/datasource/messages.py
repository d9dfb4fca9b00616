"""Commit messages: what a task attempt tells the commit (a plain, picklable dataclass)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import WriterCommitMessage

from hoodie_sink.table.client import TaskResult


@dataclass
class HoodieCommitMessage(WriterCommitMessage):
    result: TaskResult


def results_of(messages) -> list[TaskResult]:
    return [m.result for m in messages if isinstance(m, HoodieCommitMessage)]
