"""ReadConfig: read options parsed once; as.of.instant formats as Apache Hudi parses them."""

from __future__ import annotations

import pytest

from hoodie_sink.errors import HoodieConfigError
from hoodie_sink.table.options.read_config import ReadConfig, parse_as_of_instant


@pytest.mark.parametrize(
    ("value", "instant"),
    [
        ("20261123181825862", "20261123181825862"),
        ("20261123181825", "20261123181825"),  # kept: compares as the start of that second (Hudi)
        ("2026-11-23 18:18:25.862", "20261123181825862"),
        ("2026-11-23 18:18:25", "20261123181825999"),  # Hudi's DEFAULT_MILLIS_EXT
        ("2026-11-23", "20261123000000000"),
    ],
)
def test_as_of_instant_formats(value, instant):
    assert parse_as_of_instant(value) == instant
    assert ReadConfig.from_options({"path": "/t", "as.of.instant": value}).as_of_instant == instant


@pytest.mark.parametrize(
    "value",
    ["yesterday", "2026-11-23T18:18:25", "20261323181825", "2026-02-30", "2026112318", "2026-11-23 18:18"],
)
def test_as_of_instant_that_is_no_instant_is_an_error(value):
    with pytest.raises(HoodieConfigError, match=r"as\.of\.instant.*yyyyMMddHHmmssSSS.*yyyy-MM-dd'"):
        ReadConfig.from_options({"path": "/t", "as.of.instant": value})


def test_query_types():
    assert ReadConfig.from_options({"path": "/t"}).query_type == "snapshot"
    cfg = ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.type": "READ_OPTIMIZED"})
    assert cfg.read_optimized
    with pytest.raises(
        HoodieConfigError, match="query.type'='cdc' is not a Hudi query type.*incremental.format=cdc"
    ):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.type": "cdc"})
    with pytest.raises(HoodieConfigError, match="incremental query needs 'hoodie.datasource.read.begin"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.type": "incremental"})
    cfg = ReadConfig.from_options(
        {"path": "/t", "hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "0",
         "hoodie.datasource.read.incr.fallback.fulltablescan.enable": "true"}
    )  # fmt: skip
    assert cfg.incremental and cfg.begin_instant == "0" and cfg.end_instant is None and cfg.fallback_full_scan
    cfg = ReadConfig.from_options(
        {"path": "/t", "hoodie.datasource.query.type": "incremental",
         "hoodie.datasource.read.begin.instanttime": "0", "hoodie.datasource.read.incr.path.glob": "/p1/*"}
    )  # fmt: skip
    assert cfg.path_glob == "/p1/*"
    with pytest.raises(HoodieConfigError, match="schema.use.end.instanttime' is not supported"):
        ReadConfig.from_options(
            {"path": "/t", "hoodie.datasource.query.type": "incremental",
             "hoodie.datasource.read.begin.instanttime": "0",
             "hoodie.datasource.read.schema.use.end.instanttime": "true"}
        )  # fmt: skip
    cdc = {"path": "/t", "hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": "0",
           "hoodie.datasource.query.incremental.format": "CDC"}  # fmt: skip
    assert ReadConfig.from_options(cdc).cdc
    with pytest.raises(HoodieConfigError, match="incr.path.glob' does not apply to a change feed"):
        ReadConfig.from_options({**cdc, "hoodie.datasource.read.incr.path.glob": "/p1/*"})
    with pytest.raises(HoodieConfigError, match="incremental.format'=cdc applies to incremental queries"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.incremental.format": "cdc"})
    assert ReadConfig.from_options(
        {"path": "/t", "hoodie.datasource.query.incremental.format": "cdc"}, streaming=True
    ).cdc
    with pytest.raises(HoodieConfigError, match="accepted values: snapshot, read_optimized, incremental"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.type": "snapshoot"})
    with pytest.raises(HoodieConfigError, match="begin.instanttime.*incremental queries"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.read.begin.instanttime": "0"})


def test_unknown_hoodie_read_option_is_an_error_with_a_suggestion():
    with pytest.raises(HoodieConfigError, match="Unknown read option 'hoodie.datasource.query.typ'.*Did you"):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.query.typ": "snapshot"})
    with pytest.raises(
        HoodieConfigError, match="'hoodie.datasource.read.as.of.instant'. Did you mean 'as.of.instant'"
    ):
        ReadConfig.from_options({"path": "/t", "hoodie.datasource.read.as.of.instant": "2026-11-23"})


def test_write_options_and_read_tuning_options_are_accepted_on_a_read():
    """One options dict is often reused for df.write and spark.read (and a SQL view's OPTIONS serve both)."""
    cfg = ReadConfig.from_options(
        {
            "path": "/t",
            "hoodie.table.name": "trips",
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.operation": "upsert",
            "hoodie.upsert.shuffle.parallelism": "4",
            "hoodie.metadata.enable": "true",
            "hoodie.clean.automatic": "true",  # refused on a write (not built), harmless on a read
            "hoodie.write.lock.provider": "x",
            "hoodie.enable.data.skipping": "true",
            "primarykey": "id",
        }
    )
    assert cfg.query_type == "snapshot" and "hoodie.table.name" in cfg.ignored


def test_no_path_is_an_error():
    with pytest.raises(HoodieConfigError, match="No table path"):
        ReadConfig.from_options({})


def test_streaming_options():
    start, cap = (
        "hoodie.datasource.streaming.startOffset",
        "hoodie.datasource.streaming.max.instants.per.batch",
    )
    cfg = ReadConfig.from_options({"path": "/t", start: "latest", cap: "3"}, streaming=True)
    assert (cfg.streaming, cfg.start_offset, cfg.max_instants_per_batch) == (True, "latest", 3)
    assert ReadConfig.from_options({"path": "/t"}, streaming=True).start_offset == "earliest"
    with pytest.raises(HoodieConfigError, match="startOffset' applies to streaming reads"):
        ReadConfig.from_options({"path": "/t", start: "latest"})
    with pytest.raises(HoodieConfigError, match="positive number"):
        ReadConfig.from_options({"path": "/t", cap: "-1"}, streaming=True)
    for batch_only in ({"as.of.instant": "20240101000000"}, {"hoodie.datasource.query.type": "read_optimized"},
                       {"hoodie.datasource.read.begin.instanttime": "0"}):  # fmt: skip
        with pytest.raises(HoodieConfigError, match="does not apply to a streaming read"):
            ReadConfig.from_options({"path": "/t", **batch_only}, streaming=True)
