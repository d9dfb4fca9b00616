"""Test helpers: fixture tables, and reading a table back with hudi-rs and with our reader."""

from __future__ import annotations

import datetime
import decimal
import os
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.index.key_index import read_footer, read_record_keys
from hoodie_sink.table.read.snapshot import Snapshot, read_snapshot
from hoodie_sink.table.services.validation import metadata_table_violations

METADATA_FOLDER = ".hoodie/metadata"  # the metadata table, inside the data table's .hoodie

# Real Hudi tables kept in the repository (tests/fixtures/hudi-tables/README.md says where they come
# from), so a clone runs every test; HOODIE_FIXTURES points elsewhere if needed.
FIXTURES = Path(
    os.environ.get("HOODIE_FIXTURES", Path(__file__).resolve().parents[1] / "fixtures" / "hudi-tables")
)
FIXTURE_DIRS = {
    "cow_v6_complexkeygen_hivestyle": "v6_complexkeygen_hivestyle",
    "cow_v6_empty": "v6_empty",
    "cow_v6_nonpartitioned": "v6_nonpartitioned",
    "cow_v6_simplekeygen_nonhivestyle": "v6_simplekeygen_nonhivestyle",
    "mor_avro_v6_trips_8i1u": "v6_trips_8i1u",
    "mor_parquet_v6_empty": "v6_empty",
    "mor_parquet_v6_nonpartitioned": "v6_nonpartitioned",
    "mor_parquet_v6_simplekeygen_nonhivestyle": "v6_simplekeygen_nonhivestyle",
}
COW_FIXTURES = [k for k in FIXTURE_DIRS if k.startswith("cow_")]
MOR_FIXTURES = [k for k in FIXTURE_DIRS if k.startswith("mor_")]


def fixture_zips() -> list[Path]:
    """Every fixture zip, by name: a missing one is an error, never an empty (skipped) parameter set."""
    missing = [name for name in FIXTURE_DIRS if not (FIXTURES / f"{name}.zip").is_file()]
    if missing:
        raise FileNotFoundError(f"Apache Hudi fixture tables missing from {FIXTURES}: {', '.join(missing)}")
    return [FIXTURES / f"{name}.zip" for name in sorted(FIXTURE_DIRS)]


def unzip_fixture(name: str, dest: Path) -> Path:
    """Unzip fixture `name` into `dest` and return the table folder."""
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as z:
        for member in z.namelist():
            if member.startswith("__MACOSX") or member.endswith(".DS_Store"):
                continue
            z.extract(member, dest)
    table = dest / FIXTURE_DIRS[name]
    for junk in table.rglob(".DS_Store"):
        junk.unlink()
    return table


# Tables written by Hudi 0.15.0 with its metadata table on (tests/fixtures/metadata-tables/README.md).
METADATA_FIXTURES = FIXTURES.parent / "metadata-tables"
METADATA_FIXTURE_NAMES = ("cow_mdt_v6", "mor_mdt_v6", "mor_files_only_mdt_v6")


def unzip_metadata_fixture(name: str, dest: Path) -> Path:
    """Unzip metadata-table fixture `name` (one of METADATA_FIXTURE_NAMES) into `dest`; returns the
    data table's folder (its metadata table is `<table>/.hoodie/metadata`)."""
    path = METADATA_FIXTURES / f"{name}.zip"
    if not path.is_file():
        raise FileNotFoundError(f"metadata-table fixture missing: {path}")
    with zipfile.ZipFile(path) as z:
        z.extractall(dest)
    return dest / name


def hudi_rs_read(path: str | Path) -> pa.Table:
    from hudi import HudiTableBuilder

    t = HudiTableBuilder.from_base_uri(str(path)).build()
    batches = t.read()
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def hudi_rs_timeline(path: str | Path):
    from hudi import HudiTableBuilder

    return HudiTableBuilder.from_base_uri(str(path)).build().get_timeline()


