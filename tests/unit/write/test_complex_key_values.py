"""Issue 25 item 10: complex record key values that make Hudi's key encoding ambiguous
(docs/hudi/complex-keys.md).  `f1:v1,f2:v2` gives ("x,b:y", "z") and ("x", "y,b:z") the same key,
so one of two different rows silently replaced the other; such values are refused by default,
naming the column, and hoodie.sink.write.allow.ambiguous.complex.keys=true keeps Hudi's encoding."""

from __future__ import annotations

import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.errors import HoodieKeyError
from hoodie_sink.table.format.keygen import KeyGenConfig, KeyGenerator
from hoodie_sink.table.options.write_config import WriteConfig
from tests.support.tables import assert_table_matches, without_rollback_records
from tests.unit.test_options import snapshot

ALLOW = "hoodie.sink.write.allow.ambiguous.complex.keys"
OPTS = {
    "hoodie.table.name": "t",
    "hoodie.datasource.write.recordkey.field": "a,b",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.operation": "upsert",
}
# five different (a, b) tuples; the first two encode to the same key 'a:x,b:y,b:z'
FIVE = [
    {"a": "x,b:y", "b": "z", "p": "p1", "ts": 1, "v": 1},
    {"a": "x", "b": "y,b:z", "p": "p1", "ts": 1, "v": 2},
    {"a": "12:30", "b": "r", "p": "p1", "ts": 1, "v": 3},  # ':' alone is unambiguous
    {"a": None, "b": "s", "p": "p1", "ts": 1, "v": 4},  # a null part: '__null__'
    {"a": "", "b": "s", "p": "p1", "ts": 1, "v": 5},  # an empty part: '__empty__'
]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_five_row_batch_with_colliding_tuples_is_refused_naming_the_column(tmp_path, table_type):
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.datasource.write.table.type": table_type}
    hoodie_sink.write(pa.Table.from_pylist(FIVE[2:]), str(path), opts)
    before = snapshot(path)
    with pytest.raises(HoodieKeyError, match=rf"Record key field 'a' .* 'x,b:y'.*{ALLOW}=true"):
        hoodie_sink.write(pa.Table.from_pylist(FIVE), str(path), opts)
    assert without_rollback_records(snapshot(path)) == without_rollback_records(before)
    assert_table_matches(path, FIVE[2:])  # ours and hudi-rs
    # Hudi's ambiguous encoding on request: the two tuples are one record, as in Java
    hoodie_sink.write(pa.Table.from_pylist(FIVE), str(path), {**opts, ALLOW: "true"})
    assert_table_matches(path, FIVE[1:])  # same key and ts: the later row wins


def test_key_generator_refuses_commas_and_placeholder_spellings_and_keeps_placeholders() -> None:
    cfg = KeyGenConfig("COMPLEX", ("a", "b"), ())
    ok = pa.table({"a": ["12:30", None, "", "x"], "b": ["r", "s", "s", "http://h:1/p"]})
    assert KeyGenerator(cfg).record_keys(ok).to_pylist() == [
        "a:12:30,b:r", "a:__null__,b:s", "a:__empty__,b:s", "a:x,b:http://h:1/p",
    ]  # fmt: skip
    for bad, column in (({"a": ["ok", "x,y"], "b": ["1", "2"]}, "a"),
                        ({"a": ["ok", "ok2"], "b": ["1", "__null__"]}, "b"),
                        ({"a": ["__empty__", "ok"], "b": ["1", "2"]}, "a")):  # fmt: skip
        with pytest.raises(HoodieKeyError, match=f"Record key field '{column}'.*1 of 2 rows"):
            KeyGenerator(cfg).record_keys(pa.table(bad))
    allowed = KeyGenConfig("COMPLEX", ("a", "b"), (), allow_ambiguous_keys=True)
    assert KeyGenerator(allowed).record_keys(pa.table({"a": ["x,b:y", "x"], "b": ["z", "y,b:z"]})).to_pylist() == [
        "a:x,b:y,b:z", "a:x,b:y,b:z",
    ]  # fmt: skip
    # one key field: the bare value, nothing to confuse
    single = KeyGenConfig("COMPLEX", ("a",), ())
    assert KeyGenerator(single).record_keys(pa.table({"a": ["x,y"]})).to_pylist() == ["x,y"]


def test_option_is_registered_and_parsed() -> None:
    assert WriteConfig.from_options({**OPTS, ALLOW: "true"}, path="/tmp/x").allow_ambiguous_complex_keys
    assert not WriteConfig.from_options(OPTS, path="/tmp/x").allow_ambiguous_complex_keys


def test_stored_rows_of_a_virtual_key_table_keep_their_keys(tmp_path):
    """Keys of stored rows (hoodie.populate.meta.fields=false) are derived as Java derives them:
    a later write without the option still reads the table it wrote with it."""
    path = tmp_path / "t"
    opts = {**OPTS, "hoodie.populate.meta.fields": "false"}
    hoodie_sink.write(pa.Table.from_pylist(FIVE[1:]), str(path), {**opts, ALLOW: "true"})
    update = [{**FIVE[2], "ts": 2, "v": 30}]
    hoodie_sink.write(pa.Table.from_pylist(update), str(path), opts)
    assert_table_matches(path, [FIVE[1], update[0], *FIVE[3:]])
