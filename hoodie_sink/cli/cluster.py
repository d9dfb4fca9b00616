"""`hoodie-sink cluster --path P [--option k=v ...]`: one clustering as a Spark job (local[*]
unless --master says otherwise), safe next to a streaming writer of the table."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.render import emit_one
from hoodie_sink.cli.services import add_job_parser, config_of, options_of, spark_session


def add_commands(sub: Any) -> None:
    cl = add_job_parser(sub, "cluster", "schedule (or resume) and execute one clustering",
                        "hoodie.clustering.plan.strategy.sort.columns=city")  # fmt: skip
    cl.add_argument("--no-spark", action="store_true", help="run the groups in a local thread pool instead")
    cl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config_of(args)  # checks every KEY=VALUE and option name before any work starts
    options = options_of(args)
    if args.no_spark:
        from hoodie_sink.table.services.clustering import run as run_here

        result = run_here(args.path, options)
    else:
        from hoodie_sink.datasource.clustering import run_clustering

        with spark_session(args.master, "hoodie-sink cluster") as spark:
            result = run_clustering(spark, args.path, options)
    emit_one(args, asdict(result) if result else {"result": "nothing to cluster"})
    return 0
