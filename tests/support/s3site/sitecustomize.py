"""Imported by every Python process Spark starts during the tests (this folder is on PYTHONPATH):
sends the registered test folders through the S3 server (tests/support/s3_redirect.py), and
imports pyspark from the installed package rather than from Spark's zip."""

import contextlib
import os
import sys

# Spark puts its pyspark.zip and py4j zip first on its Python processes' path; zipimport keeps no
# bytecode, so each daemon and worker compiles the pyspark modules it imports again: 2-3 CPU-s per
# Spark session, measured. The installed package they ship in (.../pyspark/python/lib/ is inside
# it) is the same code, compiled once; the zips are dropped only when that package is there.
_ZIP = next((p for p in sys.path if p.endswith("/pyspark/python/lib/pyspark.zip")), None)
if _ZIP and os.path.exists(os.path.join(_ZIP[: -len("/python/lib/pyspark.zip")], "__init__.py")):
    sys.path[:] = [p for p in sys.path if not (p.endswith(".zip") and "/pyspark/python/lib/" in p)]

if os.environ.get("HOODIE_TEST_S3_REGISTRY"):
    # ImportError: a process without hoodie_sink (the interop tier's Spark 3.5)
    with contextlib.suppress(ImportError):
        from tests.support.s3_redirect import install

        install()
