"""The one in-process memo: answers kept per key, at most `size` of them, the least recently used going first, every
memo in one registry so `clear_all()` empties them together (a test that needs a fresh process's state, say).

Invariant: a memo never holds more than its size, and a value is handed back only for the key it was stored under.
Process-local: a forked worker (the sweep's pool, a planner's) starts with its parent's entries and keeps its own
from then on; nothing is shared or locked across processes, as every value is what computing it again would give.
Safe to use from threads (a Dask worker's): two threads may compute the same key at once, and one answer is kept.
"""
from __future__ import annotations

import functools
import weakref
from collections import OrderedDict
from typing import Any, Callable, Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
R = TypeVar("R")

_MISSING = object()
_KEYWORDS = object()                 # between a call's positional and keyword arguments in its key
_REGISTRY: weakref.WeakSet[Memo[Any, Any]] = weakref.WeakSet()


class Memo(Generic[K, V]):
    """Up to `size` values by key, least recently used evicted first; `name` says what it keeps (the registry's
    listing, an error). Reads and writes are single dict operations, so threads may share one."""

    def __init__(self, name: str, size: int) -> None:
        if size < 1:
            raise ValueError(f"memo {name!r}: size {size} must be at least 1")
        self.name = name
        self.size = size
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[K, V] = OrderedDict()
        _REGISTRY.add(self)

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value stored under `key` (now the most recently used), or `default`; counted as a hit or a miss."""
        entries = self._entries
        try:
            value = entries[key]
            entries.move_to_end(key)
        except KeyError:                 # absent, or evicted by another thread between the two lines
            self.misses += 1
            return default
        self.hits += 1
        return value

    def recall(self, key: K, compute: Callable[[], V]) -> V:
        """The value stored under `key`, or `compute()`'s, stored (a value may be None: it is kept as any other)."""
        found = self.get(key, _MISSING)          # type: ignore[arg-type]
        if found is _MISSING:
            found = compute()
            self[key] = found
        return found                             # type: ignore[return-value]

    def __getitem__(self, key: K) -> V:
        value = self._entries[key]
        self._entries.move_to_end(key)
        return value

    def __setitem__(self, key: K, value: V) -> None:
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        while len(entries) > self.size:
            try:
                entries.popitem(last=False)
            except KeyError:             # another thread emptied it first
                break

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def pop(self, key: K, default: V | None = None) -> V | None:
        """The value under `key`, taken out (a value handed on once, not kept twice), or `default`."""
        return self._entries.pop(key, default)

    def clear(self) -> None:
        """Every entry dropped, and the hit and miss counts reset."""
        self._entries.clear()
        self.hits = self.misses = 0

    def __setstate__(self, state: dict[str, Any]) -> None:      # a copy unpickled in another process: registered
        self.__dict__.update(state)
        _REGISTRY.add(self)

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)}/{self.size}, hits={self.hits}, misses={self.misses})"


def memo(size: int, name: str | None = None) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A function's answers kept by its (hashable) arguments in a Memo of `size`, as functools.lru_cache would, but
    in the registry; the Memo is the wrapper's `memo` attribute."""
    def wrap(function: Callable[..., R]) -> Callable[..., R]:
        kept: Memo[tuple[Any, ...], R] = Memo(name or f"{function.__module__}.{function.__qualname__}", size)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> R:
            key = (*args, _KEYWORDS, *sorted(kwargs.items())) if kwargs else args
            return kept.recall(key, lambda: function(*args, **kwargs))

        wrapper.memo = kept              # type: ignore[attr-defined]
        wrapper.cache_clear = kept.clear     # type: ignore[attr-defined]   # as lru_cache's callers know it
        return wrapper
    return wrap


def memos() -> list[Memo[Any, Any]]:
    """Every memo alive in this process, by name."""
    return sorted(_REGISTRY, key=lambda m: m.name)


def clear_all() -> None:
    """Every memo of this process emptied: what follows computes as a fresh process would (the on-disk caches,
    compiler.map.disk and accelsim.sim.cache, are not touched; ACCELSIM_CACHE=off turns those off)."""
    for kept in list(_REGISTRY):
        kept.clear()
