"""HBase HFile v3, as Hudi's metadata table writes it: base files and the content of HFILE_DATA
log blocks (docs/hudi/hfile.md)."""

from __future__ import annotations

from hoodie_sink.table.format.hfile.errors import CorruptHFile
from hoodie_sink.table.format.hfile.reader import HFileReader
from hoodie_sink.table.format.hfile.trailer import HUDI_COMPARATOR, Trailer
from hoodie_sink.table.format.hfile.writer import HBASE_FILE_INFO_KEYS, write_hfile

__all__ = ["HBASE_FILE_INFO_KEYS", "HUDI_COMPARATOR", "CorruptHFile", "HFileReader", "Trailer", "write_hfile"]
