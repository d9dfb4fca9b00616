"""Keyed writes into merge-on-read tables against Hudi's semantics (tests/support/keyed_model.py), for
every index type, through the engine API with simulated tasks (issue 12, acceptance 1).

The same random sequences as the copy-on-write model test (updates, moves, late records, in-batch
duplicates, soft deletes, the delete operation, records of one key in several tasks), over more rounds so
that file groups collect several log files; hudi-rs and our reader must equal the model after each round.
"""

from __future__ import annotations

import pytest

from tests.support.keyed_model import VARIANTS
from tests.unit.write.test_keyed_model import check_against_model

MOR = {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("index,move", VARIANTS, ids=[f"{i}{'-move' if m else ''}" for i, m in VARIANTS])
def test_mor_keyed_writes_match_hudi_semantics(tmp_path, monkeypatch, index, move, seed):
    # inline compaction after every 2 or 3 deltacommits, or none within the 7 rounds
    compaction = {"hoodie.compact.inline.max.delta.commits": ["2", "3", "50", "50"][seed]}
    check_against_model(tmp_path, monkeypatch, index, move, seed, extra={**MOR, **compaction}, rounds=7)
