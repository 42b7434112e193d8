"""`accelsim eval --dtype`: a product at int8 is the int32 sum of int8 operands requantised, worked out by hand; at bf16
it is PyTorch's bf16 matmul; the error figures are numpy's max and mean of the difference; fp32 changes nothing."""
import numpy as np
import pytest

import accelsim
from accelsim.cli import main
from accelsim.sim.emulate import emulate, evaluate_at, wrap
from accelsim.sim.precision import error_table, precision
from compiler.builder import Builder
from compiler.dtypes import DType


def matmul(a: np.ndarray, b: np.ndarray):
    """x [M, K] @ a weight [K, N], and the feeds."""
    builder = Builder("matmul")
    x = builder.input("x", a.shape)
    graph = builder.build([builder.node("MatMul", [x, builder.weight("w", b.shape, value=b)])])
    return graph, {"x": a.astype(np.float32)}


def small_cnn():
    """Conv 3->8 (bias), Relu, Conv 8->8, GlobalAveragePool, Flatten, Gemm to 10 classes (transB, bias)."""
    builder = Builder("cnn", seed=3)
    x = builder.input("x", (2, 3, 16, 16))
    h = builder.node("Relu", [builder.node("Conv", [x, builder.weight("c1", (8, 3, 3, 3)),
                                                    builder.weight("b1", (8,))], pads=[1, 1, 1, 1])])
    h = builder.node("Relu", [builder.node("Conv", [h, builder.weight("c2", (8, 8, 3, 3))], strides=[2, 2])])
    h = builder.node("Flatten", [builder.node("GlobalAveragePool", [h])])
    graph = builder.build([builder.node("Gemm", [h, builder.weight("fc", (10, 8)), builder.weight("bf", (10,))],
                                        transB=1)])
    return graph, {"x": np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)}


def test_int8_matmul_is_the_int32_sum_requantised():
    # activations: one scale, 7.9375 / 127 = 2**-4; weights: one per column, 2**-7 and 2**-6
    a = np.array([[7.9375, -2.53125, 0.5], [1.0, -7.9375, 0.03125]])
    b = np.array([[0.9921875, -1.984375], [-0.5, 0.5], [0.25, 0.1]])
    # int8: a -> [[127, -40 (-40.5, ties to even), 8], [16, -127, 0 (0.5, ties to even)]]
    #       b -> [[127, -127], [-64, 32], [32, 6 (6.4)]]
    # int32 sums: [[16129 + 2560 + 256, -16129 - 1280 + 48], [2032 + 8128, -2032 - 4064]]
    acc = np.array([[18945, -17361], [10160, -6096]])
    # output scale: the fp32 output's |max| (16.9666) / 127; requantised: acc * 2**-4 * [2**-7, 2**-6] / that
    scale = float(np.max(np.abs(a.astype(np.float32) @ b.astype(np.float32)))) / 127
    assert np.array_equal(np.rint(acc * 2.0 ** -4 * np.array([2.0 ** -7, 2.0 ** -6]) / scale),
                          [[69, -127], [37, -45]])
    graph, feeds = matmul(a, b)
    got = emulate(graph, feeds, precision("int8")).outputs[graph.outputs[0]]
    assert np.array_equal(got, (np.array([[69, -127], [37, -45]]) * scale).astype(np.float32))


def test_an_accumulator_wraps_at_its_width():
    assert wrap(np.array([40000, -40000, 32767, -32768]), 16).tolist() == [-25536, 25536, 32767, -32768]
    assert wrap(np.array([2 ** 31]), 32).tolist() == [-2 ** 31]


def test_bf16_matmul_is_torchs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    # a needs 10 significant bits (rounded to bf16's 8), b is exact; every sum of bf16 products is exact in fp32,
    # so the order PyTorch adds in does not matter and only the roundings are compared
    a = rng.integers(-1000, 1000, size=(4, 64)) / 64
    b = rng.integers(-20, 20, size=(64, 8)) / 8
    expected = torch.matmul(torch.tensor(a, dtype=torch.bfloat16), torch.tensor(b, dtype=torch.bfloat16))
    graph, feeds = matmul(a, b)
    run = emulate(graph, feeds, precision("bf16"))
    got = run.outputs[graph.outputs[0]]
    assert np.array_equal(got, expected.float().numpy())
    assert not np.array_equal(got, run.reference[graph.outputs[0]])


