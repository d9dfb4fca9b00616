"""`hoodie-sink`: the command line, through `main` and through its entry point (`cluster` with its
thread-pool runner; the Spark runner is exercised by tests/spark/test_append_clustering.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import hoodie_sink
from hoodie_sink.cli import main
from tests.support.tables import assert_table_matches, hudi_rs_timeline
from tests.unit.test_client import OPTS, trips


def test_cli_clusters_a_table(tmp_path, capsys):
    path = tmp_path / "t"
    expected = []
    for i in range(4):
        t = trips(30, start=i * 30)
        hoodie_sink.write(t, str(path), {**OPTS, "hoodie.datasource.write.operation": "append"})
        expected += t.to_pylist()
    assert main(["cluster", "--path", str(path), "--no-spark",
                 "-o", "hoodie.clustering.plan.strategy.sort.columns=fare", "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["input_files"] == 12 and out["output_files"] == 3 and out["rows"] == 120
    assert len(hudi_rs_timeline(path).get_completed_replacecommits()) == 1
    assert_table_matches(path, expected)
    assert main(["cluster", "--path", str(path), "--no-spark"]) == 0
    assert "nothing to cluster" in capsys.readouterr().out


def cli(*args: str) -> subprocess.CompletedProcess:
    """The command as a user runs it: `python -m hoodie_sink.cli` (the console script's target)."""
    return subprocess.run([sys.executable, "-m", "hoodie_sink.cli", *args], capture_output=True, text=True)


def test_timeline_commits_clean_and_archive_through_the_entry_point(tmp_path):
    path = tmp_path / "t"
    quiet = {**OPTS, "hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false",
             "hoodie.datasource.write.operation": "upsert"}  # fmt: skip
    for _ in range(14):
        hoodie_sink.write(trips(10, start=0), str(path), quiet)  # the same keys: updates
    done = cli("commits", str(path))
    assert done.returncode == 0 and done.stdout.splitlines()[0].split()[:3] == [
        "instant",
        "action",
        "operation",
    ]
    commits = json.loads(cli("commits", str(path), "--json").stdout)
    assert len(commits) == 14 and commits[-1]["updates"] == 10
    stats = json.loads(cli("commits", str(path), "show", commits[-1]["instant"], "--json").stdout)
    assert sum(s["rows"] for s in stats) == 10
    cleaned = json.loads(cli("clean", str(path), "-o", "hoodie.cleaner.commits.retained=3", "--json").stdout)
    assert cleaned["instant"] and cleaned["files_deleted"] > 0
    archived = cli("archive", str(path), "-o", "hoodie.keep.min.commits=4", "-o", "hoodie.keep.max.commits=6",
                   "-o", "hoodie.cleaner.commits.retained=3", "--json")  # fmt: skip
    assert archived.returncode == 0 and json.loads(archived.stdout)["instants"] > 0
    active = json.loads(cli("timeline", str(path), "--json").stdout)
    old = json.loads(cli("timeline", str(path), "--archived", "--json").stdout)
    assert {r["instant"] for r in old if r["action"] == "commit"} | {
        r["instant"] for r in active if r["action"] == "commit"
    } == {c["instant"] for c in commits}
    assert all(r["state"] == "completed" for r in old)
    assert_table_matches(path, trips(10, start=0).to_pylist())


def test_exit_codes_and_version(tmp_path):
    assert cli("--version").stdout.startswith("hoodie-sink ")
    missing = cli("timeline", str(tmp_path / "nothing"))
    assert (
        missing.returncode == 3
        and "hoodie-sink timeline:" in missing.stderr
        and "Traceback" not in missing.stderr
    )
    assert cli("timeline").returncode == 2  # usage
    assert cli("clean", str(tmp_path), "-o", "hoodie.cleaner.policy=KEEP_NOTHING").returncode == 3
    assert main(["timeline", str(tmp_path / "nothing")]) == 3


def _table_for_checks(tmp_path) -> tuple:
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.operation": "upsert"}
    for i in range(3):
        hoodie_sink.write(trips(12, start=i * 4), str(path), opts)
    return path, opts


def test_files_file_groups_and_stats(tmp_path):
    path, _ = _table_for_checks(tmp_path)
    latest = json.loads(cli("files", str(path), "--json").stdout)
    groups = json.loads(cli("file-groups", str(path), "--json").stdout)
    stats = json.loads(cli("stats", str(path), "--json").stdout)
    assert sum(f["rows"] for f in latest) == 20 == sum(s["rows"] for s in stats)  # keys 0..19
    assert {(g["file_id"], g["instant"]) for g in groups if g["latest"]} == {
        (f["file_id"], f["instant"]) for f in latest
    }
    assert len(groups) > len(latest)  # older slices of updated groups
    assert all(s["small_files"] == s["file_groups"] for s in stats)
    human = cli("stats", str(path)).stdout.splitlines()
    assert human[0].split() == ["partition", "file_groups", "rows", "bytes", "small_files"]


def test_validate_passes_on_a_sound_table_and_names_each_corruption(tmp_path):
    import pyarrow.parquet as pq

    from hoodie_sink.table.read.snapshot import Snapshot

    path, _ = _table_for_checks(tmp_path)
    ok = cli("validate", str(path))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "0 violation(s)" in ok.stdout
    bases = Snapshot.open(str(path)).base_files()

    # a duplicate key: a second committed base file with the same keys in the same partition
    victim = path / bases[0].path
    twin = victim.with_name(victim.name.replace(bases[0].file_id, "dupdupdu-0000-0000-0000-000000000000-0"))
    twin.write_bytes(victim.read_bytes())
    found = json.loads(cli("validate", str(path), "--json").stdout)
    assert {v["check"] for v in found} == {"duplicate-key"} and str(twin.name) in found[0]["detail"]
    twin.unlink()

    # a bloom filter that misses keys: the footer of another partition's file
    other = path / bases[-1].path
    table = pq.read_table(victim)
    meta = dict(table.schema.metadata)
    other_meta = pq.read_schema(other).metadata
    meta.update({k: v for k, v in other_meta.items() if b"bloom" in k})
    pq.write_table(table.replace_schema_metadata(meta), victim)
    done = cli("validate", str(path), "--json")
    assert done.returncode == 1
    assert any(v["check"] == "bloom-footer" and victim.name in v["subject"] for v in json.loads(done.stdout))

    # a deleted base file, and an orphan file older than the timeline (every reader would see it)
    victim.unlink()
    orphan = other.with_name(f"{bases[-1].file_id}_0-1-1_20200101000000000.parquet")
    orphan.write_bytes(other.read_bytes())
    found = json.loads(cli("validate", str(path), "--json").stdout)
    checks = {(v["check"], v["subject"].rsplit("/", 1)[1]) for v in found}
    assert ("missing-file", victim.name) in checks and ("orphan-file", orphan.name) in checks


def test_rollback_of_a_pending_write_and_refusals(tmp_path):
    from hoodie_sink.config import WriteConfig
    from hoodie_sink.table import client
    from hoodie_sink.table.format.heartbeat import stop_heartbeat
    from hoodie_sink.table.storage import Storage
    from hoodie_sink.table.write.context import TaskIdentity

    path, opts = _table_for_checks(tmp_path)
    ctx = client.begin(WriteConfig.from_options(opts, path=str(path)), trips(3).schema)
    client.write_task(ctx, TaskIdentity(only_task=True), trips(3, start=100).to_batches())
    refused = cli("rollback", str(path), ctx.instant)
    assert refused.returncode == 3 and "live heartbeat" in refused.stderr
    stop_heartbeat(Storage(str(path)), ctx.instant)  # its writer died and its heartbeat expired
    done = json.loads(cli("rollback", str(path), ctx.instant, "--json").stdout)
    assert done["rolled_back"] == ctx.instant and done["files_deleted"] > 0
    commits = json.loads(cli("commits", str(path), "--json").stdout)
    assert cli("rollback", str(path), commits[-1]["instant"]).returncode == 3  # completed: restore is the way
    assert cli("validate", str(path)).returncode == 0


def test_commands_on_a_table_apache_hudi_wrote(tmp_path):
    from tests.support.tables import unzip_fixture

    path = unzip_fixture("cow_v6_simplekeygen_nonhivestyle", tmp_path)
    assert json.loads(cli("commits", str(path), "--json").stdout)
    assert json.loads(cli("timeline", str(path), "--json").stdout)
    assert json.loads(cli("files", str(path), "--json").stdout)
    done = cli("validate", str(path))
    assert done.returncode == 0, done.stdout


def test_savepoint_and_restore_through_the_entry_point(tmp_path):
    path, opts = _table_for_checks(tmp_path)
    made = json.loads(cli("savepoint", str(path), "--comments", "before", "--json").stdout)
    listed = json.loads(cli("savepoint", str(path), "--list", "--json").stdout)
    assert [s["instant"] for s in listed] == [made["instant"]] and listed[0]["comments"] == "before"
    hoodie_sink.write(trips(5, start=50), str(path), opts)
    done = json.loads(cli("restore", str(path), made["instant"], "--json").stdout)
    assert len(done["rolled_back"]) == 1
    assert_table_matches(path, trips(12, start=8).to_pylist() + trips(8, start=0).to_pylist()[:8])
    assert cli("savepoint", str(path), "--delete", made["instant"]).returncode == 0
    assert cli("restore", str(path), made["instant"]).returncode == 3  # no such savepoint now


def test_cli_compacts_a_merge_on_read_table(tmp_path, capsys):
    path = tmp_path / "t"
    mor = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false"}
    t = trips(40)
    hoodie_sink.write(t, str(path), {**mor, "hoodie.datasource.write.operation": "bulk_insert"})
    rows = {r["id"]: r for r in t.to_pylist()}
    for start in (0, 5):
        u = trips(10, start=start)
        hoodie_sink.write(u, str(path), {**mor, "hoodie.datasource.write.operation": "upsert"})
        rows.update({r["id"]: r for r in u.to_pylist()})
    assert main(["compact", "--path", str(path), "--schedule-only", "--json"]) == 0
    scheduled = json.loads(capsys.readouterr().out)["scheduled"]
    assert main(["compact", "--path", str(path), "--json"]) == 0
    (done,) = json.loads(capsys.readouterr().out)["compactions"]
    assert done["instant"] == scheduled and done["logFiles"] >= 2
    assert_table_matches(path, list(rows.values()))
    assert main(["compact", "--path", str(path)]) == 0
    assert "nothing to compact" in capsys.readouterr().out
