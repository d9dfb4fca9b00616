"""Opening and creating a table, and reconciling a write's options with the table's settings.

Table-level settings live in hoodie.properties.  A write may leave them unset (they are then
taken from the table) but may not contradict them: another record key, say, would silently
break every key-based operation later.
"""

from __future__ import annotations

from hoodie_sink.config import CLASS_BY_KEYGEN, KEYGEN_BY_CLASS, WriteConfig
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.markers import TEMP_DIR
from hoodie_sink.table.metadata import CommitMetadata
from hoodie_sink.table.properties import (
    COPY_ON_WRITE,
    MERGE_ON_READ,
    PROPERTIES_FILE,
    TableConfig,
    read_table_config,
    write_table_config,
)
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.timeline.timeline import META_DIR, Timeline, TimelineStore

_TABLE_TYPES = {"copy_on_write": COPY_ON_WRITE, "merge_on_read": MERGE_ON_READ}


def table_exists(storage: Storage) -> bool:
    return storage.exists(PROPERTIES_FILE)


def new_table_config(cfg: WriteConfig) -> TableConfig:
    if cfg.table_type != "copy_on_write":
        raise HoodieConfigError(
            "Option 'hoodie.datasource.write.table.type'='MERGE_ON_READ': creating merge-on-read tables is "
            "not supported yet (inserts into existing ones are). Help: use COPY_ON_WRITE."
        )
    keygen = cfg.resolved_keygen
    return TableConfig(
        name=cfg.table_name or cfg.default_table_name(),
        table_type=_TABLE_TYPES[cfg.table_type],
        record_key_fields=cfg.record_key_fields,
        partition_fields=cfg.partition_fields if keygen != "non_partition" else (),
        precombine_field=cfg.precombine_field,
        keygen_class=CLASS_BY_KEYGEN[keygen],
        hive_style=cfg.hive_style,
        url_encode=cfg.url_encode,
        database=cfg.database or "default",
        extra=_timestamp_keygen_props(cfg) if keygen == "timestamp" else {},
    )


def _timestamp_keygen_props(cfg: WriteConfig) -> dict[str, str]:
    out = {}
    if cfg.ts_type:
        out["hoodie.keygen.timebased.timestamp.type"] = cfg.ts_type.upper()
    if cfg.ts_input_format:
        out["hoodie.keygen.timebased.input.dateformat"] = cfg.ts_input_format
    if cfg.ts_output_format:
        out["hoodie.keygen.timebased.output.dateformat"] = cfg.ts_output_format
    if cfg.ts_timezone:
        out["hoodie.keygen.timebased.timezone"] = cfg.ts_timezone
    return out


def create_table(storage: Storage, table: TableConfig) -> None:
    for d in (META_DIR, TEMP_DIR, f"{META_DIR}/.aux/.bootstrap/.partitions",
              f"{META_DIR}/.aux/.bootstrap/.fileids", f"{META_DIR}/.schema", f"{META_DIR}/archived"):  # fmt: skip
        storage.mkdirs(d)
    write_table_config(storage, table)


def reconcile(cfg: WriteConfig, table: TableConfig) -> WriteConfig:
    """Fill unset table-level options from the table; refuse contradictions."""

    def conflict(option: str, given, stored) -> HoodieConfigError:
        return HoodieConfigError(
            f"Option '{option}'='{given}' contradicts the table at {cfg.path}, whose hoodie.properties "
            f"says '{stored}'. Help: drop the option (the table's setting is used) or write to a new path."
        )

    ex = cfg.explicit
    if "record_key_fields" in ex and table.record_key_fields and cfg.record_key_fields != table.record_key_fields:
        raise conflict("hoodie.datasource.write.recordkey.field", ",".join(cfg.record_key_fields),
                       ",".join(table.record_key_fields))  # fmt: skip
    if "partition_fields" in ex and cfg.partition_fields != table.partition_fields:
        raise conflict("hoodie.datasource.write.partitionpath.field", ",".join(cfg.partition_fields),
                       ",".join(table.partition_fields))  # fmt: skip
    if "precombine_field" in ex and table.precombine_field and cfg.precombine_field != table.precombine_field:
        raise conflict("hoodie.datasource.write.precombine.field", cfg.precombine_field, table.precombine_field)
    if "table_type" in ex and _TABLE_TYPES[cfg.table_type] != table.table_type:
        raise conflict("hoodie.datasource.write.table.type", cfg.table_type.upper(), table.table_type)
    if "table_name" in ex and cfg.table_name != table.name:
        raise conflict("hoodie.table.name", cfg.table_name, table.name)
    if "hive_style" in ex and cfg.hive_style != table.hive_style:
        raise conflict("hoodie.datasource.write.hive_style_partitioning", cfg.hive_style, table.hive_style)
    if "url_encode" in ex and cfg.url_encode != table.url_encode:
        raise conflict("hoodie.datasource.write.partitionpath.urlencode", cfg.url_encode, table.url_encode)
    stored_keygen = _table_keygen(table)
    if ("keygen_type" in ex or "keygen_class" in ex) and cfg.resolved_keygen != stored_keygen:
        raise conflict("hoodie.datasource.write.keygenerator.type", cfg.resolved_keygen.upper(),
                       table.keygen_class or stored_keygen)  # fmt: skip
    if table.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise HoodieConfigError(f"The table at {cfg.path} has an unknown type '{table.table_type}'.")
    ts = {
        "ts_type": table.extra.get("hoodie.keygen.timebased.timestamp.type", "").lower() or None,
        "ts_input_format": table.extra.get("hoodie.keygen.timebased.input.dateformat"),
        "ts_output_format": table.extra.get("hoodie.keygen.timebased.output.dateformat"),
        "ts_timezone": table.extra.get("hoodie.keygen.timebased.timezone"),
    }
    return cfg.with_(
        table_name=table.name,
        table_type="merge_on_read" if table.table_type == MERGE_ON_READ else "copy_on_write",
        record_key_fields=table.record_key_fields or cfg.record_key_fields,
        partition_fields=table.partition_fields,
        precombine_field=table.precombine_field or cfg.precombine_field,
        hive_style=table.hive_style,
        url_encode=table.url_encode,
        keygen_type=stored_keygen,
        keygen_class=None,
        **{k: getattr(cfg, k) or v for k, v in ts.items()},
    )


def _table_keygen(table: TableConfig) -> str:
    if table.keygen_class:
        found = KEYGEN_BY_CLASS.get(table.keygen_class.lower())
        if found is None:
            raise HoodieConfigError(
                f"The table's key generator '{table.keygen_class}' is not supported; supported: "
                f"{', '.join(CLASS_BY_KEYGEN.values())}."
            )
        return found
    if not table.partition_fields:
        return "non_partition"
    return "complex" if len(table.record_key_fields) > 1 or len(table.partition_fields) > 1 else "simple"


def latest_schema(storage: Storage, timeline: Timeline, table: TableConfig | None = None) -> str | None:
    """The table's Avro schema JSON: latest completed commit carrying one, else the create schema."""
    store = TimelineStore(storage)
    for inst in reversed(timeline.completed()):
        md = CommitMetadata.from_json(store.read_json(inst))
        if md.schema:
            return md.schema
    if table is None:
        try:
            table = read_table_config(storage)
        except HoodieTableError:
            return None
    return table.create_schema
