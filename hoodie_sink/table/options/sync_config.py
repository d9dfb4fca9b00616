"""Catalog sync options: Apache Hudi 0.15's `hoodie.datasource.meta.sync.*`,
`hoodie.datasource.hive_sync.*` and `hoodie.meta.sync.*` keys -> one frozen MetaSyncConfig.

Parsed once, at the boundary, like every other write option (write_config.py): keys are matched
case-insensitively, an unknown key of these groups is an error with a suggestion, and an option
whose value would make Hudi register something we do not is refused, never ignored.  What each
option means, and its default, is docs/hudi/hive-sync.md#options-hudi-0150-defaults; how we
differ is docs/hudi/hive-sync.md#what-our-sync-does.

The table's own facts (name, database, partition fields, path style, table type) are not here:
they are resolved against hoodie.properties when the sync runs (catalog/sync_plan.py), so that a
`hoodie-sink sync` of an existing table needs only the metastore's address.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.options.values import parse_bool

# The key groups this module owns (lowercased).
SYNC_PREFIXES = ("hoodie.datasource.hive_sync.", "hoodie.datasource.meta.sync.", "hoodie.meta.sync.",
                 "hoodie.meta_sync.", "hoodie.datasource.meta_sync.")  # fmt: skip
_SWITCHES = (
    "hoodie.datasource.meta.sync.enable",
    "hoodie.datasource.hive_sync.enable",
    "hoodie.meta.sync.enable",
)

HIVE_SYNC_TOOL = "org.apache.hudi.hive.HiveSyncTool"
_EXTRACTOR_PACKAGES = ("org.apache.hudi.hive.", "org.apache.hudi.sync.common.model.partextractor.")
MULTI_PART_KEYS = "MultiPartKeysValueExtractor"
HIVE_STYLE = "HiveStylePartitionValueExtractor"
SINGLE_PART = "SinglePartPartitionValueExtractor"
NON_PARTITIONED = "NonPartitionedExtractor"
EXTRACTORS = (MULTI_PART_KEYS, HIVE_STYLE, SINGLE_PART, NON_PARTITIONED)
STRATEGIES = ("ALL", "RO", "RT")


@dataclass(frozen=True)
class MetaSyncConfig:
    """What the user asked of the sync; None where the table decides (resolved in sync_plan)."""

    metastore_uris: str = "thrift://localhost:9083"
    database: str | None = None
    table: str | None = None
    base_path: str | None = None
    partition_fields: tuple[str, ...] | None = None
    partition_extractor: str | None = None  # one of EXTRACTORS, short name
    decode_partition: bool | None = None
    support_timestamp: bool = False
    auto_create_database: bool = True
    skip_ro_suffix: bool = False
    sync_as_datasource: bool = True
    schema_string_length_thresh: int = 4000
    create_managed_table: bool = False
    omit_metadata_fields: bool = False
    batch_num: int = 1000
    table_strategy: str = "ALL"
    sync_snapshot_with_table_name: bool = True
    incremental: bool = True
    condition_sync: bool = False
    ignore_exceptions: bool = False
    spark_version: str | None = None
    table_properties: tuple[tuple[str, str], ...] = ()
    serde_properties: tuple[tuple[str, str], ...] = ()
    explicit: frozenset[str] = field(default_factory=frozenset)

    @staticmethod
    def from_options(options: Mapping[str, str]) -> MetaSyncConfig | None:
        """The sync the options ask for, or None when it is off (no switch on).  Only keys of the
        sync groups are read; the caller passes the rest on to its own parser."""
        raw = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
        own = {k: v for k, v in raw.items() if is_sync_option(k)}
        enabled = any(_bool(k, own[k]) for k in _SWITCHES if k in own)
        values: dict[str, Any] = {}
        for key, value in own.items():
            if key in _SWITCHES:
                continue
            handler = _OPTIONS.get(key)
            if handler is None:
                near = difflib.get_close_matches(key, [*_OPTIONS, *_SWITCHES], n=1, cutoff=0.8)
                hint = f" Did you mean '{near[0]}'?" if near else ""
                raise HoodieConfigError(
                    f"Unknown catalog sync option '{key}'.{hint} Help: docs/hudi/hive-sync.md lists the ones "
                    "hoodie_sink takes."
                )
            attr, parse = handler
            parsed = parse(key, value)
            if attr is not None:
                values[attr] = parsed
        if not enabled:
            return None
        _check_mode(own)
        return MetaSyncConfig(explicit=frozenset(values), **values)

    def with_base_path(self, path: str) -> MetaSyncConfig:
        """The table's path where `hoodie.datasource.meta.sync.base.path` did not name one."""
        if self.base_path:
            return self
        return replace(self, base_path=path)


