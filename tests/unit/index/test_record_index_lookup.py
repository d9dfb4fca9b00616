"""Point look-ups in the record index (hoodie_sink/table/index/record_index_lookup.py) against a
Python dict model, on record indexes built with the format functions: several file groups, base
HFiles of many small blocks, several log files of upserts and deletes, blocks that readers must
not trust."""

from __future__ import annotations

import random
import uuid

import pyarrow as pa
import pytest

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.metadata_keys import TYPE_RECORD_INDEX, file_group_index
from hoodie_sink.table.format.metadata_records import (
    FILE_ID_ENCODING_RAW,
    MetadataRecord,
    RecordIndexInfo,
    encode_record,
    instant_epoch_ms,
)
from hoodie_sink.table.format.record_index_values import decode_locations
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.index import record_index_lookup
from hoodie_sink.table.index.record_index_files import load_record_index_files
from hoodie_sink.table.index.record_index_lookup import look_up
from hoodie_sink.table.storage import Storage
from tests.support.record_index import INIT, Location, RecordIndexBuilder, delete_block, upsert_block

GROUPS = 3
COMPACTION = "20260101000000000001"  # an MDT compaction (suffix 001) of data instant ...000
T = [f"2026010100000{i}000" for i in range(1, 6)]  # data instants t1..t5


@pytest.fixture(autouse=True)
def _fresh_caches():
    record_index_lookup.clear_caches()
    yield
    record_index_lookup.clear_caches()


def _locations(rng: random.Random, n: int) -> list[Location]:
    parts = ["sf", "nyc", "la", "city=ber/2024"]
    files = [f"{uuid.UUID(int=rng.getrandbits(128))}-{rng.randrange(3)}" for _ in range(6)]
    return [
        (rng.choice(parts), rng.choice(files), rng.choice(T[:1] + ["20251231235959999"])) for _ in range(n)
    ]


def _build(tmp_path, seed: int) -> tuple[Storage, dict[str, Location], set[str]]:
    """A record index of GROUPS file groups and the model of what a reader sees in it; also the
    keys that only untrusted blocks hold."""
    rng = random.Random(seed)
    b = RecordIndexBuilder(tmp_path, GROUPS, block_size=400)  # a few cells per block
    keys = [f"key-{rng.getrandbits(40):010x}" for _ in range(900)] + ["", "ü-ñ", "k\U0001f600"]
    locs = _locations(rng, 40)
    model = {k: rng.choice(locs) for k in keys}
    group = dict(zip(keys, b.group_of(keys).tolist(), strict=True))
    b.data_instant(T[0][:-3] + "000")  # the compaction's data instant
    # group 0 has only logs (its slice starts at the initialisation); the others a base file
    for g in range(1, GROUPS):
        b.base_file(g, COMPACTION, {k: v for k, v in model.items() if group[k] == g})
    base0 = {k: v for k, v in model.items() if group[k] == 0}
    b.data_instant(T[1])
    b.metadata_instant(T[1])
    b.log_file(0, INIT, [upsert_block(base0, T[1])])
    model_after = dict(model)
    untrusted: set[str] = set()
    for step, t in enumerate(T[2:], start=2):
        trusted = step != 3  # t3: a data instant that never completed
        b.data_instant(t, completed=trusted)
        b.metadata_instant(t)
        keys_now = list(model)
        moved = {k: rng.choice(locs) for k in rng.sample(keys_now, 60)}
        new = {f"new-{step}-{i}": rng.choice(locs) for i in range(40)}
        gone = rng.sample(keys_now, 50)
        for g in range(GROUPS):
            base_instant = INIT if g == 0 else COMPACTION
            ups = {k: v for k, v in (moved | new).items() if b.group_of([k])[0] == g}
            dels = [k for k in gone if group.get(k, b.group_of([k])[0]) == g]
            blocks = ([upsert_block(ups, t)] if ups else []) + ([delete_block(dels, t)] if dels else [])
            if blocks:
                b.log_file(g, base_instant, blocks)
        if trusted:
            model_after.update(moved | new)
            for k in gone:
                model_after.pop(k, None)
        else:
            untrusted |= set(new)
        model = dict(model_after) if trusted else model
    # an MDT deltacommit that did not complete: its data instant completed, its block must not count
    t6 = "20260101000006000"
    b.data_instant(t6)
    b.metadata_instant(t6, completed=False)
    late = {k: ("zz", str(uuid.UUID(int=1)) + "-0", T[0]) for k in list(model_after)[:30]}
    for g in range(GROUPS):
        ups = {k: v for k, v in late.items() if b.group_of([k])[0] == g}
        if ups:
            b.log_file(g, INIT if g == 0 else COMPACTION, [upsert_block(ups, t6)])
    return Storage(str(tmp_path)), model_after, untrusted


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_look_ups_match_the_model(tmp_path, seed):
    storage, model, untrusted = _build(tmp_path, seed)
    rng = random.Random(seed + 100)
    files = load_record_index_files(storage)
    assert files.file_group_count == GROUPS
    batch = rng.sample(sorted(model), 300) + sorted(untrusted)[:20] + ["absent-1", "absent-2"]
    batch += batch[:10]  # a key twice in a batch
    rng.shuffle(batch)
    got = look_up(storage, files, pa.array(batch, pa.string()))
    triples = list(
        zip(got.partition_path.to_pylist(), got.file_id.to_pylist(), got.instant.to_pylist(), strict=True)
    )
    for key, triple in zip(batch, triples, strict=True):
        want = model.get(key)
        assert (triple if triple[0] is not None else None) == want, key


