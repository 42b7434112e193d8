"""The memory the numpy reference may fill, checked before each node runs.

A run given a Budget (run_graph(..., budget=)) counts the bytes of every value it computes; before a node runs,
its outputs' bytes as shape inference gives them are added to what is held and compared with the budget, so a
node that would need more is refused, by name, before numpy allocates anything. Values whose shape is known only
at run time (a stand-in shape) are counted as they come. Invariant: what a run holds never passes its budget by
more than one such run-time-shaped value, and its loops make at most MAX_ITERATIONS iterations in all.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node
from compiler.ops.runtime import RUNTIME


@dataclass(frozen=True)
class Budget:
    nbytes: int
    origin: str = ""     # where the figure comes from, for the message: "half the 21 GiB free; ..."


MAX_ITERATIONS = 1 << 16   # loop iterations a run makes in all, nested loops' included


@dataclass
class _Room:
    budget: Budget
    held: int = 0
    source: str = ""     # the file evaluated, named in messages
    iterations: int = 0


_ROOM: ContextVar[_Room | None] = ContextVar("accelsim_eval_room", default=None)


@contextmanager
def limited(budget: Budget | None, source: str = "") -> Iterator[None]:
    """Within it, nodes run under `budget` (None: under the enclosing run's, if any). What a nested run (a Loop
    or If body) holds is released when it ends; what it returns is counted by the node that stores it."""
    if budget is not None:
        token = _ROOM.set(_Room(budget, source=source))
        try:
            yield
        finally:
            _ROOM.reset(token)
        return
    room = _ROOM.get()
    held = room.held if room is not None else 0
    try:
        yield
    finally:
        if room is not None:
            room.held = held


def held_bytes(dtype: DType, elements: int) -> int:
    """Bytes the reference holds for `elements` values of `dtype` (narrow floats in float32)."""
    size = 4 if dtype.is_float and dtype.narrow is not None else np.dtype(dtype.numpy).itemsize
    return elements * size


def before(graph: Graph, node: Node) -> None:
    """Refuse `node` if its outputs, at their inferred shapes, would not fit beside what the run holds."""
    room = _ROOM.get()
    if room is None or node.resolved.get(RUNTIME) is not None:
        return
    needed = sum(held_bytes(graph.tensors[o].dtype, graph.tensors[o].elements) for o in node.outputs if o)
    _check(room, f"{node.where()}: its outputs need", needed)


def charge(node: Node, nbytes: int, what: str = "its outputs hold") -> None:
    """Count `nbytes` just computed for `node`; refuse to go on if the run now holds more than its budget."""
    room = _ROOM.get()
    if room is not None:
        _check(room, f"{node.where()}: {what}", nbytes)
        room.held += nbytes


def where(node: Node) -> str:
    """The node as messages name it, after the file evaluated when a run knows it."""
    room = _ROOM.get()
    return f"{room.source}: {node.where()}" if room is not None and room.source else node.where()


def iterate(node: Node) -> None:
    """Count one iteration of a loop node; refuse to go on past MAX_ITERATIONS in the run (each Loop stops at
    its own limit, but loops nested three deep could run that limit cubed)."""
    room = _ROOM.get()
    if room is not None:
        room.iterations += 1
        if room.iterations > MAX_ITERATIONS:
            raise ModelError(f"{where(node)}: the run's loops have made {MAX_ITERATIONS:,} iterations in "
                             f"all (nested loops multiply), the most eval makes")


def charge_input(name: str, nbytes: int) -> None:
    """Count a runtime input's bytes, as charge does a node's."""
    room = _ROOM.get()
    if room is not None:
        _check(room, f"input {name!r} holds", nbytes)
        room.held += nbytes


def check(what: str, nbytes: int, budget: Budget, held: int = 0) -> None:
    """Refuse `nbytes` about to be made outside a run (inputs read or drawn) if, beside `held`, they pass
    `budget`."""
    _check(_Room(budget, held), what, nbytes)


def exhausted(node: Node, error: MemoryError) -> ModelError:
    """numpy's MemoryError inside `node` as the user's error naming it (exit 2, not an internal error)."""
    room = _ROOM.get()
    budget = f"; the memory budget is {_size(room.budget.nbytes)} ({room.budget.origin})" \
        if room is not None and room.budget.origin else ""
    return ModelError(f"{where(node)}: out of memory while it ran ({error or 'MemoryError'}){budget}")


def _check(room: _Room, what: str, nbytes: int) -> None:
    if room.held + nbytes > room.budget.nbytes:
        what = f"{room.source}: {what}" if room.source else what
        beside = f" beside the {_size(room.held)} held already," if room.held * 100 >= room.budget.nbytes else ","
        origin = f" ({room.budget.origin})" if room.budget.origin else ""
        raise ModelError(f"{what} {_size(nbytes)}{beside} more than the memory budget of "
                         f"{_size(room.budget.nbytes)}{origin}")


def _size(nbytes: int) -> str:
    for unit, scale in (("EiB", 2 ** 60), ("PiB", 2 ** 50), ("TiB", 2 ** 40), ("GiB", 2 ** 30), ("MiB", 2 ** 20),
                        ("KiB", 2 ** 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"
