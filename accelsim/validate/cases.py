"""A validation case: one operator with its shape, written as a short text key, and what accelsim predicts for it.

    gemm 512 512 512 fp32                   C[M, N] = A[M, K] @ B[K, N]         (gemm M N K DTYPE)
    conv 1 64 56 56 64 3 3 1 1 1 fp32       NCHW conv, K filters of R x S      (conv N C H W K R S STRIDE PAD GROUPS DTYPE)

Invariant: the same key always builds the same one-op Graph, so a measured dataset can be re-predicted by any later
version of the model (tests/accelsim/test_validation.py does, on every commit).
"""
from __future__ import annotations

from dataclasses import dataclass

from compiler.builder import Builder
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph

KINDS = {"gemm": ("m", "n", "k"), "conv": ("n", "c", "h", "w", "k", "r", "s", "stride", "pad", "groups")}


@dataclass(frozen=True)
class Case:
    kind: str
    dims: tuple[int, ...]
    dtype: DType

    @property
    def key(self) -> str:
        return " ".join([self.kind, *map(str, self.dims), self.dtype.value])

    @property
    def macs(self) -> int:
        d = dict(zip(KINDS[self.kind], self.dims))
        if self.kind == "gemm":
            return d["m"] * d["n"] * d["k"]
        p = (d["h"] + 2 * d["pad"] - d["r"]) // d["stride"] + 1
        q = (d["w"] + 2 * d["pad"] - d["s"]) // d["stride"] + 1
        return d["n"] * d["k"] * p * q * (d["c"] // d["groups"]) * d["r"] * d["s"]

    def graph(self) -> Graph:
        """The one-op model this case is: shape-only (the simulator needs no weight values)."""
        d = dict(zip(KINDS[self.kind], self.dims))
        b = Builder(self.key.replace(" ", "_"), dtype=self.dtype, weights=False)
        if self.kind == "gemm":
            out = b.node("MatMul", [b.input("a", (d["m"], d["k"])), b.weight("b", (d["k"], d["n"]))], name="gemm")
        else:
            x = b.input("x", (d["n"], d["c"], d["h"], d["w"]))
            w = b.weight("w", (d["k"], d["c"] // d["groups"], d["r"], d["s"]))
            out = b.node("Conv", [x, w], name="conv", strides=[d["stride"]] * 2, pads=[d["pad"]] * 4,
                         group=d["groups"], kernel_shape=[d["r"], d["s"]])
        return b.build([out])


def parse(key: str) -> Case:
    """The Case a key names; a UserError naming the key and the expected form otherwise."""
    words = key.split()
    if not words or words[0] not in KINDS:
        raise UserError(f"validation case {key!r}: starts with one of {', '.join(KINDS)}")
    names = KINDS[words[0]]
    form = f"{words[0]} {' '.join(n.upper() for n in names)} DTYPE"
    if len(words) != len(names) + 2:
        raise UserError(f"validation case {key!r}: expected {form}")
    try:
        dims = tuple(int(w) for w in words[1:-1])
        dtype = DType.parse(words[-1])
    except (ValueError, UserError) as e:
        raise UserError(f"validation case {key!r}: expected {form} ({e})") from None
    if min(dims) < (0 if words[0] == "conv" else 1) or (words[0] == "conv" and dims[names.index("stride")] < 1):
        raise UserError(f"validation case {key!r}: extents must be positive")
    return Case(words[0], dims, dtype)


def predict(case: Case, arch) -> float:
    """Seconds accelsim's tile-level engine predicts for the case on `arch` (an Arch, preset name or YAML path)."""
    from accelsim.api import run

    result = run(case.graph(), arch=arch, dtype=case.dtype)
    return float(sum(op.seconds for op in result.ops))
