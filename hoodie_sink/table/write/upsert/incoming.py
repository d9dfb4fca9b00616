"""Incoming batches as change tables: the data columns in table order plus each record's key,
partition path, arrival order and kind (upsert, soft delete, delete) (../merge.py's columns)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.errors import HoodieSchemaError
from hoodie_sink.table.format.debezium import check_debezium_batch, op_deleted
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.format.schema import cast_to_storage
from hoodie_sink.table.write.merge import DELETE, KEY, KIND, ORDER, PART, SOFT_DELETE, UPSERT

IS_DELETED = "_hoodie_is_deleted"
# The Table's MERGE, UPDATE and DELETE write their upserts and deletes as one upsert (one instant):
# a row with this column true deletes its key whatever its ordering value, as the delete operation
# does (WriteConfig.dml_deletes lets it in; it is never stored: docs/design/table-dml.md).
DML_DELETE = "_hoodie_dml_delete"


class IncomingChanges:
    def __init__(self, keygen: KeyGenerator, data_schema: pa.Schema, deletes: bool, fill_missing: bool,
                 partition_id: int, debezium_table: str | None = None):  # fmt: skip
        self.keygen = keygen
        # PostgresDebeziumAvroPayload (the table's path): a 'd' operation is a soft delete
        # (docs/hudi/debezium.md#ordering-and-deletes)
        self.debezium_table = debezium_table
        self.data_schema = data_schema
        self.deletes = deletes  # the delete operation: every record deletes its key
        self.allow_missing = deletes or fill_missing
        self._row_base = partition_id << 40  # arrival order across tasks: (partition, row)
        self._rows_seen = 0

    def of(self, batch: pa.RecordBatch) -> pa.Table:
        n = batch.num_rows
        keys = self.keygen.record_keys(batch)
        parts = self.keygen.partition_paths(batch)
        data = _select(batch, self.data_schema, allow_missing=self.allow_missing)
        if self.deletes:
            kinds = np.full(n, DELETE, dtype=np.int8)
        elif DML_DELETE in batch.schema.names:
            flag = pc.fill_null(batch.column(batch.schema.get_field_index(DML_DELETE)), False)
            kinds = np.where(np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool), DELETE, UPSERT)
            if IS_DELETED in batch.schema.names:
                soft = pc.fill_null(batch.column(batch.schema.get_field_index(IS_DELETED)), False)
                soft_np = np.asarray(soft.to_numpy(zero_copy_only=False), dtype=bool)
                kinds = np.where((kinds == UPSERT) & soft_np, SOFT_DELETE, kinds)
        elif IS_DELETED in batch.schema.names:
            flag = pc.fill_null(batch.column(batch.schema.get_field_index(IS_DELETED)), False)
            kinds = np.where(np.asarray(flag.to_numpy(zero_copy_only=False), dtype=bool), SOFT_DELETE, UPSERT)
        else:
            kinds = np.full(n, UPSERT, dtype=np.int8)
        if self.debezium_table is not None and not self.deletes:
            check_debezium_batch(batch, self.debezium_table)
            op_del = op_deleted(batch)
            if op_del is not None:
                kinds = np.where((kinds == UPSERT) & op_del, SOFT_DELETE, kinds)
        order = np.arange(self._rows_seen, self._rows_seen + n, dtype=np.int64) + self._row_base
        self._rows_seen += n
        cols = list(data.columns) + [keys, parts, pa.array(order), pa.array(kinds.astype(np.int8))]
        names = list(data.schema.names) + [KEY, PART, ORDER, KIND]
        return pa.Table.from_arrays(cols, names=names)


def _select(batch: pa.RecordBatch, schema: pa.Schema, allow_missing: bool = False) -> pa.RecordBatch:
    cols, names = [], []
    for f in schema:
        i = batch.schema.get_field_index(f.name)
        if i < 0:
            if not allow_missing:
                raise HoodieSchemaError(f"Input batch lacks column '{f.name}' of the write schema.")
            cols.append(pa.nulls(batch.num_rows, f.type))
        else:
            cols.append(batch.column(i))
        names.append(f.name)
    picked = pa.RecordBatch.from_arrays(cols, names=names)
    return cast_to_storage(picked, schema)
