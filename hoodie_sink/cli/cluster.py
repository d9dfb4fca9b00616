"""`hoodie-sink cluster P [--option k=v ...]`: one clustering as a Spark job (local[*] unless
--master says otherwise), safe next to a streaming writer of the table."""

from __future__ import annotations

import argparse
from typing import Any

from hoodie_sink.cli.args import options_of
from hoodie_sink.cli.render import emit_one, seconds
from hoodie_sink.cli.services import add_job_parser, spark_session, table_of


def add_commands(sub: Any) -> None:
    cl = add_job_parser(sub, "cluster", "schedule (or resume) and execute one clustering",
                        "hoodie.clustering.plan.strategy.sort.columns=city")  # fmt: skip
    cl.add_argument("--no-spark", action="store_true", help="run the groups in a local thread pool instead")
    cl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    table = table_of(args)  # checks every KEY=VALUE and option name before any work starts
    if args.no_spark:
        result = table.cluster()
    else:
        from hoodie_sink.datasource.clustering import run_clustering

        with spark_session(args.master, "hoodie-sink cluster") as spark:
            result = run_clustering(spark, args.path, options_of(args))
    if result is None:
        emit_one(args, {"result": "nothing to cluster"})
        return 0
    emit_one(args, {"instant": result.instant, "groups": result.groups, "input_files": result.input_files,
                    "output_files": result.output_files, "rows": result.rows,
                    "seconds": seconds(result.seconds)})  # fmt: skip
    return 0
