"""The test side of the Java Hudi oracle: starts `hudi_server.py` in the interop virtualenv and
calls it (see that module for the protocol)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tests.interop import fetch_jars

SERVER = Path(__file__).with_name("hudi_server.py")
VENV_PYTHON = fetch_jars.HOME / "venv-spark-3.5.1" / "bin" / "python"


class JavaHudiError(RuntimeError):
    def __init__(self, error: str, trace: str):
        super().__init__(error)
        self.trace = trace


def interop_missing() -> str | None:
    """Why the interop tier cannot run here, or None (run.sh `ensure_interop` sets it up)."""
    if not VENV_PYTHON.exists():
        return f"no interop virtualenv at {VENV_PYTHON.parent.parent}"
    for version in fetch_jars.BUNDLES:
        if not fetch_jars.jar_path(version).exists():
            return f"no Hudi {version} bundle at {fetch_jars.jar_path(version)}"
    return None


class JavaHudi:
    """One JVM with one Hudi bundle, for the whole test session."""

    def __init__(
        self,
        version: str,
        timezone: str | None = None,
        timeout_s: float = 600,
        driver_memory: str = "2g",
        hive_metastore: str | None = None,
    ):
        """`hive_metastore`: a thrift:// URI; the JVM's Spark then runs with Hive support on that
        metastore (table names resolve through it and Hudi's catalog: `read_table`, `query`)."""
        self.version = version
        self.timeout_s = timeout_s
        self.scratch = Path(tempfile.mkdtemp(prefix=f"java-hudi-{version}-"))
        self.log_path = self.scratch / "server.log"
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_HOME", "PYTHONPATH"))
        }
        jar = str(fetch_jars.jar_path(version))
        cmd = [str(VENV_PYTHON), str(SERVER), "--jar", jar, "--driver-memory", driver_memory]
        if timezone:
            cmd += ["--timezone", timezone]
        if hive_metastore:
            cmd += ["--hive-metastore", hive_metastore, "--scratch", str(self.scratch)]
        self._log = open(self.log_path, "w")  # noqa: SIM115 - open for the process's life
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: a test can kill -9 the JVM with it
        )
        self._replies: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.info = self._reply("start")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._replies.put(line)
        self._replies.put(None)

    def _reply(self, what: str):
        try:
            line = self._replies.get(timeout=self.timeout_s)
        except queue.Empty:
            raise TimeoutError(
                f"Java Hudi {self.version}: no answer to {what} in {self.timeout_s} s"
            ) from None
        if line is None:
            raise RuntimeError(f"Java Hudi {self.version} exited during {what}; log:\n{self.log_tail()}")
        reply = json.loads(line)
        if not reply["ok"]:
            raise JavaHudiError(f"Java Hudi {self.version} {what}: {reply['error']}", reply.get("trace", ""))
        return reply["result"]

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def call(self, op: str, **args):
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        return self._reply(op)

    # -- conveniences ---------------------------------------------------------------------------
    def write(self, path, data: pa.Table, options: dict, mode: str = "append") -> float:
        """Java writes `data`; returns the seconds its write took."""
        src = self.scratch / f"in-{uuid.uuid4().hex}.parquet"
        pq.write_table(data, src)
        try:
            return self.call("write", path=str(path), input=str(src), options=options, mode=mode)["seconds"]
        finally:
            src.unlink(missing_ok=True)

    def read(self, path, **options) -> pa.Table:
        out = self.scratch / f"out-{uuid.uuid4().hex}"
        self.call("read", path=str(path), out=str(out), options={k: str(v) for k, v in options.items()})
        t = pq.read_table(out)
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
        return t

    def query(self, statement: str, refresh: tuple[str, ...] = ()) -> pa.Table:
        """A Spark SQL query's rows (names resolve through the session catalog), after refreshing
        the tables named in `refresh` (Spark caches a table's file listing for the session)."""
        return self.query_with_plan(statement, refresh)[0]

    def query_with_plan(self, statement: str, refresh: tuple[str, ...] = ()) -> tuple[pa.Table, str]:
        """A Spark SQL query's rows and its physical plan (as Spark prints it)."""
        out = self.scratch / f"out-{uuid.uuid4().hex}"
        plan = self.call("query", statement=statement, out=str(out), refresh=list(refresh))["plan"]
        t = pq.read_table(out)
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
        return t, plan

    def read_table(self, name: str) -> pa.Table:
        """`spark.table(name)` after `REFRESH TABLE name`: a table of the catalog, read as Spark
        resolves it, as of the latest commit (without the refresh, as of the session's first read)."""
        return self.query(f"SELECT * FROM {name}", refresh=(name,))

    def catalog_table(self, name: str) -> dict:
        """Spark's view of a catalog table: provider, location, partition columns, schema, storage
        properties (hudi_server.py `catalog_table`)."""
        return self.call("catalog_table", name=name)

    def read_filtered(self, path, where: str, **options) -> pa.Table:
        """Java's snapshot read with a filter (a SQL expression); with hoodie.enable.data.skipping and
        the column stats index on, Java prunes files by the metadata table's statistics."""
        out = self.scratch / f"out-{uuid.uuid4().hex}"
        opts = {k: str(v) for k, v in options.items()}
        self.call("read_filtered", path=str(path), out=str(out), where=where, options=opts)
        t = pq.read_table(out)
        for f in out.iterdir():
            f.unlink()
        out.rmdir()
        return t

    def column_stats(self, path, files: list[tuple[str, str]], columns: list[str]) -> dict:
        """Java's merged column statistics: {"<partition>/<file>": {column: [min, max, nulls, values]}}."""
        return self.call("column_stats", path=str(path), files=[list(f) for f in files], columns=columns)

    def bloom_filters(self, path, files: list[tuple[str, str]]) -> dict:
        """Java's bloom filters from the metadata table: {"<partition>/<file>": serialised filter}."""
        return self.call("bloom_filters", path=str(path), files=[list(f) for f in files])

    def timeline(self, path, completed_only: bool = True) -> list[tuple[str, str, str]]:
        return [tuple(i) for i in self.call("timeline", path=str(path), completed_only=completed_only)]

    # -- the metadata table (hudi_server.py: metadata_listing ... validate_metadata) ----------------
    def metadata_listing(self, path) -> dict:
        """Java's MDT reader: partitions -> [(file, size), ...], synced/latest MDT instant, MDT timeline."""
        return self.call("metadata_listing", path=str(path))

    def storage_listing(self, path) -> dict:
        """The same listing from storage (FileSystemBackedTableMetadata)."""
        return self.call("storage_listing", path=str(path))

    def file_slices_via_metadata(self, path, partitions: list[str] | None = None) -> dict:
        """Latest file slices of Java's MDT-backed view (what its writers use):
        partition -> [[file id, base instant, base file, base size, [[log, size], ...]], ...]."""
        return self.call("file_slices_via_metadata", path=str(path), partitions=partitions, metadata=True)

    def file_slices_via_storage(self, path, partitions: list[str] | None = None) -> dict:
        """The same from the listing-based view (metadata off), for comparison."""
        return self.call("file_slices_via_metadata", path=str(path), partitions=partitions, metadata=False)

    def metadata_timeline(self, path) -> list[tuple[str, str, str]]:
        """The MDT's own timeline, completed and pending: [(time, action, state), ...]."""
        return [tuple(i) for i in self.call("metadata_timeline", path=str(path))]

    def validate_metadata(self, path) -> dict:
        """Hudi's metadata-table validator's checks (partitions, files by name and size, latest file
        slices and base files: MDT-backed == storage-backed): {"ok", "errors", "checked"}."""
        return self.call("validate_metadata", path=str(path))

    def validate_record_index(self, path) -> dict:
        """Hudi's metadata-table validator's record-index checks: every live key (Java's snapshot)
        looked up through Java's record-index reader at its partition and file id, no entry for a
        key that is not live, as many entries as keys: {"ok", "errors", "checked": {"keys",
        "index_entries", "after_latest"}} (docs/hudi/metadata-table-oracle.md#the-record-index-check)."""
        return self.call("validate_record_index", path=str(path))

    def assert_metadata_valid(self, path) -> dict:
        """validate_metadata, and validate_record_index when hoodie.properties lists record_index,
        failing with Java's findings; returns what was checked (the record index's under
        "record_index")."""
        r = self.validate_metadata(path)
        errors, checked = list(r["errors"]), dict(r["checked"])
        if "record_index" in r["mdt_partitions"]:
            ri = self.validate_record_index(path)
            errors += ri["errors"]
            checked["record_index"] = ri["checked"]
        assert not errors, f"Java Hudi {self.version} rejects the metadata table of {path}:\n" + "\n".join(
            errors
        )
        return checked

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(RuntimeError, OSError):
                self.call("stop")
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()


def mdt_init_instants(timeline) -> list[str]:
    """The MDT instants that (re)initialise an MDT partition: the data instant (or fourteen zeros)
    followed by a suffix of 010 or more (MDT compaction is 001, clean 002, ...; a plain MDT
    deltacommit has the data instant's own time and no suffix)."""
    out = []
    for time, *_ in timeline:
        base = 14 if time.startswith("0" * 14) and len(time) == 17 else 17
        if len(time) == base + 3 and int(time[base:]) >= 10:
            out.append(time)
    return out


def main() -> None:  # python -m tests.interop.java_hudi 0.15.0: start one and print its versions
    j = JavaHudi(sys.argv[1] if len(sys.argv) > 1 else "0.15.0")
    print(j.info)
    j.close()


if __name__ == "__main__":
    main()
