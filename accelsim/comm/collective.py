"""The collective API: an op on a system and slice, expanded into transfers, timed by the link engine.

    from accelsim.comm import collective
    r = collective("allreduce", "dgx_a100", devices=16, size="1 GiB")     # r.seconds, r.algbw, r.busbw

The algorithm is chosen as NCCL's tuner does, from an alpha-beta estimate per candidate (the longest chain of
hop latencies plus the busiest channel's time), here read off each candidate's own transfers by the engine's
`bounds`; then the chosen one is simulated. Invariant: a result's time is never below its own estimate's two
terms, and collectives run together (`concurrent`) share channels first come, first served.
"""
from __future__ import annotations

import difflib
import itertools
import math
import os

import numpy as np

from accelsim.arch.system import Slice, System, parse_shape
from accelsim.arch.system_load import load_system
from accelsim.arch.units import UnitError, parse_size
from accelsim.comm.algorithms import SEPARATOR, available, available_at, expand
from accelsim.comm.registry import AUTO, OPS, names, per_level_for, per_level_names, slice_wide_for
from accelsim.comm.network import Network, Transfers, protocols
from accelsim.comm.result import CollectiveResult
from accelsim.comm.rings import Job
from compiler.errors import UserError

DEFAULT_CHUNK = 4 << 20   # NCCL_BUFFSIZE: 4 MiB per ring step in flight
# At equal bandwidth the ring is kept (as NCCL keeps it): halving-doubling on a full-bandwidth switch saves a few
# microseconds of latency on a 1 GiB allreduce, well inside what the model can tell apart.
TIE_MARGIN = 0.01
# Rings are written in at most rings.MAX_STEPS rows, so time does not grow with the device count; past 2^40 devices
# (a thousand times any machine built) hop and step counts would leave int64.
MAX_DEVICES = 1 << 40


def collective(op: str, system: str | os.PathLike | System, devices: int | None = None, size=1 << 20,
               algorithm: str | None = None, *, slice: str | tuple | Slice | None = None,
               chunk=DEFAULT_CHUNK) -> CollectiveResult:
    """Time `op` of `size` bytes (nccl-tests' size; a number or text with units) on `devices` devices or the
    torus `slice` (`4x4x4`) of `system` (a preset name, a YAML path or a System); `algorithm` None chooses."""
    return concurrent(system, [(op, size, algorithm)], devices, slice=slice, chunk=chunk)[0]


def concurrent(system, ops: list[tuple], devices: int | None = None, *, slice=None,
               chunk=DEFAULT_CHUNK) -> list[CollectiveResult]:
    """Several collectives started together on the same devices, e.g. [("allreduce", "1 GiB", None),
    ("allgather", "256 MiB", "ring")]: their transfers share the channels, so each slows the others. They run in
    one protocol, the one whose estimates add up to the least (one collective: its fastest)."""
    base = network(system, devices, slice)
    chunk_bytes = size_bytes(chunk, "chunk")
    asked = [(check_op(op), size_bytes(size, "bytes"), check_algorithm(op, base, algorithm))
             for op, size, algorithm in ops]
    plans, undefined = [], []
    for protocol in protocols(base.system):
        net = Network(base.system, base.slice, protocol)
        chosen = [choose(op, net, nbytes, algorithm, chunk_bytes) for op, nbytes, algorithm in asked]
        if all(chosen):
            total = sum(min(estimates.values()) for _, estimates in chosen)
            # a nan total would win no comparison and so be kept by min(): a protocol without a time is dropped
            (plans if math.isfinite(total) else undefined).append((total, net, chosen))
    if not plans and undefined:
        raise UserError(f"{base.system.name}: no protocol gives a defined time ("
                        f"{', '.join(net.protocol.name for _, net, _ in undefined)} gives inf or nan: check its "
                        f"latency_scale and efficiency)")
    if not plans:
        wanted = ", ".join(f"{op} by {algorithm or 'any usable algorithm'}" for op, _, algorithm in asked)
        runs = "; ".join(f"{p.name} runs {', '.join(_ranked(p.algorithms))}" for p in protocols(base.system))
        raise UserError(f"{base.system.name}: no protocol runs {wanted} ({runs})")
    _, net, chosen = min(plans, key=lambda plan: plan[0])
    tb, spans = Transfers(), []
    for (op, nbytes, _), (name, _) in zip(asked, chosen):
        first = tb.count
        expand(name, Job(net, tb, op, nbytes, chunk_bytes))
        spans.append((first, tb.count))
    from accelsim.engine.links import time_transfers     # numba: loaded when a collective is timed, not declared

    rows = tb.arrays()
    bandwidth, latency = net.arrays()
    start, end = time_transfers(bandwidth, latency, rows["path"], rows["share"], rows["hops"], rows["stages"],
                                rows["nbytes"], rows["dep"], np.zeros(tb.count), rows["piece"], float(chunk_bytes))
    assert (start >= 0).all(), "every transfer ran"
    results = []
    for (op, nbytes, _), (name, estimates), (lo, hi) in zip(asked, chosen, spans):
        seconds = net.protocol.overhead_s + (float(end[lo:hi].max()) if hi > lo else 0.0)
        results.append(CollectiveResult(op, net.system.name, net.slice.devices, nbytes, name, seconds, hi - lo,
                                        _channels(net, rows, lo, hi), estimates, net.protocol.name))
    return results