def test_only_blocks_that_can_hold_the_keys_are_read(tmp_path):
    storage, model, _ = _build(tmp_path, 7)
    files = load_record_index_files(storage)
    one = [k for k in sorted(model) if k.startswith("key-") and file_group_index(k, GROUPS) != 0][:1]
    look_up(storage, files, pa.array(one, pa.string()))
    stats = record_index_lookup.cache_stats()
    assert stats["index_reads"] == 1 and stats["data_blocks_read"] >= 1
    smallest = min(g.base_size for g in files.file_groups if g.base_file is not None)
    # one key: one file group, one data block of its base file (of dozens), its index and trailer
    assert stats["data_blocks_read"] <= 2
    assert stats["base_bytes_read"] < smallest / 2
    # again: served by the caches (block and log files), nothing read
    before = stats["bytes_read"]
    look_up(storage, files, pa.array(one, pa.string()))
    assert record_index_lookup.cache_stats()["bytes_read"] == before


def test_every_block_is_read_at_most_once_for_a_large_batch(tmp_path):
    storage, model, _ = _build(tmp_path, 8)
    files = load_record_index_files(storage)
    got = look_up(storage, files, pa.array(sorted(model), pa.string()))
    assert got.file_id.null_count == 0
    stats = record_index_lookup.cache_stats()
    assert stats["data_blocks_cached"] == 0 and stats["index_reads"] == GROUPS - 1


def test_a_table_that_does_not_list_the_record_index_is_refused(tmp_path):
    RecordIndexBuilder(tmp_path, 2, listed=False)
    with pytest.raises(HoodieTableError, match="hoodie.table.metadata.partitions"):
        load_record_index_files(Storage(str(tmp_path)))


def test_file_ids_decode_as_hudi_encodes_them():
    bare = str(uuid.UUID(int=(1 << 127) | 12345))
    raw = RecordIndexInfo(
        "p", None, None, None, "any-file-id_1", instant_epoch_ms(T[0]), FILE_ID_ENCODING_RAW
    )
    values = [
        encode_record(MetadataRecord("", TYPE_RECORD_INDEX, record_index=raw))[1],
        encode_record(_record(bare, -1))[1],
        encode_record(_record(bare, 7))[1],
        None,
    ]
    got = decode_locations(pa.array(values, pa.binary()))
    assert got.file_id.to_pylist() == ["any-file-id_1", bare, f"{bare}-7", None]
    assert got.instant.to_pylist() == [T[0], T[0], T[0], None]


def _record(file_uuid: str, index: int) -> MetadataRecord:
    raw = uuid.UUID(file_uuid).int
    hi, lo = raw >> 64, raw & (2**64 - 1)
    hi, lo = (hi - 2**64 if hi >= 2**63 else hi), (lo - 2**64 if lo >= 2**63 else lo)
    info = RecordIndexInfo("p", hi, lo, index, "", instant_epoch_ms(T[0]))
    return MetadataRecord("", TYPE_RECORD_INDEX, record_index=info)


@pytest.mark.parametrize("fixture", ["cow_mdt_v6", "mor_mdt_v6"])
def test_a_record_index_written_by_java_finds_every_key(tmp_path, fixture):
    """Hudi 0.15's record index (tests/fixtures/metadata-tables: base files after its compactions,
    log blocks of inserts and a delete): every live key found where the snapshot has it, the
    deleted one and an unknown one not."""
    from hoodie_sink.table.read.snapshot import read_snapshot
    from tests.support.tables import unzip_metadata_fixture

    path = unzip_metadata_fixture(fixture, tmp_path)
    snap = read_snapshot(str(path))
    keys = snap.column("_hoodie_record_key").to_pylist()
    want = {
        k: (p, n.lstrip(".").split("_")[0])
        for k, p, n in zip(
            keys,
            snap.column("_hoodie_partition_path").to_pylist(),
            snap.column("_hoodie_file_name").to_pylist(),
            strict=True,
        )
    }
    storage = Storage(str(path))
    files = load_record_index_files(storage)
    assert files.file_group_count == 10  # Hudi's minimum for a small table
    got = look_up(storage, files, pa.array([*keys, "no-such-key"], pa.string()))
    pairs = list(zip(got.partition_path.to_pylist(), got.file_id.to_pylist(), strict=True))
    assert dict(zip(keys, pairs[:-1], strict=True)) == want
    assert pairs[-1] == (None, None)
    # inserting instants (archived ones among them: the fixture keeps 3-4 commits active)
    latest = max(i.timestamp for i in Timeline.load(storage).instants)
    assert all(len(t) == 17 and t <= latest for t in got.instant.drop_null().to_pylist())
