"""Einsums -> one Triton implicit-GEMM kernel: plain GEMMs, batched GEMMs (attention heads), convolutions.

Invariant: the kernel walks exactly the blocks accelsim.price.simt prices for the op's SIMT mapping: one
program per thread block of TILE_M x TILE_N outputs (the m dims flattened: a conv's n*p*q), K in steps of
TILE_K (the k dims flattened: c*r*s), batch dims (heads, conv groups) outermost in the grid. Operands are read
through the Einsum's own affine axes, so a conv's padding is a mask and never a copy. Triton needs power-of-two
blocks, so a tile of 50 rows runs in a BLOCK_M of 64 with rows 50..63 masked off.
"""
from __future__ import annotations

import math

from compiler.codegen.triton.kernel import (PRELUDE, TL_TYPES, DEFAULT_WARP, NoTritonKernel, TritonKernel, pow2,
                                            torch_names)
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.ir import Axis, Einsum, IROp
from compiler.mapping import Mapping, gemm_view
from compiler.targeting import per_instance, units_spread
from compiler.hardware import Arch, ComputeUnit

# As accelsim.price.simt prices a block: 64 accumulators per thread, whole warps, at most 1,024 threads.
# Without an arch: 32-thread warps and Triton's default of 3 stages.
OUTPUTS_PER_THREAD = 64
MAX_THREADS_PER_BLOCK = 1024
DEFAULT_STAGES = 3
MIN_BLOCK = 16        # tl.dot's smallest M, N and K on GPUs for 16- and 32-bit operands
MIN_BLOCK_K_8BIT = 32  # and K for 8-bit ones (fp8 and int8 MMAs are k32)
# Storage dtype -> the float types that hold every one of its values (a unit that prices it at another rate
# gets the operands widened to one of these; e4m3 fits fp16 and bf16 exactly, fp16 and bf16 fit fp32).
EXACT_IN = {DType.fp8: (DType.fp16, DType.bf16, DType.fp32, DType.tf32), DType.fp16: (DType.fp32, DType.tf32),
            DType.bf16: (DType.fp32, DType.tf32)}
ROLES = {"x": ("m", "k"), "w": ("k", "n"), "y": ("m", "n")}   # each operand's (row group, column group)
RANGES = {"m": "rm", "n": "rn", "k": "rk"}                     # the tl.arange each group's offsets start from


