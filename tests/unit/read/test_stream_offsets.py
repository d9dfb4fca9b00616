"""Stream offsets (issue 13, item 3): where the next micro-batch of a streaming read ends."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.timeline.instant import WRITE_ACTIONS
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.read.stream_offsets import initial_instant, next_end
from hoodie_sink.table.storage import Storage
from tests.unit.read.test_incremental import OPTS


def writes(path: str, n: int, first: int = 0) -> list[str]:
    for r in range(first, first + n):
        hoodie_sink.write(pa.table({"id": [f"k{r}"], "part": ["p0"], "ts": [r], "v": [r]}), path, OPTS)
    return [i.timestamp for i in Timeline.load(Storage(path)).completed(WRITE_ACTIONS)]


def test_next_end_limits_caps_and_stops_before_a_pending_write(tmp_path):
    path = str(tmp_path / "t")
    t = writes(path, 4)
    storage = Storage(path)
    tl = Timeline.load(storage)
    assert next_end(storage, tl, "000") == t[-1]
    assert next_end(storage, tl, "000", max_instants=2) == t[1]
    assert next_end(storage, tl, t[1], max_instants=1) == t[2]
    assert next_end(storage, tl, "000", cap=t[2]) == t[2]
    assert next_end(storage, tl, t[-1]) == t[-1]  # nothing new: the start itself
    # a write pending before t[2]: the stream may pass t[1], not the pending write
    hole = str(int(t[2]) - 1)
    storage.write_bytes(f".hoodie/{hole}.commit.requested", b"")
    tl = Timeline.load(storage)
    assert next_end(storage, tl, "000") == t[1]
    assert next_end(storage, tl, t[1]) == t[1]  # blocked until it completes or is rolled back
    storage.delete(f".hoodie/{hole}.commit.requested")
    assert next_end(storage, Timeline.load(storage), t[1]) == t[-1]


def test_a_pending_clustering_does_not_block(tmp_path):
    path = str(tmp_path / "t")
    writes(path, 3)
    from hoodie_sink.table.options.write_config import WriteConfig
    from hoodie_sink.table.services import clustering

    storage = Storage(path)
    cfg = WriteConfig.from_options(
        {**OPTS, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)}, path=path
    )
    planned = clustering.schedule(storage, cfg)
    assert planned
    t = writes(path, 1, first=10)  # an insert completes after the clustering was planned
    tl = Timeline.load(storage)
    assert [i.timestamp for i in tl.pending(WRITE_ACTIONS)] == [planned]
    assert next_end(storage, tl, "000") == t[-1]


def test_initial_instants(tmp_path):
    path = str(tmp_path / "t")
    t = writes(path, 2)
    tl = Timeline.load(Storage(path))
    assert initial_instant(tl, "earliest") == "000"
    assert initial_instant(tl, "LATEST") == t[-1]
    assert initial_instant(tl, t[0]) == t[0]
    with pytest.raises(HoodieConfigError, match="startOffset"):
        initial_instant(tl, "2024")
