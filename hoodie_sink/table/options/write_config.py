"""Options: Apache Hudi's option names (and Hudi SQL's short aliases) -> one frozen WriteConfig.

Options are parsed once, at the boundary.  Spark lowercases option keys
(docs/spark/python-datasource.md#options), so every key is matched case-insensitively.  An unknown
`hoodie.*` key is an error (with a suggestion).  Hudi options that only tune Hudi's own JVM
machinery (parallelism, timeline server, memory) are accepted and ignored so that an existing Hudi
job moves over by changing the format name alone;
Hudi options that would change what is written or read are accepted only with the value that
describes what we do, and refused otherwise (no option is silently ignored).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.format.debezium import POSTGRES_DEBEZIUM_PAYLOAD, is_debezium
from hoodie_sink.table.format.keygen import inferred_keygen_type, supported_keygen_type
from hoodie_sink.table.format.partial_update import PARTIAL_UPDATE_PAYLOAD
from hoodie_sink.table.format.properties import COPY_ON_WRITE
from hoodie_sink.table.format.write_operation import (
    APPEND_OP,
    INSERT,
    INSERT_OVERWRITE,
    INSERT_OVERWRITE_TABLE,
    OPERATIONS,
    UPSERT,
    WriteOperation,
)
from hoodie_sink.table.metadata.record_index_init import RecordIndexSizing
from hoodie_sink.table.options.sync_config import MetaSyncConfig, is_sync_option
from hoodie_sink.table.options.values import parse_bool
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions

# -- value parsers ---------------------------------------------------------------------------


def _str(key: str, v: str) -> str:
    return v.strip()


def _fields(key: str, v: str) -> tuple[str, ...]:
    return tuple(f.strip() for f in v.split(",") if f.strip())


_bool = parse_bool


def _int(key: str, v: str) -> int:
    try:
        n = int(v.strip())
    except ValueError:
        raise HoodieConfigError(f"Option '{key}' must be an integer, got '{v}'.") from None
    if n < 0:
        raise HoodieConfigError(f"Option '{key}' must not be negative, got '{v}'.")
    return n


def _float(key: str, v: str) -> float:
    try:
        return float(v.strip())
    except ValueError:
        raise HoodieConfigError(f"Option '{key}' must be a number, got '{v}'.") from None


def _choice(
    *choices: str, aliases: Mapping[str, str] | None = None, upper: bool = False
) -> Callable[[str, str], str]:
    """A value among `choices` (any case; `aliases` map other spellings), returned in the one
    spelling the code uses: lower case, or upper case (`upper`) where Hudi's own constants are."""

    def parse(key: str, v: str) -> str:
        s = v.strip().lower()
        s = (aliases or {}).get(s, s)
        if s not in choices:
            raise HoodieConfigError(f"Option '{key}' got '{v}'; accepted values: {', '.join(choices)}.")
        return s.upper() if upper else s

    return parse


# Concurrency: Hudi's modes and the lock providers we implement (by Java's class names).
SINGLE_WRITER, OCC = "single_writer", "optimistic_concurrency_control"
_LOCK_PACKAGE = "org.apache.hudi.client.transaction.lock."
FILESYSTEM_LOCK, IN_PROCESS_LOCK = "FileSystemBasedLockProvider", "InProcessLockProvider"
SIMPLE_CONFLICT_STRATEGY = (
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy"
)


def _lock_provider(key: str, v: str) -> str:
    name = v.strip()
    short = name[len(_LOCK_PACKAGE) :] if name.startswith(_LOCK_PACKAGE) else name
    if short not in (FILESYSTEM_LOCK, IN_PROCESS_LOCK):
        raise HoodieConfigError(
            f"Option '{key}'='{v}' is not supported: hoodie_sink implements {_LOCK_PACKAGE}{FILESYSTEM_LOCK} "
            f"(a lock file beside the timeline, shared with Java writers) and {_LOCK_PACKAGE}{IN_PROCESS_LOCK} "
            "(writers on one host); ZooKeeper, DynamoDB and Hive metastore locks are not."
        )
    return short


# Record payload classes (how a change merges with the stored record), by Hudi's class names.
OVERWRITE_WITH_LATEST_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
SUPPORTED_PAYLOADS = (
    OVERWRITE_WITH_LATEST_PAYLOAD,
    DEFAULT_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    POSTGRES_DEBEZIUM_PAYLOAD,
)


def _payload_class(key: str, v: str) -> str:
    name = v.strip()
    for cls in SUPPORTED_PAYLOADS:
        if name.lower() in (cls.lower(), cls.rsplit(".", 1)[1].lower()):
            return cls
    raise HoodieConfigError(
        f"Option '{key}'='{v}' is not supported: hoodie_sink merges records by commit time "
        f"(OverwriteWithLatestAvroPayload: the incoming record replaces the stored one) or by event time "
        f"(DefaultHoodieRecordPayload: the higher precombine value wins, also against the stored record), "
        f"or partially (PartialUpdateAvroPayload: the winner by precombine value, its null columns filled "
        f"from the other record), or as Debezium changes from Postgres (PostgresDebeziumAvroPayload: ordered by "
        f"_event_lsn, deleted by _change_operation_type 'd'; MySqlDebeziumAvroPayload is not implemented, "
        f"docs/hudi/debezium.md#mysql). Supported: {', '.join(SUPPORTED_PAYLOADS)}."
    )


# -- the registry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    key: str
    attr: str
    parse: Callable[[str, str], Any]
    aliases: tuple[str, ...] = ()
    table_level: bool = False  # persisted in hoodie.properties; must agree with the table
    doc: str = ""


