"""Codegen: an IR and its Mappings -> one Program (compiler.program rows), op after op in IR order.

Invariant: rows are in issue order and every dependency points to an earlier row; the number of rows
follows the number of tiles, never the MACs (a tile covering many array folds is one compute row, and the
compute model prices its folds), and of tiles that differ: a long loop of identical tiles may be folded to a few
of its iterations (compiler.codegen.fold, `Code.folds`). `Code.tiles` says which part of the op each
compute row computes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from compiler.codegen.einsum import einsum_rows
from compiler.codegen.fold import folds_for
from compiler.codegen.nest import Fold
from compiler.codegen.vector import chunk_axis, vector_rows
from compiler.errors import UserError
from compiler.ir import IR, Einsum, IROp, Move
from compiler.mapping import Mapping, op_signature
from compiler.program import MAX_ROWS, empty
from compiler.hardware import Arch


@dataclass(frozen=True)
class Tiles:
    """Per compute row of one op: the tile it computes, as start and extent per loop dim (or output axis)."""

    op: int
    dims: tuple[str, ...]
    rows: np.ndarray            # global row index of each compute
    start: np.ndarray           # (computes, dims)
    extent: np.ndarray          # (computes, dims)
    inputs_sliced: tuple[bool, ...] = ()   # vector ops: which inputs are cut along the chunk axis
    axis: int = -1                          # vector ops: the output axis the chunks cut


@dataclass
class Code:
    program: np.ndarray
    op_rows: np.ndarray                      # op i owns rows op_rows[i]:op_rows[i + 1]
    tiles: list[Tiles | None]                # None for views (nothing moves)
    mappings: dict[str, Mapping] = field(default_factory=dict)   # each op's, as given (views have none)
    folds: dict[str, tuple[Fold, ...]] = field(default_factory=dict)   # ops whose rows keep part of folded loops


OpRows = tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray, np.ndarray, tuple[bool, ...], int]


def _rows(op: IROp, arch: Arch, mapping: Mapping, folds: tuple[Fold, ...] = ()) -> OpRows:
    """(rows with deps local to the op, compute rows, dims, tile start, extent, inputs cut, axis)."""
    unit = unit_index(arch, mapping.unit)
    if isinstance(op, Einsum):
        return *einsum_rows(op, mapping, arch, 0, unit, folds), (), -1
    rows, computes, dims, start, extent, cut = vector_rows(op, arch, mapping, 0, unit, folds)
    return rows, computes, dims, start, extent, cut, chunk_axis(op, mapping)[0]


def unit_index(arch: Arch, name: str) -> int:
    for i, unit in enumerate(arch.compute):
        if unit.name == name:
            return i
    raise UserError(f"{arch.name}: a mapping names compute unit {name!r}, which the arch does not have")


def generate(ir: IR, arch: Arch, mappings: dict[str, Mapping],
             folds: dict[str, tuple[Fold, ...]] | None = None) -> Code:
    """The Program of `ir`; an op named in `folds` keeps only the iterations of its folded loops that its Folds keep
    (compiler.codegen.fold), which `Code.folds` records. Refused before the rows of an op that would take the
    Program past compiler.program.MAX_ROWS are built."""
    folds = folds or {}
    blocks: list[np.ndarray] = []
    tiles: list[Tiles | None] = []
    used: dict[str, Mapping] = {}
    offset = 0
    op_rows = [0]
    # ResNet's repeated blocks compile to the same rows: generate once per (signature, mapping), then copy.
    made: dict[tuple[Any, ...], OpRows] = {}
    for index, op in enumerate(ir.ops):
        if isinstance(op, Move) and op.view:
            blocks.append(empty(0))
            tiles.append(None)
            op_rows.append(offset)
            continue
        mapping = mappings.get(op.name)
        if mapping is None:
            raise UserError(f"{op.kind.value} {op.name!r} has no mapping (compiler.map.map_ir maps every op)")
        kept = tuple(folds.get(op.name, ()))
        key = (op_signature(op), getattr(op, "axes", None), getattr(op, "ops_per_element", None),
               replace(mapping, op=""), kept)
        if key not in made:
            made[key] = _rows(op, arch, mapping, kept)
        rows, computes, dims, start, extent, cut, axis = made[key]
        used[op.name] = mapping
        if index or offset:               # the first op's rows are already its own: a 2 M-row GEMM is not copied
            rows = rows.copy()
            rows["op"] = index
            deps = rows["dep"]
            rows["dep"] = np.where(deps >= 0, deps + offset, -1)
        tile = Tiles(index, dims, computes + offset, start, extent, cut, axis)
        blocks.append(rows)
        tiles.append(tile)
        offset += len(rows)
        op_rows.append(offset)
        if offset > MAX_ROWS:
            raise UserError(f"the Program of these {len(ir.ops)} ops, kept whole (as a --trace keeps it), would hold "
                            f"more than {MAX_ROWS:,} rows by op {op.name!r}; simulate without a trace (op by op) or "
                            f"at --fidelity roofline")
    program = (np.concatenate(blocks) if len(blocks) > 1 else blocks[0]) if blocks else empty(0)
    return Code(program, np.array(op_rows, np.int64), tiles, used, {n: f for n, f in folds.items() if n in used})


__all__ = ["Code", "Fold", "Tiles", "folds_for", "generate"]
