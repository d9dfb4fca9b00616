"""Opening and creating a table, and resolving a write's options against the table's settings.

Table-level settings live in hoodie.properties.  A write may leave them unset (they are then
taken from the table) but may not contradict them: another record key, say, would silently
break every key-based operation later.
"""

from __future__ import annotations

import pyarrow.fs as pafs

from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.keygen import KEYGEN_CLASSES, inferred_keygen_type, supported_keygen_type
from hoodie_sink.table.format.markers import TEMP_DIR
from hoodie_sink.table.format.properties import (
    BUCKET_INDEX,
    COMMIT_TIME_STRATEGY,
    COPY_ON_WRITE,
    EVENT_TIME_STRATEGY,
    K_BUCKET_HASH_FIELD,
    K_INDEX_TYPE,
    K_NUM_BUCKETS,
    MERGE_ON_READ,
    MERGER_STRATEGY_KEY,
    PROPERTIES_FILE,
    TableConfig,
    write_table_config,
)
from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.format.write_operation import WriteOperation
from hoodie_sink.table.index.registry import BUCKET, index_of
from hoodie_sink.table.options.write_config import (
    DEFAULT_PAYLOAD,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    SUPPORTED_PAYLOADS,
    WriteConfig,
)
from hoodie_sink.table.storage import Storage

_EVENT_TIME_STRATEGY = EVENT_TIME_STRATEGY
_COMMIT_TIME_STRATEGY = COMMIT_TIME_STRATEGY
K_MERGER_STRATEGY = MERGER_STRATEGY_KEY


K_CDC_ENABLED = "hoodie.table.cdc.enabled"


def table_exists(storage: Storage) -> bool:
    return storage.exists(PROPERTIES_FILE)


def check_not_foreign(storage: Storage) -> None:
    """Refuse to create a Hudi table in a folder that already holds other data (plain Parquet,
    a Delta or Iceberg table, ...): `.hoodie/` beside those files would leave the folder readable
    neither as what it was nor as a Hudi table.  A missing or empty folder is fine, and so are
    hidden and bookkeeping entries ('.'/'_' names such as `_SUCCESS` or a `.hoodie/` that a
    crashed create left without hoodie.properties), except Delta's `_delta_log/`."""
    info = storage.fs.get_file_info(storage.root)
    if info.type == pafs.FileType.NotFound:
        return
    if info.type != pafs.FileType.Directory:
        raise HoodieTableError(
            f"The table path {storage.base_uri} is a file, not a folder. Nothing was written. "
            "Help: write to a new folder."
        )
    found = sorted(
        (e.base_name + ("/" if e.type == pafs.FileType.Directory else "") for e in storage.list_dir("")
         if e.base_name == "_delta_log" or not e.base_name.startswith((".", "_"))),
    )  # fmt: skip
    if not found:
        return
    names = {f.rstrip("/") for f in found}
    if "_delta_log" in names:
        kind = "a Delta Lake table (_delta_log/)"
    elif "metadata" in names and any(n.endswith(".metadata.json") for n in storage.list_names("metadata")):
        kind = "an Apache Iceberg table (metadata/*.metadata.json)"
    elif any(f.endswith(".parquet") for f in found) or any(
        n.endswith(".parquet")
        for d in found[:5]
        if d.endswith("/")
        for n in storage.list_names(d.rstrip("/"))
    ):  # Parquet files, or partition folders of them (looked into a few, not the whole tree)
        kind = "Parquet files"
    else:
        kind = "other files or folders"
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise HoodieTableError(
        f"The folder {storage.base_uri} is not a Hudi table (no {PROPERTIES_FILE}) but holds {kind}: "
        f"{shown}. Writing a Hudi table there would leave the folder unreadable; nothing was written. "
        "Help: write to an empty or new folder, or to an existing Hudi table."
    )


def default_payload(precombine_field: str | None) -> str:
    """The payload class of a new table when the write names none: what our merge has always
    done and what readers infer from a precombine field (docs/hudi/format.md#file-slices-and-merge-mode):
    with one, the higher ordering value wins, also against the stored record (event time); without
    one, the latest write wins (commit time)."""
    return DEFAULT_PAYLOAD if precombine_field else OVERWRITE_WITH_LATEST_PAYLOAD


def _table_payload(table: TableConfig) -> str | None:
    """The payload class that decides the table's merge semantics, inferred as readers do
    (docs/hudi/format.md#file-slices-and-merge-mode): the payload class, else the merge strategy
    id; None if neither says."""
    if table.payload_class:
        return table.payload_class
    strategy = table.extra.get(K_MERGER_STRATEGY)
    if strategy == _EVENT_TIME_STRATEGY:
        return DEFAULT_PAYLOAD
    if strategy == _COMMIT_TIME_STRATEGY:
        return OVERWRITE_WITH_LATEST_PAYLOAD
    return None