def test_error_figures_are_numpys_and_the_table_prints_them(capsys):
    graph, feeds = small_cnn()
    run = emulate(graph, feeds, precision("bf16"))
    [error] = run.errors
    name = graph.outputs[0]
    diff = np.abs(run.outputs[name].astype(np.float64) - run.reference[name].astype(np.float64))
    assert error.max_abs == pytest.approx(np.max(diff), rel=1e-12) and error.max_abs > 0
    assert error.mean_abs == pytest.approx(np.mean(diff), rel=1e-12)
    assert error.relative == pytest.approx(np.mean(diff) / np.mean(np.abs(run.reference[name].astype(np.float64))),
                                           rel=1e-12)
    table = error_table(run.errors)
    assert f"{np.max(diff):.4g}" in table and f"{np.mean(diff):.4g}" in table
    # the reference is the interpreter's own run
    _, plain = accelsim.evaluate(graph, inputs=feeds)
    assert np.array_equal(run.reference[name], plain[name])


def test_a_small_cnn_at_int8_is_close_but_not_exact():
    graph, feeds = small_cnn()
    run = emulate(graph, feeds, precision("int8"))
    [error] = run.errors
    # int8 steps are 1/127 of each tensor's range: three requantised products stay within a few percent
    assert 1e-3 < error.relative < 0.05 and 0 < error.max_relative < 0.05
    assert dict(run.products) == {"Conv": 2, "Gemm": 1}


def test_fp32_changes_nothing():
    graph, feeds = small_cnn()
    run = emulate(graph, feeds, precision("fp32"))
    [error] = run.errors
    assert error.max_abs == 0 and error.mean_abs == 0
    assert np.array_equal(run.outputs[graph.outputs[0]], run.reference[graph.outputs[0]])


def test_an_arch_gives_the_accumulator_width_and_its_dtype(tmp_path):
    text = open("archs/systolic_8x8.yaml").read().replace("accumulator_bits: 32", "accumulator_bits: 12")
    (tmp_path / "narrow.yaml").write_text(text)
    a = np.array([[7.9375, -2.53125, 0.5], [1.0, -7.9375, 0.03125]])      # as in the int8 test above
    b = np.array([[0.9921875, -1.984375], [-0.5, 0.5], [0.25, 0.1]])
    graph, feeds = matmul(a, b)
    run = evaluate_at(graph, arch=str(tmp_path / "narrow.yaml"), inputs=feeds)    # the arch's dtype: int8
    assert run.precision.dtype == DType.int8 and run.precision.accumulator_bits == 12
    # [[18945, -17361], [10160, -6096]] modulo 4096, in -2048..2047
    wrapped = np.array([[18945 - 5 * 4096, -17361 + 4 * 4096], [10160 - 2 * 4096, -6096 + 1 * 4096]])
    assert wrapped.tolist() == [[-1535, -977], [1968, -2000]]
    scale = float(np.max(np.abs(a.astype(np.float32) @ b.astype(np.float32)))) / 127
    q = np.rint(wrapped * 2.0 ** -4 * np.array([2.0 ** -7, 2.0 ** -6]) / scale)
    assert np.array_equal(run.outputs[graph.outputs[0]], (q * scale).astype(np.float32))


