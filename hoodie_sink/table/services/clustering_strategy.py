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
import re
from dataclasses import dataclass

from hoodie_sink.table.format.clustering_plan import ClusteringGroup, ClusteringStrategy, InputSlice
from hoodie_sink.table.format.file_group import BaseFile
from hoodie_sink.table.options.write_config import WriteConfig


@dataclass(frozen=True)
class ClusteringConfig:
    """The clustering options, taken from the write options once (`ClusteringConfig.of`)."""

    strategy: ClusteringStrategy
    small_file_limit: int
    max_group_bytes: int
    max_groups: int
    partitions: tuple[str, ...] = ()
    partition_regex: str | None = None
    inline: bool = False
    max_commits: int = 4  # inline: run after this many commits since the last clustering

    @staticmethod
    def of(cfg: WriteConfig) -> ClusteringConfig:
        strategy = ClusteringStrategy(cfg.clustering_target_file_bytes, cfg.layout_strategy,
                                      tuple(cfg.clustering_sort_columns), cfg.clustering_preserve_metadata)  # fmt: skip
        return ClusteringConfig(strategy, cfg.clustering_small_file_limit, cfg.clustering_max_group_bytes,
                                cfg.clustering_max_groups, tuple(cfg.clustering_partitions),
                                cfg.clustering_partition_regex, cfg.clustering_inline,
                                cfg.clustering_max_commits)  # fmt: skip


def plan_groups(
    base_files: list[BaseFile], pending: set[tuple[str, str]], cfg: ClusteringConfig
) -> list[ClusteringGroup]:
    """The groups of a new plan (empty: nothing worth clustering)."""
    pattern = re.compile(cfg.partition_regex) if cfg.partition_regex else None
    selected = set(cfg.partitions)
    by_part: dict[str, list[BaseFile]] = {}
    for bf in base_files:
        if (bf.partition_path, bf.file_id) in pending or not 0 < bf.size < cfg.small_file_limit:
            continue
        if selected and bf.partition_path not in selected:
            continue
        if pattern is not None and not pattern.fullmatch(bf.partition_path):
            continue
        by_part.setdefault(bf.partition_path, []).append(bf)
    groups: list[ClusteringGroup] = []
    for part in sorted(by_part):
        files = sorted(by_part[part], key=lambda b: (-b.size, b.file_id))
        if len(files) < 2 and not cfg.strategy.sort_columns:
            continue
        current: list[BaseFile] = []
        size = 0
        for bf in files:
            if current and size + bf.size > cfg.max_group_bytes:
                groups.append(_group(current, size, cfg))
                current, size = [], 0
            current.append(bf)
            size += bf.size
        if current and (len(current) > 1 or cfg.strategy.sort_columns):
            groups.append(_group(current, size, cfg))
    groups.sort(key=lambda g: -len(g.slices))  # the groups that remove the most files first
    return groups[: cfg.max_groups]


def _group(files: list[BaseFile], size: int, cfg: ClusteringConfig) -> ClusteringGroup:
    slices = tuple(InputSlice(b.partition_path, b.file_id, b.path, b.size) for b in files)
    return ClusteringGroup(slices, max(1, math.ceil(size / cfg.strategy.target_file_bytes)))
