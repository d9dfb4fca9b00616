"""What a write's tasks and its commit share: the write context, task identities and results.

`begin` (coordinator.py) builds one WriteContext on the driver, with the write's plan (plan.py);
it travels to every task by pickling.  Tasks return TaskResults, the commit messages the
coordinator completes from.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import pyarrow as pa

from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.format.commit_metadata import WriteStat
from hoodie_sink.table.format.file_group import BaseFile, SliceFiles, write_token
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.format.schema import cast_to_storage
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.file_slice import CommittedInstants
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.plan import WritePlan


@dataclass(frozen=True)
class WriteContext:
    """What every task and the commit need to know about one write.  Picklable."""

    config: WriteConfig
    plan: WritePlan  # the write's decisions, made once at begin
    instant: str
    action: str
    avro_schema: str  # table schema without meta fields (commit extraMetadata.schema)
    avro_with_meta: str  # parquet.avro.schema of our base files
    data_schema: pa.Schema  # storage schema of the data columns, in table order
    created_table: bool = False
    started_at: float = field(default_factory=time.time)
    # keyed operations (upsert, delete): the file groups as of the start of the write
    base_files: tuple[BaseFile, ...] = ()
    # (partition, file id) -> instant of the pending clustering that will replace it
    clustering: tuple[tuple[tuple[str, str], str], ...] = ()
    # merge-on-read keyed writes: the latest file slice of every file group (where logs go), and
    # the instants whose log blocks count when the write folds a slice's logs (the timeline the
    # slices were listed on: a write still pending then, even one that died, never counts)
    log_slices: tuple[SliceFiles, ...] = ()
    log_blocks: CommittedInstants | None = None
    # optimistic concurrency control: the timeline this write was planned on (Java's
    # lastCompletedTxnOwnerInstant and the writes pending then), to find what completed since
    last_completed: str | None = None
    pending_at_begin: tuple[str, ...] = ()
    # a routed input (write/routing/): the fingerprint of the snapshot this write starts from,
    # which its routes must have been computed on ("" for a new table); None: not routed
    routed_on: str | None = None

    @property
    def slices_by_id(self) -> dict[str, SliceFiles]:
        return {s.file_id: s for s in self.log_slices}

    @property
    def clustering_file_groups(self) -> dict[tuple[str, str], str]:
        return dict(self.clustering)

    @property
    def storage(self) -> Storage:
        return self.config.storage()


@dataclass(frozen=True)
class TaskIdentity:
    partition_id: int = 0
    stage_id: int = 0
    task_attempt_id: int = 0
    attempt_number: int = 0
    only_task: bool = False  # the write's sole task (the engine API): nobody else can contend

    @property
    def token(self) -> str:
        return write_token(self.partition_id, self.stage_id, self.task_attempt_id)


@dataclass
class TaskResult:
    """The commit message of one task attempt."""

    instant: str
    partition_id: int
    attempt_number: int
    write_stats: list[WriteStat] = field(default_factory=list)
    num_records: int = 0
    duration_ms: int = 0
    phase_ms: dict[str, int] = field(default_factory=dict)  # tag, write (metrics.py)
    # the record index's change of this task's files, in the work folder (read/record_index_change.py)
    record_index_log: str | None = None


def keygen_for(ctx: WriteContext) -> KeyGenerator:
    return KeyGenerator(ctx.plan.keygen)


def stored_keygen(ctx: WriteContext) -> KeyGenerator | None:
    """The key generator that gives the keys of stored rows in a virtual-key table
    (hoodie.populate.meta.fields=false, format/virtual_keys.py); None where files store them."""
    if ctx.config.populate_meta_fields:
        return None
    # stored rows are what they are: their keys are derived as Java derives them, ambiguous or not
    return KeyGenerator(replace(ctx.plan.keygen, allow_ambiguous_keys=True))


def select_data(batch: pa.RecordBatch, schema: pa.Schema, fill_missing: bool = False) -> pa.RecordBatch:
    """The data columns of `batch` in table order, cast to the storage types.  `fill_missing`
    (hoodie.write.set.null.for.missing.columns) writes nulls for columns the batch lacks."""
    missing = [n for n in schema.names if n not in batch.schema.names]
    if missing and not fill_missing:
        raise HoodieSchemaError(f"Input batch lacks column(s) {', '.join(missing)} of the write schema.")
    cols = [batch.column(i) if (i := batch.schema.get_field_index(f.name)) >= 0 else pa.nulls(batch.num_rows, f.type)
            for f in schema]  # fmt: skip
    picked = pa.RecordBatch.from_arrays(cols, names=schema.names)
    return cast_to_storage(picked, schema)