def test_int8_conv_is_torchs_conv_of_the_int8_values():
    """Per-channel weight scales, the bias in the accumulator and the requantisation, against torch's conv2d on
    the same integers in float64 (exact)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    builder = Builder("conv")
    x = builder.input("x", (1, 3, 6, 6))
    w, bias = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    out = builder.node("Conv", [x, builder.weight("w", w.shape, value=w), builder.weight("b", (4,), value=bias)],
                       pads=[1, 1, 1, 1])
    graph = builder.build([out])
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    run = emulate(graph, feeds, precision("int8"))
    # the values as the model holds them (fp32), divided in float64
    w32, b32, x32 = (v.astype(np.float32).astype(np.float64) for v in (w, bias, feeds["x"]))
    sx = float(np.max(np.abs(x32))) / 127
    sw = np.max(np.abs(w32), axis=(1, 2, 3)) / 127            # one per output channel
    qx = np.clip(np.rint(x32 / sx), -128, 127)
    qw = np.clip(np.rint(w32 / sw[:, None, None, None]), -128, 127)
    acc = torch.nn.functional.conv2d(torch.tensor(qx), torch.tensor(qw), padding=1).numpy()
    acc = acc + np.rint(b32 / (sx * sw))[None, :, None, None]
    sy = float(np.max(np.abs(run.reference[out]))) / 127
    q = np.clip(np.rint(acc * (sx * sw)[None, :, None, None] / sy), -128, 127)
    assert np.array_equal(run.outputs[out], (q * sy).astype(np.float32))


@pytest.mark.parametrize("argv, words", [
    (["--dtype", "int4"], "eval emulates fp32, bf16, fp16, fp8, fp8_e5m2, int8"),
    (["--dtype", "float8"], "eval emulates fp32, bf16, fp16, fp8, fp8_e5m2, int8"),
    (["--dtype", "bf16", "--arch", "tpu_v1"], "tpu_v1 has no matrix unit computing in it; of the dtypes eval "
                                              "emulates it computes in int8"),
    (["--dtype", "int8", "--train"], "--dtype applies to inference"),
])
def test_a_dtype_eval_does_not_emulate_exits_2(capsys, argv, words):
    assert main(["eval", "resnet18", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_the_help_names_every_dtype_eval_emulates():
    from accelsim.cli import build_parser
    from accelsim.sim.precision import OPERANDS

    evaluate = build_parser(["eval"])._subparsers._group_actions[0].choices["eval"]
    dtype = next(action for action in evaluate._actions if "--dtype" in action.option_strings)
    assert all(d.value in dtype.help for d in OPERANDS)


def test_a_built_in_models_own_dtype_is_still_an_opt(capsys):
    """--opt dtype=fp16 builds the model in fp16 (its reference), --dtype int8 runs its products at int8."""
    tiny = ["--seq", "8", "--opt", "layers=1", "--opt", "hidden=32", "--opt", "heads=2", "--opt", "mlp=64",
            "--opt", "vocab=128", "--opt", "max_positions=16", "--opt", "dtype=fp16"]
    assert main(["eval", "gpt2", *tiny]) == 0
    assert "logits: shape [1, 8, 128] float16" in capsys.readouterr().out
    assert main(["eval", "gpt2", *tiny, "--dtype", "int8"]) == 0
    assert "products at int8: MatMul 8, Gemm 1" in capsys.readouterr().out


def test_the_command_prints_every_output_and_writes_the_emulated_ones(tmp_path, capsys):
    tiny = ["--seq", "8", *[item for option in ("layers=1", "hidden=32", "heads=2", "mlp=64", "vocab=128",
                                                  "max_positions=16") for item in ("--opt", option)]]
    assert main(["eval", "gpt2", *tiny, "--dtype", "bf16", "--out", str(tmp_path / "out.npz")]) == 0
    printed = capsys.readouterr().out
    run = evaluate_at("gpt2", "bf16", seq=8, layers=1, hidden=32, heads=2, mlp=64, vocab=128, max_positions=16)
    assert "products at bf16: MatMul 8, Gemm 1" in printed and "Softmax 1" in printed.split("in fp32:")[1]
    with np.load(tmp_path / "out.npz") as written:
        assert sorted(written.files) == sorted(run.outputs)
        for error in run.errors:
            assert np.array_equal(written[error.name], run.outputs[error.name])
            assert f"{error.name}  " in printed and f"{error.max_abs:.4g}" in printed


@pytest.mark.parametrize("dtype, fp8, largest", [("fp8", "float8_e4m3fn", 448.0), ("fp8_e5m2", "float8_e5m2", 57344.0)])
def test_fp8_operands_are_scaled_onto_the_format_and_written_as_bf16(dtype, fp8, largest):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((3, 16)), rng.standard_normal((16, 5))
    graph, feeds = matmul(a, b)
    got = emulate(graph, feeds, precision(dtype)).outputs[graph.outputs[0]]
    a32, b32 = feeds["x"], b.astype(np.float32)
    sa, sb = float(np.max(np.abs(a32))) / largest, float(np.max(np.abs(b32))) / largest   # |max| onto the largest
    qa = (a32 / np.float32(sa)).astype(getattr(ml_dtypes, fp8)).astype(np.float32)
    qb = (b32 / np.float32(sb)).astype(getattr(ml_dtypes, fp8)).astype(np.float32)
    expected = ((qa @ qb) * np.float32(sa * sb)).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(got, expected)


def test_an_arch_naming_fp8_computes_both_formats():
    graph, feeds = matmul(np.ones((2, 3)), np.ones((3, 2)))
    assert evaluate_at(graph, "fp8_e5m2", arch="h100", inputs=feeds).precision.operands == DType.fp8_e5m2


def test_bf16_stores_what_computes_on_bf16_results_and_keeps_softmax_and_the_inputs_path_in_fp32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    builder = Builder("autocast")
    x = builder.input("x", (2, 8))
    relu = builder.node("Relu", [builder.node("MatMul", [x, builder.weight("w", (8, 8))])])
    soft = builder.node("Softmax", [relu], axis=-1)
    mixed = builder.node("Add", [x, relu])             # an fp32 input with a bf16 result: fp32, as autocast promotes
    graph = builder.build([relu, soft, mixed])
    feeds = {"x": np.random.default_rng(6).standard_normal((2, 8)).astype(np.float32)}
    run = emulate(graph, feeds, precision("bf16"))

    def on_bf16_grid(v):
        return np.array_equal(v, v.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert on_bf16_grid(run.outputs[relu])
    assert not on_bf16_grid(run.outputs[soft]) and not on_bf16_grid(run.outputs[mixed])
    assert dict(run.low) == {"Relu": 1} and dict(run.fp32) == {"Softmax": 1, "Add": 1}


def conv_bn_relu(constant_statistics: bool = True):
    """Conv (no bias) -> BatchNormalization -> Relu, and the feeds; the BatchNorm's mean a runtime input unless
    `constant_statistics`."""
    rng = np.random.default_rng(8)
    builder = Builder("conv_bn")
    x = builder.input("x", (1, 3, 6, 6))
    conv = builder.node("Conv", [x, builder.weight("w", (4, 3, 3, 3))], pads=[1, 1, 1, 1])
    mean = builder.weight("mean", (4,), value=rng.standard_normal(4)) if constant_statistics else \
        builder.input("mean", (4,))
    bn = builder.node("BatchNormalization", [conv, builder.weight("gamma", (4,), value=rng.uniform(0.5, 2, 4)),
                                             builder.weight("beta", (4,), value=rng.standard_normal(4)), mean,
                                             builder.weight("var", (4,), value=rng.uniform(0.5, 2, 4))],
                      epsilon=1e-3)
    out = builder.node("Relu", [bn])
    feeds = {"x": rng.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    if not constant_statistics:
        feeds["mean"] = np.zeros(4, np.float32)
    return builder.build([out]), feeds


def test_a_batchnorm_after_a_conv_is_folded_into_it_as_a_deployment_does():
    from accelsim.sim.deploy import fold_batchnorm

    graph, feeds = conv_bn_relu()
    folded, count = fold_batchnorm(graph)
    assert count == 1 and [node.op for node in folded.nodes] == ["Conv", "Relu"]
    assert [node.op for node in graph.nodes] == ["Conv", "BatchNormalization", "Relu"]      # left as it was
    _, before = accelsim.evaluate(graph, inputs=feeds)
    _, after = accelsim.evaluate(folded, inputs=feeds)
    assert np.allclose(after[graph.outputs[0]], before[graph.outputs[0]], rtol=1e-5, atol=1e-6)
    graph, feeds = conv_bn_relu(constant_statistics=False)          # a runtime statistic: nothing to fold
    assert fold_batchnorm(graph)[1] == 0


def test_int8_conv_bn_relu_requantises_after_the_relu_of_the_folded_sums():
    torch = pytest.importorskip("torch")
    from accelsim.sim.deploy import fold_batchnorm

    graph, feeds = conv_bn_relu()
    run = emulate(graph, feeds, precision("int8"))
    assert run.folded == 1 and dict(run.fused) == {"Relu": 1} and dict(run.fp32) == {}
    folded, _ = fold_batchnorm(graph)
    _, deployed = accelsim.evaluate(folded, inputs=feeds)          # the scales' source: the deployed graph in fp32
    out = graph.outputs[0]
    w, b = (folded.weights[name].astype(np.float64) for name in folded.nodes[0].inputs[1:])
    x = feeds["x"].astype(np.float64)
    sx, sw = np.max(np.abs(x)) / 127, np.max(np.abs(w), axis=(1, 2, 3)) / 127
    qx, qw = np.clip(np.rint(x / sx), -128, 127), np.clip(np.rint(w / sw[:, None, None, None]), -128, 127)
    acc = torch.nn.functional.conv2d(torch.tensor(qx), torch.tensor(qw), padding=1).numpy()
    acc = np.maximum(acc + np.rint(b / (sx * sw))[None, :, None, None], 0)            # the ReLU on the sums
    sy = float(np.max(np.abs(deployed[out]))) / 127                                  # the ReLU output's scale
    q = np.clip(np.rint(acc * (sx * sw)[None, :, None, None] / sy), -128, 127)
    assert np.array_equal(run.outputs[out], (q * sy).astype(np.float32))
    assert np.array_equal(run.reference[out], accelsim.evaluate(graph, inputs=feeds)[1][out])   # the model as given
