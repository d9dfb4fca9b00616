"""Session-wide test set-up."""

from __future__ import annotations

import os
import sys

# Spark starts its Python workers with $PYSPARK_PYTHON (default: whatever `python3` is on
# PATH); they must run this interpreter, which has hoodie_sink installed.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
