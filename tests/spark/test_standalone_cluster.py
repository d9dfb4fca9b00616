"""The sink on a real standalone cluster on 127.0.0.1: executors are separate processes, so any
state shared through the driver instead of storage breaks here.  Two workers, each its own
executor; one driver writes a table on local disk and one on the S3 server, where no task shares a
local path with the driver and the S3 settings reach the executors only as the write's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.s3_redirect import REGISTRY_ENV
from tests.support.standalone_cluster import standalone_cluster
from tests.support.tables import assert_table_matches

pytestmark = pytest.mark.cluster

DRIVER = r"""
import json, sys
from pyspark.sql import SparkSession, functions as F
from tests.support import faulty_source
master, targets = sys.argv[1], json.loads(sys.argv[2])  # [[table path, fault log, storage options]]
spark = (SparkSession.builder.master(master).appName("hoodie-cluster-test")
         .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
         .config("spark.executor.memory", "1g").config("spark.cores.max", "2")
         .config("spark.task.maxFailures", "2")
         .config("spark.pyspark.python", sys.executable).config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
for i, (path, faults, storage_opts) in enumerate(targets):
    df = spark.range(0, 20000, 1, 4).withColumn("city", F.concat(F.lit("c"), (F.col("id") % 4).cast("string")))
    opts = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "city",
            **storage_opts}
    writer = df.write.format("hoodie").options(**opts).option("hoodie.datasource.write.operation", "bulk_insert")
    writer.mode("append").save(path)
    # a task failure on the cluster: retried on an executor, no duplicates
    df2 = spark.range(20000, 30000, 1, 4).withColumn("city", F.lit("c9"))
    df2.write.format(faulty_source.register(spark)).options(**opts).option("fault.task", "2") \
        .option("fault.log", faults).mode("append").save(path)
    # upserts: the executors tag them with the index (footers read from the table's storage)
    df3 = spark.range(0, 20000, 4, 4).withColumn("city", F.lit("c0"))  # the same keys: 30000 rows stay 30000
    df3.write.format("hoodie").options(**opts).mode("append").save(path)
    n = spark.read.format("hoodie").options(**storage_opts).load(path).count()
    print("ROWS", i, n)
    print("FAULTS", i, [(part, attempt) for _, part, attempt in faulty_source.injected_in(faults)])
print("EXECUTORS", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1)  # less the driver
spark.stop()
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # two workers, one core each: the job's tasks run in two executor processes
    with standalone_cluster(2, "1g", tmp_path_factory.mktemp("cluster")) as url:
        yield url


def _run_driver(cluster: str, tmp_path: Path, targets: list[tuple[str, dict]]) -> str:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    # no AWS variables and no test redirect: what the executors know of S3 is in the options
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != REGISTRY_ENV}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    spec = [[path, str(tmp_path / f"faults{i}"), opts] for i, (path, opts) in enumerate(targets)]
    args = [sys.executable, str(script), cluster, json.dumps(spec)]
    out = subprocess.run(args, env=env, capture_output=True, check=False, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stdout


def _expected() -> list[dict]:
    return [{"id": i, "city": f"c{i % 4}"} for i in range(20000)] + [
        {"id": i, "city": "c9"} for i in range(20000, 30000)
    ]


def test_write_and_read_on_standalone_cluster_on_local_disk_and_on_s3(cluster, tmp_path, s3, s3_uri):
    """One driver (its JVM and two executors start once) writes two tables: one on local disk,
    one on the S3 server, each with a bulk insert, a task that fails once and upserts."""
    local, remote = tmp_path / "t", tmp_path / "s3t"
    out = _run_driver(cluster, tmp_path, [(str(local), {}), (s3_uri(remote), s3.options())])
    assert "EXECUTORS 2" in out
    for i, table in enumerate((local, remote)):
        assert f"ROWS {i} 30000" in out
        assert f"FAULTS {i} [(2, 0)]" in out  # task 2 failed once on an executor, and was retried
        assert_table_matches(table, _expected())  # s3proxy's files: read locally by ours and hudi-rs
