"""Element types of tensors, with their width in bits and their ONNX and numpy spellings.

`ternary` has no ONNX or numpy type of its own: it is stored as int8 holding -1, 0 or +1
and packed at 2 bits per weight on the hardware, which is what `bits` reports.
Types narrower than numpy's (bf16, the fp8 and fp4 formats, 4- and 2-bit integers) are held by the reference in a
wider numpy type (`numpy`); `narrow` is the ml_dtypes type that rounds or packs them, as onnx's own arrays use.
ml_dtypes (~0.9 s to import) is imported on first use of `narrow` or `from_numpy`; the ONNX numbers are written out.
"""
import builtins
import enum

import numpy as np

from compiler.errors import ModelError, OutOfScopeError
from compiler.memo import memo


class DType(enum.Enum):
    fp64 = "fp64"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"                      # E4M3FN, the usual training and inference fp8
    fp8_e4m3fnuz = "fp8_e4m3fnuz"
    fp8_e5m2 = "fp8_e5m2"
    fp8_e5m2fnuz = "fp8_e5m2fnuz"
    fp8_e8m0 = "fp8_e8m0"            # a power of two: the shared scale of MX block formats
    fp4 = "fp4"                      # E2M1
    int64 = "int64"
    int32 = "int32"
    int16 = "int16"
    int8 = "int8"
    uint64 = "uint64"
    uint32 = "uint32"
    uint16 = "uint16"
    uint8 = "uint8"
    int4 = "int4"
    uint4 = "uint4"
    int2 = "int2"
    uint2 = "uint2"
    ternary = "ternary"
    bool = "bool"

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def is_float(self) -> builtins.bool:    # in this class `bool` is the member DType.bool
        return self in _FLOATS

    @property
    def numpy(self) -> np.dtype:
        """The numpy type the reference interpreter holds values of this dtype in."""
        return np.dtype(_NUMPY[self])

    @property
    def narrow(self) -> type | None:
        """The ml_dtypes type of a dtype held in a wider numpy type (bf16 -> ml_dtypes.bfloat16), else None."""
        return _narrow().get(self)

    @property
    def onnx(self) -> int:
        return _ONNX[self]

    def nbytes(self, elements: int) -> int:
        """Bytes for `elements` values, packed (2 ternary weights per nibble pair -> 4 per byte)."""
        return (elements * self.bits + 7) // 8

    @staticmethod
    def parse(text: str) -> "DType":
        try:
            return DType(text)
        except ValueError:
            allowed = ", ".join(d.value for d in DType)
            raise ModelError(f"unknown dtype {text!r}; allowed: {allowed}") from None

    @staticmethod
    def from_onnx(elem_type: int, where: str = "") -> "DType":
        for dtype, code in _ONNX.items():
            if code == elem_type and dtype not in (DType.ternary, DType.tf32):
                return dtype
        from onnx import TensorProto

        if elem_type == TensorProto.STRING:
            raise OutOfScopeError(f"{where}: ONNX element type STRING is not supported: text processing is out of "
                                  f"scope by design (accelsim models tensor arithmetic on accelerators; strings stay "
                                  f"on the host)")
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise ModelError(f"{where}: ONNX element type {name} is not supported")

    @staticmethod
    def from_numpy(dtype: np.dtype) -> "DType":
        narrows = _narrow()
        for d, n in _NUMPY.items():
            if np.dtype(n) == dtype and d not in (DType.ternary, DType.tf32) and d not in narrows:
                return d
        for d, narrow in narrows.items():
            if np.dtype(narrow) == dtype:
                return d
        raise ModelError(f"numpy dtype {dtype} has no accelsim dtype")


_BITS = {
    DType.fp64: 64, DType.fp32: 32, DType.tf32: 32, DType.fp16: 16, DType.bf16: 16, DType.fp8: 8,
    DType.int64: 64, DType.int32: 32, DType.int16: 16, DType.int8: 8, DType.uint64: 64, DType.uint32: 32,
    DType.uint16: 16, DType.uint8: 8, DType.int4: 4, DType.uint4: 4, DType.int2: 2, DType.uint2: 2,
    DType.fp8_e4m3fnuz: 8, DType.fp8_e5m2: 8, DType.fp8_e5m2fnuz: 8, DType.fp8_e8m0: 8, DType.fp4: 4,
    DType.ternary: 2, DType.bool: 8,
}
_FLOATS = (DType.fp64, DType.fp32, DType.tf32, DType.fp16, DType.bf16, DType.fp8, DType.fp8_e4m3fnuz,
           DType.fp8_e5m2, DType.fp8_e5m2fnuz, DType.fp8_e8m0, DType.fp4)


@memo(size=1)
def _narrow() -> dict[DType, type]:
    import ml_dtypes

    return {
        DType.bf16: ml_dtypes.bfloat16, DType.fp8: ml_dtypes.float8_e4m3fn,
        DType.fp8_e4m3fnuz: ml_dtypes.float8_e4m3fnuz, DType.fp8_e5m2: ml_dtypes.float8_e5m2,
        DType.fp8_e5m2fnuz: ml_dtypes.float8_e5m2fnuz, DType.fp8_e8m0: ml_dtypes.float8_e8m0fnu,
        DType.fp4: ml_dtypes.float4_e2m1fn, DType.int4: ml_dtypes.int4, DType.uint4: ml_dtypes.uint4,
        DType.int2: ml_dtypes.int2, DType.uint2: ml_dtypes.uint2,
    }


# Narrow types have no numpy type: the reference holds floats in float32 (values rounded on cast), ints in 8 bits.
_NUMPY = {
    DType.fp64: "float64", DType.fp32: "float32", DType.tf32: "float32", DType.fp16: "float16",
    DType.bf16: "float32", DType.fp8: "float32", DType.int64: "int64", DType.int32: "int32",
    DType.int16: "int16", DType.int8: "int8", DType.uint64: "uint64", DType.uint32: "uint32",
    DType.uint16: "uint16", DType.uint8: "uint8", DType.int4: "int8", DType.uint4: "uint8", DType.int2: "int8",
    DType.uint2: "uint8", DType.fp8_e4m3fnuz: "float32", DType.fp8_e5m2: "float32", DType.fp8_e5m2fnuz: "float32",
    DType.fp8_e8m0: "float32", DType.fp4: "float32",
    DType.ternary: "int8", DType.bool: "bool",
}


# TensorProto.DataType's numbers, as onnx.proto fixes them (tests/compiler/test_dtypes.py holds them to the installed
# onnx): written out, so that a model built in Python (a Cast's `to`) never waits for onnx's import.
_ONNX = {
    DType.fp64: 11, DType.fp32: 1, DType.tf32: 1, DType.fp16: 10, DType.bf16: 16, DType.fp8: 17,
    DType.int64: 7, DType.int32: 6, DType.int16: 5, DType.int8: 3, DType.uint64: 13, DType.uint32: 12,
    DType.uint16: 4, DType.uint8: 2, DType.int4: 22, DType.uint4: 21, DType.int2: 26, DType.uint2: 25,
    DType.fp8_e4m3fnuz: 18, DType.fp8_e5m2: 19, DType.fp8_e5m2fnuz: 20, DType.fp8_e8m0: 24, DType.fp4: 23,
    DType.ternary: 3, DType.bool: 9,
}
