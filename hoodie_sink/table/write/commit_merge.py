"""The commit-time merge of a keyed write (upsert, delete) whose input was not partitioned
by key.

Two things can only be settled once every task has finished:
- changes staged for a file group that another task owned (or that a task had already
  written once): they are merged on top of the newest version of that file group;
- a new key that two tasks (or two flushes) both inserted: the ordering rule picks the winner,
  and the loser is deleted from the new file group that holds it;
- a key that a global index moved to another partition (update.partition.path): every change
  of it, from every task, went to the file group that stores it (the movers as MOVED_OUT), so
  the changes kept for that file group name the overall winner; copies the movers inserted in
  other partitions are dropped unless they are the winner (a key is in one partition only).
Merges run in a thread pool (pyarrow releases the GIL for reading, merging and writing).
The superseded versions written by tasks are left unreferenced; the commit deletes them with
the other unreported files.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie_sink.errors import HoodieCommitError
from hoodie_sink.table.format.commit_metadata import NULL_COMMIT, WriteStat
from hoodie_sink.table.format.file_group import BASE_FILE_EXT, BaseFile
from hoodie_sink.table.format.markers import MERGE
from hoodie_sink.table.format.merge_rule import MergeRule
from hoodie_sink.table.format.schema import META_COLUMNS
from hoodie_sink.table.format.virtual_keys import with_record_keys
from hoodie_sink.table.index.key_index import cached_bloom
from hoodie_sink.table.read.base_file import read_base_file
from hoodie_sink.table.write.base_file_writer import BaseFileWriter, file_schema
from hoodie_sink.table.write.context import WriteContext, stored_keygen
from hoodie_sink.table.write.log_writer import (
    LogWrite,
    current_rows,
    log_changes,
    rewritten_slices,
    write_log_file,
)
from hoodie_sink.table.write.merge import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    KEY,
    KIND,
    ORDER,
    PART,
    RECORD_KEY,
    first_of_groups,
    merge_file_group,
    reduce_changes,
)

log = logging.getLogger(__name__)
COMMIT_STAGE = 999999  # stage id of commit-side write tokens: never a real task's


@dataclass
class CommitMerge:
    stats: list[WriteStat]
    merged_file_groups: int = 0
    staged_rows: int = 0
    duplicate_inserts: int = 0
    missing_deletes: int = 0
    extra: dict = field(default_factory=dict)


def merge_at_commit(ctx: WriteContext, results: list, threads: int | None = None) -> CommitMerge:
    stats = [s for r in results for s in r.write_stats]
    out = CommitMerge(stats=stats, missing_deletes=sum(getattr(r, "num_missing_deletes", 0) for r in results))
    contended = {st.file_id for r in results for st in getattr(r, "staged", [])}
    # Staged change sets are read by the job that merges their file group, not up front: the
    # commit holds at most `merge_threads` file groups' changes at a time.
    changes: dict[tuple[str, str], list[str]] = {}
    for r in results:
        for st in getattr(r, "staged", []) + getattr(r, "owned", []):
            if st.file_id not in contended:
                continue  # the owner's merge is final: nobody else touched this file group
            changes.setdefault((st.partition_path, st.file_id), []).append(st.path)
            out.staged_rows += 0 if st.owner else st.rows
    logs = [p for r in results for p in getattr(r, "inserted_key_logs", [])]
    inserted = _read_all(ctx, logs) if logs else None
    removals = _duplicate_insert_losers(ctx, inserted) if inserted is not None else {}
    if inserted is not None:
        for key, losers in _move_losers(ctx, results, inserted).items():
            removals.setdefault(key, set()).update(losers)
    out.duplicate_inserts = sum(len(v) for v in removals.values())
    if removals and ctx.plan.merge_rule.partial:
        _refuse_partial_duplicate_inserts(ctx, removals)
    log_jobs = _log_fixups(ctx, results, stats, changes, removals)
    if log_jobs:
        owned = {st.path for r in results for st in getattr(r, "owned", [])}
        fixups = _run_log_fixups(ctx, log_jobs, changes, owned, stats)
        out.stats = stats = stats + [s for s in fixups.values() if isinstance(s, WriteStat)]
        settled = [key for key, s in fixups.items() if s != REWRITE]
        out.merged_file_groups += len(settled)
        for key in settled:  # the others are rewritten below, from their merged slice
            changes.pop(key)
    jobs = sorted(set(changes) | set(removals))
    if not jobs:
        return out

    latest: dict[str, WriteStat] = {s.file_id: s for s in stats}
    base_by_id = {bf.file_id: bf for bf in ctx.base_files}

    def run(i: int, key: tuple[str, str]) -> tuple[str, WriteStat, int]:
        part, fid = key
        return fid, *_rewrite(ctx, i, part, fid, changes.get(key), removals.get(key), latest.get(fid),
                              base_by_id.get(fid))  # fmt: skip

    threads = ctx.config.merge_threads if threads is None else threads
    with ThreadPoolExecutor(max_workers=max(1, min(threads, len(jobs)))) as pool:
        done = list(pool.map(lambda job: run(*job), enumerate(jobs)))
    replaced = {fid for fid, _, _ in done}
    out.stats = [s for s in stats if s.file_id not in replaced] + [stat for _, stat, _ in done]
    out.missing_deletes += sum(m for _, _, m in done)
    out.merged_file_groups += len(done)
    log.info("hoodie: commit %s rewrote %d file groups (%d staged rows, %d duplicate inserts)",
             ctx.instant, len(done), out.staged_rows, out.duplicate_inserts)  # fmt: skip
    return out


def _refuse_partial_duplicate_inserts(ctx: WriteContext, removals: dict) -> None:
    """A new key inserted by two tasks (or flushes) of a partial update: the copies would have to
    be merged column by column, which the commit does not do; nothing is committed."""
    keys = sorted(k for v in removals.values() for k in v)
    raise HoodieCommitError(
        f"Write {ctx.instant} to {ctx.config.path} with option 'hoodie.datasource.write.payload.class'="
        f"'{ctx.config.payload_class}' inserted {len(keys)} new key(s) from more than one task (first: "
        f"{keys[0]!r}); hoodie_sink does not merge such copies partially, so nothing was committed. "
        "Help: repartition the input by record key, or write those keys' first records with one task."
    )


def _log_fixups(
    ctx: WriteContext, results: list, stats: list[WriteStat], changes: dict, removals: dict
) -> list[tuple[str, str]]:
    """Merge-on-read: the contended file groups settled by one more log file (those whose base
    file nobody rewrites: no task packed inserts into it)."""
    if not ctx.plan.merge_on_read or ctx.plan.merge_rule.partial:
        # a partial update's log fix-up would hold the other tasks' changes folded apart from the
        # owner's, a fold Java's readers would run in another order: rewritten from the full fold
        return []
    slices = ctx.slices_by_id
    rewritten = {st.file_id for r in results for st in getattr(r, "staged", []) + getattr(r, "owned", [])
                 if st.rewrite}  # fmt: skip
    rewritten |= {s.file_id for s in stats if s.path.endswith(BASE_FILE_EXT)}
    rewritten |= {fid for _, fid in removals} | rewritten_slices(ctx)
    return sorted(key for key in changes if key[1] in slices and key[1] not in rewritten)


REWRITE = "rewrite"


def _run_log_fixups(
    ctx: WriteContext, jobs: list[tuple[str, str]], changes: dict, owned: set[str], stats: list[WriteStat]
) -> dict[tuple[str, str], WriteStat | str | None]:
    """One more log file per contended file group, after the owner's: the winners (one ordering
    rule over every task's changes) that the owner did not write.  A reader merging the slice's
    logs in order then sees exactly the winners: a later record of a key replaces an earlier one
    when it is at least as high in the ordering, which a winner is."""
    slices = ctx.slices_by_id
    rule = ctx.plan.merge_rule
    per_partition = not ctx.plan.index.is_global
    versions: dict[str, int] = {}
    for s in stats:
        if "logVersion" in s.extra:
            versions[s.file_id] = max(versions.get(s.file_id, 0), int(s.extra["logVersion"]))

    def run(i: int, key: tuple[str, str]) -> WriteStat | str | None:
        part, fid = key
        paths = changes[key]
        tables = [_read_all(ctx, [p]) for p in paths]
        all_changes = pa.concat_tables(tables, promote_options="permissive")
        winners = reduce_changes(all_changes, rule, per_partition)
        owner_orders = [t.column(ORDER) for p, t in zip(paths, tables, strict=True) if p in owned]
        if owner_orders:
            done = pa.chunked_array([c for col in owner_orders for c in col.chunks], pa.int64())
            winners = winners.filter(
                pc.invert(pc.is_in(winners.column(ORDER), value_set=done.combine_chunks()))
            )
        sl = slices[fid]
        to_log = log_changes(ctx, sl, winners)
        if to_log is None:
            return REWRITE
        winners = to_log
        if winners.num_rows == 0:
            return None
        version = max(sl.max_version, versions.get(fid, 0)) + 1
        target = LogWrite(sl, version, f"{i}-{COMMIT_STAGE}-0", ctx.instant, i)
        return write_log_file(
            ctx.storage, target, winners, rule.ordering_field, ctx.avro_with_meta, exclusive=ctx.config.occ,
            column_stats=ctx.config.log_column_stats,
        )  # fmt: skip

    threads = max(1, min(ctx.config.merge_threads, len(jobs)))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        written = list(pool.map(lambda job: run(*job), enumerate(jobs)))
    return dict(zip(jobs, written, strict=True))


def _rewrite(
    ctx: WriteContext, i: int, part: str, fid: str, staged: list[str] | None, losers: set[str] | None,
    task_stat: WriteStat | None, old_bf: BaseFile | None,
) -> tuple[WriteStat, int]:  # fmt: skip
    """The final version of one file group: contended ones are merged again from the old base
    file with every task's changes (one ordering rule over all of them); then the losing copies
    of keys inserted twice are dropped."""
    storage = ctx.storage
    schema = file_schema(ctx.data_schema)
    rule = ctx.plan.merge_rule
    missing = 0
    if staged:
        tables = []
        for path in staged:
            with storage.open_input_file(path) as f:
                tables.append(pq.read_table(f))
        base = current_rows(ctx, fid, old_bf, schema)
        prev = old_bf.instant if old_bf else NULL_COMMIT
        per_partition = not ctx.plan.index.is_global
        all_changes = pa.concat_tables(tables, promote_options="permissive")
        reduced = reduce_changes(all_changes, rule, per_partition)
        del all_changes
        del tables
        merged = merge_file_group(base, reduced, rule, ctx.instant, i)
        del base
        data, keys, times, seqnos = merged.data, merged.keys, merged.commit_times, merged.seqnos
        counts = (merged.num_updates, merged.num_inserts, merged.num_deletes)
        missing = merged.num_missing_deletes
        sl = ctx.slices_by_id.get(fid)
        seeds = old_bf is not None and not (sl is not None and sl.has_logs)  # logs may add keys
        seed = cached_bloom(storage, old_bf.path) if seeds and old_bf else None
        new_keys = merged.inserted_keys if seeds else None
    else:  # only duplicate removal, on the version a task wrote in this instant
        assert task_stat is not None, "a file group without staged changes was written by a task"
        current = with_record_keys(read_base_file(storage, task_stat.path, schema), stored_keygen(ctx))
        prev = task_stat.prev_commit
        data = current.drop_columns(list(META_COLUMNS))
        keys, times, seqnos = (
            current.column(c).combine_chunks() for c in (RECORD_KEY, COMMIT_TIME, COMMIT_SEQNO)
        )
        counts = (task_stat.num_update_writes, task_stat.num_inserts, task_stat.num_deletes)
        seed, new_keys = cached_bloom(storage, task_stat.path), pa.array([], pa.string())
    if losers:
        keep = pc.invert(pc.is_in(keys, value_set=pa.array(sorted(losers), pa.string())))
        data, keys, times, seqnos = (
            data.filter(keep),
            keys.filter(keep),
            times.filter(keep),
            seqnos.filter(keep),
        )
        counts = (counts[0], counts[1] - len(losers), counts[2])
    writer = BaseFileWriter(
        storage, part, fid, f"{i}-{COMMIT_STAGE}-0", ctx.instant, i, schema, ctx.avro_with_meta,
        ctx.plan.parquet, prev_commit=prev, io_type=MERGE, seed_bloom=seed,
    )  # fmt: skip
    stat = writer.write_all(data, keys, times, seqnos, num_updates=counts[0], bloom_keys=new_keys)
    stat.num_update_writes, stat.num_inserts, stat.num_deletes = counts[0], max(counts[1], 0), counts[2]
    return stat, missing


def _read_all(ctx: WriteContext, paths: list[str], columns: list[str] | None = None) -> pa.Table:
    tables = []
    for p in paths:
        with ctx.storage.open_input_file(p) as f:
            pf = pq.ParquetFile(f)
            cols = None if columns is None else [c for c in columns if c in pf.schema_arrow.names]
            tables.append(pf.read(columns=cols))
    return pa.concat_tables(tables, promote_options="permissive")


def _move_losers(ctx: WriteContext, results: list, inserted: pa.Table) -> dict[tuple[str, str], set[str]]:
    """(partition, file id) -> keys to drop: copies that movers inserted in a new partition when
    the key's overall winner is another record (a later mover, or an update or delete of the key
    where it is stored, from another task or flush).  Every change of a stored key went to the file
    group storing it (a mover as MOVED_OUT), and tasks keep all change sets of the file groups they
    moved keys out of (or their ranking columns, when nothing re-merges them): those sets hold
    every candidate, ranked here as the merge ranks them."""
    sources = {fid for r in results for fid in getattr(r, "moved_from", [])}
    moved_logs = [p for r in results for p in getattr(r, "moved_key_logs", [])]
    if not sources or not moved_logs:
        return {}
    paths = [st.path for r in results for st in getattr(r, "staged", []) + getattr(r, "owned", [])
             if st.file_id in sources]  # fmt: skip
    paths += [p for r in results for p in getattr(r, "moved_change_logs", [])]
    rule = ctx.plan.merge_rule
    changes = _read_all(ctx, paths, [c for c in (KEY, PART, ORDER, KIND, rule.ordering_field) if c])
    moved = pc.unique(_read_all(ctx, moved_logs).column(KEY))
    changes = changes.filter(pc.is_in(changes.column(KEY), value_set=moved))
    if changes.num_rows == 0:
        return {}
    winners = reduce_changes(changes, rule if rule.ordering_field in changes.column_names else MergeRule())
    cand = inserted.filter(pc.is_in(inserted.column(KEY), value_set=moved))
    # an inserted copy survives only if it is the winner itself (the same arrival order)
    lose = pc.invert(pc.is_in(cand.column(ORDER), value_set=winners.column(ORDER).combine_chunks()))
    losers = cand.filter(pc.and_(lose, pc.is_valid(cand.column("_hf"))))
    out: dict[tuple[str, str], set[str]] = {}
    # losers only: a handful of rows
    for part, fid, key in zip(*(losers.column(c).to_pylist() for c in (PART, "_hf", KEY)), strict=True):
        out.setdefault((part, fid), set()).add(key)
    return out


def _duplicate_insert_losers(ctx: WriteContext, keys: pa.Table) -> dict[tuple[str, str], set[str]]:
    """(partition, file id) -> keys to drop: the losing copies of keys that this write inserted
    more than once (several tasks or flushes), or inserted and deleted in different tasks."""
    scope = ctx.plan.index.identity(KEY, PART)
    counts = keys.group_by(scope).aggregate([(KEY, "count")])
    dups = counts.filter(pc.greater(counts.column(f"{KEY}_count"), 1))
    if dups.num_rows == 0:
        return {}
    cand = keys.join(dups.select(scope), keys=scope, join_type="inner")
    rule = ctx.plan.merge_rule
    if rule.ordering_field not in cand.column_names:
        rule = MergeRule()
    cand = cand.take(pc.sort_indices(cand, sort_keys=rule.ranking(scope, ORDER)))
    # the first row of each key group is the winner; copies in other file groups are dropped
    # (copies in the winner's own file group are settled by that file group's merge)
    first = first_of_groups(cand, scope)
    group_no = np.cumsum(first) - 1
    fids = np.asarray(cand.column("_hf").to_pylist(), dtype=object)
    winner_fid = fids[first][group_no]  # None when the winner is a delete: every copy goes
    loser = (fids != winner_fid) & (fids != None)  # noqa: E711 (numpy: elementwise, `is not` is not)
    out: dict[tuple[str, str], set[str]] = {}
    parts = cand.column(PART).to_pylist()
    ks = cand.column(KEY).to_pylist()
    for i in np.nonzero(loser)[0]:  # losers only: a handful of rows
        out.setdefault((parts[i], fids[i]), set()).add(ks[i])
    return out
