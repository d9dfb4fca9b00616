"""Read options -> one frozen ReadConfig, parsed once at the boundary (as WriteConfig is for writes).

Apache Hudi's read option names (DataSourceReadOptions).  Spark lowercases option keys
(docs/spark/python-datasource.md#options), so keys match case-insensitively.  What a read cannot
honour is refused with an error naming the option, never answered with a snapshot in disguise:

* `hoodie.datasource.query.type`: `snapshot` (default), `read_optimized` and `incremental` with
  `hoodie.datasource.read.begin.instanttime` (exclusive, required), `...end.instanttime`
  (inclusive, default the latest write), `...incr.fallback.fulltablescan.enable` and
  `...incr.path.glob` (table/read/incremental.py); with `hoodie.datasource.query.incremental.format=cdc`
  the change feed of the range instead (table/read/cdc.py; also for streams);
  `...schema.use.end.instanttime` is not supported.
* streaming reads (`spark.readStream`, parsed with `streaming=True`): `hoodie.datasource.streaming.startOffset`
  (earliest, latest or an instant time) and hoodie_sink's own
  `hoodie.datasource.streaming.max.instants.per.batch` (rate limiting); both are refused in batch
  reads, and the batch-only options (`as.of.instant`, begin / end instants, read_optimized) in
  streaming ones.
* `as.of.instant` (Hudi's key for time travel): the formats Hudi's `formatQueryInstant` accepts.
* `hoodie.datasource.merge.type`: `payload_combine` (default) or `skip_merge` (a merge-on-read
  snapshot returns each file slice's base rows and its merged log records without merging the
  two, as Hudi's SkipMergeIterator; snapshot and read-optimized queries only).
* refused: `hoodie.datasource.read.paths`, `hoodie.schema.on.read.enable=true` (each would
  change the answer; not built).
* an unknown `hoodie.*` key is an error with a suggestion.  Write options are accepted and
  ignored (users reuse one options dict for `df.write` and `spark.read`, and a SQL view's
  OPTIONS serve both), as are Hudi's read-tuning options that change no answer (`_READ_TUNING`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.options.write_config import OPTIONS, is_write_option
from hoodie_sink.table.storage import Storage
from hoodie_sink.table.storage_options import StorageOptions

QUERY_TYPE = "hoodie.datasource.query.type"
AS_OF_INSTANT = "as.of.instant"
INCREMENTAL_FORMAT = "hoodie.datasource.query.incremental.format"
EXTRACT_PARTITION_VALUES = "hoodie.datasource.read.extract.partition.values.from.path"

BEGIN_INSTANT = "hoodie.datasource.read.begin.instanttime"
END_INSTANT = "hoodie.datasource.read.end.instanttime"
INCR_FALLBACK = "hoodie.datasource.read.incr.fallback.fulltablescan.enable"
INCR_PATH_GLOB = "hoodie.datasource.read.incr.path.glob"
START_OFFSET = "hoodie.datasource.streaming.startoffset"  # Hudi's startOffset; Spark lowercases keys
START_OFFSET_NAME = "hoodie.datasource.streaming.startOffset"
MAX_INSTANTS = "hoodie.datasource.streaming.max.instants.per.batch"
_STREAMING_KEYS = (START_OFFSET, MAX_INSTANTS)

QUERY_TYPES = ("snapshot", "read_optimized", "incremental")
LATEST_STATE, CDC = "latest_state", "cdc"  # incremental formats
_INCREMENTAL_KEYS = (BEGIN_INSTANT, END_INSTANT, INCR_FALLBACK, INCR_PATH_GLOB)

# Options of incremental / CDC queries not built yet: refused.
_INCREMENTAL_ONLY = (
    "hoodie.datasource.read.incr.", "hoodie.datasource.read.schema.use.end.instanttime",
    "hoodie.datasource.read.streaming.", "hoodie.datasource.streaming.",
)  # fmt: skip
MERGE_TYPE = "hoodie.datasource.merge.type"
PAYLOAD_COMBINE, SKIP_MERGE = "payload_combine", "skip_merge"  # merge types
READ_PATHS = "hoodie.datasource.read.paths"
SCHEMA_ON_READ = "hoodie.schema.on.read.enable"
# Hudi read options that only tune how Hudi's JVM reader finds and reads files, accepted and
# ignored because none can change an answer (docs/hudi/read-options.md):
# * hoodie.enable.data.skipping: Hudi then skips files by its column statistics index, only those
#   that hold no row matching the query's filters, which Spark still applies to every row;
# * hoodie.file.index.*, hoodie.datasource.read.file.index.*: how Hudi's file index lists
#   partitions and files (listing mode, parallelism), not which file slices a snapshot has;
# * hoodie.datasource.read.use.new.parquet.file.format: which of Hudi's Spark readers runs.
_READ_TUNING = (
    "hoodie.enable.data.skipping", "hoodie.file.index.", "hoodie.datasource.read.file.index.",
    "hoodie.datasource.read.use.new.parquet.file.format",
)  # fmt: skip
# Read options that would change an answer and are not built: refused, with the reason.
_REFUSED = {
    READ_PATHS: "hoodie_sink reads a table from its base path (every latest file slice), not named files. Help: "
    "load the table's base path and filter rows (e.g. on the partition column or _hoodie_file_name).",
}
_KNOWN_READ_KEYS = (
    QUERY_TYPE,
    AS_OF_INSTANT,
    MERGE_TYPE,
    SCHEMA_ON_READ,
    INCREMENTAL_FORMAT,
    EXTRACT_PARTITION_VALUES,
    *_INCREMENTAL_KEYS,
    *_STREAMING_KEYS,
)
_WRITE_KEYS = {k.lower() for o in OPTIONS for k in (o.key, *o.aliases)}


def is_read_option(key: str) -> bool:
    """Whether `key` is one of the read options above (any case): what a write config, given one
    options dict for a table's reads and its services, leaves to the reads."""
    return key.lower() in _KNOWN_READ_KEYS


