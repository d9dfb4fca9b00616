"""The table lock of optimistic concurrency control: held only around a commit (the conflict check
and the publication of the completed file), as Java 0.15's TransactionManager holds it.

Two providers, by Java's class names (hoodie.write.lock.provider):

* FileSystemBasedLockProvider: `<hoodie.write.lock.filesystem.path or the table's .hoodie>/lock`,
  the file Java's provider creates, so our writers and Java's exclude each other.  Acquired by
  creating it if absent, released by deleting it.  Java writes no
  content there on those stores (it writes its LockInfo only if the file does not exist yet after
  creating it), so an empty file is a held lock.  A lock older than
  `hoodie.write.lock.filesystem.expire` minutes (0: never, Java's default) was left by a crashed
  holder and is taken over; one runner takes it over, through a claim named after the dead
  lock's modification time.  Local (and mounted) file systems only, where creating a file if
  absent is atomic: elsewhere it is refused until the object-store work of issue 14 lands.
  Retries as Java's LockManager: `client.num_retries` + 1 attempts,
  `client.wait_time_ms_between_retry` apart.
* InProcessLockProvider: Java's is one JVM's lock.  Our commits run in Spark's driver-side Python
  workers, separate processes of one host, so ours is a host lock: `flock` on a file in the
  temporary folder named after the table, waited for up to `hoodie.write.lock.wait_time_ms`.
  Writers on other hosts are not excluded (documented).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hoodie_sink.errors import HoodieConfigError, HoodieLockError
from hoodie_sink.table.format.heartbeat import SINK_AUX_DIR
from hoodie_sink.table.format.timeline.timeline import META_DIR
from hoodie_sink.table.options.write_config import FILESYSTEM_LOCK, WriteConfig
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)

LOCK_FILE = "lock"  # Java's FileSystemBasedLockProvider.LOCK_FILE_NAME


@contextmanager
def table_lock(cfg: WriteConfig) -> Iterator[None]:
    """Hold the table's lock while the block runs (nothing in single-writer mode)."""
    if not cfg.occ:
        yield
        return
    lock = FileSystemLock(cfg) if cfg.lock_provider == FILESYSTEM_LOCK else HostLock(cfg)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def check_table_lock(cfg: WriteConfig) -> None:
    """Refuse a lock that cannot work here at the write's begin, before any work is done."""
    if cfg.occ and cfg.lock_provider == FILESYSTEM_LOCK:
        FileSystemLock(cfg)


class FileSystemLock:
    def __init__(self, cfg: WriteConfig):
        self.storage = Storage(cfg.lock_path, cfg.storage_options) if cfg.lock_path else cfg.storage()
        self.rel = LOCK_FILE if cfg.lock_path else f"{META_DIR}/{LOCK_FILE}"
        self.table = cfg.storage()
        self.attempts = cfg.lock_client_retries + 1
        self.wait_s = cfg.lock_client_wait_ms / 1000
        self.expire_s = cfg.lock_expire_minutes * 60
        if not self.storage.atomic_create:
            # pyarrow offers no create-if-absent on HDFS: a check then a write there would let
            # two writers hold the lock at once
            raise HoodieConfigError(
                f"{FILESYSTEM_LOCK} needs an atomic create-if-absent, which hoodie_sink has on local and "
                f"mounted file systems and on S3 (conditional writes), not at {self.storage.full(self.rel)}. "
                "Help: use InProcessLockProvider (writers on one host), or point "
                "hoodie.write.lock.filesystem.path at a shared mounted folder or an S3 path."
            )

    def acquire(self) -> None:
        for attempt in range(self.attempts):
            if self.storage.create_if_absent(self.rel, b""):
                return
            if self._take_over_expired():
                continue
            if attempt + 1 < self.attempts:
                time.sleep(self.wait_s)
        raise HoodieLockError(
            f"Unable to acquire lock, lock object {self.storage.full(self.rel)}: held by another writer through "
            f"{self.attempts} attempts {self.wait_s:g} s apart (hoodie.write.lock.client.num_retries, "
            "hoodie.write.lock.client.wait_time_ms_between_retry). Nothing of this write was committed. Help: "
            "retry; if no writer is running, a crashed one left the file: delete it, or set "
            "hoodie.write.lock.filesystem.expire (minutes)."
        )

    def _take_over_expired(self) -> bool:
        if not self.expire_s:
            return False
        try:
            mtime = self.storage.fs.get_file_info(self.storage.full(self.rel)).mtime
        except OSError:
            return False
        if mtime is None or time.time() - mtime.timestamp() < self.expire_s:
            return False
        # several writers may see the same dead lock: one claim per dead lock decides who removes it
        claim = (
            f"{SINK_AUX_DIR}/lock-takeover/{hashlib.sha1(self.storage.full(self.rel).encode()).hexdigest()}"
        )
        if not self.table.create_if_absent(f"{claim}-{mtime.timestamp()!r}", b""):
            return False
        log.warning("hoodie: taking over the expired lock %s (%.0f s old)", self.storage.full(self.rel),
                    time.time() - mtime.timestamp())  # fmt: skip
        self.storage.delete(self.rel)
        return True

    def release(self) -> None:
        self.storage.delete(self.rel)


_HOST_LOCKS: dict[str, threading.Lock] = {}
_HOST_LOCKS_GUARD = threading.Lock()


class HostLock:
    """flock on `<tmp>/hoodie-lock-<sha1(table)>`, plus a thread lock (flock is per open file, and
    threads of one process would share nothing else)."""

    def __init__(self, cfg: WriteConfig):
        key = hashlib.sha1(cfg.storage().base_uri.encode()).hexdigest()
        self.path = os.path.join(tempfile.gettempdir(), f"hoodie-lock-{key}")
        self.wait_s = cfg.lock_wait_ms / 1000
        with _HOST_LOCKS_GUARD:
            self.thread_lock = _HOST_LOCKS.setdefault(key, threading.Lock())
        self.fd: int | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait_s
        if not self.thread_lock.acquire(timeout=self.wait_s):
            raise self._timeout()
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o666)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.fd = fd
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    self.thread_lock.release()
                    raise self._timeout() from None
                time.sleep(0.01)

    def _timeout(self) -> HoodieLockError:
        return HoodieLockError(
            f"Unable to acquire lock {self.path} within {self.wait_s:g} s (hoodie.write.lock.wait_time_ms): "
            "another writer of this table on this host holds it. Nothing of this write was committed; retry."
        )

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
            self.thread_lock.release()
