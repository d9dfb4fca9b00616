"""Runs a random sequence of steps (tests/support/sequence_model.py) against a table through the
engine API, and after every step compares the table with the model: the snapshot (ours and
hudi-rs), read_optimized, time travel to retained instants, incremental reads and the change feed
on random ranges.  A failure names the seed, the combination and the steps so far (replay: the same
seed and combination)."""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError, HoodieTableError
from hoodie_sink.table.format.heartbeat import heartbeat_path, release_heartbeat
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import ActiveTimeline, Timeline
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.read.cdc import read_cdc
from hoodie_sink.table.read.incremental import read_incremental
from hoodie_sink.table.read.retention import oldest_readable_instant
from hoodie_sink.table.read.snapshot import read_snapshot
from hoodie_sink.table.services import compaction
from hoodie_sink.table.services import savepoint as sp
from hoodie_sink.table.services.archival import ArchivalConfig, run_archival
from hoodie_sink.table.services.cleaning import CleanConfig, run_clean
from hoodie_sink.table.services.validation import validate_table
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write import coordinator, write_path
from hoodie_sink.table.write.context import TaskIdentity
from tests.support.keyed_model import SCHEMA, options_for
from tests.support.sequence_model import DATA_COLUMNS, SequenceModel, Step, StepGenerator
from tests.support.tables import read_both

META = ("_hoodie_partition_path", "_hoodie_commit_time")


@dataclass(frozen=True)
class Combination:
    table_type: str  # COPY_ON_WRITE, MERGE_ON_READ
    index: str  # bloom, global_bloom, bucket
    move: bool = False  # hoodie.bloom.index.update.partition.path (GLOBAL_BLOOM)
    metadata: bool = False  # hoodie.metadata.enable: Hudi's metadata table kept, listings read from it
    record_index: bool = False  # hoodie.metadata.record.index.enable: its record_index partition kept too
    # hoodie.metadata.index.column.stats.enable and .bloom.filter.enable: both partitions kept too, and
    # the bloom indexes read them (hoodie.bloom.index.use.metadata)
    column_stats: bool = False

    @property
    def mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    def __str__(self) -> str:
        move, metadata = "-move" if self.move else "", "-mdt" if self.metadata else ""
        rli = "-rli" if self.record_index else ""
        stats = "-colstats-blooms" if self.column_stats else ""
        return f"{'mor' if self.mor else 'cow'}-{self.index}{move}{metadata}{rli}{stats}"


COMBINATIONS = [
    Combination(t, i, m)
    for t in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for i, m in (("bloom", False), ("global_bloom", False), ("global_bloom", True), ("bucket", False))
]
# with the metadata table kept (compacting every 3 deltacommits, so compaction, clean and archival of
# the metadata table fall inside a sequence), one combination per index kind and table type
METADATA_COMBINATIONS = [
    Combination(t, i, m, metadata=True)
    for t in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for i, m in (("bloom", False), ("global_bloom", True), ("bucket", False))
]

# with the record index kept as well (issue 29): a global index with and without partition moves
# (a partition-scoped index is refused with the record index: options/write_config.py), both table types
# (kept by GLOBAL_BLOOM writes, and tagging by it: RECORD_INDEX)
RECORD_INDEX_COMBINATIONS = [
    Combination(t, i, m, metadata=True, record_index=True)
    for t in ("COPY_ON_WRITE", "MERGE_ON_READ")
    for i, m in (
        ("global_bloom", True),
        ("global_bloom", False),
        ("record_index", True),
        ("record_index", False),
    )
]

# with the column_stats and bloom_filters partitions kept as well (issue 29, item 3), the bloom indexes
# tagging through them: a partition-scoped and a global index, both table types; one variant with the
# record index too (all four partitions kept)
COLUMN_STATS_COMBINATIONS = [
    Combination("COPY_ON_WRITE", "bloom", metadata=True, column_stats=True),
    Combination("MERGE_ON_READ", "bloom", metadata=True, column_stats=True),
    Combination("MERGE_ON_READ", "global_bloom", True, metadata=True, column_stats=True),
    Combination("COPY_ON_WRITE", "global_bloom", True, metadata=True, record_index=True, column_stats=True),
]


