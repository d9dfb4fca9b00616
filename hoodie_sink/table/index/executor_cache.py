"""The executor's cache of base file footers and key columns, shared by its Python workers
(docs/design/routing.md#the-executor-cache, issue 27 item 4).

Spark runs one Python worker process per concurrent task of an executor, and each keeps its own
in-memory caches (key_index.py): without a shared level, a file's footer and key column are read
once per worker, and a stream's tasks land on any worker.  Spark hands every Python worker the
executor's block manager directories in SPARK_LOCAL_DIRS
(docs/spark/python-datasource.md#worker-environment): local disk that belongs to that executor
alone and is deleted when it stops.  This cache keeps there, per base file:

- its footer entries (row count, key range, bloom filter text): a small JSON file;
- its record key column: an Arrow IPC file, memory-mapped when read (no copy, no decoding), so
  the workers share the page cache's one copy.

Base files never change once written and their names are never reused (file id, write token and
instant: docs/hudi/format.md), so an entry, named by a hash of (table URI, file path), is valid as
long as it exists: no invalidation.  The first worker that
needs an entry takes a file lock on it, reads the base file and publishes the entry by an atomic
rename; workers that need it meanwhile wait on the lock and then read the entry.  So each file is
read from storage once per executor, whatever the number of tasks and micro-batches that use it.
The entries are bounded by `budget` bytes: past it, the least recently used entries are removed.

Outside a Spark worker (no SPARK_LOCAL_DIRS: the engine API, tests, the driver) there is no
shared level; the per-process caches work alone."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

DEFAULT_BUDGET = 2 * 1024**3
SWEEP_EVERY_BYTES = 64 * 1024**2  # written by one worker between two checks of the budget
_SUBDIR = "hoodie-sink-key-cache"


class ExecutorCache:
    def __init__(self, root: str, budget: int = DEFAULT_BUDGET):
        self.root = root
        self.budget = budget
        os.makedirs(root, exist_ok=True)
        self._lock = threading.Lock()
        self._written_since_sweep = 0
        self.reads = 0  # entries loaded from storage by this process
        self.hits = 0  # entries found in the cache

    def footer(self, key: tuple, load: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The footer entries of a base file (a JSON-able dict), loaded at most once per executor."""
        return self._entry(key, "footer.json", load, _write_json, _read_json)

    def key_column(self, key: tuple, load: Callable[[], pa.Array]) -> pa.Array:
        """The record key column of a base file, memory-mapped, loaded at most once per executor."""
        return self._entry(key, "keys.arrow", load, _write_arrow, _read_arrow)

    def _entry(self, key: tuple, kind: str, load, write, read):
        name = hashlib.sha1(repr(key).encode()).hexdigest() + "." + kind
        path = os.path.join(self.root, name)
        found = _read_if_present(path, read)
        if found is not None:
            self._count(hits=1)
            return found
        with _locked(path + ".lock"):
            found = _read_if_present(path, read)  # another worker loaded it while we waited
            if found is not None:
                self._count(hits=1)
                return found
            value = load()
            self._count(reads=1)
            if not _published(path, value, write):
                return value
        shared = _read_if_present(path, read)  # the mapped copy: the loaded one can go
        with contextlib.suppress(OSError):  # a sweep of another worker may have removed it since
            self._written(os.path.getsize(path))
        return value if shared is None else shared

    def _count(self, reads: int = 0, hits: int = 0) -> None:
        with self._lock:
            self.reads += reads
            self.hits += hits

    def _written(self, nbytes: int) -> None:
        with self._lock:
            self._written_since_sweep += nbytes
            due = self._written_since_sweep >= min(SWEEP_EVERY_BYTES, max(1, self.budget // 8))
            if due:
                self._written_since_sweep = 0
        if due:
            self.sweep()

    def sweep(self) -> None:
        """Remove the least recently used entries until the cache is within its budget."""
        entries = []
        with contextlib.suppress(OSError), os.scandir(self.root) as it:
            for e in it:
                if e.name.endswith((".json", ".arrow")):
                    with contextlib.suppress(OSError):
                        st = e.stat()
                        entries.append((st.st_atime, st.st_size, e.path))
        total = sum(s for _, s, _ in entries)
        for _, nbytes, path in sorted(entries):
            if total <= self.budget:
                break
            with contextlib.suppress(OSError):  # a mapped entry stays readable by who maps it
                os.unlink(path)
                total -= nbytes


def _published(path: str, value: Any, write: Callable[[str, Any], None]) -> bool:
    """Write the entry under a temporary name, then rename it in place (readers never see half of
    it).  A full or vanished local disk costs the sharing, never the write: False."""
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    try:
        write(tmp, value)
        os.replace(tmp, path)
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock; the lock file stays (removing it would race a waiter)


def _read_if_present(path: str, read):
    try:
        value = read(path)
    except FileNotFoundError:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: the sweep keeps it
    return value


def _write_json(path: str, value: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f)


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _write_arrow(path: str, value: pa.Array) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, pa.schema([("k", value.type)])) as w:
        w.write_batch(pa.record_batch([value], names=["k"]))


def _read_arrow(path: str) -> pa.Array:
    with pa.memory_map(path, "r") as source:
        return pa.ipc.open_file(source).get_batch(0).column(0)


_SHARED: ExecutorCache | None = None
_CONFIGURED = False
_SETUP_LOCK = threading.Lock()


def executor_cache() -> ExecutorCache | None:
    """This executor's cache, or None outside a Spark worker."""
    global _SHARED, _CONFIGURED
    if _CONFIGURED:
        return _SHARED
    with _SETUP_LOCK:
        if not _CONFIGURED:
            local_dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
            first = local_dirs.split(",")[0].strip()
            if first:
                try:
                    _SHARED = ExecutorCache(os.path.join(first, _SUBDIR))
                except OSError:
                    _SHARED = None
            _CONFIGURED = True
    return _SHARED


def set_executor_cache(cache: ExecutorCache | None) -> None:
    """Use `cache` as this process's shared level (None: none); for tests and benchmarks."""
    global _SHARED, _CONFIGURED
    with _SETUP_LOCK:
        _SHARED, _CONFIGURED = cache, True
