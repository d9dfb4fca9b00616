"""A Hive metastore client: databases, tables and partitions over the metastore's Thrift API.

The Thrift classes are the ones Apache Iceberg's Python client (pyiceberg, extra `hive`) generates
from Hive's IDL and ships as the top-level packages `hive_metastore` and `fb303`, on the `thrift`
runtime; why those and not another client: docs/hudi/hive-sync.md#the-python-client.  This module
keeps them behind a small typed surface (the `Hive*` records below), so the sync code never builds
Thrift structs itself.

The calls are the ones both Hive 3.1 and Hive 4 metastores answer (`get_table_req`, not the
`get_table` that Hive 4 dropped).  Every failure is a `HoodieCatalogError` naming the metastore's
URI and the call; a transport failure closes the connection, and the next call reconnects.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import urlparse

from hoodie_sink.errors import HoodieCatalogError

try:  # the `hive` extra (pyproject.toml): only a catalog sync needs it, and says so when it is missing
    from hive_metastore import ttypes
    from hive_metastore.ThriftHiveMetastore import Client
    from thrift.protocol import TBinaryProtocol
    from thrift.Thrift import TException
    from thrift.transport import TSocket, TTransport

    _MISSING: str | None = None
except ImportError as e:  # pragma: no cover - the test extras include it
    _MISSING = str(e)

T = TypeVar("T")

EXTERNAL_TABLE = "EXTERNAL_TABLE"


@dataclass(frozen=True)
class HiveColumn:
    """A column as the metastore keeps it: a name and a Hive type name (`bigint`, `struct<...>`)."""

    name: str
    type: str
    comment: str | None = None


@dataclass(frozen=True)
class HiveStorage:
    """How engines read the files: input and output format classes, serde and its properties."""

    input_format: str
    output_format: str
    serde: str
    serde_properties: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HiveDatabase:
    name: str
    location: str | None = None
    description: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HiveTable:
    """A table's definition; `parameters` are its table properties (TBLPROPERTIES)."""

    database: str
    name: str
    columns: tuple[HiveColumn, ...]
    partition_columns: tuple[HiveColumn, ...]
    location: str
    storage: HiveStorage
    parameters: dict[str, str] = field(default_factory=dict)
    table_type: str = EXTERNAL_TABLE
    owner: str | None = None


@dataclass(frozen=True)
class HivePartition:
    """One partition: its values in the order of the table's partition columns, and its folder."""

    values: tuple[str, ...]
    location: str
    parameters: dict[str, str] = field(default_factory=dict)


def parse_uris(uris: str) -> list[tuple[str, int]]:
    """`thrift://host:port[,thrift://host:port...]` (as hive.metastore.uris) -> [(host, port)]."""
    out = []
    for uri in (u.strip() for u in uris.split(",")):
        if not uri:
            continue
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname:
            raise HoodieCatalogError(
                f"Hive metastore URI {uri!r} is not thrift://host:port. "
                "Help: set hoodie.datasource.hive_sync.metastore.uris to e.g. thrift://localhost:9083"
            )
        out.append((parsed.hostname, parsed.port or 9083))
    if not out:
        raise HoodieCatalogError("no Hive metastore URI given (hoodie.datasource.hive_sync.metastore.uris)")
    return out


