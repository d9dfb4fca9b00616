"""`hoodie-sink`: the command line, through `main` and through its entry point (`cluster` with its
thread-pool runner; the Spark runner is exercised by tests/spark/test_append_clustering.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import hoodie_sink
from hoodie_sink.cli import main, parser
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


def _table_for_checks(tmp_path, **options: str) -> tuple:
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.operation": "upsert", **options}
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

    # listed from storage: with a metadata table, a file put beside the table's is not listed at all
    # (the next test)
    path, _ = _table_for_checks(tmp_path, **{"hoodie.metadata.enable": "false"})
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


def test_validate_compares_the_metadata_table_with_storage(tmp_path):
    from hoodie_sink.table.read.snapshot import Snapshot

    path, _ = _table_for_checks(tmp_path, **{"hoodie.metadata.enable": "true"})
    assert cli("validate", str(path)).returncode == 0
    bases = Snapshot.open(str(path)).base_files()
    # a copy beside a base file: not in the metadata table, so no reader sees it; named as such
    victim = path / bases[0].path
    twin = victim.with_name(victim.name.replace(bases[0].file_id, "dupdupdu-0000-0000-0000-000000000000-0"))
    twin.write_bytes(victim.read_bytes())
    found = json.loads(cli("validate", str(path), "--json").stdout)
    assert [(v["check"], v["subject"].rsplit("/", 1)[1]) for v in found] == [("metadata-table", twin.name)]
    assert "missing from the metadata table" in found[0]["detail"]
    twin.unlink()
    # a base file deleted behind the table's back: listed by the metadata table, so readers fail on it
    victim.unlink()
    found = json.loads(cli("validate", str(path), "--json").stdout)
    checks = {(v["check"], v["subject"].rsplit("/", 1)[1]) for v in found}
    assert checks == {("unreadable-file", victim.name), ("metadata-table", victim.name)}


def test_rollback_of_a_pending_write_and_refusals(tmp_path):
    from hoodie_sink.table import client
    from hoodie_sink.table.format.heartbeat import stop_heartbeat
    from hoodie_sink.table.options.write_config import WriteConfig
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
    (done,) = json.loads(capsys.readouterr().out)  # one row per compaction, as the other listings
    assert done["instant"] == scheduled and done["log_files"] >= 2
    assert_table_matches(path, list(rows.values()))
    assert main(["compact", "--path", str(path)]) == 0
    assert "nothing to compact" in capsys.readouterr().out


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def _mor_table(tmp_path) -> tuple:
    """A merge-on-read table: 12 rows, then 6 updates and 6 inserts, then 2 deletes (16 live rows,
    the updates and deletes in log files)."""
    path = str(tmp_path / "mor")
    mor = {**OPTS, "hoodie.datasource.write.table.type": "MERGE_ON_READ", "hoodie.compact.inline": "false",
           "hoodie.datasource.write.operation": "upsert"}  # fmt: skip
    hoodie_sink.write(trips(12), path, {**mor, "hoodie.datasource.write.operation": "bulk_insert"})
    hoodie_sink.write(trips(12, start=6), path, mor)
    hoodie_sink.write(trips(2), path, {**mor, "hoodie.datasource.write.operation": "delete"})
    return path, mor


def test_every_command_takes_the_path_first_or_as_path_option(tmp_path, capsys):
    path, _ = _table_for_checks(tmp_path)
    p = str(path)
    for command in (["timeline"], ["commits"], ["files"], ["file-groups"], ["stats"], ["validate"],
                    ["savepoint", "--list"], ["timeline", "--archived"]):  # fmt: skip
        positional = _run(capsys, command[0], p, *command[1:], "--json")
        option = _run(capsys, command[0], "--path", p, *command[1:], "--json")
        assert positional == option and positional[0] == 0, command
    instant = json.loads(_run(capsys, "commits", p, "--json")[1])[-1]["instant"]
    assert _run(capsys, "commits", "--path", p, instant, "--json") == _run(
        capsys, "commits", p, instant, "--json"
    )
    for service in ("clean", "archive"):
        assert json.loads(_run(capsys, service, p, "--json")[1]) is not None
        assert json.loads(_run(capsys, service, "--path", p, "--json")[1]) is not None
    assert _run(capsys, "cluster", p, "--no-spark", "--json")[0] == 0  # positional, as every command now
    made = json.loads(_run(capsys, "savepoint", "--path", p, "--json")[1])["instant"]
    assert _run(capsys, "restore", "--path", p, made, "--json")[0] == 0
    refused = main(["rollback", "--path", p, instant])  # a completed commit: refused, not a usage error
    assert refused == 3
    for usage in (
        ["timeline"],
        ["timeline", p, "--path", p],
        ["rollback", "--path", p],
        ["commits", p, "a", "b"],
    ):
        with pytest.raises(SystemExit) as exit_:
            main(usage)
        assert exit_.value.code == 2, usage
    capsys.readouterr()


def test_commits_of_one_instant_as_the_usage_line_says(tmp_path, capsys):
    path, _ = _table_for_checks(tmp_path)
    commits = json.loads(_run(capsys, "commits", str(path), "--json")[1])
    last = commits[-1]["instant"]
    code, out = _run(capsys, "commits", str(path), last, "--json")
    assert code == 0 and out == _run(capsys, "commits", str(path), "show", last, "--json")[1]
    assert sum(s["inserts"] + s["updates"] for s in json.loads(out)) == 12
    assert "[show] instant" in parser()._subparsers._group_actions[0].choices["commits"].format_usage()
    assert main(["commits", str(path), "20200101000000000"]) == 3  # no such commit: named, exit 3
    assert main(["commits", str(path), "show"]) == 3


def test_timeline_shows_a_completed_compaction_once_and_stats_count_live_rows(tmp_path, capsys):
    path, _ = _mor_table(tmp_path)
    stats = json.loads(_run(capsys, "stats", path, "--json")[1])
    assert sum(s["rows"] for s in stats) == 16  # live rows: the logs' updates and deletes merged
    base_rows = sum(f["rows"] for f in json.loads(_run(capsys, "files", path, "--json")[1]))
    assert base_rows != 16  # what stats counted before: the base files' rows
    code, out = _run(capsys, "compact", path)
    lines = out.splitlines()
    assert code == 0 and lines[0].split() == [
        "instant",
        "file_slices",
        "rows",
        "log_files",
        "log_bytes",
        "seconds",
    ]
    assert set(lines[1]) == {"-", " "} and len(lines) == 3
    assert len(lines[2]) <= len(lines[1])  # aligned under the header's rule
    compaction = lines[2].split()[0]
    timeline = json.loads(_run(capsys, "timeline", path, "--json")[1])
    entries = [r for r in timeline if r["instant"] == compaction]
    assert len(entries) == 1
    assert entries[0]["action"] == "compaction" and entries[0]["state"] == "completed"
    assert entries[0]["requested"] and entries[0]["inflight"] and entries[0]["completed"]
    human = [line for line in _run(capsys, "timeline", path)[1].splitlines() if line.startswith(compaction)]
    assert len(human) == 1 and human[0].split() == [compaction, "compaction", "completed"]
    assert sum(s["rows"] for s in json.loads(_run(capsys, "stats", path, "--json")[1])) == 16


def test_clean_cluster_and_compact_print_aligned_results(tmp_path, capsys):
    path = str(tmp_path / "t")
    quiet = {**OPTS, "hoodie.clean.automatic": "false", "hoodie.datasource.write.operation": "append"}
    for i in range(3):
        hoodie_sink.write(trips(9, start=i * 9), path, quiet)
    code, out = _run(capsys, "cluster", path, "--no-spark")
    keys = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and keys == ["instant", "groups", "input_files", "output_files", "rows", "seconds"]
    assert len({line.index(line.split()[1]) for line in out.splitlines()}) == 1  # values in one column
    seconds = out.splitlines()[-1].split()[1]
    assert len(seconds.partition(".")[2]) <= 3  # to the millisecond, not a raw float
    code, out = _run(capsys, "clean", path, "-o", "hoodie.cleaner.commits.retained=1")
    lines = out.splitlines()
    assert code == 0 and [line.split()[0] for line in lines] == [
        "instant", "files_deleted", "files_failed", "partitions_listed", "resumed", "seconds"]  # fmt: skip
    assert len({line.index(line.split()[1]) for line in lines}) == 1
    assert len(lines[-1].split()[1].partition(".")[2]) <= 3
    cleaned = json.loads(_run(capsys, "clean", path, "--json")[1])
    assert cleaned["resumed"] == [] and isinstance(cleaned["seconds"], float)
    assert "{" not in _run(capsys, "compact", _mor_table(tmp_path)[0])[1]  # a table, not a dict
