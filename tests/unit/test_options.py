"""Issue 8, items 7, 8 and 10, through the engine API (no Spark): Hudi options that would change
results are implemented or refused; a folder holding other data is never turned into a table;
every option or schema refusal happens before an instant (or the table) is created."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieError, HoodieSchemaError, HoodieTableError
from hoodie_sink.table.format.properties import parse_properties, read_table_config, write_table_config
from hoodie_sink.table.format.schema import evolve_schema
from hoodie_sink.table.format.timeline.timeline import TimelineStore
from hoodie_sink.table.options.write_config import DEFAULT_PAYLOAD, OVERWRITE_WITH_LATEST_PAYLOAD, WriteConfig
from hoodie_sink.table.storage import Storage
from tests.support.tables import assert_table_matches, read_both

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
}
PRE = {**OPTS, "hoodie.datasource.write.precombine.field": "ts"}


def batch(ids, ts, fare=None, city="sf", **extra) -> pa.Table:
    cols = {
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([city] * len(ids)),
        "ts": pa.array(ts, pa.int64()),
        "fare": pa.array(fare if fare is not None else [float(i) for i in ids], pa.float64()),
    }
    cols.update(extra)
    return pa.table(cols)


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder below `folder`: equal snapshots = untouched."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


def props(path: Path) -> dict[str, str]:
    return parse_properties((path / ".hoodie" / "hoodie.properties").read_text())


# -- item 7: options ----------------------------------------------------------------------------

ACCEPTED = {
    "hoodie.upsert.shuffle.parallelism": "200",
    "hoodie.embed.timeline.server": "true",
    "hoodie.memory.merge.fraction": "0.6",
    "hoodie.metadata.enable": "false",
    "hoodie.metadata.compact.max.delta.commits": "10",  # tunes Java's metadata table services
    "hoodie.datasource.hive_sync.enable": "false",
    "hoodie.datasource.hive_sync.database": "db",  # configures a sync that is off
    "hoodie.combine.before.upsert": "true",
    "hoodie.combine.before.insert": "false",
    "hoodie.populate.meta.fields": "true",
    "hoodie.table.version": "6",
    "hoodie.timeline.layout.version": "1",
    "hoodie.write.concurrency.mode": "SINGLE_WRITER",
    "hoodie.datasource.write.reconcile.schema": "false",
    "hoodie.datasource.write.drop.partition.columns": "false",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.cleaner.commits.retained": "5",
    "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
    "hoodie.keep.max.commits": "40",
    "hoodie.clean.async": "false",
    "hoodie.cleaner.policy.failed.writes": "EAGER",
    "hoodie.cleaner.parallelism": "200",
    "hoodie.fail.on.timeline.archiving": "true",
    "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
}

REFUSED = {
    "hoodie.metadata.record.index.max.parallelism": "8",
    "hoodie.metadata.index.async": "true",
    "hoodie.metadata.index.column.stats.unknown": "1",
    "hoodie.datasource.hive_sync.mode": "jdbc",  # catalog sync speaks the metastore's Thrift API only
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider",
    "hoodie.combine.before.upsert": "false",
    "hoodie.combine.before.insert": "true",
    "hoodie.datasource.write.drop.partition.columns": "true",
    "hoodie.table.version": "8",
    "hoodie.timeline.layout.version": "2",
    "hoodie.clean.trigger.strategy": "NUM_AND_TIME",
    "hoodie.archive.beyond.savepoint": "true",
    "hoodie.cleaner.hoodie.unknown": "1",
    "hoodie.schema.on.read.enable": "true",
    "hoodie.payload.ordering.field": "ts",
    "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload",
    "hoodie.compaction.payload.class": "com.acme.MyPayload",
}


@pytest.mark.parametrize("key", sorted(ACCEPTED))
def test_options_matching_what_we_do_are_accepted(tmp_path, key):
    cfg = WriteConfig.from_options({**OPTS, key: ACCEPTED[key]}, path=str(tmp_path / "t"))
    assert cfg.record_key_fields == ("id",)


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_options_that_would_change_results_are_refused_by_name(tmp_path, key):
    with pytest.raises(HoodieConfigError) as e:
        WriteConfig.from_options({**OPTS, key: REFUSED[key]}, path=str(tmp_path / "t"))
    msg = str(e.value)
    assert key in msg and REFUSED[key] in msg and "not supported" in msg


def test_column_stats_options_are_parsed_once_with_hudi_defaults(tmp_path):
    cfg = WriteConfig.from_options(OPTS, path=str(tmp_path / "t"))
    assert (cfg.column_stats_enable, cfg.column_stats_columns, cfg.column_stats_file_groups) == (False, (), 2)
    cfg = WriteConfig.from_options(
        {
            **OPTS,
            "hoodie.metadata.index.column.stats.enable": "true",
            "hoodie.metadata.index.column.stats.column.list": "id, ts",
            "hoodie.metadata.index.column.stats.file.group.count": "3",
            "hoodie.metadata.index.column.stats.parallelism": "10",  # Java's Spark parallelism: no effect
        },
        path=str(tmp_path / "t"),
    )
    assert (cfg.column_stats_enable, cfg.column_stats_columns, cfg.column_stats_file_groups) == (
        True, ("id", "ts"), 3)  # fmt: skip
    assert cfg.log_column_stats == ("id", "ts")
    with pytest.raises(HoodieConfigError, match="needs the metadata table"):
        WriteConfig.from_options(
            {**OPTS, "hoodie.metadata.index.column.stats.enable": "true", "hoodie.metadata.enable": "false"},
            path=str(tmp_path / "t"),
        )


def test_cleaning_and_archival_settings_are_parsed_once_with_hudi_defaults(tmp_path):
    cfg = WriteConfig.from_options(OPTS, path=str(tmp_path / "t"))
    assert (cfg.clean_automatic, cfg.cleaner_policy, cfg.cleaner_commits_retained, cfg.clean_max_commits) == (
        True, "KEEP_LATEST_COMMITS", 10, 1)  # fmt: skip
    assert (cfg.archive_automatic, cfg.keep_min_commits, cfg.keep_max_commits, cfg.archival_batch) == (
        True,
        20,
        30,
        10,
    )
    cfg = WriteConfig.from_options({**OPTS, "hoodie.cleaner.policy": "keep_latest_by_hours",
                                    "hoodie.cleaner.hours.retained": "2"}, path=str(tmp_path / "t"))  # fmt: skip
    assert (cfg.cleaner_policy, cfg.cleaner_hours_retained) == ("KEEP_LATEST_BY_HOURS", 2)
    with pytest.raises(HoodieConfigError, match="'hoodie.keep.max.commits'=20 must be greater"):
        WriteConfig.from_options({**OPTS, "hoodie.keep.max.commits": "20"}, path=str(tmp_path / "t"))
    with pytest.raises(
        HoodieConfigError,
        match="'hoodie.keep.min.commits'=5 must be greater than "
        "'hoodie.cleaner.commits.retained'=10: archival would remove",
    ):
        WriteConfig.from_options({**OPTS, "hoodie.keep.min.commits": "5"}, path=str(tmp_path / "t"))
    with pytest.raises(
        HoodieConfigError, match="'hoodie.cleaner.policy' got 'KEEP_NOTHING'; accepted values"
    ):
        WriteConfig.from_options({**OPTS, "hoodie.cleaner.policy": "KEEP_NOTHING"}, path=str(tmp_path / "t"))
    with pytest.raises(HoodieConfigError, match="'hoodie.cleaner.commits.retained' must be at least 1"):
        WriteConfig.from_options({**OPTS, "hoodie.cleaner.commits.retained": "0"}, path=str(tmp_path / "t"))


def test_payload_default_is_event_time_and_is_written_to_hoodie_properties(tmp_path):
    """No payload named: a precombine field means event time (today's behaviour), declared as
    DefaultHoodieRecordPayload so Java writers and hudi-rs apply the same rule; without a
    precombine field the latest write wins, declared as OverwriteWithLatestAvroPayload."""
    path = tmp_path / "t"
    hoodie_sink.write(batch([1, 2], [10, 10], [1.0, 2.0]), str(path), PRE)
    assert props(path)["hoodie.compaction.payload.class"] == DEFAULT_PAYLOAD
    hoodie_sink.write(batch([1, 2], [5, 20], [9.0, 9.0]), str(path), PRE)  # id 1: older event, loses
    assert_table_matches(path, [{"id": 1, "city": "sf", "ts": 10, "fare": 1.0},
                                {"id": 2, "city": "sf", "ts": 20, "fare": 9.0}])  # fmt: skip
    other = tmp_path / "u"
    hoodie_sink.write(batch([1], [10]), str(other), OPTS)
    assert props(other)["hoodie.compaction.payload.class"] == OVERWRITE_WITH_LATEST_PAYLOAD


def test_overwrite_with_latest_payload_orders_by_commit_time(tmp_path):
    """OverwriteWithLatestAvroPayload: the precombine field picks one record within a batch, but
    against the stored record the incoming one always wins (Hudi 0.14/0.15 combineAndGetUpdateValue)."""
    path = tmp_path / "t"
    opts = {**PRE, "hoodie.datasource.write.payload.class": "OverwriteWithLatestAvroPayload"}
    hoodie_sink.write(batch([1, 2], [10, 10], [1.0, 2.0]), str(path), opts)
    assert props(path)["hoodie.compaction.payload.class"] == OVERWRITE_WITH_LATEST_PAYLOAD
    # id 1 arrives twice in one batch: ts 7 beats ts 3; then it replaces the stored ts 10 anyway
    later = batch([1, 1, 2], [7, 3, 30], [7.0, 3.0, 30.0])
    hoodie_sink.write(later, str(path), PRE)  # the table's payload class applies without the option
    assert_table_matches(path, [{"id": 1, "city": "sf", "ts": 7, "fare": 7.0},
                                {"id": 2, "city": "sf", "ts": 30, "fare": 30.0}])  # fmt: skip
    with pytest.raises(HoodieConfigError, match="payload.class.*contradicts"):
        hoodie_sink.write(
            later, str(path), {**PRE, "hoodie.datasource.write.payload.class": "DefaultHoodieRecordPayload"}
        )


def test_table_with_an_unsupported_payload_class_refuses_merges_but_takes_inserts(tmp_path):
    path = tmp_path / "t"
    hoodie_sink.write(batch([1], [10]), str(path), PRE)
    storage = Storage(str(path))
    table = read_table_config(storage)
    write_table_config(storage, table.with_updates(payload_class="com.acme.MyPayload"))
    before = snapshot(path)
    with pytest.raises(HoodieConfigError, match="com.acme.MyPayload"):
        hoodie_sink.write(batch([1], [11]), str(path), PRE)
    assert snapshot(path) == before
    hoodie_sink.write(batch([2], [1]), str(path), {**PRE, "hoodie.datasource.write.operation": "insert"})
    assert read_both(path)[0].num_rows == 2


@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert", "append", "insert_overwrite"])
def test_set_null_for_missing_columns(tmp_path, operation):
    path = tmp_path / "t"
    hoodie_sink.write(batch([1, 2], [10, 10], [1.0, 2.0]), str(path), PRE)
    lacking_fare = batch([2, 3], [20, 20]).drop_columns(["fare"])
    op = {"hoodie.datasource.write.operation": operation}
    before = snapshot(path)
    with pytest.raises(HoodieSchemaError, match="column 'fare' is missing from the input"):
        hoodie_sink.write(lacking_fare, str(path), {**PRE, **op})
    assert snapshot(path) == before  # refused before any instant
    hoodie_sink.write(
        lacking_fare, str(path), {**PRE, **op, "hoodie.write.set.null.for.missing.columns": "true"}
    )
    new = [{"id": 2, "city": "sf", "ts": 20, "fare": None}, {"id": 3, "city": "sf", "ts": 20, "fare": None}]
    old = {"upsert": [{"id": 1, "city": "sf", "ts": 10, "fare": 1.0}],
           "insert_overwrite": []}.get(operation, [{"id": 1, "city": "sf", "ts": 10, "fare": 1.0},
                                                   {"id": 2, "city": "sf", "ts": 10, "fare": 2.0}])  # fmt: skip
    assert_table_matches(path, old + new)


def test_set_null_for_missing_columns_refuses_a_not_null_column():
    table_avro = {"type": "record", "name": "t_record", "namespace": "hoodie.t", "fields": [
        {"name": "id", "type": "long"},
        {"name": "fare", "type": ["null", "double"], "default": None},
        {"name": "qty", "type": "int"},
    ]}  # fmt: skip
    data = pa.schema([pa.field("id", pa.int64())])
    with pytest.raises(HoodieSchemaError, match="'qty'") as e:
        evolve_schema(data, table_avro, fill_missing=True)
    assert "'fare'" not in str(e.value)
    ok = evolve_schema(data, {**table_avro, "fields": table_avro["fields"][:2]}, fill_missing=True)
    assert ok.names == ["id", "fare"] and ok.field("fare").type == pa.float64()


# -- item 8: a folder holding other data ---------------------------------------------------------


def _plain_parquet(folder: Path) -> None:
    (folder / "city=sf").mkdir(parents=True)
    pq.write_table(batch([1], [1]), folder / "city=sf" / "part-00000.parquet")
    (folder / "_SUCCESS").write_bytes(b"")


def _delta(folder: Path) -> None:
    (folder / "_delta_log").mkdir(parents=True)
    (folder / "_delta_log" / "00000000000000000000.json").write_text('{"protocol":{}}\n')
    pq.write_table(batch([1], [1]), folder / "part-00000-abc.snappy.parquet")


def _iceberg(folder: Path) -> None:
    (folder / "metadata").mkdir(parents=True)
    (folder / "data").mkdir()
    (folder / "metadata" / "v1.metadata.json").write_text(json.dumps({"format-version": 2}))
    pq.write_table(batch([1], [1]), folder / "data" / "00000-0-abc.parquet")


@pytest.mark.parametrize("make, found", [(_plain_parquet, "Parquet files"), (_delta, "Delta Lake"),
                                         (_iceberg, "Iceberg")])  # fmt: skip
def test_folder_with_other_data_is_refused_and_left_untouched(tmp_path, make, found):
    folder = tmp_path / "lake"
    make(folder)
    before = snapshot(folder)
    with pytest.raises(HoodieTableError, match=found) as e:
        hoodie_sink.write(batch([1], [1]), str(folder), PRE)
    assert str(folder) in str(e.value) and "not a Hudi table" in str(e.value)
    assert snapshot(folder) == before


def test_empty_folder_or_only_bookkeeping_files_is_fine(tmp_path):
    folder = tmp_path / "lake"
    folder.mkdir()
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".DS_Store").write_bytes(b"x")
    hoodie_sink.write(batch([1], [1]), str(folder), PRE)
    assert_table_matches(folder, [{"id": 1, "city": "sf", "ts": 1, "fare": 1.0}])


# -- item 10: refused before an instant starts ---------------------------------------------------

REFUSED_WRITES = {
    "simple keygen, two key fields": ({"hoodie.datasource.write.keygenerator.type": "SIMPLE",
                                       "hoodie.datasource.write.recordkey.field": "id,ts"}, "exactly one record key"),
    "timestamp keygen without timestamp.type": ({"hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
                                                 "hoodie.datasource.write.partitionpath.field": "ts",
                                                 "hoodie.keygen.timebased.output.dateformat": "yyyy"},
                                                "hoodie.keygen.timebased.timestamp.type"),
    "timestamp keygen without output.dateformat": ({"hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
                                                    "hoodie.datasource.write.partitionpath.field": "ts",
                                                    "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS"},
                                                   "hoodie.keygen.timebased.output.dateformat"),
    "timestamp keygen on a string column without DATE_STRING": (
        {"hoodie.datasource.write.keygenerator.type": "TIMESTAMP",
         "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
         "hoodie.keygen.timebased.output.dateformat": "yyyy"}, "string column"),
    "binary key field": ({"hoodie.datasource.write.recordkey.field": "blob"}, "blob"),
    "nested precombine field": ({"hoodie.datasource.write.precombine.field": "nested"}, "cannot be ordered"),
    "zero buckets": ({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "0"}, "num.buckets"),
    "bucket hash field outside the key": ({"hoodie.index.type": "BUCKET", "hoodie.bucket.index.hash.field": "fare"},
                                          "hash.field"),
    "clustering on a missing column": ({"hoodie.clustering.plan.strategy.sort.columns": "nope"}, "nope"),
    "bad clustering partition regex": ({"hoodie.clustering.plan.strategy.partition.regex.pattern": "("},
                                       "regular expression"),
}  # fmt: skip


LATER_WRITE_CASES = (
    "zero buckets",
    "bucket hash field outside the key",
    "clustering on a missing column",
    "bad clustering partition regex",
)


def _odd_batch() -> pa.Table:
    return batch([1], [1], blob=pa.array([b"x"]), nested=pa.array([{"a": 1}]))


@pytest.mark.parametrize("case", sorted(REFUSED_WRITES))
def test_refusals_happen_before_the_table_or_an_instant_exists(tmp_path, monkeypatch, case):
    options, message = REFUSED_WRITES[case]

    def no_instant(*args, **kwargs):
        raise AssertionError("an instant was started before the write was refused")

    # a refusal after the instant started is cleaned up by abort; only this tells them apart
    monkeypatch.setattr(TimelineStore, "create_requested", no_instant)
    new = tmp_path / "new"
    with pytest.raises(HoodieError, match=message):
        hoodie_sink.write(_odd_batch(), str(new), {**PRE, **options})
    assert not new.exists()  # not even .hoodie/
    if case in LATER_WRITE_CASES:  # write options, not table-level: also checked on a later write
        existing = tmp_path / "existing"
        monkeypatch.undo()
        hoodie_sink.write(_odd_batch(), str(existing), PRE)
        monkeypatch.setattr(TimelineStore, "create_requested", no_instant)
        before = snapshot(existing)
        with pytest.raises(HoodieError, match=message):
            hoodie_sink.write(_odd_batch(), str(existing), {**PRE, **options})
        assert snapshot(existing) == before  # no timeline file, no data file


def test_metadata_table_service_settings_we_do_not_take_are_refused(tmp_path):
    with pytest.raises(HoodieConfigError, match="hoodie.metadata.cleaner.commits.retained"):
        WriteConfig.from_options({"hoodie.metadata.cleaner.commits.retained": "5"}, path=str(tmp_path))
    with pytest.raises(HoodieConfigError, match="hoodie.metadata.keep.max.commits"):
        WriteConfig.from_options({"hoodie.metadata.keep.max.commits": "40"}, path=str(tmp_path))
    for harmless in ("hoodie.metadata.insert.parallelism", "hoodie.metadata.max.reader.memory",
                     "hoodie.metadata.index.column.stats.file.group.count"):  # fmt: skip
        WriteConfig.from_options({harmless: "2"}, path=str(tmp_path))
    cfg = WriteConfig.from_options({"hoodie.metadata.compact.max.delta.commits": "4"}, path=str(tmp_path))
    assert cfg.metadata_compact_max_delta_commits == 4
