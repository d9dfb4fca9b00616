"""Hudi's metadata table, kept by the sink (docs/hudi/metadata-table.md, docs/design/metadata-table.md).

`files_change`: what a data-table action changes in the file listing (pure).  `writer`: one
metadata-table deltacommit per data instant.  `bootstrap`: a metadata table built from a listing.
`reader`: the listing read back from it, as Java's readers see it.  `sync`: the hooks the write
path and the table services call before they complete their data instant.
"""
