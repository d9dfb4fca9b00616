"""Options are parsed once, into one spelling, and each fact about them lives in one place."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_sink.table.format.keygen import (
    KEYGEN_CLASSES,
    SUPPORTED_KEYGEN_TYPES,
    keygen_type_from_class,
    supported_keygen_type,
)
from hoodie_sink.table.format.properties import COPY_ON_WRITE, MERGE_ON_READ, read_table_config
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.base_file_writer import ParquetSettings, parquet_settings_of
from hoodie_sink.table.write.table_setup import new_table_config, resolve_with_table

PACKAGE = Path(__file__).resolve().parents[2] / "hoodie_sink"


@pytest.mark.parametrize("kind", SUPPORTED_KEYGEN_TYPES)
def test_keygen_class_and_type_round_trip(tmp_path, kind):
    cls = KEYGEN_CLASSES[kind]
    assert keygen_type_from_class(cls) == kind
    avro_variant = cls.replace("KeyGenerator", "AvroKeyGenerator")
    assert keygen_type_from_class(avro_variant) == kind
    opts = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
    }
    by_class = WriteConfig.from_options({**opts, "hoodie.datasource.write.keygenerator.class": cls}, path="x")
    by_type = WriteConfig.from_options(
        {**opts, "hoodie.datasource.write.keygenerator.type": kind.lower()}, path="x"
    )
    assert by_class.resolved_keygen == by_type.resolved_keygen == kind
    assert new_table_config(by_type).keygen_class == cls


def test_unsupported_keygen_classes_are_refused_by_name():
    with pytest.raises(Exception, match="CustomKeyGenerator' is not supported"):
        supported_keygen_type(KEYGEN_CLASSES["CUSTOM"], "Option 'x'")


def test_the_keygen_class_names_live_in_one_module():
    holders = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
               if "org.apache.hudi.keygen.SimpleKeyGenerator" in p.read_text()]  # fmt: skip
    assert holders == ["table/format/keygen.py"]


@pytest.mark.parametrize(
    ("key", "value", "attr", "canonical"),
    [
        ("hoodie.datasource.write.table.type", "cow", "table_type", COPY_ON_WRITE),
        ("hoodie.datasource.write.table.type", "COPY_ON_WRITE", "table_type", COPY_ON_WRITE),
        ("hoodie.datasource.write.table.type", "mor", "table_type", MERGE_ON_READ),
        ("hoodie.datasource.write.keygenerator.type", "nonpartitioned", "keygen_type", "NON_PARTITION"),
        ("hoodie.datasource.write.keygenerator.type", "Complex", "keygen_type", "COMPLEX"),
        ("hoodie.keygen.timebased.timestamp.type", "epochmilliseconds", "ts_type", "EPOCHMILLISECONDS"),
    ],
)
def test_options_take_one_spelling_at_parse_time(key, value, attr, canonical):
    opts = {key: value, "hoodie.datasource.write.operation": "insert"}
    assert getattr(WriteConfig.from_options(opts, path="x"), attr) == canonical


def test_parquet_defaults_live_in_the_option_registry_only():
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(ParquetSettings))
    cfg = WriteConfig(path="x")
    settings = parquet_settings_of(cfg)
    assert {f.name: getattr(settings, f.name) for f in dataclasses.fields(ParquetSettings)} == {
        f.name: getattr(cfg, f.name) for f in dataclasses.fields(ParquetSettings)
    }


def test_a_write_resolved_against_the_table_equals_one_that_names_the_table_settings(tmp_path):
    import hoodie_sink

    path = str(tmp_path / "t")
    full = {
        "hoodie.table.name": "trips",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "day",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.keygenerator.type": "timestamp",
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
    }
    rows = pa.table({"id": [1, 2], "day": [0, 86_400_000], "ts": [1, 1]})
    hoodie_sink.write(rows, path, full)
    table = read_table_config(Storage(path))
    from_table = resolve_with_table(
        WriteConfig.from_options({"hoodie.datasource.write.operation": "upsert"}, path=path), table
    )
    named = resolve_with_table(
        WriteConfig.from_options({**full, "hoodie.datasource.write.operation": "upsert"}, path=path), table
    )
    settings = (
        "table_name",
        "table_type",
        "record_key_fields",
        "partition_fields",
        "precombine_field",
        "hive_style",
        "url_encode",
        "resolved_keygen",
        "ts_type",
        "ts_output_format",
        "payload_class",
    )
    assert {s: getattr(from_table, s) for s in settings} == {s: getattr(named, s) for s in settings}
    assert from_table.resolved_keygen == "TIMESTAMP" and from_table.ts_type == "EPOCHMILLISECONDS"


@pytest.mark.parametrize(
    ("options", "overwrite", "operation"),
    [
        ({}, False, "upsert"),
        ({}, True, "insert_overwrite_table"),
        ({"hoodie.datasource.write.operation": "insert"}, True, "insert_overwrite_table"),
        ({"hoodie.datasource.write.operation": "insert_overwrite"}, True, "insert_overwrite"),
        (
            {"hoodie.datasource.write.operation": "insert", "hoodie.datasource.write.append.mode": "true"},
            False,
            "append",
        ),
    ],
)
def test_the_operation_is_decided_once_at_parse_time(options, overwrite, operation):
    import inspect

    from hoodie_sink.table.write import coordinator, streaming

    assert WriteConfig.from_options(options, path="x", overwrite=overwrite).operation == operation
    # nothing after the boundary re-decides it
    assert "overwrite" not in inspect.signature(coordinator.begin).parameters
    assert "overwrite" not in inspect.signature(streaming.begin_batch).parameters


def test_a_streaming_insert_defaults_to_append_mode_and_a_batch_insert_does_not():
    insert = {"hoodie.datasource.write.operation": "insert"}
    assert WriteConfig.from_options(insert, path="x", streaming=True).operation == "append"
    assert WriteConfig.from_options(insert, path="x").operation == "insert"
    no_append = {**insert, "hoodie.datasource.write.append.mode": "false"}
    assert WriteConfig.from_options(no_append, path="x", streaming=True).operation == "insert"
    assert WriteConfig.from_options({}, path="x", streaming=True).operation == "upsert"
