"""One runner at a time of a table service on one table: a lock file in the sink's aux folder.

Two schedulers working from the same listing would plan the same files twice (clustering: both
replacecommits would publish the same rows; cleaning and archival: two instants for one job).
The lock holds the time its holder last renewed it (every STALE_LOCK_SECONDS / 4, from a
thread, so a long job keeps it): one older than STALE_LOCK_SECONDS was left by a crash.  It also
names its holder's host and process: a holder on this host that no longer runs (a killed driver,
restarted here) left it, and it is taken over at once rather than after STALE_LOCK_SECONDS.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.heartbeat import SINK_AUX_DIR
from hoodie_sink.table.storage import Storage

STALE_LOCK_SECONDS = 60.0


def lock_path(name: str) -> str:
    return f"{SINK_AUX_DIR}/{name}.lock"


@contextmanager
def service_lock(storage: Storage, name: str, what: str, wait_seconds: float = 120.0) -> Iterator[None]:
    """Hold `<aux>/<name>.lock` while the block runs; `what` names the job in the error."""
    path = lock_path(name)
    deadline = time.monotonic() + wait_seconds
    while not storage.create_if_absent(path, _stamp()):
        try:
            since, holder = _parse(storage.read_bytes(path))
        except (OSError, ValueError):
            since, holder = None, None
        if (since is not None and time.time() - since > STALE_LOCK_SECONDS) or _holder_gone(holder):
            storage.delete(path)
            continue
        if time.monotonic() > deadline:
            raise HoodieTableError(
                f"Could not {what} on {storage.base_uri}: {storage.full(path)} is held by another "
                f"runner for over {wait_seconds:.0f} s."
            )
        time.sleep(0.05)
    done = threading.Event()

    def renew() -> None:
        while not done.wait(STALE_LOCK_SECONDS / 4):
            # a failed renewal is retried at the next tick; a lock not renewed for long is taken over
            with contextlib.suppress(OSError):
                storage.write_atomic(path, _stamp())

    keeper = threading.Thread(target=renew, name=f"hoodie-lock-{name}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()
        storage.delete(path)


_HOST = socket.gethostname()


def _stamp() -> bytes:
    """The lock's content: the time of the last renewal, this host and this process."""
    return f"{time.time()!r} {_HOST} {os.getpid()}".encode()


def _parse(content: bytes) -> tuple[float, tuple[str, int] | None]:
    """(last renewal, (host, pid) of the holder or None for a lock of an older writer)."""
    parts = content.decode("utf-8").split()
    holder = (parts[1], int(parts[2])) if len(parts) >= 3 else None
    return float(parts[0]), holder


def _holder_gone(holder: tuple[str, int] | None) -> bool:
    """Whether the holder ran on this host and its process is gone."""
    if holder is None or holder[0] != _HOST or holder[1] == os.getpid():
        return False
    try:
        os.kill(holder[1], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False
