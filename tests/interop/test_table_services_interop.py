"""Issue 11: cleaning and archival as Apache Hudi writes them, in both directions.

Ours -> Java: after our cleans and archival runs, Java reads the table (rows equal hudi-rs's,
ours and the model; time travel within the retained window too), lists our archived instants
from its archived timeline, and decodes our clean plans and clean metadata.
Java -> ours: Java cleans and archives a table of ours with its own services; we read its clean
instants (plans and metadata) and its archive file, and our services carry on after it.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.clean_metadata import decode_clean_metadata, decode_cleaner_plan
from hoodie_sink.table.format.timeline.instant import CLEAN, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.services.archival import load_archived_timeline
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree, assert_time_travel_agrees, assert_timeline_agrees
from tests.interop.test_java_reads_ours import ARROW, BASE, Model, java_options, rows

pytestmark = [pytest.mark.compat, pytest.mark.interop]

# small windows so that a few dozen commits clean and archive several times
SERVICES = {
    "hoodie.cleaner.commits.retained": "3",
    "hoodie.keep.min.commits": "5",
    "hoodie.keep.max.commits": "8",
}


def _our_rounds(
    path, model: Model, rounds: int, seed: int, snapshots: dict[str, list[dict]], extra: dict | None = None
) -> None:
    rng = random.Random(seed)
    services = {**SERVICES, **(extra or {})}
    for r in range(rounds):
        ids = rng.sample(range(60), 12)
        if r % 7 == 6:
            victims = ids[:4]
            hoodie_sink.write(pa.Table.from_pylist(rows(victims, r), ARROW), str(path),
                              {**BASE, **services, "hoodie.datasource.write.operation": "delete"})  # fmt: skip
            model.delete(victims)
        else:
            batch = rows(ids, ts=r)
            hoodie_sink.write(pa.Table.from_pylist(batch, ARROW), str(path), {**BASE, **services})
            model.upsert(batch)
        # the write, and a compaction right after it (same rows)
        for inst in Timeline.load(Storage(str(path))).completed():
            snapshots.setdefault(inst.timestamp, model.rows())


MOR = {"hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline.max.delta.commits": "3",
       "hoodie.parquet.small.file.limit": "0"}  # fmt: skip


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_java_reads_our_cleaned_and_archived_table(spark, any_java_hudi, tmp_path, table_type):
    """Hudi 0.15.0 and 1.1.1 (whose archived-timeline reader needs Java's string marks); a
    merge-on-read table archives deltacommits and compactions (with their plans) too."""
    java_hudi = any_java_hudi
    path = tmp_path / "t"
    model, snapshots = Model(), {}
    _our_rounds(path, model, 40, seed=11, snapshots=snapshots, extra=MOR if table_type == "mor" else None)
    storage = Storage(str(path))
    timeline = Timeline.load(storage)
    assert len(timeline.completed()) <= 8 and timeline.completed((CLEAN,)), "services did not run"
    if table_type == "mor":
        assert {e.instant.action for e in load_archived_timeline(storage)} >= {"deltacommit", "compaction"}

    assert_readers_agree(java_hudi.read(path), path, model.rows())
    assert_timeline_agrees(java_hudi, path)
    # time travel within the retained window (the oldest retained commit included)
    for inst in timeline.completed()[-3:]:
        assert_time_travel_agrees(java_hudi, path, inst.timestamp, snapshots[inst.timestamp])

    # Java's archived timeline holds exactly what we archived, with our commits' stats
    ours = load_archived_timeline(storage)
    java = java_hudi.call("archived_timeline", path=str(path))
    assert sorted((i["timestamp"], i["action"], i["state"]) for i in java) == sorted(
        (e.instant.timestamp, e.instant.action, e.instant.state.upper()) for e in ours
    )
    java_commits = [i for i in java if i["action"] in ("commit", "deltacommit") and i["state"] == "COMPLETED"]
    # (a delete-only deltacommit writes no records: its logs hold delete blocks)
    written = {e.instant.timestamp: _records_written(e.details) for e in ours if e.instant.is_completed}
    assert java_commits and [(i["timestamp"], i["records_written"]) for i in java_commits] == [
        (i["timestamp"], written[i["timestamp"]]) for i in java_commits
    ]
    assert sum(i["records_written"] for i in java_commits) > 0

    # Java decodes our cleans: plan and metadata name the same files we deleted (through 0.15's
    # TimelineMetadataUtils / CleanerUtils; 1.x moved them, and reads the cleaned table above)
    if java_hudi.version != "0.15.0":
        return
    cleans = java_hudi.call("clean_details", path=str(path))
    store = TimelineStore(storage)
    assert [c["timestamp"] for c in cleans] == [c.timestamp for c in timeline.completed((CLEAN,))]
    for c in cleans:
        plan = decode_cleaner_plan(storage.read_bytes(store.path(Instant(c["timestamp"], CLEAN, REQUESTED))))
        assert c["policy"] == "KEEP_LATEST_COMMITS" and c["total_deleted"] == plan.file_count
        assert sorted(p.rsplit("/", 1)[1] for p in c["planned"]) == sorted(
            f.rsplit("/", 1)[1] for fs in plan.files.values() for f in fs
        )
        assert sorted(c["deleted"]) == sorted(f.rsplit("/", 1)[1] for fs in plan.files.values() for f in fs)


def test_we_carry_on_after_java_cleaned_and_archived_our_table(spark, java_hudi, tmp_path):
    path = tmp_path / "t"
    model, snapshots = Model(), {}
    _our_rounds(path, model, 12, seed=5, snapshots=snapshots)
    java_opts = java_options({**BASE, **SERVICES})
    rng = random.Random(3)
    for r in range(100, 112):  # Java's writes clean and archive with Java's services
        batch = rows(rng.sample(range(60), 12), ts=r)
        java_hudi.write(path, pa.Table.from_pylist(batch, ARROW), java_opts)
        model.upsert(batch)
    storage = Storage(str(path))
    timeline = Timeline.load(storage)
    java_cleans = timeline.completed((CLEAN,))
    assert java_cleans
    store = TimelineStore(storage)
    for c in java_cleans[-2:]:  # Java's clean files decode with ours
        md = decode_clean_metadata(storage.read_bytes(store.path(c)))
        plan = decode_cleaner_plan(storage.read_bytes(store.path(c.with_state(REQUESTED))))
        assert md["startCleanTime"] == c.timestamp and plan.policy == "KEEP_LATEST_COMMITS"
    archived = load_archived_timeline(storage)
    assert archived and {e.instant.action for e in archived} >= {"commit", "clean"}

    _our_rounds(path, model, 12, seed=6, snapshots=snapshots)  # ours again, after Java's services
    assert_readers_agree(java_hudi.read(path), path, model.rows())
    assert len(Timeline.load(storage).completed()) <= 8


def _records_written(details: dict | None) -> int:
    """numWrites summed over a commit's write stats, as Java's fetchTotalRecordsWritten sums them."""
    stats = (details or {}).get("partitionToWriteStats") or {}
    return sum(int(st.get("numWrites") or 0) for sts in stats.values() for st in sts)
