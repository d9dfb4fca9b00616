"""A Hive metastore on 127.0.0.1 for the catalog tests: Apache Hive's standalone metastore.

The distribution comes from Maven Central (tests/interop/fetch_jars.py, `fetch_metastore`; `./run.sh
test` fetches it during set-up), 3.1.3 unless $HOODIE_HMS_VERSION names another (4.0.1 runs too).
Each server keeps everything in its own folder: its configuration (metastore-site.xml, first on
the class path), an embedded Derby database whose schema DataNucleus creates on first use
(`datanucleus.schema.autoCreateAll`, schema verification off), the warehouse, and its log
(`metastore.log`, kept with the session's temporary folders for a failing test to be read).

Readiness is a Thrift answer (the list of databases) from a live server, not an open port: a port
found free can be taken by another process before the metastore binds it, which is then retried on
another port, as the S3 server does (tests/support/s3_server.py).

    pytest fixture `hive_metastore` (session): a running `HiveMetastore`; `.uri` is thrift://127.0.0.1:<port>
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from hoodie_sink.errors import HoodieCatalogError
from hoodie_sink.table.catalog.hms_client import HiveMetastoreClient
from tests.interop import fetch_jars
from tests.support.s3_server import free_port

VERSION = os.environ.get("HOODIE_HMS_VERSION", fetch_jars.METASTORE_VERSION)


@dataclass
class HiveMetastore:
    """A running metastore: its Thrift URI, warehouse folder and log."""

    uri: str
    port: int
    version: str
    warehouse: Path
    log_path: Path
    process: subprocess.Popen
    started_in_s: float

    def client(self) -> HiveMetastoreClient:
        return HiveMetastoreClient(self.uri)

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _site(state_dir: Path, port: int) -> str:
    settings = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "metastore.warehouse.dir": (state_dir / "warehouse").as_uri(),
        "metastore.thrift.port": str(port),
        # the schema made by DataNucleus on first use, not by schematool (a second JVM, ~10 s more)
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        # the defaults name classes of hive-exec, which the standalone distribution lacks (Hive 3.1)
        "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
        "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
        # nothing to compact or to clean up in a test session's minutes
        "metastore.compactor.initiator.on": "false",
        "metastore.event.db.notification.api.auth": "false",
    }
    props = "\n".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
        for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{props}\n</configuration>\n'


def start(state_dir: Path, version: str = VERSION, timeout_s: float = 180.0) -> HiveMetastore:
    """Start a metastore keeping its state in `state_dir`; returns once it answers Thrift calls."""
    classpath = fetch_jars.metastore_classpath(version)  # fetched when missing
    for _attempt in range(5):
        server = _launch(state_dir, version, classpath, free_port(), timeout_s)
        if server is not None:
            return server
    raise RuntimeError(
        f"the Hive metastore lost the race for a free port 5 times; see its logs in {state_dir}"
    )


def _launch(
    state_dir: Path, version: str, classpath: list[Path], port: int, timeout_s: float
) -> HiveMetastore | None:
    began = time.monotonic()
    home = state_dir / f"hms-{port}"
    conf = home / "conf"
    conf.mkdir(parents=True)
    (home / "warehouse").mkdir()
    (conf / "metastore-site.xml").write_text(_site(home, port))
    log_path = home / "metastore.log"
    log = open(log_path, "wb")  # noqa: SIM115 - the server's lifetime
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    cmd = [
        java,
        "-Xmx384m",
        f"-Dderby.stream.error.file={home / 'derby.log'}",
        "-cp",
        os.pathsep.join([str(conf), *map(str, classpath)]),
        "org.apache.hadoop.hive.metastore.HiveMetaStore",
        "-p",
        str(port),
    ]
    proc = subprocess.Popen(cmd, cwd=home, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    uri = f"thrift://127.0.0.1:{port}"
    deadline = began + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if b"Address already in use" in log_path.read_bytes():
                return None
            raise RuntimeError(f"the Hive metastore exited with {proc.returncode}; see {log_path}")
        if _answers(uri) and proc.poll() is None:
            server = HiveMetastore(
                uri, port, version, home / "warehouse", log_path, proc, time.monotonic() - began
            )
            return server
        time.sleep(0.25)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"the Hive metastore did not answer on {uri} within {timeout_s:.0f} s; see {log_path}")


def _answers(uri: str) -> bool:
    try:
        with HiveMetastoreClient(uri, timeout_s=5) as client:
            return "default" in client.list_databases()
    except HoodieCatalogError:
        return False


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory):
    """A Hive metastore for the whole session (per pytest-xdist worker), stopped at its end.

    Its distribution is fetched by `./run.sh test` with the interop tier's jars, so the same switch
    turns it off: HOODIE_INTEROP=0 skips the tests using it; a missing download fails them."""
    if os.environ.get("HOODIE_INTEROP") == "0":
        pytest.skip("HOODIE_INTEROP=0: the Hive metastore (set up with the interop tier) is switched off")
    if not (fetch_jars.metastore_home(VERSION) / ".unpacked").exists():
        pytest.fail(
            f"Hive metastore {VERSION} not fetched (no {fetch_jars.metastore_home(VERSION)}): run the "
            f"tests with ./run.sh test, or python3 tests/interop/fetch_jars.py hive-metastore-{VERSION}",
            pytrace=False,
        )
    server = start(tmp_path_factory.mktemp("hive-metastore"))
    print(
        f"Hive metastore {server.version} at {server.uri}: up in {server.started_in_s:.1f} s, log {server.log_path}"
    )
    yield server
    server.stop()
