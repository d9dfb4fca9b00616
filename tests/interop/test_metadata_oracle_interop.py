"""The Java-side checks our metadata table (MDT) will be judged by, proved on MDTs that Apache Hudi
0.15 (Java) wrote (tests/fixtures/metadata-tables): what Java's MDT reader lists equals what storage
holds, Hudi's validator's checks pass, and the file-system view Java's writers build on the MDT
equals the one they would build by listing storage; the checks fail on an MDT that has gone stale;
and Java continues its own MDT (no re-initialisation) when it writes again.
docs/hudi/metadata-table-oracle.md says why these are the checks."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie_sink.table.format.properties import parse_properties
from tests.interop.java_hudi import mdt_init_instants
from tests.support.tables import METADATA_FIXTURE_NAMES, unzip_metadata_fixture

pytestmark = [pytest.mark.compat, pytest.mark.interop]


@pytest.fixture(params=METADATA_FIXTURE_NAMES)
def mdt_table(request, tmp_path) -> Path:
    return unzip_metadata_fixture(request.param, tmp_path)


def assert_java_trusts_the_mdt(java, path: Path) -> dict:
    """Every check, on one Java version; returns Java's MDT listing."""
    listed = java.metadata_listing(path)
    stored = java.storage_listing(path)
    assert listed["partitions"] == stored["partitions"]
    completed = [t for t, _a, state in listed["timeline"] if state == "COMPLETED"]
    assert listed["latest_instant"] == completed[-1]
    assert listed["synced_instant"] is not None
    assert "files" in listed["mdt_partitions"]
    checked = java.assert_metadata_valid(path)
    assert checked["partitions"] == len(stored["partitions"]) and checked["files"] > 0
    via_mdt = java.file_slices_via_metadata(path)
    assert via_mdt == java.file_slices_via_storage(path)
    # the view's slices are the ones the existing listing-based file_slices op sees
    legacy = java.call("file_slices", path=str(path), partitions=sorted(via_mdt))
    assert {p: sorted(r[:3] for r in rows) for p, rows in via_mdt.items()} == legacy
    return listed


def test_java_reads_the_fixture_mdts_as_storage_says(any_java_hudi, mdt_table):
    listed = assert_java_trusts_the_mdt(any_java_hudi, mdt_table)
    assert sorted(listed["partitions"]) == ["la", "nyc", "sf"]
    assert not [i for i in listed["timeline"] if i[2] != "COMPLETED"]  # nothing left pending
    props = parse_properties((mdt_table / ".hoodie" / "hoodie.properties").read_text())
    assert sorted(props["hoodie.table.metadata.partitions"].split(",")) == listed["mdt_partitions"]


def _latest_base_file(java, path: Path) -> tuple[str, str, int]:
    slices = java.file_slices_via_metadata(path)
    part = sorted(slices)[0]
    row = next(r for r in slices[part] if r[2])
    return part, row[2], row[3]


def test_checks_fail_when_a_listed_file_is_gone(any_java_hudi, tmp_path):
    """Negative control: storage loses a base file the MDT lists (as after a writer that deletes
    files without telling the MDT): the listings differ and the validator names the file."""
    path = unzip_metadata_fixture("cow_mdt_v6", tmp_path)
    part, name, size = _latest_base_file(any_java_hudi, path)
    (path / part / name).unlink()
    listed = any_java_hudi.metadata_listing(path)["partitions"]
    stored = any_java_hudi.storage_listing(path)["partitions"]
    assert [name, size] in listed[part] and [name, size] not in stored[part]
    r = any_java_hudi.validate_metadata(path)
    assert not r["ok"]
    assert any(name in e and "in the MDT, not in storage" in e for e in r["errors"]), r["errors"]
    assert any(e.startswith(f"latest file slices {part!r}") for e in r["errors"]), r["errors"]


