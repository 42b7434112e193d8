"""A validation case: one operator (or one fused pattern) with its shape, written as a short text key, and what
accelsim predicts for it.

    gemm 512 512 512 fp32                   C[M, N] = A[M, K] @ B[K, N]                 (gemm M N K DTYPE)
    bgemm 12 128 128 64 bf16                B independent GEMMs, as attention heads    (bgemm B M N K DTYPE)
    scaledgemm 64 4096 7168 128 fp8         block-scaled: A scaled per row and BLOCK of K, B per BLOCK of K and
                                            column, bf16 out (DeepGEMM, vLLM)          (scaledgemm M N K BLOCK DTYPE)
    scaledbgemm 4 8192 4096 7168 128 fp8    B of them, each with its own weights (MoE experts, grouped GEMMs)
    conv 1 64 56 56 64 3 3 1 1 1 fp32       NCHW conv, K filters of R x S
                                            (conv N C H W K R S STRIDE PAD GROUPS DTYPE)
    attention 1 12 128 128 64 bf16          softmax(Q K^T / sqrt D) V per head         (attention B H SQ SKV D DTYPE)
    softmax 1536 128 bf16                   along the last axis of [ROWS, COLS]        (softmax ROWS COLS DTYPE)
    layernorm 128 768 bf16                  along the last axis, with scale and bias   (layernorm ROWS COLS DTYPE)
    gelu 128 3072 bf16                      element-wise over [ROWS, COLS]; also relu, sigmoid, tanh, add, mul
    addrow 128 768 bf16                     [ROWS, COLS] + a [COLS] row (a bias); mulrow scales by one
    batchnorm 1 64 56 56 bf16               inference batch norm of NCHW, per-channel statistics
                                            (batchnorm N C H W DTYPE)
    train mlp256 64 sgd fp32 forward        a phase of a small model's training step (accelsim.validate.train_cases)

Invariant: the same key always builds the same small Graph, so a measured dataset can be re-predicted by any later
version of the model (tests/accelsim/validate/test_validation.py does, on every commit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph
from compiler.hardware import Arch

# Element-wise kinds: frontend op and arity. Binary ones take two same-shaped inputs (a residual add).
ELEMENTWISE = {"gelu": ("Gelu", 1), "relu": ("Relu", 1), "sigmoid": ("Sigmoid", 1), "tanh": ("Tanh", 1),
               "add": ("Add", 2), "mul": ("Mul", 2)}
ROW_BROADCAST = {"addrow": "Add", "mulrow": "Mul"}   # x[ROWS, COLS] with a [COLS] operand broadcast down the rows
KINDS = {"gemm": ("m", "n", "k"), "bgemm": ("b", "m", "n", "k"), "scaledgemm": ("m", "n", "k", "block"),
         "scaledbgemm": ("b", "m", "n", "k", "block"),
         "conv": ("n", "c", "h", "w", "k", "r", "s", "stride", "pad", "groups"),
         "attention": ("b", "h", "sq", "skv", "d"), "softmax": ("rows", "cols"), "layernorm": ("rows", "cols"),
         "batchnorm": ("n", "c", "h", "w"), **{kind: ("rows", "cols") for kind in (*ELEMENTWISE, *ROW_BROADCAST)}}


@dataclass(frozen=True)
class Case:
    kind: str
    dims: tuple[int, ...]
    dtype: DType

    @property
    def key(self) -> str:
        return " ".join([self.kind, *map(str, self.dims), self.dtype.value])

    @property
    def size(self) -> dict[str, int]:
        """The dims by name: {"m": 512, "n": 512, "k": 512}."""
        return dict(zip(KINDS[self.kind], self.dims))

    @property
    def conv_out(self) -> tuple[int, int]:
        """(P, Q): a conv case's output height and width."""
        d = self.size
        return ((d["h"] + 2 * d["pad"] - d["r"]) // d["stride"] + 1,
                (d["w"] + 2 * d["pad"] - d["s"]) // d["stride"] + 1)

    @property
    def macs(self) -> int:
        """Multiply-accumulates of the case's matrix work (0 for vector-only kinds)."""
        d = self.size
        if self.kind in ("gemm", "bgemm", "scaledgemm", "scaledbgemm"):
            return d.get("b", 1) * d["m"] * d["n"] * d["k"]
        if self.kind == "attention":
            return 2 * d["b"] * d["h"] * d["sq"] * d["skv"] * d["d"]    # Q K^T, then P V
        if self.kind == "conv":
            p, q = self.conv_out
            return d["n"] * d["k"] * p * q * (d["c"] // d["groups"]) * d["r"] * d["s"]
        return 0

    def graph(self) -> Graph:
        """The small model this case is: shape-only (the simulator needs no weight values). Input names are
        the operands' names in accelsim.validate.torch_ops, which feeds the same tensors to the vendor library."""
        d = self.size
        opset = 21 if self.kind.startswith("scaled") else 17     # DequantizeLinear's block_size: opset 21
        b = Builder(self.key.replace(" ", "_"), dtype=self.dtype, weights=False, opset=opset)
        if self.kind == "gemm":
            out = b.node("MatMul", [b.input("a", (d["m"], d["k"])), b.weight("b", (d["k"], d["n"]))], name="gemm")
        elif self.kind in ("scaledgemm", "scaledbgemm"):
            out = _scaled_gemm(b, d)
        elif self.kind == "bgemm":
            out = b.node("MatMul", [b.input("a", (d["b"], d["m"], d["k"])), b.input("b", (d["b"], d["k"], d["n"]))],
                         name="bgemm")
        elif self.kind == "conv":
            x = b.input("x", (d["n"], d["c"], d["h"], d["w"]))
            w = b.weight("w", (d["k"], d["c"] // d["groups"], d["r"], d["s"]))
            out = b.node("Conv", [x, w], name="conv", strides=[d["stride"]] * 2, pads=[d["pad"]] * 4,
                         group=d["groups"], kernel_shape=[d["r"], d["s"]])
        elif self.kind == "attention":
            # Q arrives scaled by 1 / sqrt(D) and K transposed, so the graph is the three ops accelsim prices
            # (scores, softmax, weighted sum), not a scale or a transpose the vendor kernel never runs.
            heads = (d["b"], d["h"])
            q = b.input("q", (*heads, d["sq"], d["d"]))
            kt = b.input("kt", (*heads, d["d"], d["skv"]))
            v = b.input("v", (*heads, d["skv"], d["d"]))
            scores = b.node("MatMul", [q, kt], name="scores")
            probs = b.node("Softmax", [scores], name="softmax", axis=-1)
            out = b.node("MatMul", [probs, v], name="context")
        elif self.kind == "softmax":
            out = b.node("Softmax", [b.input("x", (d["rows"], d["cols"]))], name="softmax", axis=-1)
        elif self.kind == "layernorm":
            x = b.input("x", (d["rows"], d["cols"]))
            out = b.node("LayerNormalization", [x, b.weight("gamma", (d["cols"],)), b.weight("beta", (d["cols"],))],
                         name="layernorm", axis=-1, epsilon=1e-5)
        elif self.kind == "batchnorm":
            x = b.input("x", (d["n"], d["c"], d["h"], d["w"]))
            stats = [b.weight(name, (d["c"],)) for name in ("scale", "bias", "mean", "var")]
            out = b.node("BatchNormalization", [x, *stats], name="batchnorm", epsilon=1e-5)
        elif self.kind in ROW_BROADCAST:
            x = b.input("x", (d["rows"], d["cols"]))
            out = b.node(ROW_BROADCAST[self.kind], [x, b.weight("row", (d["cols"],))], name=self.kind)
        else:
            op, arity = ELEMENTWISE[self.kind]
            inputs = [b.input(name, (d["rows"], d["cols"])) for name in ("x", "y")[:arity]]
            out = b.node(op, inputs, name=self.kind)
        return b.build([out])


def _scaled_gemm(b: Builder, d: dict[str, int]) -> str:
    """C = dequantize(A) @ dequantize(B) in bf16: A [M, K] with an fp32 scale per row and BLOCK of K (a per-token
    group, computed at run time), B [K, N] with one per BLOCK of K and column (ONNX's DequantizeLinear blocks one
    axis; DeepSeek-V3 stores one per BLOCK x BLOCK tile: 0.02% of B's fp8 bytes where these are 3%); B of each
    with its own weights for scaledbgemm."""
    m, n, k, block = d["m"], d["n"], d["k"], d["block"]
    batch = (d["b"],) if "b" in d else ()
    blocks = -(-k // block)
    a = b.node("DequantizeLinear", [b.input("a", (*batch, m, k)),
                                    b.input("a_scale", (*batch, m, blocks), DType.fp32)],
               name="a_dequantize", axis=len(batch) + 1, block_size=block)
    w = b.node("DequantizeLinear", [b.weight("b", (*batch, k, n)),
                                    b.weight("b_scale", (*batch, blocks, n), DType.fp32)],
               name="b_dequantize", axis=len(batch), block_size=block)
    return b.node("Cast", [b.node("MatMul", [a, w], name="gemm")], name="to_bf16", to=DType.bf16.onnx)


def parse(key: str):
    """The Case (a TrainCase for `train ...`) a key names; a UserError naming the key and the expected form
    otherwise."""
    from accelsim.validate import train_cases

    words = key.split()
    if words and words[0] == train_cases.KIND:
        return train_cases.parse(key)
    if not words or words[0] not in KINDS:
        raise UserError(f"validation case {key!r}: starts with one of {', '.join([*KINDS, train_cases.KIND])}")
    names = KINDS[words[0]]
    form = f"{words[0]} {' '.join(n.upper() for n in names)} DTYPE"
    if len(words) != len(names) + 2:
        raise UserError(f"validation case {key!r}: expected {form}")
    try:
        dims = tuple(int(w) for w in words[1:-1])
        dtype = DType.parse(words[-1])
    except (ValueError, UserError) as e:
        raise UserError(f"validation case {key!r}: expected {form} ({e})") from None
    d = dict(zip(names, dims))
    zero_ok = {"pad"} if words[0] == "conv" else set()
    if any(v < (0 if n in zero_ok else 1) for n, v in d.items()):
        raise UserError(f"validation case {key!r}: extents must be positive")
    if words[0] == "conv" and (d["c"] % d["groups"] or d["k"] % d["groups"]):
        raise UserError(f"validation case {key!r}: C and K must be multiples of GROUPS ({d['groups']})")
    case = Case(words[0], dims, dtype)
    if case.kind == "conv" and min(case.conv_out) < 1:
        raise UserError(f"validation case {key!r}: the filter is larger than the padded image")
    return case


def predict(case, arch: Arch, fuse: str = "runtime", caches: str = "warm") -> float:
    """Seconds accelsim's tile-level engine predicts for the case on `arch` (an Arch, preset name or YAML path), its
    ops formed into kernels as `fuse` says (compiler.passes.fuse.FUSIONS), its operands warm or cold as `caches`
    says (compiler.passes.boundary); for a TrainCase, its phase of the simulated training step."""
    from accelsim.sim.api import run
    from accelsim.validate import train_cases

    if isinstance(case, train_cases.TrainCase):
        return train_cases.predict(case, arch)

    result = run(case.graph(), arch=arch, dtype=case.dtype, fuse=fuse, caches=caches)
    return float(math.fsum(op.seconds for op in result.ops))
