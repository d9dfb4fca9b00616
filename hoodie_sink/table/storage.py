"""The one place that touches storage: a thin wrapper over pyarrow.fs.

Tasks and the commit share nothing but storage, so everything here works with a base URI
(local path, file://, hdfs://, s3:// or its Hadoop spellings s3a:// and s3n://) and paths
relative to it.  The filesystem handle is opened lazily so a `Storage` pickles as its URI and
options alone (it travels to Spark executors).

Atomic primitives:
- `write_atomic`: the content appears whole or not at all.  On local and HDFS filesystems
  it writes a hidden temp file and renames it; object stores publish a PUT atomically.
- `create_if_absent`: fails if the target exists (claims, locks, instant files, markers).
  Atomic on local file systems (O_EXCL, link(2)) and on S3 (a conditional PUT with
  `If-None-Match: *` through obstore; pyarrow has no conditional write).  Elsewhere (HDFS) it
  is check-then-write (`atomic_create` says which).
"""

from __future__ import annotations

import os
import posixpath
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.storage_options import StorageOptions, s3_filesystem, s3_store, split_s3_uri

T = TypeVar("T")

# An S3 server answers a share of requests with a transient failure: a 500 or 503, a throttle, a
# connection that drops while the body streams ("Failed to flush response stream").  The AWS SDK
# retries the request, but not a body that breaks after the headers came.  Reads are idempotent,
# so they are tried again here, a bounded number of times with a growing pause
# (docs/design/occ-and-s3.md, section E).  Refusals (credentials, bucket) are not retried.
TRANSIENT_S3_ERRORS = (
    "INTERNAL_FAILURE",
    "SERVICE_UNAVAILABLE",
    "SLOW_DOWN",
    "THROTTLING",
    "REQUEST_TIMEOUT",
    "NETWORK_CONNECTION",
    "Failed to flush response stream",
    "Connection reset",
    "Broken pipe",
)
READ_ATTEMPTS = 4
READ_RETRY_PAUSE_S = 0.05


def is_transient_s3_error(error: OSError) -> bool:
    text = str(error)
    return any(marker in text for marker in TRANSIENT_S3_ERRORS)


def as_storage(target: str | Storage) -> Storage:
    """A table's storage, given as a Storage (with its S3 options) or a bare path or URI."""
    return target if isinstance(target, Storage) else Storage(target)


@dataclass(frozen=True)
class Backend:
    """The handles behind a base URI: pyarrow's filesystem and the root path in it, and for S3 the
    bucket, key prefix and settings that obstore's conditional PUTs use."""

    fs: pafs.FileSystem
    root: str
    bucket: str | None = None
    key_prefix: str = ""
    options: StorageOptions = field(default_factory=StorageOptions)


def open_backend(uri: str, options: StorageOptions) -> Backend:
    """Resolve a base URI.  (The tests' --storage=s3 wraps this to send local paths to S3.)"""
    if "://" not in uri:
        return Backend(pafs.LocalFileSystem(), os.path.abspath(uri))
    if uri.startswith("file://"):
        return Backend(pafs.LocalFileSystem(), uri[len("file://") :])
    s3 = split_s3_uri(uri)
    if s3 is not None:
        bucket, key = s3
        return Backend(s3_filesystem(options), f"{bucket}/{key}" if key else bucket, bucket, key, options)
    fs, path = pafs.FileSystem.from_uri(uri)
    return Backend(fs, path)


# One S3 client per table location and settings in a process: a write makes many short-lived
# Storage objects, and a client is costly to make (~1 ms for pyarrow's, ~3 ms for obstore's) and
# to warm (its connections).  Both clients are thread-safe.  Local handles cost nothing: not kept.
_S3_CLIENTS: dict[tuple[str, StorageOptions], tuple[Backend, Any]] = {}
_S3_CLIENTS_LOCK = threading.Lock()


def _s3_clients(uri: str, options: StorageOptions) -> tuple[Backend, Any] | None:
    with _S3_CLIENTS_LOCK:
        return _S3_CLIENTS.get((uri, options))


def _keep_s3_clients(uri: str, options: StorageOptions, backend: Backend, store: Any) -> None:
    with _S3_CLIENTS_LOCK:
        if len(_S3_CLIENTS) >= 64:  # a process writes a few tables; bound it all the same
            _S3_CLIENTS.pop(next(iter(_S3_CLIENTS)))
        _S3_CLIENTS[(uri, options)] = (backend, store)


