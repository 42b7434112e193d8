"""Real exporter output: tiny random-weight Hugging Face models (GPT-2, BERT, ViT, Llama, T5, Whisper) exported by
PyTorch's TorchScript and dynamo exporters evaluate in `accelsim eval` as onnxruntime runs them, and simulate in
`accelsim run`; their symbolic batch and sequence dimensions are bound by --batch/--seq or --shape, and one left
unbound is an error naming it and the flag that sets it.

Float32 logits are compared at rtol 1e-4, atol 1e-5. Every model x exporter is evaluated and simulated on the three
float presets; each is exported once for the module (the exports take most of the file's minute).
"""
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from accelsim.cli import main
from tests.compiler.exporter_models import EXPORTERS, MODELS, VOCAB, export

PRESETS = ("a100", "h100", "tpu_v4")
CELLS = [(name, exporter) for name in MODELS for exporter in EXPORTERS]
RTOL, ATOL = 1e-4, 1e-5
BATCH, SEQ, DECODER_SEQ = 3, 6, 5     # not the export's example sizes: the axes must have stayed symbolic


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """Each (model, exporter) exported once for the module, on first use."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("exports")
    done = {}

    def get(name, exporter):
        if exporter == "dynamo":
            pytest.importorskip("onnxscript")
        if (name, exporter) not in done:
            done[name, exporter] = export(name, exporter, folder)
        return done[name, exporter]
    return get


def _inputs(exported, rng) -> dict[str, np.ndarray]:
    """Fresh inputs of BATCH and SEQ (DECODER_SEQ for a decoder), of the exported inputs' kinds."""
    inputs = {}
    for key, value in exported.inputs.items():
        if key not in exported.sequence_inputs:
            inputs[key] = rng.standard_normal((BATCH, *value.shape[1:])).astype(value.dtype)
        elif key == "attention_mask":
            inputs[key] = np.ones((BATCH, SEQ), value.dtype)
            inputs[key][0, SEQ - 2:] = 0
        else:
            inputs[key] = rng.integers(0, VOCAB, (BATCH, DECODER_SEQ if key.startswith("decoder") else SEQ),
                                       dtype=value.dtype)
    return inputs


def _binding(exported) -> list[str]:
    flags = ["--batch", str(BATCH)]
    if exported.sequence_inputs:
        flags += ["--seq", str(SEQ)]
    if "decoder_input_ids" in exported.inputs:
        flags += ["--shape", f"decoder_sequence={DECODER_SEQ}"]
    return flags


@pytest.mark.parametrize("name, exporter", CELLS)
def test_eval_matches_onnxruntime(name, exporter, exports, tmp_path, capsys):
    import onnxruntime as ort

    exported = exports(name, exporter)
    inputs = _inputs(exported, np.random.default_rng(1))
    np.savez(tmp_path / "in.npz", **inputs)
    code = main(["eval", str(exported.path), *_binding(exported), "--inputs", str(tmp_path / "in.npz"),
                 "--out", str(tmp_path / "out.npz")])
    assert code == 0, capsys.readouterr().err
    got = np.load(tmp_path / "out.npz")["logits"]
    want = ort.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    assert got.shape == want.shape and got.shape[0] == BATCH
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name, exporter", CELLS)
def test_run_simulates(name, exporter, preset, exports, tmp_path, capsys):
    exported = exports(name, exporter)
    code = main(["run", str(exported.path), "--arch", preset, *_binding(exported), "--json", str(tmp_path / "r.json")])
    assert code == 0, capsys.readouterr().err
    totals = json.loads((tmp_path / "r.json").read_text())["totals"]
    assert totals["cycles"] > 0 and totals["seconds"] > 0 and totals["macs"] > 0


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_an_exported_sequence_left_unbound_is_named(exporter, exports, capsys):
    path = exports("t5", exporter).path
    assert main(["eval", str(path), "--batch", "2", "--shape", "decoder_sequence=4"]) == 2
    err = capsys.readouterr().err
    assert "'input_ids': dimension 1 is symbolic ('sequence'); set it with --seq N, --shape sequence=N or " \
           "--shape input_ids=D0,D1" in err


def _macs(path: Path, flags: list[str], tmp_path: Path, capsys) -> int:
    code = main(["run", str(path), "--arch", "a100", *flags, "--fidelity", "roofline",
                 "--json", str(tmp_path / "r.json")])
    assert code == 0, capsys.readouterr().err
    return json.loads((tmp_path / "r.json").read_text())["totals"]["macs"]


@pytest.mark.parametrize("name", MODELS)
def test_both_exporters_give_the_same_macs(name, exports, tmp_path, capsys):
    """The two exporters decompose attention, norms and masks differently, but the model's multiply-adds are
    the same: a matrix product lost or doubled in one import shows here."""
    torchscript, dynamo = (exports(name, exporter) for exporter in EXPORTERS)
    assert _macs(torchscript.path, _binding(torchscript), tmp_path, capsys) == \
        _macs(dynamo.path, _binding(dynamo), tmp_path, capsys) > 0


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_gpt2_macs_are_counted_by_hand(exporter, exports, tmp_path, capsys):
    """GPT-2 (2 layers, width 32, 2 heads, vocabulary 100), batch 2 x 8 tokens: per token and layer the
    projections QKV (32x96), output (32x32) and MLP (32x128, 128x32), then the head 32x100; per sequence, layer
    and head the scores QK^T and their product with V, each 8x8x16."""
    tokens = 2 * 8
    projections = tokens * (2 * (32 * 96 + 32 * 32 + 2 * 32 * 128) + 32 * VOCAB)
    attention = 2 * 2 * 2 * (2 * 8 * 8 * 16)      # batch x layers x heads x (QK^T + AV)
    path = exports("gpt2", exporter).path
    assert _macs(path, ["--batch", "2", "--seq", "8"], tmp_path, capsys) == projections + attention


