"""Clustering plans as stored: Hudi's Avro HoodieClusteringPlan inside `<t>.replacecommit.requested`.

`ClusteringGroup`s are the plan's in-memory form; the plan strategy (services/clustering_strategy.py)
makes them and clustering (services/clustering.py) executes them.  The pending plans of the
timeline say which file groups a clustering will replace: writers must not update those.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from hoodie_sink.table.format.replace_metadata import decode_requested_replace
from hoodie_sink.table.format.timeline.instant import REPLACE_COMMIT, REQUESTED, Instant
from hoodie_sink.table.format.timeline.timeline import Timeline, TimelineStore
from hoodie_sink.table.storage import Storage

CLUSTER = "CLUSTER"  # operationType of a clustering's requested replace metadata
STRATEGY_CLASS = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
PLAN_STRATEGY_CLASS = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"


@dataclass(frozen=True)
class InputSlice:
    partition_path: str
    file_id: str
    path: str  # base file, relative to the table's base path ("" for a log-only slice)
    size: int
    log_paths: tuple[str, ...] = ()  # merge-on-read: the slice's log files (relative), oldest first


@dataclass(frozen=True)
class ClusteringGroup:
    slices: tuple[InputSlice, ...]
    num_output_file_groups: int

    @property
    def partition_path(self) -> str:
        return self.slices[0].partition_path

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)


@dataclass(frozen=True)
class ClusteringStrategy:
    """What a plan records of how its groups are to be rewritten (the strategy's params)."""

    target_file_bytes: int
    layout: str  # hoodie.layout.optimize.strategy
    sort_columns: tuple[str, ...] = ()
    preserve_metadata: bool = True


# ----------------------------------------------------------------------------------- Avro form


def to_avro_plan(
    groups: list[ClusteringGroup], strategy: ClusteringStrategy, base_uri: str
) -> dict[str, Any]:
    params = {
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(strategy.target_file_bytes),
        "hoodie.clustering.plan.strategy.class": PLAN_STRATEGY_CLASS,
        "hoodie.layout.optimize.strategy": strategy.layout,
    }
    if strategy.sort_columns:
        params["hoodie.clustering.plan.strategy.sort.columns"] = ",".join(strategy.sort_columns)
    return {
        "inputGroups": [
            {
                "slices": [
                    {
                        # Java records the base file's full path
                        "dataFilePath": posixpath.join(base_uri.rstrip("/"), s.path) if s.path else "",
                        "deltaFilePaths": [posixpath.join(base_uri.rstrip("/"), p) for p in s.log_paths],
                        "fileId": s.file_id,
                        "partitionPath": s.partition_path,
                        "bootstrapFilePath": "",
                        "version": 1,
                    }
                    for s in g.slices
                ],
                "metrics": {"TOTAL_FILE_SIZE": float(g.size), "NUM_FILES": float(len(g.slices))},
                "numOutputFileGroups": g.num_output_file_groups,
                "extraMetadata": None,
                "version": 1,
            }
            for g in groups
        ],
        "strategy": {"strategyClassName": STRATEGY_CLASS, "strategyParams": params, "version": 1},
        "extraMetadata": None,
        "version": 1,
        "preserveHoodieMetadata": strategy.preserve_metadata,
    }


def from_avro_plan(plan: dict[str, Any], base_uri: str) -> tuple[list[ClusteringGroup], dict[str, str], bool]:
    """(groups, strategy params, preserveHoodieMetadata) of a stored plan (ours or Java's)."""
    root = base_uri.rstrip("/") + "/"
    groups = []
    for g in plan.get("inputGroups") or []:
        slices = []
        for s in g.get("slices") or []:
            part = s.get("partitionPath") or ""

            def relative(path: str, part: str = part) -> str:
                if path.startswith(root):
                    return path[len(root) :]
                return posixpath.join(part, posixpath.basename(path))

            path = s.get("dataFilePath") or ""
            logs = tuple(relative(p) for p in s.get("deltaFilePaths") or [])
            slices.append(InputSlice(part, s["fileId"], relative(path) if path else "", 0, logs))
        if slices:
            groups.append(ClusteringGroup(tuple(slices), int(g.get("numOutputFileGroups") or 1)))
    strategy = plan.get("strategy") or {}
    preserve = plan.get("preserveHoodieMetadata")
    return groups, dict(strategy.get("strategyParams") or {}), True if preserve is None else bool(preserve)


# ------------------------------------------------------------------------- pending clustering


def clustering_plan(storage: Storage, instant: Instant) -> dict[str, Any] | None:
    """The Avro clustering plan of a replacecommit, or None if it is not a clustering."""
    try:
        raw = storage.read_bytes(TimelineStore(storage).path(instant.with_state(REQUESTED)))
    except (FileNotFoundError, OSError):
        return None
    md = decode_requested_replace(raw)
    if (md.get("operationType") or "").upper() != CLUSTER:
        return None
    return md.get("clusteringPlan") or {}


def pending_clusterings(storage: Storage, timeline: Timeline) -> dict[str, list[ClusteringGroup]]:
    """instant -> plan groups of every clustering not completed yet."""
    out = {}
    for inst in timeline.pending((REPLACE_COMMIT,)):
        plan = clustering_plan(storage, inst)
        if plan is not None:
            out[inst.timestamp] = from_avro_plan(plan, storage.base_uri)[0]
    return out


def file_groups_under_clustering(storage: Storage, timeline: Timeline) -> dict[tuple[str, str], str]:
    """(partition, file id) -> instant of the pending clustering that will replace it."""
    return {
        (s.partition_path, s.file_id): ts
        for ts, groups in pending_clusterings(storage, timeline).items()
        for g in groups
        for s in g.slices
    }


def is_clustering(storage: Storage, instant: Instant) -> bool:
    return (
        instant.action == REPLACE_COMMIT
        and clustering_plan(storage, instant.with_state(REQUESTED)) is not None
    )
