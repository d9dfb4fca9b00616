"""The demos' Spark session and their line per micro-batch (hoodie_sink/demo.py, demo_kafka.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def local_session(app: str, conf: dict[str, str] | None = None) -> Any:
    """The demos' Spark session: local, two cores, no UI, UTC, quiet; `conf` added."""
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.master("local[2]").appName(app)
         .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "2"))  # fmt: skip
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def print_progress(spark: Any, line: Callable[[Any, float], str]) -> None:
    """A line per micro-batch that read anything: `line(progress, seconds)`."""
    from pyspark.sql.streaming import StreamingQueryListener

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            p = event.progress
            if p.numInputRows:
                print(line(p, (p.batchDuration or 0) / 1000), flush=True)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    spark.streams.addListener(Progress())
