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

from tests.support.sequence_runner import (
    COLUMN_STATS_COMBINATIONS,
    COMBINATIONS,
    METADATA_COMBINATIONS,
    RECORD_INDEX_COMBINATIONS,
    SequenceRun,
)

# Open items of issue 25 the sequences would hit today.  Each switch leaves out only the step (in
# the combinations) that meets the gap; remove it when its item is fixed.  The model never bends.
# None open today (the last, duplicate_keys_move, went with issue 25 item F3).
KNOWN_GAPS: dict[str, str] = {}

SEEDS = range(int(os.environ.get("HOODIE_MODEL_SEEDS", "10")))
# HOODIE_MODEL_CHECK_GAPS=name,... runs those steps anyway (to see a fix work)
CHECKED = set(filter(None, os.environ.get("HOODIE_MODEL_CHECK_GAPS", "").split(",")))


@pytest.mark.slow  # 80 cases of a few seconds each
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("combo", COMBINATIONS, ids=str)
def test_random_sequences_match_the_model(tmp_path, combo, seed):
    SequenceRun(str(tmp_path / "t"), combo, seed, frozenset(KNOWN_GAPS.keys() - CHECKED)).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("combo", METADATA_COMBINATIONS, ids=str)
def test_random_sequences_with_the_metadata_table_match_the_model(tmp_path, combo, seed):
    """The same sequences with Hudi's metadata table kept: every read lists through it, and after
    every step it lists what storage holds (tests/support/sequence_runner.py, check)."""
    SequenceRun(str(tmp_path / "t"), combo, seed, frozenset(KNOWN_GAPS.keys() - CHECKED)).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("combo", RECORD_INDEX_COMBINATIONS, ids=str)
def test_random_sequences_with_the_record_index_match_the_model(tmp_path, combo, seed):
    """The same sequences with the metadata table's record index kept (issue 29): after every step
    its merged entries are the live keys at their partitions and file groups (validation's
    record-index check), through inserts, updates, deletes, partition moves, compaction,
    clustering, cleaning, archival, savepoint and restore, and a killed write.  With RECORD_INDEX
    tagging, inserts bring new keys only (each once): a key stored twice is indexed at one of its
    copies, as in Hudi, and the model does not follow which (a known gap of this test)."""
    SequenceRun(str(tmp_path / "t"), combo, seed, frozenset(KNOWN_GAPS.keys() - CHECKED)).run()


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("combo", COLUMN_STATS_COMBINATIONS, ids=str)
def test_random_sequences_with_column_stats_match_the_model(tmp_path, combo, seed):
    """The same sequences with the metadata table's column_stats and bloom_filters partitions kept
    (issue 29, item 3), and the bloom indexes tagging with their ranges and filters
    (hoodie.bloom.index.use.metadata): after every step the merged records are the statistics and
    filters the listed files give (footers, log files' rows), and no cleaned file keeps live ones
    (validation's column-stats and bloom-filters checks), through inserts, updates, deletes,
    compaction, clustering, cleaning, archival, savepoint and restore, and a killed write; the
    metadata table's own compaction (every 3 deltacommits) folds them into HFile base files."""
    SequenceRun(str(tmp_path / "t"), combo, seed, frozenset(KNOWN_GAPS.keys() - CHECKED)).run()
