"""How compute cycles are priced, chosen once at the API: accelsim's own compute models (NATIVE), or as another
simulator counts them (ScaleSim: SCALE-Sim v3). A Pricing object travels down; no string does.

Invariant: with ScaleSim every Einsum's compute_cycles equal SCALE-Sim v3's "Total Cycles" - "Stall Cycles" for
the layer (tests/golden/scalesim_v3.csv), whatever tiles the mapper chose.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from accelsim.arch import Arch, ArchError
from accelsim.results.result import OpResult
from accelsim.price import compute, systolic
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import ComputeUnit
from compiler.ir import IR, Einsum
from compiler.mapping import Mapping, gemm_view


class Pricing:
    """accelsim's own compute models (accelsim.price.compute), as they are."""

    name: str | None = None

    def matrix_split(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch,
                     mapping: Mapping | None, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
        """(cycles, tail) of compute rows (m, n, k) of a matrix unit: accelsim.price.compute.matrix_split."""
        return compute.matrix_split(m, n, k, unit, arch, mapping, dtype)

    def finish(self, ops: list[OpResult], ir: IR, arch: Arch) -> tuple[list[OpResult], list[str]]:
        """(results, notes) after the whole model is simulated: as they are."""
        return ops, []


class ScaleSim(Pricing):
    """SCALE-Sim v3's compute cycles: each tile row as SCALE-Sim counts a GEMM, and in the end every Einsum's
    compute_cycles replaced by its whole layer's (SCALE-Sim prices a layer as one GEMM)."""

    name = "scalesim"

    def matrix_split(self, m: np.ndarray, n: np.ndarray, k: np.ndarray, unit: ComputeUnit, arch: Arch,
                     mapping: Mapping | None, dtype: DType) -> tuple[np.ndarray, np.ndarray]:
        if unit.array is None:     # a SIMT or SIMD unit: its own model; `finish` refuses the arch
            return super().matrix_split(m, n, k, unit, arch, mapping, dtype)
        return systolic.scalesim_split(np.asarray(m, np.int64), np.asarray(n, np.int64), np.asarray(k, np.int64),
                                       unit, arch, mapping)

    def finish(self, ops: list[OpResult], ir: IR, arch: Arch) -> tuple[list[OpResult], list[str]]:
        """The op's own waits (stall_cycles) stay; its cycles become compute + stall where the tile engine
        measured stalls, and its utilisation follows them (the same useful MACs over the cycles reported)."""
        by_name = {layer["name"]: layer["compute_cycles"] for layer in layer_cycles(ir, arch)}
        out = []
        for op in ops:
            cycles = by_name.get(op.name)
            if cycles is None:
                out.append(op)
                continue
            stall = op.stall_cycles
            total = cycles + stall if stall is not None else op.cycles
            seconds = total / arch.clock_hz
            out.append(dataclasses.replace(op, compute_cycles=cycles, cycles=total, seconds=seconds,
                                           compute_seconds=cycles / arch.clock_hz,
                                           utilisation=op.utilisation * op.seconds / seconds if seconds else 0.0))
        return out, [f"compute_cycles of matrix ops as {self.name} counts them (whole layers, no overlap)"]


NATIVE = Pricing()
KNOWN = {"scalesim": ScaleSim()}


def pricing(compat: str | Pricing | None) -> Pricing:
    """The Pricing a user names: None for accelsim's own, "scalesim" for SCALE-Sim v3's compute cycles."""
    if compat is None:
        return NATIVE
    if isinstance(compat, Pricing):
        return compat
    if compat not in KNOWN:
        raise UserError(f"unknown compat {compat!r}; known: scalesim (SCALE-Sim v3's compute cycles)")
    return KNOWN[compat]


def compat_layer_cycles(ifmap_h: int, ifmap_w: int, filter_h: int, filter_w: int, channels: int, num_filter: int,
                        stride: int, rows: int, cols: int, dataflow: str) -> int:
    """SCALE-Sim's compute cycles for one topology row (a GEMM row as its M x K ifmap, 1 x K filters).

    Its GEMM view of a conv (topology_utils): M = ofmap pixels, ceil((H - R + stride) / stride) rows times
    ceil((W - S + stride) / stride) columns; N = filters; K = R * S * C, the window."""
    out_h = -(-(ifmap_h - filter_h + stride) // stride)
    out_w = -(-(ifmap_w - filter_w + stride) // stride)
    m, n, k = out_h * out_w, num_filter, filter_h * filter_w * channels
    return int(systolic.compat_cycles(m, n, k, rows, cols, dataflow))


def layer_cycles(ir: IR, arch: Arch) -> list[dict[str, Any]]:
    """Per Einsum (one per SCALE-Sim layer): its GEMM view and SCALE-Sim v3's compute cycles on `arch`'s array,
    whole.

    A batch dim b (groups: SCALE-Sim runs a depthwise "DP" layer as one layer per channel) costs b
    separate GEMMs, each with its own folds and its own -1 (module docstring of accelsim.price.systolic)."""
    unit = arch.matrix
    if unit.array is None:
        raise ArchError(f"{arch.name}: compat 'scalesim' needs a systolic array, and {unit.name!r} has none")
    layers = []
    for op in ir.ops:
        if not isinstance(op, Einsum):
            continue
        view = gemm_view(op)
        b, m, n, k = (view.size(p) for p in "bmnk")
        dataflow = systolic.dataflow_of(unit, None)
        folds, _ = systolic.folds_and_stream(m, n, k, unit.array.rows, unit.array.cols, dataflow)
        one = systolic.scalesim_split(np.array([m]), np.array([n]), np.array([k]), unit, arch, None)[0][0]
        layers.append({"name": op.name, "op": op.op, "b": b, "m": m, "n": n, "k": k, "dataflow": dataflow,
                       "folds": int(folds) * b, "compute_cycles": int(one) * b})
    return layers
