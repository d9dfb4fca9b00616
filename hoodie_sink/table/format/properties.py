"""`.hoodie/hoodie.properties`: the table's identity and its table-level settings.

Java reads and writes it with java.util.Properties: ISO-8859-1 bytes, backslash escapes, every
character outside printable ASCII as \\uXXXX.  We write what Properties.load reads back exactly
and parse it as Properties.load does; hudi-rs splits each line at the first '=' and un-escapes only
`\\:` in the create schema, so values carry no escape beyond what Java needs (a non-ASCII value
reaches hudi-rs escaped).  The checksum is CRC32 of "<database>.<table>".  Facts and sources:
docs/hudi/format.md#table-properties.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.timeline.instant import LOCAL_ZONE, TIMELINE_ZONES, UTC_ZONE
from hoodie_sink.table.storage import Storage

PROPERTIES_FILE = ".hoodie/hoodie.properties"
BACKUP_FILE = ".hoodie/hoodie.properties.backup"

COPY_ON_WRITE = "COPY_ON_WRITE"
MERGE_ON_READ = "MERGE_ON_READ"
# hoodie.compaction.record.merger.strategy ids (Hudi 0.14/0.15), used by readers when a table
# names no payload class (docs/hudi/format.md#file-slices-and-merge-mode, step 2).
MERGER_STRATEGY_KEY = "hoodie.compaction.record.merger.strategy"
EVENT_TIME_STRATEGY = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY = "ce9acb64-bde0-424c-9b91-f6ebba25356d"

# Merge semantics readers infer from the payload class (docs/hudi/format.md#file-slices-and-merge-mode).
OVERWRITE_WITH_LATEST_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"

K_NAME = "hoodie.table.name"
K_TYPE = "hoodie.table.type"
K_VERSION = "hoodie.table.version"
K_LAYOUT = "hoodie.timeline.layout.version"
K_CHECKSUM = "hoodie.table.checksum"
K_DATABASE = "hoodie.database.name"
K_RECORD_KEYS = "hoodie.table.recordkey.fields"
K_PARTITION_FIELDS = "hoodie.table.partition.fields"
K_PRECOMBINE = "hoodie.table.precombine.field"
K_KEYGEN_CLASS = "hoodie.table.keygenerator.class"
K_HIVE_STYLE = "hoodie.datasource.write.hive_style_partitioning"
K_URL_ENCODE = "hoodie.datasource.write.partitionpath.urlencode"
K_DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
K_ARCHIVE_FOLDER = "hoodie.archivelog.folder"
K_CREATE_SCHEMA = "hoodie.table.create.schema"
K_TIMEZONE = "hoodie.table.timeline.timezone"
K_BASE_FORMAT = "hoodie.table.base.file.format"
K_PAYLOAD = "hoodie.compaction.payload.class"
K_POPULATE_META = "hoodie.populate.meta.fields"
K_TS_TYPE = "hoodie.keygen.timebased.timestamp.type"
K_TS_INPUT_FMT = "hoodie.keygen.timebased.input.dateformat"
K_TS_OUTPUT_FMT = "hoodie.keygen.timebased.output.dateformat"
K_TS_TIMEZONE = "hoodie.keygen.timebased.timezone"
# The bucket layout (docs/hudi/bucket-layout.md): Apache Hudi 0.15 keeps none of it with the table;
# we record it under the write options' own names, which Java ignores in hoodie.properties.
K_INDEX_TYPE = "hoodie.index.type"
K_NUM_BUCKETS = "hoodie.bucket.index.num.buckets"
K_BUCKET_HASH_FIELD = "hoodie.bucket.index.hash.field"
BUCKET_INDEX = "BUCKET"


def table_checksum(database: str | None, table: str) -> int:
    return zlib.crc32(f"{database or ''}.{table}".encode()) & 0xFFFFFFFF


def decode_properties(data: bytes) -> tuple[str, str]:
    """The text of a properties file and its encoding.  Java reads and writes ISO-8859-1 (and
    escapes every other character as \\uXXXX); we wrote UTF-8 before, which is the same bytes for
    ASCII.  Bytes that are not valid UTF-8 can only be ISO-8859-1 (a Java or hand-written file)."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def read_properties_text(storage: Storage, rel: str = PROPERTIES_FILE) -> tuple[str, str]:
    return decode_properties(storage.read_bytes(rel))


