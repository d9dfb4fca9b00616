"""The interop tier: Apache Hudi itself (Java, through its Spark bundles) as reader and writer.

One JVM per Hudi version for the whole session, both with their JVM zone west of UTC (Java
stamps instants in that zone on tables without hoodie.table.timeline.timezone=UTC):
`java_hudi` is Hudi 0.15.0, `java_hudi_1x` Hudi 1.1.1 (kept at table version 6 with
hoodie.write.auto.upgrade=false).  `./run.sh test` sets the tier up; HOODIE_INTEROP=0 skips it.
"""

from __future__ import annotations

import os

import pytest

from tests.interop.java_hudi import JavaHudi, interop_missing

ZONES = {"0.15.0": "America/Los_Angeles", "1.1.1": "America/New_York"}


def _start(version: str) -> JavaHudi:
    if os.environ.get("HOODIE_INTEROP") == "0":
        pytest.skip("HOODIE_INTEROP=0: the Apache Hudi interop tier is switched off")
    missing = interop_missing()
    if missing:
        pytest.fail(f"interop tier not set up ({missing}): run the tests with ./run.sh test", pytrace=False)
    return JavaHudi(version, timezone=ZONES[version])


@pytest.fixture(scope="session")
def java_hudi():
    j = _start("0.15.0")
    yield j
    j.close()


@pytest.fixture(scope="session")
def java_hudi_1x():
    j = _start("1.1.1")
    yield j
    j.close()


@pytest.fixture(params=["0.15.0", "1.1.1"])
def any_java_hudi(request):
    return request.getfixturevalue("java_hudi" if request.param == "0.15.0" else "java_hudi_1x")


@pytest.fixture
def spark(spark_session):
    return spark_session
