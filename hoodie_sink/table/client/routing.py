"""The engine side of routing before the sink (docs/design/routing.md), for the Spark adapter's
`hoodie_sink.spark.route`: the routing snapshot (driver), the tag step (tasks), the insert plan
(driver, metadata only) and the insert file ids (tasks, in Spark SQL)."""

from __future__ import annotations

import pyarrow as pa

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.write_operation import APPEND, ASSIGNED, BULK, WriteOperation
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.write.coordinator import route_fingerprint, routing_context
from hoodie_sink.table.write.routing.columns import (
    ARRIVAL,
    BASE,
    FILE_ID,
    INSERT,
    KEY,
    KIND,
    ORDER,
    PARTITION,
    REWRITE,
    ROUTE_FIELDS,
    ROUTE_SCHEMA,
    is_routed,
    user_schema,
)
from hoodie_sink.table.write.routing.index_groups import GROUP, record_index_groups, with_index_group
from hoodie_sink.table.write.routing.inserts import FILE_ID_SQL, plan_inserts, plan_table
from hoodie_sink.table.write.routing.new_file_groups import (
    LOCATION_TYPE,
    location_source_columns,
    record_locations,
)
from hoodie_sink.table.write.routing.tag import RouteTagger
from hoodie_sink.table.write.routing.write_tasks import assign_write_tasks

__all__ = [
    "ARRIVAL", "FILE_ID", "INSERT", "KEY", "ORDER", "PARTITION", "ROUTE_FIELDS", "ROUTE_SCHEMA", "RouteTagger",
    "BASE", "KIND", "REWRITE",
    "LOCATION_TYPE", "adds_file_groups_only", "assign_write_tasks", "location_source_columns",
    "record_locations", "check_routable", "is_routed", "plan_inserts",
    "route_fingerprint", "routing_context", "user_schema", "plan_table", "FILE_ID_SQL",
    "GROUP", "GROUP_SCHEMA", "record_index_groups", "with_index_group",
]  # fmt: skip


GROUP_SCHEMA = pa.schema([pa.field(GROUP, pa.int32())])


def check_routable(cfg: WriteConfig) -> WriteOperation:
    """The operation, if routing is built for it: the keyed operations the bucket assigner runs
    (upsert, delete, insert; with a record key), and those that only add file groups (append,
    bulk_insert).  The overwrites are refused, not written unrouted behind the user's back."""
    op = WriteOperation.of(cfg.operation)
    keyed = op.writer == ASSIGNED and bool(cfg.record_key_fields)
    if op.overwrites or not (keyed or op.writer in (APPEND, BULK)):
        raise HoodieConfigError(
            f"hoodie_sink.spark.route does not route operation '{cfg.operation}' yet: it routes upsert, delete "
            "and insert of a table with a record key, append and bulk_insert. Help: write this DataFrame without "
            "route (the sink then assigns file groups in its own tasks)."
        )
    return op


def adds_file_groups_only(op: WriteOperation) -> bool:
    """Routed without a lookup: every record goes to a new file group (write/routing/new_file_groups.py)."""
    return op.writer != ASSIGNED


def route_input_schema(schema: pa.Schema) -> pa.Schema:
    """The tag step's output: the user's columns, then the route columns."""
    return pa.schema(list(user_schema(schema)) + list(ROUTE_FIELDS))
