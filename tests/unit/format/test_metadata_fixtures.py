"""Every metadata-table file Hudi 0.15.0 wrote (tests/fixtures/metadata-tables), read with our
decoders: cells re-encode to the same bytes, keys and file groups recompute, and the merged
`files` listing is what the data partitions hold."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.hfile import HBASE_FILE_INFO_KEYS, HFileReader
from hoodie_sink.table.format.log_format import DELETE_BLOCK, HFILE_DATA_BLOCK, encode_block
from hoodie_sink.table.format.metadata_blocks import (
    SCHEMA_FILE_INFO,
    metadata_data_block,
    metadata_delete_block,
    metadata_hfile,
    read_metadata_hfile,
    read_metadata_log,
)
from hoodie_sink.table.format.metadata_instants import valid_instants
from hoodie_sink.table.format.metadata_keys import (
    ALL_PARTITIONS_KEY,
    BLOOM_FILTERS,
    COLUMN_STATS,
    FILES,
    RECORD_INDEX,
    TYPE_FILE_LIST,
    bloom_filter_key,
    column_stats_key,
    file_group_index,
    file_group_indexes,
)
from hoodie_sink.table.format.metadata_layout import (
    DEFAULT_FILE_GROUPS,
    metadata_file_id,
    parse_metadata_base_file_name,
)
from hoodie_sink.table.format.metadata_merge import live_files, merge_slice
from hoodie_sink.table.format.metadata_records import MetadataRecord
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA_JSON
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from tests.support.tables import METADATA_FIXTURE_NAMES as MDT_TABLES
from tests.support.tables import unzip_metadata_fixture as unzip_mdt_table

META = ".hoodie/metadata"


@pytest.fixture(scope="module", params=MDT_TABLES)
def table(request, tmp_path_factory) -> Path:
    return unzip_mdt_table(request.param, tmp_path_factory.mktemp(request.param))


def _files(table: Path, partition: str) -> list[Path]:
    return sorted(p for p in (table / META / partition).iterdir() if p.name != ".hoodie_partition_metadata")


def _all_records(table: Path) -> list[tuple[str, str, MetadataRecord]]:
    """(partition, file name, record) of every cell of every base file and data block."""
    out = []
    for part in (p.name for p in (table / META).iterdir() if p.name != ".hoodie"):
        for f in _files(table, part):
            if f.name.endswith(".hfile"):
                out += [(part, f.name, r) for r in read_metadata_hfile(f.read_bytes(), str(f))]
            else:
                for block in read_metadata_log(f.read_bytes(), str(f)):
                    out += [(part, f.name, r) for r in block.records]
    return out


def test_every_log_file_re_encodes_byte_for_byte(table, java_deflate):
    count = 0
    for part in (p for p in (table / META).iterdir() if p.name != ".hoodie"):
        for f in _files(table, part.name):
            if f.name.endswith(".hfile"):
                continue
            blocks = read_metadata_log(f.read_bytes(), str(f))
            if [b.block_type for b in blocks] == [DELETE_BLOCK] and not blocks[0].deleted_keys:
                continue  # the placeholder: test_metadata_layout
            ours = b"".join(
                encode_block(
                    metadata_data_block(b.records, b.instant)
                    if b.block_type == HFILE_DATA_BLOCK
                    else metadata_delete_block(b.deleted_keys, b.instant)
                )
                for b in blocks
            )
            assert ours == f.read_bytes(), f
            count += 1
    assert count > 5


def test_every_base_file_re_encodes_given_its_bloom_filter(table, java_deflate):
    for part in (p for p in (table / META).iterdir() if p.name != ".hoodie"):
        for f in (f for f in _files(table, part.name) if f.name.endswith(".hfile")):
            java = f.read_bytes()
            reader = HFileReader(java, name=f.name)
            assert reader.file_info[SCHEMA_FILE_INFO] == METADATA_RECORD_SCHEMA_JSON.encode()
            extra = {
                k: v
                for k, v in reader.file_info.items()
                if k not in HBASE_FILE_INFO_KEYS | {SCHEMA_FILE_INFO}
            }
            records = read_metadata_hfile(java, f.name)
            assert all(r.meta["_hoodie_file_name"] == f.name for r in records)
            bloom = {"bloomFilter": reader.meta_block("bloomFilter") or b""}
            assert metadata_hfile(records, f.name, file_info=extra, meta_blocks=bloom) == java, f


def test_keys_and_file_groups_recompute_for_every_record(table):
    records = _all_records(table)
    partitions = {n for _, _, r in records if r.key == ALL_PARTITIONS_KEY for n in r.files or {}}
    names = {
        (p, n) for _, _, r in records if r.type == TYPE_FILE_LIST for p in [r.key] for n in r.files or {}
    }
    bloom_keys = {bloom_filter_key(p, n) for p, n in names}
    seen = defaultdict(int)
    for part, file_name, r in records:
        fid = parse_metadata_base_file_name(file_name)[0] if file_name.endswith(".hfile") else None
        fid = fid or LogFile.parse(part, file_name).file_id
        groups = DEFAULT_FILE_GROUPS[part]
        assert metadata_file_id(part, file_group_index(r.key, groups)) == fid, (file_name, r.key)
        seen[part] += 1
        if part == FILES:
            assert r.key == ALL_PARTITIONS_KEY or r.key in partitions
        elif part == COLUMN_STATS:
            stats = r.column_stats
            # clean tombstones hash Java 0.15's cut file name: the key still matches the record's name
            assert any(r.key == column_stats_key(p, stats.file_name, stats.column_name) for p in partitions)
        elif part == BLOOM_FILTERS:
            assert r.key in bloom_keys
        else:
            assert part == RECORD_INDEX
            loc = r.record_index
            assert any(n.startswith(loc.location_file_id()) for p, n in names if p == loc.partition)
    keys = pa.array([r.key for _, _, r in records])
    for part in seen:
        mask = [p == part for p, _, _ in records]
        vector = file_group_indexes(keys.filter(pa.array(mask)), DEFAULT_FILE_GROUPS[part]).tolist()
        assert vector == [
            file_group_index(r.key, DEFAULT_FILE_GROUPS[part]) for p, _, r in records if p == part
        ]
    assert seen[FILES] > 0


def _completed(timeline: Path) -> set[str]:
    """Times of completed instants (`<t>.<action>`; MDT times have 20 digits, which
    Instant.parse, made for data timelines, does not take)."""
    out = set()
    for p in timeline.iterdir():
        time, _, action = p.name.partition(".")
        if p.is_file() and time.isdigit() and action in ("commit", "deltacommit", "clean", "replacecommit"):
            out.add(time)
    return out


def test_the_merged_files_listing_is_what_the_data_partitions_hold(table):
    """Latest slice of files-0000-0 (base of the last completed MDT compaction or init, its logs'
    blocks in instant order, only blocks a reader trusts) merged with our rules."""
    mdt_done = _completed(table / META / ".hoodie")
    data_timeline = Timeline.load(Storage(str(table)))
    valid = valid_instants(data_timeline, Timeline.load(Storage(str(table / META))), lambda i: [])
    files = _files(table, FILES)
    bases = [
        f for f in files if f.name.endswith(".hfile") and parse_metadata_base_file_name(f.name)[2] in mdt_done
    ]
    base = max(bases, key=lambda f: parse_metadata_base_file_name(f.name)[2])
    base_instant = parse_metadata_base_file_name(base.name)[2]
    base_records = {r.key: r for r in read_metadata_hfile(base.read_bytes(), base.name)}
    versions: dict[str, list[tuple[str, MetadataRecord | None]]] = defaultdict(list)
    for f in files:
        log = LogFile.parse(FILES, f.name)
        if log is None or log.base_instant != base_instant:
            continue
        for block in read_metadata_log(f.read_bytes(), f.name):
            if block.instant in mdt_done and block.instant in valid:
                for r in block.records:
                    versions[r.key].append((block.instant, r))
    merged = {
        key: merge_slice(base_records.get(key), [r for _, r in sorted(versions[key], key=lambda v: v[0])])
        for key in set(base_records) | set(versions)
    }
    listed_partitions = set(live_files(merged[ALL_PARTITIONS_KEY]))
    on_disk = {p.name for p in table.iterdir() if p.is_dir() and p.name != ".hoodie"}
    assert listed_partitions == on_disk
    for partition in on_disk:
        present = {
            p.name: p.stat().st_size
            for p in (table / partition).iterdir()
            if p.name != ".hoodie_partition_metadata"
        }
        assert live_files(merged[partition]) == present, partition