OPTIONS: tuple[Option, ...] = (
    Option("hoodie.table.name", "table_name", _str, ("hoodie.datasource.write.table.name",), True),
    Option("hoodie.database.name", "database", _str, (), True),
    Option("hoodie.datasource.write.recordkey.field", "record_key_fields", _fields,
           ("primarykey", "recordkey", "hoodie.table.recordkey.fields"), True),
    Option("hoodie.datasource.write.partitionpath.field", "partition_fields", _fields,
           ("hoodie.table.partition.fields", "partitionby"), True),
    Option("hoodie.datasource.write.precombine.field", "precombine_field", _str,
           ("precombinefield", "hoodie.table.precombine.field"), True),
    Option("hoodie.datasource.write.payload.class", "payload_class", _payload_class,
           ("payloadclass", "hoodie.compaction.payload.class"), True,
           doc="How a change merges with the stored record: OverwriteWithLatestAvroPayload (commit time: the "
               "incoming record wins), DefaultHoodieRecordPayload (event time: the higher precombine value "
               "wins) or PartialUpdateAvroPayload (event time, and the winner's null or missing columns keep "
               "the other record's values; docs/hudi/partial-update.md). Default: DefaultHoodieRecordPayload "
               "with a precombine field, else OverwriteWithLatest."),
    Option("hoodie.sink.write.allow.null.array.elements", "allow_null_array_elements", _bool,
           doc="Accept null elements in list columns, which Apache Hudi 0.14/0.15's merge cannot rewrite "
               "(refused by default: only for tables no Java writer upserts into)."),
    Option("hoodie.sink.write.allow.ambiguous.complex.keys", "allow_ambiguous_complex_keys", _bool,
           doc="Accept record key values containing ',' (or spelled __null__ / __empty__) in a complex "
               "(several-field) record key, whose Hudi encoding 'f1:v1,f2:v2' can then give two different "
               "rows one key (refused by default: only for tables that need Hudi's ambiguous encoding)."),
    Option("hoodie.write.set.null.for.missing.columns", "set_null_for_missing_columns", _bool,
           doc="A table column that the input lacks is written as null (it must be nullable)."),
    Option("hoodie.datasource.write.reconcile.schema", "reconcile_schema", _bool,
           doc="An input that lacks table columns (and brings none) is written in the table's schema, "
               "the missing columns as nulls; an input that both lacks and adds columns is refused "
               "(Hudi 0.15 would drop the missing ones; docs/hudi/schema-evolution.md#reconcile-schema)."),
    Option("hoodie.datasource.write.operation", "operation",
           _choice(*OPERATIONS, aliases={"bulkinsert": "bulk_insert"})),
    Option("hoodie.datasource.write.append.mode", "append_mode", _bool,
           doc="With operation insert: write as the append operation (no index, no merge, a new file "
               "group per flush), as Hudi's Flink writer does for inserts (write.insert.cluster=false). "
               "Default: true in a streaming query, false in a batch write (Hudi Spark: inserts fill "
               "small files)."),
    Option("hoodie.datasource.write.table.type", "table_type",
           _choice("copy_on_write", "merge_on_read", aliases={"cow": "copy_on_write", "mor": "merge_on_read"},
                   upper=True),
           ("type", "hoodie.table.type"), True),
    Option("hoodie.datasource.write.hive_style_partitioning", "hive_style", _bool, (), True),
    Option("hoodie.metadata.enable", "metadata_enable", _bool,
           doc="true: keep Hudi's metadata table (its `files` partition: the file listing readers and writers "
               "use instead of listing storage), building it if the table has none. false: the table has none "
               "(one a Java writer built is removed before the write). Unset: a table keeps what it has; a new "
               "table gets one, as Hudi's writers give one. The record_index partition is kept with "
               "hoodie.metadata.record.index.enable=true, the column_stats partition with "
               "hoodie.metadata.index.column.stats.enable=true, the bloom_filters partition with "
               "hoodie.metadata.index.bloom.filter.enable=true (a Java-built partition that is not kept is "
               "dropped, as Java drops a disabled partition)."),
    Option("hoodie.metadata.index.column.stats.enable", "column_stats_enable", _bool,
           doc="true: keep the metadata table's column_stats partition (min, max, null and value counts of "
               "every column of every data file, Hudi 0.11's column statistics index, which data skipping "
               "reads instead of footers), built from the footers of the table's base files when missing; "
               "every write adds the statistics of the files it writes (computed by its tasks), every clean "
               "tombstones the files it deletes. false or unset: a column_stats partition a Java writer built "
               "is dropped (docs/design/metadata-table.md#column-statistics)."),
    Option("hoodie.metadata.index.column.stats.column.list", "column_stats_columns", _fields,
           doc="Comma-separated top-level columns to keep statistics of (default: every column, the five "
               "_hoodie_* meta columns included, as Hudi's)."),
    Option("hoodie.metadata.index.column.stats.file.group.count", "column_stats_file_groups", _int,
           doc="File groups of the column_stats partition, fixed when it is built (Hudi's default: 2)."),
    Option("hoodie.metadata.index.bloom.filter.enable", "bloom_filters_enable", _bool,
           doc="true: keep the metadata table's bloom_filters partition (the footer bloom filter of every "
               "base file, which the bloom index reads with hoodie.bloom.index.use.metadata=true), built from "
               "the base files' footers when missing; every write adds its new base files' filters (taken by "
               "its tasks), every clean tombstones the base files it deletes. false or unset: a bloom_filters "
               "partition a Java writer built is dropped (docs/design/metadata-table.md#bloom-filters)."),
    Option("hoodie.metadata.index.bloom.filter.file.group.count", "bloom_filters_file_groups", _int,
           doc="File groups of the bloom_filters partition, fixed when it is built (Hudi's default: 4)."),
    Option("hoodie.bloom.index.use.metadata", "bloom_use_metadata", _bool,
           doc="BLOOM and GLOBAL_BLOOM: the bloom filters of the candidate files come from the metadata "
               "table's bloom_filters partition (point look-ups in its HFiles) instead of their footers, and "
               "their key ranges from its column_stats partition (the _hoodie_record_key statistics) when it "
               "holds them; a file without a record falls back to its footer. Needs "
               "hoodie.metadata.index.bloom.filter.enable=true (Hudi's default: false)."),
    Option("hoodie.metadata.record.index.enable", "record_index_enable", _bool,
           doc="true: keep the metadata table's record_index partition (record key -> partition and file "
               "group, Hudi 0.14's record-level index), built from the table's records when missing; it needs "
               "the metadata table (hoodie.metadata.enable). false or unset: a record_index partition a Java "
               "writer built is dropped. hoodie.index.type=RECORD_INDEX does not turn it on (as in Hudi 0.15, "
               "whose record index falls back to GLOBAL_SIMPLE without it)."),
    Option("hoodie.metadata.record.index.min.filegroup.count", "record_index_min_file_groups", _int,
           doc="The record index's file-group count is estimated at its initialisation, at least this (10)."),
    Option("hoodie.metadata.record.index.max.filegroup.count", "record_index_max_file_groups", _int,
           doc="... and at most this (10000); equal min and max fix the count."),
    Option("hoodie.metadata.record.index.growth.factor", "record_index_growth_factor", _float,
           doc="Records expected per record at initialisation, for the estimate (2.0)."),
    Option("hoodie.metadata.record.index.max.filegroup.size", "record_index_max_file_group_bytes", _int,
           doc="Bytes one record-index file group should hold at most, for the estimate (1 GiB, 48 bytes a "
               "record)."),
    Option("hoodie.metadata.compact.max.delta.commits", "metadata_compact_max_delta_commits", _int,
           doc="The metadata table is compacted into one HFile after this many deltacommits (Hudi's default: "
               "10), when no data instant it would fold in is pending."),
    Option("hoodie.populate.meta.fields", "populate_meta_fields", _bool, (), True,
           doc="false: Hudi's virtual keys. Base files keep the five _hoodie_* columns but write them as "
               "nulls (the file name excepted), with no bloom filter or key range in the footer; keys are "
               "computed from the record key fields when needed. Set at table creation, fixed afterwards."),
    Option("hoodie.datasource.write.partitionpath.urlencode", "url_encode", _bool, (), True),
    Option("hoodie.datasource.write.keygenerator.type", "keygen_type",
           _choice("simple", "complex", "non_partition", "timestamp",
                   aliases={"nonpartitioned": "non_partition", "non_partitioned": "non_partition"}, upper=True),
           (), True),
    Option("hoodie.datasource.write.keygenerator.class", "keygen_class", _str,
           ("hoodie.table.keygenerator.class",), True),
    Option("hoodie.keygen.timebased.timestamp.type", "ts_type",
           _choice("unix_timestamp", "epochmilliseconds", "date_string", "scalar", upper=True)),
    Option("hoodie.keygen.timebased.input.dateformat", "ts_input_format", _str),
    Option("hoodie.keygen.timebased.output.dateformat", "ts_output_format", _str),
    Option("hoodie.keygen.timebased.timezone", "ts_timezone", _str),
    Option("hoodie.parquet.max.file.size", "max_file_size", _int),
    Option("hoodie.parquet.small.file.limit", "small_file_limit", _int),
    Option("hoodie.parquet.block.size", "row_group_bytes", _int),
    Option("hoodie.parquet.compression.codec", "compression",
           _choice("snappy", "gzip", "zstd", "lz4", "brotli", "none", "uncompressed",
                   aliases={"uncompressed": "none"})),
    Option("hoodie.bloom.index.filter.type", "bloom_type", _choice("dynamic_v0", "simple")),
    Option("hoodie.index.bloom.num_entries", "bloom_num_entries", _int),
    Option("hoodie.index.bloom.fpp", "bloom_fpp", _float),
    Option("hoodie.bloom.index.filter.dynamic.max.entries", "bloom_max_entries", _int),
    Option("hoodie.write.buffer.task.max.bytes", "task_buffer_bytes", _int,
           doc="Flush a task's buffered records when they pass this many bytes (default 256 MiB)."),
    Option("hoodie.write.buffer.bucket.max.bytes", "bucket_buffer_bytes", _int,
           doc="Flush one bucket (file group) when its buffered records pass this many bytes (default 64 MiB)."),
    Option("hoodie.write.merge.threads", "merge_threads", _int,
           doc="Threads per task (and at the commit) that merge and write file groups at the end of a "
               "write (default: the machine's cores, at most 4); each holds one file group in memory."),
    # -- clustering (table service: small files -> large sorted ones, a replacecommit) --------
    Option("hoodie.clustering.inline", "clustering_inline", _bool,
           doc="Schedule and run clustering in the commit of every N-th write (N = inline.max.commits)."),
    Option("hoodie.clustering.inline.max.commits", "clustering_max_commits", _int),
    Option("hoodie.clustering.plan.strategy.small.file.limit", "clustering_small_file_limit", _int),
    Option("hoodie.clustering.plan.strategy.target.file.max.bytes", "clustering_target_file_bytes", _int),
    Option("hoodie.clustering.plan.strategy.max.bytes.per.group", "clustering_max_group_bytes", _int),
    Option("hoodie.clustering.plan.strategy.max.num.groups", "clustering_max_groups", _int),
    Option("hoodie.clustering.plan.strategy.sort.columns", "clustering_sort_columns", _fields),
    Option("hoodie.clustering.plan.strategy.partition.regex.pattern", "clustering_partition_regex", _str),
    Option("hoodie.clustering.plan.strategy.partition.selected", "clustering_partitions", _fields),
    Option("hoodie.layout.optimize.strategy", "layout_strategy",
           _choice("linear", "z-order", "hilbert", aliases={"zorder": "z-order", "z_order": "z-order"})),
    Option("hoodie.clustering.preserve.commit.metadata", "clustering_preserve_metadata", _bool),
    Option("hoodie.clustering.updates.strategy", "clustering_updates_strategy",
           _choice("reject", aliases={
               "org.apache.hudi.client.clustering.update.strategy.sparkrejectupdatestrategy": "reject"})),
    # -- cleaning and archival (table services after each commit, as in Hudi: on by default) --
    Option("hoodie.clean.automatic", "clean_automatic", _bool,
           doc="Clean old file slices after every `hoodie.clean.max.commits` commits (default true)."),
    Option("hoodie.clean.async", "clean_async", _bool,
           doc="Clean in a background thread of the committing process while the next write runs."),
    Option("hoodie.cleaner.policy", "cleaner_policy",
           _choice("keep_latest_commits", "keep_latest_file_versions", "keep_latest_by_hours", upper=True)),
    Option("hoodie.cleaner.commits.retained", "cleaner_commits_retained", _int,
           doc="KEEP_LATEST_COMMITS: file slices needed by the last N commits stay (time travel and "
               "incremental reads within them keep working). Default 10."),
    Option("hoodie.cleaner.fileversions.retained", "cleaner_file_versions_retained", _int),
    Option("hoodie.cleaner.hours.retained", "cleaner_hours_retained", _int),
    Option("hoodie.clean.max.commits", "clean_max_commits", _int,
           doc="Clean after this many commits since the last clean (default 1: after every commit)."),
    Option("hoodie.cleaner.incremental.mode", "cleaner_incremental", _bool),
    Option("hoodie.archive.automatic", "archive_automatic", _bool,
           doc="Archive the active timeline past hoodie.keep.max.commits commits (default true)."),
    Option("hoodie.archive.async", "archive_async", _bool,
           doc="Archive in a background thread of the committing process while the next write runs."),
    Option("hoodie.keep.min.commits", "keep_min_commits", _int),
    Option("hoodie.keep.max.commits", "keep_max_commits", _int),
    Option("hoodie.commits.archival.batch", "archival_batch", _int),
    Option("hoodie.fail.on.timeline.archiving", "fail_on_archiving", _bool,
           doc="true: an archival that fails after the commit fails the write (its commit stands). "
               "Default false: logged, retried after the next commit."),
    # -- compaction (merge-on-read tables) --
    Option("hoodie.merge.small.file.group.candidates.limit", "small_file_candidates_limit", _int,
           doc="Merge-on-read: inserts pad at most this many small file groups (without logs) per partition (1)."),
    Option("hoodie.compact.inline", "compact_inline", _bool,
           doc="Compact a merge-on-read table inline after a commit when the trigger says so (default "
               "true, as Java's Spark writers; false: compact with hoodie_sink.compact or the CLI)."),
    Option("hoodie.compact.inline.max.delta.commits", "compact_max_delta_commits", _int,
           doc="NUM_COMMITS trigger: compact once this many deltacommits followed the last compaction (5)."),
    Option("hoodie.compact.inline.max.delta.seconds", "compact_max_delta_seconds", _int),
    Option("hoodie.compact.inline.trigger.strategy", "compact_trigger",
           _choice("num_commits", "num_commits_after_last_request", "time_elapsed", "num_or_time",
                   "num_and_time", upper=True)),
    Option("hoodie.datasource.compaction.async.enable", "compact_async", _bool,
           doc="Compact in a background thread of the committing process (the next write goes on)."),
    Option("hoodie.sink.metrics.file", "metrics_file", _str,
           doc="Append one JSON line of per-phase write metrics per commit to this local file (on an "
               "object store: a folder, one <instant>.json per commit). Default: off (the log line only)."),
    Option("hoodie.client.heartbeat.interval_in_ms", "heartbeat_interval_ms", _int),
    Option("hoodie.client.heartbeat.tolerable.misses", "heartbeat_misses", _int),
    Option("hoodie.index.type", "index_type", _choice("bloom", "global_bloom", "bucket", "record_index"),
           doc="BLOOM (default), GLOBAL_BLOOM, BUCKET, or RECORD_INDEX: keys looked up in the metadata table's "
               "record_index partition (needs hoodie.metadata.record.index.enable=true: the write builds the "
               "partition if the table has none, and every write keeps it)."),
    Option("hoodie.bloom.index.update.partition.path", "update_partition_path", _bool),
    Option("hoodie.record.index.update.partition.path", "record_index_update_partition_path", _bool,
           doc="RECORD_INDEX: a record whose partition value changed moves there (Hudi's default: false)."),
    Option("hoodie.bucket.index.num.buckets", "num_buckets", _int),
    Option("hoodie.bucket.index.hash.field", "bucket_hash_fields", _fields),
    Option("hoodie.copyonwrite.record.size.estimate", "record_size_estimate", _int),
    Option("hoodie.datasource.write.commitmeta.key.prefix", "commit_meta_prefix", _str),
    Option("hoodie.datasource.write.streaming.checkpoint.identifier", "checkpoint_identifier", _str),
    Option("hoodie.sink.streaming.batch.id", "foreach_batch_id", _int,
           doc="Set by hoodie_sink.spark.micro_batches on each micro-batch it writes with foreachBatch: the "
               "commit records the batch id under the checkpoint identifier, and a batch whose id is committed "
               "already writes nothing (exactly once across restarts)."),
    Option("hoodie.write.concurrency.mode", "concurrency_mode",
           _choice(SINGLE_WRITER, OCC),
           doc="single_writer (default) or optimistic_concurrency_control: several writers on one table, a "
               "conflict check under hoodie.write.lock.provider at each commit (README: Several writers)."),
    Option("hoodie.cleaner.policy.failed.writes", "failed_writes_policy", _choice("eager", "lazy"),
           doc="Either way a pending write is rolled back only once its heartbeat has expired (Java's LAZY "
               "rule); optimistic concurrency control implies lazy, as in Java."),
    Option("hoodie.write.lock.provider", "lock_provider", _lock_provider,
           doc="Under optimistic concurrency control: org.apache.hudi.client.transaction.lock."
               "FileSystemBasedLockProvider (a lock file, shared with Java writers) or InProcessLockProvider "
               "(writers on one host)."),
    Option("hoodie.write.lock.filesystem.path", "lock_path", _str,
           doc="Folder of the file-system lock (default: the table's .hoodie), as Java's."),
    Option("hoodie.write.lock.filesystem.expire", "lock_expire_minutes", _int,
           doc="Minutes after which a file-system lock left by a crashed writer is taken over (0: never; Java's)."),
    Option("hoodie.write.lock.client.num_retries", "lock_client_retries", _int),
    Option("hoodie.write.lock.client.wait_time_ms_between_retry", "lock_client_wait_ms", _int),
    Option("hoodie.write.lock.wait_time_ms", "lock_wait_ms", _int),
    Option("hoodie.write.lock.conflict.resolution.strategy", "conflict_strategy",
           _choice(SIMPLE_CONFLICT_STRATEGY.lower())),
    Option("hoodie.datasource.write.streaming.retry.count", "stream_retries", _int,
           doc="Under optimistic concurrency control, a micro-batch that lost a conflict is written again "
               "this many times (3, Hudi's default) from its input, which the tasks then keep until the commit; "
               "other failures fail the micro-batch (a restart replays it)."),
    Option("hoodie.datasource.write.streaming.retry.interval.ms", "stream_retry_interval_ms", _int,
           doc="Wait before the first retry of a micro-batch (2000), doubled at each retry, as Hudi's."),
    Option("hoodie.write.num.retries.on.conflict.failures", "conflict_retries", _int,
           doc="Under optimistic concurrency control, hoodie_sink.write runs a write that lost a conflict again "
               "this many times (0, Java's default); Spark writes refuse it (Spark cannot re-run the tasks)."),
)  # fmt: skip

