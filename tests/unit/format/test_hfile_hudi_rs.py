"""hudi-rs (the `hudi` 0.5.0 wheel) reads HFiles we write: its file-group reader opens a metadata
table base file given by path (docs/hudi/hfile.md#other-readers).  The cells of Java's base files
are rewritten in shapes Java's own files do not have (many blocks, no compression) and read back."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie_sink.table.format.hfile import HBASE_FILE_INFO_KEYS, HFileReader, write_hfile
from tests.support.tables import unzip_metadata_fixture

pytestmark = pytest.mark.compat


@pytest.mark.parametrize("block_size,compression", [(1 << 20, "GZ"), (1, "GZ"), (1, "NONE")])
def test_hudi_rs_reads_our_base_files(tmp_path: Path, block_size: int, compression: str) -> None:
    from hudi import HudiFileGroupReader

    metadata = unzip_metadata_fixture("mor_mdt_v6", tmp_path) / ".hoodie" / "metadata"
    reader = HudiFileGroupReader(str(metadata))
    checked = 0
    for path in sorted(metadata.glob("*/*.hfile")):
        java = HFileReader(path.read_bytes(), name=path.name)
        keys, values = java.keys_and_values()
        info = {k: v for k, v in java.file_info.items() if k not in HBASE_FILE_INFO_KEYS}
        meta = {"bloomFilter": java.meta_block("bloomFilter") or b""}
        want = reader.read_file_slice_from_paths(str(path.relative_to(metadata)), []).to_pylist()
        path.write_bytes(
            write_hfile(
                keys, values, file_info=info, meta_blocks=meta, block_size=block_size,
                compression=compression, unique=True,
            )
        )  # fmt: skip
        blocks = len(keys) if block_size == 1 else java.trailer.data_index_count
        assert HFileReader(path.read_bytes()).trailer.data_index_count == blocks
        got = reader.read_file_slice_from_paths(str(path.relative_to(metadata)), []).to_pylist()
        assert got == want and len(got) == len(keys), path.name
        checked += 1
    assert checked >= 10
