"""The record-level index (BLOOM / GLOBAL_BLOOM) and Hudi-compatible BUCKET hashing."""

from __future__ import annotations

import os
import pickle
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieKeyError, HoodieTableError
from hoodie_sink.table.format.bloom import build_footer_metadata
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.index import bucket
from hoodie_sink.table.index import key_index as ki
from hoodie_sink.table.index.key_index import KeyIndex, TagResult
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.storage import Storage
from tests.support.tables import COW_FIXTURES, unzip_fixture


@pytest.fixture(autouse=True)
def _fresh_caches():
    ki.clear_caches()
    yield
    ki.clear_caches()
    ki.set_key_cache_budget(ki.DEFAULT_KEY_CACHE_BUDGET)
    ki.set_footer_cache_budget(ki.DEFAULT_FOOTER_CACHE_BUDGET, ki.DEFAULT_BLOOM_CACHE_BUDGET)


def _uuids(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def _uuid_like(n: int, rng: random.Random) -> list[str]:
    return [f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" for h in _uuids(n, rng)]


def _base_files(path) -> list[BaseFile]:
    return FileSystemView.load(Storage(str(path))).latest_base_files()


def _expected_locations(path) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(partition, key) -> (file id, partition, instant), from the meta columns of the snapshot rows."""
    snap = read_snapshot(str(path))
    out = {}
    for key, part, name in zip(
        snap.column("_hoodie_record_key").to_pylist(),
        snap.column("_hoodie_partition_path").to_pylist(),
        snap.column("_hoodie_file_name").to_pylist(),
        strict=True,
    ):
        bf = BaseFile.parse(part, name)
        assert bf is not None, name
        out[(part, key)] = (bf.file_id, part, bf.instant)
    return out


def _as_rows(result: TagResult) -> list[tuple]:
    return list(
        zip(
            result.file_id.to_pylist(),
            result.partition_path.to_pylist(),
            result.base_instant.to_pylist(),
            strict=True,
        )
    )


NONE3 = (None, None, None)

# --------------------------------------------------------------------------------- Apache Hudi tables


@pytest.mark.compat
@pytest.mark.parametrize("name", COW_FIXTURES)
@pytest.mark.parametrize("global_index", [False, True])
def test_fixture_tables_every_key_found_where_meta_columns_say(tmp_path, name, global_index):
    table = unzip_fixture(name, tmp_path)
    expected = _expected_locations(table)
    index = KeyIndex(Storage(str(table)), _base_files(table), global_index=global_index)
    pairs = sorted(expected) + [("", "no-such-key"), ("nowhere", "id:9,name:Zed")]
    # An unknown key inside an existing partition (and inside the files' key range for numeric keys).
    for part in {p for p, _ in expected}:
        pairs.append((part, "2.5"))
    keys = pa.array([k for _, k in pairs], pa.string())
    parts = pa.array([p for p, _ in pairs], pa.string())
    got = _as_rows(index.tag(keys, parts))
    assert got == [expected.get(pair, NONE3) for pair in pairs]
    if name == "cow_v6_empty":
        assert not expected
    else:
        assert expected


@pytest.mark.compat
@pytest.mark.parametrize("name", [n for n in COW_FIXTURES if n != "cow_v6_empty"])
def test_fixture_tables_wrong_partition(tmp_path, name):
    table = unzip_fixture(name, tmp_path)
    expected = _expected_locations(table)
    storage, base_files = Storage(str(table)), _base_files(table)
    keys = pa.array([k for _, k in expected], pa.string())
    wrong = pa.array([p + "-elsewhere" for p, _ in expected], pa.string())
    assert _as_rows(KeyIndex(storage, base_files).tag(keys, wrong)) == [NONE3] * len(expected)
    assert _as_rows(KeyIndex(storage, base_files, global_index=True).tag(keys, wrong)) == list(
        expected.values()
    )


@pytest.mark.compat
def test_fixture_bloom_filter_written_by_java_prunes_absent_key_in_range(tmp_path):
    """Key "2" is within partition 10's key range [1, 3] but not in it: Java's bloom filter says no."""
    table = unzip_fixture("cow_v6_simplekeygen_nonhivestyle", tmp_path)
    index = KeyIndex(Storage(str(table)), _base_files(table))
    got = index.tag(pa.array(["2", "1"]), pa.array(["10", "20"]))
    assert got.file_id.to_pylist() == [None, None]
    stats = ki.cache_stats()
    assert stats["files_bloom_pruned"] == 1  # partition 10's file, by its bloom filter
    assert stats["files_range_pruned"] == 1  # partition 20's file holds only "2"
    assert stats["key_misses"] == 0  # no key column was read


# ---------------------------------------------------------------------------------- our own tables


@pytest.fixture(scope="module")
def own_table(tmp_path_factory):
    """A bulk_insert table of 60000 uuid-keyed rows in 4 partitions, split into many small files."""
    path = tmp_path_factory.mktemp("own") / "t"
    rng = random.Random(11)
    n = 60000
    keys = _uuid_like(n, rng)
    parts = [rng.choice("abcd") for _ in range(n)]
    data = pa.table({"id": keys, "p": parts, "v": np.arange(n, dtype=np.int64)})
    hoodie_sink.write(
        data,
        str(path),
        {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.operation": "bulk_insert",
            "hoodie.parquet.max.file.size": "1048576",
        },
    )
    base_files = _base_files(path)
    assert len(base_files) >= 8
    return path, dict(zip(keys, parts, strict=True)), base_files


def _sample_batch(key_to_part: dict[str, str], rng: random.Random, n_present: int, n_absent: int):
    present = rng.sample(sorted(key_to_part), n_present)
    absent = _uuid_like(n_absent, rng)
    keys = present + absent
    parts = [key_to_part[k] for k in present] + [rng.choice("abcd") for _ in absent]
    order = list(range(len(keys)))
    rng.shuffle(order)
    return [keys[i] for i in order], [parts[i] for i in order]


def _file_of(base_files: list[BaseFile], path) -> dict[str, BaseFile]:
    """key -> base file, read straight from the files."""
    storage = Storage(str(path))
    out = {}
    for bf in base_files:
        t = pq.read_table(os.path.join(storage.base_uri, bf.path), columns=["_hoodie_record_key"])
        for k in t.column(0).to_pylist():
            out[k] = bf
    return out


@pytest.mark.parametrize("global_index", [False, True])
def test_own_table_random_keys_present_and_absent(own_table, global_index):
    path, key_to_part, base_files = own_table
    truth = _file_of(base_files, path)
    rng = random.Random(5 + global_index)
    keys, parts = _sample_batch(key_to_part, rng, 3000, 3000)
    index = KeyIndex(Storage(str(path)), base_files, global_index=global_index)
    got = _as_rows(index.tag(pa.array(keys), pa.array(parts)))
    want = [
        (truth[k].file_id, truth[k].partition_path, truth[k].instant) if k in truth else NONE3 for k in keys
    ]
    assert got == want
    assert sum(r != NONE3 for r in got) == 3000


def test_own_table_wrong_partition_matches_only_globally(own_table):
    path, key_to_part, base_files = own_table
    truth = _file_of(base_files, path)
    keys = sorted(key_to_part)[:500]
    wrong = [{"a": "b", "b": "c", "c": "d", "d": "a"}[key_to_part[k]] for k in keys]
    storage = Storage(str(path))
    scoped = KeyIndex(storage, base_files).tag(pa.array(keys), pa.array(wrong))
    assert scoped.file_id.null_count == len(keys)
    glob = KeyIndex(storage, base_files, global_index=True).tag(pa.array(keys), pa.array(wrong))
    assert _as_rows(glob) == [(truth[k].file_id, truth[k].partition_path, truth[k].instant) for k in keys]
    assert glob.partition_path.to_pylist() == [key_to_part[k] for k in keys]


def test_stored_values_of_found_keys(own_table):
    """A global index moving records reads the stored ordering value of found keys: per key from
    the file the tag found, in input order; a column the files lack gives nulls."""
    path, key_to_part, base_files = own_table
    storage = Storage(str(path))
    truth = {r["id"]: r["v"] for r in read_snapshot(str(path)).select(["id", "v"]).to_pylist()}
    rng = random.Random(9)
    keys = rng.sample(sorted(key_to_part), 700)
    index = KeyIndex(storage, base_files, global_index=True)
    tags = index.tag(pa.array(keys))
    got = index.stored_values(pa.array(keys), tags.file_id, "v", pa.int64())
    assert got.to_pylist() == [truth[k] for k in keys]
    assert index.stored_values(pa.array(keys), tags.file_id, "nope", pa.int64()).null_count == len(keys)


def test_own_table_caches_hit_on_second_call(own_table):
    path, key_to_part, base_files = own_table
    keys, parts = _sample_batch(key_to_part, random.Random(3), 2000, 2000)
    index = KeyIndex(Storage(str(path)), base_files)
    first = index.tag(pa.array(keys), pa.array(parts))
    s1 = ki.cache_stats()
    assert s1["key_misses"] > 0 and s1["key_hits"] == 0
    assert s1["footer_misses"] == len(base_files) and s1["footer_hits"] == 0
    assert s1["key_bytes"] > 0 and s1["bytes"] >= s1["key_bytes"]
    # A new index object (next micro-batch, same executor) shares the process-wide caches.
    second = KeyIndex(Storage(str(path)), base_files).tag(pa.array(keys), pa.array(parts))
    s2 = ki.cache_stats()
    assert s2["key_misses"] == s1["key_misses"] and s2["key_hits"] == s1["key_misses"]
    assert s2["footer_misses"] == s1["footer_misses"] and s2["footer_hits"] == len(base_files)
    assert _as_rows(first) == _as_rows(second)


def test_key_cache_budget_evicts_and_stays_correct(own_table):
    path, key_to_part, base_files = own_table
    keys, parts = _sample_batch(key_to_part, random.Random(8), 2000, 500)
    index = KeyIndex(Storage(str(path)), base_files)
    want = _as_rows(index.tag(pa.array(keys), pa.array(parts)))
    full = ki.cache_stats()["key_bytes"]
    ki.clear_caches()
    ki.set_key_cache_budget(full // 3)
    for _ in range(2):
        assert _as_rows(index.tag(pa.array(keys), pa.array(parts))) == want
    stats = ki.cache_stats()
    assert stats["key_evictions"] > 0
    assert 0 < stats["key_bytes"] <= full // 3
    ki.set_key_cache_budget(0)
    assert ki.cache_stats()["key_bytes"] == 0
    assert _as_rows(index.tag(pa.array(keys), pa.array(parts))) == want


def test_index_pickles_small_and_works_after_unpickling(own_table):
    path, key_to_part, base_files = own_table
    index = KeyIndex(Storage(str(path)), base_files, global_index=True)
    keys, parts = _sample_batch(key_to_part, random.Random(4), 100, 100)
    want = _as_rows(index.tag(pa.array(keys), pa.array(parts)))
    blob = pickle.dumps(index)
    assert len(blob) < 400 * len(base_files) + 1000
    clone = pickle.loads(blob)
    assert clone.global_index and clone.base_files == base_files
    assert _as_rows(clone.tag(pa.array(keys), pa.array(parts))) == want


def test_concurrent_tagging_from_threads(own_table):
    path, key_to_part, base_files = own_table
    index = KeyIndex(Storage(str(path)), base_files)
    batches = [_sample_batch(key_to_part, random.Random(100 + i), 400, 400) for i in range(6)]
    want = [_as_rows(index.tag(pa.array(k), pa.array(p))) for k, p in batches]
    ki.clear_caches()
    barrier = threading.Barrier(6)

    def run(i):
        barrier.wait()
        k, p = batches[i]
        return _as_rows(KeyIndex(Storage(str(path)), base_files).tag(pa.array(k), pa.array(p)))

    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(run, range(6))) == want


def test_input_array_types(own_table):
    path, key_to_part, base_files = own_table
    keys, parts = _sample_batch(key_to_part, random.Random(9), 300, 300)
    index = KeyIndex(Storage(str(path)), base_files)
    want = _as_rows(index.tag(pa.array(keys), pa.array(parts)))
    variants = [
        (pa.chunked_array([keys[:100], keys[100:]]), pa.chunked_array([parts[:7], parts[7:]])),
        (pa.array(keys, pa.large_string()), pa.array(parts, pa.large_string())),
        (pa.array(keys).dictionary_encode(), pa.array(parts).dictionary_encode()),
        (pa.array(["x"] + keys)[1:], pa.array(["x"] + parts)[1:]),  # sliced arrays
    ]
    for k, p in variants:
        assert _as_rows(index.tag(k, p)) == want


def test_bad_inputs(own_table):
    path, _, base_files = own_table
    index = KeyIndex(Storage(str(path)), base_files)
    with pytest.raises(HoodieKeyError):
        index.tag(pa.array(["a", None]), pa.array(["a", "a"]))
    with pytest.raises(HoodieKeyError):
        index.tag(pa.array(["a", "b"]), pa.array(["a", None]))
    with pytest.raises(ValueError):
        index.tag(pa.array(["a", "b"]), pa.array(["a"]))
    with pytest.raises(ValueError):
        index.tag(pa.array(["a"]), None)
    with pytest.raises(TypeError):
        index.tag(pa.array([1, 2]), pa.array(["a", "a"]))
    empty = index.tag(pa.array([], pa.string()), pa.array([], pa.string()))
    assert len(empty.file_id) == len(empty.partition_path) == len(empty.base_instant) == 0
    assert empty.file_id.type == pa.string()
    # Empty keys cannot be in a Hudi table (and the bloom filter rejects them): simply not found.
    got = index.tag(pa.array(["", ""]), pa.array(["a", "zz"]))
    assert got.file_id.to_pylist() == [None, None]
    # Global index: partition paths are optional.
    assert KeyIndex(Storage(str(path)), base_files, True).tag(pa.array(["nope"])).file_id.to_pylist() == [
        None
    ]
    # No files at all.
    assert KeyIndex(Storage(str(path)), []).tag(pa.array(["k"]), pa.array(["a"])).file_id.null_count == 1


# ------------------------------------------------------------------ duplicates and hand-made files


def _write_base_file(root: Path, partition: str, fid: str, instant: str, keys: list[str], footer=True):
    """A minimal base file: the meta key column, optionally with Hudi's footer entries."""
    bf = BaseFile(partition, fid, instant, "0-1-2")
    table = pa.table({"_hoodie_record_key": pa.array(keys, pa.string()), "x": list(range(len(keys)))})
    if footer:
        table = table.replace_schema_metadata(build_footer_metadata(pa.array(keys)))
    full = root / bf.path
    full.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(full))
    return bf


def test_key_in_several_files_newest_base_instant_wins(tmp_path):
    old = _write_base_file(tmp_path, "p1", "fg-old", "20240101000000000", ["k1", "k2", "k3"])
    new = _write_base_file(tmp_path, "p1", "fg-new", "20240202000000000", ["k2", "k4"])
    other = _write_base_file(tmp_path, "p2", "fg-p2", "20240303000000000", ["k3", "k5"])
    storage = Storage(str(tmp_path))
    keys = pa.array(["k1", "k2", "k3", "k3", "k4", "k5", "k2"])
    parts = pa.array(["p1", "p1", "p1", "p2", "p1", "p2", "p2"])
    scoped = KeyIndex(storage, [other, new, old]).tag(keys, parts)
    assert scoped.file_id.to_pylist() == ["fg-old", "fg-new", "fg-old", "fg-p2", "fg-new", "fg-p2", None]
    glob = KeyIndex(storage, [old, other, new], global_index=True).tag(keys, parts)
    # k3 lives in p1 (older) and p2 (newer): the newest base instant wins.
    assert glob.file_id.to_pylist() == ["fg-old", "fg-new", "fg-p2", "fg-p2", "fg-new", "fg-p2", "fg-new"]
    assert glob.base_instant.to_pylist()[1] == "20240202000000000"
    assert glob.partition_path.to_pylist() == ["p1", "p1", "p2", "p2", "p1", "p2", "p1"]


def test_locate_finds_every_file_and_every_repeat_of_a_key(tmp_path):
    # bulk_insert and insert keep duplicate keys: Hudi's bloom index tags every copy
    old = _write_base_file(tmp_path, "p1", "fg-old", "20240101000000000", ["k1", "k2", "k2", "k3"])
    new = _write_base_file(tmp_path, "p1", "fg-new", "20240202000000000", ["k2", "k4"])
    other = _write_base_file(tmp_path, "p2", "fg-p2", "20240303000000000", ["k3", "k5"])
    storage = Storage(str(tmp_path))
    keys = pa.array(["k2", "k9", "k3", "k1"])
    parts = pa.array(["p1", "p1", "p1", "p2"])
    scoped = KeyIndex(storage, [other, new, old]).locate(keys, parts)
    assert scoped.record.tolist() == [0, 0, 1, 2, 3]
    assert scoped.tags.file_id.to_pylist() == ["fg-old", "fg-new", None, "fg-old", None]
    assert scoped.repeated.to_pylist() == ["fg-old"]  # k2 twice in fg-old
    glob = KeyIndex(storage, [old, other, new], global_index=True).locate(keys, parts)
    assert glob.record.tolist() == [0, 0, 1, 2, 2, 3]
    assert glob.tags.file_id.to_pylist() == ["fg-old", "fg-new", None, "fg-old", "fg-p2", "fg-old"]
    assert glob.tags.partition_path.to_pylist() == ["p1", "p1", None, "p1", "p2", "p1"]
    assert glob.repeated.to_pylist() == ["fg-old"]
    none = KeyIndex(storage, [old]).locate(pa.array(["k1", "k3"]), pa.array(["p1", "p1"]))
    assert none.record.tolist() == [0, 1] and len(none.repeated) == 0


def test_files_without_footers_are_always_candidates(tmp_path):
    bare = _write_base_file(tmp_path, "", "fg-bare", "20240101000000000", ["m", "a", "z"], footer=False)
    with_footer = _write_base_file(tmp_path, "", "fg-foot", "20240101000000001", ["b", "c"])
    index = KeyIndex(Storage(str(tmp_path)), [bare, with_footer])
    got = index.tag(pa.array(["a", "z", "c", "q"]), pa.array(["", "", "", ""]))
    assert got.file_id.to_pylist() == ["fg-bare", "fg-bare", "fg-foot", None]
    footer = ki.read_footer(Storage(str(tmp_path)), bare.path)
    assert footer.min_key is None and footer.bloom() is None and footer.num_rows == 3


def test_file_without_record_key_column_is_a_clear_error(tmp_path):
    bf = BaseFile("", "fg", "20240101000000000", "0-1-2")
    pq.write_table(pa.table({"id": ["a"]}), str(tmp_path / bf.path))
    with pytest.raises(HoodieTableError, match="_hoodie_record_key"):
        KeyIndex(Storage(str(tmp_path)), [bf]).tag(pa.array(["a"] * 100), pa.array([""] * 100))


def test_bloom_prunes_files_before_reading_them(tmp_path):
    files = [
        _write_base_file(tmp_path, "", f"fg{i}", "20240101000000000", [f"k{j:04d}-{i}" for j in range(500)])
        for i in range(5)
    ]
    index = KeyIndex(Storage(str(tmp_path)), files)
    # Every file's key range covers every key below; only fg2 holds one of them.
    keys = pa.array(["k0100-9", "k0100-2", "k0250-7", "k0003-0x"])
    got = index.tag(keys, pa.array([""] * 4))
    assert got.file_id.to_pylist() == [None, "fg2", None, None]
    stats = ki.cache_stats()
    assert stats["files_range_pruned"] == 0
    assert stats["files_bloom_pruned"] == 4
    assert stats["files_probed"] == 1 and stats["key_misses"] == 1
    assert stats["bloom_keys_checked"] == 5 * 4


# -------------------------------------------------------------------------------------- key ranges


def _brute_mask(keys: list[str], lo: str, hi: str) -> list[bool]:
    return [lo <= k <= hi for k in keys]


@pytest.mark.parametrize("search_sorted", [True, False])
def test_range_masks_match_brute_force(monkeypatch, search_sorted):
    if search_sorted and not ki._HAS_SEARCH_SORTED:
        pytest.skip("this pyarrow has no search_sorted")
    monkeypatch.setattr(ki, "_HAS_SEARCH_SORTED", search_sorted)
    rng = random.Random(1)
    alphabet = "abcxyz019é日"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4))) for _ in range(3000)]
    footers = []
    for _ in range(30):
        lo, hi = sorted(rng.sample(keys, 2))
        footers.append(ki.FileFooter(100, lo, hi))
    footers.append(ki.FileFooter(100, None, None))
    footers.append(ki.FileFooter(100, "a", "a"))
    masks = ki._range_masks(pa.array(keys), footers)
    for ft, mask in zip(footers, masks, strict=True):
        if ft.min_key is None:
            assert mask is None
        else:
            assert mask.tolist() == _brute_mask(keys, ft.min_key, ft.max_key)


