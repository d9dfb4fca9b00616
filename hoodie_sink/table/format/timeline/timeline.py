"""The active timeline: what `.hoodie/` says has happened, and the writes that move it on.

`Timeline` is an immutable snapshot of the listing (queries are pure); `TimelineStore`
performs the transitions requested -> inflight -> completed on storage.  Completion is the
commit point: its file is published atomically and is the last thing a write does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from hoodie_sink.errors import HoodieCommitStateUnknown, HoodieTableError
from hoodie_sink.table.format.archived_timeline import archive_file_number, decode_archive_file
from hoodie_sink.table.format.commit_metadata import CommitMetadata
from hoodie_sink.table.format.properties import read_table_config
from hoodie_sink.table.format.timeline.instant import (
    COMPLETED,
    INFLIGHT,
    REQUESTED,
    WRITE_ACTIONS,
    Instant,
    next_instant_time,
)
from hoodie_sink.table.storage import Storage

META_DIR = ".hoodie"
log = logging.getLogger(__name__)


class InstantTimeTaken(HoodieTableError):
    """Another writer started an instant at this time (any action): pick the next time."""


@dataclass(frozen=True)
class Timeline:
    instants: tuple[Instant, ...]  # every state file, sorted

    @staticmethod
    def load(storage: Storage) -> Timeline:
        return Timeline(_list_instants(storage))

    @cached_property
    def _by_time(self) -> dict[str, list[Instant]]:
        out: dict[str, list[Instant]] = {}
        for inst in self.instants:
            out.setdefault(inst.timestamp, []).append(inst)
        return out

    def completed(self, actions: tuple[str, ...] = WRITE_ACTIONS) -> list[Instant]:
        if actions == WRITE_ACTIONS:
            return list(self._completed_writes)
        return [i for i in self.instants if i.is_completed and i.action in actions]

    @cached_property
    def _completed_writes(self) -> tuple[Instant, ...]:
        # asked by every step of a write (schema, record size, checkpoints, the fs view)
        return tuple(i for i in self.instants if i.is_completed and i.action in WRITE_ACTIONS)

    def completed_times(self, actions: tuple[str, ...] = WRITE_ACTIONS) -> set[str]:
        if actions == WRITE_ACTIONS:
            return set(self._completed_write_times)
        return {i.timestamp for i in self.completed(actions)}

    # is_committed runs once per data file of a file-system view: computed once per timeline,
    # not once per file (that was files x instants, seconds on a table of 1,000 commits)
    @cached_property
    def _completed_write_times(self) -> frozenset[str]:
        return frozenset(i.timestamp for i in self._completed_writes)

    @cached_property
    def _earliest_write_time(self) -> str | None:
        times = [i.timestamp for i in self.instants if i.action in WRITE_ACTIONS]
        return min(times) if times else None

    def pending(self, actions: tuple[str, ...] | None = None) -> list[Instant]:
        """The latest state of every instant that has no completed file, oldest first."""
        return [i for i in self._pending if actions is None or i.action in actions]

    @cached_property
    def _pending(self) -> tuple[Instant, ...]:
        # a write asks several times (rollback, pending clusterings): computed once per timeline
        out = []
        for _, states in sorted(self._by_time.items()):
            if any(s.is_completed for s in states):
                continue
            out.append(max(states, key=lambda s: (s.state == INFLIGHT, s.state == REQUESTED)))
        return tuple(out)

    def latest_completed(self, actions: tuple[str, ...] = WRITE_ACTIONS) -> Instant | None:
        done = self.completed(actions)
        return done[-1] if done else None

    def last_instant_time(self) -> str | None:
        return self.instants[-1].timestamp if self.instants else None

    def earliest_write_instant_time(self) -> str | None:
        """Smallest instant among write actions in any state: older files count as archived."""
        return self._earliest_write_time

    def is_committed(self, ts: str) -> bool:
        """Hudi's visibility rule: completed, or older than the timeline
        (docs/hudi/format.md#commit-protocol-and-visibility)."""
        if ts in self._completed_write_times:
            return True
        earliest = self._earliest_write_time
        return earliest is None or ts < earliest

    def states_of(self, ts: str) -> list[Instant]:
        return list(self._by_time.get(ts, []))


@dataclass(frozen=True)
class ActiveTimeline(Timeline):
    """The timeline as one write loaded it, with the storage it came from.

    A write loads the timeline once and asks it several questions that need the newest commits'
    metadata (the table schema, the average record size, the streaming checkpoint): each commit
    file is read at most once per load, however many steps ask.  Reload (`load` again) where the
    write must see what others did meanwhile (the commit: checkpoints, conflicts)."""

    storage: Storage | None = field(default=None, compare=False, repr=False)
    _metadata: dict[Instant, CommitMetadata] = field(default_factory=dict, compare=False, repr=False)

    @staticmethod
    def load(storage: Storage) -> ActiveTimeline:
        return ActiveTimeline(_list_instants(storage), storage)

    @property
    def table_storage(self) -> Storage:
        if self.storage is None:
            raise HoodieTableError(
                "This timeline was built without its table's storage: load it with ActiveTimeline.load."
            )
        return self.storage

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        md = self._metadata.get(instant)
        if md is None:
            md = CommitMetadata.from_json(TimelineStore(self.table_storage).read_json(instant))
            self._metadata[instant] = md
        return md


def commit_metadata(storage: Storage, timeline: Timeline, instant: Instant) -> CommitMetadata:
    """The metadata of a completed instant: from the write's ActiveTimeline (read once), else
    read from storage."""
    if isinstance(timeline, ActiveTimeline):
        return timeline.commit_metadata(instant)
    return CommitMetadata.from_json(TimelineStore(storage).read_json(instant))


@lru_cache(maxsize=200_000)
def _parse_cached(name: str) -> Instant | None:
    # A file name always means the same instant: a process that loads a timeline again (each
    # micro-batch's begin and commit) parses only the names it has not seen.
    return Instant.parse(name)


def _list_instants(storage: Storage) -> tuple[Instant, ...]:
    found = []
    for name in storage.list_names(META_DIR):
        inst = _parse_cached(name)
        if inst is not None:
            found.append(inst)
    # Instant's own order, by a tuple key: the dataclass __lt__ costs ~10 ms per 3,000 files
    return tuple(sorted(found, key=lambda i: (i.timestamp, i.action, i.state)))


class TimelineStore:
    """Writes timeline files.  One per table path; stateless apart from the storage handle."""

    def __init__(self, storage: Storage, zone: str | None = None):
        self.storage = storage
        # the timeline's zone (hoodie.table.timeline.timezone); read from the table when not given
        self._zone = zone

    @property
    def zone(self) -> str:
        if self._zone is None:
            self._zone = read_table_config(self.storage).timeline_zone
        return self._zone

    def path(self, instant: Instant) -> str:
        return f"{META_DIR}/{instant.file_name}"

    def create_requested(
        self, ts: str, action: str, content: bytes = b"", time_checked_under_lock: bool = False
    ) -> Instant:
        """Start instant `ts`, unless another writer holds that time under any action.

        Two writers of different actions (a write and a clustering) may pick the same
        millisecond; their files would then share one instant time in their names, markers and
        heartbeat, and undoing one would delete the other's files.  So after creating its file a
        writer looks for another instant at that time, and gives way if it finds one (when both
        look at once, both give way and retry: never both proceed)."""
        inst = Instant(ts, action, REQUESTED)
        mine = self.path(inst)
        if not self.storage.create_if_absent(mine, content):
            raise InstantTimeTaken(
                f"Instant {ts} ({action}) already exists on the timeline of {self.storage.base_uri}."
            )
        # A writer that holds its table's lock and found no instant at `ts` on the timeline it
        # loaded under it (the metadata table's, whose instant times are the data table's) cannot
        # race another: the listing below would only repeat what it saw.
        prefix = f"{ts}."
        if not time_checked_under_lock and any(
            n.startswith(prefix) and n != inst.file_name for n in self.storage.list_names(META_DIR)
        ):
            self.storage.delete(mine)
            raise InstantTimeTaken(f"Instant time {ts} is taken on the timeline of {self.storage.base_uri}.")
        return inst

    def create_requested_at_new_time(
        self,
        after: str | None,
        action: str,
        content: bytes = b"",
        before: Callable[[str], None] | None = None,
    ) -> Instant:
        """Start an instant of `action` at a new time later than `after` (the latest instant the
        caller saw); `before(ts)` runs first at each try (e.g. a heartbeat that must exist before
        the instant appears)."""
        ts = next_instant_time(after, zone=self.zone)
        for _ in range(50):
            if before is not None:
                before(ts)
            try:
                return self.create_requested(ts, action, content)
            except InstantTimeTaken:
                ts = next_instant_time(ts, zone=self.zone)
        raise HoodieTableError(
            f"Could not start a {action} on {self.storage.base_uri}: 50 instant times in a row were taken "
            "by other writers. Help: retry the write."
        )

    def transition_to_inflight(self, requested: Instant, content: bytes = b"") -> Instant:
        inst = requested.with_state(INFLIGHT)
        self.storage.write_atomic(self.path(inst), content)
        return inst

    def complete(self, inflight: Instant, content: bytes) -> Instant:
        """The commit point: publish the completed file atomically.

        A publish that raises may still have landed (a rename or PUT that succeeded but whose
        answer was lost), so the outcome is read back: the exact content is there -> it landed,
        return normally; certainly absent -> the error propagates (nothing landed: safe to abort);
        cannot tell -> HoodieCommitStateUnknown, on which nobody may delete the write's files."""
        done = inflight.with_state(COMPLETED)
        path = self.path(done)
        try:
            if self.storage.backend.bucket is not None:
                # S3: a conditional PUT (If-None-Match), so a completed file is never overwritten;
                # a publication repeated after a lost answer finds it and compares, below
                if not self.storage.create_if_absent(path, content):
                    raise FileExistsError(self.storage.full(path))
            else:
                self.storage.write_atomic(path, content)
        except Exception as error:
            try:
                found = self.storage.read_bytes(path)
            except FileNotFoundError:
                raise error from None
            except Exception as check_error:
                raise _state_unknown(self.storage, done, error, check_error) from error
            if found != content:
                raise _state_unknown(
                    self.storage, done, error, "its content differs from the commit's"
                ) from error
            log.warning("hoodie: publishing %s raised (%s) but the completed file is in place: committed",
                        self.storage.full(path), error)  # fmt: skip
        return done

    def delete_pending(self, ts: str, action: str) -> None:
        """Remove an instant's requested/inflight files: inflight first, requested last, so
        that a crash midway still leaves the instant known as pending."""
        for state in (INFLIGHT, REQUESTED):
            self.storage.delete(self.path(Instant(ts, action, state)))

    def read_json(self, instant: Instant) -> dict[str, Any]:
        try:
            raw = self.storage.read_bytes(self.path(instant))
        except FileNotFoundError:
            # A completed instant listed a moment ago can be archived by another writer before
            # its file is read (a stream archives after each commit).  Archival writes the
            # archive file before it deletes the active ones, so its content is there.
            archived = self._read_archived(instant) if instant.state == COMPLETED else None
            if archived is None:
                raise
            return archived
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            raise HoodieTableError(
                f"Corrupt timeline file {self.storage.full(self.path(instant))}: {e}. "
                "Help: the table's latest commit cannot be parsed; restore it from a backup."
            ) from e

    def _read_archived(self, instant: Instant) -> dict[str, Any] | None:
        folder = f"{META_DIR}/{read_table_config(self.storage).archive_folder}"
        names = [n for n in self.storage.list_names(folder) if archive_file_number(n) is not None]
        for name in sorted(names, key=lambda n: archive_file_number(n) or 0, reverse=True):  # newest first
            for entry in decode_archive_file(self.storage.read_bytes(f"{folder}/{name}"), name):
                if entry.instant == instant:
                    log.info("Instant %s was archived while it was read; its archived copy is used", instant)
                    return entry.details or {}
        return None


def _state_unknown(
    storage: Storage, done: Instant, error: Exception, check: object
) -> HoodieCommitStateUnknown:
    return HoodieCommitStateUnknown(
        f"Commit {done.timestamp} on {storage.base_uri} may or may not have landed: publishing "
        f"{storage.full(f'{META_DIR}/{done.file_name}')} failed ({error}) and checking it failed too ({check}). "
        "Its files are kept. Help: do not retry blindly; read the table's timeline once the storage "
        "answers: if the completed file is there, the write is done; otherwise the next write rolls it back."
    )