def triton_gemm(op: Einsum, mapping: Mapping, arch: Arch | None = None) -> TritonKernel:
    """The Triton kernel of Einsum `op` (a GEMM, a batched GEMM or a convolution) as `mapping`, a SIMT mapping
    of it, blocks it. With `arch`, warps and stages follow the arch's unit as accelsim.price.simt prices them;
    without, 32-thread warps and 3 stages. UserError for non-SIMT mappings and operands no MMA takes."""
    _check(op, mapping)
    unit = next((u for u in arch.compute if u.name == mapping.unit), None) if arch is not None else None
    if arch is not None and (unit is None or unit.limits is None):
        raise UserError(f"triton_gemm: unit {mapping.unit!r} of arch {arch.name!r} is not a SIMT unit")
    view, extents = gemm_view(op), dict(op.loops)
    groups = {g: [d for d in getattr(view, g) if extents[d] > 1] for g in "bmnk"}   # extent-1 dims index 0
    share = per_instance(dict(mapping.levels[-1].tile), units_spread(mapping))   # one block per SM per step
    size = {g: math.prod(extents[d] for d in groups[g]) for g in "bmnk"}
    tile = {g: min(size[g], math.prod(share[d] for d in groups[g])) for g in "bmnk"}
    # the m x k operand is the one gemm_view does not take for the weight (the weight role, else the second)
    x_at = 1 - next((i for i, o in enumerate(op.inputs) if o.role.value == "weight"), 1)
    storage = (op.inputs[x_at].dtype, op.inputs[1 - x_at].dtype)
    rate = DType(mapping.dtype) if mapping.dtype else storage[0]
    dot, precision = _dot(op, storage, rate)
    min_k = MIN_BLOCK_K_8BIT if dot.bits == 8 else MIN_BLOCK
    block = {g: max(MIN_BLOCK if g != "k" else min_k, pow2(tile[g])) for g in "mnk"}
    priced = (tile["b"] * tile["m"], tile["n"], tile["k"])          # simt folds batch into BM
    limits = unit.limits if unit is not None else None      # a SIMT unit's, checked above
    warp = limits.warp if limits else DEFAULT_WARP
    warps = -(-priced[0] * priced[1] // (OUTPUTS_PER_THREAD * warp))
    threads = min(warps * warp, MAX_THREADS_PER_BLOCK, limits.threads if limits else MAX_THREADS_PER_BLOCK)
    num_warps = pow2(max(1, threads // warp))       # Triton wants a power-of-two warp count: 3 priced warps run 4
    stages = _stages(mapping, arch, unit, priced, op, block, storage) if unit and arch is not None else DEFAULT_STAGES
    programs = -(-size["b"] // tile["b"]) * -(-size["m"] // tile["m"]) * -(-size["n"] // tile["n"])
    kind = "conv" if op.op == "Conv" else "batched_gemm" if groups["b"] else "gemm"
    notes = [f"dot {dot.value}" + (f" ({precision})" if precision else "") + f", accumulate {_acc(dot).value}"]
    source = _Source(op, groups, extents, size, tile, block, x_at, dot, precision, storage).text(num_warps, stages)
    return TritonKernel(op=op.name, kind=kind, source=source, tile=priced,
                        block=(block["m"], block["n"], block["k"]), num_warps=num_warps, num_stages=stages,
                        grid=(programs,), inputs=torch_names(op.inputs), output=torch_names([op.output])[0],
                        notes=tuple(notes))


def _check(op: IROp, mapping: Mapping) -> None:
    if not isinstance(op, Einsum):
        raise NoTritonKernel(f"triton_gemm: {op.name!r} is a {op.kind.value} op, not an Einsum")
    if len(op.inputs) != 2:
        raise NoTritonKernel(f"triton_gemm: {op.name!r} ({op.op}) has {len(op.inputs)} operands; the kernel "
                             f"multiplies two")
    # An op with the signature of an earlier one shares its mapping (compiler.codegen.generate): loops must match
    if mapping.dataflow is not None or mapping.loops != op.loops or not mapping.levels or not mapping.parts:
        raise UserError(f"triton_gemm: mapping of {mapping.op!r} on {mapping.unit!r} is not a SIMT mapping of "
                        f"{op.name!r}")


def _dot(op: Einsum, storage: tuple[DType, DType], rate: DType) -> tuple[DType, str | None]:
    """(the operand type tl.dot multiplies, its input_precision for fp32 operands). Operands run in their own
    type where the unit has an MMA for it; where accelsim prices them at another rate (a GTX 580 widens fp16 to
    fp32; an A100 has no fp8 MMA) they are widened in registers to a type that holds them exactly."""
    types = set()
    for s in storage:
        if s in (DType.fp32, DType.tf32, DType.fp64):
            types.add(DType.fp64 if s == DType.fp64 else DType.fp32)
        elif s in (DType.int8, DType.ternary):
            if rate not in (DType.int8, DType.ternary):
                raise NoTritonKernel(f"{op.name!r} ({op.op}): {s.value} operands priced at {rate.value}'s rate; "
                                     f"the kernel multiplies integers only on int8 MMAs")
            types.add(DType.int8)
        elif s in EXACT_IN:
            wider = s if rate == s else rate if rate in EXACT_IN[s] else EXACT_IN[s][0]
            types.add(DType.fp32 if wider == DType.tf32 else wider)     # tf32 is fp32 operands, tf32 precision
        else:
            raise NoTritonKernel(f"{op.name!r} ({op.op}): a {s.value} operand; tl.dot takes fp64, fp32/tf32, "
                                 f"fp16, bf16, fp8 (e4m3) and int8")
    if len(types) != 1:
        raise NoTritonKernel(f"{op.name!r} ({op.op}): operands of different types "
                             f"({', '.join(s.value for s in storage)})")
    dot = types.pop()
    return dot, ("tf32" if rate == DType.tf32 else "ieee") if dot == DType.fp32 else None


def _acc(dot: DType) -> DType:
    return DType.int32 if dot == DType.int8 else DType.fp64 if dot == DType.fp64 else DType.fp32


def _stages(mapping: Mapping, arch: Arch, unit: ComputeUnit, tile: tuple[int, int, int], op: Einsum,
            block: dict[str, int], storage: tuple[DType, DType]) -> int:
    """The unit's pipeline_stages if the mapping double-buffers shared memory (the outermost per-SM level), cut
    to how many (BM + BN) x BK operand stages fit in it (accelsim.price.simt's rule), then to how many of the
    padded power-of-two blocks do: more would not launch on a real GPU."""
    shared = next((lv for lv in arch.memory if lv.instances == unit.count), None)
    held = next((lv for lv in mapping.levels if shared is not None and lv.level == shared.name), None)
    stages = unit.pipeline_stages if held is None or held.double_buffered else 1
    in_bytes = max(DType(mapping.dtype).bits if mapping.dtype else op.inputs[0].dtype.bits, 8) // 8
    assert unit.limits is not None, f"{unit.name}: a SIMT unit has limits"
    smem = unit.limits.shared_memory_bytes
    stages = max(1, min(stages, smem // ((tile[0] + tile[1]) * tile[2] * in_bytes)))
    stored = max(max(s.bits, 8) // 8 for s in storage)
    return max(1, min(stages, smem // ((block["m"] + block["n"]) * block["k"] * stored)))


class _Source:
    """The kernel's text: each operand's address is the sum of its axes' affine indices times its strides,
    split by which loop of the kernel each index term changes in (batch, the m or n block, the K step);
    masks only where an edge can be ragged or an index can leave its axis (a conv's padding)."""

    def __init__(self, op: Einsum, groups: dict[str, list[str]], extents: dict[str, int], size: dict[str, int],
                 tile: dict[str, int], block: dict[str, int], x_at: int, dot: DType, precision: str | None,
                 storage: tuple[DType, DType]) -> None:
        self.op, self.groups, self.extents, self.size, self.tile, self.block = op, groups, extents, size, tile, block
        self.x_at, self.dot, self.precision, self.storage = x_at, dot, precision, storage
        self.group_of = {d: g for g, dims in groups.items() for d in dims}
        self.operands = {"x": (op.inputs[x_at], op.in_axes[x_at]), "w": (op.inputs[1 - x_at], op.in_axes[1 - x_at]),
                         "y": (op.output, tuple(Axis.of(d) for d in op.out_dims))}

    def pieces(self, name: str) -> list[tuple[dict[str, str], list[str]]]:
        """Per axis of operand `name`: its index terms by group ("b" holds the offset too) and the bounds
        checks the index needs, from its range over the whole loop nest (h = 2p + r - 1 can be -1)."""
        operand, axes = self.operands[name]
        out = []
        for j, axis in enumerate(axes):
            terms: dict[str, list[str]] = {}
            for d, c in axis.terms:
                if d in self.group_of:
                    terms.setdefault(self.group_of[d], []).append(f"i_{d}" if c == 1 else f"{c} * i_{d}")
            if axis.offset:
                terms.setdefault("b", []).append(str(axis.offset))
            lo = axis.offset + sum(min(0, c * (self.extents[d] - 1)) for d, c in axis.terms)
            hi = axis.offset + sum(max(0, c * (self.extents[d] - 1)) for d, c in axis.terms)
            checks = [">= 0"] * (lo < 0) + [f"< {operand.shape[j]}"] * (hi >= operand.shape[j])
            out.append(({g: " + ".join(t) for g, t in terms.items()}, checks))
        return out

    def offsets(self, name: str, group: str, pad: str) -> list[str]:
        """`{name}_{group} = ...`: the part of the operand's address that group's indices make."""
        terms = [f"({p[group]}) * {name}_s{j}" if "+" in p[group] else f"{p[group]} * {name}_s{j}"
                 for j, (p, _) in enumerate(self.pieces(name)) if group in p]
        zero = "0" if group == "b" else f"0 * {RANGES[group]}"
        return [f"{pad}{name}_{group} = " + (" + ".join(terms) or zero)]

    def bounds(self, name: str, pad: str) -> tuple[list[str], list[str]]:
        """(lines, mask terms) for the axes of `name` whose index can leave the axis: zero padding."""
        rows, cols = ROLES[name]
        lines, masks = [], []
        for j, (p, checks) in enumerate(self.pieces(name)):
            if checks:
                index = [p["b"]] if "b" in p else []
                index += [f"({p[rows]})[:, None]"] if rows in p else []
                index += [f"({p[cols]})[None, :]"] if cols in p else []
                lines.append(f"{pad}{name}_a{j} = {' + '.join(index)}")
                masks += [f"({name}_a{j} {c})" for c in checks]
        return lines, masks

    def ragged(self, g: str, pad: str) -> list[str]:
        """`mask_{g} = ...` where group g's lanes can pass the tile or the tile the extent; else nothing."""
        terms = [f"({RANGES[g]} < TILE_{g.upper()})"] * (self.block[g] != self.tile[g])
        terms += [f"(offs_{g} < {g.upper()})"] * bool(self.size[g] % self.tile[g])
        return [f"{pad}mask_{g} = {' & '.join(terms)}"] if terms else []

    def unflatten(self, g: str, flat: str, pad: str) -> list[str]:
        """Each dim's index from the group's flat (row-major) offset: m = (n, p, q) -> n = m // (P*Q) ..."""
        dims = self.groups[g]
        lines = []
        for j, d in enumerate(dims):
            inner = math.prod(self.extents[e] for e in dims[j + 1:])
            lines.append(f"{pad}i_{d} = {_digit(flat, inner, self.extents[d] if j else 0)}")
        return lines

    def body(self) -> list[str]:
        t, s = self.tile, self.size
        blocks_m, blocks_n = -(-s["m"] // t["m"]), -(-s["n"] // t["n"])
        looped = t["b"] > 1
        P = "    "
        B = P + "    " * looped      # inside the loop over a block's batch entries
        K = B + "    "               # inside the K loop
        L = [f"{P}pid = tl.program_id(0)", f"{P}pid_m = {_digit('pid', blocks_n, blocks_m)}",
             f"{P}pid_n = {_digit('pid', 1, blocks_n)}",
             f"{P}rm = tl.arange(0, BLOCK_M)", f"{P}rn = tl.arange(0, BLOCK_N)", f"{P}rk = tl.arange(0, BLOCK_K)",
             f"{P}offs_m = pid_m * TILE_M + rm", f"{P}offs_n = pid_n * TILE_N + rn"]
        L += self.ragged("m", P) + self.ragged("n", P)
        L += self.unflatten("m", "offs_m", P) + self.unflatten("n", "offs_n", P)
        for name, g in (("x", "m"), ("w", "n"), ("y", "m"), ("y", "n")):     # what a block's position sets
            L += self.offsets(name, g, P)
        live = False
        if s["b"] > 1:
            L.append(f"{P}pid_b = {_digit('pid', blocks_m * blocks_n, 0)}")
            if looped:
                L += [f"{P}for bi in range({t['b']}):   # the batch entries (heads, groups) of this block",
                      f"{B}bat = pid_b * {t['b']} + bi"]
                if s["b"] % t["b"]:     # the last block's missing entries, as 1-D masks over its rows and columns
                    L += [f"{B}live_m = bat + 0 * rm < {s['b']}", f"{B}live_n = bat + 0 * rn < {s['b']}"]
                    live = True
            else:
                L.append(f"{P}bat = pid_b")
        L += self.unflatten("b", "bat", B)
        L += self.offsets("x", "b", B) + self.offsets("w", "b", B) + self.offsets("y", "b", B)
        L += [f"{B}acc = tl.zeros((BLOCK_M, BLOCK_N), dtype={TL_TYPES[_acc(self.dot)]})",
              f"{B}for k0 in range(0, K, TILE_K):", f"{K}offs_k = k0 + rk"]
        L += self.ragged("k", K) + self.unflatten("k", "offs_k", K)
        L += self.offsets("x", "k", K) + self.offsets("w", "k", K)
        x_lines, x_pad = self.bounds("x", K)
        w_lines, w_pad = self.bounds("w", K)
        has = {g: bool(self.ragged(g, "")) for g in "mnk"}
        x_mask = ["mask_m[:, None]"] * has["m"] + ["mask_k[None, :]"] * has["k"] + x_pad + ["live_m[:, None]"] * live
        w_mask = ["mask_k[:, None]"] * has["k"] + ["mask_n[None, :]"] * has["n"] + w_pad + ["live_n[None, :]"] * live
        L += x_lines + w_lines
        zero = ["0.0" if st.is_float else "0" for st in self.storage]
        L += [f"{K}x = tl.load(x_ptr + x_b + x_m[:, None] + x_k[None, :]{_masked(x_mask, zero[0])})",
              f"{K}w = tl.load(w_ptr + w_b + w_k[:, None] + w_n[None, :]{_masked(w_mask, zero[1])})"]
        L += [f"{K}{v} = {v}.to({TL_TYPES[self.dot]})   # widened: the unit runs {st.value} at another rate"
              for v, st in zip("xw", self.storage) if TL_TYPES[st] != TL_TYPES[self.dot]]
        if self.dot == DType.bf16:
            L += [f"{K}if WIDEN_BF16:", f"{K}    x = x.to(tl.float32)", f"{K}    w = w.to(tl.float32)"]
        L.append(f"{K}acc = tl.dot(x, w, acc" + (f', input_precision="{self.precision}")' if self.precision else ")"))
        y_mask = ["mask_m[:, None]"] * has["m"] + ["mask_n[None, :]"] * has["n"] + ["live_m[:, None]"] * live
        L.append(f"{B}tl.store(y_ptr + y_b + y_m[:, None] + y_n[None, :], acc.to(y_ptr.dtype.element_ty)"
                 f"{_masked(y_mask)})")
        return L

    def text(self, num_warps: int, num_stages: int) -> str:
        op, t, b, s = self.op, self.tile, self.block, self.size
        ranks = {n: len(self.operands[n][0].shape) for n in "xwy"}
        strides = ", ".join(f"{n}_s{j}" for n in "xwy" for j in range(ranks[n]))
        x_name, w_name = ("in0", "in1") if self.x_at == 0 else ("in1", "in0")
        programs = -(-s["b"] // t["b"]) * -(-s["m"] // t["m"]) * -(-s["n"] // t["n"])
        bf16 = self.dot == DType.bf16
        text = PRELUDE.format(doc=f"{op.name} ({op.op}): {op.describe()}", op=op.name)
        if bf16:
            text += ("\n# Triton's interpreter multiplies bf16 bit patterns in tl.dot (triton-lang/triton#11584): "
                     "there, and only\n# there, bf16 operands widen to fp32 first, which is exact (a bf16 x bf16 "
                     "product fits fp32).\nWIDEN_BF16 = os.environ.get(\"TRITON_INTERPRET\") == \"1\"\n")
        head = ["", "", "@triton.jit", f"def einsum_kernel(x_ptr, w_ptr, y_ptr, {strides},",
                "                 M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,",
                "                 TILE_M: tl.constexpr, TILE_N: tl.constexpr, TILE_K: tl.constexpr,",
                "                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr"
                + (", WIDEN_BF16: tl.constexpr" if bf16 else "") + "):",
                f"    # One program is one thread block of the mapping: {t['b']} x {t['m']} x {t['n']} outputs "
                f"(batch x m x n), in {b['m']} x {b['n']} blocks."]
        checks = [f"    _expect(in{i}, {tuple(o.shape)!r}, {f'input {i} ({o.tensor})'!r})"
                  for i, o in enumerate(op.inputs)]
        launch = ["", "", "def launch(in0, in1, out):",
                  f'    """out[{", ".join(op.out_dims)}] = sum over {", ".join(op.reduction_dims) or "nothing"} of '
                  f'in0 * in1, the op\'s affine indices."""', *checks,
                  f"    _expect(out, {tuple(op.output.shape)!r}, 'out')",
                  f"    einsum_kernel[({programs},)]({x_name}, {w_name}, out, *{x_name}.stride(), *{w_name}.stride(), "
                  f"*out.stride(),",
                  f"                 M={s['m']}, N={s['n']}, K={s['k']}, TILE_M={t['m']}, TILE_N={t['n']}, "
                  f"TILE_K={t['k']},",
                  f"                 BLOCK_M={b['m']}, BLOCK_N={b['n']}, BLOCK_K={b['k']},"
                  + (" WIDEN_BF16=WIDEN_BF16," if bf16 else "") + f" num_warps={num_warps}, num_stages={num_stages})",
                  "    return out", ""]
        return text + "\n".join(head + self.body() + launch)


def _digit(flat: str, inner: int, extent: int) -> str:
    """flat // inner % extent, written without the no-op parts (extent 0: no modulo, the outermost digit)."""
    if extent == 1:
        return "0"
    expr = flat if inner == 1 else f"{flat} // {inner}"
    return f"{expr} % {extent}" if extent else expr


def _masked(terms: list[str], other: str = "") -> str:
    """`, mask=..., other=...` (other: what masked lanes load, in the operand's kind: fp8 takes no int)."""
    if not terms:
        return ""
    return f", mask={' & '.join(terms)}" + (f", other={other}" if other else "")
