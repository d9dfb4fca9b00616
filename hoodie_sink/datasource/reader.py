"""`spark.read.format("hoodie").load(path)`: snapshot reads of copy-on-write tables.

One input partition per base file.  When Spark pushes filters down
(spark.sql.python.filterPushdown.enabled=true, off by default in Spark 4.3), base files are
skipped in two steps:

1. partition pruning: filters on partition columns against each file's partition path;
2. data skipping: every supported filter (=, <, <=, >, >=, IN, IS [NOT] NULL, LIKE 'prefix%' on
   a top-level column) against the min / max / null count statistics of each remaining file's
   Parquet footer (`hoodie_sink.table.data_skipping`; footers are cached per process).  Clustering
   sorts rows, so filters on its sort columns skip most files.

Both only drop files that certainly hold no matching row, and every filter is still returned to
Spark, so rows are filtered exactly either way.

Caveat (Spark 4.3): Spark keeps the read plan of a pushdown on the relation, and a later
query on the SAME DataFrame with no filter at all reuses it (reads the pruned files only).
Upstream Spark scopes it to the scan since.  Load the table again for an unfiltered query.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from collections.abc import Callable

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from hoodie_sink.table import data_skipping
from hoodie_sink.table.data_skipping import Predicate
from hoodie_sink.table.keygen import parse_partition_path
from hoodie_sink.table.reader import Snapshot, read_base_file

log = logging.getLogger(__name__)


class HoodieReader(DataSourceReader):
    def __init__(self, path: str, as_of: str | None, columns: list[str], read_optimized: bool = False):
        self.path = path
        self.as_of = as_of
        self.read_optimized = read_optimized
        self.columns = columns
        self.partition_predicates: list = []  # Spark filters, for partition pruning
        self.predicates: list[Predicate] = []  # every supported filter, for data skipping

    def partitions(self):
        snap = Snapshot.open(self.path, self.as_of, self.read_optimized)
        self._schema = snap.schema
        prune = self._pruner(snap)
        files = snap.base_files(prune)
        if self.predicates:
            skipping = data_skipping.prune(snap.storage, files, self.predicates)
            log.info(
                "hoodie data skipping on %s: %d of %d base files skipped (%d footers read)",
                self.path,
                skipping.skipped,
                skipping.considered,
                skipping.footers_read,
            )
            files = skipping.files
        return [InputPartition(bf.path) for bf in files]  # Spark ships only .value

    def _pruner(self, snap: Snapshot) -> Callable[[str], bool] | None:
        fields = snap.table.partition_fields
        timestamp_keygen = "Timestamp" in (snap.table.keygen_class or "")
        preds = [p for p in self.partition_predicates if p.attribute[0] in fields]
        if not preds or not fields or timestamp_keygen:
            return None
        hive, url_encode = snap.table.hive_style, snap.table.url_encode

        def keep(partition_path: str) -> bool:
            values = parse_partition_path(partition_path, fields, hive, url_encode)
            return all(_holds(p, values.get(p.attribute[0])) for p in preds)

        return keep

    def read(self, partition: InputPartition):
        if partition is None or not getattr(partition, "value", None):
            return  # an empty table: Spark still runs one read task, with no partition
        snap_schema = getattr(self, "_schema", None)
        if snap_schema is None:
            snap_schema = Snapshot.open(self.path, self.as_of, self.read_optimized).schema
        from hoodie_sink.table.storage import Storage

        table = read_base_file(Storage(self.path), partition.value, snap_schema, self.columns)
        yield from table.to_batches()


class HoodiePushdownReader(HoodieReader):
    def pushFilters(self, filters):
        for f in filters:
            if isinstance(f, (EqualTo, In, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) and len(
                f.attribute
            ) == 1:
                self.partition_predicates.append(f)
            pred = to_predicate(f)
            if pred is not None:
                self.predicates.append(pred)
            yield f  # Spark still evaluates every filter: pruning only skips whole files


_SPARK_OPS = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
    IsNull: "is_null",
    IsNotNull: "is_not_null",
    StringStartsWith: "starts_with",
}
# Literal types Parquet statistics can be compared with; arrays, maps and structs cannot.
_SCALARS = (bool, int, float, str, bytes, decimal.Decimal, dt.date, dt.datetime, type(None))


def to_predicate(f) -> Predicate | None:
    """The data-skipping predicate of a Spark filter, or None (Not, StringContains, EqualNullSafe,
    nested columns, non-scalar literals: not used for skipping, Spark still applies them)."""
    op = _SPARK_OPS.get(type(f))
    if op is None or len(f.attribute) != 1:
        return None
    if op in data_skipping.NULL_OPS:
        return Predicate(f.attribute[0], op)
    values = f.value if op == "in" else (f.value,)
    if not all(isinstance(v, _SCALARS) for v in values):
        return None
    try:
        return Predicate(f.attribute[0], op, f.value)
    except ValueError:
        return None


def _coerce(raw: str, like):
    if isinstance(like, bool):
        return raw.lower() == "true"
    if isinstance(like, int):
        return int(raw)
    if isinstance(like, float):
        return float(raw)
    if isinstance(like, decimal.Decimal):
        return decimal.Decimal(raw)
    if isinstance(like, dt.date):
        return dt.date.fromisoformat(raw)
    return raw


def _holds(pred, raw: str | None) -> bool:
    """Whether a partition whose value is `raw` may hold rows matching `pred` (True if unsure)."""
    if raw is None or raw == "__HIVE_DEFAULT_PARTITION__":
        return True  # null partition values: keep the file, Spark filters the rows
    try:
        if isinstance(pred, In):
            return any(_coerce(raw, v) == v for v in pred.value if v is not None)
        v = pred.value
        x = _coerce(raw, v)
        if isinstance(pred, EqualTo):
            return x == v
        if isinstance(pred, GreaterThan):
            return x > v
        if isinstance(pred, GreaterThanOrEqual):
            return x >= v
        if isinstance(pred, LessThan):
            return x < v
        if isinstance(pred, LessThanOrEqual):
            return x <= v
    except (ValueError, TypeError, ArithmeticError):
        return True
    return True
