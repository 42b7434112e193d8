"""RNN, GRU and LSTM: against onnxruntime over directions and attributes, onnx's conformance cases, the unrolled
lowering (one input projection, per step a recurrent Einsum and gate Maps) priced on a unit, and bad input."""
import numpy as np
import pytest
from onnx import helper

from accelsim.sim.api import run
from compiler.errors import ModelError
from compiler.frontend import from_model
from compiler.ir import OpKind
from compiler.ops.interpret import run_graph, run_ir
from compiler.ops.lower import lower
from tests.compiler.onnx_models import F32, I32, floats, init, model
from tests.compiler.oracle import check_against_ort, ort_run
from tests.compiler.ops.onnx_node_cases import check_case, node_cases

S, N, I, H = 4, 3, 5, 6
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
LENS = np.array([4, 2, 3], np.int32)


def _model(op, optional=("B", "lens", "h0", "c0", "P"), outputs=("Y", "Y_h", "Y_c"), layout=0, opset=14,
           w_shape=None, steps=S, **attrs):
    """One node; weights as initializers, X, sequence_lens and the initial states as graph inputs."""
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    g = GATES[op]
    lstm = op == "LSTM"
    state = (dirs, N, H) if layout == 0 else (N, dirs, H)
    x_shape = (steps, N, I) if layout == 0 else (N, steps, I)
    slots = ["X", "W", "R", "B", "lens", "h0"] + (["c0", "P"] if lstm else [])
    names = [s if s in ("X", "W", "R") or s in optional else "" for s in slots]
    while not names[-1]:
        names.pop()
    inits = [init("W", floats(*(w_shape or (dirs, g * H, I)))), init("R", floats(dirs, g * H, H))]
    inits += [init("B", floats(dirs, 2 * g * H))] * ("B" in optional)
    inits += [init("P", floats(dirs, 3 * H))] * (lstm and "P" in optional)
    inputs = [("X", F32, x_shape), ("lens", I32, (N,)), ("h0", F32, state), ("c0", F32, state)]
    feeds = {"X": floats(*x_shape), "lens": LENS * steps // S, "h0": floats(*state), "c0": floats(*state)}
    inputs = [i for i in inputs if i[0] in names]
    outs = [o if o in outputs else "" for o in (("Y", "Y_h", "Y_c") if lstm else ("Y", "Y_h"))]
    while not outs[-1]:
        outs.pop()
    node = helper.make_node(op, names, outs, name="cell", hidden_size=H, layout=layout, **attrs)
    proto = model([node], inputs, [(o, F32) for o in outs if o], opset, inits)
    return proto, {k: v for k, v in feeds.items() if k in names}


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("optional", [("B", "lens", "h0", "c0", "P"), ()], ids=["all_inputs", "no_optional"])
def test_directions_and_optional_inputs_match_onnxruntime(op, direction, optional):
    check_against_ort(*_model(op, optional, direction=direction))


ATTRIBUTES = [
    ("RNN", dict(activations=["Relu"])),
    ("RNN", dict(activations=["LeakyRelu", "HardSigmoid"], activation_alpha=[0.3, 0.4], activation_beta=[0.6],
                 direction="bidirectional")),
    ("RNN", dict(activations=["ScaledTanh"], activation_alpha=[1.5], activation_beta=[0.7], clip=0.8)),
    ("GRU", dict(linear_before_reset=1)),
    ("GRU", dict(linear_before_reset=1, clip=0.5, direction="reverse")),
    ("GRU", dict(activations=["HardSigmoid", "Softsign"], activation_alpha=[0.3], activation_beta=[0.4])),
    ("LSTM", dict(input_forget=1)),
    ("LSTM", dict(clip=0.7, direction="bidirectional")),
    ("LSTM", dict(activations=["Sigmoid", "Affine", "Elu"], activation_alpha=[0.5, 0.9], activation_beta=[0.1])),
    ("LSTM", dict(activations=["sigmoid", "tanh", "softplus", "HardSigmoid", "relu", "ThresholdedRelu"],
                  direction="bidirectional")),
]


@pytest.mark.parametrize("op,attrs", ATTRIBUTES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(ATTRIBUTES)])
def test_attributes_match_onnxruntime(op, attrs):
    check_against_ort(*_model(op, **attrs))


@pytest.mark.parametrize("op,outputs", [("LSTM", ("Y_h",)), ("LSTM", ("Y_c",)), ("GRU", ("Y",)),
                                        ("RNN", ("Y_h",))])
def test_optional_outputs_match_onnxruntime(op, outputs):
    check_against_ort(*_model(op, outputs=outputs, direction="bidirectional"))


