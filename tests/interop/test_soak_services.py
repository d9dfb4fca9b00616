"""Issue 11 acceptance: a streaming upsert runs its micro-batches with cleaning and archival on
(their defaults: clean after every commit keeping 10 commits, archive past 30 keeping 20), and
neither storage nor the timeline grows with the number of batches.

300 micro-batches of 1,000 rows over 10,000 keys in 8 partitions (every batch updates every
partition: copy-on-write rewrites 8 file groups per batch, the worst case for storage growth).
Asserted: exactly one commit per micro-batch (active plus archived timeline, checkpoints in
order), data files and timeline files bounded from batch 50 on, the table equals the model
(hudi-rs and our reader), Java Hudi 0.15 reads it and lists its archived timeline.
The addBatch ratio (last 50 batches / batches 50-100) is printed, not asserted: tests never
assert timings (benchmarks/bench_soak.py measures it, with a plot).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage
from tests.interop.compare import assert_readers_agree
from tests.support.soak import SoakShape, model_rows, run_soak
from tests.support.tables import assert_table_matches, streaming_batch_ids

pytestmark = [pytest.mark.interop, pytest.mark.slow]

SHAPE = SoakShape(rows_per_batch=1000, keys=10_000, partitions=8, batches=300)
RETAINED, KEEP_MIN, KEEP_MAX = 10, 20, 30
# Bounds: per partition one file group whose slices the cleaner keeps for the 10 retained
# commits, plus the newest and the one being written (8 x 13); .hoodie/: at most KEEP_MAX + 1
# commits and as many cleans, 3 state files each, plus hoodie.properties and a few dirs' worth.
MAX_DATA_FILES = SHAPE.partitions * (RETAINED + 3)
MAX_TIMELINE_FILES = 2 * 3 * (KEEP_MAX + 1) + 10


def test_streaming_upsert_with_cleaning_and_archival_stays_bounded(spark, tmp_path, java_hudi):
    path = tmp_path / "t"
    samples, took = run_soak(spark, path, tmp_path / "ckpt", SHAPE)
    committed = _committed_batches(path)
    assert committed == list(range(len(committed))) and len(committed) >= SHAPE.batches
    steady = [s for s in samples if s.batch_id >= 50]
    worst_files = max(s.data_files for s in steady)
    worst_timeline = max(s.timeline_files for s in steady)
    assert worst_files <= MAX_DATA_FILES, f"{worst_files} data files on storage after batch 50"
    assert worst_timeline <= MAX_TIMELINE_FILES, f"{worst_timeline} timeline files after batch 50"
    assert max(s.archive_files for s in samples) >= 1  # archival ran

    model = model_rows(SHAPE, len(committed))
    assert_table_matches(path, model)
    assert_readers_agree(java_hudi.read(path), path, model)
    archived = java_hudi.call("archived_timeline", path=str(path))
    active = Timeline.load(Storage(str(path)))
    first_active = active.completed()[0].timestamp
    java_commits = [i for i in archived if i["action"] == "commit" and i["state"] == "COMPLETED"]
    assert java_commits and all(i["timestamp"] < first_active for i in java_commits)
    assert len(java_commits) + len(active.completed()) == len(committed)

    early = statistics.median(s.add_batch_ms for s in samples if 50 <= s.batch_id < 100)
    late = statistics.median(s.add_batch_ms for s in samples[-50:])
    print(
        f"\n{len(committed)} micro-batches in {took:.0f}s; addBatch median {early} ms (batches 50-100) -> "
        f"{late} ms (last 50): {late / early:.2f}x; data files <= {worst_files}, timeline files <= {worst_timeline}"
    )


def _committed_batches(path: Path) -> list[int]:
    """The streaming checkpoint (batch id) of every commit, archived ones included, in time order."""
    return streaming_batch_ids(path)