def test_checks_fail_when_storage_holds_a_file_the_mdt_does_not_list(any_java_hudi, tmp_path):
    """Negative control: a committed-looking base file the MDT never heard of (as after a writer
    that commits without its MDT deltacommit, the MDT is behind): storage-backed and MDT-backed
    views disagree, which is what a Java writer would silently get wrong."""
    path = unzip_metadata_fixture("mor_mdt_v6", tmp_path)
    part, name, size = _latest_base_file(any_java_hudi, path)
    stray = f"{uuid.uuid4()}-0_{name.split('_', 1)[1]}"  # a new file group, written at a completed instant
    shutil.copyfile(path / part / name, path / part / stray)
    stored = any_java_hudi.storage_listing(path)["partitions"]
    assert [stray, size] in stored[part]
    assert [stray, size] not in any_java_hudi.metadata_listing(path)["partitions"][part]
    r = any_java_hudi.validate_metadata(path)
    assert not r["ok"]
    assert any(stray in e and "in storage, not in the MDT" in e for e in r["errors"]), r["errors"]
    assert any(e.startswith(f"latest file slices {part!r}") for e in r["errors"]), r["errors"]


def _rows(ids: list[str], city: str, ts: int, tag: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "city": pa.array([city] * len(ids), pa.string()),
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "fare": pa.array([float(ts) + i for i in range(len(ids))], pa.float64()),
            "tag": pa.array([tag] * len(ids), pa.string()),
        }
    )


def _java_options(path: Path) -> dict[str, str]:
    """The fixture's own write options (tests/fixtures/metadata-tables/make_fixtures.py): the same
    MDT partitions enabled, so Java neither adds nor drops one."""
    props = parse_properties((path / ".hoodie" / "hoodie.properties").read_text())
    indexes = "true" if "record_index" in props["hoodie.table.metadata.partitions"] else "false"
    table_type = props["hoodie.table.type"]
    return {
        "hoodie.table.name": props["hoodie.table.name"],
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "city",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.table.timeline.timezone": "UTC",
        "hoodie.metadata.enable": "true",
        "hoodie.metadata.record.index.enable": indexes,
        "hoodie.metadata.index.column.stats.enable": indexes,
        "hoodie.metadata.index.bloom.filter.enable": indexes,
        "hoodie.metadata.compact.max.delta.commits": "3",
        "hoodie.cleaner.commits.retained": "2",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
        "hoodie.compact.inline": "true" if table_type == "MERGE_ON_READ" else "false",
        "hoodie.compact.inline.max.delta.commits": "3",
        "hoodie.parquet.small.file.limit": "0",
    }


def test_java_continues_its_own_mdt(java_hudi, java_hudi_1x, mdt_table):
    """The baseline for "Java's next write uses our metadata table": Java 0.15 upserts into a
    fixture copy with the MDT on; the MDT gets a deltacommit at the new data instant, no
    re-initialisation (no new ...010 instant), and both Java versions still trust it."""
    before = java_hudi.metadata_timeline(mdt_table)
    data_before = {t for t, _a, _s in java_hudi.timeline(mdt_table)}
    opts = _java_options(mdt_table)
    upsert, insert = ({**opts, "hoodie.datasource.write.operation": op} for op in ("upsert", "insert"))
    java_hudi.write(mdt_table, _rows(["a1", "d1"], "sf", 8, "u4"), upsert)
    java_hudi.write(mdt_table, _rows(["e1"], "austin", 9, "i4"), insert)
    after = java_hudi.metadata_timeline(mdt_table)
    data = [t for t, _a, _s in java_hudi.timeline(mdt_table)]
    new_data = [t for t in data if t not in data_before]
    assert len(new_data) >= 2
    # every data instant Java completed has its MDT deltacommit at the same time
    assert set(new_data) <= {t for t, a, s in after if a == "deltacommit" and s == "COMPLETED"}, (
        new_data,
        after,
    )
    assert set(mdt_init_instants(after)) <= set(mdt_init_instants(before)), after
    assert not [i for i in after if i[2] != "COMPLETED"]
    for java in (java_hudi, java_hudi_1x):
        listed = assert_java_trusts_the_mdt(java, mdt_table)
        assert "austin" in listed["partitions"]
        assert listed["synced_instant"] == data[-1]
