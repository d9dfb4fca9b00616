"""A thread-safe LRU map bounded by bytes: the per-executor caches of footers, blooms and stats."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class LRUCache:
    """A thread-safe LRU map bounded by the sum of its entries' byte sizes."""

    def __init__(self, budget: int):
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self.budget = budget
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def contains(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if nbytes > self.budget:
                return  # larger than the whole budget: used by the caller, never cached
            self._items[key] = (value, nbytes)
            self._bytes += nbytes
            self._evict()

    def _evict(self) -> None:
        while self._bytes > self.budget and self._items:
            _, (_, nbytes) = self._items.popitem(last=False)
            self._bytes -= nbytes
            self.evictions += 1

    def set_budget(self, budget: int) -> None:
        if budget < 0:
            raise ValueError(f"cache budget must be >= 0 bytes, got {budget}")
        with self._lock:
            self.budget = budget
            self._evict()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
            self.hits = self.misses = self.evictions = 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "hits": self.hits,
                "misses": self.misses,
                "bytes": self._bytes,
                "entries": len(self._items),
                "evictions": self.evictions,
                "budget": self.budget,
            }
