"""What a Hudi table should look like in a Hive metastore, and what to change to get there: pure
planning, no I/O (the sync that runs it is hive_sync.py).

Everything here follows what Apache Hudi 0.15's HiveSyncTool registers in mode hms
(docs/hudi/hive-sync.md): the tables of each table type, their columns, formats, serde and
properties, and the partition values its extractors read off a partition path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa

from hoodie_sink.errors import HoodieCatalogError
from hoodie_sink.table.catalog.hive_schema import hive_type, spark_schema_parts
from hoodie_sink.table.catalog.hms_client import (
    EXTERNAL_TABLE,
    HiveColumn,
    HivePartition,
    HiveStorage,
    HiveTable,
)
from hoodie_sink.table.format.keygen import keygen_type_from_class
from hoodie_sink.table.format.properties import MERGE_ON_READ, TableConfig
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.options.sync_config import (
    HIVE_STYLE,
    MULTI_PART_KEYS,
    NON_PARTITIONED,
    SINGLE_PART,
    MetaSyncConfig,
)

# docs/hudi/hive-sync.md#what-a-table-looks-like
PARQUET_INPUT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
REALTIME_INPUT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
PARQUET_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
MANAGED_TABLE = "MANAGED_TABLE"
# docs/hudi/hive-sync.md#the-sync-marker
LAST_COMMIT_TIME_SYNC = "last_commit_time_sync"
LAST_COMMIT_COMPLETION_TIME_SYNC = "last_commit_completion_time_sync"
MARKER_KEYS = (LAST_COMMIT_TIME_SYNC, LAST_COMMIT_COMPLETION_TIME_SYNC)
AUTO_CREATED_DATABASE = "automatically created by hoodie"


@dataclass(frozen=True)
class ResolvedSync:
    """The sync's settings with the table's own facts filled in."""

    config: MetaSyncConfig
    database: str
    table: str
    base_path: str
    table_type: str
    partition_fields: tuple[str, ...]
    extractor: str
    decode_partition: bool
    formatted_partitions: bool = False  # TimestampBasedKeyGenerator: values are dates, not the column's


@dataclass(frozen=True)
class SyncedTable:
    """One metastore table of a Hudi table: its name, and whether it reads only base files."""

    name: str
    read_optimized: bool


def resolve(config: MetaSyncConfig, table: TableConfig, base_path: str) -> ResolvedSync:
    """Fill what the options left open from hoodie.properties, as Hudi infers it
    (docs/hudi/hive-sync.md#options-hudi-0150-defaults)."""
    name = config.table or table.name
    if not name:
        raise HoodieCatalogError(
            "catalog sync: the table has no name (hoodie.table.name); set hoodie.datasource.hive_sync.table"
        )
    database = config.database or table.database or "default"
    # a custom key generator's `field:type` names the field before the colon
    fields = config.partition_fields
    if fields is None:
        fields = tuple(f.split(":", 1)[0] for f in table.partition_fields)
    extractor = config.partition_extractor or _inferred_extractor(fields, table.hive_style)
    if extractor == NON_PARTITIONED and fields:
        raise HoodieCatalogError(
            f"catalog sync: NonPartitionedExtractor on a table partitioned by {', '.join(fields)}; "
            "Help: leave hoodie.datasource.hive_sync.partition_extractor_class unset"
        )
    if extractor in (HIVE_STYLE, SINGLE_PART) and len(fields) != 1:
        raise HoodieCatalogError(
            f"catalog sync: {extractor} reads one partition value, but the partition fields are {list(fields)}; "
            "Help: use MultiPartKeysValueExtractor"
        )
    decode = table.url_encode if config.decode_partition is None else config.decode_partition
    formatted = bool(table.keygen_class) and keygen_type_from_class(table.keygen_class or "") == "TIMESTAMP"
    return ResolvedSync(
        config, database, name, base_path, table.table_type, fields, extractor, decode, formatted
    )


def _inferred_extractor(fields: tuple[str, ...], hive_style: bool) -> str:
    if not fields:
        return NON_PARTITIONED
    if len(fields) == 1:
        return HIVE_STYLE if hive_style else SINGLE_PART
    return MULTI_PART_KEYS


def synced_tables(r: ResolvedSync) -> list[SyncedTable]:
    """The metastore tables of the Hudi table, in the order Hudi syncs them; a name synced twice
    keeps its last role (docs/hudi/hive-sync.md#tables-registered)."""
    if r.table_type != MERGE_ON_READ:
        return [SyncedTable(r.table, False)]
    strategy = r.config.table_strategy
    if strategy == "RO":
        return [SyncedTable(r.table, True)]
    if strategy == "RT":
        return [SyncedTable(r.table, False)]
    order = [
        SyncedTable(r.table if r.config.skip_ro_suffix else f"{r.table}_ro", True),
        SyncedTable(f"{r.table}_rt", False),
    ]
    if r.config.sync_snapshot_with_table_name:
        order.append(SyncedTable(r.table, False))
    last = {t.name: t for t in order}
    return [last[name] for name in dict.fromkeys(t.name for t in order)]


def table_definition(r: ResolvedSync, synced: SyncedTable, schema: pa.Schema) -> HiveTable:
    """The table as it should be registered, without the sync marker."""
    cfg = r.config
    partition_keys = list(r.partition_fields)
    keyed = set(partition_keys)
    data = [f for f in schema if f.name not in keyed]
    if cfg.omit_metadata_fields:
        data = [f for f in data if f.name not in META_COLUMNS]
    columns = tuple(HiveColumn(f.name, hive_type(f.type, cfg.support_timestamp, f.name), "") for f in data)
    # a key typed as its column where the path holds the column's value; `string` where it holds a
    # formatted date (a timestamp key generator's `2026/01/01` is no bigint: engines would refuse
    # to read the partition), or where the schema lacks the field
    partition_columns = tuple(
        HiveColumn(
            name,
            hive_type(schema.field(name).type, cfg.support_timestamp, name)
            if name in schema.names and not r.formatted_partitions
            else "string",
            "",
        )
        for name in partition_keys
    )
    serde = {"serialization.format": "1"}
    parameters: dict[str, str] = {} if cfg.create_managed_table else {"EXTERNAL": "TRUE"}
    parameters.update(cfg.table_properties)
    if cfg.sync_as_datasource:
        serde["path"] = r.base_path
        serde["hoodie.query.as.ro.table"] = str(synced.read_optimized).lower()
        parameters.update(
            _spark_properties(r, schema if not cfg.omit_metadata_fields else _without_meta(schema))
        )
    serde.update(cfg.serde_properties)
    storage = HiveStorage(
        input_format=PARQUET_INPUT
        if synced.read_optimized or r.table_type != MERGE_ON_READ
        else REALTIME_INPUT,
        output_format=PARQUET_OUTPUT,
        serde=PARQUET_SERDE,
        serde_properties=serde,
    )
    return HiveTable(
        database=r.database,
        name=synced.name,
        columns=columns,
        partition_columns=partition_columns,
        location=r.base_path,
        storage=storage,
        parameters=parameters,
        table_type=MANAGED_TABLE if cfg.create_managed_table else EXTERNAL_TABLE,
    )


def _without_meta(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if f.name not in META_COLUMNS])


