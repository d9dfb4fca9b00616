"""Exactly-once streaming writes: one instant per micro-batch, checkpoints in the commit.

Spark builds a stream writer twice per micro-batch, in two processes, and tells neither the
batch id: only the tasks (local property) and the commit hook (argument) know it.  So the
instant of a micro-batch is begun lazily by the first task that has rows, once per (batch,
query run): it takes a lock file, re-checks that no context exists yet and the checkpoint, runs
the coordinator's `begin` (which also rolls back whatever a crashed run left, once its heartbeat
has expired) and publishes the write context; the other tasks of the batch load it.  A batch
with no rows begins nothing and commits nothing.

The checkpoint is Hudi's `_hudi_streaming_sink_checkpoint` in the commit's extraMetadata: a JSON
map identifier -> batch id, written atomically with the data it describes.  A replayed batch
(same id, after a crash between our commit and Spark's) finds its id already committed and
writes nothing; tasks check before writing and the commit checks again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import time
from dataclasses import dataclass

import pyarrow as pa

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.format.markers import WORK_ROOT
from hoodie_sink.table.format.properties import PROPERTIES_FILE
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline, commit_metadata
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator
from hoodie_sink.table.write.context import WriteContext

log = logging.getLogger(__name__)

CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"
# The batch state (write context, begin lock) lives in our folder under `.hoodie/.aux/`, out
# of Java's sight (format/markers.py says why).  Releases before issue 10 kept it in
# `.hoodie/.temp/streaming`, where Java's marker handling may trip on it: a context found there
# is still used (a stream upgraded between a batch's begin and its commit stays exactly-once)
# and removed with the batch, never written again.
STREAMING_DIR = f"{WORK_ROOT}/streaming"
LEGACY_STREAMING_DIR = ".hoodie/.temp/streaming"
LOCK_TIMEOUT_S = 300.0


def default_identifier(options: dict[str, str]) -> str:
    """A writer identity stable across restarts from the same checkpoint location."""
    loc = options.get("checkpointlocation") or options.get("queryname") or "default"
    return "hoodie-" + hashlib.sha1(loc.rstrip("/").encode("utf-8")).hexdigest()[:12]


def committed_checkpoints(storage: Storage, timeline: Timeline | None = None) -> dict[str, str]:
    """The newest checkpoint map on the timeline ({} if none): commits are read newest first, up
    to the first that carries one (the newest, once the stream has committed)."""
    if timeline is None:
        if not storage.exists(PROPERTIES_FILE):
            return {}
        timeline = ActiveTimeline.load(storage)
    for inst in reversed(timeline.completed()):
        raw = commit_metadata(storage, timeline, inst).extra_metadata.get(CHECKPOINT_KEY)
        if raw:
            try:
                return {str(k): str(v) for k, v in json.loads(raw).items()}
            except ValueError:
                continue
    return {}


def batch_committed(checkpoints: dict[str, str], identifier: str, batch_id: int) -> bool:
    last = checkpoints.get(identifier)
    return last is not None and last.lstrip("-").isdigit() and int(last) >= batch_id


def with_checkpoint(checkpoints: dict[str, str], identifier: str, batch_id: int) -> dict[str, str]:
    """extraMetadata entries for a commit of `batch_id`: other writers' entries carried forward."""
    return {CHECKPOINT_KEY: json.dumps({**checkpoints, identifier: str(batch_id)}, sort_keys=True)}


def micro_batch_commit(storage: Storage, identifier: str, batch_id: int) -> tuple[dict[str, str], str] | None:
    """What the commit of micro-batch `batch_id` adds (its checkpoint extraMetadata, its report
    label), or None when the table holds the batch already: a replay raced its commit, and the
    caller aborts this write as a duplicate.  One timeline load for both."""
    checkpoints = committed_checkpoints(storage)
    if batch_committed(checkpoints, identifier, batch_id):
        return None
    return with_checkpoint(checkpoints, identifier, batch_id), f"micro-batch {batch_id} of {identifier}"


def is_committed(storage: Storage, identifier: str, batch_id: int, timeline: Timeline | None = None) -> bool:
    return batch_committed(committed_checkpoints(storage, timeline), identifier, batch_id)


