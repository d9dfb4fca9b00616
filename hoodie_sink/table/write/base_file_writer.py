"""Parquet base files: the five meta columns, footer bloom filter and key range, size rolling.

A `BaseFileWriter` writes one file version of one file group.  It streams Arrow chunks into
a pyarrow ParquetWriter and folds each chunk's record keys into the footer bloom filter, so a
file never has to be held in memory whole.  `RollingBaseFileWriter` opens a new file group
when the current file passes the maximum file size.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.table.format.bloom import (
    BLOOM_FOOTER_KEY,
    BLOOM_TYPE_CODE_KEY,
    MAX_KEY_FOOTER_KEY,
    MIN_KEY_FOOTER_KEY,
    BloomFilter,
)
from hoodie_sink.table.format.column_stats import column_stats_of_footer
from hoodie_sink.table.format.commit_metadata import NULL_COMMIT, WriteStat
from hoodie_sink.table.format.file_group import base_file_name, join_partition
from hoodie_sink.table.format.markers import CREATE, create_marker
from hoodie_sink.table.format.partition_metadata import ensure_partition_metadata
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.instant_guard import InstantGuard

COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME = META_COLUMNS


@dataclass(frozen=True)
class ParquetSettings:
    """How base files are written; built from the WriteConfig (parquet_settings_of), whose option
    registry holds the defaults."""

    compression: str
    max_file_size: int
    row_group_bytes: int
    bloom_type: str
    bloom_num_entries: int
    bloom_fpp: float
    bloom_max_entries: int
    # false: Hudi's virtual keys (hoodie.populate.meta.fields=false, format/virtual_keys.py)
    populate_meta_fields: bool
    # the metadata table keeps column_stats: the footer's statistics go with the write stat, computed
    # here where the footer was just closed (docs/design/metadata-table.md#column-statistics)
    column_stats_enable: bool
    column_stats_columns: tuple[str, ...]  # empty: every column
    # the metadata table keeps bloom_filters: the footer's filter goes with the write stat
    bloom_filters_enable: bool

    @property
    def codec(self) -> str:
        return "none" if self.compression == "none" else self.compression


def meta_schema() -> list[pa.Field]:
    return [pa.field(name, pa.string(), nullable=True) for name in META_COLUMNS]


def file_schema(data_schema: pa.Schema) -> pa.Schema:
    """The physical schema of a base file: meta columns, then the (storage-cast) data columns."""
    return pa.schema(meta_schema() + [f for f in data_schema if f.name not in META_COLUMNS])


class BaseFileWriter:
    """Writes one base file.  Records are given with their keys; meta columns are added here."""

    def __init__(
        self,
        storage: Storage,
        partition_path: str,
        file_id: str,
        token: str,
        instant: str,
        partition_id: int,
        schema: pa.Schema,
        avro_schema_with_meta: str,
        settings: ParquetSettings,
        prev_commit: str = NULL_COMMIT,
        io_type: str = CREATE,
        guard: InstantGuard | None = None,
        seed_bloom: BloomFilter | None = None,
    ):
        self.storage = storage
        self.partition_path = partition_path
        self.file_id = file_id
        self.instant = instant
        self.name = base_file_name(file_id, token, instant)
        self.rel_path = join_partition(partition_path, self.name)
        self.schema = schema
        self.settings = settings
        self.prev_commit = prev_commit
        self._seq_prefix = f"{instant}_{partition_id}_"
        self._rows = 0
        self._inserts = 0
        self._updates = 0
        self._min: str | None = None
        self._max: str | None = None
        self._bloom = new_bloom(settings)
        self._seeded = False
        if seed_bloom is not None and seed_bloom.same_shape(self._bloom):
            # A merge keeps the old version's filter and adds only the keys it inserts.
            self._seeded = True
            self._bloom = seed_bloom.grown_copy(settings.bloom_max_entries)
        self._started = time.monotonic()
        self.guard = guard
        if guard is not None:
            guard.check()  # never start a file for an instant that is gone
        ensure_partition_metadata(storage, partition_path, instant)
        create_marker(storage, instant, partition_path, self.name, io_type)
        self._sink = storage.open_output(self.rel_path)
        self._writer: pq.ParquetWriter | None = None  # opened by the first chunk (see _open)
        # The partition path and file name are one value per file: handed to Parquet as a
        # one-entry dictionary, they are written as dictionary indices without hashing every
        # row.  The file holds plain UTF8 columns either way (no Arrow schema is stored).
        self._write_schema = schema
        for name in (PARTITION_PATH, FILE_NAME):
            i = schema.get_field_index(name)
            self._write_schema = self._write_schema.set(i, schema.field(i).with_type(_DICT_STRING))
        self._avro = avro_schema_with_meta

    def _open(self, first: pa.Table | None) -> pq.ParquetWriter:
        self._writer = pq.ParquetWriter(
            self._sink,
            self._write_schema,
            compression=self.settings.codec,
            store_schema=False,  # Java files carry parquet.avro.schema, not ARROW:schema
            write_statistics=True,
            use_dictionary=dictionary_columns(first, self.schema),
        )
        return self._writer

    @property
    def bytes_written(self) -> int:
        return self._sink.tell()

    @property
    def num_rows(self) -> int:
        return self._rows

    @property
    def footer_bytes(self) -> int:
        """Estimated footer size: the base64 bloom filter dominates (~430 KB a 60k-key row)."""
        rows = max(self._bloom.num_rows, 1)
        return int(rows * ((self._bloom.vector_size + 7) // 8) * 4 / 3) + len(self._avro) + 4096

    def write(
        self,
        data: pa.Table,
        keys: pa.Array,
        commit_times: pa.Array | None = None,
        seqnos: pa.Array | None = None,
        num_updates: int = 0,
        bloom_keys: pa.Array | None = None,
    ) -> None:
        """Append rows.  `data` holds the data columns in file order (no meta columns).

        `commit_times`/`seqnos` are given for rows copied from an older file version (they keep
        their meta fields); None means every row is written by this instant.  `bloom_keys`: the
        keys the seed filter does not hold (default: all); ignored when the seed was not usable.
        """
        n = data.num_rows
        if n == 0:
            return
        if self.settings.populate_meta_fields:
            meta = [*self._commit_meta(n, commit_times, seqnos), keys, _constant(self.partition_path, n)]
        else:
            # Virtual keys: Java writes the columns, all null but the file name (see
            # format/virtual_keys.py), so readers find the schema they expect.
            meta = [pa.nulls(n, pa.string())] * 3 + [pa.nulls(n, _DICT_STRING)]
        cols = meta + [_constant(self.name, n)] + [data.column(i) for i in range(data.num_columns)]
        table = pa.Table.from_arrays(cols, schema=self._write_schema)
        (self._writer or self._open(table)).write_table(table, row_group_size=max(n, 1))
        self._rows += n
        self._updates += num_updates
        self._inserts += n - num_updates
        if self.settings.populate_meta_fields:
            self._index_keys(keys, bloom_keys)

    def _commit_meta(
        self, n: int, commit_times: pa.Array | None, seqnos: pa.Array | None
    ) -> tuple[pa.Array, pa.Array]:
        """Commit times and sequence numbers: kept ones, or this instant's for rows it writes."""
        if commit_times is None:
            commit_times = pa.repeat(pa.scalar(self.instant, pa.string()), n)
        if seqnos is None:
            idx = pc.cast(_arange(self._rows, n), pa.string())
            seqnos = pc.binary_join_element_wise(self._seq_prefix, idx, "")
        return commit_times, seqnos

    def _index_keys(self, keys: pa.Array, bloom_keys: pa.Array | None) -> None:
        """Fold keys into the footer's bloom filter and key range."""
        # bloom_keys only count when the filter was seeded (else it starts empty: every key goes in)
        self._bloom.add_keys(bloom_keys if bloom_keys is not None and self._seeded else keys)
        mm = pc.min_max(keys)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        self._min = lo if self._min is None or (lo is not None and lo < self._min) else self._min
        self._max = hi if self._max is None or (hi is not None and hi > self._max) else self._max

    def close(self) -> WriteStat:
        footer = {"parquet.avro.schema": self._avro, "writer.model.name": "avro"}
        key_footer = self._key_footer() if self.settings.populate_meta_fields else {}
        footer.update(key_footer)
        writer = self._writer or self._open(None)
        writer.add_key_value_metadata(footer)
        writer.close()
        self._sink.close()
        stat = self._stat()
        if self.settings.bloom_filters_enable and BLOOM_FOOTER_KEY in key_footer:
            # as the footer holds it (a virtual-key file has none, and gets no record, as in Java)
            stat.bloom_filter = (self._bloom.type_code, key_footer[BLOOM_FOOTER_KEY])
        if self.settings.column_stats_enable:
            stat.column_stats = tuple(
                column_stats_of_footer(
                    writer.writer.metadata, self.name, self.settings.column_stats_columns or None
                )
            )
        return stat

    def _key_footer(self) -> dict[str, str]:
        """Bloom filter and key range: Java writes them only with meta fields (a virtual-key
        table's footer has the Avro schema alone)."""
        footer = {BLOOM_FOOTER_KEY: self._bloom.to_base64()}
        if self._bloom.type_code == "DYNAMIC_V0":
            footer[BLOOM_TYPE_CODE_KEY] = "DYNAMIC_V0"
        if self._min is not None and self._max is not None:
            footer[MIN_KEY_FOOTER_KEY] = self._min
            footer[MAX_KEY_FOOTER_KEY] = self._max
        return footer

    def _stat(self) -> WriteStat:
        if self.guard is not None:
            # Finished after the write was aborted or committed without us: remove our file.
            self.guard.wrote(self.rel_path)
        size = self.storage.size(self.rel_path)
        elapsed = int((time.monotonic() - self._started) * 1000)
        return WriteStat(
            file_id=self.file_id,
            partition_path=self.partition_path,
            path=self.rel_path,
            prev_commit=self.prev_commit,
            num_writes=self._rows,
            num_inserts=self._inserts,
            num_update_writes=self._updates,
            total_write_bytes=size,
            file_size_in_bytes=size,
            create_time_ms=elapsed if self.prev_commit == NULL_COMMIT else 0,
            upsert_time_ms=elapsed if self.prev_commit != NULL_COMMIT else 0,
            min_record_key=self._min,
            max_record_key=self._max,
        )

    def write_all(self, data: pa.Table, keys: pa.Array, *args, **kwargs) -> WriteStat:
        """write() everything, then close(); on any failure abort() (the marker remains)."""
        try:
            self.write(data, keys, *args, **kwargs)
            return self.close()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Close without publishing anything useful (the marker lets rollback find the file)."""
        try:
            if self._writer is not None:
                self._writer.close()
        finally:
            self._sink.close()
            if self.guard is not None and not self.guard.alive():
                # The instant ended while we failed: its abort swept already, nobody will
                # come back for this file.
                self.storage.delete(self.rel_path)


# Dictionary encoding pays for columns with few distinct values; on a column of mostly distinct
# values (keys, coordinates, timestamps) the writer builds a dictionary, outgrows the dictionary
# page and falls back to plain encoding, which costs about half the encoding time of the file
# for a larger result.  The decision is taken per file from a sample of its first chunk.
DICTIONARY_SAMPLE_ROWS = 4096
DICTIONARY_MAX_DISTINCT_RATIO = 0.5


def dictionary_columns(sample: pa.Table | None, schema: pa.Schema) -> list[str]:
    """Columns worth dictionary-encoding: those whose sample is at most half distinct values.
    Without a sample, every column but the unique ones (record key, sequence number)."""
    unique = (RECORD_KEY, COMMIT_SEQNO)
    if sample is None or sample.num_rows == 0:
        return [n for n in schema.names if n not in unique]
    head = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    out = []
    for name in schema.names:
        if name in unique:
            continue
        col = head.column(name)
        t = col.type
        if (
            pa.types.is_dictionary(t)
            or pa.types.is_nested(t)
            or pa.types.is_boolean(t)
            or pa.types.is_null(t)
        ):
            out.append(name)  # let the writer choose (booleans are never dictionary-encoded)
            continue
        if pc.count_distinct(col, mode="all").as_py() <= DICTIONARY_MAX_DISTINCT_RATIO * head.num_rows:
            out.append(name)
    return out


_DICT_STRING = pa.dictionary(pa.int32(), pa.string())


def _constant(value: str, n: int) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def new_bloom(settings: ParquetSettings) -> BloomFilter:
    if settings.bloom_type == "dynamic_v0":
        return BloomFilter.new_dynamic(
            settings.bloom_num_entries, settings.bloom_fpp, settings.bloom_max_entries
        )
    return BloomFilter.new_simple(settings.bloom_num_entries, settings.bloom_fpp)


def _arange(start: int, n: int) -> pa.Array:
    import numpy as np

    return pa.array(np.arange(start, start + n, dtype=np.int64))


def _in_memory_bytes_per_row(data: pa.Table, keys: pa.Array) -> float:
    n = max(data.num_rows, 1)
    # meta columns: key twice-ish (key, seqno) plus the constant columns (dictionary-encoded)
    return max((data.nbytes + 2 * keys.nbytes) / n, 1.0)


def avro_with_meta_json(avro_with_meta: dict) -> str:
    return json.dumps(avro_with_meta, separators=(",", ":"))


class RollingBaseFileWriter:
    """Writes a stream of sorted chunks of one partition into files of at most max_file_size.

    Chunks are sized to what the file still has room for, by the bytes per row measured on
    the chunks written so far (at first by the in-memory size, an overestimate).
    """

    def __init__(self, new_writer: Callable[[], BaseFileWriter], settings: ParquetSettings):
        self._new_writer = new_writer
        self.settings = settings
        self.current: BaseFileWriter | None = None
        self.stats: list[WriteStat] = []
        self._bytes_per_row: float | None = None

    def write(
        self,
        data: pa.Table,
        keys: pa.Array,
        commit_times: pa.Array | None = None,
        seqnos: pa.Array | None = None,
    ) -> None:
        """`commit_times`/`seqnos`: meta fields kept from the rows' source (clustering), else new."""
        offset, n = 0, data.num_rows
        while offset < n:
            if self.current is None:
                self.current = self._new_writer()
            w = self.current
            # The footer (bloom filter) counts against the file size, but never below half of it.
            budget = max(self.settings.max_file_size - w.footer_bytes, self.settings.max_file_size // 2)
            room = budget - w.bytes_written
            # Until a chunk has been written, the in-memory size is the (pessimistic) estimate.
            bpr = self._bytes_per_row or _in_memory_bytes_per_row(data, keys)
            by_room = int(room / bpr)
            by_group = int(self.settings.row_group_bytes / bpr)
            take = max(1, min(n - offset, by_room, max(by_group, 1)))
            before = w.bytes_written
            w.write(
                data.slice(offset, take), keys.slice(offset, take),
                None if commit_times is None else commit_times.slice(offset, take),
                None if seqnos is None else seqnos.slice(offset, take),
            )  # fmt: skip
            written = w.bytes_written - before
            if take > 0 and written > 0:
                observed = written / take
                self._bytes_per_row = (
                    observed if self._bytes_per_row is None else 0.5 * self._bytes_per_row + 0.5 * observed
                )
            offset += take
            if w.bytes_written >= budget * 0.95:
                self.stats.append(w.close())
                self.current = None

    def write_all(
        self,
        data: pa.Table,
        keys: pa.Array,
        commit_times: pa.Array | None = None,
        seqnos: pa.Array | None = None,
    ) -> list[WriteStat]:
        """write() everything, then close(); on any failure abort() the open file."""
        try:
            self.write(data, keys, commit_times, seqnos)
            return self.close()
        except BaseException:
            self.abort()
            raise

    def close(self) -> list[WriteStat]:
        if self.current is not None:
            self.stats.append(self.current.close())
            self.current = None
        return self.stats

    def abort(self) -> None:
        if self.current is not None:
            self.current.abort()
            self.current = None


def parquet_settings_of(c: WriteConfig) -> ParquetSettings:
    return ParquetSettings(
        compression=c.compression,
        max_file_size=c.max_file_size,
        row_group_bytes=c.row_group_bytes,
        bloom_type=c.bloom_type,
        bloom_num_entries=c.bloom_num_entries,
        bloom_fpp=c.bloom_fpp,
        bloom_max_entries=c.bloom_max_entries,
        populate_meta_fields=c.populate_meta_fields,
        column_stats_enable=c.column_stats_enable,
        column_stats_columns=c.column_stats_columns,
        bloom_filters_enable=c.bloom_filters_enable,
    )
