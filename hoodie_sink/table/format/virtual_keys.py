"""Virtual keys (``hoodie.populate.meta.fields=false``): record keys computed from the data columns.

What Apache Hudi 0.15.0 writes for such a table (checked with the Java oracle: ``df.write.format
("hudi")`` of a non-partitioned and a city-partitioned COW table, then an upsert into each):

* hoodie.properties says ``hoodie.populate.meta.fields=false``, with the key generator class and
  the record key / partition fields as for any table.
* Base files keep the five ``_hoodie_*`` columns (``parquet.avro.schema`` lists them as for any
  table), but ``_hoodie_commit_time``, ``_hoodie_commit_seqno``, ``_hoodie_record_key`` and
  ``_hoodie_partition_path`` are null in every row; ``_hoodie_file_name`` holds the file name.
* The footer has ``parquet.avro.schema`` and ``writer.model.name`` only: no bloom filter, no
  ``hoodie_min_record_key``/``hoodie_max_record_key``.  Write stats carry no min/max record key.
* An upsert rewrites the file group in place (same file id): Java's SIMPLE index (the Spark
  default in 0.15) and BUCKET index compute keys with the key generator.  Its BLOOM and
  GLOBAL_BLOOM indexes fail on the second write (NullPointerException: the footer has no bloom
  filter); Java checks nothing up front.  ``BaseHoodieWriteClient.validateAgainstTableProperties``
  allows virtual keys only with the Simple, Complex and Nonpartitioned key generators, and a table
  created without meta fields cannot get them back.  Clustering does not preserve commit metadata.
* Java's reader (``spark.read.format("hudi")``) returns the data columns only: no ``_hoodie_*``
  columns (TableSchemaResolver leaves them out when the table does not populate them).

Our index reads the files' key columns exactly (a file without footer entries is a candidate for
every key), so BLOOM and GLOBAL_BLOOM work on such tables as Hudi's SIMPLE / GLOBAL_SIMPLE do.
The partition path of a stored row is its file's partition, which the file system view knows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from hoodie_sink.table.arrow_util import as_strings
from hoodie_sink.table.format.keygen import KeyGenerator, top_level_columns
from hoodie_sink.table.format.schema import META_COLUMNS

RECORD_KEY = META_COLUMNS[2]


def key_source_columns(gen: KeyGenerator) -> list[str]:
    """The top-level columns the record key fields read (``a.b`` reads column ``a``)."""
    return top_level_columns(gen.config.record_key_fields)


def stored_record_keys(rows: pa.Table, gen: KeyGenerator) -> pa.Array:
    """The record key of each stored row: ``_hoodie_record_key`` where it is set, else computed
    from the record key fields by the table's key generator (vectorised)."""
    if RECORD_KEY not in rows.column_names:
        return gen.record_keys(rows)
    stored = as_strings(rows.column(RECORD_KEY), RECORD_KEY, large_ok=False)
    if stored.null_count == 0:
        return stored
    if stored.null_count == len(stored):
        return gen.record_keys(rows)
    missing = pc.is_null(stored)
    return pc.replace_with_mask(stored, missing, gen.record_keys(rows.filter(missing)))


def with_record_keys(rows: pa.Table, gen: KeyGenerator | None) -> pa.Table:
    """`rows` (a base file read with its meta columns) with every ``_hoodie_record_key`` set;
    unchanged without a key generator (a table that stores its keys)."""
    if gen is None or rows.num_rows == 0:
        return rows
    keys = stored_record_keys(rows, gen)
    i = rows.schema.get_field_index(RECORD_KEY)
    if i < 0:
        return rows.append_column(RECORD_KEY, keys)
    return rows.set_column(i, pa.field(RECORD_KEY, pa.string()), keys)