@dataclass
class Storage:
    """Storage rooted at a table's base path.  Relative paths use '/' separators."""

    base_uri: str
    options: StorageOptions = field(default_factory=StorageOptions)
    _fs: pafs.FileSystem | None = field(default=None, init=False, repr=False, compare=False)
    _root: str = field(default="", init=False, repr=False, compare=False)
    _backend: Backend | None = field(default=None, init=False, repr=False, compare=False)
    _store: Any = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict:
        return {"base_uri": self.base_uri, "options": self.options}

    def __setstate__(self, state: dict) -> None:
        self.base_uri = state["base_uri"]
        self.options = state.get("options") or StorageOptions()
        self._fs = None
        self._root = ""
        self._backend = None
        self._store = None

    # -- handles -----------------------------------------------------------------------
    @property
    def fs(self) -> pafs.FileSystem:
        if self._fs is None:
            kept = _s3_clients(self.base_uri, self.options)
            if kept is not None:
                self._backend, self._store = kept
            else:
                self._backend = open_backend(self.base_uri, self.options)
                if self._backend.bucket is not None:
                    self._store = s3_store(self._backend.bucket, self._backend.options)
                    _keep_s3_clients(self.base_uri, self.options, self._backend, self._store)
            self._fs = self._backend.fs
            self._root = self._backend.root.rstrip("/") or "/"
        return self._fs

    @property
    def backend(self) -> Backend:
        self.fs  # noqa: B018 - opens the handle
        assert self._backend is not None
        return self._backend

    @property
    def mtime_resolution_s(self) -> float:
        """How coarse modification times are: S3's Last-Modified has whole seconds."""
        return 1.0 if self.backend.bucket is not None else 0.0

    @property
    def atomic_create(self) -> bool:
        """Whether create_if_absent is atomic against other processes and machines."""
        return self.is_local or self.backend.bucket is not None

    @property
    def root(self) -> str:
        self.fs  # noqa: B018 - opens the handle
        return self._root

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def full(self, rel: str) -> str:
        return posixpath.join(self.root, rel) if rel else self.root

    def unreachable(self, error: Exception) -> HoodieTableError:
        """The error for a table the S3 client cannot reach (credentials, endpoint, bucket): a
        write's or read's first request meets it, and says which settings decide it."""
        return HoodieTableError(
            f"Cannot reach the table at {self.base_uri}: {error}. Help: check the S3 settings "
            "(options fs.s3a.endpoint, fs.s3a.access.key, fs.s3a.secret.key, fs.s3a.endpoint.region, "
            "or the AWS_* environment of every Spark process) and that the bucket exists."
        )

    def retrying(self, read: Callable[[], T]) -> T:
        """`read` (idempotent), tried again after a transient S3 error, at most READ_ATTEMPTS times."""
        attempt = 1
        while True:
            try:
                return read()
            except FileNotFoundError:
                raise
            except OSError as e:
                if self.backend.bucket is None or attempt >= READ_ATTEMPTS or not is_transient_s3_error(e):
                    raise
                time.sleep(READ_RETRY_PAUSE_S * 4 ** (attempt - 1))
                attempt += 1

    # -- queries -----------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        try:
            return self.retrying(lambda: self.fs.get_file_info(self.full(rel))).type != pafs.FileType.NotFound
        except OSError as e:
            if self.backend.bucket is not None:
                raise self.unreachable(e) from e
            raise

    def is_dir(self, rel: str) -> bool:
        return self.fs.get_file_info(self.full(rel)).type == pafs.FileType.Directory

    def size(self, rel: str) -> int:
        info = self.fs.get_file_info(self.full(rel))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(self.full(rel))
        return int(info.size or 0)

    def list_dir(self, rel: str) -> list[pafs.FileInfo]:
        """Direct children of a directory; [] if it does not exist."""
        sel = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=False)
        try:
            return self.retrying(lambda: self.fs.get_file_info(sel))
        except OSError as e:
            if self.backend.bucket is not None:
                raise self.unreachable(e) from e
            raise

    def list_names(self, rel: str) -> list[str]:
        """Names of the direct children of a directory; [] if it does not exist."""
        if self.is_local:
            # names only: pyarrow's listing stats every entry, ~10 ms for a .hoodie/ of 3,000
            # timeline files, and a write lists it in its begin and its commit
            try:
                return os.listdir(self.full(rel))
            except FileNotFoundError:
                return []
        return [info.base_name for info in self.list_dir(rel)]

    def walk_files(self, rel: str) -> Iterator[str]:
        """All files below `rel`, as paths relative to the base path."""
        for path, _ in self.walk_file_sizes(rel):
            yield path

    def walk_file_sizes(self, rel: str) -> Iterator[tuple[str, int]]:
        """(path relative to the base path, size in bytes) of all files below `rel`: the sizes
        come with the listing, no call per file."""
        sel = pafs.FileSelector(self.full(rel), allow_not_found=True, recursive=True)
        prefix = self.root.rstrip("/") + "/"
        for info in self.fs.get_file_info(sel):
            if info.type == pafs.FileType.File:
                yield info.path.removeprefix(prefix), int(info.size or 0)

    # -- reads -------------------------------------------------------------------------
    def read_bytes(self, rel: str) -> bytes:
        def read() -> bytes:
            with self.fs.open_input_stream(self.full(rel)) as f:
                return f.read()

        try:
            return self.retrying(read)
        except FileNotFoundError:
            raise
        except OSError as e:
            if "not found" in str(e).lower() or "no such file" in str(e).lower():
                raise FileNotFoundError(self.full(rel)) from e
            if self.backend.bucket is not None:
                raise self.unreachable(e) from e
            raise HoodieTableError(f"Cannot read {self.full(rel)}: {e}") from e

    def read_text(self, rel: str) -> str:
        return self.read_bytes(rel).decode("utf-8")

    def open_input_file(self, rel: str) -> pa.NativeFile:
        return self.fs.open_input_file(self.full(rel))

    # -- writes ------------------------------------------------------------------------
    def mkdirs(self, rel: str) -> None:
        self.fs.create_dir(self.full(rel), recursive=True)

    def open_output(self, rel: str) -> pa.NativeFile:
        parent = posixpath.dirname(rel)
        if parent and self.is_local:
            self.mkdirs(parent)
        return self.fs.open_output_stream(self.full(rel))

    def write_bytes(self, rel: str, data: bytes) -> None:
        with self.open_output(rel) as f:
            f.write(data)

    def write_atomic(self, rel: str, data: bytes) -> None:
        """Publish `data` at `rel` so readers see all of it or nothing."""
        if not (self.is_local or isinstance(self.fs, pafs.HadoopFileSystem)):
            self.write_bytes(rel, data)  # a single object-store PUT is atomic
            return
        parent, name = posixpath.split(rel)
        tmp = posixpath.join(parent, f".{name}.{uuid.uuid4().hex}.tmp")
        self.write_bytes(tmp, data)
        try:
            self.fs.move(self.full(tmp), self.full(rel))
        except Exception:
            self.delete(tmp)
            raise

    def create_if_absent(self, rel: str, data: bytes = b"") -> bool:
        """Create `rel` with `data` unless it exists.  Returns False if it already existed.

        Local: O_CREAT|O_EXCL (or link(2)) makes the claim atomic.  S3: a conditional PUT
        (`If-None-Match: *`), atomic on the server.  Elsewhere: check-then-write, atomic enough
        for markers (each attempt writes its own names) but not a cross-writer lock.
        """
        if self.is_local:
            full = self.full(rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if not data:
                try:
                    os.close(os.open(full, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                except FileExistsError:
                    return False
                return True
            # With content: write a temp file, then hard-link it into place.  link() fails if the
            # name exists, so the claim stays atomic, and nobody ever reads a half-written file
            # (a reader of a plan being written would otherwise see it empty).
            tmp = f"{full}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            try:
                os.link(tmp, full)
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
            return True
        if self.backend.bucket is not None:
            return self._s3_create(rel, data)
        if self.exists(rel):
            return False
        self.write_bytes(rel, data)
        return True

    def _s3_create(self, rel: str, data: bytes) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError

        backend = self.backend
        key = posixpath.join(backend.key_prefix, rel) if backend.key_prefix else rel
        try:
            obstore.put(self._store, key, data, mode="create")
        except AlreadyExistsError:
            return False
        except Exception as e:
            # 412 answers AlreadyExists; anything else (credentials, network) is an error, never "taken"
            raise HoodieTableError(f"Cannot create s3://{backend.bucket}/{key}: {e}") from e
        return True

    def delete(self, rel: str) -> bool:
        """Delete a file if present.  Returns whether it existed."""
        try:
            self.fs.delete_file(self.full(rel))
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            if "not found" in str(e).lower() or "no such file" in str(e).lower():
                return False
            raise

    def delete_dir(self, rel: str) -> None:
        """Delete a directory tree if present.  Another process may be deleting (or still
        writing into) the same tree: a vanished entry is retried, not an error."""
        for attempt in range(3):
            info = self.fs.get_file_info(self.full(rel))
            if info.type != pafs.FileType.Directory:
                return
            try:
                self.fs.delete_dir(self.full(rel))
                return
            except (FileNotFoundError, OSError) as e:
                if (
                    attempt == 2
                    or not isinstance(e, FileNotFoundError)
                    and "no such file" not in str(e).lower()
                    and "not empty" not in str(e).lower()
                ):
                    raise
