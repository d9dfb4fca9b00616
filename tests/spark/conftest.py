"""One shared SparkSession (pytest-spark's `spark_session`, options in pyproject.toml)."""

from __future__ import annotations

import pytest

from tests.support.kafka_broker import kafka_broker  # noqa: F401 - the Kafka tests' broker


@pytest.fixture
def spark(spark_session):
    return spark_session
