"""Spark helpers of hoodie_sink: `route`, which puts the Flink writer's routing in front of the
`hoodie` sink (docs/design/routing.md)."""

from __future__ import annotations

from hoodie_sink.datasource.routing import route

__all__ = ["route"]
