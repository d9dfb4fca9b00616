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
