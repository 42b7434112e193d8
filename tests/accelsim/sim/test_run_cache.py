"""The on-disk run cache (accelsim.sim.cache) never changes a result: a Result read back, in this process or a
fresh one, equals the one computed with the cache off, field by field; anything the run reads (the arch file,
an option, the sources) changes the key; a corrupt file is computed again, never a traceback; concurrent writers
leave a whole file; ACCELSIM_CACHE=off reads and writes nothing. Every test has a cache folder of its own."""
import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import accelsim
from accelsim.results.result import OP_FIELDS as RECORD_OP_FIELDS
from accelsim.sim import build as pipeline
from accelsim.sim import cache
from compiler.errors import CacheWarning
from compiler.map import CACHE, disk, entry

ROOT = Path(__file__).resolve().parents[3]
OP_FIELDS = list(RECORD_OP_FIELDS)
SMALL = {"resnet18": {"image": 32}, "gpt2": {"layers": 1, "seq": 8}, "bitnet_b158": {"layers": 1, "seq": 8}}
ARCHS = ("tpu_v1", "a100", "xeon_spr", "fpga_ternary")

# Runs what argv[2] names (JSON: model, arch, options) and prints the Result, its mappings and whether numba (the
# engine) was imported; with argv[1] "read" the build is forbidden, so the Result must come from the disk. Each side
# of a comparison runs in a fresh process: the tree may have changed since this one imported it.
SCRIPT = """
import json, sys
import accelsim
import accelsim.sim.build

def refuse(*args, **kwargs):
    raise AssertionError("built, though the disk holds the run")

if sys.argv[1] == "read":
    accelsim.sim.build.build = refuse
model, arch, options = json.loads(sys.argv[2])
result = accelsim.run(model, arch, **options)
print(json.dumps({"result": result.to_dict(), "mappings": {k: repr(m) for k, m in result.mappings.items()},
                  "numba": "numba" in sys.modules}))
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An empty cache folder of this test's own, and empty in-memory mapping caches. The sources hold still: a
    run stores nothing when a source file changed since the import (checked by a test of its own), and other
    work may edit the tree while the suite runs. (A test in a fresh process needs the tree as it was imported.)"""
    monkeypatch.setattr(cache, "source_digest", lambda: cache.LOADED)
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "cache"))
    CACHE.clear()
    yield tmp_path / "cache" / entry.user() / "runs"
    CACHE.clear()


@pytest.fixture
def builds(monkeypatch):
    """How many times accelsim.run built a model (0: the Result came from the disk)."""
    calls = []
    build = pipeline.build
    monkeypatch.setattr(pipeline, "build", lambda *a, **k: calls.append(1) or build(*a, **k))
    return calls


def computed(model, arch, monkeypatch, **options):
    """The Result with every cache off: what the cached one must equal."""
    with monkeypatch.context() as patch:
        patch.setenv("ACCELSIM_CACHE", "off")
        return accelsim.run(model, arch, **options)


def assert_same(cached, fresh):
    """Field by field, every op, with types: JSON text tells 1 from 1.0 where == does not."""
    assert cached is not fresh and len(cached.ops) == len(fresh.ops) > 0
    for mine, theirs in zip(cached.ops, fresh.ops):
        for name in mine.__dataclass_fields__:
            assert json.dumps(getattr(mine, name)) == json.dumps(getattr(theirs, name)), (mine.name, name)
            assert type(getattr(mine, name)) is type(getattr(theirs, name)), (mine.name, name)
    assert json.dumps(cached.to_dict()) == json.dumps(fresh.to_dict())
    assert cached.mappings == fresh.mappings and list(cached.mappings) == list(fresh.mappings)
    assert cached.loop_nests() == fresh.loop_nests()


@pytest.mark.parametrize("fidelity", ["tile", "roofline"])
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("model", sorted(SMALL))
def test_a_run_read_back_equals_one_computed(model, arch, fidelity, folder, builds, monkeypatch):
    first = accelsim.run(model, arch, fidelity=fidelity, **SMALL[model])
    assert builds == [1] and len(list(folder.rglob("*.json"))) == 1
    again = accelsim.run(model, arch, fidelity=fidelity, **SMALL[model])
    assert builds == [1], "the second run was built again"
    fresh = computed(model, arch, monkeypatch, fidelity=fidelity, **SMALL[model])
    assert_same(first, fresh)
    assert_same(again, fresh)