def sort_by_key(t: pa.Table, key: str = "_hoodie_record_key") -> pa.Table:
    # commit time, sequence number and file break ties between copies of a key (append, insert and
    # bulk_insert keep duplicates; copies in two file groups updated by one task share a seqno)
    order = (
        key,
        "_hoodie_partition_path",
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_file_name",
    )
    keys = [(c, "ascending") for c in order if c in t.column_names]
    if not keys:  # a virtual-key table reads without meta columns: every sortable column
        keys = [(f.name, "ascending") for f in t.schema if not pa.types.is_nested(f.type)]
    return t.take(pc.sort_indices(t, sort_keys=keys)) if t.num_rows else t


def _normalise(t: pa.Table) -> list[dict]:
    return sort_rows(t.to_pylist())


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: repr(sorted((k, repr(v)) for k, v in r.items())))


# A row's identity for same_rows: these values with one type are equal exactly when their reprs
# are (compared as they are, quickly)...
_SAME_REPR_WHEN_EQUAL = (str, int, bool, bytes, type(None))
# ... and these are equal when their reprs are, but equal values may have different reprs (0.0 and
# -0.0, Decimal("1.0") and Decimal("1.00")): compared by repr, as sort_rows orders them. NaN, never
# equal to itself, and any other type leave the verdict to sort_rows.
_BY_REPR = (float, decimal.Decimal, datetime.date, datetime.time, datetime.timedelta)


def _value_identity(v: object) -> object:
    if isinstance(v, _SAME_REPR_WHEN_EQUAL):
        return v
    if isinstance(v, _BY_REPR) and v == v:
        return repr(v)
    raise TypeError(type(v))


def _row_identity(row: dict) -> tuple:
    return tuple((k, type(v), _value_identity(v)) for k, v in sorted(row.items()))


def same_rows(got: list[dict], want: list[dict]) -> bool:
    """`sort_rows(got) == sort_rows(want)`, decided quickly when it holds: the two are equal as
    multisets of rows of identical types and reprs. False only means "not shown equal here" (the
    caller then compares sort_rows, for its verdict and its message)."""
    if len(got) != len(want):
        return False
    try:
        return Counter(map(_row_identity, got)) == Counter(map(_row_identity, want))
    except TypeError:  # a value of another type (a list or a map column, NaN)
        return False


def assert_index_footers(path: str | Path) -> None:
    """The index's invariant for every latest base file: its footer bloom filter holds each of
    its keys, and its min/max key entries are its smallest and largest key."""
    snap = Snapshot.open(str(path), read_optimized=True)
    for bf in snap.base_files():
        footer = read_footer(snap.storage, bf.path)
        if not snap.table.populate_meta_fields:
            # virtual keys: as Java writes them, no key footer (tests/unit/write/test_virtual_keys.py)
            assert (footer.bloom_text, footer.min_key, footer.max_key) == (None, None, None), bf.path
            continue
        keys = read_record_keys(snap.storage, bf.path)
        if len(keys) == 0:
            continue
        bloom = footer.bloom()
        assert bloom is not None, f"{bf.path} has no bloom filter"
        assert bloom.might_contain(keys).all(), f"{bf.path}: bloom filter misses keys of the file"
        mm = pc.min_max(keys)
        assert (footer.min_key, footer.max_key) == (mm["min"].as_py(), mm["max"].as_py()), bf.path


def read_both(path: str | Path) -> tuple[pa.Table, pa.Table]:
    """hudi-rs and our reader, each sorted by record key; asserts they agree, meta columns included;
    and the index footers of every latest base file are right (assert_index_footers)."""
    assert_index_footers(path)
    theirs = sort_by_key(hudi_rs_read(path))
    ours = sort_by_key(read_snapshot(str(path)))
    if theirs.num_rows == 0 and ours.num_rows == 0:
        return theirs, ours
    assert theirs.column_names == ours.column_names, (theirs.column_names, ours.column_names)
    assert theirs.num_rows == ours.num_rows
    for name in theirs.column_names:
        a, b = theirs.column(name), ours.column(name)
        if a.type == b.type and a.equals(b):  # equal Arrow columns of one type: equal Python values too
            continue
        a, b = a.to_pylist(), b.to_pylist()
        assert a == b, f"column {name} differs between hudi-rs and our reader"
    return theirs, ours


