"""One shared SparkSession (pytest-spark's `spark_session`, options in pyproject.toml)."""

from __future__ import annotations

import pytest


@pytest.fixture
def spark(spark_session):
    return spark_session
