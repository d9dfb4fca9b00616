"""The indexes by option value (hoodie.index.type): adding an index is one class here."""

from __future__ import annotations

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.index.bloom_index import BloomIndex, GlobalBloomIndex
from hoodie_sink.table.index.bucket_index import BucketIndex
from hoodie_sink.table.index.protocol import Index
from hoodie_sink.table.index.record_index import RecordIndex

_INDEXES: dict[str, Index] = {
    i.name: i for i in (BloomIndex(), GlobalBloomIndex(), BucketIndex(), RecordIndex())
}
INDEX_TYPES = tuple(_INDEXES)  # the option's accepted values
BUCKET = BucketIndex.name  # the value that records a bucket layout in hoodie.properties


def index_of(name: str) -> Index:
    """The index named by option hoodie.index.type (parsed: lower case); refuses an unknown one."""
    index = _INDEXES.get(name)
    if index is None:
        raise HoodieConfigError(
            f"Option 'hoodie.index.type'='{name}' is not supported; supported: {', '.join(INDEX_TYPES)}."
        )
    return index
