"""Instant times follow hoodie.table.timeline.timezone: UTC, or LOCAL (Java's default when the
property is absent: each writer's own zone). West of UTC, UTC instants of ours sorted after a
Java writer's later ones on a LOCAL table, and Java's commits lost to ours."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.properties import PROPERTIES_FILE, parse_properties
from hoodie_sink.table.format.timeline.instant import next_instant_time
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage

OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id"}
WEST = "America/Los_Angeles"


@pytest.fixture
def zone(monkeypatch):
    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def _rows(ids, ts=1):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64())})


def _set_zone_property(path, value: str | None) -> None:
    """What a Java-created table says: LOCAL, or nothing at all (Java's default is LOCAL)."""
    storage = Storage(str(path))
    lines = [
        line
        for line in storage.read_text(PROPERTIES_FILE).splitlines()
        if not line.startswith("hoodie.table.timeline.timezone=")
    ]
    if value is not None:
        lines.append(f"hoodie.table.timeline.timezone={value}")
    storage.write_atomic(PROPERTIES_FILE, ("\n".join(lines) + "\n").encode())


def _last_instant(path) -> str:
    last = Timeline.load(Storage(str(path))).last_instant_time()
    assert last is not None
    return last


def _wall_clock(zone_name: str) -> datetime:
    return datetime.now(ZoneInfo(zone_name)).replace(tzinfo=None)


def _as_wall_time(ts: str) -> datetime:
    return datetime.strptime(ts[:14], "%Y%m%d%H%M%S")


def test_tables_we_create_declare_utc_and_stamp_utc_whatever_the_local_zone(tmp_path, zone):
    zone(WEST)
    hoodie_sink.write(_rows([1, 2]), str(tmp_path), OPTS)
    props = parse_properties(Storage(str(tmp_path)).read_text(PROPERTIES_FILE))
    assert props["hoodie.table.timeline.timezone"] == "UTC"
    assert abs(_as_wall_time(_last_instant(tmp_path)) - _wall_clock("UTC")) < timedelta(minutes=1)


@pytest.mark.parametrize("declared", [None, "LOCAL", "local"])
def test_a_local_timeline_is_stamped_in_the_writers_zone(tmp_path, zone, declared):
    zone(WEST)
    # a timeline whose last instant is a Java writer's, in Los Angeles time
    java_like = tmp_path / "java"
    hoodie_sink.write(_rows([1, 2]), str(java_like), OPTS)
    _set_zone_property(java_like, declared)
    storage = Storage(str(java_like))
    for name in storage.list_names(".hoodie"):
        if name.startswith("2"):
            storage.delete(f".hoodie/{name}")
    local_earlier = (_wall_clock(WEST) - timedelta(minutes=5)).strftime("%Y%m%d%H%M%S") + "000"
    storage.write_bytes(f".hoodie/{local_earlier}.commit", b"{}")

    hoodie_sink.write(_rows([3]), str(java_like), OPTS)
    ours = _last_instant(java_like)
    assert ours > local_earlier
    assert abs(_as_wall_time(ours) - _wall_clock(WEST)) < timedelta(minutes=1), (
        f"instant {ours} is not Los Angeles wall time (UTC would be 8 h ahead)"
    )


def test_new_instants_stay_after_every_instant_of_the_timeline():
    now = datetime(2024, 4, 18, 17, 32, 35, 694000, tzinfo=timezone.utc)
    assert next_instant_time("20990101000000999", now=now, zone="LOCAL") == "20990101000001000"
    assert next_instant_time(None, now=now, zone="UTC") == "20240418173235694"


def test_an_unknown_timeline_zone_is_refused_by_name(tmp_path):
    hoodie_sink.write(_rows([1]), str(tmp_path), OPTS)
    _set_zone_property(tmp_path, "Europe/Paris")
    with pytest.raises(HoodieTableError, match="hoodie.table.timeline.timezone=Europe/Paris"):
        hoodie_sink.write(_rows([2]), str(tmp_path), OPTS)