def test_range_not_used_where_byte_and_utf16_order_differ():
    # Java: U+1F600 (UTF-16 D83D DE00) < U+FF21; UTF-8 bytes (F0.. vs EF..): U+FF21 < U+1F600.
    # A file whose bounds hold characters >= U+E000 gets no range pruning.
    assert not ki.FileFooter(1, "a", "\uff21").range_usable
    assert not ki.FileFooter(1, "\U0001f600", "z").range_usable
    assert ki.FileFooter(1, "a", "\ud7ff日本").range_usable
    assert ki._range_masks(pa.array(["\U0001f600"]), [ki.FileFooter(1, "\uff21", "\uff21")]) == [None]


def test_java_order_bounds_still_find_supplementary_keys(tmp_path):
    """Java String.compareTo puts U+1F600 (surrogates D83D..) before U+FF21; Arrow puts it after."""
    keys = ["\U0001f600", "\uff21"]
    bf = _write_base_file(tmp_path, "", "fg", "20240101000000000", keys)
    footer = ki.read_footer(Storage(str(tmp_path)), bf.path)
    assert (footer.min_key, footer.max_key) == ("\U0001f600", "\uff21")  # Java order
    got = KeyIndex(Storage(str(tmp_path)), [bf]).tag(pa.array(keys + ["\uffff"]), pa.array(["", "", ""]))
    assert got.file_id.to_pylist() == ["fg", "fg", None]


