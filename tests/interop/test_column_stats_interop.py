"""Data skipping from the column statistics Apache Hudi keeps in the metadata table's column_stats
partition (read/metadata_column_stats.py): Java 0.15 writes a table with the partition on, and our
reads with filters skip files by those statistics alone, without a footer, and return exactly the
rows a model filter returns.  For merge-on-read tables, slices with log files are skipped too
when every file of the slice has statistics."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hoodie_sink
from hoodie_sink.table.read import data_skipping

pytestmark = [pytest.mark.compat, pytest.mark.interop]

OPTS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.compact.inline": "false",
    # the java_hudi JVM serves UTC tables (tests/interop/conftest.py: a LOCAL table after a UTC one
    # makes Java's instant generator wait out the zone offset)
    "hoodie.table.timeline.timezone": "UTC",
}


def batch(ids: list[int], ts: int, rng: random.Random) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "city": pa.array([("sf", "nyc")[i % 2] for i in ids]),
        "ts": pa.array([ts] * len(ids), pa.int64()),
        "fare": pa.array([float(i) + ts / 100 for i in ids]),
        "name": pa.array([f"n{i:05d}" for i in ids]),
        "day": pa.array([rng.randint(0, 3) for _ in ids], pa.int32()),
    })  # fmt: skip


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_we_skip_files_by_the_column_stats_java_keeps(java_hudi, tmp_path, monkeypatch, table_type):
    rng = random.Random(5)
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    model: dict[int, dict] = {}
    # each insert batch holds its own key range, so files are disjoint in `id` and `name`
    for b in range(4):
        t = batch(list(range(b * 100, b * 100 + 100)), b, rng)
        java_hudi.write(path, t, opts)
        model.update({r["id"]: r for r in t.to_pylist()})
    upd = batch(list(range(0, 20)), 10, rng)  # updates of the first range: logs in a MOR table
    java_hudi.write(path, upd, opts)
    model.update({r["id"]: r for r in upd.to_pylist()})

    footers = []
    real = data_skipping.read_file_stats
    monkeypatch.setattr(data_skipping, "read_file_stats", lambda s, p: footers.append(p) or real(s, p))
    cases = [
        [("id", ">=", 310)],
        [("name", "=", "n00150")],
        [("id", "<", 5)],
        [("fare", ">", 1000.0)],  # nothing matches
        [("day", "=", 2), ("id", "<", 120)],
    ]
    for filters in cases:
        got = hoodie_sink.read(str(path), filters=filters).sort_by("id")
        rows = pa.Table.from_pylist(sorted(model.values(), key=lambda r: r["id"]))
        mask = None
        for col, op, value in filters:
            fn = {">=": pc.greater_equal, "=": pc.equal, "<": pc.less, ">": pc.greater}[op]
            m = fn(rows.column(col), value)
            mask = m if mask is None else pc.and_(mask, m)
        want = rows.filter(mask)
        assert got.column("id").to_pylist() == want.column("id").to_pylist(), filters
        assert got.column("fare").to_pylist() == want.column("fare").to_pylist(), filters
    assert footers == [], "every file had statistics in the metadata table: no footer should be read"


def test_the_statistics_of_java_let_a_selective_filter_skip_most_files(java_hudi, tmp_path):
    from hoodie_sink.table.read.snapshot import Snapshot

    rng = random.Random(6)
    path = tmp_path / "t"
    for b in range(4):
        java_hudi.write(path, batch(list(range(b * 100, b * 100 + 100)), b, rng), OPTS)
    snap = Snapshot.open(str(path))
    stats = snap.metadata_stats()
    files = snap.base_files()
    assert {bf.name for bf in files} <= set(stats)
    kept = data_skipping.prune(snap.storage, files, [("id", ">=", 310)], known=stats)
    assert kept.footers_read == 0 and kept.skipped == len(files) - 2  # range 300..399: one file per city


# -- our writes keep column_stats (issue 29, item 3) ------------------------------------------------
JAVA_SKIPPING = {
    "hoodie.enable.data.skipping": "true",
    "hoodie.metadata.enable": "true",
    "hoodie.metadata.index.column.stats.enable": "true",
}
OURS = {
    **OPTS,
    "hoodie.metadata.compact.max.delta.commits": "3",
    "hoodie.cleaner.commits.retained": "1",
    "hoodie.compact.inline.max.delta.commits": "3",
}
FILTERS = [("id >= 310", lambda r: r["id"] >= 310), ("name = 'n00150'", lambda r: r["name"] == "n00150"),
           ("id < 5", lambda r: r["id"] < 5), ("fare > 1000.0", lambda r: r["fare"] > 1000.0),
           ("day = 2 and id < 120", lambda r: r["day"] == 2 and r["id"] < 120)]  # fmt: skip


def _ours_equal_javas_view(java_hudi, path) -> int:
    """Java's merged column statistics (HoodieTableMetadata.getColumnStats) of every listed file
    equal the records we read, and both equal what the files give (our validation); the number of
    files compared."""
    from hoodie_sink.table.format.metadata_keys import COLUMN_STATS
    from hoodie_sink.table.format.metadata_listing import metadata_listing, read_partition
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.services.validation import column_stats_mismatches
    from hoodie_sink.table.storage import Storage

    storage = Storage(str(path))
    timeline = ActiveTimeline.load(storage)
    assert column_stats_mismatches(storage, timeline, limit=50) == []
    listing = metadata_listing(storage, timeline)
    files = [(f.partition_path, f.name) for f in [*listing.base_files, *listing.log_files]]
    columns = ["id", "name", "fare", "day", "_hoodie_record_key"]
    theirs = java_hudi.column_stats(path, files, columns)
    ours: dict = {}
    for r in (read_partition(storage, timeline, COLUMN_STATS) or {}).values():
        c = r.column_stats if r is not None else None
        if c is None or c.is_deleted or c.column_name not in columns:
            continue
        partition = next((p for p, n in files if n == c.file_name), None)
        if partition is None:
            continue  # a file no longer listed (Java's cut-name tombstones leave its records live)
        ours.setdefault(f"{partition}/{c.file_name}", {})[c.column_name] = [
            None if c.min_value is None else c.min_value[1], None if c.max_value is None else c.max_value[1],
            c.null_count, c.value_count,
        ]  # fmt: skip
    assert theirs == ours
    return len(ours)


def _java_reads_with_skipping(java_hudi, path, model: dict) -> None:
    for where, keep in FILTERS:
        got = java_hudi.read_filtered(path, where, **JAVA_SKIPPING)
        want = sorted(r["id"] for r in model.values() if keep(r))
        assert sorted(got.column("id").to_pylist()) == want, where


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_java_reads_and_continues_the_column_stats_we_keep(java_hudi, tmp_path, table_type):
    """(a) after our writes (inserts, updates into logs, cleans, compactions of both tables) Java 0.15
    validates the metadata table and its data skipping returns exactly the model's rows; its view of
    our column statistics equals ours; (c) Java writes with the partition on, and our validation
    and Java's view still agree with the files; we continue, and Java reads again."""
    from tests.support.tables import assert_table_matches

    rng = random.Random(7)
    path = tmp_path / "t"
    ours = {**OURS, "hoodie.datasource.write.table.type": table_type}
    model: dict[int, dict] = {}

    def ours_write(t: pa.Table) -> None:
        hoodie_sink.write(t, str(path), ours)
        model.update({r["id"]: r for r in t.to_pylist()})

    for b in range(4):
        ours_write(batch(list(range(b * 100, b * 100 + 100)), b, rng))
    for ts in (10, 11):
        ours_write(batch(list(range(0, 20)) + list(range(150, 160)), ts, rng))
    assert_table_matches(path, list(model.values()))
    java_hudi.assert_metadata_valid(path)
    assert _ours_equal_javas_view(java_hudi, path) > 0
    _java_reads_with_skipping(java_hudi, path, model)

    upd = batch(list(range(10, 30)) + list(range(395, 405)), 20, rng)
    java_hudi.write(path, upd, {**ours, "hoodie.cleaner.commits.retained": "10"})
    model.update({r["id"]: r for r in upd.to_pylist()})
    assert_table_matches(path, list(model.values()))  # our validation of Java's records included
    assert _ours_equal_javas_view(java_hudi, path) > 0

    ours_write(batch(list(range(25, 35)) + list(range(400, 410)), 21, rng))
    assert_table_matches(path, list(model.values()))
    java_hudi.assert_metadata_valid(path)
    assert _ours_equal_javas_view(java_hudi, path) > 0
    _java_reads_with_skipping(java_hudi, path, model)
