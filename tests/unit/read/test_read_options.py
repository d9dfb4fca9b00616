"""Read options that change the answer are acted on or refused, never accepted and ignored
(hoodie_sink/table/options/read_config.py, docs/hudi/read-options.md); time travel before the first commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.options.read_config import ReadConfig
from hoodie_sink.table.storage import Storage
from tests.support.tables import hudi_rs_read

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
}
MOR = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
SKIP = {"hoodie.datasource.merge.type": "skip_merge"}


def pairs(t: pa.Table) -> list[tuple[int, float]]:
    return sorted(zip(t["id"].to_pylist(), t["v"].to_pylist(), strict=True))


def _mor_with_logs(path: str) -> list[tuple[int, float]]:
    """A merge-on-read file group whose latest slice has a base file and two log blocks (a delete of
    key 2, an update of key 1).  Returns what the logs hold after the base file: key 1 at 7.0."""
    hoodie_sink.write(
        pa.table({"id": [1, 2], "city": ["sf", "sf"], "v": [1.0, 2.0], "ts": [1, 1]}), path, MOR
    )
    hoodie_sink.write(
        pa.table({"id": [1, 3], "city": ["sf", "sf"], "v": [5.0, 3.0], "ts": [2, 2]}), path, MOR
    )
    delete = {**MOR, "hoodie.datasource.write.operation": "delete"}
    hoodie_sink.write(pa.table({"id": [2], "city": ["sf"], "v": [0.0], "ts": [3]}), path, delete)
    hoodie_sink.write(pa.table({"id": [1], "city": ["sf"], "v": [7.0], "ts": [4]}), path, MOR)
    assert len(list(Path(path, "sf").glob(".*.log.*"))) == 2, "the last two writes went to log files"
    return [(1, 7.0)]


def _latest_base_rows(path: str) -> list[tuple[int, float]]:
    """The rows of the file group's latest base file, read with pyarrow (the model's base rows)."""
    newest = max(Path(path, "sf").glob("*.parquet"), key=lambda p: p.stem.rsplit("_", 1)[-1])
    return pairs(pq.read_table(newest, columns=["id", "v"]))


def test_skip_merge_returns_base_rows_and_log_records_unmerged(tmp_path):
    """Hudi's merge.type=skip_merge: each slice's base rows, then its log records merged among
    themselves with deletes dropped (Iterators.scala SkipMergeIterator); a key updated in the logs
    is returned twice, a key deleted in the logs keeps its base row."""
    path = str(tmp_path / "t")
    log_records = _mor_with_logs(path)
    base_rows = _latest_base_rows(path)
    assert base_rows == [(1, 5.0), (2, 2.0), (3, 3.0)]
    want = sorted(base_rows + log_records)
    assert pairs(hoodie_sink.read(path, SKIP, columns=["id", "v"])) == want
    assert pairs(hoodie_sink.read(path, {**SKIP, "hoodie.datasource.merge.type": "SKIP_MERGE"})) == want
    # the default merges them, as hudi-rs does
    merged = [(1, 7.0), (3, 3.0)]
    assert pairs(hoodie_sink.read(path, {"hoodie.datasource.merge.type": "payload_combine"})) == merged
    assert pairs(hudi_rs_read(path)) == merged
    # read-optimized: base files only, whatever the merge type
    ro = {**SKIP, "hoodie.datasource.query.type": "read_optimized"}
    assert pairs(hoodie_sink.read(path, ro)) == base_rows
    # time travel to the upsert's instant: the base file alone (the log blocks are later)
    t2 = Timeline.load(Storage(path)).completed()[1].timestamp
    assert pairs(hoodie_sink.read(path, {**SKIP, "as.of.instant": t2})) == base_rows


def test_skip_merge_on_a_copy_on_write_table_is_the_snapshot(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(
        pa.table({"id": [1, 2], "city": ["sf", "la"], "v": [1.0, 2.0], "ts": [1, 1]}), path, OPTS
    )
    hoodie_sink.write(pa.table({"id": [1], "city": ["sf"], "v": [5.0], "ts": [2]}), path, OPTS)
    assert pairs(hoodie_sink.read(path, SKIP)) == pairs(hoodie_sink.read(path)) == [(1, 5.0), (2, 2.0)]


def test_merge_type_is_checked():
    with pytest.raises(HoodieConfigError, match="'hoodie.datasource.merge.type' got 'none'.*payload_combine"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.merge.type": "none"})
    incremental = {"path": "/t", "hoodie.datasource.query.type": "incremental",
                   "hoodie.datasource.read.begin.instanttime": "0", **SKIP}  # fmt: skip
    with pytest.raises(HoodieConfigError, match="merge.type'=skip_merge is supported for snapshot"):
        ReadConfig.from_options(incremental)
    with pytest.raises(HoodieConfigError, match="merge.type'=skip_merge is supported for snapshot"):
        ReadConfig.from_options({"path": "/t", **SKIP}, streaming=True)
    assert not ReadConfig.from_options(
        {"path": "/t", "hoodie.datasource.merge.type": "payload_combine"}
    ).skip_merge


def test_read_paths_is_refused_even_for_a_file_that_does_not_exist(tmp_path):
    path = str(tmp_path / "t")
    hoodie_sink.write(pa.table({"id": [1], "city": ["sf"], "v": [1.0], "ts": [1]}), path, OPTS)
    named = [str(p) for p in Path(path, "sf").glob("*.parquet")] + [str(tmp_path / "t" / "sf" / "no.parquet")]
    for value in (named[0], ",".join(named), named[-1]):
        with pytest.raises(HoodieConfigError, match="Option 'hoodie.datasource.read.paths' is not supported"):
            hoodie_sink.read(path, {"hoodie.datasource.read.paths": value})


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("hoodie.schema.on.read.enable", "true", "schema.on.read.enable'=true is not supported"),
        # not one of Hudi 0.15's read options (DataSourceReadOptions): unknown
        ("hoodie.datasource.read.fast.bootstrap.enabled", "true", "Unknown read option"),
    ],
)
def test_options_that_would_change_the_answer_are_refused(key, value, match):
    with pytest.raises(HoodieConfigError, match=match):
        ReadConfig.from_options({"path": "/t", key: value})


def test_read_tuning_options_that_change_no_answer_are_accepted():
    cfg = ReadConfig.from_options(
        {
            "path": "/t",
            "hoodie.enable.data.skipping": "true",
            "hoodie.file.index.enable": "true",
            "hoodie.datasource.read.file.index.listing.mode.override": "lazy",
            "hoodie.datasource.read.use.new.parquet.file.format": "true",
            "hoodie.schema.on.read.enable": "false",
        }
    )
    assert cfg.query_type == "snapshot" and not cfg.skip_merge


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_time_travel_before_the_first_commit_is_the_empty_table_with_its_columns(tmp_path, table_type):
    path = str(tmp_path / "t")
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    hoodie_sink.write(pa.table({"id": [1], "city": ["sf"], "v": [1.0], "ts": [1]}), path, opts)
    hoodie_sink.write(pa.table({"id": [2], "city": ["la"], "v": [2.0], "ts": [1]}), path, opts)
    first = Timeline.load(Storage(path)).completed()[0].timestamp
    before = str(int(first) - 1)
    latest = hoodie_sink.read(path)
    for as_of in (before, "2000-01-01"):
        t = hoodie_sink.read(path, {"as.of.instant": as_of})
        assert t.num_rows == 0
        assert t.schema == latest.schema
        assert hoodie_sink.read(path, {"as.of.instant": as_of}, columns=["id", "v"]).num_rows == 0
    assert pairs(hoodie_sink.read(path, {"as.of.instant": first})) == [(1, 1.0)]