# ------------------------------------------------------------------------------------ bucket index


def java_string_hash(s: str | None) -> int:
    """Reference String.hashCode over UTF-16 code units (int32), null -> 0 (List.hashCode's rule)."""
    if s is None:
        return 0
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_list_hash(values: list[str | None]) -> int:
    h = 1
    for v in values:
        h = (31 * h + java_string_hash(v)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_bucket(values: list[str | None], num_buckets: int) -> int:
    return (java_list_hash(values) & 0x7FFFFFFF) % num_buckets


def java_split(s: str, sep: str, limit: int = 0) -> list[str]:
    """java.lang.String.split for a one-character literal separator."""
    if sep not in s:
        return [s]
    parts = s.split(sep, limit - 1) if limit > 0 else s.split(sep)
    if limit == 0:
        while parts and parts[-1] == "":
            parts.pop()
    return parts


def java_hash_keys(record_key: str, index_key_fields: str) -> list[str | None]:
    """BucketIdentifier.getHashKeys + KeyGenUtils.extractRecordKeysByFields of Hudi 0.14/0.15, literally."""
    if ":" not in record_key:
        return [record_key]
    fields = java_split(index_key_fields, ",")
    out: list[str | None] = []
    for kv in (java_split(p, ":", 2) for p in java_split(record_key, ",")):
        if len(kv) == 1 or not fields or kv[0] in fields:
            if len(kv) == 1:
                out.append(kv[0])
            elif kv[1] == "__null__":
                out.append(None)
            elif kv[1] == "__empty__":
                out.append("")
            else:
                out.append(kv[1])
    return out


TRICKY = [
    "",
    "a",
    "abc",
    "hello",
    "Aa",
    "BB",
    "héllo wörld",
    "日本語のキー",
    "\U0001f600",
    "a\U0001f600b\U00010000",
    "\uffff\ue000\ud7ff",
    "x" * 1000,
    "\u0000",
]


def test_java_string_hashes_known_values_and_reference(monkeypatch):
    got = bucket.java_string_hashes(pa.array(["abc", "", "hello", "Aa", "BB", None]))
    assert got.tolist() == [96354, 0, 99162322, 2112, 2112, 0]
    rng = random.Random(2)
    pool = "aZ09 ,:_-é߿ࠀ日\ud7ff\ue000\uffff" + "\U00010000\U0001f600\U0010ffff"
    values = TRICKY + ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(2000)]
    got = bucket.java_string_hashes(pa.array(values))
    assert got.dtype == np.int32
    assert got.tolist() == [java_string_hash(v) for v in values]
    # Sliced, chunked and large_string inputs.
    arr = pa.array(["pad"] + values)[1:]
    assert bucket.java_string_hashes(arr).tolist() == got.tolist()
    assert bucket.java_string_hashes(pa.chunked_array([values[:5], values[5:]])).tolist() == got.tolist()
    assert bucket.java_string_hashes(pa.array(values, pa.large_string())).tolist() == got.tolist()
    # Small processing chunks (records longer than a chunk included) give the same hashes.
    monkeypatch.setattr(bucket, "_CHUNK_UNITS", 7)
    assert bucket.java_string_hashes(pa.array(values)).tolist() == got.tolist()


