"""Issue 8 item 12: a write reports what it did, in one INFO line and in its commit."""

from __future__ import annotations

import json
import logging
import re

import pyarrow as pa

import hoodie_sink
from hoodie_sink.table.write.write_path import REPORT_KEY
from tests.support.tables import assert_table_matches, hudi_rs_timeline

OPTS = {"hoodie.table.name": "t", "hoodie.datasource.write.recordkey.field": "id"}


def rows(ids, v: float, deleted=None) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids))}
    cols["_hoodie_is_deleted"] = pa.array(deleted or [False] * len(ids))
    return pa.table(cols)


def test_upsert_logs_one_report_line_and_records_it_in_the_commit(tmp_path, caplog):
    path = tmp_path / "t"
    hoodie_sink.write(rows(range(10), 1.0), str(path), OPTS)
    change = rows([0, 1, 2, 3, 20, 21], 2.0, deleted=[False, False, False, True, False, False])
    with caplog.at_level(logging.INFO, logger="hoodie_sink"):
        md = hoodie_sink.write(change, str(path), OPTS)
    lines = [r for r in caplog.records if "rows in" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    msg = lines[0].getMessage()
    commit = hudi_rs_timeline(path).get_completed_commits()[-1]
    pattern = (rf"hoodie: write -> commit {commit.timestamp} on .*: 6 rows in, 2 inserted, 3 updated, 1 deleted, "
               r"\d+ files, \d+\.\d MB, \d+\.\d\ds \(commit \d+\.\d\ds\)")  # fmt: skip
    assert re.fullmatch(pattern, msg), msg
    meta = json.loads(hudi_rs_timeline(path).get_instant_metadata_in_json(commit))
    report = json.loads(meta["extraMetadata"][REPORT_KEY])
    assert report["rowsIn"] == 6 and report["durationMs"] >= 0
    assert json.loads(md.extra_metadata[REPORT_KEY]) == report
    expected = [
        {"id": i, "v": 2.0 if i in (0, 1, 2, 20, 21) else 1.0} for i in [*range(10), 20, 21] if i != 3
    ]
    assert_table_matches(path, [{**r, "_hoodie_is_deleted": False} for r in expected])