def is_sync_option(key: str) -> bool:
    return key.startswith(SYNC_PREFIXES)


# -- value parsers -----------------------------------------------------------------------------


_bool = parse_bool


def _str(key: str, v: str) -> str | None:
    return v.strip() or None


def _positive(key: str, v: str) -> int:
    try:
        n = int(v.strip())
    except ValueError:
        raise HoodieConfigError(f"Option '{key}' must be an integer, got '{v}'.") from None
    if n <= 0:
        raise HoodieConfigError(f"Option '{key}' must be positive, got '{v}'.")
    return n


def _fields(key: str, v: str) -> tuple[str, ...] | None:
    out = tuple(f.strip() for f in v.split(",") if f.strip())
    return out or None


def _key_values(key: str, v: str) -> tuple[tuple[str, str], ...]:
    """Hudi's `k1=v1` lines (ConfigUtils.toMap: one pair per line)."""
    pairs = []
    for line in v.splitlines():
        if not line.strip():
            continue
        k, sep, val = line.partition("=")
        if not sep or not k.strip():
            raise HoodieConfigError(f"Option '{key}' takes lines of key=value, got {line!r}.")
        pairs.append((k.strip(), val.strip()))
    return tuple(pairs)


def _extractor(key: str, v: str) -> str | None:
    name = v.strip()
    if not name:
        return None
    short = name.rsplit(".", 1)[-1]
    if short in EXTRACTORS and (name == short or name.startswith(_EXTRACTOR_PACKAGES)):
        return short
    raise HoodieConfigError(
        f"Option '{key}'='{v}' is not supported: hoodie_sink extracts partition values with Hudi's "
        f"{', '.join(EXTRACTORS)} (org.apache.hudi.hive.*)."
    )


def _strategy(key: str, v: str) -> str:
    s = v.strip().upper()
    if s not in STRATEGIES:
        raise HoodieConfigError(f"Option '{key}' got '{v}'; accepted values: {', '.join(STRATEGIES)}.")
    return s


def _fixed(accepted: str, why: str) -> Any:
    """An option accepted only with the value that describes what we do."""

    def parse(key: str, v: str) -> None:
        if v.strip().lower() != accepted.lower():
            raise HoodieConfigError(f"Option '{key}'='{v}' is not supported: {why}. Supported: '{accepted}'.")

    return parse


def _ignored(key: str, v: str) -> None:
    return None


def _tool_class(key: str, v: str) -> None:
    classes = [c.strip() for c in v.split(",") if c.strip()]
    if classes and classes != [HIVE_SYNC_TOOL]:
        raise HoodieConfigError(
            f"Option '{key}'='{v}' is not supported: hoodie_sink syncs to a Hive metastore over Thrift as "
            f"{HIVE_SYNC_TOOL} does; other sync tools (AWS Glue's, BigQuery's, DataHub's) are not implemented."
        )


def _mode(key: str, v: str) -> None:
    if v.strip().lower() != "hms":
        raise HoodieConfigError(
            f"Option '{key}'='{v}' is not supported: hoodie_sink talks to the metastore's Thrift API (mode hms); "
            "the jdbc and hiveql modes (DDL through HiveServer2) are not implemented. Help: set "
            "hoodie.datasource.hive_sync.mode=hms and hoodie.datasource.hive_sync.metastore.uris."
        )


