"""Co-simulation: one layer of a real model, compiled for a preset that matches rtl/, run tile by tile through the
RTL, the cycle-level model and the closed form the tile-level engine uses, compared value for value and cycle for
cycle.

Invariant: every compute instruction of the layer's Program becomes one GEMM on the core, started on a drained
core, so its cycles are its own; the same GEMMs offered back to back (the cycle-level model, undrained) end where
the closed form streams them (accelsim.price.systolic.steady_and_tail), the least the tile-level engine can
charge the layer's compute (it adds what the array waits on memory); the layer's output is assembled from the
tiles' outputs (k tiles accumulated in int32, as the output SRAM does) and compared with numpy's integer GEMM of
the same operands.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from accelsim.sim import cycle
from accelsim.price.systolic import native_cycles, steady_and_tail
from accelsim.rtl import runner
from accelsim.sim.stimulus import Outcome, Stimulus, assemble, chain, expected_outputs, gemm
from compiler import output
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import Arch
from compiler.hardware.profiles import profile
from compiler.ir import Einsum
from compiler.mapping import gemm_view

RTL_IO_REGISTERS = 3   # docs/rtl.md: activation input, de-skew output and accumulator registers


@dataclass
class Tile:
    """One compute instruction: its GEMM shape and its cycles per model."""
    m: int
    n: int
    k: int
    closed_form: int
    cycle_model: int = 0
    rtl: int = 0


@dataclass
class Report:
    layer: str
    describe: str
    rows: int
    cols: int
    ternary: bool
    sim: str
    tiles: list[Tile] = field(default_factory=list)
    engine_compute_cycles: int = 0
    streamed: tuple[int, int] = (0, 0)   # the tiles back to back, undrained: (cycle-level model, closed form)
    mismatch: str | None = None          # the first difference, named; None when all three agree
    output_shape: tuple = ()

    def text(self, limit: int = 12) -> str:
        lines = [f"layer {self.layer}: {self.describe}",
                 f"core {self.rows}x{self.cols} {'ternary' if self.ternary else 'int8'}, {len(self.tiles)} tiles, "
                 f"output {'x'.join(map(str, self.output_shape))}; RTL under {self.sim}",
                 f"{'tile':>5} {'m':>6} {'n':>5} {'k':>6} {'RTL':>10} {'cycle model':>12} {'closed form':>12}"]
        for i, t in enumerate(self.tiles[:limit]):
            lines.append(f"{i:>5} {t.m:>6} {t.n:>5} {t.k:>6} {t.rtl:>10,} {t.cycle_model:>12,} {t.closed_form:>12,}")
        if len(self.tiles) > limit:
            lines.append(f"{'...':>5} ({len(self.tiles) - limit} more tiles)")
        total = [sum(getattr(t, f) for t in self.tiles) for f in ("rtl", "cycle_model", "closed_form")]
        lines.append(f"{'total':>5} {'':>6} {'':>5} {'':>6} {total[0]:>10,} {total[1]:>12,} {total[2]:>12,}")
        lines.append(f"back to back (the next tile's weights load while one streams, drains overlap): "
                     f"{self.streamed[0]:,} cycles in the cycle model, {self.streamed[1]:,} in the closed form")
        lines.append(f"tile-level engine: {self.engine_compute_cycles:,} compute cycles for the layer")
        lines.append(self.mismatch or "values: every output equal to numpy's in RTL and cycle model; cycles: equal "
                     "in all three, tile by tile")
        return "\n".join(lines)


def cosim(model, layer: str, arch: str | os.PathLike[str] | Arch, sim: str = "icarus", batch: int | None = None,
          seed: int = 0, rtl_vcd: str | None = None, model_vcd: str | None = None, workdir=None,
          **model_options) -> Report:
    """`rtl_vcd`: where to write the RTL simulator's waveform; `model_vcd`: the cycle-level model's. Both on
    accelsim.results.vcd.TIMESCALE with each cycle's edges at the same times (accelsim.sim.stimulus.RESET_CYCLES)."""
    from accelsim.sim.build import build, narrow, simulate
    from accelsim.sim.model import load_arch

    hw = load_arch(arch)
    unit = _matching_unit(hw)
    rows, cols, depth = unit.array.rows, unit.array.cols, unit.array.accumulator_rows
    ternary = profile(hw.kind).matrix_dtype is DType.ternary
    compiled = build(model, hw, batch=batch, mapped=False, **model_options)
    op = _find(compiled.ir, layer)
    alone = narrow(compiled, [op])
    code = alone.program()
    program, (tiles_of_op,) = code.program, code.tiles
    computes, dims, start, extent = tiles_of_op.rows, tiles_of_op.dims, tiles_of_op.start, tiles_of_op.extent
    rng = np.random.default_rng(seed)
    xi, wi = _operand_order(op)
    x = _random(rng, op.inputs[xi].shape, ternary=False)
    w = _random(rng, op.inputs[wi].shape, ternary)
    view = gemm_view(op)
    parts, plans, tiles, steps = [], [], [], []
    for s in range(len(start)):
        if not extent[s].all():
            continue      # a step past a ragged edge (n = 1000 in tiles of 64): no work, 0 cycles in every model
        ranges = {d: np.arange(start[s, i], start[s, i] + extent[s, i]) for i, d in enumerate(dims)}
        a, b = _operands(op, view, x, w, ranges)
        stim, plan = gemm(a, b, rows, cols, depth, ternary)
        parts.append(stim), plans.append(plan), steps.append(ranges)
        row = program[computes[s]]
        closed = int(native_cycles(int(row["m"]), int(row["n"]), int(row["k"]), rows, cols, "ws",
                                   unit.array.weight_buffers, 1, unit.array.io_registers))
        tiles.append(Tile(int(row["m"]), int(row["n"]), int(row["k"]), closed))
    stim = chain(parts, drain=True)
    report = Report(op.name, op.describe(), rows, cols, ternary, sim, tiles, output_shape=op.output.shape)
    (engine,) = simulate(alone).ops
    report.engine_compute_cycles = int(engine.compute_cycles or 0)
    model_out, model_waves = cycle.run(stim, acc_depth=depth, waves=True)
    if model_vcd:
        cycle.write_vcd(model_vcd, stim, model_out, model_waves)
    rtl_run = runner.run_rtl(stim, sim, acc_depth=depth, waves=bool(rtl_vcd), workdir=workdir)
    if rtl_vcd and rtl_run.waves is not None:
        import shutil

        with output.replacing(rtl_vcd, f"--rtl-vcd {rtl_vcd}") as temporary:
            shutil.copyfile(rtl_run.waves, temporary)
    _per_tile_cycles(parts, model_out, tiles, "cycle_model")
    _per_tile_cycles(parts, rtl_run.outcome, tiles, "rtl")
    report.mismatch = _first_mismatch(parts, tiles, stim, depth, model_out, rtl_run.outcome)
    shape = np.array([(t.m, t.n, t.k) for t in tiles], np.int64).reshape(-1, 3).T
    steady, tail = steady_and_tail(*shape, rows, cols, "ws", unit.array.weight_buffers, 1, unit.array.io_registers)
    streamed = int(cycle.run(chain(parts, drain=False), acc_depth=depth, values=False).y_cycle[-1]) + 1 if parts else 0
    report.streamed = (streamed, int(steady.sum() + (tail[-1] if len(tail) else 0)))
    if report.mismatch is None and streamed != report.streamed[1]:
        report.mismatch = (f"MISMATCH back to back: the cycle model takes {streamed:,} cycles, the closed form "
                           f"{report.streamed[1]:,}")
    if report.mismatch is None and report.engine_compute_cycles < streamed:
        report.mismatch = (f"MISMATCH tile-level engine: {report.engine_compute_cycles:,} compute cycles, fewer than "
                           f"the tiles back to back ({streamed:,})")
    if report.mismatch is None:
        report.mismatch = _layer_check(op, view, x, w, steps, plans, parts, rtl_run.outcome)
    return report