AS_OF_FORMATS = (
    "'yyyyMMddHHmmssSSS', 'yyyyMMddHHmmss', 'yyyy-MM-dd HH:mm:ss.SSS', 'yyyy-MM-dd HH:mm:ss', 'yyyy-MM-dd'"
)


@dataclass(frozen=True)
class ReadConfig:
    """Everything one read needs, parsed and checked once.  Plain fields: it pickles."""

    path: str
    query_type: str = "snapshot"
    as_of_instant: str | None = None  # an instant time (14 or 17 digits), compared as Hudi does
    ignored: tuple[str, ...] = ()
    # incremental: (begin, end]; end None = the latest write when the read is planned
    begin_instant: str | None = None
    end_instant: str | None = None
    fallback_full_scan: bool = False
    path_glob: str | None = None
    incremental_format: str = LATEST_STATE  # cdc: the change feed (table/read/cdc.py)
    # merge.type=skip_merge: a merge-on-read snapshot returns base rows and log records unmerged
    skip_merge: bool = False
    # streaming reads
    streaming: bool = False
    start_offset: str = "earliest"
    max_instants_per_batch: int | None = None
    storage_options: StorageOptions = field(default_factory=StorageOptions)  # fs.s3a.* (S3 endpoint, keys)

    def storage(self) -> Storage:
        """The table's storage, reached with this read's S3 options."""
        return Storage(self.path, self.storage_options)

    @property
    def incremental(self) -> bool:
        return self.query_type == "incremental"

    @property
    def cdc(self) -> bool:
        return self.incremental_format == CDC

    @property
    def read_optimized(self) -> bool:
        return self.query_type == "read_optimized"

    @staticmethod
    def from_options(
        options: Mapping[str, str], path: str | None = None, streaming: bool = False
    ) -> ReadConfig:
        raw = {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}
        ignored = []
        for key, _value in raw.items():
            if key in _KNOWN_READ_KEYS or not key.startswith("hoodie."):
                continue
            refused = next((why for k, why in _REFUSED.items() if key.startswith(k)), None)
            if refused:
                raise HoodieConfigError(f"Option '{key}' is not supported: {refused}")
            if key.startswith(_INCREMENTAL_ONLY):
                raise HoodieConfigError(
                    f"Option '{key}' is not supported yet (hoodie_sink's incremental queries take "
                    f"{', '.join(_INCREMENTAL_KEYS)}). Help: remove it."
                )
            if is_write_option(key) or key.startswith(_READ_TUNING):
                ignored.append(key)
                continue
            known = [*_KNOWN_READ_KEYS, *_WRITE_KEYS]
            near = [AS_OF_INSTANT] if key.endswith(AS_OF_INSTANT) else []  # Hudi's key has no prefix
            near = near or difflib.get_close_matches(key, known, n=1, cutoff=0.75)
            hint = f" Did you mean '{near[0]}'?" if near else ""
            raise HoodieConfigError(
                f"Unknown read option '{key}'.{hint} Help: read options are {QUERY_TYPE} "
                f"({', '.join(QUERY_TYPES)}) and {AS_OF_INSTANT}; see README.md."
            )
        target = path or raw.get("path")
        if not target:
            raise HoodieConfigError(
                "No table path: use .load('/path/to/table') or .option('path', ...). Help: for SQL, "
                "CREATE TEMPORARY VIEW v USING hoodie OPTIONS (path '/path/to/table')."
            )
        if raw.get(EXTRACT_PARTITION_VALUES, "false").strip().lower() not in ("false", ""):
            raise HoodieConfigError(
                f"Option '{EXTRACT_PARTITION_VALUES}'=true is not supported: partition columns are read "
                "from the data files. Help: remove the option."
            )
        if raw.get(SCHEMA_ON_READ, "false").strip().lower() not in ("false", ""):
            raise HoodieConfigError(
                f"Option '{SCHEMA_ON_READ}'=true is not supported: hoodie_sink resolves columns by name "
                "(schema evolution on read, by column ids, is not built). Help: remove the option."
            )
        query_type = _query_type(raw)
        incremental_format = _incremental_format(raw, query_type, streaming)
        skip_merge = _skip_merge(raw, query_type, streaming)
        as_of = parse_as_of_instant(raw[AS_OF_INSTANT]) if raw.get(AS_OF_INSTANT) else None
        incremental = {k: raw[k].strip() for k in _INCREMENTAL_KEYS if raw.get(k, "").strip()}
        if query_type != "incremental" and incremental and not streaming:
            raise HoodieConfigError(
                f"Option '{sorted(incremental)[0]}' applies to incremental queries. Help: set "
                f"{QUERY_TYPE}=incremental, or remove it."
            )
        if query_type == "incremental" and not streaming:
            if BEGIN_INSTANT not in incremental:
                raise HoodieConfigError(
                    f"An incremental query needs '{BEGIN_INSTANT}' (an instant time, exclusive, or earliest)."
                )
            if as_of:
                raise HoodieConfigError(
                    f"'{AS_OF_INSTANT}' is for snapshot queries; an incremental query ends at '{END_INSTANT}'."
                )
            fallback = incremental.get(INCR_FALLBACK, "false").lower()
            if fallback not in ("true", "false"):
                raise HoodieConfigError(f"Option '{INCR_FALLBACK}' takes true or false, got '{fallback}'.")
        stream = _streaming_options(raw, streaming, query_type, as_of, incremental)
        if incremental_format == CDC:
            for key in (INCR_PATH_GLOB, INCR_FALLBACK):
                if key in incremental and incremental[key].lower() != "false":
                    raise HoodieConfigError(
                        f"Option '{key}' does not apply to a change feed ({INCREMENTAL_FORMAT}=cdc): its before "
                        "images and deletes come from the file groups each write touched. Help: remove it."
                    )
        return ReadConfig(
            path=target,
            query_type=query_type,
            as_of_instant=as_of,
            ignored=tuple(sorted(ignored)),
            begin_instant=incremental.get(BEGIN_INSTANT),
            end_instant=incremental.get(END_INSTANT),
            fallback_full_scan=incremental.get(INCR_FALLBACK, "false").lower() == "true",
            path_glob=incremental.get(INCR_PATH_GLOB),
            incremental_format=incremental_format,
            skip_merge=skip_merge,
            streaming=streaming,
            storage_options=StorageOptions.from_options(raw),
            **stream,
        )


