"""Record-level index for upserts: which existing file group holds each incoming record key.

Hudi's BLOOM (partition-scoped, the default) and GLOBAL_BLOOM indexes, over the latest committed base
file of every file group, in three steps:

1. **Key-range pruning** with the footer entries ``hoodie_min_record_key`` / ``hoodie_max_record_key``:
   the files' bounds are sorted once, every key is located among them with one binary search
   (``pc.search_sorted``; two string comparisons per file on pyarrow without it), and a file's
   candidates are then two integer comparisons per key.
2. **Bloom pruning** with the footer bloom filter (``BloomFilter.from_footer(...).might_contain``), used
   where it is cheaper than the exact check: for a file whose key column is not cached yet, a bloom
   filter that rejects every candidate saves reading the file.  Files without footers are candidates
   for every key (no range, no bloom).
3. **Exact check**: one Arrow hash join (Acero, multi-threaded) of the incoming keys against the
   ``_hoodie_record_key`` columns of the remaining files, on (key, partition) for BLOOM and on key for
   GLOBAL_BLOOM.

A key can be stored more than once: bulk_insert and insert keep duplicate keys, as Hudi's do.
`locate` returns every file group holding each key, as Hudi's bloom indexes tag every one (so an
upsert or delete changes every copy: docs/hudi/duplicate-keys.md), and names the file groups that
hold one of the keys twice.  `tag` keeps one file group per key: the one whose latest base instant
is the newest; ties go to the larger (partition path, file id).

Caches (module level, one per process = per Spark executor, thread-safe), keyed by
``(storage.base_uri, relative file path)``: base files are immutable, so the path identifies content.

* footers (row count, min/max key, bloom filter as footer text), LRU within ``set_footer_cache_budget``
  (default 128 MiB), plus parsed bloom filters (128 MiB: a parsed filter takes 2.6 MB per 60000-key
  row, so only the hot ones stay parsed);
* key columns, LRU within ``set_key_cache_budget`` (default 512 MiB), so that a streaming query does
  not read them again every micro-batch.

Key order: Arrow compares strings bytewise (UTF-8, i.e. code point order) while the footer bounds are
written in Java ``String.compareTo`` order (UTF-16 code units) by the Avro write path and in byte order
by Spark's row writer.  The two orders differ only when both strings hold characters >= U+E000 (UTF-8
lead bytes >= 0xEE); a file whose bounds hold such characters gets no range pruning (always correct).
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieKeyError, HoodieTableError
from hoodie_sink.table.arrow_util import as_strings
from hoodie_sink.table.format.bloom import (
    BLOOM_FOOTER_KEY,
    BLOOM_TYPE_CODE_KEY,
    MAX_KEY_FOOTER_KEY,
    MIN_KEY_FOOTER_KEY,
    BloomFilter,
)
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.format.keygen import KeyGenerator
from hoodie_sink.table.format.virtual_keys import key_source_columns, stored_record_keys
from hoodie_sink.table.index.executor_cache import executor_cache
from hoodie_sink.table.index.metadata_footers import (
    MetadataIndexFiles,
    bloom_filters,
    file_ranges,
    load_metadata_index_files,
)
from hoodie_sink.table.lru_cache import LRUCache
from hoodie_sink.table.storage import Storage

_is_string_view = getattr(pa.types, "is_string_view", lambda _t: False)  # pyarrow >= 16

RECORD_KEY_COLUMN = "_hoodie_record_key"
LEGACY_BLOOM_FOOTER_KEY = "com.uber.hoodie.bloomfilter"

DEFAULT_KEY_CACHE_BUDGET = 512 * 1024 * 1024
DEFAULT_FOOTER_CACHE_BUDGET = 128 * 1024 * 1024
DEFAULT_BLOOM_CACHE_BUDGET = 128 * 1024 * 1024
IO_THREADS = 8

# When is a bloom filter worth probing?  Measured on this project's 2-core benchmark machine: probing
# costs ~0.6 us per key plus ~7 ms to parse a 2-row filter (kept parsed in a bounded cache), the exact
# check ~0.05 us per row of a cached key column, and reading a key column from local disk ~0.06 us
# per row (object stores: several times more, plus latency).  So a filter is probed only to avoid
# reading a file: for a file whose key column is not cached, when its candidate count is at most
# max(BLOOM_MIN_KEYS, ratio * rows), with a small ratio on local storage and a large one on remote
# storage.  A cached file goes straight to the exact check.
# The result is exact either way (the exact check decides); the bloom filter only saves work.
BLOOM_MIN_KEYS = 64
BLOOM_RATIO_LOCAL = 1 / 64
BLOOM_RATIO_REMOTE = 1 / 4

_HAS_SEARCH_SORTED = hasattr(pc, "search_sorted")


# ------------------------------------------------------------------------------------------ result


@dataclass(frozen=True)
class TagResult:
    """Per incoming record: where its key lives now (all null for a key not in the table: an insert)."""

    file_id: pa.Array  # string
    partition_path: pa.Array  # string: partition of the file group holding the key
    base_instant: pa.Array  # string: instant of that file group's latest base file


@dataclass(frozen=True)
class Locations:
    """Every file group holding each incoming key: one row per (record, file group) pair, and one
    row with null tags for a record whose key is not stored (an insert)."""

    record: np.ndarray  # int64, ascending: the incoming record each row locates
    tags: TagResult  # per row
    repeated: pa.Array  # string: file ids of file groups that hold one of the keys more than once


# ------------------------------------------------------------------------------------------ caches


_FOOTERS = LRUCache(DEFAULT_FOOTER_CACHE_BUDGET)
_COUNTER_NAMES = (
    "files_range_pruned", "files_bloom_pruned", "files_probed", "bloom_keys_checked",
    "files_ranged_from_metadata", "blooms_from_metadata",
)  # fmt: skip
_COUNTERS = dict.fromkeys(_COUNTER_NAMES, 0)
_COUNTERS_LOCK = threading.Lock()
_BLOOMS = LRUCache(DEFAULT_BLOOM_CACHE_BUDGET)
_KEYS = LRUCache(DEFAULT_KEY_CACHE_BUDGET)


def set_key_cache_budget(nbytes: int) -> None:
    """Bound the per-process cache of `_hoodie_record_key` columns and of the ordering columns
    stored_values reads (least recently used evicted first)."""
    _KEYS.set_budget(int(nbytes))


def set_footer_cache_budget(nbytes: int, parsed_bloom_nbytes: int | None = None) -> None:
    """Bound the per-process caches of footers (bloom filters as footer text dominate their size) and,
    optionally, of parsed bloom filters."""
    _FOOTERS.set_budget(int(nbytes))
    if parsed_bloom_nbytes is not None:
        _BLOOMS.set_budget(int(parsed_bloom_nbytes))


def cache_stats() -> dict[str, int]:
    """Counters of the caches (``key_hits``, ``key_misses``, ``key_bytes``, ``footer_*``, ``bloom_*`` for
    parsed bloom filters, totals ``hits``/``misses``/``bytes``) and of the pruning steps."""
    out: dict[str, int] = {}
    for prefix, cache in (("key", _KEYS), ("footer", _FOOTERS), ("bloom", _BLOOMS)):
        for name, value in cache.stats().items():
            out[f"{prefix}_{name}"] = value
    for name in ("hits", "misses", "bytes"):  # totals over the three caches
        out[name] = out[f"key_{name}"] + out[f"footer_{name}"] + out[f"bloom_{name}"]
    with _COUNTERS_LOCK:
        out.update(_COUNTERS)  # what the pruning steps did, summed over tag() calls
    return out


def _count(**deltas: int) -> None:
    with _COUNTERS_LOCK:
        for name, value in deltas.items():
            _COUNTERS[name] += value


def clear_caches() -> None:
    """Drop every cached footer and key column and reset the counters."""
    _FOOTERS.clear()
    _BLOOMS.clear()
    _KEYS.clear()
    with _COUNTERS_LOCK:
        _COUNTERS.update(dict.fromkeys(_COUNTER_NAMES, 0))


# ---------------------------------------------------------------------------------------- file I/O


@dataclass(frozen=True)
class FileFooter:
    """What the index needs from a base file's Parquet footer.

    The bloom filter is kept as its footer text (about 0.4 MB per 60000-key row) and parsed on use
    through a small cache of parsed filters: parsed, a row takes 2.6 MB (one bool byte per bit).
    """

    num_rows: int
    min_key: str | None  # both bounds or neither
    max_key: str | None
    bloom_text: str | None = None  # base64 footer value
    bloom_type: str | None = None  # hoodie_bloom_filter_type_code (None: SIMPLE)

    @property
    def nbytes(self) -> int:
        return 200 + len(self.min_key or "") + len(self.max_key or "") + len(self.bloom_text or "")

    @property
    def range_usable(self) -> bool:
        """Bounds present and free of characters >= U+E000 (where byte and UTF-16 order may differ)."""
        if self.min_key is None or self.max_key is None:
            return False
        return max(self.min_key + self.max_key, default="\0") < "\ue000"

    def bloom(self, cache_key: Hashable | None = None) -> BloomFilter | None:
        """The parsed bloom filter, or None if the file has none (or an unreadable one)."""
        if not self.bloom_text:
            return None
        if cache_key is not None:
            cached = _BLOOMS.get(cache_key)
            if cached is not None:
                return cached if isinstance(cached, BloomFilter) else None
        try:
            bf: BloomFilter | None = BloomFilter.from_footer(self.bloom_text, self.bloom_type)
        except (HoodieTableError, ValueError):
            bf = None  # an unreadable filter only costs pruning, never correctness
        if cache_key is not None:
            size = bf.num_rows * bf.vector_size if bf is not None else 64
            _BLOOMS.put(cache_key, bf if bf is not None else False, size)
        return bf


def _footer_value(meta: dict[bytes, bytes], key: str) -> str | None:
    raw = meta.get(key.encode())
    return raw.decode("utf-8") if raw is not None else None


def read_footer(storage: Storage, rel_path: str) -> FileFooter:
    """Parse the footer entries of one base file (no caching)."""
    try:
        with storage.open_input_file(rel_path) as f:
            md = pq.read_metadata(f)
    except (OSError, pa.ArrowInvalid) as e:
        raise HoodieTableError(f"Cannot read the Parquet footer of {storage.full(rel_path)}: {e}") from e
    meta = md.metadata or {}
    lo, hi = _footer_value(meta, MIN_KEY_FOOTER_KEY), _footer_value(meta, MAX_KEY_FOOTER_KEY)
    if lo is None or hi is None:
        lo = hi = None  # Hudi needs both to prune by range
    raw = _footer_value(meta, BLOOM_FOOTER_KEY) or _footer_value(meta, LEGACY_BLOOM_FOOTER_KEY)
    return FileFooter(int(md.num_rows), lo, hi, raw or None, _footer_value(meta, BLOOM_TYPE_CODE_KEY))


def read_record_keys(storage: Storage, rel_path: str, key_generator: KeyGenerator | None = None) -> pa.Array:
    """The record keys of one base file as one string array (no caching): its `_hoodie_record_key`
    column, or with `key_generator` (a virtual-key table) the keys computed from its record key
    fields wherever that column is null."""
    try:
        with storage.open_input_file(rel_path) as f:
            pf = pq.ParquetFile(f)
            names = pf.schema_arrow.names
            if key_generator is not None:
                wanted = [RECORD_KEY_COLUMN, *key_source_columns(key_generator)]
                rows = pf.read(columns=[c for c in wanted if c in names], use_threads=False)
                return stored_record_keys(rows, key_generator)
            if RECORD_KEY_COLUMN not in names:
                raise HoodieTableError(
                    f"Base file {storage.full(rel_path)} has no {RECORD_KEY_COLUMN} column, so the record "
                    "index cannot find keys in it. Help: a table written with hoodie.populate.meta.fields=false "
                    "must say so in its hoodie.properties."
                )
            col = pf.read(columns=[RECORD_KEY_COLUMN], use_threads=False).column(0)
    except (OSError, pa.ArrowInvalid) as e:
        raise HoodieTableError(f"Cannot read the record keys of {storage.full(rel_path)}: {e}") from e
    keys = _as_string(col, f"{RECORD_KEY_COLUMN} of {storage.full(rel_path)}")
    if keys.null_count:
        raise HoodieTableError(
            f"Base file {storage.full(rel_path)} has {keys.null_count} null {RECORD_KEY_COLUMN} value(s) "
            "but the table's hoodie.properties does not say hoodie.populate.meta.fields=false: the record "
            "index needs the keys."
        )
    return keys


def cached_bloom(storage: Storage, rel_path: str) -> BloomFilter | None:
    """The parsed bloom filter of one base file through this process's caches (shared: copy it
    before adding keys), or None when the file has none or an unreadable one."""
    return cached_footer(storage, rel_path).bloom((storage.base_uri, rel_path))


def cached_footer(storage: Storage, rel_path: str) -> FileFooter:
    """The footer entries of one base file: from this process's cache, else the executor's
    (executor_cache.py), else read from storage (and then kept by both)."""
    return _FOOTERS.get((storage.base_uri, rel_path)) or _load_footer(storage, rel_path)


def _load_footer(storage: Storage, rel_path: str) -> FileFooter:
    """A footer missing from this process's cache, from the executor's or storage; kept."""
    key = (storage.base_uri, rel_path)
    shared = executor_cache()
    if shared is None:
        ft = read_footer(storage, rel_path)
    else:
        ft = FileFooter(**shared.footer(key, lambda: asdict(read_footer(storage, rel_path))))
    _FOOTERS.put(key, ft, ft.nbytes)
    return ft


def _load_record_keys(storage: Storage, rel_path: str, key_generator: KeyGenerator | None) -> pa.Array:
    """The record keys of one base file (read_record_keys) missing from this process's cache, from
    the executor's cache (memory-mapped: the executor's workers share one copy) or storage; kept."""
    key = (storage.base_uri, rel_path)
    shared = executor_cache()
    if shared is None:
        arr = read_record_keys(storage, rel_path, key_generator)
    else:
        virtual = key_generator is not None  # keys derived from the record key fields
        arr = shared.key_column((*key, virtual), lambda: read_record_keys(storage, rel_path, key_generator))
    _KEYS.put(key, arr, arr.nbytes)
    return arr


def _as_string(values: pa.Array | pa.ChunkedArray, what: str) -> pa.Array:
    """One contiguous pa.string() array (the type both join sides must share)."""
    return as_strings(values, what, large_ok=False)


def _through(
    cache: LRUCache, wanted: list[tuple[int, Hashable]], load: Callable[[int], Any]
) -> dict[int, Any]:
    """The values of `wanted` (file index, cache key): this process's hits first, then the
    misses loaded in parallel (`load` keeps them in the caches)."""
    out: dict[int, Any] = {}
    missing = []
    for i, key in wanted:
        value = cache.get(key)
        if value is None:
            missing.append(i)
        else:
            out[i] = value
    out.update(zip(missing, _parallel(load, missing), strict=True))
    return out


def _parallel(fn: Callable[[Any], Any], items: list) -> list:
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(IO_THREADS, len(items))) as pool:
        return list(pool.map(fn, items))


# ------------------------------------------------------------------------------------------- index


class KeyIndex:
    """Tags incoming record keys with the file group that holds them (BLOOM / GLOBAL_BLOOM).

    Built on the driver from ``FileSystemView.latest_base_files()`` and shipped to tasks: it pickles as
    its storage URI, the base file list and the flag (a few hundred bytes per file); the lookup arrays
    are derived again when unpickled.  Footers and key columns come from the process-wide caches.
    """

    def __init__(
        self,
        storage: Storage,
        base_files: list[BaseFile],
        global_index: bool = False,
        key_generator: KeyGenerator | None = None,
        use_metadata: bool = False,
    ):
        self.storage = storage
        self.base_files = list(base_files)
        self.global_index = bool(global_index)
        # set for a virtual-key table (hoodie.populate.meta.fields=false): stored keys are computed
        self.key_generator = key_generator
        # hoodie.bloom.index.use.metadata: key ranges and bloom filters from the metadata table
        # (index/metadata_footers.py), its partitions loaded on first use
        self.use_metadata = bool(use_metadata)
        self._prepare()

    def __getstate__(self) -> dict:
        return {"storage": self.storage, "base_files": self.base_files, "global_index": self.global_index,
                "key_generator": self.key_generator, "use_metadata": self.use_metadata}  # fmt: skip

    def __setstate__(self, state: dict) -> None:
        self.storage = state["storage"]
        self.base_files = state["base_files"]
        self.global_index = state["global_index"]
        self.key_generator = state.get("key_generator")
        self.use_metadata = state.get("use_metadata", False)
        self._prepare()

    def _prepare(self) -> None:
        # Position in self._files is the tie-break rank: newest base instant last.
        self._files = sorted(self.base_files, key=lambda b: (b.instant, b.partition_path, b.file_id))
        self._file_ids = pa.array([b.file_id for b in self._files], pa.string())
        self._file_parts = pa.array([b.partition_path for b in self._files], pa.string())
        self._file_instants = pa.array([b.instant for b in self._files], pa.string())
        parts = sorted({b.partition_path for b in self._files})
        self._partitions = pa.array(parts, pa.string())
        code = {p: i for i, p in enumerate(parts)}
        self._file_part_code = np.array([code[b.partition_path] for b in self._files], np.int32)
        self._files_by_part: list[list[int]] = [[] for _ in parts]
        for i, b in enumerate(self._files):
            self._files_by_part[code[b.partition_path]].append(i)
        self._metadata: MetadataIndexFiles | None = None
        self._from_metadata: set[int] = set()  # files whose footer entries came from the metadata table

    def _cache_key(self, i: int) -> tuple[str, str]:
        return (self.storage.base_uri, self._files[i].path)

    # -- public ------------------------------------------------------------------------------

    def tag(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> TagResult:
        """Locate every key; `partition_paths` (the records' partitions) scope BLOOM, GLOBAL ignores them."""
        n = len(keys)
        rec, fil, _ = self._pairs(keys, partition_paths)
        file_of = np.full(n, -1, np.int32)
        # Several files per key: the highest rank (newest base instant) wins.
        np.maximum.at(file_of, rec, fil)
        return self._result(file_of, n)

    def locate(self, keys: pa.Array, partition_paths: pa.Array | None = None) -> Locations:
        """Every file group holding each key (see `Locations`); `partition_paths` as in `tag`."""
        n = len(keys)
        rec, fil, copies = self._pairs(keys, partition_paths)
        found = np.zeros(n, dtype=bool)
        found[rec] = True
        missing = np.flatnonzero(~found)
        record = np.concatenate([rec, missing])
        file_of = np.concatenate([fil, np.full(len(missing), -1, np.int32)])
        order = np.argsort(record, kind="stable")
        repeated = self._file_ids.take(pa.array(np.unique(fil[copies > 1]))) if (copies > 1).any() else None
        return Locations(
            record=record[order],
            tags=self._result(file_of[order], len(record)),
            repeated=repeated if repeated is not None else pa.array([], pa.string()),
        )

    def _pairs(
        self, keys: pa.Array, partition_paths: pa.Array | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The distinct (record, file) pairs where a file holds a record's key, and how many times."""
        keys = _as_string(keys, "record keys")
        if keys.null_count:
            raise HoodieKeyError(
                f"{keys.null_count} null record key(s) given to the index. "
                "Help: every record needs a non-null record key."
            )
        groups, codes = self._groups(keys, partition_paths)
        chosen = self._choose_files(keys, groups)
        return self._exact_match(keys, codes, chosen)

    def stored_values(
        self, keys: pa.Array, file_ids: pa.Array, column: str, value_type: pa.DataType
    ) -> pa.Array:
        """The stored `column` value of each found key (`file_ids`: where `tag` found it), null where
        the file lacks the column.  Reads only that column of the files named (their key columns
        come from the cache `tag` filled): a global index needs the stored ordering value to decide
        whether a record that changes its partition beats the stored one (then it moves) or not.
        A key stored more than once in its file (bulk_insert and insert keep duplicates): the least
        value of its copies (a null first), the copy an incoming record beats most easily."""
        n = len(keys)
        out = pa.nulls(n, value_type)
        if n == 0:
            return out
        keys = _as_string(keys, "record keys")
        file_ids = _as_string(file_ids, "file ids")
        rank = {b.file_id: i for i, b in enumerate(self._files)}
        enc = pc.dictionary_encode(file_ids)
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        files = [rank[f] for f in enc.dictionary.to_pylist()]
        key_cols = self._key_columns(files)

        def read(j: int) -> pa.Array:
            # cached beside the key columns (base files never change): a stream's micro-batches
            # look up the same files again and again
            path = self._files[files[j]].path
            cache_key = (self.storage.base_uri, path, column)
            cached = _KEYS.get(cache_key)
            if cached is None:
                cached = self._read_column(path, column, value_type)
                _KEYS.put(cache_key, cached, cached.nbytes)
            return cached if cached.type == value_type else pc.cast(cached, value_type)

        # per file (not per record) its values; each record's row in its file by one hash join built
        # on the records (the small side), as in _exact_match: no hash table over the files' keys
        values = _parallel(read, list(range(len(files))))
        arrays = [key_cols[i] for i in files]
        lengths = np.array([len(a) for a in arrays], np.int64)
        probe = pa.table(
            {
                "k": pa.chunked_array(arrays, pa.string()),
                "f": np.repeat(np.arange(len(files), dtype=np.int64), lengths),
                "row": np.arange(int(lengths.sum()), dtype=np.int64),
            }
        )
        build = pa.table({"k": keys, "f": codes, "i": np.arange(n, dtype=np.int64)})
        joined = probe.join(build, keys=["k", "f"], join_type="inner", use_threads=True)
        stacked = pa.concat_arrays([v.cast(value_type) for v in values])
        rec = np.asarray(joined.column("i").to_numpy(), dtype=np.int64)
        row = np.asarray(joined.column("row").to_numpy(), dtype=np.int64)
        if len(rec) and np.bincount(rec, minlength=n).max() > 1:  # a key twice in its file: the least
            ranked = pa.table({"i": rec, "v": stacked.take(pa.array(row))})
            by = [("i", "ascending"), ("v", "ascending", "at_start")]
            order = np.asarray(pc.sort_indices(ranked, sort_keys=by).to_numpy(), dtype=np.int64)
            rec, row = rec[order], row[order]
            first = np.ones(len(rec), dtype=bool)
            first[1:] = rec[1:] != rec[:-1]
            rec, row = rec[first], row[first]
        at = np.full(n, -1, np.int64)
        at[rec] = row
        return stacked.take(pa.array(at, mask=at < 0))

    def _read_column(self, path: str, column: str, value_type: pa.DataType) -> pa.Array:
        try:
            with self.storage.open_input_file(path) as f:
                pf = pq.ParquetFile(f)
                if column not in pf.schema_arrow.names:
                    return pa.nulls(pf.metadata.num_rows, value_type)
                vals = pf.read(columns=[column], use_threads=False).column(0)
        except (OSError, pa.ArrowInvalid) as e:
            raise HoodieTableError(f"Cannot read {column} of {self.storage.full(path)}: {e}") from e
        return pc.cast(vals, value_type).combine_chunks()

    # -- steps -------------------------------------------------------------------------------

    def _groups(
        self, keys: pa.Array, partition_paths: pa.Array | None
    ) -> tuple[list[tuple[np.ndarray | None, list[int]]], np.ndarray | None]:
        """(record indices or None for all, candidate file indices) per partition; and partition codes."""
        n = len(keys)
        if self.global_index:
            return ([(None, list(range(len(self._files))))] if self._files and n else []), None
        if partition_paths is None:
            raise ValueError("partition_paths are required by the partition-scoped (non-global) index")
        parts = _as_string(partition_paths, "partition paths")
        if len(parts) != n:
            raise ValueError(f"{len(parts)} partition paths for {n} record keys")
        if parts.null_count:
            raise HoodieKeyError(
                f"{parts.null_count} null partition path(s) given to the index. "
                "Help: non-partitioned tables use the empty partition path ''."
            )
        codes = pc.index_in(parts, value_set=self._partitions).fill_null(-1).to_numpy(zero_copy_only=False)
        codes = codes.astype(np.int32, copy=False)
        order = np.argsort(codes, kind="stable")
        sorted_codes = codes[order]
        present, starts = np.unique(sorted_codes, return_index=True)
        ends = np.r_[starts[1:], n]
        groups = []
        # not strict: with no keys, ends is [n] and the others are empty
        for c, s, e in zip(present.tolist(), starts.tolist(), ends.tolist(), strict=False):
            if c >= 0:
                groups.append((order[s:e] if e - s < n else None, self._files_by_part[c]))
        return groups, codes

    def _footers(self, idx: Iterable[int]) -> dict[int, FileFooter]:
        wanted = list(idx)
        out: dict[int, FileFooter] = {}
        if self.use_metadata and wanted:
            out = self._metadata_footers(wanted)
        rest = [i for i in wanted if i not in out]
        out.update(
            _through(
                _FOOTERS,
                [(i, self._cache_key(i)) for i in rest],
                lambda j: _load_footer(self.storage, self._files[j].path),
            )  # fmt: skip
        )
        return out

    def _metadata_files(self) -> MetadataIndexFiles:
        if self._metadata is None:
            self._metadata = load_metadata_index_files(self.storage)
        return self._metadata

    def _metadata_footers(self, idx: list[int]) -> dict[int, FileFooter]:
        """Row counts and key ranges of the files the column_stats partition has statistics of
        (index/metadata_footers.py), without their bloom filters (`_blooms` looks those up); kept in
        the footer cache under a key of their own (a file's statistics never change)."""
        out: dict[int, FileFooter] = {}
        missing = []
        for i in idx:
            cached = _FOOTERS.get((*self._cache_key(i), "metadata"))
            if cached is not None:
                out[i] = cached
            else:
                missing.append(i)
        if missing:
            ranges = file_ranges(self.storage, self._metadata_files(), [self._files[i] for i in missing])
            for i, rng in zip(missing, ranges, strict=True):
                if rng is not None:
                    ft = FileFooter(rng.num_rows, rng.min_key, rng.max_key)
                    _FOOTERS.put((*self._cache_key(i), "metadata"), ft, ft.nbytes)
                    out[i] = ft
        self._from_metadata.update(out)
        _count(files_ranged_from_metadata=len(out))
        return out

    def _blooms(self, idx: list[int], footers: dict[int, FileFooter]) -> dict[int, BloomFilter | None]:
        """The parsed bloom filters of files `idx`: from the metadata table's bloom_filters partition
        (hoodie.bloom.index.use.metadata) where the footer's are not at hand, else the footer's; kept
        in the parsed-filter cache (the two are the same filter)."""
        out: dict[int, BloomFilter | None] = {}
        lookup = []
        for i in idx:
            key = self._cache_key(i)
            if self.use_metadata and not footers[i].bloom_text and not _BLOOMS.contains(key):
                lookup.append(i)
            else:
                out[i] = (
                    footers[i].bloom(key) if footers[i].bloom_text else cached_bloom(self.storage, key[1])
                )
        if lookup:
            found = bloom_filters(self.storage, self._metadata_files(), [self._files[i] for i in lookup])
            _count(blooms_from_metadata=sum(b is not None for b in found))
            for i, bf in zip(lookup, found, strict=True):
                key = self._cache_key(i)
                if bf is None:  # no record: the footer's (Java fails here; the footer is never wrong)
                    out[i] = cached_bloom(self.storage, key[1])
                else:
                    _BLOOMS.put(key, bf, bf.num_rows * bf.vector_size)
                    out[i] = bf
        return out

    def _choose_files(self, keys: pa.Array, groups: list[tuple[np.ndarray | None, list[int]]]) -> list[int]:
        """Files that may hold at least one key of their group (range, then bloom where it pays).
        Two passes: the ranges name the files whose bloom filter is worth probing, and those filters
        are fetched together (point look-ups in the metadata table, or footers)."""
        footers = self._footers(sorted({i for _, idx in groups for i in idx}))
        local = self.storage.is_local
        plans = []
        probe: set[int] = set()
        for rec_idx, file_idx in groups:
            live = [i for i in file_idx if footers[i].num_rows > 0]
            if not live:
                continue
            gkeys = keys if rec_idx is None else keys.take(pa.array(rec_idx))
            masks = _range_masks(gkeys, [footers[i] for i in live])
            empty_keys = None
            entries = []
            range_pruned = 0
            for i, mask in zip(live, masks, strict=True):
                ft = footers[i]
                n_cand = len(gkeys) if mask is None else int(np.count_nonzero(mask))
                if n_cand == 0:
                    range_pruned += 1
                    continue
                ratio = BLOOM_RATIO_LOCAL if local else BLOOM_RATIO_REMOTE
                use_bloom = n_cand <= max(BLOOM_MIN_KEYS, ratio * ft.num_rows)
                use_bloom = use_bloom and not _KEYS.contains(self._cache_key(i))
                if use_bloom and (ft.bloom_text or i in self._from_metadata):
                    if empty_keys is None:
                        empty_keys = np.asarray(pc.equal(pc.binary_length(gkeys), 0))
                    # Hudi's bloom filter rejects empty keys: with one among the candidates, skip the
                    # bloom and let the exact check decide.
                    use_bloom = not (empty_keys.any() if mask is None else empty_keys[mask].any())
                else:
                    use_bloom = False
                if use_bloom:
                    probe.add(i)
                entries.append((i, mask, n_cand, use_bloom))
            plans.append((gkeys, entries, range_pruned))
        blooms = self._blooms(sorted(probe), footers)
        chosen: list[int] = []
        for gkeys, entries, range_pruned in plans:
            bloom_pruned = bloom_keys = 0
            for i, mask, n_cand, use_bloom in entries:
                bloom = blooms.get(i) if use_bloom else None
                if bloom is not None:
                    cand = gkeys if mask is None else gkeys.filter(pa.array(mask))
                    bloom_keys += n_cand
                    if not bloom.might_contain(cand).any():
                        bloom_pruned += 1
                        continue
                chosen.append(i)
            _count(
                files_range_pruned=range_pruned,
                files_bloom_pruned=bloom_pruned,
                bloom_keys_checked=bloom_keys,
            )
        _count(files_probed=len(chosen))
        return chosen

    def _key_columns(self, idx: list[int]) -> dict[int, pa.Array]:
        def load(j: int) -> pa.Array:
            return _load_record_keys(self.storage, self._files[j].path, self.key_generator)

        return _through(_KEYS, [(i, self._cache_key(i)) for i in idx], load)

    def _exact_match(
        self, keys: pa.Array, codes: np.ndarray | None, chosen: list[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(record, index into self._files, rows of that file holding the key) of every distinct
        pair where a file holds a record's key, via one hash join."""
        n = len(keys)
        none = np.zeros(0, np.int64)
        if not chosen:
            return none, none.astype(np.int32), none
        columns = self._key_columns(chosen)
        arrays = [columns[i] for i in chosen]
        lengths = np.array([len(a) for a in arrays], np.int64)
        chosen_arr = np.array(chosen, np.int32)
        probe = {"k": pa.chunked_array(arrays, pa.string()), "f": np.repeat(chosen_arr, lengths)}
        if codes is None:
            build = pa.table({"k": keys, "i": np.arange(n, dtype=np.int64)})
            join_keys = ["k"]
        else:
            eligible = np.flatnonzero(codes >= 0)
            build = pa.table({"k": keys.take(pa.array(eligible)), "p": codes[eligible], "i": eligible})
            probe["p"] = np.repeat(self._file_part_code[chosen_arr], lengths)
            join_keys = ["k", "p"]
        # Acero builds its hash table on the right side: the incoming keys (usually the smaller side).
        joined = pa.table(probe).join(build, keys=join_keys, join_type="inner", use_threads=True)
        if not joined.num_rows:
            return none, none.astype(np.int32), none
        rec = joined.column("i").to_numpy().astype(np.int64)
        fil = joined.column("f").to_numpy().astype(np.int64)
        # a key stored twice in one file joins twice: count the copies per (record, file)
        pair, copies = np.unique(rec * len(self._files) + fil, return_counts=True)
        return pair // len(self._files), (pair % len(self._files)).astype(np.int32), copies

    def _result(self, file_of: np.ndarray, n: int) -> TagResult:
        if n == 0 or not (file_of >= 0).any():
            nulls = pa.nulls(n, pa.string())
            return TagResult(nulls, nulls, nulls)
        idx = pa.array(file_of, mask=file_of < 0)
        return TagResult(self._file_ids.take(idx), self._file_parts.take(idx), self._file_instants.take(idx))


# ---------------------------------------------------------------------------------- range pruning


def _range_masks(keys: pa.Array, footers: list[FileFooter]) -> list[np.ndarray | None]:
    """Per file, bool mask of the keys within [min, max] (None: no usable range, every key).

    The distinct bounds of all files are sorted once; each key gets n_le = #bounds <= key with one
    binary search and n_lt = #bounds < key from it.  Then min_f <= key <=> n_le > a_f (a_f = #bounds <
    min_f) and key <= max_f <=> n_lt < c_f (c_f = #bounds <= max_f): integer comparisons per file.
    """
    usable = [ft.range_usable for ft in footers]
    if not any(usable):
        return [None] * len(footers)
    if not _HAS_SEARCH_SORTED:
        return [_range_mask_compare(keys, ft) if ok else None for ft, ok in zip(footers, usable, strict=True)]
    # Python orders str by code point, the same order as Arrow's bytewise UTF-8 comparison.
    bounds: list[str] = sorted(
        {
            b
            for ft, ok in zip(footers, usable, strict=True)
            if ok
            for b in (ft.min_key, ft.max_key)
            if b is not None
        }
    )
    barr = pa.array(bounds, pa.string())
    n_le = pc.search_sorted(barr, keys, side="right").to_numpy().astype(np.int32)
    # #bounds < key = #bounds <= key, less one where the key equals a bound (bounds are distinct).
    at = barr.take(pa.array(np.maximum(n_le - 1, 0)))
    n_lt = n_le - ((n_le > 0) & np.asarray(pc.equal(at, keys)))
    out: list[np.ndarray | None] = []
    for ft, ok in zip(footers, usable, strict=True):
        if not ok:
            out.append(None)
            continue
        a = bisect_left(bounds, ft.min_key or "")  # usable: both keys are set
        c = bisect_right(bounds, ft.max_key or "")
        out.append((n_le > a) & (n_lt < c))
    return out


def _range_mask_compare(keys: pa.Array, ft: FileFooter) -> np.ndarray:
    """The same mask with two vectorised string comparisons (pyarrow without search_sorted)."""
    lo = pc.greater_equal(keys, pa.scalar(ft.min_key, pa.string()))
    hi = pc.less_equal(keys, pa.scalar(ft.max_key, pa.string()))
    return np.asarray(pc.and_(lo, hi))