def new_table_config(cfg: WriteConfig) -> TableConfig:
    if cfg.table_type == MERGE_ON_READ:
        check_merge_on_read(cfg)
    keygen = cfg.resolved_keygen
    return TableConfig(
        name=cfg.table_name or cfg.default_table_name(),
        table_type=cfg.table_type,
        record_key_fields=cfg.record_key_fields,
        partition_fields=cfg.partition_fields if keygen != "NON_PARTITION" else (),
        precombine_field=cfg.precombine_field,
        keygen_class=KEYGEN_CLASSES[keygen],
        hive_style=cfg.hive_style,
        url_encode=cfg.url_encode,
        database=cfg.database or "default",
        # written so that Java writers and hudi-rs infer the merge semantics this write applies
        payload_class=cfg.payload_class or default_payload(cfg.precombine_field),
        populate_meta_fields=check_virtual_keys(cfg, keygen),
        extra=_timestamp_keygen_props(cfg) if keygen == "TIMESTAMP" else {},
        **bucket_layout_of(cfg),
    )


def bucket_layout_of(cfg: WriteConfig) -> dict:
    """The bucket layout a BUCKET write records in hoodie.properties (docs/hudi/bucket-layout.md):
    the index type, the bucket count and the hash fields, resolved as Java resolves them (no hash
    field: the record key fields; HoodieIndexConfig.validateBucketIndexConfig).  Nothing for the
    other indexes: they find keys wherever they are, so any later index may follow them."""
    if not index_of(cfg.index_type).bucketed:
        return {}
    return {
        "index_type": BUCKET_INDEX,
        "num_buckets": cfg.num_buckets,
        "bucket_hash_fields": cfg.bucket_hash_fields or cfg.record_key_fields,
    }


def _timestamp_keygen_props(cfg: WriteConfig) -> dict[str, str]:
    out = {}
    if cfg.ts_type:
        out["hoodie.keygen.timebased.timestamp.type"] = cfg.ts_type
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


def resolve_with_table(cfg: WriteConfig, table: TableConfig) -> WriteConfig:
    """The write's settings combined with the table's, once, at begin: table-level options the
    write left unset come from hoodie.properties; a write that contradicts them is refused."""
    if table.table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise HoodieConfigError(f"The table at {cfg.path} has an unknown type '{table.table_type}'.")
    keygen = _table_keygen(table)
    _refuse_contradictions(cfg, table, keygen)
    _refuse_cdc_logging(cfg, table)
    ts = {
        "ts_type": table.extra.get("hoodie.keygen.timebased.timestamp.type", "").upper() or None,
        "ts_input_format": table.extra.get("hoodie.keygen.timebased.input.dateformat"),
        "ts_output_format": table.extra.get("hoodie.keygen.timebased.output.dateformat"),
        "ts_timezone": table.extra.get("hoodie.keygen.timebased.timezone"),
    }
    resolved = cfg.with_(
        table_name=table.name,
        table_type=table.table_type,
        record_key_fields=table.record_key_fields or cfg.record_key_fields,
        partition_fields=table.partition_fields,
        precombine_field=table.precombine_field or cfg.precombine_field,
        hive_style=table.hive_style,
        url_encode=table.url_encode,
        keygen_type=keygen,
        keygen_class=None,
        payload_class=_merge_payload(cfg, table),
        populate_meta_fields=table.populate_meta_fields,
        **{k: getattr(cfg, k) or v for k, v in ts.items()},
    )
    resolved = resolved.with_(**_index_from_table(resolved, table))
    check_virtual_keys(resolved, keygen)
    resolved.check_bucket_operation(table_says="index_type" not in cfg.explicit)
    return resolved


def _index_from_table(cfg: WriteConfig, table: TableConfig) -> dict:
    """The write's index settings against the layout hoodie.properties records: unset ones come
    from the table, contradicting ones are refused.  A BUCKET table's keys are found only by
    hashing them as its file groups were hashed, so a write with another index type, bucket count
    or hash fields would insert stored keys again (docs/hudi/bucket-layout.md).  Hash fields are
    compared as sets: Hudi takes their values in record-key order whatever order they are named in."""
    ex = cfg.explicit
    if table.index_type is None:
        return {}  # not recorded: the begin of the write checks a BUCKET write against the file groups
    bucketed = index_of(cfg.index_type).bucketed
    if not table.bucket_layout:
        if bucketed:
            _contradiction(cfg, K_INDEX_TYPE, BUCKET_INDEX, table.index_type)
        return {}
    if "index_type" in ex and not bucketed:
        _contradiction(cfg, K_INDEX_TYPE, cfg.index_type.upper(), BUCKET_INDEX)
    hash_fields = table.bucket_hash_fields or cfg.record_key_fields
    given_fields = cfg.bucket_hash_fields or cfg.record_key_fields
    if "bucket_hash_fields" in ex and set(given_fields) != set(hash_fields):
        _contradiction(cfg, K_BUCKET_HASH_FIELD, ",".join(given_fields), ",".join(hash_fields))
    if "num_buckets" in ex and table.num_buckets is not None and cfg.num_buckets != table.num_buckets:
        _contradiction(cfg, K_NUM_BUCKETS, str(cfg.num_buckets), str(table.num_buckets))
    return {
        "index_type": BUCKET,
        "num_buckets": table.num_buckets if table.num_buckets is not None else cfg.num_buckets,
        "bucket_hash_fields": hash_fields,
    }


