"""The interop tier: Apache Hudi itself (Java, through its Spark bundles) as reader and writer.

JVMs live for the whole session, all with their zone west of UTC (Java stamps instants in that
zone on tables without hoodie.table.timeline.timezone=UTC): `java_hudi` is Hudi 0.15.0,
`java_hudi_1x` Hudi 1.1.1 (kept at table version 6 with hoodie.write.auto.upgrade=false), both
for tables we create (their timeline zone is UTC); `java_local` and `java_local_1x` are the same
versions for tables Java creates with its defaults (timeline zone LOCAL).

Why two JVMs per version: Java's instant generator keeps the last instant it issued in a
JVM-wide static and its zone in another (set from the last table loaded), and spins until the
clock passes that last instant. A JVM west of UTC that wrote a UTC table and then writes a LOCAL
one waits out the zone offset (8 hours in Los Angeles): a Java defect of any JVM that writes
tables of both kinds, seen here when one oracle JVM served all tests.
`java_catalog` (0.15.0) and `java_catalog_1x` (1.1.1) run Spark with Hive support on the
session's test metastore (`hive_metastore`): they resolve table names through the metastore and
Hudi's catalog, and only read (so the zone of the tables they read, ours UTC or Java's LOCAL,
never meets their instant generator); docs/hudi/hive-sync.md#reading-through-the-catalog.
`./run.sh test` sets the tier up; HOODIE_INTEROP=0 skips it.
"""

from __future__ import annotations

import os
import time

import pytest

import hoodie_sink
from tests.interop.java_hudi import JavaHudi, interop_missing
from tests.support.hive_metastore import hive_metastore  # noqa: F401 - the session fixture

ZONES = {"0.15.0": "America/Los_Angeles", "1.1.1": "America/New_York"}


def _start(version: str, metastore_uri: str | None = None) -> JavaHudi:
    if os.environ.get("HOODIE_INTEROP") == "0":
        pytest.skip("HOODIE_INTEROP=0: the Apache Hudi interop tier is switched off")
    missing = interop_missing()
    if missing:
        pytest.fail(f"interop tier not set up ({missing}): run the tests with ./run.sh test", pytrace=False)
    return JavaHudi(version, timezone=ZONES[version], hive_metastore=metastore_uri)


def _session_jvm(name: str, version: str):
    @pytest.fixture(scope="session", name=name)
    def jvm():
        j = _start(version)
        yield j
        j.close()

    return jvm


java_hudi = _session_jvm("java_hudi", "0.15.0")
java_hudi_1x = _session_jvm("java_hudi_1x", "1.1.1")
java_local = _session_jvm("java_local", "0.15.0")
java_local_1x = _session_jvm("java_local_1x", "1.1.1")


def _catalog_jvm(name: str, version: str):
    @pytest.fixture(scope="session", name=name)
    def jvm(hive_metastore):  # noqa: F811
        j = _start(version, metastore_uri=hive_metastore.uri)
        yield j
        j.close()

    return jvm


java_catalog = _catalog_jvm("java_catalog", "0.15.0")
java_catalog_1x = _catalog_jvm("java_catalog_1x", "1.1.1")


@pytest.fixture(params=["0.15.0", "1.1.1"])
def any_java_hudi(request):
    return request.getfixturevalue("java_hudi" if request.param == "0.15.0" else "java_hudi_1x")


@pytest.fixture
def spark(spark_session):
    return spark_session


@pytest.fixture
def writers_zone(spark, monkeypatch):
    """`writers_zone(zone)`: our writers run in `zone`, as the Java writer does, for tables without
    hoodie.table.timeline.timezone (LOCAL: each writer stamps instants in its own zone, so writers
    sharing such a table must share a zone, in Java as with us). This process (engine calls,
    clustering's plan and commit) by TZ; Spark's Python workers by the SparkContext's environment
    (`spark.executorEnv.TZ` in an application), which a data source's Python function takes when it
    is registered: hence the registration again, with and after the zone."""
    env = spark.sparkContext.environment

    def set_zone(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        env["TZ"] = zone
        hoodie_sink.register(spark)

    yield set_zone
    env.pop("TZ", None)
    hoodie_sink.register(spark)
    monkeypatch.undo()
    time.tzset()
