"""Imported by every Python process Spark starts during the tests (this folder is on PYTHONPATH):
sends the registered test folders through the S3 server (tests/support/s3_redirect.py)."""

import contextlib
import os

if os.environ.get("HOODIE_TEST_S3_REGISTRY"):
    # ImportError: a process without hoodie_sink (the interop tier's Spark 3.5)
    with contextlib.suppress(ImportError):
        from tests.support.s3_redirect import install

        install()
