"""The executor's cache of footers and key columns shared by its Python workers (issue 27 item 4,
index/executor_cache.py): worker processes, started together as Spark starts them, look up the
same keys; each base file's footer and key column is read from storage once in all, the answers
equal those without the cache, and a later lookup (the next micro-batch) reads nothing."""

from __future__ import annotations

import multiprocessing
import os
import random

import numpy as np
import pyarrow as pa
import pytest

import hoodie_sink
from hoodie_sink.table.format.fs_view import FileSystemView
from hoodie_sink.table.index import executor_cache as ec
from hoodie_sink.table.index import key_index as ki
from hoodie_sink.table.index.key_index import KeyIndex
from hoodie_sink.table.storage import Storage


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """6000 keys in 2 partitions, in small files."""
    path = str(tmp_path_factory.mktemp("shared") / "t")
    rng = random.Random(5)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(6000)]
    parts = [rng.choice("ab") for _ in keys]
    hoodie_sink.write(pa.table({"id": keys, "p": parts, "v": np.arange(6000)}), path, {
        "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.operation": "bulk_insert", "hoodie.parquet.max.file.size": "65536",
    })  # fmt: skip
    files = FileSystemView.load(Storage(path)).latest_base_files()
    assert len(files) >= 4
    return path, keys, parts, files


def _worker(path, files, keys, parts, root, start, out):
    ki.clear_caches()  # a fresh worker process: nothing in its own caches
    ec.set_executor_cache(ec.ExecutorCache(root))
    start.wait()
    tags = KeyIndex(Storage(path), files, global_index=True).tag(pa.array(keys), pa.array(parts))
    shared = ec.executor_cache()
    out.put((tags.file_id.to_pylist(), shared.reads, shared.hits))


def _run_workers(n, path, files, keys, parts, root):
    ctx = multiprocessing.get_context("fork")
    start, out = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, files, keys, parts, root, start, out)) for _ in range(n)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_workers_of_an_executor_read_each_file_once(table, tmp_path):
    path, keys, parts, files = table
    ec.set_executor_cache(None)
    ki.clear_caches()
    truth = KeyIndex(Storage(path), files, global_index=True).tag(pa.array(keys), pa.array(parts))
    root = str(tmp_path / "blockmgr" / "hoodie-sink-key-cache")
    results = _run_workers(4, path, files, keys, parts, root)
    for fids, _, _ in results:
        assert fids == truth.file_id.to_pylist()
    # every file's footer and key column (each file holds some of the keys): two entries per file
    assert sum(r for _, r, _ in results) == 2 * len(files)
    assert sum(h for _, _, h in results) == 2 * len(files) * 3
    # the next micro-batch's workers read nothing from storage
    again = _run_workers(2, path, files, keys, parts, root)
    assert sum(r for _, r, _ in again) == 0 and all(f == truth.file_id.to_pylist() for f, _, _ in again)


def test_the_cache_stays_within_its_budget(table, tmp_path):
    path, keys, parts, files = table
    root = str(tmp_path / "c")
    cache = ec.ExecutorCache(root, budget=10**9)
    ec.set_executor_cache(cache)
    try:
        ki.clear_caches()
        KeyIndex(Storage(path), files, global_index=True).tag(pa.array(keys), pa.array(parts))
        entries = [e for e in os.listdir(root) if e.endswith((".json", ".arrow"))]
        total = sum(os.path.getsize(os.path.join(root, e)) for e in entries)
        cache.budget = total // 2
        cache.sweep()
        left = sum(
            os.path.getsize(os.path.join(root, e))
            for e in os.listdir(root)
            if e.endswith((".json", ".arrow"))
        )
        assert 0 < left <= total // 2
        # what the sweep removed is read again, correctly
        ki.clear_caches()
        tags = KeyIndex(Storage(path), files, global_index=True).tag(pa.array(keys), pa.array(parts))
        assert tags.file_id.null_count == 0
    finally:
        ec.set_executor_cache(None)
        ki.clear_caches()


def test_outside_a_spark_worker_there_is_no_shared_level(monkeypatch):
    monkeypatch.delenv("SPARK_LOCAL_DIRS", raising=False)
    monkeypatch.setattr(ec, "_CONFIGURED", False)
    assert ec.executor_cache() is None