def _spark_properties(r: ResolvedSync, schema: pa.Schema) -> dict[str, str]:
    """Spark's data source table properties: Spark then reads the table through Hudi's data
    source (provider `hudi`) with this schema, not through Hive's serde."""
    parts = spark_schema_parts(schema, list(r.partition_fields), r.config.schema_string_length_thresh)
    out = {"spark.sql.sources.provider": "hudi"}
    if r.config.spark_version:
        out["spark.sql.create.version"] = r.config.spark_version
    out["spark.sql.sources.schema.numParts"] = str(len(parts))
    out.update({f"spark.sql.sources.schema.part.{i}": p for i, p in enumerate(parts)})
    if r.partition_fields:
        out["spark.sql.sources.schema.numPartCols"] = str(len(r.partition_fields))
        out.update({f"spark.sql.sources.schema.partCol.{i}": f for i, f in enumerate(r.partition_fields)})
    return out


# -- partitions -----------------------------------------------------------------------------


def partition_values(r: ResolvedSync, relative_path: str) -> tuple[str, ...]:
    """The partition's values, as Hudi's extractor of this table reads them off its relative path
    (docs/hudi/hive-sync.md#partitions)."""
    if r.extractor == NON_PARTITIONED:
        return ()
    if r.extractor == SINGLE_PART:
        values = [relative_path]
    elif r.extractor == HIVE_STYLE:
        name, sep, value = relative_path.partition("=")
        if not sep:
            raise HoodieCatalogError(
                f"catalog sync: partition path '{relative_path}' is not hive-style (field=value), as "
                "HiveStylePartitionValueExtractor needs"
            )
        values = [value]
    else:
        values = [piece.partition("=")[2] if "=" in piece else piece for piece in relative_path.split("/")]
    if len(values) != len(r.partition_fields):
        raise HoodieCatalogError(
            f"catalog sync: partition path '{relative_path}' gives {len(values)} value(s) with {r.extractor}; "
            f"the table has {len(r.partition_fields)} partition field(s) {list(r.partition_fields)}"
        )
    return tuple(unquote(v) if r.decode_partition else v for v in values)


