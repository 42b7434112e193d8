"""The ONNX Einsum op (compiler/ops/einsum.py) against onnxruntime: explicit and implicit outputs, ellipses, one to
three operands; its IR Einsum's MACs; the equations it refuses, each with a message naming the equation."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, floats, model
from tests.compiler.oracle import check_against_ort

# equation -> operand shapes, and the output shape onnxruntime must agree on (written by hand)
EQUATIONS = {
    "matmul": ("ij,jk->ik", [(3, 4), (4, 5)], (3, 5)),
    "attention_scores": ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)], (2, 3, 4, 6)),
    "weight_gradient": ("btd,bte->de", [(2, 3, 4), (2, 3, 5)], (4, 5)),
    "transpose": ("ij->ji", [(3, 4)], (4, 3)),
    "row_sum": ("ij->i", [(3, 4)], (3,)),
    "dot_to_scalar": ("i,i->", [(7,), (7,)], ()),
    "three_operands": ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], (2, 5)),
    "spaces": ("ij, jk -> ik", [(3, 4), (4, 5)], (3, 5)),
    # implicit output: the letters seen once, alphabetically (i before k although k comes first)
    "implicit": ("kj,ji", [(3, 4), (4, 5)], (5, 3)),
    "ellipsis_batch": ("...ij,...jk->...ik", [(2, 3, 4, 5), (2, 3, 5, 6)], (2, 3, 4, 6)),
    # the ellipsis covers two axes in one operand and none in the other
    "ellipsis_uneven": ("...j,jk->...k", [(2, 3, 4), (4, 5)], (2, 3, 5)),
    # implicit with an ellipsis: the ellipsis first, then the single letters
    "ellipsis_implicit": ("...ij,...jk", [(2, 4, 5), (2, 5, 3)], (2, 4, 3)),
    "ellipsis_summed_away": ("...d,...d->...", [(2, 3, 4), (2, 3, 4)], (2, 3)),
}


def _einsum_model(equation: str, shapes, opset: int = 13, elem=F32):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    return model([node], [(n, elem, s) for n, s in zip(names, shapes)], [("y", elem)], opset)


@pytest.mark.parametrize("opset", [12, 17])
@pytest.mark.parametrize("case", sorted(EQUATIONS))
def test_einsum_matches_onnxruntime(case, opset):
    equation, shapes, out_shape = EQUATIONS[case]
    feeds = {f"x{i}": floats(*s) for i, s in enumerate(shapes)}
    graph = check_against_ort(_einsum_model(equation, shapes, opset), feeds)
    assert graph.tensor("y").shape == out_shape


# case -> MACs: the product of every letter's extent, the ellipsis's axes included (by hand from EQUATIONS)
MACS = {"matmul": 3 * 4 * 5, "attention_scores": 2 * 3 * 4 * 6 * 5, "three_operands": 2 * 3 * 4 * 5,
        "ellipsis_uneven": 2 * 3 * 4 * 5, "weight_gradient": 2 * 3 * 4 * 5}


@pytest.mark.parametrize("case", sorted(MACS))
def test_einsum_is_one_ir_einsum_with_every_letter_multiplied(case):
    equation, shapes, _ = EQUATIONS[case]
    ir = lower(from_model(_einsum_model(equation, shapes)))
    assert [op.kind for op in ir.ops] == [OpKind.einsum]
    assert ir.ops[0].macs == MACS[case]


def test_integer_einsum_matches_onnxruntime():
    a = np.random.default_rng(2).integers(-50, 50, (3, 4)).astype(np.int32)
    b = np.random.default_rng(3).integers(-50, 50, (4, 5)).astype(np.int32)
    proto = _einsum_model("ij,jk->ik", [a.shape, b.shape], elem=TensorProto.INT32)
    check_against_ort(proto, {"x0": a, "x1": b})


@pytest.mark.parametrize("equation, shapes, says", [
    ("ii->i", [(3, 1)], "a diagonal needs them equal"),
    ("ij,jk->ik", [(3, 4), (5, 6)], "letter 'j' has extent 4"),
    ("...ij,...jk->...ik", [(2, 3, 4), (3, 4, 5)], "has extent 2"),
    ("ij,jk->iz", [(3, 4), (4, 5)], "must each appear once and in an input"),
    ("ijk->ij", [(3, 4)], "do not fit an operand of shape [3, 4]"),
    ("ij->ij", [(3, 4), (3, 4)], "names 1 operand(s) but the node has 2"),
])
def test_refused_equations_name_the_equation(equation, shapes, says):
    node = helper.make_node("Einsum", [f"x{i}" for i in range(len(shapes))], ["y"], equation=equation)
    graph = helper.make_graph([node], "t", [helper.make_tensor_value_info(f"x{i}", F32, s)
                                            for i, s in enumerate(shapes)],
                              [helper.make_tensor_value_info("y", F32, None)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ModelError) as error:
        from_model(proto)
    assert says in str(error.value) and equation in str(error.value)