def _check_mode(own: dict[str, str]) -> None:
    """Hudi's default without a mode is JDBC to HiveServer2 (use_jdbc=true); we only speak HMS, so
    a sync must say so rather than be sent somewhere the user did not configure."""
    if "hoodie.datasource.hive_sync.mode" not in own:
        raise HoodieConfigError(
            "Catalog sync is on but 'hoodie.datasource.hive_sync.mode' is not set: Hudi would then sync over "
            "JDBC (HiveServer2), which hoodie_sink does not implement. Help: set "
            "hoodie.datasource.hive_sync.mode=hms and hoodie.datasource.hive_sync.metastore.uris=thrift://host:9083."
        )


_H = "hoodie.datasource.hive_sync."
_OPTIONS: dict[str, tuple[str | None, Any]] = {
    _H + "mode": (None, _mode),
    _H + "metastore.uris": ("metastore_uris", lambda k, v: v.strip() or "thrift://localhost:9083"),
    _H + "database": ("database", _str),
    _H + "table": ("table", _str),
    _H + "partition_fields": ("partition_fields", _fields),
    _H + "partition_extractor_class": ("partition_extractor", _extractor),
    _H + "support_timestamp": ("support_timestamp", _bool),
    _H + "auto_create_database": ("auto_create_database", _bool),
    _H + "skip_ro_suffix": ("skip_ro_suffix", _bool),
    _H + "sync_as_datasource": ("sync_as_datasource", _bool),
    _H + "schema_string_length_thresh": ("schema_string_length_thresh", _positive),
    _H + "create_managed_table": ("create_managed_table", _bool),
    _H + "omit_metadata_fields": ("omit_metadata_fields", _bool),
    _H + "batch_num": ("batch_num", _positive),
    _H + "table.strategy": ("table_strategy", _strategy),
    _H + "ignore_exceptions": ("ignore_exceptions", _bool),
    _H + "table_properties": ("table_properties", _key_values),
    _H + "serde_properties": ("serde_properties", _key_values),
    # JDBC settings: not read in mode hms, as in Hudi
    _H + "use_jdbc": (None, _ignored),
    _H + "jdbcurl": (None, _ignored),
    _H + "username": (None, _ignored),
    _H + "password": (None, _ignored),
    # how many partitions to fetch at once from the metastore: we fetch them all, as Hudi's default
    _H + "filter_pushdown_enabled": (None, _ignored),
    _H + "filter_pushdown_max_size": (None, _ignored),
    _H + "base_file_format": (None, _fixed("PARQUET", "hoodie_sink writes Parquet base files")),
    _H + "assume_date_partitioning": (None, _fixed("false", "partition paths are read as they are")),
    _H + "use_pre_apache_input_format": (
        None,
        _fixed("false", "the registered formats are org.apache.hudi's"),
    ),
    _H + "sync_comment": (None, _fixed("false", "column comments are not synced (the schema carries none)")),
    _H + "bucket_sync": (None, _fixed("false", "bucket specs are not registered in the metastore")),
    _H + "bucket_sync_spec": (None, _ignored),
    "hoodie.datasource.meta.sync.base.path": ("base_path", _str),
    "hoodie.meta.sync.client.tool.class": (None, _tool_class),
    "hoodie.meta.sync.decode_partition": ("decode_partition", _bool),
    # partitions are listed through our file-system view, which uses the metadata table when the table has one
    "hoodie.meta.sync.metadata_file_listing": (None, _ignored),
    "hoodie.meta.sync.sync_snapshot_with_table_name": ("sync_snapshot_with_table_name", _bool),
    "hoodie.meta.sync.incremental": ("incremental", _bool),
    "hoodie.meta_sync.spark.version": ("spark_version", _str),
    "hoodie.datasource.meta_sync.condition.sync": ("condition_sync", _bool),
}
