"""Folding long runs of identical tiles: which loops of an op's nest repeat the same rows, and how much of them a
Program needs to keep.

Invariant: a loop folds only where its iterations differ by position alone. Every operand of an Einsum reads its
dim as a plain axis of the loop's extent (x[.., m, ..], never a window's p + r or a block's k // 128), and the
tiles it cuts have one extent (no ragged tile of a loop outside it over the same dim), so within each iteration of
the loops around it, its iterations 0 .. trips - 2 hold full tiles with the same footprints, bytes and shapes, and
only the last one may be ragged. Its first iterations and its last, kept at their places in the op
(compiler.codegen.nest.Nest), are rows the whole Program has; the iterations left out are copies of the kept
interior ones. A batch of 512 is then 4 + 1 of its 512 tiles, whether its loop is the outermost (a forward GEMM)
or runs inside the output tiles (a weight gradient's reduction over the batch): accelsim.sim.fold extrapolates the
rest where the schedule is periodic over them.
"""
from __future__ import annotations

import math

from compiler.codegen.nest import Fold, clipped_segments, loop_nest
from compiler.ir import Einsum, IROp
from compiler.mapping import Mapping

FOLD_STEPS = 16_384     # an op walking fewer steps is generated whole (about 0.1 s of codegen and engine)
HEAD = 4                # leading iterations kept: the first, and interior ones to see the schedule settle
MAX_FOLDS = 2           # loops folded at once: accelsim.sim.fold simulates 3 ** folds Programs to extrapolate


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


def folds_for(op: IROp, mapping: Mapping, head: int = HEAD) -> tuple[Fold, ...]:
    """The loops of `op`'s nest to fold, longest first (the outermost of equals): those that may (foldable), one
    more while the steps kept are still FOLD_STEPS or more (a vocabulary of 50,257 inside a batch of 512), at most
    MAX_FOLDS; none for an op of fewer than FOLD_STEPS steps."""
    loops = loop_nest(mapping)
    trips = [t for _, t, _ in loops]
    candidates = sorted(foldable(op, mapping, head), key=lambda j: (-trips[j], j))
    folds = []
    for j in candidates[:MAX_FOLDS]:
        if math.prod(trips) < FOLD_STEPS:
            break
        folds.append(Fold(j, trips[j], head))
        trips[j] = head + 1 + 2          # as many as accelsim.sim.fold keeps at most, at this head
    return tuple(folds)


def foldable(op: IROp, mapping: Mapping, head: int = HEAD) -> list[int]:
    """Indices of the loops of `mapping`'s nest (compiler.codegen.nest.loop_nest) that may fold: long enough for
    leaving iterations out to save most of the work, over a dim every operand reads plainly, and walking tiles of
    that dim that are all alike: a loop inside another over the same dim folds only where every tile it cuts has
    one extent (a ragged outer tile would leave its inner iterations past the edge empty, unlike the kept ones).
    A vector op's loop cuts its output into chunks along one axis, each computed from its own slices
    (compiler.targeting.slicing): chunks differ by position alone."""
    loops = loop_nest(mapping)
    if not loops:
        return []
    plain = plain_dims(op) if isinstance(op, Einsum) else {loops[0][0]}

    def alike(dim: str, level: int) -> bool:
        return level == 0 or len(clipped_segments(mapping, level - 1)[dim]) == 1

    return [j for j, (dim, trips, level) in enumerate(loops)
            if dim in plain and trips >= 4 * (head + 2) and alike(dim, level)]