def _matching_unit(hw):
    """The matrix unit, if it is the core of rtl/ (WS, double-buffered, its pipeline registers and accumulator)."""
    unit = hw.matrix if hasattr(hw, "matrix") else None
    array = getattr(unit, "array", None)
    problems = []
    if array is None:
        problems.append("it has no systolic array")
    else:
        if "ws" not in [getattr(d, "value", d) for d in unit.dataflows]:
            problems.append("its array is not weight-stationary")
        if array.weight_buffers != 2:
            problems.append(f"weight_buffers is {array.weight_buffers}, the RTL has 2")
        if array.io_registers != RTL_IO_REGISTERS:
            problems.append(f"io_registers is {array.io_registers}, the RTL has {RTL_IO_REGISTERS}")
        if not array.accumulator_rows:
            problems.append("accumulator_rows is not set (the RTL's ACC_DEPTH)")
    if problems:
        raise UserError(f"arch {hw.name!r} does not describe the core in rtl/: {'; '.join(problems)}. "
                        "archs/systolic_8x8.yaml does; copy it and change rows and cols for other shapes")
    return unit


def _find(ir, layer: str) -> Einsum:
    import difflib

    ops = [op for op in ir.ops if layer in (op.name, op.node)]
    einsums = [op for op in ops if isinstance(op, Einsum)]
    if not einsums:
        names = [op.name for op in ir.ops if isinstance(op, Einsum)]
        close = difflib.get_close_matches(layer, names, n=5, cutoff=0.4)
        what = f"{layer!r} is not a convolution or matrix layer" if ops else f"no layer {layer!r}"
        hint = f"close matches: {', '.join(close)}" if close else f"its matrix layers include {', '.join(names[:8])}"
        raise UserError(f"{what} in {ir.name}; {hint}")
    op = einsums[0]
    if len(op.inputs) != 2:
        raise UserError(f"layer {op.name!r} has {len(op.inputs)} operands; co-simulation runs two-operand layers")
    return op


