"""The bloom filters the table's base files hold in their footers (I/O): what the metadata table's
`bloom_filters` partition must hold for them.  The reader of the partition's initialisation
(metadata/bloom_filter_init.py: it reads data files, a layer above it) and of validation
(services/validation.py)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from hoodie_sink.table.format.file_group import Listing
from hoodie_sink.table.metadata.bloom_filter_change import Bloom, footer_bloom
from hoodie_sink.table.metadata.bloom_filter_init import BloomFiltersInit
from hoodie_sink.table.options.write_config import WriteConfig
from hoodie_sink.table.storage import Storage

IO_THREADS = 8


def listing_blooms(storage: Storage, listing: Listing) -> dict[str, Bloom]:
    """The filter (type code, footer text) of every listed base file that has one, by relative path;
    footers read in threads (object stores: one request each)."""
    paths = [bf.path for bf in listing.base_files]
    if not paths:
        return {}
    with ThreadPoolExecutor(
        max_workers=min(IO_THREADS, max(1, (os.cpu_count() or 1) * 2), len(paths))
    ) as pool:
        found = list(pool.map(lambda p: footer_bloom(storage, p), paths))
    return {p: b for p, b in zip(paths, found, strict=True) if b is not None}


def bloom_filters_init(cfg: WriteConfig) -> BloomFiltersInit | None:
    """How a write with these options builds the bloom_filters partition (None: it does not keep it)."""
    if not cfg.bloom_filters_enable:
        return None
    return BloomFiltersInit(cfg.bloom_filters_file_groups, listing_blooms)