def _shown(key: str) -> str:
    return START_OFFSET_NAME if key == START_OFFSET else key


def _streaming_options(
    raw: Mapping[str, str],
    streaming: bool,
    query_type: str,
    as_of: str | None,
    incremental: Mapping[str, str],
) -> dict:
    given = {k: raw[k].strip() for k in _STREAMING_KEYS if raw.get(k, "").strip()}
    if not streaming:
        if given:
            raise HoodieConfigError(
                f"Option '{_shown(sorted(given)[0])}' applies to streaming reads (spark.readStream.format('hoodie')). "
                "Help: remove it, or read the table as a stream."
            )
        return {}
    batch_only = [*incremental, *([AS_OF_INSTANT] if as_of else [])]
    if batch_only or query_type == "read_optimized":
        shown = batch_only[0] if batch_only else f"{QUERY_TYPE}=read_optimized"
        raise HoodieConfigError(
            f"Option '{shown}' does not apply to a streaming read: a stream reads every write after its start "
            f"offset. Help: remove it; choose where the stream starts with {START_OFFSET_NAME} (earliest, latest or "
            "an instant time)."
        )
    out: dict = {"start_offset": given.get(START_OFFSET, "earliest")}
    if MAX_INSTANTS in given:
        try:
            n = int(given[MAX_INSTANTS])
        except ValueError:
            n = 0
        if n < 1:
            raise HoodieConfigError(
                f"Option '{MAX_INSTANTS}' takes a positive number of commits, got '{given[MAX_INSTANTS]}'."
            )
        out["max_instants_per_batch"] = n
    return out


