"""The record index read from the metadata table's `record_index` partition, as readers see it (I/O).

Each file group `record-index-NNNN-0`: its latest slice (format/metadata_slices.py), the base HFile
then the blocks of its log files that a reader applies (Java's log-scanner gate,
metadata_listing.reader_instants; a rollback COMMAND block undoes its target), merged newest wins,
deletes dropping keys (format/record_index.merge_layers).  Vectorised: one Arrow table per HFile.
This reads everything (validation, compaction); point look-ups belong to the index.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.file_group import LogFile
from hoodie_sink.table.format.hfile import CorruptHFile
from hoodie_sink.table.format.log_format import (
    COMMAND_BLOCK,
    DELETE_BLOCK,
    HFILE_DATA_BLOCK,
    INSTANT_TIME,
    TARGET_INSTANT_TIME,
    CorruptLogBlock,
    LogBlock,
    deleted_keys,
    read_blocks,
)
from hoodie_sink.table.format.metadata_keys import RECORD_INDEX
from hoodie_sink.table.format.metadata_layout import metadata_file_id
from hoodie_sink.table.format.metadata_listing import reader_instants
from hoodie_sink.table.format.metadata_records import CorruptMetadataRecord
from hoodie_sink.table.format.metadata_slices import (
    MetadataSlice,
    committed_base_instants,
    file_ids_in,
    latest_slice,
)
from hoodie_sink.table.format.metadata_table import metadata_storage
from hoodie_sink.table.format.record_index import KEY, as_layer, decode_hfile, merge_layers
from hoodie_sink.table.format.timeline.timeline import Timeline
from hoodie_sink.table.storage import Storage


@dataclass(frozen=True)
class RecordIndexLayout:
    """The latest slice of every record-index file group, in file-group order."""

    slices: list[MetadataSlice]

    @property
    def file_groups(self) -> int:
        return len(self.slices)


def record_index_layout(mdt: Storage, md_timeline: Timeline) -> RecordIndexLayout:
    """The file groups of the `record_index` partition (their count was fixed at its
    initialisation: Java's writers use the number of existing file groups) and latest slices."""
    names = [(i.base_name, int(i.size or 0)) for i in mdt.list_dir(RECORD_INDEX) if i.is_file]
    completed = committed_base_instants(md_timeline, names)
    count = len(file_ids_in(RECORD_INDEX, names))
    slices = []
    for index in range(count):
        file_id = metadata_file_id(RECORD_INDEX, index)
        current = latest_slice(RECORD_INDEX, file_id, names, completed)
        if current is None:
            raise HoodieTableError(
                f"The metadata table at {mdt.base_uri}: record-index file group {file_id} has no file "
                f"though {count} file groups exist."
            )
        slices.append(current)
    return RecordIndexLayout(slices)


def read_record_index(storage: Storage, data_timeline: Timeline) -> pa.Table:
    """The merged record index: (key, partition, file_id, instant_ms), one row per live key."""
    mdt = metadata_storage(storage)
    md_timeline, valid, latest = reader_instants(storage, data_timeline)
    layout = record_index_layout(mdt, md_timeline)
    parts = [read_slice(mdt, sl, valid, latest) for sl in layout.slices]
    return pa.concat_tables(parts) if parts else merge_layers([])


def read_slice(mdt: Storage, current: MetadataSlice, valid: set[str], latest: str) -> pa.Table:
    """One file group's merged entries."""
    try:
        layers = []
        if current.base_file is not None:
            rel = f"{RECORD_INDEX}/{current.base_file.name}"
            layers.append(as_layer(decode_hfile(mdt.read_bytes(rel), mdt.full(rel)), False))
        layers.extend(_log_layers(mdt, current.log_files, valid, latest))
    except (CorruptHFile, CorruptLogBlock, CorruptMetadataRecord, ValueError) as e:
        raise HoodieTableError(f"Corrupt record index at {mdt.base_uri}: {e}") from e
    return merge_layers(layers)


def _log_layers(mdt: Storage, log_files: list[LogFile], valid: set[str], latest: str) -> list[pa.Table]:
    blocks: list[tuple[LogBlock, str]] = []
    for lf in log_files:
        name = mdt.full(f"{RECORD_INDEX}/{lf.name}")
        blocks.extend((b, name) for b in read_blocks(mdt.read_bytes(f"{RECORD_INDEX}/{lf.name}"), name))
    undone = {b.header.get(TARGET_INSTANT_TIME) for b, _ in blocks if b.block_type == COMMAND_BLOCK}
    layers = []
    for block, name in blocks:
        instant = block.header.get(INSTANT_TIME, "")
        if instant not in valid or instant > latest or instant in undone:
            continue
        if block.block_type == HFILE_DATA_BLOCK:
            layers.append(as_layer(decode_hfile(block.content, f"{name} (block of {instant})"), False))
        elif block.block_type == DELETE_BLOCK:
            keys = [d["recordKey"] for d in deleted_keys(block)]
            if keys:
                layers.append(as_layer(pa.table({KEY: pa.array(keys, pa.string())}), True))
        elif block.block_type != COMMAND_BLOCK:
            raise ValueError(f"{name}: block type {block.block_type} at {instant} in the record index")
    return layers
