"""The metadata table's streaming soak benchmark (benchmarks/bench_metadata_stream_soak.py) as a
smoke run on the suite's session: 2 small micro-batches into a merge-on-read table with and
without the metadata table (one availableNow query each).  Its checks hold (our reader equals the model,
validate_table reports nothing); boundedness is not judged on so short a run, and no timing is
asserted."""

from __future__ import annotations

from benchmarks.bench_metadata_stream_soak import parse_args, soak


def test_the_soak_benchmark_runs_and_its_tables_equal_the_model(spark, tmp_path, capsys):
    args = parse_args(["--batches", "2", "--every", "2", "--rows", "100", "--keys", "400"])
    assert soak(spark, args, tmp_path)
    out = capsys.readouterr().out
    assert "table with the metadata table: equals the model" in out
    assert "table without the metadata table: equals the model" in out