_WHITESPACE = " \t\f"


def _logical_lines(text: str) -> list[str]:
    """java.util.Properties' lines: leading whitespace dropped, comments and blank lines skipped,
    a line ending in an odd number of backslashes continued by the next one."""
    out: list[str] = []
    pending: str | None = None
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        line = line if pending is None else pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        out.append(line)
    if pending is not None:
        out.append(pending)
    return out


def _split_key(line: str) -> tuple[str, str]:
    """Key and raw value as Java splits them: the key ends at the first unescaped '=', ':' or
    whitespace; then whitespace and at most one '=' or ':' separate it from the value, whose
    trailing whitespace is kept."""
    i, escaped = 0, False
    while i < len(line):
        c = line[i]
        if not escaped and (c in "=:" or c in _WHITESPACE):
            break
        escaped = c == "\\" and not escaped
        i += 1
    key, j, has_sep = line[:i], i, False
    while j < len(line):
        c = line[j]
        if c in _WHITESPACE:
            j += 1
        elif c in "=:" and not has_sep:
            has_sep = True
            j += 1
        else:
            break
    return key, line[j:]


def line_key(line: str) -> str | None:
    """The key a physical line sets, as Properties.load reads it; None for blank and comment lines
    (a continuation line is read as a line of its own: Java writes none)."""
    stripped = line.lstrip(_WHITESPACE)
    if not stripped or stripped[0] in "#!":
        return None
    return _unescape(_split_key(stripped)[0])


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text as Properties.load does (escapes, separators,
    continuations); the last value of a repeated key wins."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "u":
                digits = value[i + 2 : i + 6]
                if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise HoodieTableError(f"Malformed \\uXXXX escape in hoodie.properties: '{value}'")
                out.append(chr(int(digits, 16)))
                i += 6
                continue
            out.append({"n": "\n", "t": "\t", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    # surrogate pairs (\\uD83D\\uDE00) are one character in Java's UTF-16 strings
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")


def _escape(text: str, is_key: bool, also: str = "") -> str:
    """What Properties.store writes (ISO-8859-1 file, so every character outside printable ASCII
    becomes \\uXXXX of its UTF-16 units).  In values, '=', ':', '#' and '!' stay as they are: Java
    reads them literally there, and hudi-rs, which splits lines at the first '=' and un-escapes
    only '\\:' in the create schema (docs/hudi/format.md#table-properties), would keep the
    backslashes (`also` adds characters to escape, e.g. ':' in the create schema, as Java writes
    it)."""
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif (is_key and c in "=:#!") or c in also:
            out.append("\\" + c)
        elif " " < c <= "~":
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[k] << 8 | units[k + 1]:04X}" for k in range(0, len(units), 2))
    return "".join(out)


def render_properties(props: dict[str, str]) -> str:
    """Properties text Java's Properties.load reads back exactly: printable ASCII only."""
    now = datetime.now(timezone.utc)
    lines = [f"#Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z", f"#{now.ctime()}"]
    for key in sorted(props):
        also = ":" if key == K_CREATE_SCHEMA else ""
        lines.append(f"{_escape(key, is_key=True)}={_escape(props[key], is_key=False, also=also)}")
    return "\n".join(lines) + "\n"


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return value.strip().lower() == "true"


@dataclass(frozen=True)
class TableConfig:
    """The table-level settings persisted in hoodie.properties."""

    name: str
    table_type: str = COPY_ON_WRITE
    record_key_fields: tuple[str, ...] = ()
    partition_fields: tuple[str, ...] = ()
    precombine_field: str | None = None
    keygen_class: str | None = None
    hive_style: bool = False
    url_encode: bool = False
    database: str | None = "default"
    create_schema: str | None = None
    payload_class: str | None = None
    populate_meta_fields: bool = True
    version: int = 6
    timeline_zone: str = UTC_ZONE  # the zone of instant times: what we create; Java's default is LOCAL
    # the recorded index layout: BUCKET with its bucket count and hash fields, or None (not recorded)
    index_type: str | None = None
    num_buckets: int | None = None
    bucket_hash_fields: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TableConfig:
        def fields(key: str) -> tuple[str, ...]:
            raw = props.get(key, "")
            return tuple(f.strip() for f in raw.split(",") if f.strip())

        known = {
            K_NAME, K_TYPE, K_RECORD_KEYS, K_PARTITION_FIELDS, K_PRECOMBINE, K_KEYGEN_CLASS,
            K_HIVE_STYLE, K_URL_ENCODE, K_DATABASE, K_CREATE_SCHEMA, K_PAYLOAD, K_POPULATE_META,
            K_VERSION, K_CHECKSUM, K_TIMEZONE, K_INDEX_TYPE, K_NUM_BUCKETS, K_BUCKET_HASH_FIELD,
        }  # fmt: skip
        if K_NAME not in props:
            raise HoodieTableError(f"hoodie.properties lacks '{K_NAME}'")
        check_table_version(props)
        ttype = props.get(K_TYPE, COPY_ON_WRITE).upper()
        ttype = {"COW": COPY_ON_WRITE, "MOR": MERGE_ON_READ}.get(ttype, ttype)
        return cls(
            name=props[K_NAME],
            table_type=ttype,
            record_key_fields=fields(K_RECORD_KEYS),
            partition_fields=fields(K_PARTITION_FIELDS),
            precombine_field=props.get(K_PRECOMBINE) or None,
            keygen_class=props.get(K_KEYGEN_CLASS) or None,
            hive_style=_bool(props.get(K_HIVE_STYLE), False),
            url_encode=_bool(props.get(K_URL_ENCODE), False),
            database=props.get(K_DATABASE),
            create_schema=props.get(K_CREATE_SCHEMA),
            payload_class=props.get(K_PAYLOAD),
            populate_meta_fields=_bool(props.get(K_POPULATE_META), True),
            version=int(props.get(K_VERSION, "6")),
            timeline_zone=_timeline_zone(props),
            index_type=props.get(K_INDEX_TYPE, "").strip().upper() or None,
            num_buckets=_num_buckets(props),
            bucket_hash_fields=fields(K_BUCKET_HASH_FIELD),
            extra={k: v for k, v in props.items() if k not in known},
        )

    @property
    def archive_folder(self) -> str:
        """Where archival writes, below .hoodie/ (hoodie.archivelog.folder; Java's default)."""
        return self.extra.get(K_ARCHIVE_FOLDER) or "archived"

    def to_properties(self) -> dict[str, str]:
        props = dict(self.extra)
        props.update(
            {
                K_NAME: self.name,
                K_TYPE: self.table_type,
                K_VERSION: str(self.version),
                K_LAYOUT: "1",
                K_ARCHIVE_FOLDER: self.archive_folder,
                K_TIMEZONE: self.timeline_zone,
                K_DROP_PARTITION_COLUMNS: "false",
                K_HIVE_STYLE: str(self.hive_style).lower(),
                K_URL_ENCODE: str(self.url_encode).lower(),
                K_POPULATE_META: str(self.populate_meta_fields).lower(),
                K_BASE_FORMAT: "PARQUET",
                K_CHECKSUM: str(table_checksum(self.database, self.name)),
            }
        )
        if self.database:
            props[K_DATABASE] = self.database
        if self.record_key_fields:
            props[K_RECORD_KEYS] = ",".join(self.record_key_fields)
        if self.partition_fields:
            props[K_PARTITION_FIELDS] = ",".join(self.partition_fields)
        if self.precombine_field:
            props[K_PRECOMBINE] = self.precombine_field
        if self.keygen_class:
            props[K_KEYGEN_CLASS] = self.keygen_class
        if self.create_schema:
            props[K_CREATE_SCHEMA] = self.create_schema
        if self.payload_class:
            props[K_PAYLOAD] = self.payload_class
        props.update(self.layout_properties())
        return props

    @property
    def bucket_layout(self) -> bool:
        """Whether hoodie.properties records a BUCKET index (count and hash fields with it)."""
        return self.index_type == BUCKET_INDEX

    def layout_properties(self) -> dict[str, str]:
        """The recorded index layout, as hoodie.properties lines."""
        props = {K_INDEX_TYPE: self.index_type} if self.index_type else {}
        if self.num_buckets is not None:
            props[K_NUM_BUCKETS] = str(self.num_buckets)
        if self.bucket_hash_fields:
            props[K_BUCKET_HASH_FIELD] = ",".join(self.bucket_hash_fields)
        return props

    def with_updates(self, **changes: Any) -> TableConfig:
        return replace(self, **changes)


# What keeps Apache Hudi 1.x writers from moving a table past version 6
# (docs/hudi/services.md#apache-hudi-1x-and-table-version-6).
KEEP_AT_V6 = (
    "Apache Hudi 1.x writers keep a table at version 6 with hoodie.write.auto.upgrade=false "
    "(and hoodie.write.table.version=6 when they create it); 0.14/0.15 write version 6"
)


def check_table_version(props: dict[str, str]) -> None:
    """We read and write table version 6 with timeline layout 1 only.  Hudi 1.x's version 8+
    moves the timeline to `.hoodie/timeline/` (layout 2) and changes file names and commit
    metadata: a v6 reader would see no commits there, and a v6 writer's commits would be invisible
    to Hudi 1.x.  So refuse before anything is read or written."""
    version, layout = props.get(K_VERSION, "6").strip(), props.get(K_LAYOUT, "1").strip()
    if version != "6" or layout != "1":
        raise HoodieTableError(
            f"The table is at {K_VERSION}={version} ({K_LAYOUT}={layout}); hoodie_sink reads and "
            f"writes table version 6 with timeline layout 1 only. Help: {KEEP_AT_V6}; an upgraded "
            "table comes back to version 6 only by Hudi's own downgrade (hudi-cli 'downgrade table')."
        )


def _num_buckets(props: dict[str, str]) -> int | None:
    raw = props.get(K_NUM_BUCKETS, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise HoodieTableError(f"{K_NUM_BUCKETS}={raw} in hoodie.properties is not a positive bucket count.")
    return int(raw)


def with_properties_set(text: str, props: dict[str, str]) -> str:
    """hoodie.properties text with `props` set: lines of those keys replaced, new keys appended.
    Every other line is kept as it is (re-rendering the whole file would re-escape values that
    Java wrote)."""
    kept = [line for line in text.splitlines() if line_key(line) not in props]
    added = [f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in sorted(props.items())]
    return "\n".join(kept + added) + "\n"


def _timeline_zone(props: dict[str, str]) -> str:
    zone = props.get(K_TIMEZONE, LOCAL_ZONE).strip().upper() or LOCAL_ZONE
    if zone not in TIMELINE_ZONES:
        raise HoodieTableError(
            f"{K_TIMEZONE}={props[K_TIMEZONE]} in hoodie.properties is not a timeline zone "
            f"Apache Hudi knows ({', '.join(TIMELINE_ZONES)})."
        )
    return zone


def read_table_config(storage: Storage) -> TableConfig:
    # Java falls back to the backup (docs/hudi/format.md#table-properties)
    for rel in (PROPERTIES_FILE, BACKUP_FILE):
        try:
            text, _ = read_properties_text(storage, rel)
        except FileNotFoundError:
            continue
        return TableConfig.from_properties(parse_properties(text))
    raise HoodieTableError(
        f"No Hudi table at {storage.base_uri}: {PROPERTIES_FILE} not found. "
        "Help: write to the path first, or check the path."
    )


def write_table_config(storage: Storage, config: TableConfig) -> None:
    storage.write_atomic(PROPERTIES_FILE, render_properties(config.to_properties()).encode("ascii"))