def _random(rng, shape, ternary: bool) -> np.ndarray:
    if ternary:
        return rng.integers(-1, 2, shape).astype(np.int8)
    return rng.integers(-128, 128, shape).astype(np.int8)


def _operands(op: Einsum, view, x: np.ndarray, w: np.ndarray, ranges: dict) -> tuple[np.ndarray, np.ndarray]:
    """The GEMM operands of one tile: a[m, k] gathered from the input (zero where a conv reads padding), b[k, n]
    from the weight; m runs over the b and m dims in loop order, k over the k dims, n over the n dims."""
    m_dims, k_dims, n_dims = view.b + view.m, view.k, view.n
    xi, wi = _operand_order(op)
    a = _gather(x, op.in_axes[xi], m_dims, k_dims, ranges)
    b = _gather(w, op.in_axes[wi], k_dims, n_dims, ranges)
    return a, b


def _operand_order(op: Einsum) -> tuple[int, int]:
    """(activation, weight) operand indices, as compiler.mapping.gemm_view picks the weight."""
    from compiler.ir import Role

    wi = next((i for i, o in enumerate(op.inputs) if o.role == Role.weight), 1)
    return 1 - wi, wi


def _gather(tensor, axes, row_dims, col_dims, ranges) -> np.ndarray:
    rows, n_rows = _grid(row_dims, ranges)
    cols, n_cols = _grid(col_dims, ranges)
    valid = np.ones((n_rows, n_cols), bool)
    index = []
    for axis, size in zip(axes, tensor.shape):
        v = np.full((n_rows, n_cols), axis.offset, np.int64)
        for d, c in axis.terms:
            if d in rows:
                v = v + c * rows[d][:, None]
            elif d in cols:
                v = v + c * cols[d][None, :]
            else:
                v = v + c * int(ranges[d][0])    # a b dim (group, head): one value per tile
        valid &= (v >= 0) & (v < size)
        index.append(np.clip(v, 0, size - 1))
    out = tensor[tuple(index)]
    out[~valid] = 0
    return out