def sweep(op: str, system, devices: int | None = None, size="1 GiB", algorithm: str | None = None, *,
          smallest="8 B", slice=None, chunk=DEFAULT_CHUNK) -> list[CollectiveResult]:
    """nccl-tests' rows: sizes doubling from `smallest` up to `size` (which ends the list), each timed alone."""
    top, low = size_bytes(size, "bytes"), size_bytes(smallest, "smallest")
    sizes = []
    while low < top:
        sizes.append(low)
        low *= 2
    system = network(system, devices, slice).system
    return [collective(op, system, devices, s, algorithm, slice=slice, chunk=chunk) for s in sizes + [top]]


def network(system, devices: int | None, slice_) -> Network:
    """The representative device of the slice: `devices`, a torus shape (`4x4x4` or a tuple), or a Slice as it is
    (one group of a parallel plan inside its run's slice: accelsim.parallel.groups)."""
    system = check_system(load_system(system))
    if isinstance(slice_, Slice):
        return Network(system, slice_)
    shape = parse_shape(slice_) if isinstance(slice_, str) else (tuple(slice_) if slice_ is not None else None)
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int)):
        raise UserError(f"devices {devices!r}: give a whole number")
    if devices is not None and devices > MAX_DEVICES:
        raise UserError(f"devices {devices}: at most {MAX_DEVICES:,} (2^40) devices are modelled")
    return Network(system, system.fit(devices, shape))


def check_algorithm(op: str, net: Network, algorithm: str | None) -> str | None:
    """`algorithm` if it names a slice-wide one that can run `op` on the slice, or one per level the slice crosses
    (`ring,tree`: innermost first, `auto` where the tuner picks), each able to run there; None (or `auto`): the
    tuner chooses; UserError if not."""
    if algorithm is None or algorithm == AUTO:
        return None
    if not isinstance(algorithm, str) or SEPARATOR not in algorithm:
        return _check_slice_wide(op, net, algorithm)
    chosen = algorithm.split(SEPARATOR)
    levels = [net.system.levels[i].name for i in net.active]
    if len(chosen) != len(levels):
        raise UserError(f"algorithm {algorithm!r} names {len(chosen)} levels; the slice crosses {len(levels)} "
                        f"({', '.join(levels)}): give one algorithm per level, innermost first, or one name")
    for name, level in zip(chosen, net.active):
        if name == AUTO:
            continue
        options = available_at(op, net, level)
        _known(name, "per-level algorithm", (*per_level_names(), AUTO))
        if name not in options:
            raise UserError(f"algorithm {algorithm!r}: {op} has no per-level {name}; per level it has "
                            f"{', '.join(per_level_for(op)) or 'none'}")
        if options[name] is not None:
            raise UserError(f"algorithm {algorithm!r}: {name} cannot run {op} at level "
                            f"{net.system.levels[level].name}: {options[name]}")
    return algorithm


def _check_slice_wide(op: str, net: Network, algorithm: str) -> str:
    _known(algorithm, "algorithm", names())
    options = available(op, net)
    if algorithm not in options:
        raise UserError(f"{op} has no {algorithm} algorithm; it has {', '.join(slice_wide_for(op))}")
    if options[algorithm] is not None:
        usable = [name for name, why in options.items() if why is None]
        raise UserError(f"{algorithm} cannot run {op} on {net.system.name} with {net.slice.devices} devices: "
                        f"{options[algorithm]}; usable: {', '.join(usable)}")
    return algorithm


def _known(name, what: str, known: tuple[str, ...], where: str = "") -> None:
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"{where}unknown {what} {name!r}; {hint}{what}s: {', '.join(known)}")


def check_system(system: System) -> System:
    """`system` if every algorithm its file names (`algorithms:`, each protocol's) is registered."""
    lists = [("algorithms", system.algorithms)] + [(f"protocols[{i}].algorithms", p.algorithms)
                                                    for i, p in enumerate(system.protocols)]
    for key, given in lists:
        for i, name in enumerate(given or ()):
            _known(name, "algorithm", names(), f"{system.source_file}: {key}[{i}]: ")
    return system


