"""Clustering plans: which small file groups to rewrite together (pure; no I/O).

Hudi's size-based plan strategy (RFC-19): per partition, the latest base files below
`hoodie.clustering.plan.strategy.small.file.limit` that are not already under a pending
clustering, largest first, are packed into groups of at most `max.bytes.per.group`; each group
will be written as ceil(size / `target.file.max.bytes`) file groups.  At most `max.num.groups`
groups per plan.  A partition with a single small file is left alone unless the plan sorts
(rewriting one file unsorted gains nothing).

The plan is stored as Hudi's Avro HoodieClusteringPlan inside the requested replacecommit, so
Apache Hudi and hudi-rs read it; `ClusteringGroup`s are its in-memory form.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass

from hoodie_sink.config import WriteConfig
from hoodie_sink.table.file_group import BaseFile

STRATEGY_CLASS = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
PLAN_STRATEGY_CLASS = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"


@dataclass(frozen=True)
class InputSlice:
    partition_path: str
    file_id: str
    path: str  # base file, relative to the table's base path
    size: int


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


def plan_groups(
    base_files: list[BaseFile], pending: set[tuple[str, str]], cfg: WriteConfig
) -> list[ClusteringGroup]:
    """The groups of a new plan (empty: nothing worth clustering)."""
    pattern = re.compile(cfg.clustering_partition_regex) if cfg.clustering_partition_regex else None
    selected = set(cfg.clustering_partitions)
    by_part: dict[str, list[BaseFile]] = {}
    for bf in base_files:
        if (bf.partition_path, bf.file_id) in pending or not 0 < bf.size < cfg.clustering_small_file_limit:
            continue
        if selected and bf.partition_path not in selected:
            continue
        if pattern is not None and not pattern.fullmatch(bf.partition_path):
            continue
        by_part.setdefault(bf.partition_path, []).append(bf)
    groups: list[ClusteringGroup] = []
    for part in sorted(by_part):
        files = sorted(by_part[part], key=lambda b: (-b.size, b.file_id))
        if len(files) < 2 and not cfg.clustering_sort_columns:
            continue
        current: list[BaseFile] = []
        size = 0
        for bf in files:
            if current and size + bf.size > cfg.clustering_max_group_bytes:
                groups.append(_group(current, size, cfg))
                current, size = [], 0
            current.append(bf)
            size += bf.size
        if current and (len(current) > 1 or cfg.clustering_sort_columns):
            groups.append(_group(current, size, cfg))
    groups.sort(key=lambda g: -len(g.slices))  # the groups that remove the most files first
    return groups[: cfg.clustering_max_groups]


def _group(files: list[BaseFile], size: int, cfg: WriteConfig) -> ClusteringGroup:
    slices = tuple(InputSlice(b.partition_path, b.file_id, b.path, b.size) for b in files)
    return ClusteringGroup(slices, max(1, math.ceil(size / cfg.clustering_target_file_bytes)))


# ----------------------------------------------------------------------------------- Avro form


def to_avro_plan(groups: list[ClusteringGroup], cfg: WriteConfig, base_uri: str) -> dict:
    params = {
        "hoodie.clustering.plan.strategy.target.file.max.bytes": str(cfg.clustering_target_file_bytes),
        "hoodie.clustering.plan.strategy.class": PLAN_STRATEGY_CLASS,
        "hoodie.layout.optimize.strategy": cfg.layout_strategy,
    }
    if cfg.clustering_sort_columns:
        params["hoodie.clustering.plan.strategy.sort.columns"] = ",".join(cfg.clustering_sort_columns)
    return {
        "inputGroups": [
            {
                "slices": [
                    {
                        # Java records the base file's full path
                        "dataFilePath": posixpath.join(base_uri.rstrip("/"), s.path),
                        "deltaFilePaths": [],
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
        "preserveHoodieMetadata": cfg.clustering_preserve_metadata,
    }


def from_avro_plan(plan: dict, base_uri: str) -> tuple[list[ClusteringGroup], dict[str, str], bool]:
    """(groups, strategy params, preserveHoodieMetadata) of a stored plan (ours or Java's)."""
    root = base_uri.rstrip("/") + "/"
    groups = []
    for g in plan.get("inputGroups") or []:
        slices = []
        for s in g.get("slices") or []:
            path = s.get("dataFilePath") or ""
            rel = path[len(root):] if path.startswith(root) else posixpath.join(
                s.get("partitionPath") or "", posixpath.basename(path))  # fmt: skip
            slices.append(InputSlice(s.get("partitionPath") or "", s["fileId"], rel, 0))
        if slices:
            groups.append(ClusteringGroup(tuple(slices), int(g.get("numOutputFileGroups") or 1)))
    strategy = plan.get("strategy") or {}
    preserve = plan.get("preserveHoodieMetadata")
    return groups, dict(strategy.get("strategyParams") or {}), True if preserve is None else bool(preserve)
