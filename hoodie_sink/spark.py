"""Spark helpers of hoodie_sink (docs/design/routing.md): `route`, which puts the Flink writer's
routing in front of the `hoodie` sink for a batch write, and `micro_batches`, which does it for
each micro-batch of a stream, exactly once, with `foreachBatch`."""

from __future__ import annotations

from hoodie_sink.datasource.routing import micro_batches, route

__all__ = ["micro_batches", "route"]
