"""Apache Hudi 0.15's `PostgresDebeziumAvroPayload`, vectorised (docs/hudi/debezium.md): records
flattened from Debezium change events, ordered by their `_event_lsn` (the precombine field, also
against the stored record: the stored record wins only if its LSN is strictly greater, a stored
record without one loses), and deleted by an event whose `_change_operation_type` is 'd' (as by
`_hoodie_is_deleted`, which the payload also honours).  The merge itself is the event-time rule
(merge_rule.py); this module adds the delete flag and the checks of the input that Java's payload
makes record by record or that we do not implement (TOASTed columns).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieSchemaError

POSTGRES_DEBEZIUM_PAYLOAD = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload"
MYSQL_DEBEZIUM_PAYLOAD = "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload"
# Hudi's DebeziumConstants: the flattened columns (docs/hudi/debezium.md#the-flattened-record)
OP_COLUMN = "_change_operation_type"
LSN_COLUMN = "_event_lsn"
DELETE_OP = "d"
TOASTED_VALUE = "__debezium_unavailable_value"


def is_debezium(payload_class: str | None) -> bool:
    return bool(payload_class) and str(payload_class).endswith("PostgresDebeziumAvroPayload")


def op_deleted(table: pa.Table | pa.RecordBatch) -> np.ndarray | None:
    """Rows whose operation is a delete ('d', any case, as Java compares it), or None when the
    table has no operation column."""
    i = table.schema.get_field_index(OP_COLUMN)
    if i < 0:
        return None
    ops = table.column(i)
    is_d = pc.equal(pc.utf8_lower(ops.cast(pa.string())), DELETE_OP)
    return np.asarray(pc.fill_null(is_d, False).to_numpy(zero_copy_only=False), dtype=bool)


def check_debezium_schema(schema: pa.Schema, precombine_field: str | None, path: str, payload: str) -> None:
    """The columns and ordering field the payload needs, checked before any file is written."""
    opt = "hoodie.datasource.write.payload.class"
    if precombine_field != LSN_COLUMN:
        raise HoodieSchemaError(
            f"Option '{opt}'='{payload}' orders records by '{LSN_COLUMN}' (Java's payload reads that column "
            f"against the stored record), but 'hoodie.datasource.write.precombine.field' is "
            f"'{precombine_field or ''}': the batch and the stored record would be ordered by different "
            f"columns. Nothing was written to {path}. Help: set hoodie.datasource.write.precombine.field="
            f"{LSN_COLUMN} (docs/hudi/debezium.md#options)."
        )
    for name, kinds in ((LSN_COLUMN, "an integer"), (OP_COLUMN, "a string")):
        i = schema.get_field_index(name)
        t = schema.field(i).type if i >= 0 else None
        if name == LSN_COLUMN:
            ok = t is not None and pa.types.is_integer(t)
        else:
            ok = t is not None and (pa.types.is_string(t) or pa.types.is_large_string(t))
        if not ok:
            found = f"type {schema.field(i).type}" if i >= 0 else "missing"
            raise HoodieSchemaError(
                f"Option '{opt}'='{payload}' needs column '{name}' ({kinds}) in the input, flattened from the "
                f"Debezium event as Hudi's DebeziumSource does; it is {found}. Nothing was written to {path}. "
                "Help: flatten the Kafka value with hoodie_sink.spark.debezium_changes (docs/hudi/debezium.md)."
            )


def check_debezium_batch(batch: pa.RecordBatch | pa.Table, path: str) -> None:
    """Refuse TOASTed values: Java keeps the stored value for a column holding Debezium's
    placeholder, not implemented here.  (A null `_event_lsn`, on which Java's payload throws, is
    refused with every null ordering value, by the write's input check.)"""
    for f in batch.schema:
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            col = batch.column(batch.schema.get_field_index(f.name))
            if pc.any(pc.equal(col, TOASTED_VALUE)).as_py():
                raise HoodieSchemaError(
                    f"Column '{f.name}' holds Debezium's TOASTed placeholder '{TOASTED_VALUE}' (an unchanged large "
                    "value Postgres did not send); Hudi's payload keeps the stored value there, hoodie_sink does not "
                    f"implement that merge. Nothing was written to {path}. Help: set REPLICA IDENTITY FULL on the "
                    "source table so that Debezium sends whole rows (docs/hudi/debezium.md#toasted-values)."
                )
