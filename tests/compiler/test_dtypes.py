"""The ONNX element-type numbers compiler.dtypes writes out are onnx's own, and asking for them imports no onnx."""
import subprocess
import sys

from onnx import TensorProto

from compiler.dtypes import DType

SPELLING = {DType.fp64: "DOUBLE", DType.fp32: "FLOAT", DType.tf32: "FLOAT", DType.fp16: "FLOAT16",
            DType.bf16: "BFLOAT16", DType.fp8: "FLOAT8E4M3FN", DType.fp8_e4m3fnuz: "FLOAT8E4M3FNUZ",
            DType.fp8_e5m2: "FLOAT8E5M2", DType.fp8_e5m2fnuz: "FLOAT8E5M2FNUZ", DType.fp8_e8m0: "FLOAT8E8M0",
            DType.fp4: "FLOAT4E2M1", DType.ternary: "INT8", DType.bool: "BOOL"}


def test_onnx_numbers_are_onnxs():
    for dtype in DType:
        name = SPELLING.get(dtype, dtype.name.upper())
        assert dtype.onnx == TensorProto.DataType.Value(name), dtype
        if dtype not in (DType.ternary, DType.tf32):
            assert DType.from_onnx(dtype.onnx) == dtype


def test_a_cast_built_in_python_imports_no_onnx():
    code = ("import sys; from accelsim.validate.cases import parse; parse('scaledgemm 8 8 256 128 fp8').graph(); "
            "assert 'onnx' not in sys.modules, 'onnx imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
