"""compiler.frozen.but: what dataclasses.replace gives, without running __init__ again."""
import dataclasses

import pytest

from compiler.dtypes import DType
from compiler.frozen import but
from compiler.ir import Map, Operand, Role
from compiler.mapping import op_signature


def test_a_copy_equals_what_replace_makes_and_forgets_what_was_derived():
    x = Operand("x", (2, 3), DType.fp32, Role.input)
    y = Operand("y", (2, 3), DType.fp32, Role.output)
    op = Map(name="relu", node="relu", op="Relu", inputs=(x,), output=y, fn=lambda a: a)
    assert op_signature(op).count("fp32") == 2
    half = but(op, inputs=(but(x, dtype=DType.fp16),))
    assert half == dataclasses.replace(op, inputs=(dataclasses.replace(x, dtype=DType.fp16),))
    assert half.kind == op.kind and hash(half) == hash(dataclasses.replace(half))
    assert "fp16" in op_signature(half) and "fp16" not in op_signature(op)
    with pytest.raises(TypeError, match="Operand has no field dtpye"):
        but(x, dtpye=DType.fp16)
