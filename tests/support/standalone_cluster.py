"""A Spark standalone cluster on 127.0.0.1: a master and N workers of one core each, every worker
its own executor process (tests/spark/test_standalone_cluster.py, benchmarks/bench_routing.py
--cluster).  `with standalone_cluster(2, "1g", scratch) as url:` then a session with master=url and
cluster_conf()."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_conf(workers: int, executor_memory: str) -> tuple[tuple[str, str], ...]:
    return (
        ("spark.driver.host", "127.0.0.1"),
        ("spark.executor.memory", executor_memory),
        ("spark.cores.max", str(workers)),
        ("spark.pyspark.python", sys.executable),
    )


@contextmanager
def standalone_cluster(
    workers: int = 2, worker_memory: str = "2g", scratch: Path | None = None
) -> Iterator[str]:
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    scratch = scratch or Path(tempfile.mkdtemp(prefix="spark-cluster-"))
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(scratch / "work"), "SPARK_LOG_DIR": str(scratch / "logs")}  # fmt: skip
    port = _free_port()
    procs = [subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", str(_free_port())],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    for i in range(workers):
        procs.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.worker.Worker", "--cores", "1", "--memory", worker_memory,
             "--host", "127.0.0.1", "--webui-port", str(_free_port()), "--work-dir", str(scratch / f"w{i}"), url],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
    try:
        yield url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