class HiveMetastoreClient:
    """One connection to a Hive metastore (the first of `uris` that answers), opened on first use.

    Use as a context manager, or call `close()`.  Not thread-safe: one client per thread.
    """

    # Hive's own client waits 600 s for an answer (metastore.client.socket.timeout): adding a
    # thousand partitions to a busy metastore can take minutes
    def __init__(self, uris: str, timeout_s: float = 600.0) -> None:
        self.uris = uris
        self._endpoints = parse_uris(uris)
        self._timeout_ms = int(timeout_s * 1000)
        self._transport: TTransport.TTransportBase | None = None
        self._client: Client | None = None

    # -- connection -------------------------------------------------------------------------

    def connect(self) -> None:
        """Open the connection, trying each URI in turn; a no-op when open."""
        if self._client is not None:
            return
        if _MISSING is not None:
            raise HoodieCatalogError(
                f"Hive metastore {self.uris}: the metastore client is not installed ({_MISSING}). "
                "Help: pip install 'hoodie_sink[hive]'"
            )
        failures = []
        for host, port in self._endpoints:
            socket = TSocket.TSocket(host, port)
            socket.setTimeout(self._timeout_ms)
            transport = TTransport.TBufferedTransport(socket)
            try:
                transport.open()
            except TException as e:
                failures.append(f"thrift://{host}:{port}: {e}")
                continue
            self._transport = transport
            self._client = Client(TBinaryProtocol.TBinaryProtocol(transport))
            return
        raise HoodieCatalogError(
            f"Hive metastore {self.uris}: cannot connect ({'; '.join(failures)}). "
            "Help: check that the metastore runs and hoodie.datasource.hive_sync.metastore.uris points at it"
        )

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._transport = None
        self._client = None

    def __enter__(self) -> HiveMetastoreClient:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _call(self, what: str, fn: Callable[[Client], T]) -> T:
        self.connect()
        assert self._client is not None
        try:
            return fn(self._client)
        except TTransport.TTransportException as e:
            self.close()
            raise HoodieCatalogError(
                f"Hive metastore {self.uris}: {what} failed: connection lost ({e})"
            ) from e
        except TException as e:
            message = getattr(e, "message", None) or str(e)
            raise HoodieCatalogError(
                f"Hive metastore {self.uris}: {what} refused: {type(e).__name__}: {message}"
            ) from e

    def _call_or_none(self, what: str, fn: Callable[[Client], T]) -> T | None:
        """`fn`'s answer, or None when the metastore says the object does not exist."""
        try:
            return self._call(what, fn)
        except HoodieCatalogError as e:
            if isinstance(e.__cause__, ttypes.NoSuchObjectException):
                return None
            raise

    # -- databases --------------------------------------------------------------------------

    def list_databases(self) -> list[str]:
        return list(self._call("list databases", lambda c: c.get_all_databases()))

    def get_database(self, name: str) -> HiveDatabase | None:
        db = self._call_or_none(f"get database {name}", lambda c: c.get_database(name))
        if db is None:
            return None
        return HiveDatabase(db.name, db.locationUri, db.description, dict(db.parameters or {}))

    def create_database(self, database: HiveDatabase) -> None:
        db = ttypes.Database(
            name=database.name,
            description=database.description,
            locationUri=database.location,
            parameters=dict(database.parameters),
        )
        self._call(f"create database {database.name}", lambda c: c.create_database(db))

    # -- tables -----------------------------------------------------------------------------

    def list_tables(self, database: str) -> list[str]:
        return list(self._call(f"list tables of {database}", lambda c: c.get_all_tables(database)))

    def get_table(self, database: str, name: str) -> HiveTable | None:
        raw = self._get_raw_table(database, name)
        return None if raw is None else _table_from_thrift(raw)

    def create_table(self, table: HiveTable) -> None:
        raw = _table_to_thrift(table, ttypes.Table())
        self._call(f"create table {table.database}.{table.name}", lambda c: c.create_table(raw))

    def alter_table(self, table: HiveTable, cascade: bool = False) -> None:
        """Replace the table's definition (columns, storage, properties) with `table`'s.

        `cascade`: the partitions take the new columns too (Hive's ALTER TABLE ... CASCADE), as a
        schema change needs when the partitions keep their own column lists."""
        what = f"alter table {table.database}.{table.name}"
        raw = self._get_raw_table(table.database, table.name)
        if raw is None:
            raise HoodieCatalogError(f"Hive metastore {self.uris}: {what}: no such table")
        new = _table_to_thrift(table, raw)
        context = ttypes.EnvironmentContext({"CASCADE": "TRUE" if cascade else "FALSE"})
        self._call(
            what,
            lambda c: c.alter_table_with_environment_context(table.database, table.name, new, context),
        )

    def drop_table(self, database: str, name: str, delete_data: bool = False) -> None:
        self._call(f"drop table {database}.{name}", lambda c: c.drop_table(database, name, delete_data))

    def _get_raw_table(self, database: str, name: str) -> Any:
        request = ttypes.GetTableRequest(dbName=database, tblName=name)
        answer = self._call_or_none(f"get table {database}.{name}", lambda c: c.get_table_req(request))
        return None if answer is None else answer.table

    # -- partitions -------------------------------------------------------------------------

    def list_partitions(self, database: str, table: str) -> list[HivePartition]:
        raw = self._call(
            f"list partitions of {database}.{table}", lambda c: c.get_partitions(database, table, -1)
        )
        return [
            HivePartition(tuple(p.values), p.sd.location, _user_parameters(p.parameters))
            for p in sorted(raw, key=lambda p: list(p.values))
        ]

    def partitions_by_names(self, database: str, table: str, names: Sequence[str]) -> list[HivePartition]:
        """The partitions of these names (`partition_name`), those that exist: a commit's few
        partitions without fetching every partition of the table."""
        if not names:
            return []
        raw = self._call(
            f"get {len(names)} partitions of {database}.{table}",
            lambda c: c.get_partitions_by_names(database, table, list(names)),
        )
        return [HivePartition(tuple(p.values), p.sd.location, _user_parameters(p.parameters)) for p in raw]

    def add_partitions(self, table: HiveTable, partitions: Sequence[HivePartition]) -> int:
        """Add `partitions` to `table` (those already there are left as they are); how many were new.
        Each partition takes the table's columns and storage, at its own location."""
        if not partitions:
            return 0
        raw = [_partition_to_thrift(table, p) for p in partitions]
        request = ttypes.AddPartitionsRequest(
            dbName=table.database, tblName=table.name, parts=raw, ifNotExists=True, needResult=True
        )
        what = f"add {len(raw)} partitions to {table.database}.{table.name}"
        answer = self._call(what, lambda c: c.add_partitions_req(request))
        return len(answer.partitions or [])

    def alter_partitions(self, table: HiveTable, partitions: Sequence[HivePartition]) -> None:
        """Point existing partitions at their (new) locations, with the table's columns and storage."""
        if not partitions:
            return
        raw = [_partition_to_thrift(table, p) for p in partitions]
        what = f"alter {len(raw)} partitions of {table.database}.{table.name}"
        self._call(what, lambda c: c.alter_partitions(table.database, table.name, raw))

    def drop_partition(
        self, database: str, table: str, values: Sequence[str], delete_data: bool = False
    ) -> bool:
        """Drop one partition (its files stay unless `delete_data`); False when it was not there."""
        what = f"drop partition {list(values)} of {database}.{table}"
        dropped = self._call_or_none(
            what, lambda c: c.drop_partition(database, table, list(values), delete_data)
        )
        return bool(dropped)


