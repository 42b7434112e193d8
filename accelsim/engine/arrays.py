"""The array types the kernels' signatures name, for the type checker only: numba reads no annotation, it
compiles each kernel for the arrays it is called with. Spelt as numpy.typing.NDArray is, without importing it."""
from typing import Any

import numpy as np

Bools = np.ndarray[tuple[Any, ...], np.dtype[np.bool_]]
Floats = np.ndarray[tuple[Any, ...], np.dtype[np.float64]]
Int8s = np.ndarray[tuple[Any, ...], np.dtype[np.int8]]
Int32s = np.ndarray[tuple[Any, ...], np.dtype[np.int32]]
Ints = np.ndarray[tuple[Any, ...], np.dtype[np.int64]]
UInt8s = np.ndarray[tuple[Any, ...], np.dtype[np.uint8]]
