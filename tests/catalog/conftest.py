"""The catalog tests: a real Hive metastore, one per session (tests/support/hive_metastore.py)."""

from tests.support.hive_metastore import hive_metastore  # noqa: F401 - the session fixture
