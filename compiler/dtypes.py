"""Element types of tensors, with their width in bits and their ONNX and numpy spellings.

`ternary` has no ONNX or numpy type of its own: it is stored as int8 holding -1, 0 or +1
and packed at 2 bits per weight on the hardware, which is what `bits` reports.
"""
import enum

import numpy as np
from onnx import TensorProto

from compiler.errors import ModelError


class DType(enum.Enum):
    fp64 = "fp64"
    fp32 = "fp32"
    tf32 = "tf32"
    fp16 = "fp16"
    bf16 = "bf16"
    fp8 = "fp8"
    int64 = "int64"
    int32 = "int32"
    int16 = "int16"
    int8 = "int8"
    uint8 = "uint8"
    int4 = "int4"
    ternary = "ternary"
    bool = "bool"

    @property
    def bits(self) -> int:
        return _BITS[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.fp64, DType.fp32, DType.tf32, DType.fp16, DType.bf16, DType.fp8)

    @property
    def numpy(self) -> np.dtype:
        """The numpy type the reference interpreter holds values of this dtype in."""
        return np.dtype(_NUMPY[self])

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
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        raise ModelError(f"{where}: ONNX element type {name} is not supported")

    @staticmethod
    def from_numpy(dtype: np.dtype) -> "DType":
        for d, n in _NUMPY.items():
            if np.dtype(n) == dtype and d not in (DType.ternary, DType.tf32, DType.bf16, DType.fp8, DType.int4):
                return d
        raise ModelError(f"numpy dtype {dtype} has no accelsim dtype")


_BITS = {
    DType.fp64: 64, DType.fp32: 32, DType.tf32: 32, DType.fp16: 16, DType.bf16: 16, DType.fp8: 8,
    DType.int64: 64, DType.int32: 32, DType.int16: 16, DType.int8: 8, DType.uint8: 8, DType.int4: 4,
    DType.ternary: 2, DType.bool: 8,
}
# bf16 and fp8 have no numpy type: the reference holds them in float32 (values rounded on cast).
_NUMPY = {
    DType.fp64: "float64", DType.fp32: "float32", DType.tf32: "float32", DType.fp16: "float16",
    DType.bf16: "float32", DType.fp8: "float32", DType.int64: "int64", DType.int32: "int32",
    DType.int16: "int16", DType.int8: "int8", DType.uint8: "uint8", DType.int4: "int8",
    DType.ternary: "int8", DType.bool: "bool",
}
_ONNX = {
    DType.fp64: TensorProto.DOUBLE, DType.fp32: TensorProto.FLOAT, DType.tf32: TensorProto.FLOAT,
    DType.fp16: TensorProto.FLOAT16, DType.bf16: TensorProto.BFLOAT16, DType.fp8: TensorProto.FLOAT8E4M3FN,
    DType.int64: TensorProto.INT64, DType.int32: TensorProto.INT32, DType.int16: TensorProto.INT16,
    DType.int8: TensorProto.INT8, DType.uint8: TensorProto.UINT8, DType.int4: TensorProto.INT4,
    DType.ternary: TensorProto.INT8, DType.bool: TensorProto.BOOL,
}
