"""Who owns a file group in this write: a create-if-absent claim file per file group.

The owner merges the file group's new version in its task; a task that loses the claim stages
its changes for the commit (../upsert_task.py, step 4).
"""

from __future__ import annotations

from hoodie_sink.table.format.markers import work_dir
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.write.instant_guard import InstantGuard


def claim_path(instant: str, fid: str) -> str:
    return f"{work_dir(instant)}/claims/{fid}"


class FileGroupClaims:
    def __init__(self, storage: Storage, instant: str, token: str, guard: InstantGuard):
        self.storage = storage
        self.instant = instant
        self.token = token
        self.guard = guard
        self.claimed: set[str] = set()
        self.contended: set[str] = set()  # file groups another task also changes
        self.written: set[str] = set()  # file groups this task already wrote a version of

    def try_claim(self, fid: str) -> bool:
        """True when this task owns the file group and has not written a version of it yet."""
        if fid in self.claimed:
            return fid not in self.written
        claim = claim_path(self.instant, fid)
        if self.storage.create_if_absent(claim, self.token.encode()):
            self.guard.wrote(claim)
            self.claimed.add(fid)
            return True
        return False

    def claim_early(self, fid: str) -> None:
        """Claim a file group as soon as a change for it is tagged, not when it is flushed: a
        task that loses the claim marks the file group contended right away, so its owner, which
        usually flushes at the end, stages instead of merging a version the commit would redo."""
        if fid in self.claimed or fid in self.contended:
            return
        if not self.try_claim(fid):
            self.contended.add(fid)
            contended = claim_path(self.instant, fid) + ".contended"
            self.storage.create_if_absent(contended)
            self.guard.wrote(contended)

    def is_contended(self, fid: str) -> bool:
        return fid in self.contended or self.storage.exists(claim_path(self.instant, fid) + ".contended")