_BY_KEY: dict[str, Option] = {}
for _opt in OPTIONS:
    for _k in (_opt.key, *_opt.aliases):
        _BY_KEY[_k.lower()] = _opt

# Hudi options that only tune Hudi's own JVM machinery: they change how fast or in how much
# memory Java computes a write, never which rows are written or read.  Accepted so existing jobs
# move over unchanged; they have no effect here.  Keep this list small: an option that changes
# results belongs in _FIXED_VALUES (accepted only with the value we implement) or _REFUSED_PREFIXES.
TUNING_OPTIONS = (
    # Spark shuffle parallelism of Hudi's Java stages: the input's own partitioning drives ours
    "hoodie.upsert.shuffle.parallelism", "hoodie.insert.shuffle.parallelism",
    "hoodie.bulkinsert.shuffle.parallelism", "hoodie.delete.shuffle.parallelism",
    "hoodie.finalize.write.parallelism",
    # Java's embedded timeline server (serves file-system views to executors): we have none
    "hoodie.embed.timeline.server",
    # memory fractions and spill paths of Java's merge maps: our tasks budget memory themselves
    "hoodie.memory.",
    # Java's row-writer code path for bulk_insert: same rows, different JVM implementation
    "hoodie.datasource.write.row.writer.enable",
    # how Java stores its markers: we always write direct marker files (which every Hudi
    # rollback understands); the markers are deleted at the commit either way
    "hoodie.write.markers.", "hoodie.markers.",
    # the eventual-consistency guard of old S3 clients: our storage listings are consistent
    "hoodie.consistency.check.",
    # how Java sorts bulk_insert input: file layout only; the rows read back are the same
    "hoodie.bulkinsert.sort.mode",
    # Spark parallelism of Java's clean and archival stages: ours run in the committing process
    "hoodie.cleaner.parallelism", "hoodie.archive.delete.parallelism",
    # whether Java may schedule a clean while another clean is pending: we finish the pending one first
    "hoodie.clean.allow.multiple",
)  # fmt: skip

