"""The write client's side of a streaming sink (datasource/stream_writer.py): one instant per
micro-batch, begun by its first task with rows, found again by the commit, published with the
batch's checkpoint so that a replayed batch is skipped (table/write/streaming.py does the work)."""

from __future__ import annotations

from hoodie_sink.table.write.streaming import (
    BatchRef,
    batch_committed,
    begin_batch,
    committed_checkpoints,
    default_identifier,
    forget_batch,
    load_context,
    micro_batch_commit,
    with_checkpoint,
)

__all__ = [
    "BatchRef",
    "batch_committed",
    "begin_batch",
    "committed_checkpoints",
    "default_identifier",
    "forget_batch",
    "load_context",
    "micro_batch_commit",
    "with_checkpoint",
]
