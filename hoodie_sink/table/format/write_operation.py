"""The write operations and what each one is: one object per operation, resolved once from the
option `hoodie.datasource.write.operation`, whose attributes the write path reads instead of
comparing operation names.

Hudi's operation types (WriteOperationType) are the values a commit records as `operationType`;
Hudi has no APPEND type (Flink's append mode commits INSERT), so `append` records INSERT.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT

# which task writer runs the operation's tasks
ASSIGNED, BULK, APPEND = "assigned", "bulk", "append"
# what an overwrite replaces
PARTITIONS, TABLE = "partitions", "table"


@dataclass(frozen=True)
class WriteOperation:
    name: str  # the option value
    operation_type: str  # the commit metadata's operationType
    # tagged against the index and merged into the file groups holding the keys (upsert, delete)
    keyed: bool = False
    # how its tasks write: ASSIGNED (bucket assigner: index, small files, claims; merged again at
    # commit), BULK (new file groups from the input), APPEND (new file groups, keys may be generated)
    writer: str = BULK
    deletes: bool = False  # every record deletes its key; ordering values are ignored
    # adds every record as a new row, matching nothing: no de-duplication, no index look-up
    append_only: bool = False
    # what the write replaces (a replacecommit): PARTITIONS it writes, the whole TABLE, or nothing
    overwrites: str | None = None
    key_optional: bool = False  # may write without a record key field (keys are then generated)
    # hashes its keys into the BUCKET index's buckets; the others would write file groups outside
    # them, which the bucket index never finds (docs/hudi/bucket-layout.md)
    allowed_with_bucket_index: bool = False
    # packs inserts into the small base files of a copy-on-write table
    packs_small_files: bool = False
    sorts_by_key: bool = False  # writes each file's rows sorted by record key (bulk_insert)
    # compares incoming records by the precombine field on any table, so a null there is refused
    # (docs/hudi/null-ordering.md); on a merge-on-read table every keyed write compares them
    compares_ordering: bool = False

    @staticmethod
    def of(name: str) -> WriteOperation:
        """The operation named `name`; refuses an unknown one."""
        op = _BY_NAME.get(name)
        if op is None:
            raise HoodieConfigError(
                f"Option 'hoodie.datasource.write.operation'='{name}' is not supported; "
                f"supported: {', '.join(OPERATIONS)}."
            )
        return op

    def commit_action(self, merge_on_read: bool) -> str:
        """The timeline action of its instant: an overwrite replaces file groups (replacecommit);
        inserts into a merge-on-read table are new base files, published as a deltacommit."""
        if self.overwrites:
            return REPLACE_COMMIT
        return DELTA_COMMIT if merge_on_read else COMMIT

    def __str__(self) -> str:
        return self.name


UPSERT = WriteOperation(
    "upsert", "UPSERT", keyed=True, writer=ASSIGNED, allowed_with_bucket_index=True, compares_ordering=True
)
DELETE = WriteOperation(
    "delete", "DELETE", keyed=True, writer=ASSIGNED, deletes=True, allowed_with_bucket_index=True
)
INSERT = WriteOperation("insert", "INSERT", writer=ASSIGNED, append_only=True, packs_small_files=True)
BULK_INSERT = WriteOperation("bulk_insert", "BULK_INSERT", sorts_by_key=True)
INSERT_OVERWRITE = WriteOperation("insert_overwrite", "INSERT_OVERWRITE", overwrites=PARTITIONS)
INSERT_OVERWRITE_TABLE = WriteOperation("insert_overwrite_table", "INSERT_OVERWRITE_TABLE", overwrites=TABLE)
APPEND_OP = WriteOperation("append", "INSERT", writer=APPEND, key_optional=True)

_BY_NAME = {
    op.name: op
    for op in (UPSERT, INSERT, BULK_INSERT, DELETE, INSERT_OVERWRITE, INSERT_OVERWRITE_TABLE, APPEND_OP)
}
OPERATIONS = tuple(_BY_NAME)  # the option's accepted values
