"""The cyclic garbage collector paused while accelsim builds a model: a command or a planner's task makes millions of
small objects that live to its end (a 100,000-op model's IR, copied by each pass; a search's stage programs) and almost
no cycles, and the collector scanned them over and over for no memory back (0.8 of 10 CPU s of a 100,000-node ONNX
run, 8 of 29 of GPT-2's plans on 16 A100s). One pass over what is left at the end frees any cycles made. A loop
over many models (a sweep's points) runs with it on again: each point's cycles are freed as it goes, not held to
the end, and the workers it forks inherit it on."""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

COLLECT_AFTER = 2_000_000      # objects made (and not freed) since the last collection before the end collects


@contextmanager
def paused(collect_after: int = COLLECT_AFTER) -> Iterator[None]:
    """The block runs with the collector off; after it, one collection if more than `collect_after` objects were made
    and not freed since the last one, and the collector as it was (a collector paused before stays paused)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_count()[0] > collect_after:
            gc.collect()
        if enabled:
            gc.enable()


@contextmanager
def running() -> Iterator[None]:
    """The block runs with the collector on (inside a paused command: a sweep's loop over its points), and the
    collector as it was after."""
    enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not enabled:
            gc.disable()
