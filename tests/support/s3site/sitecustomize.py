"""Imported by every Python process Spark starts during the tests (this folder is on PYTHONPATH):
sends the registered test folders through the S3 server (tests/support/s3_redirect.py), and
imports pyspark from the installed package rather than from Spark's zip."""

import contextlib
import os
import sys

# Spark puts its pyspark.zip and py4j zip first on its Python processes' path; zipimport keeps no
# bytecode, so each daemon and worker compiles the pyspark modules it imports again: 2-3 CPU-s per
# Spark session, measured. The installed package beside them is the same code, compiled once.
if any(p.endswith("pyspark/python/lib/pyspark.zip") for p in sys.path):
    sys.path[:] = [p for p in sys.path if not (p.endswith(".zip") and "/pyspark/python/lib/" in p)]

if os.environ.get("HOODIE_TEST_S3_REGISTRY"):
    # ImportError: a process without hoodie_sink (the interop tier's Spark 3.5)
    with contextlib.suppress(ImportError):
        from tests.support.s3_redirect import install

        install()
