"""Property-based fuzzing of every parser of untrusted input: whatever the bytes, the answer is a result or a
UserError (the CLI's one-line message and exit 2), never another exception. Examples per parser: FUZZ_EXAMPLES
(raise it to fuzz longer: ACCELSIM_FUZZ_EXAMPLES=5000)."""
import copy
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.arch import arch_document, load_arch, load_arch_text
from compiler.errors import UserError

FUZZ_EXAMPLES = int(os.environ.get("ACCELSIM_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=True)
ROOT = Path(__file__).resolve().parents[2]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["1 GHz", "0 B", "-5 GB/s", "1e400 pJ", "64 KiB", "ws", "x"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)
BASE = arch_document(load_arch("systolic_8x8"))


def paths(doc, prefix=()):
    """Every key path of a document (through lists by index)."""
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        yield prefix + (key,)
        yield from paths(value, prefix + (key,))


PATHS = list(paths(BASE))


def answers(parse, *args) -> None:
    """`parse` returns or refuses with a UserError; any other exception fails the property."""
    try:
        parse(*args)
    except UserError:
        pass


def replaced(doc, path, value):
    doc = copy.deepcopy(doc)
    place = doc
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return doc


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(PATHS), values), min_size=1, max_size=3))
def test_arch_documents_with_any_values_load_or_are_refused(edits):
    doc = BASE
    for path, value in edits:
        try:
            doc = replaced(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    text = yaml.safe_dump(doc)
    answers(load_arch_text, text, "fuzzed.yaml", Path("fuzzed.yaml"))


@SETTINGS
@given(st.text(max_size=400))
def test_arch_text_of_any_characters_loads_or_is_refused(text):
    answers(load_arch_text, text, "fuzzed.yaml", Path("fuzzed.yaml"))


@SETTINGS
@given(st.binary(max_size=600))
def test_onnx_bytes_import_or_are_refused(tmp_path_factory, data):
    from compiler.frontend import load_onnx

    path = tmp_path_factory.mktemp("onnx") / "fuzzed.onnx"
    path.write_bytes(data)
    answers(load_onnx, path)


@SETTINGS
@given(st.lists(st.lists(st.one_of(st.integers(-5, 2**40).map(str), st.text(max_size=6)), min_size=1, max_size=9),
                max_size=4))
def test_scalesim_topologies_read_or_are_refused(tmp_path_factory, rows):
    from compiler.topology import load_topology

    path = tmp_path_factory.mktemp("topology") / "fuzzed.csv"
    header = "Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,Num Filter,Strides,"
    path.write_text(header + "\n" + "\n".join(",".join(r) + "," for r in rows))
    answers(load_topology, path)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB",
                                        "OfmapSramSzkB", "Dataflow", "Bandwidth"]),
                       st.one_of(st.integers(-3, 2**40).map(str), st.text(max_size=5),
                                 st.sampled_from(["ws", "os", "is"])), max_size=7),
       st.sampled_from(["USER", "CALC", "x"]))
def test_scalesim_configs_convert_or_are_refused(tmp_path_factory, keys, mode):
    from accelsim.importers.scalesim import convert

    path = tmp_path_factory.mktemp("cfg") / "fuzzed.cfg"
    body = "\n".join(f"{k} : {v}" for k, v in keys.items())
    path.write_text(f"[general]\nrun_name = f\n[architecture_presets]\n{body}\n[run_presets]\n"
                    f"InterfaceBandwidth: {mode}\n")
    answers(convert, path)


SPEC = {"base": "systolic_8x8", "axes": {"compute.pe_array.array.rows": [4, 8]}, "models": ["resnet18"],
        "objectives": ["latency", "energy"]}


@SETTINGS
@given(st.dictionaries(st.sampled_from(["base", "axes", "models", "objectives", "strategy", "derive", "dtype",
                                        "fidelity", "version"]), values, max_size=4))
def test_sweep_specs_load_or_are_refused(tmp_path_factory, changes):
    from accelsim.sweep.spec import load_spec

    path = tmp_path_factory.mktemp("spec") / "fuzzed.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}))
    answers(load_spec, path)


