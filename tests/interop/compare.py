"""Row-for-row comparison of one table as read by Apache Hudi (Java), hudi-rs and our reader."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.storage import Storage
from tests.support.tables import data_rows, hudi_rs_read, read_both, sort_by_key, sort_rows


def _conform(java: pa.Table, like: pa.Table, path_valued: tuple[str, ...] = ()) -> pa.Table:
    """Java's answer in the column order and types of hudi-rs's (Spark 3.5 writes timestamps as
    INT96, read back as nanoseconds; the values are what is compared).

    `path_valued`: columns Java's Spark reader returns as the partition path's value instead of
    the stored one (it does so for the TimestampBasedKeyGenerator's field, on tables it wrote
    itself too): checked against the partition path, then compared as stored."""
    missing = set(like.column_names) - set(java.column_names)
    assert not missing, f"Java's read lacks columns {sorted(missing)}"
    cols = []
    for f in like.schema:
        col = java.column(f.name)
        if f.name in path_valued:
            assert col.to_pylist() == java.column("_hoodie_partition_path").to_pylist()
            col = like.column(f.name)  # rows in the same order: both are sorted by key below
        elif col.type != f.type:
            col = col.cast(f.type)
        cols.append(col)
    return pa.table(cols, schema=like.schema)


def assert_readers_agree(
    java: pa.Table, path, expected_rows: list[dict] | None = None, path_valued: tuple[str, ...] = ()
) -> pa.Table:
    """Java's snapshot read equals hudi-rs's and ours, meta columns included (hudi-rs and ours
    are compared by read_both), and, given `expected_rows`, the data columns equal them."""
    theirs, _ours = read_both(path)
    if theirs.num_rows == 0:
        assert java.num_rows == 0, f"Java reads {java.num_rows} rows, hudi-rs none"
        return theirs
    theirs = sort_by_key(theirs)
    j = _conform(sort_by_key(java), theirs, path_valued)
    assert j.num_rows == theirs.num_rows, f"Java reads {j.num_rows} rows, hudi-rs {theirs.num_rows}"
    for name in theirs.column_names:
        a, b = j.column(name).to_pylist(), theirs.column(name).to_pylist()
        if a != b:
            first = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
            raise AssertionError(
                f"column {name}: Java reads {a[first]!r}, hudi-rs {b[first]!r} (row {first})"
            )
    if expected_rows is not None:
        _assert_rows_equal(data_rows(theirs), sort_rows(expected_rows))
    return theirs


def _assert_rows_equal(got: list[dict], want: list[dict]) -> None:
    """Equal, or an error that shows the first few keys that differ (not two full tables)."""
    if got == want:
        return
    by_key_got = {repr(r.get("id")): r for r in got}
    by_key_want = {repr(r.get("id")): r for r in want}
    extra = sorted(set(by_key_got) - set(by_key_want))[:5]
    lost = sorted(set(by_key_want) - set(by_key_got))[:5]
    changed = [
        (k, by_key_got[k], by_key_want[k])
        for k in by_key_want
        if k in by_key_got and by_key_got[k] != by_key_want[k]
    ][:5]
    raise AssertionError(
        f"{len(got)} rows read, {len(want)} expected; keys read but not expected {extra}, "
        f"expected but not read {lost}, rows that differ (read, expected) {changed}"
    )


def assert_time_travel_agrees(java_hudi, path, instant: str, expected_rows: list[dict]) -> None:
    """Java's `as.of.instant` read, hudi-rs's and ours at the same instant all equal
    `expected_rows` (data columns) and each other (meta columns included)."""
    from hudi import HudiReadOptions, HudiTableBuilder

    java = java_hudi.read(path, **{"as.of.instant": instant})
    table = HudiTableBuilder.from_base_uri(str(path)).build()
    rs = table.read(HudiReadOptions().with_as_of_timestamp(instant))
    theirs = sort_by_key(pa.Table.from_batches(rs)) if rs else pa.table({})
    ours = sort_by_key(read_snapshot(str(path), as_of=instant))
    assert data_rows(theirs) == sort_rows(expected_rows)
    assert ours.num_rows == theirs.num_rows
    assert ours.select(theirs.column_names).to_pylist() == theirs.to_pylist()
    assert sort_by_key(_conform(java, theirs)).to_pylist() == theirs.to_pylist()


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
