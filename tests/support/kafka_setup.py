"""Fetch what the Kafka tests run: Apache Kafka's broker (KRaft) and Spark's Kafka source.

Both come from Maven Central with their dependencies, resolved by Apache Ivy, the resolver Spark
itself uses for `spark.jars.packages` (its jar ships in pyspark's jars/, so nothing more is
installed; why Ivy and not a hand-written POM walker: docs/spark/kafka.md#how-the-jars-are-fetched):

- the broker: `org.apache.kafka:kafka_2.13` and its runtime closure (about 45 jars, 60 MB), plus
  log4j's SLF4J binding so the broker logs, resolved by Ivy's command line into
  $HOODIE_INTEROP_HOME/ivy; the classpath is written to $HOODIE_INTEROP_HOME/kafka-<v>/classpath.txt.
- Spark's Kafka source, `org.apache.spark:spark-sql-kafka-0-10_2.13`, as users bring it: a Spark
  session started once with `spark.jars.packages` and `spark.jars.ivy` pointing at
  $HOODIE_INTEROP_HOME/ivy-spark, which leaves the closure in that cache; the tests' drivers set the
  same two options, and Spark then resolves from the cache without the network.

Standard library only (pyspark is found, not imported, by the Python that runs it); run by
`./run.sh test` after the virtualenv exists, idempotent:

    .venv/bin/python tests/support/kafka_setup.py     # fetch what is missing, print what is there
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

HOME = Path(os.environ.get("HOODIE_INTEROP_HOME", Path.home() / ".cache" / "hoodie_sink"))
REPO = os.environ.get("MAVEN_REPO", "https://repo1.maven.org/maven2").rstrip("/")

# The broker's version: a 4.x (KRaft only) served whole by the Maven repository; Spark's Kafka source
# 4.2.0 brings kafka-clients 3.9.2, which speaks to 4.x brokers.
KAFKA_VERSION = "4.1.1"
# Spark's Kafka source: 4.3.0 is not on the Maven repository this machine reaches ("module not
# found"), 4.2.0 is and runs on PySpark 4.3.0 (docs/spark/kafka.md#versions-tried).
SPARK_KAFKA_VERSION = "4.2.0"
SPARK_KAFKA_PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}"
LOG4J_VERSION = "2.24.3"  # the log4j-core kafka 4.1.1 depends on; its SLF4J 1.x binding


def broker_dir() -> Path:
    return HOME / f"kafka-{KAFKA_VERSION}"


def broker_classpath_file() -> Path:
    return broker_dir() / "classpath.txt"


def spark_ivy_dir() -> Path:
    return HOME / "ivy-spark"


def _spark_stamp() -> Path:
    return spark_ivy_dir() / f"spark-sql-kafka-{SPARK_KAFKA_VERSION}.resolved"


def spark_kafka_conf() -> dict[str, str]:
    """The Spark options that bring Spark's Kafka source, from the cache set-up filled."""
    conf = {"spark.jars.packages": SPARK_KAFKA_PACKAGE, "spark.jars.ivy": str(spark_ivy_dir())}
    if "MAVEN_REPO" in os.environ:
        conf["spark.jars.repositories"] = REPO
    return conf


def missing() -> str:
    """What set-up has not fetched yet ('' when all is there)."""
    gone = []
    if not broker_classpath_file().is_file():
        gone.append(f"Kafka {KAFKA_VERSION}'s jars ({broker_classpath_file()})")
    if not _spark_stamp().is_file():
        gone.append(f"{SPARK_KAFKA_PACKAGE} in {spark_ivy_dir()}")
    return ", ".join(gone)


def ivy_jar() -> Path:
    """Ivy's jar from the pyspark installed beside the running Python."""
    site = sysconfig.get_paths()["purelib"]
    found = sorted(glob.glob(os.path.join(site, "pyspark", "jars", "ivy-*.jar")))
    if not found:
        raise SystemExit(f"no pyspark with Ivy's jar under {site}: run this with the project's virtualenv")
    return Path(found[-1])


IVY_MODULE = """<ivy-module version="2.0">
  <info organisation="hoodie_sink" module="kafka-broker"/>
  <dependencies>
    <dependency org="org.apache.kafka" name="kafka_2.13" rev="{kafka}" conf="default->default"/>
    <dependency org="org.apache.logging.log4j" name="log4j-slf4j-impl" rev="{log4j}" conf="default->default"/>
  </dependencies>
</ivy-module>
"""
IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="maven"/>
  <resolvers><ibiblio name="maven" m2compatible="true" root="{repo}/"/></resolvers>
</ivysettings>
"""


def fetch_broker() -> Path:
    """Resolve Kafka's broker and its dependencies; the classpath file lists the jars."""
    out = broker_classpath_file()
    if out.is_file():
        return out
    d = broker_dir()
    d.mkdir(parents=True, exist_ok=True)
    (d / "ivy.xml").write_text(IVY_MODULE.format(kafka=KAFKA_VERSION, log4j=LOG4J_VERSION))
    (d / "ivysettings.xml").write_text(IVY_SETTINGS.format(repo=REPO))
    tmp = out.with_suffix(".part")
    cmd = ["java", "-jar", str(ivy_jar()), "-settings", str(d / "ivysettings.xml"),
           "-ivy", str(d / "ivy.xml"), "-confs", "default", "-cache", str(HOME / "ivy"),
           "-cachepath", str(tmp)]  # fmt: skip
    with open(d / "resolve.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0 or not tmp.is_file():
        raise SystemExit(f"Ivy could not resolve Kafka {KAFKA_VERSION} (exit {rc}): see {d / 'resolve.log'}")
    tmp.rename(out)
    return out


_SPARK_RESOLVE = """
import sys
from pyspark.sql import SparkSession
b = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
for kv in sys.argv[1:]:
    k, _, v = kv.partition("=")
    b = b.config(k, v)
b.getOrCreate().stop()
"""


def fetch_spark_kafka() -> Path:
    """Start a Spark session once with the package, as users bring it: Spark's Ivy fills the cache."""
    stamp = _spark_stamp()
    if stamp.is_file():
        return spark_ivy_dir()
    spark_ivy_dir().mkdir(parents=True, exist_ok=True)
    args = [f"{k}={v}" for k, v in spark_kafka_conf().items()]
    log_path = spark_ivy_dir() / "resolve.log"
    with open(log_path, "w") as log:
        rc = subprocess.run([sys.executable, "-c", _SPARK_RESOLVE, *args], stdout=log,
                            stderr=subprocess.STDOUT, check=False).returncode  # fmt: skip
    if rc != 0:
        raise SystemExit(f"Spark could not resolve {SPARK_KAFKA_PACKAGE} (exit {rc}): see {log_path}")
    stamp.write_text(SPARK_KAFKA_PACKAGE + "\n")
    return spark_ivy_dir()


def main() -> int:
    try:
        print(fetch_broker())
        print(fetch_spark_kafka())
    except SystemExit as e:
        print(f"kafka set-up: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
