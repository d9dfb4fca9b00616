"""The write report line, visible from Spark's Python workers.

Spark runs a writer's `commit` in a Python worker on the driver machine, whose stderr Spark
forwards to the driver's; that process configures no logging, so an INFO record would be
dropped (Python's last-resort handler prints WARNING and above).  When nobody has configured
logging there, the report's logger gets a plain stderr handler of its own: one line per write,
as users of Hudi's Spark writer and of our streaming sink expect to see.
"""

from __future__ import annotations

import logging
import sys

REPORT_LOGGERS = ("hoodie_sink.table.write.write_path", "hoodie_sink.stream")


def show_reports_on_stderr() -> None:
    if logging.getLogger().handlers:
        return  # the user (or the application) configured logging: leave it to them
    for name in REPORT_LOGGERS:
        logger = logging.getLogger(name)
        if logger.handlers:
            continue
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