def partition_of_keys(t: pa.Table) -> dict[str, str]:
    """record key -> partition path of a table read with its meta columns."""
    keys, parts = (t.column(c).to_pylist() for c in ("_hoodie_record_key", "_hoodie_partition_path"))
    return dict(zip(keys, parts, strict=True))


def data_rows(t: pa.Table, drop=META_COLUMNS) -> list[dict]:
    return _normalise(t.drop_columns([c for c in drop if c in t.column_names]))


def assert_metadata_table_sound(path: str | Path) -> None:
    """If the table keeps Hudi's metadata table, it lists exactly the committed files on storage
    (validate's check 6); new tables get one by default, so every model check asks this too."""
    assert metadata_table_violations(str(path)) == []


def without_rollback_records(snapshot: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """A table's files (relative path -> bytes) but for what undoing a refused or failed write
    leaves: its `.rollback` instant (as Java's) and the metadata table, which records the rollback in
    a deltacommit of its own (docs/hudi/metadata-table-protocol.md); the latter is checked by
    assert_metadata_table_sound instead."""
    return {k: v for k, v in snapshot.items() if ".rollback" not in k and not k.startswith(METADATA_FOLDER)}


def assert_table_matches(path: str | Path, expected_rows: list[dict]) -> pa.Table:
    """The table at `path` holds exactly `expected_rows` (data columns), per hudi-rs and our reader,
    and its metadata table, if it keeps one, lists what storage holds."""
    theirs, _ = read_both(path)
    assert_metadata_table_sound(path)
    data = theirs.drop_columns([c for c in META_COLUMNS if c in theirs.column_names])
    if same_rows(data.to_pylist(), expected_rows):
        return theirs
    got = data_rows(theirs)
    want = sort_rows(expected_rows)
    assert len(got) == len(want), f"{len(got)} rows read, {len(want)} expected"
    assert got == want
    return theirs


def copy_table(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


# several writers: optimistic concurrency control with the file-system lock (Java's class name)
OCC_OPTS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider",
    "hoodie.cleaner.policy.failed.writes": "LAZY",
}

# An append-mode table "t" keyed by "id", and clustering options that make every file of a small
# test table a candidate (shared by the timeline, heartbeat and metadata-table tests).
APPEND_OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.operation": "append",
}


def small_file_clustering(target_mb: int = 64) -> dict[str, str]:
    return {
        "hoodie.clustering.plan.strategy.small.file.limit": str(10 * 1024 * 1024),
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(target_mb * 1024 * 1024),
    }


def all_commit_extra_metadata(path: str | Path) -> list[tuple[str, dict]]:
    """(instant, extraMetadata) of every completed write instant, archived ones included, oldest
    first: tests of long streams count their commits across archival."""
    from hoodie_sink.table.format.timeline.instant import COMPLETED, WRITE_ACTIONS
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.services.archival import load_archived_timeline
    from hoodie_sink.table.storage import Storage

    storage = Storage(str(path))
    out = [
        (e.instant.timestamp, dict((e.details or {}).get("extraMetadata") or {}))
        for e in load_archived_timeline(storage)
        if e.instant.action in WRITE_ACTIONS and e.instant.state == COMPLETED
    ]
    active = ActiveTimeline.load(storage)
    out += [(i.timestamp, active.commit_metadata(i).extra_metadata) for i in active.completed()]
    return sorted(out, key=lambda x: x[0])


def streaming_batch_ids(path: str | Path) -> list[int]:
    """The streaming checkpoint (batch id) of every commit that carries one, oldest first."""
    import json

    out = []
    for _, extra in all_commit_extra_metadata(path):
        raw = extra.get("_hudi_streaming_sink_checkpoint")
        if raw:
            out.append(int(next(iter(json.loads(raw).values()))))
    return out


def all_write_stats(path: str | Path) -> list[dict]:
    """The write stats (JSON) of every completed write instant on the active timeline."""
    from hoodie_sink.table.format.timeline.timeline import ActiveTimeline
    from hoodie_sink.table.storage import Storage

    active = ActiveTimeline.load(Storage(str(path)))
    return [s.to_json() for i in active.completed() for s in active.commit_metadata(i).write_stats]