def _contradiction(cfg: WriteConfig, option: str, given: str, stored: str) -> None:
    raise HoodieConfigError(
        f"Option '{option}'='{given}' contradicts the table at {cfg.path}, whose hoodie.properties says "
        f"'{stored}': its keys lie in the file groups of that bucket layout, and a write with another one would "
        "insert stored keys again, or put new keys where the table's bucket index never finds them. Help: drop "
        "the option (the table's setting is used) or write to a new path."
    )


def _refuse_cdc_logging(cfg: WriteConfig, table: TableConfig) -> None:
    """A table with `hoodie.table.cdc.enabled=true` promises Hudi's CDC readers a CDC log file for
    every write that changes records; we write none, so their change feed would silently miss
    ours (our own change feed infers changes from file slices and needs no CDC logs)."""
    if table.extra.get(K_CDC_ENABLED, "false").strip().lower() == "true":
        raise HoodieTableError(
            f"The table at {cfg.path} has {K_CDC_ENABLED}=true: Apache Hudi's CDC queries read a CDC log file "
            "of every write, which hoodie_sink does not write, so they would miss this write's changes. Help: "
            "write it with Apache Hudi, or set hoodie.table.cdc.enabled=false in .hoodie/hoodie.properties if "
            "no Hudi CDC reader uses it (hoodie_sink's change feed, incremental.format=cdc, needs no CDC logs)."
        )


def _refuse_contradictions(cfg: WriteConfig, table: TableConfig, keygen: str) -> None:
    ex = cfg.explicit
    names_keygen = bool({"keygen_type", "keygen_class"} & ex)
    # (the write names it, its option, the write's value, the table's value)
    w = "hoodie.datasource.write."
    checks = [
        ("record_key_fields" in ex and bool(table.record_key_fields), w + "recordkey.field",
         cfg.record_key_fields, table.record_key_fields),
        ("partition_fields" in ex, w + "partitionpath.field", cfg.partition_fields, table.partition_fields),
        ("precombine_field" in ex and bool(table.precombine_field), w + "precombine.field",
         cfg.precombine_field, table.precombine_field),
        ("table_type" in ex, w + "table.type", cfg.table_type, table.table_type),
        ("table_name" in ex, "hoodie.table.name", cfg.table_name, table.name),
        ("hive_style" in ex, w + "hive_style_partitioning", cfg.hive_style, table.hive_style),
        ("url_encode" in ex, w + "partitionpath.urlencode", cfg.url_encode, table.url_encode),
        ("populate_meta_fields" in ex, "hoodie.populate.meta.fields", cfg.populate_meta_fields,
         table.populate_meta_fields),
        (names_keygen, w + "keygenerator.type", cfg.resolved_keygen if names_keygen else keygen, keygen),
    ]  # fmt: skip
    for named, option, given, stored in checks:
        if named and given != stored:
            shown = table.keygen_class or keygen if option.endswith("keygenerator.type") else _text(stored)
            raise HoodieConfigError(
                f"Option '{option}'='{_text(given)}' contradicts the table at {cfg.path}, whose "
                f"hoodie.properties says '{shown}'. Help: drop the option (the table's setting is used) "
                "or write to a new path."
            )


def _text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()  # as hoodie.properties spells it
    return ",".join(value) if isinstance(value, tuple) else str(value)


# Key generators whose keys can be computed again from the stored data columns: Java's
# validateAgainstTableProperties (BaseHoodieWriteClient, 0.15) allows virtual keys with these only.
VIRTUAL_KEY_GENERATORS = ("SIMPLE", "COMPLEX", "NON_PARTITION")


