"""File names of the format: base files, log files, write tokens and file ids (pure).

Base file: `<fileId>_<writeToken>_<instant>.parquet` (docs/hudi/format.md#base-file-names); log
file: `.<fileId>_<baseInstant>.log.<version>_<writeToken>` (docs/hudi/format.md#log-file-names).
"""

from __future__ import annotations

import posixpath
import re
import uuid
from dataclasses import dataclass, field

BASE_FILE_EXT = ".parquet"
PARTITION_METAFILE = ".hoodie_partition_metadata"

_LOG_NAME = re.compile(r"^\.(.+)_(\d+)\.log\.(\d+)(?:_(\d+-\d+-\d+))?$")


def write_token(partition_id: int, stage_id: int, task_attempt_id: int) -> str:
    return f"{partition_id}-{stage_id}-{task_attempt_id}"


def new_file_id_prefix() -> str:
    return str(uuid.uuid4())


def file_id(prefix: str, n: int) -> str:
    return f"{prefix}-{n}"


def base_file_name(fid: str, token: str, instant: str) -> str:
    return f"{fid}_{token}_{instant}{BASE_FILE_EXT}"


def log_file_name(fid: str, base_instant: str, version: int, token: str) -> str:
    return f".{fid}_{base_instant}.log.{version}_{token}"


def join_partition(partition_path: str, name: str) -> str:
    return posixpath.join(partition_path, name) if partition_path else name


@dataclass(frozen=True, order=True)
class BaseFile:
    partition_path: str
    file_id: str
    instant: str
    write_token: str
    size: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        return base_file_name(self.file_id, self.write_token, self.instant)

    @property
    def path(self) -> str:
        return join_partition(self.partition_path, self.name)

    @staticmethod
    def parse(partition_path: str, name: str, size: int = 0) -> BaseFile | None:
        if not name.endswith(BASE_FILE_EXT) or name.startswith("."):
            return None
        parts = name[: -len(BASE_FILE_EXT)].split("_")
        if len(parts) != 3:
            return None
        fid, token, instant = parts
        if not instant.isdigit():
            return None
        return BaseFile(partition_path, fid, instant, token, size)


@dataclass(frozen=True, order=True)
class LogFile:
    partition_path: str
    file_id: str
    base_instant: str
    version: int
    write_token: str
    size: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        return log_file_name(self.file_id, self.base_instant, self.version, self.write_token)

    @property
    def path(self) -> str:
        return join_partition(self.partition_path, self.name)

    @staticmethod
    def parse(partition_path: str, name: str, size: int = 0) -> LogFile | None:
        m = _LOG_NAME.match(name)
        if not m:
            return None
        return LogFile(partition_path, m.group(1), m.group(2), int(m.group(3)), m.group(4) or "", size)


@dataclass
class FileSlice:
    """A base file (possibly absent in a log-only group) and the log files on top of it."""

    partition_path: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)  # oldest first

    @property
    def latest_slice(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None


@dataclass(frozen=True)
class SliceFiles:
    """The latest file slice of a file group as a write began: where its next log goes."""

    partition_path: str
    file_id: str
    base_instant: str
    base_name: str | None  # None for a log-only slice
    log_names: tuple[str, ...] = ()
    max_version: int = 0
    has_deletes: bool = False  # a log of the slice holds a delete block (its deltacommit says so)
    # a pending compaction holds the file group: new logs start the slice of its instant
    # (`base_instant`), while base_name/log_names are the slice being compacted (what is stored)
    compacting: bool = False

    @property
    def has_logs(self) -> bool:
        return bool(self.log_names)


@dataclass
class Listing:
    """The data files of a table (or of some of its partitions), with their sizes: what a storage
    listing or the metadata table's `files` partition says is there."""

    base_files: list[BaseFile] = field(default_factory=list)
    log_files: list[LogFile] = field(default_factory=list)
    partitions: set[str] = field(default_factory=set)
