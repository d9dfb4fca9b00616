"""Crash points inside the metadata table's sync, for the kill -9 tests of a write with
hoodie.metadata.enable=true (tests/spark/test_streaming_kill.py, tests/interop/test_metadata_kill_interop.py).

A write's commit (coordinator._complete) calls `hoodie_sink.table.metadata.sync.on_commit`, which
writes the metadata deltacommit of the data instant (writer.write_deltacommit: requested, inflight,
the log file by `writer.append_block`, completed) before the data instant completes.  `install`
wraps those two module attributes, the ones the callers look up at each call, so that `pause(point)`
runs at
- "during-metadata-deltacommit": the metadata log file of the data instant is written, its
  deltacommit is inflight, the data instant is inflight;
- "after-metadata-deltacommit": the metadata deltacommit is complete, the data instant is not.
Only a write's commit pauses, not a table service's (compaction and clustering call on_commit too).
"""

from __future__ import annotations

from collections.abc import Callable

AFTER = "after-metadata-deltacommit"
DURING = "during-metadata-deltacommit"
POINTS = (AFTER, DURING)
SERVICE_OPERATIONS = ("compact", "cluster")  # CommitMetadata.operation_type of the table services


def install(pause: Callable[[str], None]) -> None:
    """Patch the metadata sync of this process to call `pause` at both points (it decides)."""
    from hoodie_sink.table.metadata import sync, writer

    on_commit, append_block = sync.on_commit, writer.append_block
    in_write_commit = [False]

    def paused_on_commit(storage, instant, md, record_index=None):
        is_write = md.operation_type.lower() not in SERVICE_OPERATIONS
        in_write_commit[0] = is_write
        try:
            on_commit(storage, instant, md, record_index)
        finally:
            in_write_commit[0] = False
        if is_write:
            pause(AFTER)

    def paused_append_block(mdt, timeline, partition, file_id, instant, records):
        stat = append_block(mdt, timeline, partition, file_id, instant, records)
        if in_write_commit[0]:
            pause(DURING)
        return stat

    sync.on_commit = paused_on_commit
    writer.append_block = paused_append_block
