"""Folding a long run of identical tiles: which loop of an op's nest repeats the same rows, and how much of it a
Program needs to keep.

Invariant: a loop folds only where its iterations differ by position alone. It is the outermost loop of the
nest, and every operand of an Einsum reads its dim as a plain axis of the loop's extent (x[.., m, ..], never a
window's p + r or a block's k // 128), so its iterations 0 .. trips - 2 hold full tiles with the same footprints,
bytes and shapes, and only the last one may be ragged. Its first iterations and its last, kept at their places in
the op (compiler.codegen.nest.Nest), are rows the whole Program has; the iterations left out are copies of the kept
interior ones. A batch of 512 is then 4 + 1 of its 512 tiles: accelsim.sim.fold extrapolates the rest where the
schedule is periodic over them.
"""
from __future__ import annotations

import math

from compiler.codegen.nest import Fold, loop_nest
from compiler.ir import Einsum
from compiler.mapping import Mapping

FOLD_STEPS = 16_384     # an op walking fewer steps is generated whole (about 0.1 s of codegen and engine)
HEAD = 4                # leading iterations kept: the first, and interior ones to see the schedule settle


def plain_dims(op: Einsum) -> set[str]:
    """Loop dims every operand reads as a whole axis of their own: x[.., d, ..] with the loop's extent."""
    extents = dict(op.loops)
    plain = set(extents)
    for operand, axes in zip(op.inputs, op.in_axes):
        for axis, size in zip(axes, operand.shape):
            simple = len(axis.terms) == 1 and axis.terms[0][1] == 1 and not axis.offset and axis.block == 1 \
                and size == extents[axis.terms[0][0]]
            if not simple:
                plain -= {d for d, _ in axis.terms}
    return plain


def fold_for(op, mapping: Mapping, head: int = HEAD) -> Fold | None:
    """The outermost loop of `op`'s nest, if it folds: None for an op of fewer than FOLD_STEPS steps, a loop too
    short for leaving iterations out to save most of the work, or one over a dim an operand does not read plainly.
    Only the outermost: an inner loop's iterations run beside the transfers of the loops around it (the next outer
    tile prefetched while they compute), which fewer of them would no longer hide, so its few kept iterations
    would not run as its many do (a Xeon's fc layer folded along k: 27% fast). A vector op's loop cuts its output
    into chunks along one axis, each computed from its own slices (compiler.target.slicing): chunks differ by
    position alone."""
    loops = loop_nest(mapping)
    if not loops or math.prod(trips for _, trips, _ in loops) < FOLD_STEPS:
        return None
    dim, trips, _ = loops[0]
    plain = plain_dims(op) if isinstance(op, Einsum) else {dim}
    return Fold(0, trips, head) if dim in plain and trips >= 4 * (head + 2) else None
