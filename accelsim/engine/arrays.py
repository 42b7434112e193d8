"""The array types the kernels' signatures name, for the type checker only: numba reads no annotation, it
compiles each kernel for the arrays it is called with."""
import numpy as np
import numpy.typing as npt

Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]
Int8s = npt.NDArray[np.int8]
Int32s = npt.NDArray[np.int32]
Ints = npt.NDArray[np.int64]
UInt8s = npt.NDArray[np.uint8]