# Hudi options that change what is written or read, accepted only with the value(s) that
# describe what hoodie_sink does anyway (key -> (accepted values, what hoodie_sink does)).
_FIXED_VALUES: dict[str, tuple[tuple[str, ...], str]] = {
    "hoodie.combine.before.upsert": (("true",), "upserts always keep one record per key (precombine)"),
    "hoodie.combine.before.delete": (("true",), "deletes always keep one record per key"),
    "hoodie.combine.before.insert": (("false",), "insert and bulk_insert never de-duplicate"),
    "hoodie.datasource.write.drop.partition.columns": (
        ("false",),
        "partition columns stay in the base files",
    ),
    "hoodie.table.version": (("6",), "hoodie_sink writes table version 6"),
    "hoodie.write.table.version": (("6",), "hoodie_sink writes table version 6"),
    "hoodie.timeline.layout.version": (("1",), "hoodie_sink writes timeline layout version 1"),
    # a table-creation setting, as in Java: an existing table's own zone is followed (LOCAL or UTC)
    "hoodie.table.timeline.timezone": (("utc",), "tables hoodie_sink creates stamp instant times in UTC"),
    "hoodie.schema.on.read.enable": (("false",), "schema evolution on read is not supported"),
    "hoodie.clean.trigger.strategy": (
        ("num_commits",),
        "cleaning is triggered by the number of commits (hoodie.clean.max.commits)",
    ),
    "hoodie.archive.merge.enable": (("false",), "small archive files are not merged"),
    "hoodie.datasource.write.streaming.ignore.failed.batch": (
        ("false",),
        "a failed micro-batch fails the query (ignoring it would lose its data)",
    ),
    "hoodie.archive.beyond.savepoint": (("false",), "archival stops at the first savepoint"),
    "hoodie.cleaner.delete.bootstrap.base.file": (("false",), "bootstrap tables are not supported"),
}

# Hudi option groups that are refused whatever their value (prefix -> why, what to do).
_REFUSED_PREFIXES: tuple[tuple[str, str], ...] = (
    (
        "hoodie.write.lock.",
        "hoodie_sink's locks take hoodie.write.lock.provider, .filesystem.path, .filesystem.expire, "
        ".client.num_retries, .client.wait_time_ms_between_retry, .wait_time_ms and "
        ".conflict.resolution.strategy",
    ),
    (
        "hoodie.write.concurrency.",
        "early conflict detection is not implemented; conflicts are checked at the commit "
        "(hoodie.write.concurrency.mode=optimistic_concurrency_control)",
    ),
    ("hoodie.cleaner.", "it is not a cleaner setting hoodie_sink implements (see README.md, Table services)"),
    ("hoodie.clean.", "it is not a cleaner setting hoodie_sink implements (see README.md, Table services)"),
    ("hoodie.keep.", "it is not an archival setting hoodie_sink implements (see README.md, Table services)"),
    (
        "hoodie.archive.",
        "it is not an archival setting hoodie_sink implements (see README.md, Table services)",
    ),
    (
        "hoodie.payload.",
        "payload settings are not supported; the ordering field is "
        "hoodie.datasource.write.precombine.field and deletes use the _hoodie_is_deleted column",
    ),
    ("hoodie.avro.schema.", "Avro schema overrides are not supported; the input schema is the write schema"),
)

