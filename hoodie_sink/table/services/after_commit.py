"""The table services that run inline after a commit, in Apache Hudi's order: compaction of a
merge-on-read table and clustering (when due), cleaning, archival.

They run in the process that committed, once the commit has landed, so a service that fails
never undoes or hides the write: it is logged and retried after the next commit (each service
resumes its own pending instant first); with `hoodie.clean.async` / `hoodie.archive.async` they
run in a background thread instead.  `hoodie.fail.on.timeline.archiving=true` makes an
archival failure fail the write call instead, as Java's default does (the commit still stands;
a streaming query that replays the micro-batch finds it committed).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.timeline.instant import CLEAN
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.metrics import PhaseClock
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.services import clustering, compaction
from hoodie_sink.table.services.archival import ArchivalConfig, ArchivalResult, run_archival
from hoodie_sink.table.services.cleaning import CleanConfig, CleanResult, run_clean
from hoodie_sink.table.services.clustering import ClusteringResult
from hoodie_sink.table.services.compaction import CompactionResult
from hoodie_sink.table.storage import Storage

log = logging.getLogger(__name__)


class TableServiceError(HoodieTableError):
    """A table service failed after the write committed."""


@dataclass(frozen=True)
class ServicesReport:
    clustering: ClusteringResult | None
    clean: CleanResult | None
    archival: ArchivalResult | None
    phases_ms: dict[str, int]  # compaction, clustering, clean, archive: what each took (metrics.py)
    compactions: list[CompactionResult] = field(default_factory=list)


def run_after_commit(cfg: WriteConfig) -> ServicesReport:
    clock = PhaseClock()
    compacted: list[CompactionResult] = []
    with clock.phase("compaction"):
        if cfg.compact_async:
            # planned here, between this writer's commits; executed beside the next writes
            if _guarded("compaction scheduling", cfg, compaction.maybe_schedule) is not None:
                _in_background("compaction", cfg, compaction.execute_pending)
        else:
            compacted = _guarded("compaction", cfg, compaction.maybe_run_inline) or []  # type: ignore[assignment]
    with clock.phase("clustering"):
        clustered = clustering.maybe_run_inline(cfg)
    cleaned: CleanResult | None = None
    archived: ArchivalResult | None = None
    with clock.phase("clean"):
        if cfg.clean_automatic and cfg.clean_async:
            _in_background("cleaning", cfg, _clean)
        elif cfg.clean_automatic:
            cleaned = _guarded("cleaning", cfg, _clean)  # type: ignore[assignment]
    with clock.phase("archive"):
        if cfg.archive_automatic and cfg.archive_async:
            _in_background("archival", cfg, _archive)
        elif cfg.archive_automatic:
            archived = _guarded("archival", cfg, _archive, cfg.fail_on_archiving)  # type: ignore[assignment]
    return ServicesReport(clustered, cleaned, archived, clock.ms, compacted)


# hoodie.clean.async / hoodie.archive.async: the service runs in a daemon thread of the committing
# process while the next write goes on (Java's async table services).  At most one per table and
# service: a commit that finds the previous run still going leaves it be (the next commit tries
# again).  A process that exits mid-run leaves a pending clean, finished by the next clean; an
# archival run is atomic per archive file.  Their errors are logged (the write has returned).
_BACKGROUND: dict[tuple[str, str], threading.Thread] = {}
_BACKGROUND_LOCK = threading.Lock()


def _in_background(name: str, cfg: WriteConfig, service: Callable[[WriteConfig], object]) -> None:
    with _BACKGROUND_LOCK:
        running = _BACKGROUND.get((cfg.path, name))
        if running is not None and running.is_alive():
            return
        thread = threading.Thread(
            target=_guarded, args=(name, cfg, service), name=f"hoodie-{name}", daemon=True
        )
        _BACKGROUND[(cfg.path, name)] = thread
        thread.start()


def wait_for_background_services(timeout_s: float = 60.0) -> None:
    """Join the asynchronous services this process started (tests; jobs that exit right after)."""
    with _BACKGROUND_LOCK:
        threads = list(_BACKGROUND.values())
    for thread in threads:
        thread.join(timeout_s)


def _guarded(
    name: str, cfg: WriteConfig, service: Callable[[WriteConfig], object], fail: bool = False
) -> object:
    try:
        return service(cfg)
    except Exception as error:
        if fail:
            raise TableServiceError(
                f"The write to {cfg.path} committed, but {name} after it failed: {error}"
            ) from error
        log.warning("hoodie: %s of %s failed after the commit (the commit stands; retried after the next "
                    "commit): %s", name, cfg.path, error, exc_info=True)  # fmt: skip
        return None


def _clean(cfg: WriteConfig) -> CleanResult | None:
    storage = cfg.storage()
    if cfg.clean_max_commits > 1 and _commits_since_last_clean(storage) < cfg.clean_max_commits:
        return None
    return run_clean(storage, CleanConfig.of(cfg))


def _commits_since_last_clean(storage: Storage) -> int:
    timeline = Timeline.load(storage)
    last = timeline.latest_completed((CLEAN,))
    return sum(1 for i in timeline.completed() if last is None or i.timestamp > last.timestamp)


def _archive(cfg: WriteConfig) -> ArchivalResult:
    return run_archival(cfg.storage(), ArchivalConfig.of(cfg))
