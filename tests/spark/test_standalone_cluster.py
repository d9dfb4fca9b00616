"""The sink on a real standalone cluster on 127.0.0.1: executors are separate processes, so any
state shared through the driver instead of storage breaks here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from tests.support.tables import assert_table_matches

pytestmark = pytest.mark.cluster

DRIVER = r"""
import sys
from pyspark.sql import SparkSession, functions as F
master, path = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master(master).appName("hoodie-cluster-test")
         .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
         .config("spark.executor.memory", "1g").config("spark.cores.max", "2")
         .config("spark.task.maxFailures", "2")
         .config("spark.pyspark.python", sys.executable).config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
df = spark.range(0, 20000, 1, 4).withColumn("city", F.concat(F.lit("c"), (F.col("id") % 4).cast("string")))
opts = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "city"}
writer = df.write.format("hoodie").options(**opts).option("hoodie.datasource.write.operation", "bulk_insert")
writer.mode("append").save(path)
# a task failure on the cluster: retried on an executor, no duplicates
from tests.support import faulty_source
df2 = spark.range(20000, 30000, 1, 4).withColumn("city", F.lit("c9"))
df2.write.format(faulty_source.register(spark)).options(**opts).option("fault.task", "2") \
    .option("fault.log", path + ".faults").mode("append").save(path)
n = spark.read.format("hoodie").load(path).count()
print("ROWS", n)
print("FAULTS", [(part, attempt) for _, part, attempt in faulty_source.injected_in(path + ".faults")])
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_WORKER_DIR": str(tmp_path_factory.mktemp("worker")),
        "SPARK_LOG_DIR": str(tmp_path_factory.mktemp("logs")),
    }
    port = _free_port()
    master = subprocess.Popen(
        [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(_free_port())],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    worker = subprocess.Popen(
        [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--cores", "2", "--memory", "2g",
         "--host", "127.0.0.1", "--webui-port", str(_free_port()), url],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield url
    finally:
        for p in (worker, master):
            p.terminate()
        for p in (worker, master):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_write_and_read_on_standalone_cluster(cluster, tmp_path):
    path = tmp_path / "t"
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    out = subprocess.run([sys.executable, str(script), cluster, str(path)], env=env, capture_output=True, check=False,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    assert "ROWS 30000" in out.stdout
    assert "FAULTS [(2, 0)]" in out.stdout  # task 2 failed once on an executor, and was retried
    expected = [{"id": i, "city": f"c{i % 4}"} for i in range(20000)] + [
        {"id": i, "city": "c9"} for i in range(20000, 30000)
    ]
    assert_table_matches(path, expected)