def in_fresh_process(mode: str, model: str, arch: str, options: dict, cache_folder: str | None = None) -> dict:
    env = {**os.environ, **({"ACCELSIM_CACHE": cache_folder} if cache_folder else {})}
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, json.dumps([model, arch, options])], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("model, arch", [("resnet18", "tpu_v1"), ("gpt2", "a100"), ("bitnet_b158", "fpga_ternary")])
def test_a_fresh_process_reads_the_run_without_the_engine(model, arch, folder):
    written = in_fresh_process("compute", model, arch, SMALL[model])
    read = in_fresh_process("read", model, arch, SMALL[model])
    fresh = in_fresh_process("compute", model, arch, SMALL[model], cache_folder="off")
    assert written["numba"] and fresh["numba"] and not read["numba"]
    assert json.dumps(read["result"]) == json.dumps(fresh["result"]) == json.dumps(written["result"])
    assert read["mappings"] == fresh["mappings"] == written["mappings"]


@pytest.mark.parametrize("change", [{"fidelity": "roofline"}, {"batch": 2}, {"dtype": "fp16"}, {"fuse": "none"},
                                    {"launch": "graph"}, {"image": 64}, {"width": 0.5}])
def test_each_option_is_in_the_key(change, folder, builds, monkeypatch):
    base = {"image": 32}
    accelsim.run("resnet18", "a100", **base)
    changed = accelsim.run("resnet18", "a100", **{**base, **change})
    assert builds == [1, 1], f"{change} read the run made without it"
    assert_same(changed, computed("resnet18", "a100", monkeypatch, **{**base, **change}))


def test_an_edited_arch_file_misses_and_a_moved_copy_names_its_own_file(folder, builds, tmp_path, monkeypatch):
    preset = ROOT / "archs" / "tpu_v1.yaml"
    mine = tmp_path / "mine.yaml"
    shutil.copy(preset, mine)
    before = accelsim.run("resnet18", str(mine), image=32)
    text = preset.read_text()
    assert "\nclock: 700 MHz\n" in text, "the edit below needs the preset's clock line"
    mine.write_text(text.replace("\nclock: 700 MHz\n", "\nclock: 350 MHz\n"))
    after = accelsim.run("resnet18", str(mine), image=32)
    assert builds == [1, 1] and after.arch["clock_hz"] == 350e6 and after.seconds > before.seconds
    moved = tmp_path / "moved.yaml"
    shutil.copy(preset, moved)               # the same content elsewhere: read back, naming the file it was given
    elsewhere = accelsim.run("resnet18", str(moved), image=32)
    assert builds == [1, 1] and elsewhere.arch["file"] == "moved.yaml"      # as results name a file elsewhere
    assert_same(after, computed("resnet18", str(mine), monkeypatch, image=32))
    assert_same(elsewhere, computed("resnet18", str(moved), monkeypatch, image=32))


def test_edited_sources_miss(folder, builds, monkeypatch):
    accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    monkeypatch.setattr(cache, "LOADED", "another version of the code")
    monkeypatch.setattr(cache, "source_digest", lambda: "another version of the code")
    accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    assert builds == [1, 1]


def test_sources_edited_since_they_were_imported_keep_nothing(folder, builds, monkeypatch):
    """The code that ran is the imported one; the key would name the code on disk: nothing is written."""
    monkeypatch.setattr(cache, "source_digest", lambda: "the code on disk, edited since")
    accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    assert builds == [1, 1] and not folder.exists()


def test_the_source_digest_follows_every_source(tmp_path, monkeypatch):
    """Copies of the two packages: editing any one file, a pass or an engine kernel, changes the digest."""
    for package in cache.SOURCES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "ROOT", tmp_path)
    digests = [cache.LOADED]
    for edited in (None, "compiler/passes/fuse.py", "accelsim/engine/tile/schedule.py", "accelsim/data/rtl_area.json"):
        if edited:
            (tmp_path / edited).write_text((tmp_path / edited).read_text() + "\n")
        digests.append(cache.source_digest())
    assert len(set(digests[1:])) == 4


def read_file(file: Path) -> tuple[dict, dict, dict]:
    """A run file's header, Result and mappings, its three lines."""
    header, result, mappings = file.read_text().split("\n")
    return json.loads(header), json.loads(result), json.loads(mappings)


