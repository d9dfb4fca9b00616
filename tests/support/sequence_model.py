"""A plain-Python model of a Hudi table over a whole sequence of writes and table services, for the
randomized sequence test (tests/unit/test_random_sequences.py), and the generator of its steps.

It extends tests/support/keyed_model.py (the same identities, ordering rule and row shape) with what a
sequence needs:
- copies: `insert` and `bulk_insert` keep duplicate keys, as Hudi's do (no lookup, no combining), so
  an identity maps to a list of copies; an upsert merges with every copy, each by the ordering rule
  (Hudi's bloom index tags every file group that holds the key), a delete removes every copy;
- the commit time of every copy (`_hoodie_commit_time`: a write that does not change a copy, a late
  record that loses, leaves its commit time);
- the history: the state after each completed write, so time travel to any instant is the state
  after the newest write at or before it, an incremental read of (begin, end] is the state as of
  end restricted to copies committed in the range, and every state ever committed is known (the
  read-optimized invariant);
- the change feed: per write, its inserts, updates and deletes with before and after images;
- restore: the history after the savepoint is dropped, as if those writes had never happened.

Nothing here imports the engine: the instants are the only thing taken from the table under test
(the model needs the write's instant time to name commit times), never its data.

Semantics, as the README's "Operations", "Ordering" and "Index" sections state them:
- ordering: the highest precombine value wins, within a batch ties go to the later row, against a
  stored copy ties go to the incoming record; `_hoodie_is_deleted` deletes by the same rule;
- `insert` drops soft-deleted rows (Hudi's create handle writes no deleted record); `bulk_insert`
  keeps them as rows (what the engine does today, as Hudi's row-writer bulk insert, which does not
  look at the column);
- GLOBAL_BLOOM with update.partition.path: each copy is merged with the record on its own; a
  winner whose partition differs from a copy's deletes that copy (a copy that beats it stays) and is
  inserted once in its own partition (a delete then an insert in the change feed), unless a copy of
  the key is stored there already, which is merged with it in place (updated, or kept if it beats
  the record; docs/hudi/duplicate-keys.md); without update.partition.path the copy is updated where
  it is stored (its partition path stays; the row's partition column takes the incoming value);
- insert_overwrite replaces every copy stored in the partitions the batch writes to (the change
  feed: a delete of each replaced copy, an insert of each new row);
- compaction, clustering, cleaning, archival and savepoints change nothing a query sees.
"""

from __future__ import annotations

import copy as _copy
import random
from dataclasses import dataclass, field

from tests.support.keyed_model import PARTITIONS

DATA_COLUMNS = ("id", "p", "ts", "v", "_hoodie_is_deleted")


@dataclass
class Copy:
    partition: str  # the partition path it is stored in
    row: dict  # the data columns
    commit: str  # _hoodie_commit_time

    def key(self) -> tuple:
        """The copy as a read shows it: (partition path, commit time, data columns)."""
        return (self.partition, self.commit, *(self.row[c] for c in DATA_COLUMNS))


