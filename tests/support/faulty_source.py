"""Test-only fault injection for Spark tests on the shared session: the `hoodie_faulty` source.

A monkeypatch in the test process does not reach Spark's Python workers, and the shared
session's workers cannot get a `sitecustomize` after it started.  This source is the `hoodie`
source with writers that fail one task after it wrote its files (as a crashed task would), from
inside the worker that runs it: Spark pickles the class by reference, so every worker imports
this module.  Production code knows nothing of it.

Options (taken off before the production writers see them):
  fault.task: "N" fails partition N on its first attempt (Spark retries it);
              "always:N" fails partition N on every attempt (the job fails).
  fault.log:  a file that each injected failure appends "<pid> <partition> <attempt>" to, so a
              test can check the failure really happened in a worker process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark import TaskContext

from hoodie_sink.datasource.batch_writer import HoodieBatchWriter
from hoodie_sink.datasource.source import HoodieDataSource
from hoodie_sink.datasource.stream_writer import HoodieStreamWriter

FAULT_TASK, FAULT_LOG = "fault.task", "fault.log"


class InjectedTaskFailure(RuntimeError):
    pass


@dataclass(frozen=True)
class TaskFault:
    partition: int | None = None
    every_attempt: bool = False
    log: str | None = None

    @classmethod
    def from_options(cls, options) -> tuple[dict, TaskFault]:
        opts = {k: v for k, v in dict(options).items() if k.lower() not in (FAULT_TASK, FAULT_LOG)}
        low = {k.lower(): v for k, v in dict(options).items()}
        spec = low.get(FAULT_TASK)
        if not spec:
            return opts, cls(log=low.get(FAULT_LOG))
        always, _, part = spec.rpartition(":")
        return opts, cls(int(part), always == "always", low.get(FAULT_LOG))

    def after_task_wrote(self) -> None:
        tc = TaskContext.get()
        if self.partition is None or tc is None or tc.partitionId() != self.partition:
            return
        if tc.attemptNumber() != 0 and not self.every_attempt:
            return
        if self.log:
            with open(self.log, "a") as f:
                f.write(f"{os.getpid()} {tc.partitionId()} {tc.attemptNumber()}\n")
        kind = "every attempt" if self.every_attempt else "attempt 0"
        raise InjectedTaskFailure(f"test failure injected in task {tc.partitionId()}, {kind}")


class FaultyBatchWriter(HoodieBatchWriter):
    def __init__(self, options, schema, overwrite: bool):
        opts, self.fault = TaskFault.from_options(options)
        super().__init__(opts, schema, overwrite)

    def write(self, iterator):
        message = super().write(iterator)
        self.fault.after_task_wrote()
        return message


class FaultyStreamWriter(HoodieStreamWriter):
    def __init__(self, options, schema, overwrite: bool):
        opts, self.fault = TaskFault.from_options(options)
        super().__init__(opts, schema, overwrite)

    def write(self, iterator):
        message = super().write(iterator)
        if message.result is not None:  # a task that wrote files, like the hook it replaces
            self.fault.after_task_wrote()
        return message


class FaultyHoodieDataSource(HoodieDataSource):
    @classmethod
    def name(cls) -> str:
        return "hoodie_faulty"

    def writer(self, schema, overwrite: bool):
        return FaultyBatchWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite: bool):
        return FaultyStreamWriter(self.options, schema, overwrite)


def register(spark) -> str:
    """Register the source on `spark`; returns its format name."""
    spark.dataSource.register(FaultyHoodieDataSource)
    return FaultyHoodieDataSource.name()


def injected_in(log_path) -> list[tuple[int, int, int]]:
    """The (pid, partition, attempt) of every failure injected so far."""
    if not os.path.exists(log_path):
        return []
    with open(log_path) as f:
        return [tuple(map(int, line.split())) for line in f if line.strip()]