def write_file(file: Path, header: dict, result: dict, mappings: dict, rehash: bool) -> None:
    """The three lines written back; `rehash` puts the new body's digest in the header, as a forger would."""
    body = json.dumps(result) + "\n" + json.dumps(mappings)
    if rehash:
        header = {**header, "digest": entry.digest(header["key"], body.encode())}
    file.write_text(json.dumps(header) + "\n" + body)


DAMAGES = ["", "{", "not json", "[]", '{"key": 1}', "truncate", "wrong type", "extra field", "wrong mapping",
           "extra result field", "no memory", "wrong hash", "no hash", "negative", "nan"]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_file_is_computed_again(damage, folder, builds, monkeypatch):
    """Any change to a file's bytes is caught by its digest; a file of another layout or out of range by the reader;
    each is warned about, naming the file, and written again."""
    accelsim.run("gpt2", "xeon_spr", **SMALL["gpt2"])
    (file,) = folder.rglob("*.json")
    text = file.read_text()
    header, result, mappings = read_file(file)
    if damage == "truncate":
        file.write_text(text[:len(text) // 2])
    elif damage == "wrong type":
        result["ops"][0][OP_FIELDS.index("cycles")] = float(result["ops"][0][OP_FIELDS.index("cycles")])
        write_file(file, header, result, mappings, rehash=False)
    elif damage == "extra field":
        result["ops"][0].append(1)
        write_file(file, header, result, mappings, rehash=True)
    elif damage == "extra result field":
        result["surprise"] = 1
        write_file(file, header, result, mappings, rehash=True)
    elif damage == "no memory":        # a file as runs wrote it before they held their memory: never served
        assert result.pop("memory")["peak"] > 0
        write_file(file, header, result, mappings, rehash=True)
    elif damage == "wrong mapping":
        next(iter(mappings.values()))["loops"] = "nonsense"
        write_file(file, header, result, mappings, rehash=False)
    elif damage == "wrong hash":
        write_file(file, {**header, "digest": "0" * 64}, result, mappings, rehash=False)
    elif damage == "no hash":
        write_file(file, {k: v for k, v in header.items() if k != "digest"}, result, mappings, rehash=False)
    elif damage in ("negative", "nan"):       # a forger's values, rehashed: refused by their range
        result["ops"][0][OP_FIELDS.index("seconds")] = -1.0 if damage == "negative" else float("nan")
        write_file(file, header, result, mappings, rehash=True)
    else:
        file.write_text(damage)
    with pytest.warns(CacheWarning, match=str(file)):
        again = accelsim.run("gpt2", "xeon_spr", **SMALL["gpt2"])
    assert builds == [1, 1]
    assert_same(again, computed("gpt2", "xeon_spr", monkeypatch, **SMALL["gpt2"]))
    assert read_file(file)[0]["key"] == header["key"]       # written again, whole


def test_mappings_that_do_not_read_back_are_computed_again(folder, builds, monkeypatch):
    """Mappings are decoded when first asked for: ones that pass the hash but not the reader (a forged file) give
    way to the run's own, computed again."""
    accelsim.run("gpt2", "xeon_spr", **SMALL["gpt2"])
    (file,) = folder.rglob("*.json")
    header, result, mappings = read_file(file)
    next(iter(mappings.values()))["loops"] = "nonsense"
    write_file(file, header, result, mappings, rehash=True)
    again = accelsim.run("gpt2", "xeon_spr", **SMALL["gpt2"])
    assert builds == [1], "the Result was read back"
    with pytest.warns(CacheWarning, match="mappings that do not read back"):
        dict(again.mappings)
    assert_same(again, computed("gpt2", "xeon_spr", monkeypatch, **SMALL["gpt2"]))
    assert builds == [1, 1, 1]          # the mappings, computed again; then `computed`


def test_concurrent_writers_leave_one_whole_file(folder):
    """Four processes run the same model at once, each writing the file: it is whole, and reads back right."""
    command = [sys.executable, "-c", SCRIPT, "compute", json.dumps(["gpt2", "a100", SMALL["gpt2"]])]
    runs = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(4)]
    assert all(run.wait(timeout=300) == 0 for run in runs), [run.stderr.read() for run in runs]
    assert len(list(folder.rglob("*.json"))) == 1 and not list(folder.rglob(".*.tmp"))
    read = in_fresh_process("read", "gpt2", "a100", SMALL["gpt2"])
    fresh = in_fresh_process("compute", "gpt2", "a100", SMALL["gpt2"], cache_folder="off")
    assert json.dumps(read["result"]) == json.dumps(fresh["result"]) and read["mappings"] == fresh["mappings"]


def test_off_reads_and_writes_nothing(tmp_path, monkeypatch, builds):
    monkeypatch.setenv("ACCELSIM_CACHE", "off")
    monkeypatch.chdir(tmp_path)
    CACHE.clear()
    first = accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    second = accelsim.run("gpt2", "tpu_v1", **SMALL["gpt2"])
    assert builds == [1, 1] and list(tmp_path.iterdir()) == []
    assert disk.root() is None and cache.key("gpt2", accelsim.load_arch("tpu_v1"), batch=None, dtype=None,
                                             fidelity="tile", compat=None, fuse="runtime", launch=None,
                                             options={}) is None
    assert first.to_dict() == second.to_dict()
    CACHE.clear()


def test_what_cannot_be_named_is_not_cached(folder, builds, tmp_path):
    """A model file and a traced run are computed each time: the key cannot hold what they read."""
    for _ in range(2):
        accelsim.run("gpt2", "tpu_v1", trace=True, **SMALL["gpt2"])
        accelsim.run("tests/golden/scalesim_gemm.csv", "tpu_v1")
    assert builds == [1] * 4 and not folder.exists()


def test_a_graph_is_named_by_its_content(folder, builds, monkeypatch):
    """A Graph built in Python is kept under a hash of all it holds: the same graph built again reads the run back;
    one that differs in any node, shape, attribute or weight byte does not."""
    graph = accelsim.load_model("gpt2", **SMALL["gpt2"])
    first = accelsim.run(graph, "tpu_v1")
    again = accelsim.run(accelsim.load_model("gpt2", **SMALL["gpt2"]), "tpu_v1")
    assert builds == [1] and len(list(folder.rglob("*.json"))) == 1
    assert_same(again, computed(graph, "tpu_v1", monkeypatch))
    assert_same(first, again)
    digest = cache.graph_digest(graph)
    wider = accelsim.load_model("gpt2", **SMALL["gpt2"])
    name = next(iter(wider.tensors))
    wider.tensors[name] = dataclasses.replace(wider.tensors[name], shape=(*wider.tensors[name].shape, 1))
    node = accelsim.load_model("gpt2", **SMALL["gpt2"])
    node.nodes[-1].attrs["surprise"] = 1
    shapes = accelsim.load_model("resnet18", **SMALL["resnet18"])          # 47 MB of weights: under GRAPH_BYTES
    weighted = accelsim.load_model("resnet18", weights=True, **SMALL["resnet18"])
    nudged = copy.deepcopy(weighted)
    array = next(a for a in nudged.weights.values() if a is not None and a.size)
    array.reshape(-1)[-1] += 1
    assert cache.graph_digest(copy.deepcopy(weighted)) == cache.graph_digest(weighted)
    digests = [cache.graph_digest(g) for g in (graph, wider, node, shapes, weighted, nudged)]
    assert digests[0] == digest and None not in digests and len(set(digests)) == 6


def test_a_graph_that_cannot_be_named_is_not_cached(folder, builds, monkeypatch):
    """A Graph carrying the ONNX importer (control flow), an attribute of no plain type, or arrays too large to
    hash quickly, is computed each time."""
    carrying = accelsim.load_model("gpt2", **SMALL["gpt2"])
    carrying.import_body = print
    odd = accelsim.load_model("gpt2", **SMALL["gpt2"])
    odd.nodes[0].attrs["object"] = object()
    assert cache.graph_digest(carrying) is None and cache.graph_digest(odd) is None
    monkeypatch.setattr(cache, "GRAPH_BYTES", 0)
    assert cache.graph_digest(accelsim.load_model("resnet18", weights=True, **SMALL["resnet18"])) is None
    for _ in range(2):
        accelsim.run(carrying, "tpu_v1")
    assert builds == [1, 1] and not folder.exists()


def test_the_command_line_reads_its_run_back(folder, capsys):
    from accelsim.cli import main

    assert main(["run", "gpt2", "--opt", "layers=1", "--seq", "8", "--arch", "h100", "--json", "-"]) == 0
    written = capsys.readouterr().out
    assert len(list(folder.rglob("*.json"))) == 1
    assert main(["run", "gpt2", "--opt", "layers=1", "--seq", "8", "--arch", "h100", "--json", "-"]) == 0
    assert capsys.readouterr().out == written
