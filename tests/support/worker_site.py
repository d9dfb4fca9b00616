"""Patches for Spark's Python workers, for tests that run their own driver in a subprocess.

A monkeypatch in the test process does not reach the workers that run tasks and commits.  A
test-only `sitecustomize.py` on the driver's PYTHONPATH is imported by every Python process
Spark starts (the driver, the worker daemon and its forks), so it can patch production code
there.  The shared pytest-spark session cannot take one after it started: tests using this run
their own driver (see tests/spark/test_streaming_kill.py, test_streaming_commit_outcome.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def driver_env(site_dir: Path, sitecustomize: str, **extra: str) -> dict[str, str]:
    """The environment of a driver subprocess whose Python processes all run `sitecustomize`."""
    site_dir.mkdir(parents=True, exist_ok=True)
    # only the first sitecustomize on the path is imported: keep the S3 redirect's (conftest.py) too
    s3_hook = (Path(__file__).with_name("s3site") / "sitecustomize.py").read_text()
    (site_dir / "sitecustomize.py").write_text(sitecustomize + "\n" + s3_hook)
    path = os.pathsep.join(p for p in (str(site_dir), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, **extra, "PYTHONPATH": path}
