"""`hoodie-sink cluster`: the command line entry point (here with its thread-pool runner; the
Spark runner is exercised by tests/spark/test_append_clustering.py)."""

from __future__ import annotations

import json

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
                 "-o", "hoodie.clustering.plan.strategy.sort.columns=fare"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["input_files"] == 12 and out["output_files"] == 3 and out["rows"] == 120
    assert len(hudi_rs_timeline(path).get_completed_replacecommits()) == 1
    assert_table_matches(path, expected)
    assert main(["cluster", "--path", str(path), "--no-spark"]) == 0
    assert "nothing to cluster" in capsys.readouterr().out
