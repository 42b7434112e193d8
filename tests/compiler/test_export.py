"""Export to ONNX: the checker and onnxruntime accept what we write, and import(export(g)) == g."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import export
from compiler.builder import Builder
from compiler.compare import graphs_equal
from compiler.dtypes import DType
from compiler.errors import MissingWeightsError, ModelError, UserError
from compiler.export import save_onnx, to_model
from compiler.frontend import TERNARY_MARK, from_model, load_onnx
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower

ort = pytest.importorskip("onnxruntime")


def run_ort(model: onnx.ModelProto | str, feeds):
    source = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def mixed_graph(weights: bool = True):
    """Element-wise ops over weights of every storable dtype, with attributes of several types."""
    b = Builder("mixed", weights=weights, opset=19)  # Cast from float8 is opset 19
    x = b.input("x", (2, 3))
    h = b.node("LeakyRelu", [b.node("Add", [x, b.weight("w", (2, 3))])], alpha=1)  # int for a FLOAT attr
    h = b.node("Mul", [h, b.node("Cast", [b.weight("half", (3,), dtype=DType.fp16)], to=TensorProto.FLOAT)])
    h = b.node("Add", [h, b.node("Cast", [b.weight("brain", (3,), dtype=DType.bf16)], to=TensorProto.FLOAT)])
    h = b.node("Sub", [h, b.node("Cast", [b.weight("eight", (3,), dtype=DType.fp8)], to=TensorProto.FLOAT)])
    tern = b.weight("tern", (3,), dtype=DType.ternary, value=np.array([1, 0, -1]) if weights else None)
    h = b.node("Mul", [h, b.node("Cast", [tern], to=TensorProto.FLOAT)])
    h = b.node("Clip", [h, b.const(np.float32(-0.75)), b.const(np.float32(2.5))])
    return b.build([b.node("Tanh", [h])])


def feeds_for(graph, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(graph.tensor(n).shape).astype(graph.tensor(n).dtype.numpy)
            for n in graph.inputs}


def test_exported_model_passes_full_check_and_matches_onnxruntime():
    g = mixed_graph()
    model = to_model(g)
    onnx.checker.check_model(model, full_check=True)
    feeds = feeds_for(g)
    expected = run_graph(g, feeds)
    got = run_ort(model, feeds)
    np.testing.assert_allclose(got[g.outputs[0]], expected[g.outputs[0]], rtol=1e-6, atol=1e-6)


def test_round_trip_is_exact_for_every_weight_dtype():
    g = mixed_graph()
    back = from_model(to_model(g))
    assert graphs_equal(g, back) == []
    assert back.tensor("tern").dtype == DType.ternary and back.tensor("eight").dtype == DType.fp8
    assert back.weights["brain"].dtype == np.float32  # bf16 held widened, as DType.bf16.numpy says


def test_ternary_and_narrow_floats_are_stored_as_onnx_expects():
    inits = {t.name: t for t in to_model(mixed_graph()).graph.initializer}
    assert inits["tern"].data_type == TensorProto.INT8 and inits["tern"].doc_string == TERNARY_MARK
    assert numpy_helper.to_array(inits["tern"]).tolist() == [1, 0, -1]
    assert inits["brain"].data_type == TensorProto.BFLOAT16
    assert inits["eight"].data_type == TensorProto.FLOAT8E4M3FN
    assert inits["half"].data_type == TensorProto.FLOAT16


def test_graphs_equal_reports_each_kind_of_difference():
    a, b = mixed_graph(), mixed_graph()
    assert graphs_equal(a, b) == []
    b.weights["w"] = b.weights["w"].copy()
    b.weights["w"].flat[0] = np.nextafter(b.weights["w"].flat[0], np.float32(9))  # one ulp
    b.nodes[1].attrs["alpha"] = 0.5
    diffs = graphs_equal(a, b)
    assert any("'w'" in d and "values differ" in d for d in diffs)
    assert any("alpha" in d for d in diffs)
    c = mixed_graph()
    c.nodes[0].inputs = ("w", "x")
    assert any("inputs" in d for d in graphs_equal(a, c))


def test_value_info_carries_every_intermediate_shape():
    g = mixed_graph()
    model = to_model(g)
    inner = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info}
    for node in g.nodes[:-1]:
        assert inner[node.outputs[0]] == list(g.tensor(node.outputs[0]).shape)
    assert model.opset_import[0].version == g.opset


def test_shape_only_graph_cannot_be_exported():
    with pytest.raises(ModelError, match="export needs weights"):
        to_model(mixed_graph(weights=False))


def test_non_ternary_values_in_a_ternary_weight_are_refused():
    g = mixed_graph()
    g.weights["tern"] = np.array([1, 2, -1], dtype=np.int8)
    with pytest.raises(ModelError, match="'tern'.*other than -1, 0 and \\+1"):
        to_model(g)


def test_helper_built_model_round_trips_through_the_compiler(tmp_path):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"], name="scale"),
             helper.make_node("Elu", ["m"], ["e"], name="elu", alpha=0.3),
             helper.make_node("Sigmoid", ["e"], ["y"], name="gate")]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])], [w])
    original = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    g = from_model(original)
    path = save_onnx(g, tmp_path / "tiny.onnx")
    again = load_onnx(path)
    assert graphs_equal(g, again) == []
    assert again.node("elu").attrs["alpha"] == pytest.approx(0.3)
    feeds = {"x": np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)}
    np.testing.assert_array_equal(run_ort(str(path), feeds)["y"], run_ort(original, feeds)["y"])
    np.testing.assert_allclose(run_graph(again, feeds)["y"], run_ort(original, feeds)["y"], rtol=1e-6)


def test_external_data_round_trip_and_missing_data(tmp_path):
    g = mixed_graph()
    big = Builder("wide")
    x = big.input("x", (64, 256))
    y = big.build([big.node("Add", [x, big.weight("bias", (64, 256))])])
    path = save_onnx(y, tmp_path / "wide.onnx", external_data=True)
    data = tmp_path / "wide.onnx.data"
    assert data.stat().st_size >= 64 * 256 * 4 and path.stat().st_size < 64 * 256 * 4
    back = load_onnx(path)
    assert graphs_equal(y, back) == []
    feeds = feeds_for(y)
    np.testing.assert_array_equal(run_ort(str(path), feeds)["add"], run_graph(y, feeds)["add"])
    data.unlink()
    shapes_only = load_onnx(path)              # still imports and lowers: simulation needs no values
    assert shapes_only.weights["bias"] is None and shapes_only.tensor("bias").shape == (64, 256)
    ir = lower(shapes_only)
    with pytest.raises(MissingWeightsError, match="bias"):
        run_graph(shapes_only, feeds)
    with pytest.raises(MissingWeightsError, match="bias"):
        run_ir(ir, feeds)
    with pytest.raises(ModelError, match="export needs weights"):
        to_model(shapes_only)
    assert graphs_equal(g, from_model(to_model(g))) == []


def test_large_models_switch_to_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "EXTERNAL_THRESHOLD_BYTES", 1000)
    b = Builder("big")
    y = b.build([b.node("Add", [b.input("x", (32, 32)), b.weight("w", (32, 32))])])
    save_onnx(y, tmp_path / "big.onnx")
    assert (tmp_path / "big.onnx.data").is_file()
    assert graphs_equal(y, load_onnx(tmp_path / "big.onnx")) == []


def test_export_to_another_opset_converts_the_model():
    b = Builder("clip", opset=11)
    x = b.input("x", (4, 5))
    g = b.build([b.node("Clip", [b.node("Mul", [x, b.weight("w", (5,))]), b.const(np.float32(-0.5))])])
    model = to_model(g, opset=17)
    assert {o.domain: o.version for o in model.opset_import}[""] == 17
    onnx.checker.check_model(model, full_check=True)
    feeds = feeds_for(g)
    np.testing.assert_allclose(run_ort(model, feeds)["clip"], run_graph(g, feeds)["clip"], rtol=1e-6)
    with pytest.raises(ModelError, match="cannot convert from opset 11 to 9"):
        to_model(g, opset=9)   # onnx's converter has no adapter down across Clip's opset 11 change


def scan_graph():
    """An RNN-like Scan whose body is a compiler Graph built in Python: h' = tanh(decay * h + x_t)."""
    cell = Builder("cell")
    h, x = cell.input("h", (4,)), cell.input("x_t", (4,))
    h_next = cell.node("Tanh", [cell.node("Add", [cell.node("Mul", [h, cell.weight("decay", (4,))]), x])])
    body = cell.build([h_next, cell.node("Relu", [h_next])])
    b = Builder("rnn")
    last, ys = b.node("Scan", [b.input("h0", (4,)), b.input("xs", (5, 4))], outputs=2, body=body,
                      num_scan_inputs=1)
    return b.build([last, ys])


