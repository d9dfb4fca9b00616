"""The pure pieces of the metadata-table sync: what an action changes in the listing, which
metadata instants a reader trusts, and the latest slice of a metadata file group."""

from __future__ import annotations

from hoodie_sink.table.format.commit_metadata import CommitMetadata, WriteStat
from hoodie_sink.table.format.metadata_instants import (
    committed_in_metadata,
    is_suffixed_deltacommit,
    latest_compaction_time,
    latest_completed_time,
    valid_instants,
)
from hoodie_sink.table.format.metadata_slices import latest_slice
from hoodie_sink.table.format.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INFLIGHT,
    REQUESTED,
    ROLLBACK,
    Instant,
)
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metadata.files_change import of_commit, of_deleted_files


def test_a_commit_adds_its_files_with_the_largest_size_and_names_its_partitions():
    md = CommitMetadata(
        operation_type="UPSERT",
        write_stats=[
            WriteStat("f1-0", "sf", "sf/f1-0_0-1-2_001.parquet", file_size_in_bytes=100),
            WriteStat("f2-0", "sf", "sf/.f2-0_000.log.1_0-1-2", file_size_in_bytes=10),
            WriteStat("f2-0", "sf", "sf/.f2-0_000.log.1_0-1-2", file_size_in_bytes=30),  # the same log, grown
            WriteStat("f3-0", "", "f3-0_0-1-2_001.parquet", file_size_in_bytes=7),  # non-partitioned
            WriteStat("f4-0", "nyc", "", file_size_in_bytes=0),  # a stat with no file
        ],
    )
    change = of_commit(md)
    assert change.added == {
        "sf": {"f1-0_0-1-2_001.parquet": 100, ".f2-0_000.log.1_0-1-2": 30},
        "": {"f3-0_0-1-2_001.parquet": 7},
        "nyc": {},
    }
    assert change.removed == {}
    assert change.touched_partitions == {"sf", "", "nyc"}


def test_a_clean_removes_the_files_it_deleted():
    change = of_deleted_files(["sf/a.parquet", "b.parquet", "x/y/.c.log.1_0-0-0"])
    assert change.removed == {"sf": {"a.parquet"}, "": {"b.parquet"}, "x/y": {".c.log.1_0-0-0"}}
    assert not change.added


def _timeline(*specs: tuple[str, str, str]) -> Timeline:
    return Timeline(
        tuple(sorted((Instant(t, a, s) for t, a, s in specs), key=lambda i: (i.timestamp, i.action, i.state)))
    )


def test_suffixed_deltacommits_need_no_data_instant():
    dc = DELTA_COMMIT
    assert is_suffixed_deltacommit(Instant("20240101000000000010", dc))  # initialisation
    assert is_suffixed_deltacommit(Instant("20240101000000000013", dc))
    assert is_suffixed_deltacommit(Instant("20240101000000000003", dc))  # restore sync
    assert not is_suffixed_deltacommit(Instant("20240101000000000", dc))  # a data instant's time
    assert not is_suffixed_deltacommit(Instant("20240101000000000007", dc))  # no such suffix
    assert not is_suffixed_deltacommit(Instant("20240101000000000001", COMMIT))  # a compaction


def test_valid_instants_follow_javas_rule():
    data = _timeline(
        ("20240101000000001", COMMIT, "completed"),
        ("20240101000000002", COMMIT, INFLIGHT),  # its metadata deltacommit is ahead: not valid
        ("20240101000000003", ROLLBACK, "completed"),  # rolled back 002
        ("20240101000000004", CLEAN, "completed"),
        ("20240101000000005", COMPACTION, REQUESTED),
    )
    meta = _timeline(
        ("00000000000000010", DELTA_COMMIT, "completed"),
        ("20240101000000001", DELTA_COMMIT, "completed"),
        ("20240101000000002", DELTA_COMMIT, "completed"),
        ("20240101000000001001", COMMIT, "completed"),
        ("20240101000000004", DELTA_COMMIT, "completed"),
        ("20240101000000006", DELTA_COMMIT, "completed"),  # no data instant at all
    )
    rolled = {"20240101000000003": ["20240101000000002"]}
    valid = valid_instants(data, meta, lambda i: rolled.get(i.timestamp, []))
    assert "20240101000000001" in valid and "20240101000000004" in valid
    assert "00000000000000010" in valid
    assert "20240101000000002" in valid  # rolled back by a completed rollback: Java counts it
    assert "20240101000000006" not in valid
    assert "20240101000000005" not in valid
    assert latest_completed_time(meta) == "20240101000000006"
    assert latest_compaction_time(meta) == "20240101000000001001"


def test_a_block_counts_only_if_its_metadata_deltacommit_completed():
    """Java's log scanner's gate of the metadata timeline: a deltacommit Java rolled back after it
    never completed (its log file left in place) or one still inflight does not count, even if
    valid_instants takes its data instant (rolled back by a completed data rollback)."""
    meta = _timeline(
        ("20240101000000002", DELTA_COMMIT, "completed"),
        ("20240101000000002001", COMMIT, "completed"),
        ("20240101000000004", DELTA_COMMIT, INFLIGHT),
        ("20240101000000005", ROLLBACK, "completed"),  # rolled back 003, which never completed
        ("20240101000000005", DELTA_COMMIT, "completed"),
    )
    committed = committed_in_metadata(meta)
    assert committed("20240101000000002") and committed("20240101000000005")
    assert committed("20240101000000001")  # older than the active timeline: archived
    assert not committed("20240101000000003")  # its deltacommit is gone (rolled back)
    assert not committed("20240101000000004")  # inflight
    assert not committed("20240101000000006")


def test_latest_slice_is_the_newest_completed_base_file_and_its_logs():
    names = [
        (".files-0000-0_00000000000000010.log.1_0-0-0", 80),
        (".files-0000-0_00000000000000010.log.2_0-1-1", 100),
        ("files-0000-0_0-5-4_00000000000000010.hfile", 500),
        ("files-0000-0_0-9-9_20240101000000001001.hfile", 600),
        (".files-0000-0_20240101000000001001.log.2_0-1-1", 90),
        (".files-0000-0_20240101000000001001.log.1_0-1-1", 70),
        ("files-0000-0_0-9-9_20240101000000009001.hfile", 600),  # a compaction not completed
        (".hoodie_partition_metadata", 96),
    ]
    completed = {"00000000000000010", "20240101000000001001"}
    s = latest_slice("files", "files-0000-0", names, completed)
    assert s is not None and s.base_file is not None
    assert s.base_instant == "20240101000000001001"
    assert [lf.version for lf in s.log_files] == [1, 2]
    assert s.next_log_version() == 3
    only_logs = latest_slice("files", "files-0000-0", names[:2], completed)
    assert only_logs is not None and only_logs.base_file is None
    assert only_logs.base_instant == "00000000000000010" and only_logs.next_log_version() == 3
    assert latest_slice("files", "files-0000-0", [], completed) is None