def _grid(dims, ranges):
    if not dims:
        return {}, 1
    mesh = np.meshgrid(*[ranges[d] for d in dims], indexing="ij")
    return {d: g.ravel() for d, g in zip(dims, mesh)}, mesh[0].size


def _per_tile_cycles(parts: list[Stimulus], outcome: Outcome, tiles: list[Tile], field_name: str) -> None:
    w0 = y0 = 0
    for part, tile in zip(parts, tiles):
        y1 = y0 + len(part.x_rows) - 1
        setattr(tile, field_name, int(outcome.y_cycle[y1] - outcome.w_accept[w0] + 1))
        w0 += len(part.w_rows)
        y0 = y1 + 1


def _first_mismatch(parts, tiles, stim, depth, model: Outcome, rtl: Outcome) -> str | None:
    """The first tile where RTL, cycle model, closed form or numpy differ, named with its cycle and value."""
    expected = expected_outputs(stim, depth)
    y0 = 0
    for i, (part, tile) in enumerate(zip(parts, tiles)):
        for j in range(y0, y0 + len(part.x_rows)):
            if rtl.y_cycle[j] != model.y_cycle[j]:
                return (f"MISMATCH tile {i}, output row {j - y0}: RTL cycle {rtl.y_cycle[j]}, cycle model "
                        f"{model.y_cycle[j]}")
            for name, got in (("RTL", rtl.y_data[j]), ("cycle model", model.y_data[j])):
                bad = np.flatnonzero(got != expected[j])
                if bad.size:
                    c = bad[0]
                    return (f"MISMATCH tile {i}, output row {j - y0}, column {c}, cycle {rtl.y_cycle[j]}: "
                            f"{name} {got[c]}, numpy {expected[j][c]}")
        if not tile.rtl == tile.cycle_model == tile.closed_form:
            return (f"MISMATCH tile {i} ({tile.m}x{tile.n}x{tile.k}): RTL {tile.rtl} cycles, cycle model "
                    f"{tile.cycle_model}, closed form {tile.closed_form}")
        y0 += len(part.x_rows)
    return None


def _layer_check(op, view, x, w, steps, plans, parts, rtl: Outcome) -> str | None:
    """The whole layer from the RTL's tiles (k tiles summed in wrapping int32) against numpy's integer GEMM of
    the same operands, one GEMM per group (b dims: a grouped conv's groups, attention's heads)."""
    out = np.zeros(op.output.shape, np.int64)
    y0 = 0
    for ranges, plan, part in zip(steps, plans, parts):
        got = assemble(plan, rtl.y_data[y0:y0 + len(part.x_rows)])
        y0 += len(part.x_rows)
        np.add.at(out, _out_index(op, view, ranges), got.astype(np.int64))
    out = _wrap32(out)
    extents = dict(op.loops)
    for group in np.ndindex(*(extents[d] for d in view.b)):
        full = {d: np.arange(e) for d, e in op.loops} | {d: np.array([g]) for d, g in zip(view.b, group)}
        a, b = _operands(op, view, x, w, full)
        want = _wrap32(a.astype(np.int64) @ b.astype(np.int64))
        got = out[_out_index(op, view, full)]
        bad = np.argwhere(got != want)
        if bad.size:
            r, c = bad[0]
            where = f"group {group}, " if view.b else ""
            return f"MISMATCH layer output at {where}GEMM row {r}, column {c}: RTL {got[r, c]}, numpy {want[r, c]}"
    return None


def _wrap32(values: np.ndarray) -> np.ndarray:
    return ((values + 2**31) % 2**32 - 2**31).astype(np.int32)


def _out_index(op, view, ranges):
    rows, n_rows = _grid(view.b + view.m, ranges)
    cols, n_cols = _grid(view.n, ranges)
    return tuple((rows[d][:, None] if d in rows else cols[d][None, :]) * np.ones((n_rows, n_cols), np.int64)
                 for d in op.out_dims)