@dataclass(frozen=True)
class BatchRef:
    identifier: str
    batch_id: int
    run_id: str

    @property
    def ctx_path(self) -> str:
        return f"{STREAMING_DIR}/{self._name}.ctx"

    @property
    def lock_path(self) -> str:
        return f"{STREAMING_DIR}/{self._name}.lock"

    @property
    def legacy_ctx_path(self) -> str:
        return f"{LEGACY_STREAMING_DIR}/{self._name}.ctx"

    @property
    def legacy_lock_path(self) -> str:
        return f"{LEGACY_STREAMING_DIR}/{self._name}.lock"

    @property
    def input_dir(self) -> str:
        """Where the tasks keep the batch's input for a retry after a lost conflict (OCC)."""
        return f"{STREAMING_DIR}/{self._name}.input"

    @property
    def _name(self) -> str:
        return f"{self.identifier}/{self.batch_id}-{self.run_id}"


def load_context(storage: Storage, ref: BatchRef) -> WriteContext | None:
    for path in (ref.ctx_path, ref.legacy_ctx_path):
        try:
            return pickle.loads(storage.read_bytes(path))
        except FileNotFoundError:
            continue
    return None


def begin_batch(cfg: WriteConfig, schema: pa.Schema, ref: BatchRef) -> WriteContext | None:
    """The batch's write context, begun by whichever task comes first.  None: already committed.

    Double-checked: a task that found no context may win the lock just after the first task
    published the context and released the lock; it must find that context, not begin a second
    instant (whose `begin` would roll back the first one while its tasks write).  The context is
    published create-if-absent, so even two begins (a lock stolen from a slow task) agree on one
    instant: the loser aborts its own."""
    storage = cfg.storage()
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    wait_s = 0.01
    while True:
        ctx = load_context(storage, ref)
        if ctx is not None:
            return ctx
        if storage.create_if_absent(ref.lock_path, str(time.time()).encode()):
            try:
                ctx = load_context(storage, ref)
                if ctx is not None:
                    return ctx
                # one load of the timeline for the checkpoint check and the whole begin
                timeline = ActiveTimeline.load(storage) if storage.exists(PROPERTIES_FILE) else None
                if timeline is not None and is_committed(storage, ref.identifier, ref.batch_id, timeline):
                    return None
                ctx = coordinator.begin(cfg, schema, timeline=timeline)
                if storage.create_if_absent(ref.ctx_path, pickle.dumps(ctx)):
                    return ctx
                coordinator.abort(ctx, settle_seconds=0)  # nothing written under it yet
                continue
            finally:
                storage.delete(ref.lock_path)
        _steal_stale_lock(storage, ref.lock_path)
        if time.monotonic() > deadline:
            raise HoodieCommitError(
                f"Timed out waiting for the instant of micro-batch {ref.batch_id} on {cfg.path} "
                f"(lock {storage.full(ref.lock_path)}). Help: delete the lock file if its writer is gone."
            )
        # The other tasks of the batch wait here for the first one's begin (tens of ms): look
        # again soon, then back off (a fixed 0.1 s cost every micro-batch up to 0.1 s).
        time.sleep(wait_s)
        wait_s = min(0.1, wait_s * 2)


def _steal_stale_lock(storage: Storage, lock: str, stale_after_s: float = 60.0) -> None:
    """A task that died while beginning the batch leaves its lock: take it over when stale."""
    try:
        taken = float(storage.read_text(lock) or 0)
    except (FileNotFoundError, ValueError):
        return
    if time.time() - taken > stale_after_s:
        storage.delete(lock)


def forget_batch(storage: Storage, ref: BatchRef) -> None:
    storage.delete(ref.ctx_path)
    storage.delete(ref.lock_path)
    if storage.is_dir(ref.input_dir):
        storage.delete_dir(ref.input_dir)
    if storage.delete(ref.legacy_ctx_path):  # a batch begun before the upgrade: tidy the old place
        storage.delete(ref.legacy_lock_path)
        _prune_legacy_dir(storage, ref.identifier)


def _prune_legacy_dir(storage: Storage, identifier: str) -> None:
    for rel in (f"{LEGACY_STREAMING_DIR}/{identifier}", LEGACY_STREAMING_DIR):
        if storage.list_names(rel):
            return
        storage.delete_dir(rel)
