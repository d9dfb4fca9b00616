"""The table's current schema, as the timeline records it."""

from __future__ import annotations

from hoodie_sink.errors import HoodieTableError
from hoodie_sink.table.format.properties import TableConfig, read_table_config
from hoodie_sink.table.format.timeline.timeline import Timeline, commit_metadata
from hoodie_sink.table.storage import Storage


def latest_schema(storage: Storage, timeline: Timeline, table: TableConfig | None = None) -> str | None:
    """The table's Avro schema JSON: latest completed commit carrying one, else the create schema."""
    for inst in reversed(timeline.completed()):
        md = commit_metadata(storage, timeline, inst)
        if md.schema:
            return md.schema
    if table is None:
        try:
            table = read_table_config(storage)
        except HoodieTableError:
            return None
    return table.create_schema