# Hive's FileUtils.escapePathName: the characters a partition name (`key=value/...`) escapes as %XX
_ESCAPED = frozenset([*map(chr, range(1, 32)), '"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[",
                      "]", "^"])  # fmt: skip
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_name(keys: Sequence[str], values: Sequence[str]) -> str:
    """The metastore's name of a partition (`city=sf/day=2026-01-01`), as Hive builds it."""

    def escape(text: str) -> str:
        if not text:
            return HIVE_DEFAULT_PARTITION
        return "".join(f"%{ord(ch):02X}" if ch in _ESCAPED else ch for ch in text)

    return "/".join(f"{escape(k.lower())}={escape(v)}" for k, v in zip(keys, values, strict=True))


# -- between the records above and Hive's Thrift structs ---------------------------------------

# What the metastore adds to a table's or partition's parameters on its own.
_SERVER_PARAMETERS = frozenset({"transient_lastDdlTime", "numFiles", "totalSize", "COLUMN_STATS_ACCURATE"})


def _user_parameters(parameters: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (parameters or {}).items() if k not in _SERVER_PARAMETERS}


def _columns_to_thrift(columns: Sequence[HiveColumn]) -> list[Any]:
    return [ttypes.FieldSchema(c.name, c.type, c.comment) for c in columns]


def _columns_from_thrift(columns: Sequence[Any] | None) -> tuple[HiveColumn, ...]:
    return tuple(HiveColumn(c.name, c.type, c.comment) for c in columns or [])


def _storage_descriptor(
    columns: Sequence[HiveColumn], location: str, storage: HiveStorage, base: Any = None
) -> Any:
    sd = base if base is not None else ttypes.StorageDescriptor()
    sd.cols = _columns_to_thrift(columns)
    sd.location = location
    sd.inputFormat = storage.input_format
    sd.outputFormat = storage.output_format
    serde = sd.serdeInfo if sd.serdeInfo is not None else ttypes.SerDeInfo()
    serde.serializationLib = storage.serde
    serde.parameters = dict(storage.serde_properties)
    sd.serdeInfo = serde
    sd.compressed = bool(sd.compressed)
    sd.numBuckets = -1 if sd.numBuckets is None else sd.numBuckets
    sd.bucketCols = sd.bucketCols or []
    sd.sortCols = sd.sortCols or []
    sd.parameters = sd.parameters or {}
    return sd


def _table_to_thrift(table: HiveTable, raw: Any) -> Any:
    """`table` written over `raw` (a fresh struct, or the metastore's own when altering, whose
    other fields, such as its creation time, stay as they are)."""
    raw.dbName = table.database
    raw.tableName = table.name
    raw.owner = table.owner or raw.owner or getpass.getuser()
    raw.tableType = table.table_type
    raw.partitionKeys = _columns_to_thrift(table.partition_columns)
    raw.sd = _storage_descriptor(table.columns, table.location, table.storage, raw.sd)
    kept = {k: v for k, v in (raw.parameters or {}).items() if k in _SERVER_PARAMETERS}
    raw.parameters = {**kept, **table.parameters}
    return raw


def _table_from_thrift(raw: Any) -> HiveTable:
    sd = raw.sd
    serde = sd.serdeInfo
    return HiveTable(
        database=raw.dbName,
        name=raw.tableName,
        columns=_columns_from_thrift(sd.cols),
        partition_columns=_columns_from_thrift(raw.partitionKeys),
        location=sd.location,
        storage=HiveStorage(
            input_format=sd.inputFormat,
            output_format=sd.outputFormat,
            serde=serde.serializationLib if serde else "",
            serde_properties=dict((serde.parameters if serde else None) or {}),
        ),
        parameters=_user_parameters(raw.parameters),
        table_type=raw.tableType,
        owner=raw.owner,
    )


def _partition_to_thrift(table: HiveTable, partition: HivePartition) -> Any:
    if len(partition.values) != len(table.partition_columns):
        raise HoodieCatalogError(
            f"partition {list(partition.values)} of {table.database}.{table.name} has "
            f"{len(partition.values)} values; the table has {len(table.partition_columns)} partition columns"
        )
    return ttypes.Partition(
        values=list(partition.values),
        dbName=table.database,
        tableName=table.name,
        sd=_storage_descriptor(table.columns, partition.location, table.storage),
        parameters=dict(partition.parameters),
    )
