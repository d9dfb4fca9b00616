"""Command line: `hoodie-sink cluster --path P [--option k=v ...]` runs one clustering as a Spark
job (local[*] unless --master says otherwise), safe next to a streaming writer of the table."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hoodie-sink", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    cl = sub.add_parser("cluster", help="schedule (or resume) and execute one clustering")
    cl.add_argument("--path", required=True, help="table base path (local path or URI)")
    cl.add_argument("--option", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="clustering option, e.g. hoodie.clustering.plan.strategy.sort.columns=city")  # fmt: skip
    cl.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    cl.add_argument("--no-spark", action="store_true", help="run the groups in a local thread pool instead")
    args = ap.parse_args(argv)
    options = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--option takes KEY=VALUE, got {item!r}")
        options[key.strip()] = value
    if args.no_spark:
        from hoodie_sink.table.services.clustering import run

        result = run(args.path, options)
    else:
        from pyspark.sql import SparkSession

        from hoodie_sink.datasource.clustering import run_clustering

        spark = SparkSession.builder.master(args.master).appName("hoodie-sink cluster").getOrCreate()
        try:
            result = run_clustering(spark, args.path, options)
        finally:
            spark.stop()
    print(json.dumps(asdict(result) if result else {"result": "nothing to cluster"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
