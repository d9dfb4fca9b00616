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