def _query_type(raw: Mapping[str, str]) -> str:
    value = raw.get(QUERY_TYPE, "snapshot").strip().lower() or "snapshot"
    if value == "cdc":
        raise HoodieConfigError(
            f"Option '{QUERY_TYPE}'='cdc' is not a Hudi query type. Help: a change feed is "
            f"{QUERY_TYPE}=incremental with {INCREMENTAL_FORMAT}=cdc."
        )
    if value not in QUERY_TYPES:
        raise HoodieConfigError(
            f"Option '{QUERY_TYPE}' got '{raw.get(QUERY_TYPE)}'; accepted values: {', '.join(QUERY_TYPES)}."
        )
    return value


def _skip_merge(raw: Mapping[str, str], query_type: str, streaming: bool) -> bool:
    value = raw.get(MERGE_TYPE, "").strip().lower() or PAYLOAD_COMBINE
    if value not in (PAYLOAD_COMBINE, SKIP_MERGE):
        raise HoodieConfigError(
            f"Option '{MERGE_TYPE}' got '{raw[MERGE_TYPE]}'; accepted values: {PAYLOAD_COMBINE}, {SKIP_MERGE}."
        )
    if value == SKIP_MERGE and (query_type == "incremental" or streaming):
        raise HoodieConfigError(
            f"Option '{MERGE_TYPE}'={SKIP_MERGE} is supported for snapshot and read-optimized queries only. Help: "
            "remove it (incremental queries, change feeds and streams merge each file group's records)."
        )
    return value == SKIP_MERGE


def _incremental_format(raw: Mapping[str, str], query_type: str, streaming: bool) -> str:
    fmt = raw.get(INCREMENTAL_FORMAT, "").strip().lower() or LATEST_STATE
    if fmt not in (LATEST_STATE, CDC):
        raise HoodieConfigError(
            f"Option '{INCREMENTAL_FORMAT}' got '{fmt}'; accepted values: latest_state, cdc."
        )
    if fmt == CDC and query_type != "incremental" and not streaming:
        raise HoodieConfigError(
            f"Option '{INCREMENTAL_FORMAT}'=cdc applies to incremental queries and streams. Help: set "
            f"{QUERY_TYPE}=incremental with {BEGIN_INSTANT}."
        )
    return fmt


_DIGITS = re.compile(r"\d{14}(\d{3})?")


def parse_as_of_instant(value: str) -> str:
    """The instant time `as.of.instant` names, as Hudi's HoodieSqlCommonUtils.formatQueryInstant
    computes it; files at instants <= it are visible (string comparison, as Hudi's timeline does):

    * `yyyyMMddHHmmssSSS`, `yyyyMMddHHmmss`: kept as given (validated), so 14 digits compare as
      the start of that second: instants within it are later (Hudi does the same);
    * `yyyy-MM-dd HH:mm:ss.SSS` -> `yyyyMMddHHmmssSSS`;
    * `yyyy-MM-dd HH:mm:ss` -> that second's last millisecond, `...999` (Hudi's DEFAULT_MILLIS_EXT);
    * `yyyy-MM-dd` -> that day at 00:00:00.000.
    Anything else is an error naming the option and the formats (no silent "latest").
    """
    s = str(value).strip()
    try:
        if _DIGITS.fullmatch(s):
            dt.datetime.strptime(s[:14], "%Y%m%d%H%M%S")  # validates month, day, hour, ...
            return s
        if len(s) == 23:
            moment = dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f")
            return moment.strftime("%Y%m%d%H%M%S") + s[20:23]
        if len(s) == 19:
            return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S").strftime("%Y%m%d%H%M%S") + "999"
        if len(s) == 10:
            return dt.datetime.strptime(s, "%Y-%m-%d").strftime("%Y%m%d") + "000000000"
    except ValueError:
        pass
    raise HoodieConfigError(
        f"Option '{AS_OF_INSTANT}'='{value}' is not an instant time. Help: use one of the formats "
        f"{AS_OF_FORMATS} (as Apache Hudi's time travel does)."
    )
