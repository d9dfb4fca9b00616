"""Tables of the tests on the S3 server: local test folders reached through S3.

With `pytest --storage=s3` every table path under the run's temporary folder, and without it the
paths of tests marked `s3` (their `[s3]` variant), go through the S3 code path: the sink resolves
such a path to `s3://<bucket>/<key>` on s3proxy (tests/support/s3_server.py), so every read, write,
listing, claim and lock of the table is an S3 request.  s3proxy's filesystem backend keeps object
`<bucket>/<key>` as the file `<basedir>/<bucket>/<key>`, and the run's temporary folder is one of
its buckets (basedir = the folder's parent, bucket = its name), so the object behind a test's
local path is that very file: the test's own checks (hudi-rs, Java Hudi, looking at files) read
what went through S3 without a change.

The redirect wraps `hoodie_sink.table.storage.open_backend` in every process that runs sink code:
the test process (conftest), and the Spark driver and Python workers, which import the
`sitecustomize` of tests/support/s3site (on PYTHONPATH before Spark starts).  Which folders are
redirected is read from a registry file named by $HOODIE_TEST_S3_REGISTRY, since the shared Spark
session's workers outlive any one test.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REGISTRY_ENV = "HOODIE_TEST_S3_REGISTRY"
SITE_DIR = Path(__file__).with_name("s3site")

_cache: tuple[tuple[int, int], dict] | None = None


def write_registry(path: Path, *, endpoint: str, access_key: str, secret_key: str, basedir: str) -> None:
    path.write_text(
        json.dumps(
            {
                "endpoint": endpoint,
                "access_key": access_key,
                "secret_key": secret_key,
                "basedir": basedir,
                "prefixes": [],
            }
        )
    )


def _update(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # readers in other processes never see it half-written


def register(path: Path, prefix: Path) -> None:
    """Send the tables under `prefix` (a folder in the bucket) through S3."""
    _update(path, lambda data: data["prefixes"].append(str(prefix)))


def unregister(path: Path, prefix: Path) -> None:
    _update(
        path, lambda data: data["prefixes"].remove(str(prefix)) if str(prefix) in data["prefixes"] else None
    )


def set_endpoint(path: Path, endpoint: str) -> None:
    """Point the redirect at the server, once it is up on its port."""
    _update(path, lambda data: data.update(endpoint=endpoint))


def _registry() -> dict | None:
    global _cache
    name = os.environ.get(REGISTRY_ENV)
    if not name:
        return None
    try:
        st = os.stat(name)
    except FileNotFoundError:
        return None
    # Each update replaces the file, so its inode tells changes apart that the coarse clock of
    # file times (a few ms) would not.
    version = (st.st_ino, st.st_mtime_ns)
    if _cache is None or _cache[0] != version:
        _cache = (version, json.loads(Path(name).read_text()))
    return _cache[1]


def install() -> None:
    """Wrap the sink's URI resolution (once per process)."""
    from hoodie_sink.table import storage
    from hoodie_sink.table.storage_options import StorageOptions, s3_filesystem

    if getattr(storage.open_backend, "_s3_redirect", False):
        return
    local_backend = storage.open_backend

    def open_backend(uri: str, options: StorageOptions) -> storage.Backend:
        backend = local_backend(uri, options)
        reg = _registry()
        if (
            reg is None
            or backend.bucket is not None
            or not isinstance(backend.fs, storage.pafs.LocalFileSystem)
        ):
            return backend
        path = os.path.abspath(backend.root)
        if not any(path == p or path.startswith(p.rstrip("/") + "/") for p in reg["prefixes"]):
            return backend
        bucket, _, key = os.path.relpath(path, reg["basedir"]).partition("/")
        opts = StorageOptions(
            endpoint=reg["endpoint"],
            access_key=reg["access_key"],
            secret_key=reg["secret_key"],
            path_style=True,
        )
        return storage.Backend(s3_filesystem(opts), f"{bucket}/{key}".rstrip("/"), bucket, key, opts)

    open_backend._s3_redirect = True  # type: ignore[attr-defined]
    storage.open_backend = open_backend
