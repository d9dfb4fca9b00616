"""Spark helpers of hoodie_sink (docs/design/routing.md): `route`, which puts the Flink writer's
routing in front of the `hoodie` sink for a batch write; `micro_batches`, which does it for
each micro-batch of a stream, exactly once, with `foreachBatch`; and `merge_micro_batches`, a
MERGE per micro-batch, exactly once, with `foreachBatch` (docs/design/table-dml.md); and
`debezium_changes`, which flattens Debezium change events read from Kafka as Hudi's DebeziumSource
does, for tables written with `DEBEZIUM_OPTIONS` (docs/hudi/debezium.md)."""

from __future__ import annotations

from hoodie_sink.datasource.debezium import DEBEZIUM_OPTIONS, debezium_changes
from hoodie_sink.datasource.merge_stream import merge_micro_batches
from hoodie_sink.datasource.routing import micro_batches, route

__all__ = ["DEBEZIUM_OPTIONS", "debezium_changes", "merge_micro_batches", "micro_batches", "route"]
