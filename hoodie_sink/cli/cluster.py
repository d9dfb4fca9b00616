"""`hoodie-sink cluster --path P [--option k=v ...]`: one clustering as a Spark job (local[*]
unless --master says otherwise), safe next to a streaming writer of the table."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from hoodie_sink.cli.render import add_output_flags, emit_one
from hoodie_sink.cli.services import config_of, options_of


def add_commands(sub: Any) -> None:
    cl = sub.add_parser("cluster", help="schedule (or resume) and execute one clustering")
    cl.add_argument("--path", required=True, help="table base path (local path or URI)")
    cl.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="clustering option, e.g. hoodie.clustering.plan.strategy.sort.columns=city")  # fmt: skip
    cl.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    cl.add_argument("--no-spark", action="store_true", help="run the groups in a local thread pool instead")
    add_output_flags(cl)
    cl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config_of(args)  # checks every KEY=VALUE and option name before any work starts
    options = options_of(args)
    if args.no_spark:
        from hoodie_sink.table.services.clustering import run as run_here

        result = run_here(args.path, options)
    else:
        from pyspark.sql import SparkSession

        from hoodie_sink.datasource.clustering import run_clustering

        spark = SparkSession.builder.master(args.master).appName("hoodie-sink cluster").getOrCreate()
        try:
            result = run_clustering(spark, args.path, options)
        finally:
            spark.stop()
    emit_one(args, asdict(result) if result else {"result": "nothing to cluster"})
    return 0