@pytest.mark.parametrize("op", sorted(GATES))
def test_batch_major_layout_matches_onnxruntime_on_the_transposed_model(op):
    """onnxruntime's CPU kernels refuse layout 1: the same weights in layout 0, fed transposed, are the oracle."""
    batch_major, feeds = _model(op, layout=1, direction="bidirectional")
    seq_major, _ = _model(op, layout=0, direction="bidirectional")
    del seq_major.graph.initializer[:]
    seq_major.graph.initializer.extend(batch_major.graph.initializer)
    swap = {"X": (1, 0, 2), "h0": (1, 0, 2), "c0": (1, 0, 2)}
    expected = ort_run(seq_major, {k: v.transpose(swap[k]) if k in swap else v for k, v in feeds.items()})
    graph = from_model(batch_major)
    for label, got in (("graph", run_graph(graph, feeds)), ("ir", run_ir(lower(graph), feeds, graph.tensors))):
        for name, want in expected.items():
            want = want.transpose(2, 0, 1, 3) if name == "Y" else want.transpose(1, 0, 2)
            np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-5, err_msg=f"{label} {name}")


def _conformance():
    cases = {**node_cases("rnn"), **node_cases("gru"), **node_cases("lstm")}
    return {name: case for name, case in cases.items() if not name.endswith("_expanded")}


def test_every_conformance_case_is_counted():
    assert len(_conformance()) == 18


@pytest.mark.parametrize("name", sorted(_conformance()))
def test_onnx_conformance_case_graph_and_ir(name):
    check_case(_conformance()[name])


def test_lstm_unrolls_into_priced_ir_ops():
    proto, _ = _model("LSTM", ("B", "h0", "c0"), direction="bidirectional")
    ir = lower(from_model(proto))
    einsums = [o for o in ir.ops if o.kind == OpKind.einsum]
    maps = [o for o in ir.ops if o.kind == OpKind.map]
    # per direction: one projection of all steps (S*N*4H*I MACs), then one recurrent product per step
    assert len(einsums) == 2 * (1 + S)
    assert sum(o.macs for o in einsums) == 2 * (S * N * 4 * H * I + S * N * 4 * H * H)
    # two gate Maps per step (cell state, hidden state), each at least its activations' work
    # (two sigmoids and a tanh: 13 for the cell, a sigmoid and a tanh: 9 for the hidden state)
    assert len(maps) == 2 * 2 * S
    assert all(o.ops >= 9 * N * H for o in maps)


def test_lstm_simulates_with_time_on_a100():
    proto, _ = _model("LSTM", ("B", "h0", "c0"))
    ops = [o for o in run(from_model(proto), arch="a100").ops if o.op == "LSTM"]
    # the per-step slices of the projection are views (a leading-axis slice is contiguous); everything else costs
    views = [o for o in ops if o.name.endswith(":xw") and ":t" in o.name]
    assert len(views) == S and all(o.seconds == 0 for o in views)
    priced = [o for o in ops if o not in views]
    # projection, per step (product, cell, hidden), the steps stacked, then Y, Y_h, Y_c
    assert len(priced) == 1 + 3 * S + 1 + 3
    for o in priced:
        assert o.seconds > 0 and o.cycles > 0 and o.unit and o.bytes > 0, o.name


@pytest.mark.parametrize("op", sorted(GATES))
def test_long_bidirectional_sequence_matches_onnxruntime_and_simulates(op):
    """13 steps a direction: the states are stacked into Y through a tree of Moves (each within codegen's limit
    on an instruction's dependencies), and every op is still priced."""
    proto, feeds = _model(op, steps=13, direction="bidirectional")
    graph = check_against_ort(proto, feeds)
    ops = [o for o in run(graph, arch="a100").ops if ":t" not in o.name or not o.name.endswith(":xw")]
    assert len([o for o in ops if o.name.endswith(".0") or o.name.endswith(".1")]) >= 4   # two levels a direction
    assert all(o.seconds > 0 and o.bytes > 0 for o in ops), [o.name for o in ops if not o.seconds]


def test_wrong_w_shape_names_the_input_and_the_shape_allowed():
    proto, _ = _model("GRU", w_shape=(1, 3 * H, I + 1))
    with pytest.raises(ModelError, match=r"'cell' .*GRU.*input W \('W'\) has shape \[1, 18, 6\].* must be "
                                         r"\[1, 18, 5\]"):
        from_model(proto)


def test_unknown_activation_names_the_allowed_ones():
    proto, _ = _model("RNN", activations=["Swish"])
    with pytest.raises(ModelError, match=r"'cell'.*activation 'Swish' is not supported; allowed: affine, elu"):
        from_model(proto)


def test_wrong_activation_count_is_refused():
    proto, _ = _model("LSTM", activations=["Sigmoid", "Tanh"])
    with pytest.raises(ModelError, match="activations has 2 names; LSTM with 1 direction"):
        from_model(proto)


def test_non_positive_clip_is_refused():
    proto, _ = _model("GRU", clip=0.0)
    with pytest.raises(ModelError, match=r"'cell'.*clip=0.0 is not allowed \(a positive threshold\)"):
        from_model(proto)
