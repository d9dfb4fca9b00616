"""Issue 11: a write's cost, table services included, does not grow with the number of commits
the table has ever had.  With cleaning and archival on (their defaults), the storage calls of a
whole archival cycle of writes (11 commits: the active timeline goes from 20 to 31 commits and
back) are the same after 60 commits as after 126 (the metadata table's, within one run of its own
services)."""

from __future__ import annotations

import pyarrow as pa

import hoodie_sink
from tests.unit.write.test_load_once import storage_calls

OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
}
CYCLE = 11


def write(path: str, c: int) -> None:
    rows = [{"id": (2 * c + k) % 40, "p": f"p{k % 2}", "ts": c} for k in range(4)]
    hoodie_sink.write(pa.Table.from_pylist(rows), path, OPTS)


def test_a_cycle_of_writes_asks_the_same_of_storage_after_60_and_126_commits(tmp_path, monkeypatch):
    seen = {}
    for history in (60, 126):
        path = str(tmp_path / f"t{history}")
        for c in range(history):
            write(path, c)
        with storage_calls(monkeypatch) as counts:
            for c in range(history, history + CYCLE):
                write(path, c)
        seen[history] = dict(counts)
    data = {
        history: {k: n for k, n in c.items() if not k.startswith("metadata ")} for history, c in seen.items()
    }
    assert data[60] == data[126]
    # The metadata table's own services (its compaction every 10 of its deltacommits, its clean and
    # archival) run on periods of their own, so a cycle of 11 writes catches them at another phase
    # after 60 commits than after 126: the same within one service run, never growing.
    for kind in ("metadata timeline listings", "metadata commit file reads"):
        assert 0 < seen[126][kind] <= seen[60][kind] * 1.15 and seen[60][kind] <= seen[126][kind] * 1.15, kind
    assert (
        seen[60]["timeline listings"] <= CYCLE * 8
    )  # write (3) + clean (2) + archival (1) + clustering check
