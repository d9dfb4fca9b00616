"""Row-for-row comparison of one table as read by Apache Hudi (Java), hudi-rs and our reader."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.storage import Storage
from tests.support.tables import data_rows, hudi_rs_read, read_both, sort_by_key, sort_rows


def _conform(java: pa.Table, like: pa.Table) -> pa.Table:
    """Java's answer in the column order and types of hudi-rs's (Spark 3.5 writes timestamps as
    INT96, read back as nanoseconds; the values are what is compared)."""
    missing = set(like.column_names) - set(java.column_names)
    assert not missing, f"Java's read lacks columns {sorted(missing)}"
    cols = []
    for f in like.schema:
        col = java.column(f.name)
        if col.type != f.type:
            col = col.cast(f.type)
        cols.append(col)
    return pa.table(cols, schema=like.schema)


def assert_readers_agree(java: pa.Table, path, expected_rows: list[dict] | None = None) -> pa.Table:
    """Java's snapshot read equals hudi-rs's and ours, meta columns included (hudi-rs and ours
    are compared by read_both), and, given `expected_rows`, the data columns equal them."""
    theirs, _ours = read_both(path)
    if theirs.num_rows == 0:
        assert java.num_rows == 0, f"Java reads {java.num_rows} rows, hudi-rs none"
        return theirs
    j = sort_by_key(_conform(java, theirs))
    assert j.num_rows == theirs.num_rows, f"Java reads {j.num_rows} rows, hudi-rs {theirs.num_rows}"
    for name in theirs.column_names:
        a, b = j.column(name).to_pylist(), theirs.column(name).to_pylist()
        if a != b:
            first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
            raise AssertionError(
                f"column {name}: Java reads {a[first]!r}, hudi-rs {b[first]!r} (row {first})"
            )
    if expected_rows is not None:
        assert data_rows(theirs) == sort_rows(expected_rows)
    return theirs


def assert_time_travel_agrees(java_hudi, path, instant: str) -> None:
    """Java's `as.of.instant` read equals hudi-rs's and ours at the same instant."""
    from hudi import HudiTableBuilder

    java = java_hudi.read(path, **{"as.of.instant": instant})
    rs = HudiTableBuilder.from_base_uri(str(path)).build().read({"hoodie.read.as.of.timestamp": instant})
    theirs = sort_by_key(pa.Table.from_batches(rs)) if rs else pa.table({})
    ours = sort_by_key(read_snapshot(str(path), as_of=instant))
    assert ours.num_rows == theirs.num_rows
    if theirs.num_rows:
        assert ours.select(theirs.column_names).to_pylist() == theirs.to_pylist()
        j = sort_by_key(_conform(java, theirs))
        assert j.to_pylist() == theirs.to_pylist()
    else:
        assert java.num_rows == 0


def assert_timeline_agrees(java_hudi, path) -> list[str]:
    """Java's completed timeline and hudi-cli-like `commits show` / latest file slices equal ours."""
    storage = Storage(str(path))
    ours = ActiveTimeline.load(storage)
    completed = [(i.timestamp, i.action) for i in ours.instants if i.is_completed]
    java = [(t, a) for t, a, _state in java_hudi.timeline(path)]
    assert java == completed, f"Java's timeline {java} != ours {completed}"
    commits = java_hudi.call("commits", path=str(path))
    assert [c["time"] for c in commits] == [t for t, a in completed if a in _COMMIT_ACTIONS]
    view = FileSystemView.load(storage, ours)
    mine: dict[str, list] = {}
    for bf in view.latest_base_files():
        mine.setdefault(bf.partition_path, []).append([bf.file_id, bf.instant, bf.name])
    slices = java_hudi.call("file_slices", path=str(path), partitions=sorted(mine))
    assert slices == {p: sorted(v) for p, v in mine.items()}
    return [t for t, _a in completed]


_COMMIT_ACTIONS = ("commit", "deltacommit", "replacecommit")


def java_read_equals_hudi_rs(java_hudi, path) -> None:
    java = java_hudi.read(path)
    rs = hudi_rs_read(path)
    assert java.num_rows == rs.num_rows
    if rs.num_rows:
        assert sort_by_key(_conform(java, rs)).to_pylist() == sort_by_key(rs).to_pylist()


def keys_of(t: pa.Table) -> list:
    return sorted(pc.unique(t.column("_hoodie_record_key")).to_pylist())