def _symbolic_model(path: Path) -> Path:
    """x[batch, sequence, 4] -> Relu, and a mask[batch, sequence] summed in: two inputs share two names."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence", 4])
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "sequence"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Unsqueeze", ["mask", "axes"], ["m"]),
             helper.make_node("Add", ["r", "m"], ["y"])]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    graph = helper.make_graph(nodes, "symbolic", [x, mask], [y], initializer=[axes])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("flags, dimension, hint", [
    ([], "dimension 0 is symbolic ('batch')", "--batch N"),
    (["--batch", "2"], "dimension 1 is symbolic ('sequence')", "--seq N"),
    (["--seq", "5"], "dimension 0 is symbolic ('batch')", "--shape batch=N"),
    (["--shape", "sequence=5"], "'x': dimension 0 is symbolic ('batch')", "--shape x=D0,D1,D2"),
])
def test_an_unbound_dimension_is_named_with_the_flag_that_sets_it(flags, dimension, hint, tmp_path, capsys):
    path = _symbolic_model(tmp_path / "m.onnx")
    for command in (["eval"], ["run", "--arch", "a100"]):
        assert main([*command[:1], str(path), *command[1:], *flags]) == 2
        err = capsys.readouterr().err
        assert dimension in err and hint in err and "input_shapes" not in err and "internal error" not in err


def test_an_unnamed_dimension_offers_only_the_flags_that_reach_it(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None])      # no dim_param: not by name
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "unnamed", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "u.onnx")
    assert main(["eval", str(tmp_path / "u.onnx"), "--batch", "2"]) == 2
    assert "'x': dimension 1 is unsized; set it with --shape x=D0,D1\n" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "u.onnx"), "--shape", "x=2,3"]) == 0


@pytest.mark.parametrize("flags", [
    ["--batch", "2", "--seq", "5"],
    ["--shape", "x=2,5,4", "--shape", "mask=2,5"],
    ["--shape", "x=2,5,4"],                                      # x's shape sizes the names mask shares
    ["--shape", "batch=2", "--shape", "sequence=5"],
    ["--batch", "2", "--shape", "sequence=5"],
    ["--batch", "2", "--seq", "9", "--shape", "sequence=5"],     # a named size wins over --seq
])
def test_shape_and_batch_seq_bind_every_input(flags, tmp_path, capsys):
    path = _symbolic_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(0)
    inputs = {"x": rng.standard_normal((2, 5, 4)).astype(np.float32),
              "mask": rng.standard_normal((2, 5)).astype(np.float32)}
    np.savez(tmp_path / "in.npz", **inputs)
    assert main(["eval", str(path), *flags, "--inputs", str(tmp_path / "in.npz"), "--out",
                 str(tmp_path / "out.npz")]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"],
                                  np.maximum(inputs["x"], 0) + inputs["mask"][:, :, None])
    assert main(["run", str(path), "--arch", "h100", *flags, "--json", str(tmp_path / "r.json")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["model"]["batch"] == 2


@pytest.mark.parametrize("flags, message", [
    (["--shape", "x=2,five,4"], "expected NAME=D0,D1,... with positive integer sizes"),
    (["--shape", "x=2,0,4"], "expected NAME=D0,D1,... with positive integer sizes"),
    (["--shape", "x"], "expected NAME=D0,D1,..."),
    (["--shape", "y=2,5,4"], "'y': not a graph input (inputs: x, mask), nor a symbolic dimension "
                             "(batch, sequence)"),
    (["--shape", "sequence=2,5"], "'sequence' is a symbolic dimension; give it one positive size"),
    (["--shape", "x=2,5", "--shape", "mask=2,5"], "--shape gives rank 2 ([2, 5]), the model rank 3"),
    (["--shape", "x=2,5,4", "--shape", "x=2,5,4"], "--shape x given twice"),
    (["--batch", "2", "--seq", "0"], "--seq 0: must be a positive integer"),
])
def test_bad_shapes_are_named(flags, message, tmp_path, capsys):
    path = _symbolic_model(tmp_path / "m.onnx")
    assert main(["eval", str(path), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "internal error" not in err


def test_seq_needs_a_symbolic_second_dimension_and_shape_an_onnx_file(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "fixed", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "f.onnx")
    assert main(["eval", str(tmp_path / "f.onnx"), "--batch", "2", "--seq", "4"]) == 2
    assert "--seq 4: no graph input has a named symbolic second dimension" in capsys.readouterr().err
    assert main(["run", "resnet18", "--shape", "image=1,3,32,32"]) == 2
    assert "--shape applies to ONNX files" in capsys.readouterr().err


def test_python_takes_the_same_bindings(tmp_path):
    import accelsim

    path = _symbolic_model(tmp_path / "m.onnx")
    by_flags = accelsim.run(path, arch="tpu_v4", batch=2, seq=5)
    by_shape = accelsim.run(path, arch="tpu_v4", shapes={"x": (2, 5, 4)})
    assert by_flags.totals()["bytes"] == by_shape.totals()["bytes"] > 0
    inputs, outputs = accelsim.evaluate(path, shapes={"batch": (2,), "sequence": (5,)})
    assert outputs["y"].shape == (2, 5, 4) and inputs["mask"].shape == (2, 5)