def partition_location(r: ResolvedSync, relative_path: str) -> str:
    return f"{r.base_path.rstrip('/')}/{relative_path}"


@dataclass(frozen=True)
class PartitionChanges:
    add: tuple[HivePartition, ...] = ()
    alter: tuple[HivePartition, ...] = ()
    drop: tuple[tuple[str, ...], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.add or self.alter or self.drop)


def partition_changes(
    r: ResolvedSync,
    registered: Iterable[HivePartition],
    written: Iterable[str],
    gone: Iterable[str],
    full: bool,
) -> PartitionChanges:
    """What to add, move and drop.  `written`: the partition paths to have (every live one on a
    full sync; those the new commits wrote on an incremental one); `gone`: paths the table no
    longer has.  With `full`, a registered partition not in `written` is dropped too."""
    if r.extractor == NON_PARTITIONED:
        return PartitionChanges()
    have = {p.values: p.location for p in registered}
    want: dict[tuple[str, ...], str] = {}
    for rel in sorted(set(written)):
        want[partition_values(r, rel)] = partition_location(r, rel)
    add, alter = [], []
    for values, location in want.items():
        if values not in have:
            add.append(HivePartition(values, location))
        elif not same_location(have[values], location):
            alter.append(HivePartition(values, location))
    dropping = {partition_values(r, rel) for rel in gone} - set(want)
    if full:
        dropping |= set(have) - set(want)
    drop = tuple(sorted(v for v in dropping if v in have))
    return PartitionChanges(tuple(add), tuple(alter), drop)


def same_location(registered: str, ours: str) -> bool:
    """Whether the metastore's location is our path (it qualifies a local path as `file:/...`)."""
    return _plain(registered) == _plain(ours)


def _plain(location: str) -> str:
    loc = location.rstrip("/")
    if loc.startswith("file://"):
        loc = loc[len("file://") :]
    elif loc.startswith("file:"):
        loc = loc[len("file:") :]
    return "/" + loc.lstrip("/") if not loc.startswith(("s3", "gs:", "abfs", "hdfs", "wasb")) else loc


# -- comparing definitions ------------------------------------------------------------------


def columns_differ(registered: HiveTable, wanted: HiveTable) -> bool:
    """Whether the column lists differ by name, order or type (type names compared ignoring case,
    since Hive and Hudi spell them differently)."""

    def norm(cols: tuple[HiveColumn, ...]) -> list[tuple[str, str]]:
        return [(c.name.lower(), c.type.replace(" ", "").lower()) for c in cols]

    return norm(registered.columns) != norm(wanted.columns)


def definition_differs(registered: HiveTable, wanted: HiveTable) -> bool:
    """Whether anything but the sync marker and the metastore's own parameters differs."""
    if columns_differ(registered, wanted):
        return True
    if [(c.name.lower()) for c in registered.partition_columns] != [
        c.name.lower() for c in wanted.partition_columns
    ]:
        return True
    if registered.storage != wanted.storage or not same_location(registered.location, wanted.location):
        return True
    if registered.table_type != wanted.table_type:
        return True
    return _without_markers(registered.parameters) != _without_markers(wanted.parameters)


def _without_markers(parameters: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in parameters.items() if k not in MARKER_KEYS}