# Option groups configuring a feature that is off unless its switch (in _FIXED_VALUES) is on: their
# other keys are harmless, but a sub-feature switched on ("*.enable=true") is refused.
_SWITCHED_SECTIONS: tuple[tuple[str, str], ...] = (
    (
        "hoodie.metadata.",
        "hoodie_sink keeps the files, record_index (hoodie.metadata.record.index.enable), column_stats "
        "(hoodie.metadata.index.column.stats.enable) and bloom_filters (hoodie.metadata.index.bloom.filter.enable) "
        "partitions of Hudi's metadata table, without Java's asynchronous indexer",
    ),
)


_METADATA_SECTION = "hoodie.metadata."
_RECORD_INDEX_SECTION = "hoodie.metadata.record.index."
# Keys of Java's metadata-table settings that change nothing of what the sink writes: the JVM's own
# reading and parallelism, and the index partitions we do not keep (turning one on is refused below).
_HARMLESS_METADATA_WORDS = ("parallelism", "memory", "spillable", "buffer", "reader", "metrics", "async")


_INDEX_SECTION = "hoodie.metadata.index."
# Java's settings of its index partitions that change nothing we write: its writers' Spark
# parallelism, how its readers process column statistics, and the async indexer's wait (keys lowercased)
_HARMLESS_INDEX_KEYS = (
    "hoodie.metadata.index.column.stats.parallelism",
    "hoodie.metadata.index.column.stats.processing.mode.override",
    "hoodie.metadata.index.column.stats.inmemory.projection.threshold",
    "hoodie.metadata.index.bloom.filter.parallelism",
    "hoodie.metadata.index.check.timeout.seconds",
    # Hudi 0.15 reads it nowhere (HoodieWriteConfig.getColumnsEnabledForBloomFilterIndex has no caller):
    # its bloom filters, like ours, hold the record keys
    "hoodie.metadata.index.bloom.filter.column.list",
)


def _check_metadata_index_option(key: str, value: str) -> bool:
    """hoodie.metadata.index.* other than the options of the registry (column_stats, bloom_filters):
    accepted only where they change nothing we write; Java's asynchronous indexer is refused when
    switched on (docs/design/metadata-table.md#column-statistics)."""
    on = value.strip().lower() in ("true", "1", "yes")
    if key in _HARMLESS_INDEX_KEYS:
        return True
    if key == "hoodie.metadata.index.async":
        if on:
            raise HoodieConfigError(
                f"Option '{key}'='{value}' is not supported: hoodie_sink builds a metadata partition in the "
                "write that enables it, not with Java's asynchronous indexer. Supported: 'false' (or leave "
                "the option unset)."
            )
        return True
    raise HoodieConfigError(
        f"Option '{key}'='{value}' is not supported: of the metadata table's index settings hoodie_sink takes "
        "hoodie.metadata.index.column.stats.enable, .column.list and .file.group.count, and "
        "hoodie.metadata.index.bloom.filter.enable and .file.group.count "
        "(docs/design/metadata-table.md#column-statistics, #bloom-filters)."
    )


def _harmless_metadata_option(key: str) -> bool:
    rest = key[len(_METADATA_SECTION) :]
    return (
        key.endswith(".enable")
        or rest.startswith("index.")
        or any(w in rest for w in _HARMLESS_METADATA_WORDS)
    )


def _check_hudi_option(key: str, value: str) -> bool:
    """True if `key` is a Hudi option accepted without effect; raise if it would change results
    and is not implemented; False if it is not a known Hudi option at all."""
    if key.startswith(TUNING_OPTIONS):
        return True
    fixed = _FIXED_VALUES.get(key)
    if fixed is not None:
        accepted, what = fixed
        if value.strip().lower() not in accepted:
            raise HoodieConfigError(
                f"Option '{key}'='{value}' is not supported: {what}. "
                f"Supported: {' or '.join(repr(a) for a in accepted)} (or leave the option unset)."
            )
        return True
    if key.startswith(_INDEX_SECTION):
        return _check_metadata_index_option(key, value)
    if key.startswith(_RECORD_INDEX_SECTION):
        raise HoodieConfigError(
            f"Option '{key}'='{value}' is not supported: of the record index's settings hoodie_sink takes "
            "hoodie.metadata.record.index.enable and the file-group sizing options "
            "(hoodie.metadata.record.index.min.filegroup.count, .max.filegroup.count, .growth.factor, "
            ".max.filegroup.size; docs/design/metadata-table.md#record-index)."
        )
    if key.startswith(_METADATA_SECTION) and not _harmless_metadata_option(key):
        raise HoodieConfigError(
            f"Option '{key}'='{value}' is not supported: it configures the metadata table's services, which "
            "hoodie_sink runs with its own settings (it takes hoodie.metadata.enable and "
            "hoodie.metadata.compact.max.delta.commits; docs/design/metadata-table.md)."
        )
    for prefix, why in _SWITCHED_SECTIONS:
        if key.startswith(prefix):
            if key.endswith(".enable") and value.strip().lower() in ("true", "1", "yes"):
                raise HoodieConfigError(
                    f"Option '{key}'='{value}' is not supported: {why}. Supported: 'false' (or leave the "
                    "option unset)."
                )
            return True
    for prefix, why in _REFUSED_PREFIXES:
        if key.startswith(prefix):
            raise HoodieConfigError(f"Option '{key}'='{value}' is not supported: {why}.")
    return False


def is_write_option(key: str) -> bool:
    """Whether `key` (lowercased) is a write option we know, accepted or refused on a write.  Reads
    ignore them all: users reuse one options dict (or a SQL view's OPTIONS) for writes and reads,
    and none of these changes what a snapshot read returns."""
    return (
        key in _BY_KEY
        or key in _FIXED_VALUES
        or key.startswith(TUNING_OPTIONS)
        or key.startswith(tuple(p for p, _ in _REFUSED_PREFIXES))
        or key.startswith(tuple(p for p, _ in _SWITCHED_SECTIONS))
        or is_sync_option(key)
    )


# Non-hoodie keys Spark or users pass that we ignore silently.
_PASSTHROUGH = ("path", "checkpointlocation", "queryname", "__path")

MiB = 1024 * 1024
# Hudi's writers give a new table a metadata table by default (hoodie.metadata.enable defaults to
# true since 0.11), and so do ours: docs/design/metadata-table.md.
NEW_TABLES_GET_A_METADATA_TABLE = True
# index types whose keys are unique across partitions: the only ones a record index maps exactly
GLOBAL_INDEX_TYPES = ("global_bloom", "global_simple", "record_index")


