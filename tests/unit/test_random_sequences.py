"""Random sequences of writes and table services against a model (issue 25, the model test): every
combination of table type (COW, MOR) and index (BLOOM, GLOBAL_BLOOM without and with partition
moves, BUCKET), steps drawn from bulk_insert, insert, upsert (late, duplicate, tied and soft-deleted
records, partition changes), delete, insert_overwrite, compaction (MOR), clustering, cleaning and
archival at small retention, savepoint, restore and savepoint deletion, and a write killed before its
commit (files left, heartbeat not expired) followed at once by the next write.  After every step
the table must equal the model (tests/support/sequence_model.py): the snapshot (ours and hudi-rs),
read_optimized, time travel (two retained instants each step, every one at the end), incremental
reads and the change feed on random ranges (tests/support/sequence_runner.py).

`HOODIE_MODEL_SEEDS=50` runs 50 seeds per combination instead of 10.  A failure prints the seed, the
combination and the steps; re-run that one case with `-k '<combination> and <seed>'`.
"""

from __future__ import annotations

import os

import pytest

from tests.support.sequence_runner import COMBINATIONS, SequenceRun

# Open items of issue 25 the sequences would hit today.  Each switch leaves out only the step (in
# the combinations) that meets the gap; remove it when its item is fixed.  The model never bends.
KNOWN_GAPS: dict[str, str] = {
    # item 2: a key stored twice (insert / bulk_insert of a stored key, or twice in one batch) is
    # only partly updated and deleted by later writes: inserts use new keys only.  Also the change
    # feed of such a key (read/cdc.py joins before and after on (partition, key): n copies -> n x n)
    "duplicate_keys": "issue 25 item 2",
    # item 3: a killed deltacommit's log blocks are folded into a base-file rewrite by the next write
    "killed_write_mor": "issue 25 item 3",
    # item 4: a restore on MOR leaves the log files of the rolled-back deltacommits
    "restore_mor_logs": "issue 25 item 4",
    # item 5: a restore leaves the plans of rolled-back compactions pending
    "restore_pending_compaction": "issue 25 item 5",
    # item 6: insert_overwrite on a BUCKET table writes file groups outside the hash buckets
    "insert_overwrite_bucket": "issue 25 item 6",
}

SEEDS = range(int(os.environ.get("HOODIE_MODEL_SEEDS", "10")))
# HOODIE_MODEL_CHECK_GAPS=killed_write_mor,restore_mor_logs runs those steps anyway (to see a fix work)
CHECKED = set(filter(None, os.environ.get("HOODIE_MODEL_CHECK_GAPS", "").split(",")))


@pytest.mark.slow  # 80 cases of a few seconds each
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("combo", COMBINATIONS, ids=str)
def test_random_sequences_match_the_model(tmp_path, combo, seed):
    SequenceRun(str(tmp_path / "t"), combo, seed, frozenset(KNOWN_GAPS.keys() - CHECKED)).run()
