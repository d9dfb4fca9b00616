"""The route columns: what a routed input carries besides the user's columns, and how the sink
recognises one (docs/design/routing.md#our-plan).

Each row is one change, already combined with the other records of its key and tagged against
the routing snapshot: its record key and partition path (for a record moved out of a partition
under a global index, the partition it leaves), its arrival order before the route shuffled it
(ties of the ordering field go to the later arrival), its kind (merge.py's UPSERT, SOFT_DELETE,
DELETE, MOVED_OUT), whether it is an insert, and its file group (null only for a delete of a key
the table does not hold)."""

from __future__ import annotations

import pyarrow as pa

from hoodie_sink.errors import HoodieSchemaError

FILE_ID = "_hoodie_route_file_id"
PARTITION = "_hoodie_route_partition"
KEY = "_hoodie_route_key"
ORDER = "_hoodie_route_order"
KIND = "_hoodie_route_kind"
INSERT = "_hoodie_route_insert"
# merge-on-read: the file group is rewritten (a key stored twice in it), not given a log file
REWRITE = "_hoodie_route_rewrite"
# the fingerprint of the snapshot the row was tagged against (coordinator.snapshot_fingerprint)
BASE = "_hoodie_route_base"
# added before the route's first shuffle: the record's arrival order in the user's input
ARRIVAL = "_hoodie_route_arrival"

ROUTE_FIELDS = (
    pa.field(FILE_ID, pa.string()),
    pa.field(PARTITION, pa.string()),
    pa.field(KEY, pa.string()),
    pa.field(ORDER, pa.int64()),
    pa.field(KIND, pa.int8()),
    pa.field(INSERT, pa.bool_()),
    pa.field(REWRITE, pa.bool_()),
    pa.field(BASE, pa.string()),
)
ROUTE_COLUMNS = tuple(f.name for f in ROUTE_FIELDS)
ROUTE_SCHEMA = pa.schema(list(ROUTE_FIELDS))


def is_routed(schema: pa.Schema) -> bool:
    """A routed input has every route column; one with some of them is refused (a user column
    cannot use the reserved `_hoodie_` prefix anyway)."""
    present = [n for n in ROUTE_COLUMNS if n in schema.names]
    if present and len(present) != len(ROUTE_COLUMNS):
        missing = [n for n in ROUTE_COLUMNS if n not in schema.names]
        raise HoodieSchemaError(
            f"The input has route column(s) {', '.join(present)} but lacks {', '.join(missing)}: it is not the "
            "output of hoodie_sink.spark.route. Help: write the DataFrame route returns, with all its columns."
        )
    return bool(present)


def user_schema(schema: pa.Schema) -> pa.Schema:
    """The input's own columns: the route columns never reach a file."""
    return pa.schema([f for f in schema if f.name not in ROUTE_COLUMNS])