def rows_of(t: pa.Table) -> list[tuple]:
    """(partition path, commit time, data columns) of every row, sorted."""
    cols = [t.column(c).to_pylist() for c in (*META, *DATA_COLUMNS)] if t.num_rows else []
    return sorted(zip(*cols, strict=True)) if cols else []


@dataclass
class SequenceRun:
    path: str
    combo: Combination
    seed: int
    gaps: frozenset  # the known gaps' names that apply (tests/unit/test_random_sequences.py)
    steps: int = 18
    rng: random.Random = field(init=False)
    log: list = field(default_factory=list)  # str of every step run

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed * 7919 + zlib.crc32(str(self.combo).encode()))
        self.model = SequenceModel(self.combo.index, self.combo.move)
        self.gen = StepGenerator(self.seed, unique_inserts=self.combo.index == "record_index")
        retained = self.rng.randrange(1, 4)
        self.options = {
            **options_for(self.combo.index, self.combo.move),
            "hoodie.datasource.write.table.type": self.combo.table_type,
            # small retention: cleaning and archival run all along
            "hoodie.cleaner.commits.retained": str(retained),
            "hoodie.keep.min.commits": str(retained + 2),
            "hoodie.keep.max.commits": str(retained + 4),
            "hoodie.compact.inline.max.delta.commits": str(self.rng.randrange(2, 6)),
            "hoodie.bucket.index.num.buckets": "2",
            # small bloom filters: cheap to read, and false positives send the index to the key columns
            "hoodie.index.bloom.num_entries": "100",
            "hoodie.index.bloom.fpp": "0.05",
        }
        if self.combo.metadata:
            self.options |= {
                "hoodie.metadata.enable": "true",
                "hoodie.metadata.compact.max.delta.commits": "3",
            }
        if self.combo.record_index:
            self.options |= {
                "hoodie.metadata.record.index.enable": "true",
                "hoodie.metadata.record.index.min.filegroup.count": "3",  # keys spread over groups
                "hoodie.metadata.record.index.max.filegroup.count": "3",
            }
        if self.combo.column_stats:
            self.options |= {
                "hoodie.metadata.index.column.stats.enable": "true",
                "hoodie.metadata.index.bloom.filter.enable": "true",
            }
            if self.combo.index in ("bloom", "global_bloom"):
                self.options |= {"hoodie.bloom.index.use.metadata": "true"}
        self.cfg = WriteConfig.from_options(self.options, path=self.path)
        self.storage = Storage(self.path)
        self.dead: list[str] = []  # instants of killed writes, still pending
        self.savepoints: list[str] = []
        self.compacted = False  # the step was a compaction of every slice with logs

    # -- the steps ---------------------------------------------------------------------------

    def allowed(self) -> set[str]:
        ops = {"upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "killed", "cluster", "clean",
               "archive", "savepoint"}  # fmt: skip
        if not self.model.history:  # a table to begin with (BUCKET: by upserts only, see execute)
            return {"upsert"} if self.combo.index == "bucket" else {"upsert", "insert", "bulk_insert"}
        if self.combo.mor:
            ops.add("compact")
        if self.dead:
            ops.add("expire")
        if self.savepoints:
            ops |= {"restore", "delete_savepoint"}
            ops.discard("savepoint")
        return ops

    def run(self) -> None:
        after_killed = False
        for i in range(self.steps):
            step = self.gen.step(self.model, self.allowed(), after_killed)
            self.log.append(str(step))
            self.compacted = False
            try:
                self.execute(step)
                after_killed = step.op == "killed"
                # every retained instant: at the end and after a restore
                self.check(every_instant=i == self.steps - 1 or step.op == "restore")
            except Exception as e:
                replay = "\n".join(f"  {n}: {s}" for n, s in enumerate(self.log))
                raise AssertionError(
                    f"seed={self.seed} combination={self.combo} step {i} ({step}) failed: {e!r}\n"
                    f"steps:\n{replay}\nrows of the failing step: {step.rows}"
                ) from e

    def completed_writes(self) -> set[str]:
        return {i.timestamp for i in Timeline.load(self.storage).completed(WRITE_ACTIONS)}

    def execute(self, step: Step) -> None:
        op = step.op
        if op in ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite"):
            before = self.completed_writes()
            data = pa.Table.from_pylist(step.rows, SCHEMA)
            if self.combo.index == "bucket" and op in ("insert", "bulk_insert", "insert_overwrite"):
                # refused (the README's BUCKET rule): they would write outside the hash buckets
                with pytest.raises(HoodieConfigError, match="outside the hash buckets"):
                    hoodie_sink.write(
                        data, self.path, {**self.options, "hoodie.datasource.write.operation": op}
                    )
                assert self.completed_writes() == before
                return
            hoodie_sink.write(data, self.path, {**self.options, "hoodie.datasource.write.operation": op})
            new = sorted(self.completed_writes() - before)
            assert new, "the write completed no instant"
            self.model.apply(op, step.rows, new[0])  # an inline compaction comes after it
            self.dead = [t for t in self.dead if self._pending(t)]
        elif op == "killed":
            self.kill(step.rows)
        elif op == "expire":  # the killed writer's heartbeat expires: the next write rolls it back
            for t in self.dead:
                self.storage.delete(heartbeat_path(t))
        elif op == "compact":
            # with no write pending, every slice with logs is compacted: read_optimized is exact
            self.compacted = not ActiveTimeline.load(self.storage).pending(WRITE_ACTIONS)
            compaction.run(WriteConfig.from_options(self.options, path=self.path), wait_for_writes_s=0.0)
        elif op == "cluster":
            options = {**self.options, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)}
            if self.combo.index == "bucket":  # refused, as Hudi's simple bucket index does
                with pytest.raises(HoodieConfigError, match="outside the hash buckets"):
                    hoodie_sink.cluster(self.path, options)
            else:
                hoodie_sink.cluster(self.path, options)
        elif op == "clean":
            run_clean(self.path, CleanConfig.of(self.cfg))
        elif op == "archive":
            run_archival(self.path, ArchivalConfig.of(self.cfg))
        elif op == "savepoint":
            self.savepoints.append(sp.create_savepoint(self.path).instant)
        elif op == "delete_savepoint":
            sp.delete_savepoint(self.path, self.savepoints.pop())
        elif op == "restore":
            for t in self.dead:  # a restore needs the writers stopped
                self.storage.delete(heartbeat_path(t))
            target = self.savepoints[-1]
            sp.restore(self.path, target)
            self.model.restore(target)
            self.dead = [t for t in self.dead if self._pending(t)]
        else:
            raise ValueError(op)

    def _pending(self, instant: str) -> bool:
        return any(i.timestamp == instant for i in ActiveTimeline.load(self.storage).pending())

    def kill(self, rows: list[dict]) -> None:
        """An upsert whose tasks wrote their files, then the process died before the commit: its
        files stay, its heartbeat file too, not yet expired."""
        cfg = WriteConfig.from_options({**self.options, "hoodie.datasource.write.operation": "upsert"},
                                       path=self.path)  # fmt: skip
        ctx = coordinator.begin(cfg, SCHEMA)
        batches = pa.Table.from_pylist(rows, SCHEMA).to_batches(max_chunksize=7)
        write_path.write_task(ctx, TaskIdentity(0, 1, 100), batches)
        release_heartbeat(self.storage, ctx.instant)  # the process is gone; its last beat stays
        self.dead.append(ctx.instant)

    # -- the checks --------------------------------------------------------------------------

    def check(self, every_instant: bool) -> None:
        model = self.model
        if self.combo.metadata:  # the metadata table lists what storage holds, every step
            checks = ("metadata-table", "record-index", "column-stats", "bloom-filters")
            found = [v for v in validate_table(self.storage) if v.check in checks]
            assert not found, f"the metadata table differs from storage: {found[:5]}"
        theirs, ours = read_both(self.path)  # hudi-rs and ours agree, meta columns included
        snap = model.snapshot()
        assert rows_of(ours) == snap, f"snapshot differs from the model: {diff(rows_of(ours), snap)}"
        ro = rows_of(read_snapshot(self.path, read_optimized=True))
        if self.combo.mor and self.compacted:
            assert ro == snap, f"read_optimized right after a full compaction differs: {diff(ro, snap)}"
        elif self.combo.mor:
            # base files only: every row is a version some completed write left (a weaker invariant:
            # which version depends on where compaction has got to in each file group)
            versions = model.committed_versions()
            stray = [r for r in ro if r not in versions]
            assert not stray, f"read_optimized shows rows no completed write left: {stray[:5]}"
        else:
            assert ro == snap, f"read_optimized of a copy-on-write table differs: {diff(ro, snap)}"
        timeline = ActiveTimeline.load(self.storage)
        oldest = oldest_readable_instant(self.storage, timeline) or ""
        retained = [i.timestamp for i in timeline.completed() if i.timestamp >= oldest]
        travel = retained if every_instant else self.rng.sample(retained, min(2, len(retained)))
        for t in travel:
            got, want = rows_of(read_snapshot(self.path, as_of=t)), model.as_of(t)
            assert got == want, f"time travel to {t} differs from the model: {diff(got, want)}"
        writes = [t for t in model.write_instants() if t >= oldest and t in set(retained)]
        bounds = ([] if oldest else ["000"]) + writes  # from the start while nothing is cleaned
        pending = [i.timestamp for i in timeline.pending(WRITE_ACTIONS)]
        for _ in range(2 if len(bounds) > 1 else 0):
            begin, end = sorted(self.rng.sample(bounds, 2))
            self._check_incremental(begin, end, pending)
        if len(bounds) > 1:
            begin, end = sorted(self.rng.sample(bounds, 2))
            self._check_cdc(begin, end, pending)

    def _refused_for_a_hole(self, e: HoodieTableError, begin: str, end: str, pending: list[str]) -> bool:
        return "still pending" in str(e) and any(begin < p < end for p in pending)

    def _check_incremental(self, begin: str, end: str, pending: list[str]) -> None:
        try:
            got = rows_of(read_incremental(self.path, begin, end))
        except HoodieTableError as e:
            if self._refused_for_a_hole(e, begin, end, pending):
                return
            raise
        want = self.model.incremental(begin, end)
        assert got == want, f"incremental ({begin}, {end}] differs from the model: {diff(got, want)}"

    def _check_cdc(self, begin: str, end: str, pending: list[str]) -> None:
        try:
            feed = read_cdc(self.path, begin, end)
        except HoodieTableError as e:
            if self._refused_for_a_hole(e, begin, end, pending):
                return
            raise
        grouped: dict = {}
        for r in feed.to_pylist():
            before, after = _image(r["before"]), _image(r["after"])
            ent = grouped.setdefault((r["ts_ms"], (after or before)[0]), ([], [], []))
            ent[0].append(r["op"])
            ent[1].extend([before] if before else [])
            ent[2].extend([after] if after else [])
        got = sorted((k, (sorted(a), sorted(b), sorted(c))) for k, (a, b, c) in grouped.items())
        want = sorted(self.model.change_feed(begin, end).items())
        assert got == want, f"change feed ({begin}, {end}] differs from the model: {diff(got, want)}"


def diff(got: list, want: list) -> str:
    """What a read has that the model does not, and the reverse (the first few of each)."""
    extra = [r for r in got if r not in want]
    missing = [r for r in want if r not in got]
    return f"read but not in the model: {extra[:6]}; in the model but not read: {missing[:6]}"


def _image(text: str | None) -> tuple | None:
    if text is None:
        return None
    row = json.loads(text)
    return tuple(row.get(c) for c in DATA_COLUMNS)


def _row(row: dict | None) -> tuple | None:
    return None if row is None else tuple(row[c] for c in DATA_COLUMNS)