@dataclass
class SequenceModel:
    index: str  # bloom, global_bloom, bucket
    move: bool = False
    state: dict = field(default_factory=dict)  # identity -> [Copy]
    history: list = field(default_factory=list)  # [(instant, state)] of every completed write, in order

    @property
    def is_global(self) -> bool:
        return self.index in ("global_bloom", "record_index")

    def identity(self, r: dict):
        return r["id"] if self.is_global else (r["id"], r["p"])

    # -- writes ---------------------------------------------------------------------------------

    def apply(self, operation: str, batch: list[dict], instant: str) -> None:
        """The completed write `instant` of `batch` (rows in arrival order)."""
        assert not self.history or instant > self.history[-1][0], "instants grow"
        state = {ident: [_copy.copy(c) for c in copies] for ident, copies in self.state.items()}
        if operation in ("insert", "bulk_insert"):
            for r in batch:
                if operation == "insert" and r["_hoodie_is_deleted"]:
                    continue
                state.setdefault(self.identity(r), []).append(Copy(r["p"], dict(r), instant))
        elif operation == "insert_overwrite":
            parts = {r["p"] for r in batch}
            for ident in list(state):
                state[ident] = [c for c in state[ident] if c.partition not in parts]
            for r in batch:
                if r["_hoodie_is_deleted"]:
                    continue
                state.setdefault(self.identity(r), []).append(Copy(r["p"], dict(r), instant))
        elif operation == "delete":
            for ident in dict.fromkeys(self.identity(r) for r in batch):
                state.pop(ident, None)
        elif operation == "upsert":
            for ident, r in self._winners(batch).items():
                state[ident] = self._upsert_one(state.get(ident, []), r, instant)
        else:
            raise ValueError(operation)
        self.state = {ident: copies for ident, copies in state.items() if copies}
        self.history.append((instant, self.state))

    def _winners(self, batch: list[dict]) -> dict:
        winners: dict = {}
        for r in batch:  # ties: the later row wins (>=)
            ident = self.identity(r)
            if ident not in winners or r["ts"] >= winners[ident]["ts"]:
                winners[ident] = r
        return winners

    def _upsert_one(self, copies: list[Copy], r: dict, instant: str) -> list[Copy]:
        if not copies:
            return [] if r["_hoodie_is_deleted"] else [Copy(r["p"], dict(r), instant)]
        out: list[Copy] = []
        moved = False
        for c in copies:
            if c.row["ts"] > r["ts"]:  # the stored copy wins: nothing changes, nothing moves
                out.append(c)
            elif r["_hoodie_is_deleted"]:
                continue
            elif self.is_global and self.move and c.partition != r["p"]:
                moved = True  # deleted here, inserted once in its new partition
            else:
                out.append(Copy(c.partition, dict(r), instant))
        # not inserted where a copy of the key is stored: that copy took the record, or beat it
        if moved and not any(c.partition == r["p"] for c in copies):
            out.append(Copy(r["p"], dict(r), instant))
        return out

    def restore(self, savepoint: str) -> None:
        """Every write after `savepoint` is undone."""
        self.history = [(t, s) for t, s in self.history if t <= savepoint]
        self.state = self.history[-1][1] if self.history else {}

    # -- queries --------------------------------------------------------------------------------

    def copies(self, state: dict | None = None) -> list[Copy]:
        return [c for copies in (self.state if state is None else state).values() for c in copies]

    def snapshot(self) -> list[tuple]:
        return sorted(c.key() for c in self.copies())

    def state_at(self, instant: str) -> dict:
        out: dict = {}
        for t, s in self.history:
            if t > instant:
                break
            out = s
        return out

    def as_of(self, instant: str) -> list[tuple]:
        return sorted(c.key() for c in self.copies(self.state_at(instant)))

    def incremental(self, begin: str, end: str) -> list[tuple]:
        """The copies as of `end` that a write in (begin, end] wrote (deletes are not shown)."""
        return sorted(c.key() for c in self.copies(self.state_at(end)) if begin < c.commit <= end)

    def change_feed(self, begin: str, end: str) -> dict:
        """The changes of the writes in (begin, end], as the README's change feed defines them: per
        write t, its state against the state after the write before it, keyed by (partition path,
        record key): a record with commit time t is an insert, or an update of the record it
        replaces there; a record gone is a delete.  So an insert_overwrite that writes a key again
        where it was is an update, and a partition move is a delete and an insert.
        Returned as {(t, key): (ops, before images, after images)}, each sorted: one change per copy
        that changed (docs/hudi/cdc-duplicate-keys.md); which copy before pairs with which after
        follows the file layout (file group, position), which the model does not know."""
        out: dict = {}
        prev: dict = {}
        for t, state in self.history:
            if begin < t <= end:
                for k, v in feed_changes(t, prev, state).items():
                    out[k] = v
            prev = state
        return out

    def committed_versions(self) -> set[tuple]:
        """Every copy any completed (and not restored) write left: what a read-optimized query, which
        reads base files only, may show."""
        return {c.key() for _, s in self.history for c in self.copies(s)}

    def write_instants(self) -> list[str]:
        return [t for t, _ in self.history]


def feed_changes(t: str, before: dict, after: dict) -> dict:
    groups: dict = {}
    for side, state in ((0, before), (1, after)):
        for copies in state.values():
            for c in copies:
                groups.setdefault((c.partition, c.row["id"]), ([], []))[side].append(c)
    out: dict = {}
    for (_, key), (old, new) in groups.items():
        changed = [c for c in new if c.commit == t]
        kept = [c.key() for c in new if c.commit != t]
        gone = []
        for c in old:  # each copy kept accounts for one copy before (copies may be equal)
            if c.key() in kept:
                kept.remove(c.key())
            else:
                gone.append(c)
        ops = (
            ["u"] * min(len(gone), len(changed))
            + ["i"] * (len(changed) - len(gone))
            + ["d"] * (len(gone) - len(changed))
        )
        if ops:
            ent = out.setdefault((t, key), ([], [], []))
            ent[0].extend(ops)
            ent[1].extend(tuple(c.row[x] for x in DATA_COLUMNS) for c in gone)
            ent[2].extend(tuple(c.row[x] for x in DATA_COLUMNS) for c in changed)
    return {k: (sorted(a), sorted(b), sorted(c)) for k, (a, b, c) in out.items()}


# -- the step generator ---------------------------------------------------------------------------


@dataclass
class Step:
    op: str  # see OPERATIONS
    rows: list = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.op}({len(self.rows)} rows)" if self.rows else self.op


WRITES = ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite")
SERVICES = ("compact", "cluster", "clean", "archive", "savepoint", "restore", "delete_savepoint", "expire")
# the relative frequency of each step
WEIGHTS = {
    "upsert": 30, "insert": 7, "bulk_insert": 5, "delete": 8, "insert_overwrite": 3, "killed": 5,
    "compact": 6, "cluster": 4, "clean": 3, "archive": 3, "savepoint": 6, "restore": 8,
    "delete_savepoint": 2, "expire": 2,
}  # fmt: skip


