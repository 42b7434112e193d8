"""One profile per arch kind: what the kind's hardware does, as flags, and the names of the compute model that prices
it and of the mapping-target generator that tiles for it. Code asks a profile's flag, never a kind's name.

Invariant: a kind without a profile, or a name a registry lacks, is a UserError naming it and the ones there are,
never a default. The registries the parts below fill (accelsim.price.compute's compute models, compiler.map.targets'
target generators) are Registries too, so a missing entry fails the same way.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TypeVar

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware.arch import ArchKind

T = TypeVar("T")

# The unit keys whose presence depends on the kind (accelsim.arch.schema): a PE array and its dataflows, a GPU SM's
# occupancy limits and shared-memory stages, a CPU's GEMM micro-kernel. (`output_stage`, a vector unit beside an array
# that runs the array's epilogues as its results leave it, may be false anywhere, true only where a kind allows it.)
UNIT_KEYS = ("array", "dataflows", "limits", "pipeline_stages", "micro_kernel")

class Registry(dict[str, T]):
    """Entries by name; a name not there is a UserError naming it and the names there are (`what`: what an entry
    is, for the message)."""

    def __init__(self, what: str, entries: dict[str, T] | None = None):
        super().__init__(entries or {})
        self.what = what

    def __missing__(self, name: str) -> T:
        raise UserError(f"no {self.what} {name!r}; there are: {', '.join(self) or 'none'}")


@dataclass(frozen=True)
class KindProfile:
    """What an arch kind's hardware does. `kind` is the kind the profile speaks for (its `value` is its YAML
    spelling)."""

    kind: ArchKind
    # fusion (compiler.passes.fuse): what the target's runtimes put in one kernel
    epilogue_reads_tensors: bool     # a GEMM epilogue reads any tensor (a residual), not only its small operands
    row_kernels: bool                # an element-wise kernel also holds a row for a normalisation or a softmax
    attention_kernel: bool           # attention runs as one kernel (FlashAttention, a fused SDPA)
    # codegen (compiler.codegen.assemble): loads issued a step ahead, double-buffered, as a GPU's copy engines prefetch
    prefetch_ahead: bool
    # a CUDA GPU: Triton writes its kernels (compiler.codegen.triton) and CUDA runs validate its presets
    cuda: bool
    # pricing: the compute model's name (accelsim.price.compute.MODELS); whether a block-scaled GEMM's promotion
    # waits for the block's MMAs (a GPU's warpgroup) rather than running beside the matrix unit (an output stage)
    compute_model: str
    promotion_after_mma: bool
    # mapping: the target generator's name (compiler.map.targets.TARGETS)
    targets: str
    # YAML (accelsim.arch.schema): UNIT_KEYS (and output_stage) a matrix unit / the vector unit may carry, those a
    # matrix unit must
    matrix_keys: tuple[str, ...]
    vector_keys: tuple[str, ...]
    required_matrix_keys: tuple[str, ...]
    # a dtype some matrix unit must compute (a ternary arch's {-1, 0, +1} weights)
    matrix_dtype: DType | None = None

    @property
    def pe_array(self) -> bool:
        """Whether the matrix units are PE arrays (their area is modelled: accelsim.arch.area)."""
        return "array" in self.matrix_keys


SYSTOLIC = KindProfile(ArchKind.systolic, epilogue_reads_tensors=False, row_kernels=False, attention_kernel=False,
                       prefetch_ahead=False, cuda=False, compute_model="systolic", promotion_after_mma=False,
                       targets="pe_array", matrix_keys=("array", "dataflows"), vector_keys=("output_stage",),
                       required_matrix_keys=("array", "dataflows"))

PROFILES: Registry[KindProfile] = Registry("arch kind", {p.kind.value: p for p in (
    KindProfile(ArchKind.simd, epilogue_reads_tensors=True, row_kernels=True, attention_kernel=True,
                prefetch_ahead=False, cuda=False, compute_model="simd", promotion_after_mma=False,
                targets="register_blocks", matrix_keys=("micro_kernel",), vector_keys=(), required_matrix_keys=()),
    KindProfile(ArchKind.simt, epilogue_reads_tensors=True, row_kernels=True, attention_kernel=True,
                prefetch_ahead=True, cuda=True, compute_model="simt", promotion_after_mma=True,
                targets="thread_blocks", matrix_keys=("limits", "pipeline_stages"), vector_keys=("limits",),
                required_matrix_keys=("limits",)),
    SYSTOLIC,
    # a ternary array is a systolic array of add/subtract lanes: the same timing, other actions and bytes
    replace(SYSTOLIC, kind=ArchKind.ternary, matrix_dtype=DType.ternary),
)})


def profile(kind: ArchKind | enum.Enum | str) -> KindProfile:
    """The profile of `kind` (a kind, or its YAML spelling); a UserError naming it and the kinds there are if none."""
    return PROFILES[kind if isinstance(kind, str) else kind.value]