SECRET = "s3cr3tFAKE"
# what a `device:` or `base:` may name: presets, files beside the naming file, and files it must not reach (outside
# its folder: by .., by an absolute path, through a link); the secret in each must never reach a message
REFERENCES = ["a100", "systolic_8x8", "h100", "device.yaml", "./device.yaml", "sub/../device.yaml", "key.yaml",
              "token.yaml", "credentials", "link.yaml", "../outside/secret.yaml", "../outside/credentials",
              "{root}/outside/secret.yaml", "{root}/work/device.yaml", "sub/../../outside/secret.yaml",
              "../../../../../../etc/passwd", "", "/", "sub", "missing.yaml", "a100.cfg", "{presets}/a100.yaml"]


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """root/work (the naming files' folder: an arch, a private key, a credentials file, a link out) and
    root/outside (an arch YAML and a credentials file)."""
    root = tmp_path_factory.mktemp("references")
    (root / "work" / "sub").mkdir(parents=True)
    (root / "outside").mkdir()
    for folder in (root / "work", root / "outside"):
        (folder / "credentials").write_text(f"aws_access_key_id = AKIAFAKE\naws_secret_access_key = {SECRET}\n")
    (root / "work" / "key.yaml").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n-----END OPENSSH"
                                            f" PRIVATE KEY-----\n")
    (root / "work" / "token.yaml").write_text(f"ghp_{SECRET}: x\n")
    arch = (ROOT / "archs" / "systolic_8x8.yaml").read_text()
    (root / "work" / "device.yaml").write_text(arch)
    (root / "outside" / "secret.yaml").write_text(arch.replace("name: systolic_8x8", f"name: {SECRET}"))
    os.symlink(root / "outside" / "credentials", root / "work" / "link.yaml")
    return root


def without_secrets(parse, *args) -> None:
    """answers(), and a refusal quotes nothing of a file it was not pointed at."""
    try:
        parse(*args)
    except UserError as error:
        assert SECRET not in str(error) and "root:" not in str(error), str(error)


def reference(references) -> st.SearchStrategy:
    return st.one_of(st.sampled_from(REFERENCES).map(lambda r: r.format(root=references, presets=ROOT / "archs")),
                     st.text(max_size=12), values)


SYSTEM = yaml.safe_load((ROOT / "archs" / "systems" / "dgx_a100.yaml").read_text())
SYSTEM_PATHS = list(paths(SYSTEM))


@SETTINGS
@given(st.data())
def test_system_documents_load_or_are_refused_without_quoting_other_files(references, data):
    from accelsim.arch.system_load import load_system

    doc = {**SYSTEM, "device": data.draw(reference(references))}
    for path, value in data.draw(st.lists(st.tuples(st.sampled_from(SYSTEM_PATHS), values), max_size=2)):
        try:
            doc = replaced(doc, path, value)
        except (KeyError, IndexError, TypeError):
            continue
    path = references / "work" / "system.yaml"
    path.write_text(yaml.safe_dump(doc))
    without_secrets(load_system, path)


@SETTINGS
@given(st.data())
def test_sweep_specs_naming_any_base_load_or_are_refused_without_quoting_other_files(references, data):
    from accelsim.sweep.spec import load_spec

    spec = {**SPEC, "base": data.draw(reference(references))}
    spec.update(data.draw(st.dictionaries(st.sampled_from(["axes", "objectives", "derive", "dtype"]), values,
                                          max_size=1)))
    path = references / "work" / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    without_secrets(load_spec, path)


@pytest.fixture(scope="module")
def relu_model(tmp_path_factory):
    from compiler.builder import Builder
    from compiler.export import save_onnx

    b = Builder("relu")
    path = tmp_path_factory.mktemp("model") / "relu.onnx"
    save_onnx(b.build([b.node("Relu", [b.input("x", (2, 3))])]), path)
    return path


@SETTINGS
@given(st.sampled_from(["float32", "float64", "int8", "int64", "complex64", "bool", "U2", "uint16"]),
       st.lists(st.integers(0, 4), max_size=4), st.sampled_from(["x", "y", "X"]))
def test_npz_inputs_evaluate_or_are_refused(tmp_path_factory, relu_model, dtype, shape, name):
    from accelsim.cli import main

    folder = tmp_path_factory.mktemp("npz")
    np.savez(folder / "in.npz", **{name: np.zeros(shape, dtype)})
    assert main(["eval", str(relu_model), "--inputs", str(folder / "in.npz")]) in (0, 2)