def test_scan_body_built_in_python_exports_as_a_graph_attribute():
    g = scan_graph()
    model = to_model(g)
    onnx.checker.check_model(model, full_check=True)
    body = model.graph.node[0].attribute[0]
    assert body.type == onnx.AttributeProto.GRAPH and body.g.initializer[0].name == "decay"
    back = from_model(model)
    assert isinstance(back.nodes[0].attrs["body"], onnx.GraphProto)  # imported bodies stay protos
    assert graphs_equal(g, back) == [] and graphs_equal(back, from_model(to_model(back))) == []
    feeds = feeds_for(g)
    expected = run_ort(model, feeds)
    for name in g.outputs:
        np.testing.assert_allclose(run_graph(back, feeds)[name], expected[name], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(run_ir(lower(back), feeds)[name], expected[name], rtol=1e-6, atol=1e-6)


def test_a_rank_graph_with_collectives_exports_in_their_own_domain(tmp_path):
    """One rank of AlexNet split over two GPUs: its all-gathers are ops of the custom domain ai.accelsim.comm, which
    has no IR version of its own (onnx's table knows only its standard domains)."""
    from compiler import zoo
    from compiler.ops.base import COMM_DOMAIN
    from compiler.parallel.tensor import partition

    whole = zoo.build("alexnet", batch=2, image=63, width=1 / 16, fc=32, classes=10)
    rank = partition(whole, 2, groups=True)
    model = to_model(rank)
    assert {o.domain: o.version for o in model.opset_import} == {"": 17, COMM_DOMAIN: 1}
    assert model.ir_version == to_model(whole).ir_version
    assert [n.op_type for n in model.graph.node if n.domain == COMM_DOMAIN] == ["AllGather"] * 5
    path = save_onnx(rank, tmp_path / "rank0.onnx")       # onnx's full checker reads it back
    assert graphs_equal(rank, load_onnx(path)) == []


@pytest.mark.parametrize("name, opset", [("cnn", 9), ("transformer", 13), ("transformer", 20),
                                         ("alexnet", 17)])
def test_torch_exports_round_trip(tmp_path, name, opset):
    from tests.compiler.torch_models import export as export_torch

    path, x, expected = export_torch(tmp_path, name, opset)
    g = load_onnx(path)
    again = save_onnx(g, tmp_path / "again.onnx")
    assert graphs_equal(g, load_onnx(again)) == []
    np.testing.assert_allclose(run_ort(str(again), {"x": x})["y"], run_ort(str(path), {"x": x})["y"],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run_ort(str(again), {"x": x})["y"], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("external_data", [False, True])
def test_a_full_disk_keeps_the_previous_model_and_its_data(small_disk, external_data):
    """Both files of a model with external data are written aside: a full disk leaves the previous pair whole."""
    b = Builder("big", weights=True)
    g = b.build([b.node("MatMul", [b.input("x", (1, 512)), b.weight("w", (512, 512))])])
    model, data = small_disk.path / "m.onnx", small_disk.path / "m.onnx.data"
    model.write_bytes(b"previous model")
    data.write_bytes(b"previous data")
    small_disk.fill()
    with pytest.raises(UserError, match=r"m.onnx(.data)?: cannot write \(No space left on device\)"):
        save_onnx(g, model, external_data=external_data)
    assert model.read_bytes() == b"previous model" and data.read_bytes() == b"previous data"
    assert sorted(p.name for p in small_disk.path.iterdir()) == ["filler", "m.onnx", "m.onnx.data"]


def test_a_model_that_fails_the_checker_leaves_the_previous_file(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise onnx.checker.ValidationError("made to fail")

    monkeypatch.setattr(onnx.checker, "check_model", refuse)
    (tmp_path / "m.onnx").write_bytes(b"previous model")
    with pytest.raises(ModelError, match="fails onnx's checker"):
        save_onnx(mixed_graph(), tmp_path / "m.onnx")
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]
    assert (tmp_path / "m.onnx").read_bytes() == b"previous model"
