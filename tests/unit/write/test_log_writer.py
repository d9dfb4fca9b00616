"""Log files written from records encoded for many files at once are the files written one by one."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie_sink.table.format import log_format
from hoodie_sink.table.format.file_group import SliceFiles
from hoodie_sink.table.format.schema import arrow_to_avro, avro_schema_json, with_meta_fields
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.log_writer import LogWrite, encode_log_upserts, write_log_file
from hoodie_sink.table.write.merge import DELETE, KEY, KIND, ORDER, PART, SOFT_DELETE, UPSERT

DATA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("fare", pa.float64()), ("note", pa.string())])
AVRO = avro_schema_json(with_meta_fields(arrow_to_avro(DATA, "trips")))
INSTANT = "20261125120000000"


def changes(rng: np.random.Generator, n: int, kinds: list[int], part: str) -> pa.Table:
    ids = [f"k{rng.integers(1_000_000)}-{i}" for i in range(n)]
    notes = pa.array([None if rng.random() < 0.3 else f"n{i}" for i in range(n)], pa.string())
    return pa.table({
        "id": ids, "ts": rng.integers(0, 10**12, n), "fare": rng.uniform(0, 100, n), "note": notes,
        KEY: ids, PART: [part] * n, ORDER: np.arange(n, dtype=np.int64),
        KIND: pa.array(rng.choice(kinds, n).astype(np.int8)),
    })  # fmt: skip


def target(i: int, part: str) -> LogWrite:
    sl = SliceFiles(part, f"fg-{i}-0", "20261125110000000", f"fg-{i}-0_0-1-0_20261125110000000.parquet",
                    max_version=i)  # fmt: skip
    return LogWrite(sl, sl.max_version + 1, "3-7-1", INSTANT, 3)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_logs_encoded_together_equal_logs_encoded_alone(tmp_path, seed):
    rng = np.random.default_rng(seed)
    kinds = [[UPSERT], [UPSERT, DELETE, SOFT_DELETE], [DELETE], [UPSERT, SOFT_DELETE]]
    logs = [(target(i, f"p{i % 2}"), changes(rng, int(rng.integers(1, 200)), kinds[i % 4], f"p{i % 2}"))
            for i in range(9)]  # fmt: skip
    together, alone = Storage(str(tmp_path / "together")), Storage(str(tmp_path / "alone"))
    for (t, c), records in zip(logs, encode_log_upserts(logs, AVRO), strict=True):
        write_log_file(together, t, c, "ts", AVRO, records=records)
        write_log_file(alone, t, c, "ts", AVRO)
    for t, c in logs:
        a = (tmp_path / "together" / t.rel_path).read_bytes()
        b = (tmp_path / "alone" / t.rel_path).read_bytes()
        assert a == b, t.rel_path
        # the data block holds the upserts with Java's meta fields, numbered within the file
        upserts = c.filter(pc.equal(c.column(KIND), UPSERT))
        data = [b for b in log_format.read_blocks(a) if b.block_type == log_format.AVRO_DATA_BLOCK]
        if upserts.num_rows == 0:
            assert not data
            continue
        records = log_format.avro_records(data[0])
        assert [r["id"] for r in records] == upserts.column("id").to_pylist()
        assert [r["_hoodie_commit_seqno"] for r in records] == [
            f"{INSTANT}_3_{i}" for i in range(1, upserts.num_rows + 1)
        ]
        assert {r["_hoodie_file_name"] for r in records} == {t.slice.file_id}
