"""A MERGE that records a stream's micro-batch, exactly once (docs/design/table-dml.md#exactly-once-from-a-stream).

The record is the streaming sink's: the checkpoint map `_hudi_streaming_sink_checkpoint`
(identifier -> last batch id) in the commit's extraMetadata, published atomically with the
merge's data (table/write/streaming.py).  Delta's "idempotent writes" (txnAppId, txnVersion) are
the same idea: a write whose (application, version) the table holds already, or a lower version,
is skipped.

Checked twice: against the timeline the merge reads (a batch the table holds is not even planned),
and against the timeline as it is just before the commit, whose map the commit extends, so that an
entry another writer committed meanwhile is carried forward, not lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.streaming import batch_committed, committed_checkpoints, with_checkpoint


class BatchCommitted(Exception):  # noqa: N818 - an outcome, not a failure: the merge is skipped
    """The table holds this micro-batch already (or a later one of the same identifier)."""


@dataclass(frozen=True)
class BatchCheckpoint:
    identifier: str
    batch_id: int

    def __post_init__(self) -> None:
        if not isinstance(self.identifier, str) or not self.identifier:
            raise HoodieConfigError(
                f"A merge's checkpoint identifier must be a non-empty string, got {self.identifier!r}."
            )
        if isinstance(self.batch_id, bool) or not isinstance(self.batch_id, int) or self.batch_id < 0:
            raise HoodieConfigError(
                f"A merge's checkpoint batch id must be an integer >= 0, got {self.batch_id!r}."
            )

    def refuse_if_committed(self, storage: Storage, timeline: Timeline) -> None:
        if batch_committed(committed_checkpoints(storage, timeline), self.identifier, self.batch_id):
            raise BatchCommitted(f"micro-batch {self.batch_id} of {self.identifier} is committed already")

    def commit_extra(self, storage: Storage) -> dict[str, str]:
        """The commit's extraMetadata: the newest committed map, this batch added.  Read now (just
        before the commit), not at the merge's read: a map read earlier would drop the entry of a
        writer that committed in between.  Raises BatchCommitted when the table holds the batch by now."""
        checkpoints = committed_checkpoints(storage)
        if batch_committed(checkpoints, self.identifier, self.batch_id):
            raise BatchCommitted(f"micro-batch {self.batch_id} of {self.identifier} was committed meanwhile")
        return with_checkpoint(checkpoints, self.identifier, self.batch_id)
