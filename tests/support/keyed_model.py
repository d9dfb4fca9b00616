"""A plain-Python model of Hudi's keyed writes (upsert, delete) per index type, and a generator of
random batches for it: the oracle of the randomized model tests (engine API and Spark).

Hudi's semantics (0.14+), as the model implements them:
- a record's identity is its key under GLOBAL_BLOOM and the pair (key, partition value) under the
  partition-scoped indexes (BLOOM, BUCKET, SIMPLE);
- records of one identity in a batch are combined first (the highest ordering value wins; ties go
  to the later arrival), then against the stored record (ties go to the incoming one);
- GLOBAL_BLOOM: if the winner is an upsert whose partition differs from the stored one, with
  update.partition.path it moves (old copy deleted, winner inserted in its partition), without
  it the winner is written in the stored partition; if the stored record wins, nothing changes;
- `_hoodie_is_deleted` deletes by the ordering rule; the delete operation removes the identity
  whatever its ordering value (under a global index wherever the key is).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pyarrow as pa

SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64()),
                    ("_hoodie_is_deleted", pa.bool_())])  # fmt: skip
PARTITIONS = "abcd"

# index variants: (hoodie.index.type, hoodie.bloom.index.update.partition.path)
VARIANTS = [
    ("bloom", False), ("bucket", False), ("global_bloom", False), ("global_bloom", True), ("record_index", True),
]  # fmt: skip


OVERWRITE_WITH_LATEST = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"


def options_for(index: str, move: bool, commit_time: bool = False) -> dict[str, str]:
    payload = {"hoodie.datasource.write.payload.class": OVERWRITE_WITH_LATEST} if commit_time else {}
    return {
        **payload,
        "hoodie.table.name": "keyed",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.index.type": index,
        "hoodie.bloom.index.update.partition.path": str(move).lower(),
        # RECORD_INDEX: the metadata table's record index kept, its own move option (Hudi's)
        **(
            {
                "hoodie.metadata.enable": "true",
                "hoodie.metadata.record.index.enable": "true",
                "hoodie.record.index.update.partition.path": str(move).lower(),
            }
            if index == "record_index"
            else {}
        ),
        "hoodie.bucket.index.num.buckets": "3",
        # small files, so inserts (and moved records) are packed into existing file groups too
        "hoodie.parquet.max.file.size": str(600 * 1024),
        "hoodie.parquet.small.file.limit": str(550 * 1024),
    }


@dataclass
class KeyedModel:
    index: str
    move: bool = False
    # OverwriteWithLatestAvroPayload: the ordering value decides within a batch only; against the
    # stored record the incoming one always wins
    commit_time: bool = False
    rows: dict = field(default_factory=dict)  # identity -> (stored partition path, row)

    @property
    def is_global(self) -> bool:
        return self.index in ("global_bloom", "record_index")

    def identity(self, r: dict):
        return r["id"] if self.is_global else (r["id"], r["p"])

    def apply(self, batch: list[dict], operation: str = "upsert") -> None:
        """`batch` in arrival order (the engine's order of ties; the generator avoids ties)."""
        winners: dict = {}
        for rank, r in enumerate(batch):
            ident = self.identity(r)
            if ident not in winners or (r["ts"], rank) >= winners[ident][0]:
                winners[ident] = ((r["ts"], rank), r)
        for ident, (_, r) in winners.items():
            stored = self.rows.get(ident)
            if operation == "delete":
                self.rows.pop(ident, None)
                continue
            if stored is not None and not self.commit_time and stored[1]["ts"] > r["ts"]:
                continue  # the stored record wins: nothing changes, nothing moves
            if r["_hoodie_is_deleted"]:
                self.rows.pop(ident, None)
                continue
            keep_partition = stored is not None and self.is_global and not self.move
            self.rows[ident] = (stored[0] if keep_partition else r["p"], dict(r))

    def expected(self) -> list[dict]:
        return [row for _, row in self.rows.values()]

    def locations(self) -> list[tuple[str, str]]:
        """(record key, partition path) of every stored record, sorted."""
        return sorted((row["id"], part) for part, row in self.rows.values())


class BatchGenerator:
    """Random batches: updates of stored keys (10% of them with another partition value), new keys,
    duplicates of a key inside the batch (again 10% in another partition), late records (ordering
    values below the stored one), `_hoodie_is_deleted` rows.  Ordering values are unique, so the
    outcome does not depend on arrival order (Spark's partitioning is not the model's)."""

    def __init__(self, seed: int, key_space: int = 400):
        self.rng = random.Random(seed)
        self.key_space = key_space
        self.home: dict[str, str] = {}  # a key's current partition value in the generated data
        self.tick = 0

    def _ts(self) -> int:
        self.tick += 1
        late = self.rng.randrange(0, 3) * 400  # up to two "generations" late
        return (self.tick - late) * 1000 + self.tick % 1000

    def _partition(self, key: str) -> str:
        p = self.home.get(key)
        if p is None or self.rng.random() < 0.1:
            p = self.rng.choice([q for q in PARTITIONS if q != p])
            self.home[key] = p
        return p

    def upserts(self, n: int, stored_keys: list[str]) -> list[dict]:
        rows: list[dict] = []
        for _ in range(n):
            if rows and self.rng.random() < 0.15:
                k = self.rng.choice(rows)["id"]  # a duplicate inside the batch
            elif stored_keys and self.rng.random() < 0.5:
                k = self.rng.choice(stored_keys)
            else:
                k = f"k{self.rng.randrange(self.key_space):04d}"
            rows.append({"id": k, "p": self._partition(k), "ts": self._ts(), "v": self.rng.randrange(10**6),
                         "_hoodie_is_deleted": self.rng.random() < 0.1})  # fmt: skip
        return rows

    def deletes(self, n: int, model: KeyedModel) -> list[dict]:
        """Delete-operation input: stored records (under a global index sometimes named with another
        partition value), keys not in the table, and a key twice."""
        stored = [row for _, row in model.rows.values()]
        rows = []
        for _ in range(n):
            if stored and self.rng.random() < 0.8:
                r = dict(self.rng.choice(stored))
                if model.is_global and self.rng.random() < 0.2:
                    r["p"] = self.rng.choice(PARTITIONS)  # a global delete finds the key anywhere
            else:
                r = {"id": f"z{self.rng.randrange(self.key_space):04d}", "p": self.rng.choice(PARTITIONS),
                     "v": 0, "_hoodie_is_deleted": False}  # fmt: skip
            r["ts"] = self._ts()
            rows.append(r)
        return rows


def assert_locations(table: pa.Table, model: KeyedModel) -> None:
    """The table's (record key, partition path) pairs are the model's; under a global index a key
    is in one partition only."""
    meta = ("_hoodie_record_key", "_hoodie_partition_path")
    got = sorted(zip(*(table.column(c).to_pylist() for c in meta), strict=True))
    assert got == model.locations()
    if model.is_global:
        keys = [k for k, _ in got]
        assert len(keys) == len(set(keys)), "a key is in two partitions of a global-index table"


def next_batch(
    gen: BatchGenerator,
    model: KeyedModel,
    rng: random.Random,
    operation: str,
    deletes: int,
    upserts: tuple[int, int],
) -> list[dict]:
    """The next commit's input: `deletes` delete-operation rows, or a random number of upserts."""
    if operation == "delete":
        return gen.deletes(deletes, model)
    stored_keys = sorted({row["id"] for _, row in model.rows.values()})
    return gen.upserts(rng.randrange(*upserts), stored_keys)
