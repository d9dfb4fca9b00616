"""Timeline files that Java writes as Avro container files of one record (rollback, clean,
savepoint, restore, clustering plans): encoding and decoding of that one record."""

from __future__ import annotations

import io
from typing import Any

import fastavro


def encode_record(schema: Any, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, [record], codec="null")
    return buf.getvalue()


def decode_record(data: bytes) -> dict[str, Any]:
    records = list(fastavro.reader(io.BytesIO(data))) if data else []
    if not records or not isinstance(records[0], dict):
        raise ValueError("no Avro record in the file")
    return records[0]


def decode_with_schema(data: bytes) -> tuple[dict[str, Any], Any]:
    """The record and the writer schema the file carries (to embed it elsewhere under its name)."""
    reader = fastavro.reader(io.BytesIO(data))
    records = list(reader)
    if not records or not isinstance(records[0], dict):
        raise ValueError("no Avro record in the file")
    return records[0], reader.writer_schema