def check_virtual_keys(cfg: WriteConfig, keygen: str) -> bool:
    """`cfg.populate_meta_fields`, once the write is known to work without stored keys
    (hoodie.populate.meta.fields=false, Hudi's virtual keys): refused with a key generator
    Java refuses, and for generated keys, which no column holds."""
    if cfg.populate_meta_fields:
        return True
    if keygen not in VIRTUAL_KEY_GENERATORS:
        raise HoodieConfigError(
            f"Option 'hoodie.populate.meta.fields'=false (virtual keys) needs a key generator that "
            f"recomputes keys from the record key fields: {', '.join(VIRTUAL_KEY_GENERATORS)} (as in "
            f"Apache Hudi), not {keygen}. Help: use hoodie.populate.meta.fields=true with {keygen}."
        )
    if not cfg.record_key_fields:
        raise HoodieConfigError(
            "Option 'hoodie.populate.meta.fields'=false (virtual keys) needs "
            "'hoodie.datasource.write.recordkey.field': generated keys (append without a record key) "
            "are stored only in _hoodie_record_key. Help: name the key column(s)."
        )
    return False


def check_merge_on_read(cfg: WriteConfig, payload: str | None = None) -> None:
    """Settings a new merge-on-read table cannot have."""
    if not cfg.populate_meta_fields:
        raise HoodieConfigError(
            "Option 'hoodie.populate.meta.fields'=false (virtual keys) is not supported for MERGE_ON_READ "
            "tables by hoodie_sink. Help: keep the meta fields, or use COPY_ON_WRITE."
        )
    payload = payload or cfg.payload_class
    if cfg.precombine_field and payload == OVERWRITE_WITH_LATEST_PAYLOAD:
        raise HoodieConfigError(
            f"Option 'hoodie.datasource.write.payload.class'='{payload}' with a precombine field "
            f"('{cfg.precombine_field}') on a new MERGE_ON_READ table: Java readers order its log records by "
            "the precombine value while hudi-rs orders them by commit time, so the two would disagree. "
            "Help: use DefaultHoodieRecordPayload (the default with a precombine field), or no precombine field."
        )


def check_partial_update(cfg: WriteConfig) -> None:
    """Settings a partial update (PartialUpdateAvroPayload) cannot have: a global index that moves a
    key to its record's new partition (Java merges the record with the stored one before moving
    it; not implemented here, docs/hudi/partial-update.md)."""
    payload = cfg.payload_class
    if payload != PARTIAL_UPDATE_PAYLOAD or not WriteOperation.of(cfg.operation).keyed:
        return
    if index_of(cfg.index_type).moves_partitions(cfg.index_update_partition_path):
        raise HoodieConfigError(
            f"Option 'hoodie.datasource.write.payload.class'='{payload}' with hoodie.index.type="
            f"{cfg.index_type.upper()} moving keys between partitions (hoodie.bloom.index.update.partition.path / "
            f"hoodie.record.index.update.partition.path = true) is not supported by hoodie_sink for the table at "
            f"{cfg.path}. Help: set the update.partition.path option to false, or use a partition-scoped index "
            "(BLOOM, BUCKET)."
        )


def _merge_payload(cfg: WriteConfig, table: TableConfig) -> str:
    """The payload class that decides how this write merges with stored records."""
    payload = _table_payload(table)
    if "payload_class" in cfg.explicit and payload and cfg.payload_class != payload:
        raise HoodieConfigError(
            f"Option 'hoodie.datasource.write.payload.class'='{cfg.payload_class}' contradicts the table at "
            f"{cfg.path}, whose hoodie.properties says '{payload}'. Help: drop the option (the table's "
            "setting is used) or write to a new path."
        )
    # A table that names no merge semantics, unless the write names a payload class: a
    # copy-on-write table is merged by its writers, and Apache Hudi 0.14/0.15's Spark writers, which
    # create such tables (hoodie.properties without a payload class), merge with their default
    # OverwriteWithLatestAvroPayload: the incoming record replaces the stored one, and so does
    # ours, or a late record would win in a Java write and lose in ours on the same table.  A
    # merge-on-read table is merged by its readers, which infer it from the precombine field.
    unnamed = (
        OVERWRITE_WITH_LATEST_PAYLOAD
        if table.table_type == COPY_ON_WRITE
        else default_payload(table.precombine_field or cfg.precombine_field)
    )
    payload = payload or cfg.payload_class or unnamed
    if payload not in SUPPORTED_PAYLOADS and WriteOperation.of(cfg.operation).keyed:
        raise HoodieConfigError(
            f"The table at {cfg.path} merges records with payload class '{payload}' (hoodie.properties), "
            f"which hoodie_sink does not implement; operation '{cfg.operation}' merges with stored records "
            f"and is refused. Supported payload classes: {', '.join(SUPPORTED_PAYLOADS)}. Help: insert, "
            "bulk_insert and append do not merge and are allowed."
        )
    return payload


def _table_keygen(table: TableConfig) -> str:
    if table.keygen_class:
        return supported_keygen_type(
            table.keygen_class, "The table's key generator (hoodie.table.keygenerator.class)"
        )
    return inferred_keygen_type(table.record_key_fields, table.partition_fields)
