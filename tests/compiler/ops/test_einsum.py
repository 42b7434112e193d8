"""The IR Einsum's numpy reference on its own: affine (conv) axes, mixed-radix axes, fixed indices, int wrap."""
import numpy as np
import pytest

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.ir import Axis, Einsum, Operand, Role

RNG = np.random.default_rng(1)


def _einsum(arrays, axes, loops, out_dims, acc=DType.fp32, dtypes=None):
    dtypes = dtypes or [DType.fp32] * len(arrays)
    inputs = tuple(Operand(f"in{i}", a.shape, d, Role.input) for i, (a, d) in enumerate(zip(arrays, dtypes)))
    extents = dict(loops)
    output = Operand("out", tuple(extents[d] for d in out_dims), acc, Role.output)
    return Einsum(name="e", node="e", op="Test", inputs=inputs, output=output, loops=tuple(loops),
                  in_axes=tuple(axes), out_dims=tuple(out_dims), acc=acc)


@pytest.mark.parametrize("stride, dilation, pad", [(1, 1, 0), (2, 1, 1), (1, 2, 2), (3, 2, 1)])
def test_conv_as_affine_einsum_matches_torch(stride, dilation, pad):
    torch = pytest.importorskip("torch")
    """Regression: the weight's plain r/s axes must take each round's window value, not sum over it."""
    x = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride, dilation=dilation,
                                      padding=pad).numpy()
    p, q = want.shape[2:]
    loops = [("n", 2), ("k", 4), ("p", p), ("q", q), ("c", 3), ("r", 3), ("s", 2)]
    x_axes = (Axis.of("n"), Axis.of("c"), Axis((("p", stride), ("r", dilation)), -pad),
              Axis((("q", stride), ("s", dilation)), -pad))
    w_axes = (Axis.of("k"), Axis.of("c"), Axis.of("r"), Axis.of("s"))
    op = _einsum([x, w], [x_axes, w_axes], loops, ("n", "k", "p", "q"))
    np.testing.assert_allclose(op.reference([x, w]), want, rtol=1e-4, atol=1e-5)
    assert op.macs == 2 * 4 * p * q * 3 * 3 * 2 and op.reduction_dims == ("c", "r", "s")


def test_mixed_radix_axis_is_a_reshape():
    """h = 4p + r with r < 4 tiles the axis exactly (ViT's patch embedding)."""
    x = RNG.standard_normal((8,)).astype(np.float32)
    w = RNG.standard_normal((4,)).astype(np.float32)
    op = _einsum([x, w], [(Axis((("p", 4), ("r", 1))),), (Axis.of("r"),)], [("p", 2), ("r", 4)], ("p",))
    np.testing.assert_allclose(op.reference([x, w]), x.reshape(2, 4) @ w, rtol=1e-6)


def test_fixed_index_broadcasts_a_unit_batch_axis():
    a = RNG.standard_normal((1, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((5, 4, 2)).astype(np.float32)
    loops = [("b", 5), ("m", 3), ("n", 2), ("k", 4)]
    op = _einsum([a, b], [(Axis((), 0), Axis.of("m"), Axis.of("k")), (Axis.of("b"), Axis.of("k"), Axis.of("n"))],
                 loops, ("b", "m", "n"))
    np.testing.assert_allclose(op.reference([a, b]), np.matmul(a, b), rtol=1e-5)


def test_integer_accumulation_is_exact_then_wraps_to_int32():
    a = np.full((1, 4), 127, dtype=np.int8)
    b = np.full((4, 1), -128, dtype=np.int8)
    op = _einsum([a, b], [(Axis.of("m"), Axis.of("k")), (Axis.of("k"), Axis.of("n"))],
                 [("m", 1), ("n", 1), ("k", 4)], ("m", "n"), acc=DType.int32, dtypes=[DType.int8, DType.int8])
    result = op.reference([a, b])
    assert result.dtype == np.int32 and result[0, 0] == 4 * 127 * -128


def test_the_output_loop_is_the_one_kept_in_a_window():
    """out[r] = sum_p x[p + r]: r indexes the output, so p is the loop iterated in Python."""
    x = RNG.standard_normal((6,)).astype(np.float32)
    op = _einsum([x], [(Axis((("p", 1), ("r", 1))),)], [("p", 4), ("r", 3)], ("r",))
    np.testing.assert_allclose(op.reference([x]), [x[r:r + 4].sum() for r in range(3)], rtol=1e-6)


def test_two_output_loops_on_one_axis_are_refused():
    x = np.zeros((6,), dtype=np.float32)
    op = _einsum([x], [(Axis((("p", 1), ("r", 1))),)], [("p", 4), ("r", 3)], ("p", "r"))
    with pytest.raises(ModelError, match="window loop 'r' must be a reduction loop"):
        op.reference([x])
