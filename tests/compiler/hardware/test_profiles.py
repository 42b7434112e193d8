"""Each arch kind's profile says what its hardware does, as the runtimes and libraries of that kind of target do:
the flags below are written down by hand from them, not read from the profiles (a GPU's CUTLASS epilogue reads a
residual and FlashAttention runs attention as one kernel; a CPU's oneDNN post-ops and fused SDPA too; TPU v1's
activation pipeline reads only per-channel operands and runs no softmax; a GPU's copy engines prefetch a step ahead)."""
import ast
from pathlib import Path

import pytest

from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.hardware import ArchKind
from compiler.hardware.profiles import PROFILES, Registry, profile

#          epilogue reads tensors, row kernels, attention kernel, prefetch ahead, CUDA, promotion after the MMAs
EXPECTED = {"simd": (True, True, True, False, False, False),
            "simt": (True, True, True, True, True, True),
            "systolic": (False, False, False, False, False, False),
            "ternary": (False, False, False, False, False, False)}


@pytest.mark.parametrize("kind", list(ArchKind))
def test_every_kind_has_its_profile(kind):
    p = profile(kind)
    assert p.kind is kind and profile(kind.value) is p
    assert (p.epilogue_reads_tensors, p.row_kernels, p.attention_kernel, p.prefetch_ahead, p.cuda,
            p.promotion_after_mma) == EXPECTED[kind.value]
    assert p.pe_array == (kind.value in ("systolic", "ternary"))
    assert p.matrix_dtype == (DType.ternary if kind is ArchKind.ternary else None)


def test_the_profiles_are_the_kinds_in_order():
    assert list(PROFILES) == [k.value for k in ArchKind]


def test_a_name_no_registry_holds_is_an_error_naming_it_and_the_names_there_are():
    with pytest.raises(UserError, match=r"no arch kind 'npu'; there are: simd, simt, systolic, ternary"):
        profile("npu")
    with pytest.raises(UserError, match=r"no widget 'b'; there are: a"):
        Registry("widget", {"a": 1})["b"]
    assert Registry("widget").get("b") is None      # only a lookup that needs the entry fails


KINDS = {k.value for k in ArchKind}
ROOT = Path(__file__).resolve().parents[3]


def kind_tests(tree: ast.AST) -> list[int]:
    """Lines that branch on a kind's name: `ArchKind.<member>`, a comparison with a kind's spelling, a table keyed
    by kinds. (Writing a kind, as an importer's YAML does, is no test of one.)"""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in KINDS and getattr(node.value, "id", "").endswith("Kind"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in KINDS
                                                   for c in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)) and sum(
                isinstance(e, ast.Constant) and e.value in KINDS for e in node.elts) >= 2:
            lines.append(node.lineno)
        elif isinstance(node, ast.Dict) and sum(isinstance(k, ast.Constant) and k.value in KINDS
                                                for k in node.keys) >= 2:
            lines.append(node.lineno)
    return lines


def test_only_the_profiles_name_the_kinds_they_tell_apart():
    found = {f"{path.relative_to(ROOT)}:{line}" for package in ("accelsim", "compiler")
             for path in sorted((ROOT / package).rglob("*.py")) if path.parent.name != "hardware"
             for line in kind_tests(ast.parse(path.read_text()))}
    assert found == set(), "ask compiler.hardware.profiles.profile(kind) for a flag instead"