def test_bucket_ids_match_java_list_hash():
    rng = random.Random(3)
    n = 3000
    col1 = [rng.choice(TRICKY) + str(rng.random()) if rng.random() < 0.9 else None for _ in range(n)]
    col2 = [rng.choice(TRICKY) for _ in range(n)]
    assert java_list_hash(["a", "b"]) == 4066  # Arrays.asList("a", "b").hashCode()
    for num_buckets in (1, 7, 256, 2**31 - 1):
        got = bucket.bucket_ids([pa.array(col1), pa.array(col2)], num_buckets)
        assert got.dtype == np.int32
        assert got.tolist() == [java_bucket([a, b], num_buckets) for a, b in zip(col1, col2, strict=True)]
    single = bucket.bucket_ids([pa.array(col2)], 16)
    assert single.tolist() == [java_bucket([v], 16) for v in col2]
    with pytest.raises(ValueError):
        bucket.bucket_ids([pa.array(col2)], 0)
    with pytest.raises(ValueError):
        bucket.bucket_ids([pa.array(["a"]), pa.array(["a", "b"])], 4)


def test_record_key_bucket_ids_match_hudi_hash_key_extraction():
    rng = random.Random(4)
    keys = [
        "plain-key",
        "id:1,name:Alice",
        "id:2,name:Bob",
        "2024-10-24 10:11:11.234",  # a timestamp key: Hudi 0.14/0.15 hash it as an empty list
        "f1:abc,f2:bcd,efg",
        "f1:__null__,f2:__empty__",
        "f1:,f2:x",
        "a:1,,",
        ",f1:v",
        "f1:a:b,f2:c",
        "f2:z,f1:y",
        "f1:日本,f2:\U0001f600",
        "__null__",
    ]
    parts = ["f1", "f2", "id", "name", "x", "", "日"]
    for _ in range(2000):
        pieces = []
        for _ in range(rng.randint(1, 4)):
            value = "".join(rng.choice("ab:,_é\U0001f600") for _ in range(rng.randint(0, 5)))
            pieces.append(f"{rng.choice(parts)}:{value}" if rng.random() < 0.8 else value)
        keys.append(",".join(pieces))
    for fields in ("id,name", "f1,f2", "f1", "name", "", ",", "f2,x,日"):
        want = [java_hash_keys(k, fields) for k in keys]
        assert bucket.record_key_hash_lists(pa.array(keys), fields).to_pylist() == want, fields
        for nb in (3, 64):
            got = bucket.record_key_bucket_ids(pa.array(keys), fields, nb)
            assert got.tolist() == [java_bucket(v, nb) for v in want], (fields, nb)
    # A simple key is its own single hash value; complex keys hash their values in key order.
    assert bucket.record_key_bucket_ids(pa.array(["k1"]), "id", 10).tolist() == [java_bucket(["k1"], 10)]
    assert bucket.record_key_bucket_ids(pa.array(["id:1,name:Alice"]), ["id", "name"], 10).tolist() == [
        java_bucket(["1", "Alice"], 10)
    ]
    assert bucket.record_key_hash_lists(pa.array(["2024-10-24 10:11:11"]), "ts").to_pylist() == [[]]