def choose(op: str, net: Network, size: int, algorithm: str | None,
           chunk: int) -> tuple[str, dict[str, float]] | None:
    """In `net`'s protocol: the forced algorithm (None if the protocol does not run it), or, among those the
    system's library chooses from (any usable one when none of those can run), the candidate with the smallest
    alpha-beta estimate (an earlier-listed one unless a later one is TIE_MARGIN faster). A per-level list is
    forced where it names an algorithm and chosen so where it says `auto`, among the lists the protocol runs."""
    runs = net.protocol.algorithms or names()
    if algorithm is not None and SEPARATOR in algorithm:
        return _best(op, net, size, chunk, _lists(op, net, algorithm.split(SEPARATOR), runs))
    if algorithm is not None:
        return (algorithm, {algorithm: estimate(op, net, size, algorithm, chunk)}) if algorithm in runs else None
    usable = [name for name, why in available(op, net).items() if why is None and name in runs]
    return _best(op, net, size, chunk, [name for name in usable if name in (net.system.algorithms or names())]
                 or usable)


def _lists(op: str, net: Network, chosen: list[str], runs: tuple[str, ...]) -> list[str]:
    """Every per-level list `chosen` stands for in the protocol: each `auto` level takes each algorithm usable
    there (those the system's library chooses from, if any can), simplest first."""
    per_level = []
    for name, level in zip(chosen, net.active):
        if name != AUTO:
            per_level.append([name] if name in runs else [])
            continue
        usable = [n for n, why in available_at(op, net, level).items() if why is None and n in runs]
        per_level.append([n for n in usable if n in (net.system.algorithms or names())] or usable)
    return [SEPARATOR.join(combination) for combination in itertools.product(*per_level)]


def _best(op: str, net: Network, size: int, chunk: int, usable: list[str]) -> tuple[str, dict[str, float]] | None:
    if not usable:
        return None
    estimates = {name: estimate(op, net, size, name, chunk) for name in usable}
    defined = [name for name in usable if math.isfinite(estimates[name])]
    if not defined:
        return usable[0], estimates                 # no time at all: `concurrent` drops the protocol
    best = defined[0]
    for name in defined[1:]:       # listed simplest first: a later one must win by TIE_MARGIN to be taken
        if estimates[name] < estimates[best] * (1 - TIE_MARGIN):
            best = name
    return best, {name: estimates[name] for name in defined}


def estimate(op: str, net: Network, size: int, algorithm: str, chunk: int) -> float:
    """NCCL-style alpha-beta time: the protocol's overhead + the longest latency chain + the busiest channel's
    seconds."""
    from accelsim.engine.links import bounds

    tb = Transfers()
    expand(algorithm, Job(net, tb, op, size, chunk))
    rows = tb.arrays()
    bandwidth, latency = net.arrays()
    chain, load = bounds(bandwidth, latency, rows["path"], rows["share"], rows["hops"], rows["nbytes"], rows["dep"])
    return net.protocol.overhead_s + chain + float(load.max(initial=0.0))


def _ranked(given: tuple[str, ...] | None) -> list[str]:
    """`given` (None: all) in the registry's order, simplest first."""
    return [name for name in names() if given is None or name in given]


def check_op(op: str) -> str:
    if op not in OPS:
        close = difflib.get_close_matches(str(op), OPS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"unknown collective {op!r}; {hint}collectives: {', '.join(OPS)}")
    return op


def size_bytes(value, name: str) -> int:
    """Bytes from an int or text with units (`1GiB`, `8 B`); a bare number in text is refused as ambiguous."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UserError(f"{name} {value!r}: give bytes with a unit, e.g. 1GiB or 8 B")
    if isinstance(value, str):
        if value.strip().replace(".", "", 1).isdigit():
            raise UserError(f"{name} {value!r} has no unit: write {value.strip()} B, or KiB, MiB, GiB (powers of "
                            f"1024), KB, MB, GB (of 1000)")
        try:
            value = parse_size(value)
        except UnitError as e:
            raise UserError(f"{name}: {e}") from None
    if value <= 0:
        raise UserError(f"{name} {value}: must be greater than zero")
    return value


def _channels(net: Network, rows: dict, lo: int, hi: int) -> dict[str, dict[str, float]]:
    """Bytes each channel of the representative device sent for rows lo:hi, and the seconds it was busy."""
    out = {}
    path, share, nbytes = rows["path"][lo:hi], rows["share"][lo:hi], rows["nbytes"][lo:hi]
    for index, channel in enumerate(net.channels):
        used = path == index
        sent = float((nbytes[:, None] * used).sum())
        if sent:
            busy = float((share * nbytes[:, None] * used).sum()) / channel.bandwidth
            out[channel.name] = {"bytes": sent, "busy_s": busy}
    return out
