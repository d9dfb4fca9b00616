"""Pure pieces of the format model: instants, properties, file names, commit metadata."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.file_group import BaseFile, LogFile, base_file_name, log_file_name
from hoodie_sink.table.format.properties import (
    TableConfig,
    parse_properties,
    render_properties,
    table_checksum,
)
from hoodie_sink.table.format.timeline.instant import (
    COMMIT,
    COMPLETED,
    DELTA_COMMIT,
    INFLIGHT,
    REPLACE_COMMIT,
    REQUESTED,
    Instant,
    format_instant,
    next_instant_time,
    parse_instant,
)
from tests.support.tables import COW_FIXTURES, unzip_fixture


@pytest.mark.parametrize(
    "name,expected",
    [
        ("20240418173235694.commit", Instant("20240418173235694", COMMIT, COMPLETED)),
        ("20240418173235694.inflight", Instant("20240418173235694", COMMIT, INFLIGHT)),
        ("20240418173235694.commit.requested", Instant("20240418173235694", COMMIT, REQUESTED)),
        ("20250331030645735.deltacommit.inflight", Instant("20250331030645735", DELTA_COMMIT, INFLIGHT)),
        ("20250331030645735.replacecommit", Instant("20250331030645735", REPLACE_COMMIT, COMPLETED)),
        ("hoodie.properties", None),
        ("20250331030645735.unknownaction", None),
    ],
)
def test_instant_file_names_round_trip(name, expected):
    inst = Instant.parse(name)
    assert inst == expected
    if inst is not None:
        assert inst.file_name == name


def test_instant_times_are_utc_millis_and_monotonic():
    moment = datetime(2024, 4, 18, 17, 32, 35, 694000, tzinfo=timezone.utc)
    assert format_instant(moment) == "20240418173235694"
    assert parse_instant("20240418173235694") == moment
    # A clock behind the timeline still yields a later instant.
    assert next_instant_time("20990101000000999", now=moment) == "20990101000001000"
    assert next_instant_time(None, now=moment) == "20240418173235694"


def test_file_names_round_trip():
    name = base_file_name("abc-0", "0-1-2", "20240101000000000")
    assert name == "abc-0_0-1-2_20240101000000000.parquet"
    bf = BaseFile.parse("p=1", name)
    assert (bf.file_id, bf.write_token, bf.instant, bf.path) == (
        "abc-0",
        "0-1-2",
        "20240101000000000",
        f"p=1/{name}",
    )
    log = log_file_name("abc-0", "20240101000000000", 3, "1-0-1")
    lf = LogFile.parse("", log)
    assert (lf.file_id, lf.base_instant, lf.version, lf.write_token) == (
        "abc-0",
        "20240101000000000",
        3,
        "1-0-1",
    )
    assert BaseFile.parse("", "garbage.parquet") is None


@pytest.mark.parametrize("fixture", COW_FIXTURES)
def test_properties_of_real_tables_parse_and_checksum(tmp_path, fixture):
    table = unzip_fixture(fixture, tmp_path)
    props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text())
    cfg = TableConfig.from_properties(props)
    assert int(props["hoodie.table.checksum"]) == table_checksum(cfg.database, cfg.name)
    again = TableConfig.from_properties(parse_properties(render_properties(cfg.to_properties())))
    assert again == cfg
    if cfg.create_schema:
        json.loads(cfg.create_schema)  # un-escaped back to valid JSON


@pytest.mark.parametrize("fixture", COW_FIXTURES)
def test_commit_metadata_of_real_tables_round_trips(tmp_path, fixture):
    table = unzip_fixture(fixture, tmp_path)
    for f in sorted((table / ".hoodie").glob("*.commit")):
        raw = json.loads(f.read_text())
        md = CommitMetadata.from_json(raw)
        again = md.to_json()
        assert again["operationType"] == raw["operationType"]
        assert again["extraMetadata"] == raw["extraMetadata"]
        for part, stats in raw["partitionToWriteStats"].items():
            ours = {s["fileId"]: s for s in again["partitionToWriteStats"][part]}
            for s in stats:
                for key in (
                    "path",
                    "prevCommit",
                    "numWrites",
                    "numInserts",
                    "numUpdateWrites",
                    "fileSizeInBytes",
                ):
                    assert ours[s["fileId"]][key] == s[key]