@dataclass(frozen=True)
class WriteConfig:
    """Everything one write needs, parsed and checked once.  Plain fields: it pickles."""

    path: str
    table_name: str | None = None
    database: str | None = None
    record_key_fields: tuple[str, ...] = ()
    append_mode: bool = False
    partition_fields: tuple[str, ...] = ()
    precombine_field: str | None = None
    payload_class: str | None = None  # None: derived when the table is opened (see resolve_payload)
    set_null_for_missing_columns: bool = False
    reconcile_schema: bool = False
    allow_null_array_elements: bool = False
    allow_ambiguous_complex_keys: bool = False
    operation: str = UPSERT.name
    table_type: str = COPY_ON_WRITE  # hoodie.properties' spelling
    hive_style: bool = False
    url_encode: bool = False
    populate_meta_fields: bool = True
    # None: an existing table keeps what it has; a new one: NEW_TABLES_GET_A_METADATA_TABLE
    metadata_enable: bool | None = None
    metadata_compact_max_delta_commits: int = 10
    record_index_enable: bool = False
    record_index_min_file_groups: int = 10  # HoodieMetadataConfig.RECORD_INDEX_MIN_FILE_GROUP_COUNT_PROP
    record_index_max_file_groups: int = 10000
    record_index_growth_factor: float = 2.0
    record_index_max_file_group_bytes: int = 1 << 30
    column_stats_enable: bool = False  # HoodieMetadataConfig.ENABLE_METADATA_INDEX_COLUMN_STATS
    column_stats_columns: tuple[str, ...] = ()  # empty: every column (getColumnsToIndex)
    column_stats_file_groups: int = 2  # METADATA_INDEX_COLUMN_STATS_FILE_GROUP_COUNT
    bloom_filters_enable: bool = False  # HoodieMetadataConfig.ENABLE_METADATA_INDEX_BLOOM_FILTER
    bloom_filters_file_groups: int = 4  # METADATA_INDEX_BLOOM_FILTER_FILE_GROUP_COUNT
    bloom_use_metadata: bool = False  # HoodieIndexConfig.BLOOM_INDEX_USE_METADATA
    keygen_type: str | None = None  # SIMPLE, COMPLEX, NON_PARTITION, TIMESTAMP (Hudi's KeyGeneratorType)
    keygen_class: str | None = None
    ts_type: str | None = None  # UNIX_TIMESTAMP, EPOCHMILLISECONDS, DATE_STRING, SCALAR
    ts_input_format: str | None = None
    ts_output_format: str | None = None
    ts_timezone: str | None = None
    max_file_size: int = 120 * MiB
    small_file_limit: int = 100 * MiB
    row_group_bytes: int = 120 * MiB
    compression: str = "snappy"
    bloom_type: str = "dynamic_v0"
    bloom_num_entries: int = 60000
    bloom_fpp: float = 0.000000001
    bloom_max_entries: int = 100000
    task_buffer_bytes: int = 256 * MiB
    bucket_buffer_bytes: int = 64 * MiB
    merge_threads: int = field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    clustering_inline: bool = False
    clustering_max_commits: int = 4
    clustering_small_file_limit: int = 300 * MiB
    clustering_target_file_bytes: int = 1024 * MiB
    # Hudi's default is 2 GiB; a group is sorted in memory (about 3x its size on storage), so ours is 1 GiB.
    clustering_max_group_bytes: int = 1024 * MiB
    clustering_max_groups: int = 30
    clustering_sort_columns: tuple[str, ...] = ()
    clustering_partition_regex: str | None = None
    clustering_partitions: tuple[str, ...] = ()
    layout_strategy: str = "linear"
    clustering_preserve_metadata: bool = True
    clustering_updates_strategy: str = "reject"
    clean_automatic: bool = True
    clean_async: bool = False
    cleaner_policy: str = "KEEP_LATEST_COMMITS"
    cleaner_commits_retained: int = 10
    cleaner_file_versions_retained: int = 3
    cleaner_hours_retained: int = 24
    clean_max_commits: int = 1
    cleaner_incremental: bool = True
    archive_automatic: bool = True
    archive_async: bool = False
    keep_min_commits: int = 20
    keep_max_commits: int = 30
    archival_batch: int = 10
    fail_on_archiving: bool = False
    small_file_candidates_limit: int = 1
    compact_inline: bool = True
    compact_max_delta_commits: int = 5
    compact_max_delta_seconds: int = 3600
    compact_trigger: str = "NUM_COMMITS"
    compact_async: bool = False
    metrics_file: str | None = None
    heartbeat_interval_ms: int = 60_000
    heartbeat_misses: int = 2
    index_type: str = "bloom"
    # Hudi 0.14+ moves a GLOBAL_BLOOM key whose partition value changed unless told otherwise
    # (HoodieIndexConfig.BLOOM_INDEX_UPDATE_PARTITION_PATH_ENABLE, default true; docs/hudi/duplicate-keys.md)
    update_partition_path: bool = True
    # the same for RECORD_INDEX (HoodieIndexConfig.RECORD_INDEX_UPDATE_PARTITION_PATH_ENABLE, default false)
    record_index_update_partition_path: bool = False
    num_buckets: int = 4
    bucket_hash_fields: tuple[str, ...] = ()
    record_size_estimate: int = 1024
    commit_meta_prefix: str = "_"
    checkpoint_identifier: str | None = None
    foreach_batch_id: int | None = None
    concurrency_mode: str = SINGLE_WRITER
    failed_writes_policy: str = "eager"
    lock_provider: str | None = None
    lock_path: str | None = None
    lock_expire_minutes: int = 0
    lock_client_retries: int = 50
    lock_client_wait_ms: int = 5000
    lock_wait_ms: int = 60_000
    conflict_strategy: str = SIMPLE_CONFLICT_STRATEGY.lower()
    conflict_retries: int = 0
    stream_retries: int = 3
    stream_retry_interval_ms: int = 2000
    storage_options: StorageOptions = field(default_factory=StorageOptions)  # fs.s3a.* (S3 endpoint, keys)
    explicit: frozenset[str] = field(default_factory=frozenset)  # attrs the user set
    commit_extra: tuple[tuple[str, str], ...] = ()  # options copied into extraMetadata
    ignored: tuple[str, ...] = ()
    # set by the Table's MERGE, UPDATE and DELETE (table/dml/), never by an option: the input's
    # column write/upsert/incoming.DML_DELETE marks the rows that delete their key in this upsert
    dml_deletes: bool = False
    # hoodie.datasource.meta.sync.enable and friends: the catalog sync after each commit, or None
    meta_sync: MetaSyncConfig | None = None

    @staticmethod
    def from_options(
        options: Mapping[str, str], path: str | None = None, overwrite: bool = False, streaming: bool = False
    ) -> WriteConfig:
        """`overwrite`: the write's save mode is overwrite (Spark's mode("overwrite"), the engine API's
        mode="overwrite"); the operation is decided here, once, with it.  `streaming`: the write is a
        micro-batch of a streaming query (changes the default of append.mode, see _operation)."""
        values: dict[str, Any] = {}
        explicit: set[str] = set()
        ignored: list[str] = []
        raw = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
        prefix = raw.get("hoodie.datasource.write.commitmeta.key.prefix", "_")
        extra = tuple(sorted((k, v) for k, v in options.items() if prefix and str(k).startswith(prefix)))
        for key, value in raw.items():
            opt = _BY_KEY.get(key)
            if opt is not None:
                if opt.attr in values and values[opt.attr] != opt.parse(key, value):
                    raise HoodieConfigError(
                        f"Option '{opt.key}' is given twice (also as an alias) with different values."
                    )
                values[opt.attr] = opt.parse(key, value)
                explicit.add(opt.attr)
            elif is_sync_option(key):
                continue  # parsed below, by MetaSyncConfig
            elif key.startswith("hoodie."):
                if _check_hudi_option(key, value):
                    ignored.append(key)
                    continue
                near = difflib.get_close_matches(key, list(_BY_KEY), n=1, cutoff=0.75)
                hint = f" Did you mean '{near[0]}'?" if near else ""
                raise HoodieConfigError(
                    f"Unknown option '{key}'.{hint} Help: see the option list in README.md."
                )
        target = path or raw.get("path") or raw.get("__path")
        if not target:  # SQL tables pass no options: docs/spark/python-datasource.md#sql-tables
            raise HoodieConfigError(
                "No table path: use .save('/path/to/table') or .option('path', ...). "
                "Help: SQL tables created with CREATE TABLE ... USING hoodie pass no options; use "
                "CREATE TEMPORARY VIEW v USING hoodie OPTIONS (path '/path/to/table', ...) and INSERT INTO v."
            )
        values["operation"] = _operation(values, overwrite, streaming)
        values["meta_sync"] = MetaSyncConfig.from_options(raw)
        if streaming and "foreach_batch_id" in values:  # a stream sink knows its batch ids itself
            raise HoodieConfigError(
                "Option 'hoodie.sink.streaming.batch.id' is for batch writes of hoodie_sink.spark.micro_batches "
                "(foreachBatch); writeStream.format('hoodie') records its own micro-batch ids. Help: remove it."
            )
        cfg = WriteConfig(
            path=target,
            storage_options=StorageOptions.from_options(raw),
            explicit=frozenset(explicit),
            commit_extra=extra,
            ignored=tuple(ignored),
            **values,
        )
        return cfg.validated()

    def storage(self) -> Storage:
        """The table's storage, reached with this write's S3 options."""
        return Storage(self.path, self.storage_options)

    @property
    def log_column_stats(self) -> tuple[str, ...] | None:
        """The columns whose statistics a log file's write stat carries (empty: every column), or
        None when this write does not keep column_stats (write/log_writer.write_log_file)."""
        return self.column_stats_columns if self.column_stats_enable else None

    def keeps_metadata_table(self, table_has_one: bool, new_table: bool = False) -> bool:
        """Whether this write keeps Hudi's metadata table: as hoodie.metadata.enable says, or, when
        it is not set, as the table has it (a table with one keeps it; one without is not given
        one).  New tables: see NEW_TABLES_GET_A_METADATA_TABLE."""
        if self.metadata_enable is not None:
            return self.metadata_enable
        return table_has_one or (new_table and NEW_TABLES_GET_A_METADATA_TABLE)

    def record_index_sizing(self) -> RecordIndexSizing:
        """The record index's file-group sizing (hoodie.metadata.record.index.*)."""
        return RecordIndexSizing(
            self.record_index_min_file_groups,
            self.record_index_max_file_groups,
            self.record_index_growth_factor,
            self.record_index_max_file_group_bytes,
        )

    @property
    def index_update_partition_path(self) -> bool:
        """Whether the index moves a record whose partition value changed (its own option)."""
        if self.index_type == "record_index":
            return self.record_index_update_partition_path
        return self.update_partition_path

    @property
    def fills_missing_columns(self) -> bool:
        """Whether table columns the input lacks are written as nulls: asked for directly, or by
        schema reconciliation (docs/hudi/schema-evolution.md#reconcile-schema)."""
        return self.set_null_for_missing_columns or self.reconcile_schema

    @property
    def occ(self) -> bool:
        return self.concurrency_mode == OCC

    def _validate_record_index(self) -> None:
        if self.record_index_enable and self.index_type not in GLOBAL_INDEX_TYPES:
            raise HoodieConfigError(
                f"Option 'hoodie.metadata.record.index.enable'='true' needs a global index, got "
                f"hoodie.index.type={self.index_type.upper()}: with a partition-scoped index a key may live in "
                "several partitions, which Hudi 0.15's record index (one location per key) cannot map, so "
                "deleting one copy would drop the key from it (docs/design/metadata-table.md#record-index). "
                "Help: set hoodie.index.type=GLOBAL_BLOOM."
            )
        if self.record_index_enable and not self.populate_meta_fields:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.record.index.enable'='true' is not supported with "
                "hoodie.populate.meta.fields=false: the record index is read from the stored record keys."
            )
        if self.record_index_enable and self.metadata_enable is False:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.record.index.enable'='true' needs the metadata table: "
                "hoodie.metadata.enable=false removes it. Help: drop one of the two options."
            )
        if not 1 <= self.record_index_min_file_groups <= self.record_index_max_file_groups:
            raise HoodieConfigError(
                "Options 'hoodie.metadata.record.index.min.filegroup.count' "
                f"({self.record_index_min_file_groups}) and '.max.filegroup.count' "
                f"({self.record_index_max_file_groups}) must satisfy 1 <= min <= max."
            )
        if self.record_index_growth_factor <= 0 or self.record_index_max_file_group_bytes < 48:
            raise HoodieConfigError(
                "Options 'hoodie.metadata.record.index.growth.factor' must be positive and "
                "'hoodie.metadata.record.index.max.filegroup.size' at least 48 bytes (one record), got "
                f"{self.record_index_growth_factor} and {self.record_index_max_file_group_bytes}."
            )

    def _validate_column_stats(self) -> None:
        if self.column_stats_enable and self.metadata_enable is False:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.index.column.stats.enable'='true' needs the metadata table: "
                "hoodie.metadata.enable=false removes it. Help: drop one of the two options."
            )
        if self.bloom_filters_enable and self.metadata_enable is False:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.index.bloom.filter.enable'='true' needs the metadata table: "
                "hoodie.metadata.enable=false removes it. Help: drop one of the two options."
            )
        if self.bloom_filters_enable and not self.populate_meta_fields:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.index.bloom.filter.enable'='true' is not supported with "
                "hoodie.populate.meta.fields=false: base files of virtual-key tables have no bloom filter "
                "(Java's writers then write no record either). Help: drop the option."
            )
        if self.bloom_use_metadata and not self.bloom_filters_enable:
            raise HoodieConfigError(
                "Option 'hoodie.bloom.index.use.metadata'='true' needs the metadata table's bloom_filters "
                "partition, which this write does not keep (it drops one a Java writer built). Help: add "
                "hoodie.metadata.index.bloom.filter.enable=true, or drop the option."
            )
        if self.bloom_use_metadata and self.index_type not in ("bloom", "global_bloom"):
            raise HoodieConfigError(
                f"Option 'hoodie.bloom.index.use.metadata'='true' applies to the BLOOM and GLOBAL_BLOOM indexes, "
                f"not to hoodie.index.type={self.index_type.upper()} (as in Hudi). Help: drop the option."
            )
        if self.bloom_filters_file_groups < 1:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.index.bloom.filter.file.group.count' must be at least 1, got "
                f"{self.bloom_filters_file_groups}."
            )
        if self.column_stats_file_groups < 1:
            raise HoodieConfigError(
                "Option 'hoodie.metadata.index.column.stats.file.group.count' must be at least 1, got "
                f"{self.column_stats_file_groups}."
            )

    def _validate_concurrency(self) -> None:
        lock_keys = {"lock_provider", "lock_path", "lock_expire_minutes", "lock_client_retries",
                     "lock_client_wait_ms", "lock_wait_ms", "conflict_strategy"} & self.explicit  # fmt: skip
        if self.conflict_retries and not self.occ:
            lock_keys.add("conflict_retries")
        # a micro-batch is retried only after a lost conflict (other failures fail it, and a
        # restart replays it): without several writers these options would do nothing
        if self.stream_retries and "stream_retries" in self.explicit and not self.occ:
            lock_keys.add("stream_retries")
        if "stream_retry_interval_ms" in self.explicit and not self.occ:
            lock_keys.add("stream_retry_interval_ms")
        if not self.occ:
            if lock_keys:
                key = next(o.key for o in OPTIONS if o.attr == sorted(lock_keys)[0])
                raise HoodieConfigError(
                    f"Option '{key}' applies to several writers: set hoodie.write.concurrency.mode="
                    f"{OCC} (and hoodie.write.lock.provider), or remove it."
                )
            return
        if self.lock_provider is None:
            raise HoodieConfigError(
                f"hoodie.write.concurrency.mode={OCC} needs a lock: set hoodie.write.lock.provider to "
                f"{_LOCK_PACKAGE}{FILESYSTEM_LOCK} or {_LOCK_PACKAGE}{IN_PROCESS_LOCK} (Java's default, "
                "ZooKeeper, is not supported)."
            )
        if "failed_writes_policy" in self.explicit and self.failed_writes_policy == "eager":
            raise HoodieConfigError(
                "To enable optimistic concurrency control, set hoodie.cleaner.policy.failed.writes=LAZY "
                "(Java refuses EAGER too: an eager rollback would undo another writer's live write)."
            )

    def validated(self) -> WriteConfig:
        self._validate_concurrency()
        self._validate_record_index()
        self._validate_column_stats()
        WriteOperation.of(self.operation)  # refuses an unknown one
        self.check_bucket_operation()
        if self.max_file_size < 1024:
            raise HoodieConfigError(
                f"Option 'hoodie.parquet.max.file.size' is too small: {self.max_file_size}."
            )
        if not 0 < self.bloom_fpp < 1:
            raise HoodieConfigError(
                f"Option 'hoodie.index.bloom.fpp' must be in (0, 1), got {self.bloom_fpp}."
            )
        if self.keygen_class:
            supported_keygen_type(self.keygen_class, "Option 'hoodie.datasource.write.keygenerator.class'")
        if self.index_type == "bucket" and self.num_buckets < 1:
            raise HoodieConfigError(
                f"Option 'hoodie.bucket.index.num.buckets' must be at least 1, got {self.num_buckets}."
            )
        if self.clustering_partition_regex:
            try:
                re.compile(self.clustering_partition_regex)
            except re.error as e:
                raise HoodieConfigError(
                    f"Option 'hoodie.clustering.plan.strategy.partition.regex.pattern'="
                    f"'{self.clustering_partition_regex}' is not a valid regular expression: {e}."
                ) from None
        self._validate_services()
        if self.table_name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.table_name):
            raise HoodieConfigError(
                f"Option 'hoodie.table.name'='{self.table_name}' is not a valid name (letters, digits, '_')."
            )
        return self

    def check_bucket_operation(self, table_says: bool = False) -> None:
        """Operations that write new file groups without hashing keys into buckets are refused on
        a BUCKET index (`table_says`: the index type comes from the table's hoodie.properties;
        docs/hudi/bucket-layout.md)."""
        if self.index_type != "bucket" or WriteOperation.of(self.operation).allowed_with_bucket_index:
            return
        whose = (
            f"on the table at {self.path}, whose hoodie.properties records 'hoodie.index.type'='BUCKET'"
            if table_says
            else "with 'hoodie.index.type'='BUCKET'"
        )
        raise HoodieConfigError(
            f"Option 'hoodie.datasource.write.operation'='{self.operation}' is not supported {whose}: it would "
            "write file groups outside the hash buckets, which the bucket index can never find (later upserts "
            "would insert the same keys again or fail). Help: write with operation 'upsert' (new keys are "
            "inserted into their bucket); to replace the data, delete the old keys, or write a new table."
        )

    def _validate_services(self) -> None:
        # Java's HoodieWriteConfig.validate: archiving commits the cleaner still retains would let
        # incremental pulls and time travel within the retained window miss instants
        for key, value in (("hoodie.cleaner.commits.retained", self.cleaner_commits_retained),
                           ("hoodie.cleaner.fileversions.retained", self.cleaner_file_versions_retained),
                           ("hoodie.keep.min.commits", self.keep_min_commits),
                           ("hoodie.commits.archival.batch", self.archival_batch),
                           ("hoodie.clean.max.commits", self.clean_max_commits)):  # fmt: skip
            if value < 1:
                raise HoodieConfigError(f"Option '{key}' must be at least 1, got {value}.")
        if self.keep_max_commits <= self.keep_min_commits:
            raise HoodieConfigError(
                f"Option 'hoodie.keep.max.commits'={self.keep_max_commits} must be greater than "
                f"'hoodie.keep.min.commits'={self.keep_min_commits}."
            )
        if (
            self.clean_automatic and self.archive_automatic and self.cleaner_policy == "KEEP_LATEST_COMMITS"
            and self.keep_min_commits <= self.cleaner_commits_retained
        ):  # fmt: skip
            raise HoodieConfigError(
                f"Option 'hoodie.keep.min.commits'={self.keep_min_commits} must be greater than "
                f"'hoodie.cleaner.commits.retained'={self.cleaner_commits_retained}: archival would "
                "remove instants the cleaner retains for time travel and incremental reads."
            )

    def with_(self, **changes) -> WriteConfig:
        return replace(self, **changes)

    # -- derived ---------------------------------------------------------------------------
    @property
    def resolved_keygen(self) -> str:
        if self.keygen_type:
            return self.keygen_type
        if self.keygen_class:
            return supported_keygen_type(
                self.keygen_class, "Option 'hoodie.datasource.write.keygenerator.class'"
            )
        return inferred_keygen_type(self.record_key_fields, self.partition_fields)

    @property
    def commit_time_ordering(self) -> bool:
        """True when the incoming record replaces the stored one whatever the ordering values
        (OverwriteWithLatestAvroPayload); the precombine field then only de-duplicates a batch."""
        return self.payload_class == OVERWRITE_WITH_LATEST_PAYLOAD

    @property
    def partial_update(self) -> bool:
        """PartialUpdateAvroPayload: a record's null (or missing) columns keep the other record's
        values (docs/hudi/partial-update.md)."""
        return self.payload_class == PARTIAL_UPDATE_PAYLOAD

    @property
    def debezium(self) -> bool:
        """PostgresDebeziumAvroPayload: event time on _event_lsn, deletes by the operation column
        (docs/hudi/debezium.md)."""
        return is_debezium(self.payload_class)

    def default_table_name(self) -> str:
        base = os.path.basename(self.path.rstrip("/")) or "hoodie_table"
        name = re.sub(r"[^A-Za-z0-9_]", "_", base)
        return name if re.match(r"[A-Za-z_]", name) else f"t_{name}"


def _operation(values: Mapping[str, Any], overwrite: bool, streaming: bool = False) -> str:
    """The one place the write's operation is decided: mode("overwrite") replaces the table's
    data (insert_overwrite_table) unless the write names insert_overwrite (the written partitions
    only); append.mode turns insert into append.

    append.mode defaults to true in a streaming query, as in Hudi's Flink writer: packing a
    micro-batch's inserts into the small files of earlier batches rewrites those files again at
    every batch (ten 100k-row batches wrote 9x the data), so a stream writes new file groups and
    clustering packs them; a batch write, large and rare, fills small files as Hudi Spark does."""
    operation = str(values.get("operation", UPSERT.name))
    if overwrite and not ("operation" in values and operation == INSERT_OVERWRITE.name):
        return INSERT_OVERWRITE_TABLE.name
    if values.get("append_mode", streaming) and operation == INSERT.name:
        return APPEND_OP.name
    return operation


def option_keys() -> list[str]:
    """Every accepted key (for docs)."""
    return sorted(o.key for o in OPTIONS)
