"""Why a mapping on a PE array reaches the utilisation it does (`accelsim map`): a fold can fill nearly every PE
and the array still idle, because each fold streams too few vectors to cover its load, skew and drain, or
because the array waits on memory.

Invariant: utilisation = in-array share x memory share, exactly: the MACs at peak over the estimate's cycles is
(the MACs at peak over the cycles the array computes) x (those cycles over the estimate's). The figures behind
each share come from the models that price them (accelsim.price.systolic's folds and stream, accelsim.price.cost).
"""
from __future__ import annotations

from accelsim.price.compat import NATIVE, Pricing
from accelsim.price.cost import compute_cycles
from accelsim.price.systolic import folds_and_stream
from compiler.dtypes import DType
from compiler.ir import Einsum
from compiler.mapping import Mapping
from compiler.targeting import gemm_sizes, per_instance, units_spread
from compiler.hardware import Arch


def array_use(mapping: Mapping, op: Einsum, arch: Arch, estimate: float, pricing: Pricing = NATIVE) -> list[str]:
    """Comment lines (each starting '# ') that account for the mapping's utilisation on a PE array; none on a unit
    without one, or for an op without work."""
    unit = next(u for u in arch.compute if u.name == mapping.unit)
    array = unit.array
    if array is None or not mapping.dataflow or not mapping.levels or not op.macs or estimate <= 0:
        return []
    dtype = DType(mapping.dtype) if mapping.dtype else unit.dtypes[0]
    at_peak = op.macs / unit.peak_per_second(dtype) * arch.clock_hz       # arch cycles at full rate
    busy = compute_cycles(mapping, op, arch, pricing)
    m, n, k = gemm_sizes(mapping, per_instance(dict(mapping.levels[-1].tile), units_spread(mapping)))
    folds, stream = (int(x) for x in folds_and_stream(m, n, k, array.rows, array.cols, mapping.dataflow.lower()))
    slow = -(-array.pes // dict(unit.per_cycle).get(dtype, array.pes))
    fill = m * n * k / stream / (folds * array.pes) if stream else 0.0
    load, pipeline = array.rows, array.rows - 1 + array.cols - 1 + array.io_registers
    # X in accelsim.price.systolic: WS/IS shift the next stationary tile in, OS drains the finished sums out
    swap = "drain" if mapping.dataflow.lower() == "os" else "load"
    if array.weight_buffers >= 2:      # the next fold's load hides under this one's stream, if the stream is as long
        held = max(stream * slow, load)
        how = f"double-buffered, a fold holds the array max({stream * slow}, {load}) = {held} cycles"
    else:
        held = load + stream * slow + pipeline
        how = f"single-buffered, with {pipeline} of skew and drain a fold holds the array {held} cycles"
    shares = {"the fold's fill": fill, f"the stream against the {swap}": stream / held if held else 0.0,
              "memory waits": min(1.0, busy / estimate)}
    rate = f" at 1/{slow} rate" if slow > 1 else ""
    lines = [f"# estimated utilisation {at_peak / estimate:.0%} = in the array {min(1.0, at_peak / busy):.0%} x not "
             f"waiting on memory {shares['memory waits']:.0%}",
             f"#   {op.macs:,} MACs take {at_peak:,.0f} cycles at peak, {busy:,.0f} computing, {estimate:,.0f} in all",
             f"#   fill: a step's {folds} fold{'s' * (folds != 1)} fill{'s' * (folds == 1)} {fill:.0%} of the PEs",
             f"#   stream: {stream} vector{'s' * (stream != 1)} a fold{rate} against a {swap} of {load} cycles; "
             f"{how}: {shares[f'the stream against the {swap}']:.0%} streaming",
             f"#   memory: the array waits {max(0.0, estimate - busy):,.0f} cycles on transfers it does not hide "
             f"({1 - shares['memory waits']:.0%} of the estimate)"]
    worst, then = sorted(shares, key=shares.get)[:2]
    also = f", then {then} ({shares[then]:.0%})" if shares[then] < 0.9 else ""
    lines.append(f"#   limited most by {worst} ({shares[worst]:.0%} kept){also}")
    return lines
