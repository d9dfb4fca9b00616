"""hoodie.properties as java.util.Properties writes and reads it: ISO-8859-1 bytes, backslash
escapes, \\uXXXX for everything outside printable ASCII. Before, a non-ASCII value was written as
raw UTF-8: Java read it as Latin-1 (another string, so another table checksum: the table would not
open) and our parser missed Java's escapes, separators and continuation lines."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.properties import (
    PROPERTIES_FILE,
    decode_properties,
    parse_properties,
    read_table_config,
    render_properties,
)
from hoodie_sink.table.storage import Storage

HOSTILE = {
    "hoodie.database.name": "lakehöuse_中文",
    "leading.space": "  two leading, trailing kept  ",
    "separators": "a=b:c#d!e",
    "backslashes": "C:\\path\\to\\x",
    "control": "line1\nline2\ttab\rcr\fff",
    "emoji": "ok 😀 done",
    "latin1": "café",
    "empty": "",
    "key with space=and:colon": "v",
    "#hash.key": "v",
}


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_hostile_values_round_trip_through_ascii_text():
    text = render_properties(HOSTILE)
    assert text.isascii()
    assert parse_properties(text) == HOSTILE


def test_rendered_lines_are_what_javas_properties_store_writes():
    # expected bytes written by hand from java.util.Properties.store(OutputStream) (saveConvert):
    # keys escape space, '=', ':', '#', '!'; values escape a leading space; '\\', \t \n \r \f
    # escaped; other characters outside 0x20-0x7e as \uXXXX of UTF-16 units, upper-case hex
    lines = _body(
        render_properties(
            {
                "hoodie.database.name": "bäd é",
                "lead": " x",
                "back": "a\\b",
                "emoji": "😀",
                "nl": "a\nb",
                "k=:": "v",
            }
        )
    )
    assert lines == [
        "back=a\\\\b",
        "emoji=\\uD83D\\uDE00",
        "hoodie.database.name=b\\u00E4d \\u00E9",
        "k\\=\\:=v",
        "lead=\\ x",
        "nl=a\\nb",
    ]


def test_java_written_text_parses_as_properties_load_reads_it():
    java_text = (
        "#Updated at 2026-11-24T20:35:26Z\n"
        "! another comment style\n"
        "   hoodie.table.name = trips\n"  # leading whitespace, spaces around '='
        "hoodie.database.name:lake\\u00e9\n"  # ':' separator, lower-case hex
        'hoodie.table.create.schema={"a"\\:1,\\\n'  # a continued line
        '    "b"\\:2}\n'
        "spaced value with  trailing  \n"  # whitespace separator; trailing whitespace kept
        "\n"
    )
    assert parse_properties(java_text) == {
        "hoodie.table.name": "trips",
        "hoodie.database.name": "lakeé",
        "hoodie.table.create.schema": '{"a":1,"b":2}',
        "spaced": "value with  trailing  ",
    }


def test_latin1_bytes_are_decoded_as_java_writes_them_and_utf8_as_we_wrote_before():
    assert decode_properties("k=café\n".encode("latin-1")) == ("k=café\n", "latin-1")
    assert decode_properties("k=café\n".encode()) == ("k=café\n", "utf-8")


def test_a_table_with_a_non_ascii_database_keeps_javas_checksum(tmp_path):
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    opts = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.database.name": "läke",
    }
    hoodie_sink.write(rows, str(tmp_path), opts)
    data = Storage(str(tmp_path)).read_bytes(PROPERTIES_FILE)
    assert data.isascii(), "Java reads ISO-8859-1: every other character must be escaped"
    props = parse_properties(data.decode("latin-1"))  # what Java's Properties.load sees
    assert props["hoodie.database.name"] == "läke"
    assert int(props["hoodie.table.checksum"]) == zlib.crc32("läke.t".encode()) & 0xFFFFFFFF
    assert read_table_config(Storage(str(tmp_path))).database == "läke"
    hoodie_sink.write(rows, str(tmp_path), opts)  # and we open it again
    assert hoodie_sink.read(str(tmp_path)).num_rows == 2


@pytest.mark.parametrize("bad", ["k=\\u12", "k=\\uZZZZ"])
def test_a_malformed_unicode_escape_is_an_error_naming_the_value(bad):
    with pytest.raises(Exception, match="uXXXX"):
        parse_properties(bad)
