"""An S3-compatible server on 127.0.0.1 for the object-storage tests: s3proxy 4.1.0.

Why s3proxy (docs/design/occ-and-s3.md, "Summary"): it is a real server from Maven Central whose
`If-None-Match: *` is atomic by construction (its filesystem backend publishes an object with
link(2)), so races on claims, locks and instants are tested against a server that gets them
right, as AWS S3 does.  Its `filesystem-nio2` backend keeps bucket `b`'s object `k` as the plain
file `<basedir>/b/k`: a test can look at (or corrupt) what the sink wrote through S3 with local
file operations, and hudi-rs and Java Hudi can read the table from that local path.

Authentication is on (SigV4), so the credentials the sink is given are really checked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.interop import fetch_jars

ACCESS_KEY = "hoodie-test"
SECRET_KEY = "hoodie-test-secret"
REGION = "us-east-1"


@dataclass
class S3Server:
    """A running s3proxy: its endpoint, and where its buckets live on local disk."""

    endpoint: str
    basedir: Path
    process: subprocess.Popen

    def bucket(self, name: str) -> Path:
        """Create bucket `name` (a folder of the filesystem backend); its local folder."""
        path = self.basedir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def env(self) -> dict[str, str]:
        """The AWS variables that point a client (pyarrow, obstore, the sink) at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def options(self) -> dict[str, str]:
        """The same as Hadoop S3A options, as a Hudi user passes them to a write or read."""
        return {
            "fs.s3a.endpoint": self.endpoint,
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.path.style.access": "true",
        }

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    basedir: Path, state_dir: Path | None = None, port: int | None = None, timeout_s: float = 60.0
) -> S3Server:
    """Start s3proxy with its buckets under `basedir` (its configuration and log in `state_dir`,
    default basedir's parent); returns once it answers S3 requests on its port.

    A port found free can be taken by another process before s3proxy binds it (Spark and the Java
    servers open ephemeral ports all the time): s3proxy then exits with "Failed to bind" while the
    other process accepts our connections, and every request times out.  So readiness is an HTTP
    answer from a live s3proxy, not an open port, and a lost bind is retried on a new port (unless
    the caller fixed the port)."""
    jar = fetch_jars.fetch("s3proxy")
    basedir.mkdir(parents=True, exist_ok=True)
    state_dir = state_dir or basedir.parent
    attempts = 1 if port else 5
    for _attempt in range(attempts):
        server = _launch(jar, basedir, state_dir, port or free_port(), timeout_s)
        if server is not None:
            return server
    raise RuntimeError(f"s3proxy lost the race for a free port {attempts} times; see its logs in {state_dir}")


def _launch(jar: Path, basedir: Path, state_dir: Path, port: int, timeout_s: float) -> S3Server | None:
    """One s3proxy on `port`: the server once it answers, None if another process had the port."""
    endpoint = f"http://127.0.0.1:{port}"
    conf = state_dir / f"s3proxy-{port}.conf"
    conf.write_text(
        "\n".join(
            [
                "s3proxy.authorization=aws-v2-or-v4",
                f"s3proxy.identity={ACCESS_KEY}",
                f"s3proxy.credential={SECRET_KEY}",
                f"s3proxy.endpoint={endpoint}",
                "jclouds.provider=filesystem-nio2",
                f"jclouds.filesystem.basedir={basedir}",
                "jclouds.identity=unused",
                "jclouds.credential=unused",
            ]
        )
        + "\n"
    )
    log_path = state_dir / f"s3proxy-{port}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - the server's lifetime
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    proc = subprocess.Popen(
        [java, "-Xmx256m", "-jar", str(jar), "--properties", str(conf)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if b"Failed to bind" in log_path.read_bytes():
                return None
            raise RuntimeError(f"s3proxy exited with {proc.returncode}; see {log_path}")
        if _answers(endpoint) and proc.poll() is None:
            return S3Server(endpoint, basedir, proc)
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"s3proxy did not answer on {endpoint} within {timeout_s:.0f} s; see {log_path}")


def _answers(endpoint: str) -> bool:
    """Whether an S3 server answers at `endpoint`: an unsigned request is refused with an S3 error
    document (403), which only an S3 server sends."""
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=2) as resp:
            body = resp.read()
    except urllib.error.HTTPError as e:
        body = e.read()
    except OSError:
        return False
    return b"<Error>" in body or b"ListAllMyBucketsResult" in body