def test_bucket_file_ids():
    assert bucket.bucket_file_id_prefix(0) == "00000000"
    assert bucket.bucket_file_id_prefix(3) == "00000003"
    assert bucket.bucket_file_id_prefix(12345678) == "12345678"
    for b in (0, 7, 99999999):
        prefix = bucket.new_bucket_file_id_prefix(b)
        assert len(prefix) == 36 and prefix[8] == "-"
        assert bucket.bucket_of_file_id(prefix + "-0") == b
    assert bucket.bucket_of_file_id("00000042-0000-0000-0000-000000000000-0") == 42
    for bad in ("abc", "0000000x-1", "", "1234567"):
        with pytest.raises(ValueError):
            bucket.bucket_of_file_id(bad)
    with pytest.raises(ValueError):
        bucket.bucket_file_id_prefix(-1)
    with pytest.raises(ValueError):
        bucket.bucket_file_id_prefix(10**8)


@pytest.mark.compat
def test_bucket_of_fixture_complex_keys(tmp_path):
    table = unzip_fixture("cow_v6_complexkeygen_hivestyle", tmp_path)
    keys = read_snapshot(str(table)).column("_hoodie_record_key").combine_chunks()
    ids = pc.extract_regex(keys, r"id:(?P<id>[^,]*),name:(?P<name>.*)")
    by_columns = bucket.bucket_ids([pc.struct_field(ids, "id"), pc.struct_field(ids, "name")], 8)
    assert bucket.record_key_bucket_ids(keys, "id,name", 8).tolist() == by_columns.tolist()
