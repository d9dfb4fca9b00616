"""A record index built directly with the format functions, for tests and benchmarks: a data
table's `hoodie.properties` and timeline (only what a record-index reader looks at) and the
metadata table's `record_index` partition (base HFiles as compaction writes them, log files of
HFILE_DATA and DELETE blocks), with the timelines that make their instants trusted or not."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa

from hoodie_sink.table.format.hfile import write_hfile
from hoodie_sink.table.format.log_format import LogBlock, encode_block
from hoodie_sink.table.format.metadata_blocks import (
    LOG_BLOCK_SIZE,
    SCHEMA_FILE_INFO,
    metadata_data_block,
    metadata_delete_block,
)
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX, file_group_indexes
from hoodie_sink.table.format.metadata_layout import (
    metadata_base_file_name,
    metadata_file_id,
    metadata_log_file_name,
)
from hoodie_sink.table.format.metadata_records import encode_record, record_index_record
from hoodie_sink.table.format.metadata_schema import METADATA_RECORD_SCHEMA_JSON
from hoodie_sink.table.metadata.data_properties import set_listed_partitions
from hoodie_sink.table.storage import Storage

Location = tuple[str, str, str]  # (partition path, file id, inserting instant)
INIT = "00000000000000010"  # the record index's initialisation on an empty table


class RecordIndexBuilder:
    def __init__(self, root: Path, file_groups: int, block_size: int = LOG_BLOCK_SIZE, listed: bool = True):
        self.root = Path(root)
        self.n = file_groups
        self.block_size = block_size
        self.hoodie = self.root / ".hoodie"
        self.mdt = self.hoodie / "metadata"
        self.partition = self.mdt / RECORD_INDEX
        (self.mdt / ".hoodie").mkdir(parents=True, exist_ok=True)
        self.partition.mkdir(parents=True, exist_ok=True)
        partitions = ["files", RECORD_INDEX] if listed else ["files"]
        if (self.hoodie / "hoodie.properties").exists():  # a table of ours: only the listing changes
            set_listed_partitions(Storage(str(self.root)), partitions)
        else:
            (self.hoodie / "hoodie.properties").write_text(
                f"hoodie.table.name=t\nhoodie.table.version=6\nhoodie.table.metadata.partitions={','.join(partitions)}\n"
            )
        self.metadata_instant(INIT)
        self._versions: dict[tuple[int, str], int] = {}

    # -- timelines ---------------------------------------------------------------------------
    def data_instant(self, instant: str, completed: bool = True) -> None:
        self.hoodie.joinpath(f"{instant}.commit.requested").write_bytes(b"")
        self.hoodie.joinpath(f"{instant}.inflight").write_bytes(b"")
        if completed:
            self.hoodie.joinpath(f"{instant}.commit").write_bytes(b"{}")

    def metadata_instant(self, instant: str, action: str = "deltacommit", completed: bool = True) -> None:
        timeline = self.mdt / ".hoodie"
        requested = "compaction" if action == "commit" else action
        timeline.joinpath(f"{instant}.{requested}.requested").write_bytes(b"")
        timeline.joinpath(f"{instant}.{requested}.inflight").write_bytes(b"")
        if completed:
            timeline.joinpath(f"{instant}.{action}").write_bytes(b"{}")

    # -- files -------------------------------------------------------------------------------
    def group_of(self, keys: Iterable[str]) -> np.ndarray:
        return file_group_indexes(pa.array(list(keys), pa.string()), self.n)

    def base_file(self, group: int, instant: str, entries: Mapping[str, Location]) -> Path:
        """A base HFile of `group` at compaction `instant` (completed here) holding `entries`."""
        file_id = metadata_file_id(RECORD_INDEX, group)
        name = metadata_base_file_name(file_id, "0-1-0", instant)
        data = record_index_hfile(entries, name, self.block_size)
        path = self.partition / name
        path.write_bytes(data)
        self.metadata_instant(instant, "commit")
        return path

    def log_file(self, group: int, base_instant: str, blocks: list[LogBlock]) -> Path:
        file_id = metadata_file_id(RECORD_INDEX, group)
        version = self._versions.get((group, base_instant), 0) + 1
        self._versions[(group, base_instant)] = version
        path = self.partition / metadata_log_file_name(file_id, base_instant, version, "0-1-0")
        path.write_bytes(b"".join(encode_block(b) for b in blocks))
        return path


def record_index_hfile(entries: Mapping[str, Location], file_name: str | None, block_size: int) -> bytes:
    """An HFile of record-index cells, keys sorted bytewise: a base file's (`file_name` set, as
    compaction writes it, without the bloom filter meta block a reader does not use) or a log
    block's content.  Each distinct location is encoded once (a 2M-key index builds in seconds)."""
    keys = sorted(entries, key=lambda k: k.encode("utf-8"))
    distinct: dict[Location, int] = {}
    codes = np.fromiter((distinct.setdefault(entries[k], len(distinct)) for k in keys), np.int64, len(keys))
    encoded = [encode_record(record_index_record("", *loc), file_name)[1] for loc in distinct]
    values = pa.array(encoded, pa.binary()).take(pa.array(codes))
    info = {SCHEMA_FILE_INFO: METADATA_RECORD_SCHEMA_JSON.encode("utf-8")}
    if file_name is not None and keys:
        info |= {b"minRecordKey": keys[0].encode("utf-8"), b"maxRecordKey": keys[-1].encode("utf-8")}
    key_bytes = pa.array(keys, pa.string()).cast(pa.binary())
    return write_hfile(key_bytes, values, file_info=info, block_size=block_size, unique=file_name is not None)


def upsert_block(entries: Mapping[str, Location], instant: str) -> LogBlock:
    return metadata_data_block([record_index_record(k, *loc) for k, loc in entries.items()], instant)


def delete_block(keys: Iterable[str], instant: str) -> LogBlock:
    return metadata_delete_block(list(keys), instant)