class StepGenerator:
    """Random steps over a small key space (so that keys meet often): updates, late records (below a
    stored copy's ordering value), ties (equal to a stored copy's or to an earlier row of the batch),
    in-batch duplicates, soft deletes, partition changes; inserts of stored keys (duplicates)."""

    def __init__(self, seed: int, key_space: int = 60, unique_inserts: bool = False):
        self.rng = random.Random(seed)
        self.key_space = key_space
        # inserts of new keys only, each once: under RECORD_INDEX a key stored twice is indexed at
        # one copy (as in Hudi), which the model does not follow (docs/design/metadata-table.md)
        self.unique_inserts = unique_inserts
        self.tick = 1000
        self.fresh = 0

    def _ts(self, model: SequenceModel, key: str) -> int:
        self.tick += 10
        stored = [c.row["ts"] for copies in model.state.values() for c in copies if c.row["id"] == key]
        x = self.rng.random()
        if stored and x < 0.15:
            return self.rng.choice(stored)  # a tie with the stored copy
        if x < 0.3:
            return self.tick - self.rng.randrange(1, 4) * 100  # late
        return self.tick

    def _row(self, model: SequenceModel, key: str, p: str, soft_delete: float) -> dict:
        return {"id": key, "p": p, "ts": self._ts(model, key), "v": self.rng.randrange(10**6),
                "_hoodie_is_deleted": self.rng.random() < soft_delete}  # fmt: skip

    def _stored(self, model: SequenceModel) -> list[dict]:
        return sorted((c.row for c in model.copies()), key=lambda r: (r["id"], r["p"], r["ts"]))

    def _new_key(self) -> str:
        self.fresh += 1
        return f"n{self.fresh:04d}"

    def upsert(self, model: SequenceModel) -> list[dict]:
        stored = self._stored(model)
        rows: list[dict] = []
        for _ in range(self.rng.randrange(1, 25)):
            x = self.rng.random()
            if rows and x < 0.15:  # a duplicate in the batch; sometimes a tie with it
                prev = self.rng.choice(rows)
                r = self._row(model, prev["id"], prev["p"], 0.1)
                if self.rng.random() < 0.5:
                    r["ts"] = prev["ts"]
            elif stored and x < 0.65:
                s = self.rng.choice(stored)
                moved = self.rng.random() < 0.15
                p = self.rng.choice([q for q in PARTITIONS if q != s["p"]]) if moved else s["p"]
                r = self._row(model, s["id"], p, 0.15)
            else:
                k = f"k{self.rng.randrange(self.key_space):03d}"
                r = self._row(model, k, self.rng.choice(PARTITIONS), 0.05)
            rows.append(r)
        return rows

    def inserts(self, model: SequenceModel, overwrite: bool = False) -> list[dict]:
        """insert / bulk_insert / insert_overwrite input: stored keys again (duplicates), keys twice,
        new keys."""
        stored = self._stored(model)
        parts = self.rng.sample(PARTITIONS, self.rng.randrange(1, 3)) if overwrite else list(PARTITIONS)
        rows: list[dict] = []
        for _ in range(self.rng.randrange(1, 20)):
            p = self.rng.choice(parts)
            x = 1.0 if self.unique_inserts else self.rng.random()
            if stored and x < 0.3:
                s = self.rng.choice(stored)
                rows.append(
                    self._row(model, s["id"], s["p"] if not overwrite else p, 0.0 if overwrite else 0.1)
                )
            elif rows and x < 0.4:
                prev = self.rng.choice(rows)
                rows.append(self._row(model, prev["id"], prev["p"], 0.0))
            else:
                rows.append(self._row(model, self._new_key(), p, 0.0 if overwrite else 0.1))
        return rows

    def deletes(self, model: SequenceModel) -> list[dict]:
        """Delete-operation input: stored copies (under a global index sometimes named with another
        partition value), absent keys, a key twice."""
        stored = self._stored(model)
        rows = []
        for _ in range(self.rng.randrange(1, 8)):
            if stored and self.rng.random() < 0.8:
                r = dict(self.rng.choice(stored))
                if model.is_global and self.rng.random() < 0.2:
                    r["p"] = self.rng.choice(PARTITIONS)
            else:
                r = {"id": f"z{self.rng.randrange(100):03d}", "p": self.rng.choice(PARTITIONS), "v": 0,
                     "_hoodie_is_deleted": False}  # fmt: skip
            r["ts"] = self.tick - 500  # the delete operation ignores ordering values: an old one
            rows.append(r)
        if rows and self.rng.random() < 0.3:
            rows.append(dict(rows[0]))
        return rows

    def step(self, model: SequenceModel, allowed: set[str], after_killed: bool) -> Step:
        """The next step among `allowed`; right after a killed write, a write."""
        ops = [op for op in WEIGHTS if op in allowed]
        if after_killed:
            ops = [op for op in ops if op in ("upsert", "delete", "insert")]
        op = self.rng.choices(ops, weights=[WEIGHTS[o] for o in ops])[0]
        if op in ("upsert", "killed"):
            return Step(op, self.upsert(model))
        if op in ("insert", "bulk_insert", "insert_overwrite"):
            return Step(op, self.inserts(model, overwrite=op == "insert_overwrite"))
        if op == "delete":
            return Step(op, self.deletes(model))
        return Step(op)
