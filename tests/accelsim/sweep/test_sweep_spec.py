"""Sweep specs, key paths, derived keys, Pareto fronts and strategies: everything decided before a point runs."""
import itertools
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from accelsim.arch import units
from accelsim.cli import main
from accelsim.sweep import load_spec, pareto
from accelsim.sweep.derive import DeriveError, parse_derived
from accelsim.sweep.keypath import KeyPathError, locate
from accelsim.sweep.pareto import front
from accelsim.sweep.strategies import Adaptive, Grid, RandomSample, unravel
from accelsim.sweep.tasks import tasks_for

ROOT = Path(__file__).resolve().parents[3]
ACCELSIM = Path(sys.executable).with_name("accelsim")
BASE = yaml.safe_load((ROOT / "archs" / "systolic_32x32.yaml").read_text())
GOOD = {
    "base": "systolic_8x8",
    "models": [{"name": "resnet18", "options": {"image": 32, "width": 0.25}}],
    "objectives": ["latency", "energy", "area"],
    "axes": {"compute.pe_array.array.rows": [4, 8], "memory.dram.bandwidth": ["1 GB/s", "4 GB/s"]},
    "derive": {"compute.pe_array.macs_per_cycle.int8": "compute.pe_array.array.rows * compute.pe_array.array.cols",
               "memory.input_sram.bandwidth": "compute.pe_array.array.rows * clock"},
}


def write(tmp_path: Path, spec: dict, name: str = "sweep.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def test_key_paths_name_list_entries_by_name_or_index():
    by_name = locate(BASE, "compute.pe_array.array.rows")
    assert by_name.schema_path == "compute[0].array.rows" and by_name.get(BASE) == 32
    assert locate(BASE, "compute.0.array.rows") == by_name
    assert locate(BASE, "memory.dram.bandwidth").schema_path == "memory[0].bandwidth"
    assert locate(BASE, "memory.ofmap_sram.capacity").get(BASE) == "64 KiB"
    with pytest.raises(KeyPathError, match=r"no entry named 'sram' in memory \(entries: dram, filter_sram"):
        locate(BASE, "memory.sram.capacity")
    with pytest.raises(KeyPathError, match="no key 'arrays' under compute.pe_array"):
        locate(BASE, "compute.pe_array.arrays.rows")
    with pytest.raises(KeyPathError, match="index 7 is past the end"):
        locate(BASE, "compute.7.count")


def test_derived_keys_follow_the_axes_in_their_units(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.shape == (2, 2) and spec.size == 4
    doc, dtype = spec.document((0, 1))
    assert dtype is None and doc["compute"][0]["array"]["rows"] == 4
    assert doc["compute"][0]["macs_per_cycle"]["int8"] == 4 * 8      # an int stays an int
    assert doc["memory"][0]["bandwidth"] == "4 GB/s"
    assert units.parse_bandwidth(doc["memory"][2]["bandwidth"]) == pytest.approx(4 * 100e6)   # 4 B/cycle at 100 MHz
    assert spec.base_doc["compute"][0]["array"]["rows"] == 8           # the base is never changed
    rule = parse_derived(BASE, "memory.filter_sram.read_energy",
                         "2.5e-12 * compute.pe_array.array.cols * (memory.filter_sram.capacity / 65536) ** 0.5")
    rule.apply(doc := yaml.safe_load(yaml.safe_dump(BASE)))
    assert units.parse_energy(doc["memory"][1]["read_energy"]) == pytest.approx(80e-12)
    with pytest.raises(DeriveError, match="is not allowed"):
        parse_derived(BASE, "clock", "__import__('os').getpid()")


def test_the_content_key_names_what_decides_the_result(tmp_path):
    spec = load_spec(write(tmp_path, GOOD))
    keys = {task.key for coord in itertools.product(range(2), range(2)) for task in tasks_for(spec, coord)}
    assert len(keys) == 4                                          # four points, four rows
    again = load_spec(write(tmp_path, {**GOOD, "strategy": {"kind": "random", "points": 2}}, "other.yaml"))
    assert tasks_for(again, (1, 0))[0].key == tasks_for(spec, (1, 0))[0].key   # same point in another spec
    roofline = load_spec(write(tmp_path, {**GOOD, "fidelity": "roofline"}, "roof.yaml"))
    assert tasks_for(roofline, (1, 0))[0].key != tasks_for(spec, (1, 0))[0].key


BAD = [
    ({"axes": {"compute.pe_array.array.rows": [4], "memory.sram.capacity": ["1 KiB"]}},
     "axes.memory.sram.capacity: no entry named 'sram'"),
    ({"axes": {"compute.pe_array.array.rowz": [4]}}, "axes.compute.pe_array.array.rowz: value 4: unknown key 'rowz'"),
    ({"axes": {"memory.dram.bandwidth": ["12.8 Gb/s"]}}, "axes.memory.dram.bandwidth: value '12.8 Gb/s'"),
    ({"axes": {"compute.pe_array.array.rows": ["eight"]}}, "axes.compute.pe_array.array.rows: value 'eight'"),
    ({"axes": {"compute.pe_array.dataflows": ["ws", "xs"]}}, "axes.compute.pe_array.dataflows: value 'xs'"),
    ({"axes": {"dtype": ["int8", "int9"]}}, "axes.dtype: unknown dtype 'int9'"),
    ({"models": ["resnet19"]}, "models[0].name: unknown model 'resnet19'"),
    ({"models": [{"name": "resnet18", "options": {"imagesize": 32}}]}, "models[0]: model 'resnet18' takes no argument"),
    ({"objectives": ["latency", "speed"]}, "objectives[1]: unknown objective 'speed'"),
    ({"objectives": [["latency"]]}, "objectives[0]: unknown objective ['latency']"),
    ({"models": [{"name": "resnet18", "options": {"image": "abc"}}]}, "models[0]: model 'resnet18' option image='abc'"),
    ({"base": "xeon_spr", "axes": {"clock": ["1 GHz"]}, "derive": {}}, "objectives[2]: area applies to systolic"),
    ({"base": "tpu_v9"}, "base: unknown arch 'tpu_v9'"),
    ({"strategy": {"kind": "annealing"}}, "strategy.kind: unknown strategy 'annealing'"),
    ({"strategy": {"kind": "random", "points": 50}}, "strategy.points: 50 is more than the grid's 4 points"),
    ({"strategy": {"kind": "random", "points": 2, "ranks": 1}}, "strategy: initial and ranks apply to the adaptive"),
    ({"derive": {"clock": "compute.pe_array.array.rows +"}}, "derive.clock: 'compute.pe_array.array.rows +' is not"),
    ({"derive": {"memory.dram.bandwidth": "1"}}, "derive.memory.dram.bandwidth: is also an axis"),
    ({"axis": {}}, "axis: unknown key; did you mean 'axes'?"),
    ({"axes": {"compute.pe_array.array.rows": [4], "compute.0.array.rows": [8]}},
     "axes.compute.0.array.rows: names the same key as axes.compute.pe_array.array.rows"),
    ({"models": [{"name": "resnet18", "options": {"image": [32, 64]}}]}, "models[0].options.image: [32, 64]: an"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m.split(":")[0] for _, m in BAD])
def test_a_bad_spec_is_one_line_naming_file_and_key(tmp_path, capsys, change, message):
    path = write(tmp_path, {**GOOD, **change})
    assert main(["sweep", str(path), "--jobs", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"accelsim: error: {path}: {message}"), err
    assert not path.with_suffix(".sqlite").exists()          # refused before anything ran


def test_the_command_exits_2_without_a_traceback(tmp_path):
    path = write(tmp_path, {**GOOD, "models": ["resnet19"]})
    proc = subprocess.run([str(ACCELSIM), "sweep", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (f"accelsim: error: {path}: models[0].name: unknown model 'resnet19'; the zoo has: "
                                   "alexnet, resnet18, resnet50, vit_b16, bert_base, gpt2, llama, bitnet_b158, "
                                   "matmulfree_lm")


def test_pareto_keeps_ties_drops_the_dominated_and_splits_models():
    rows = [{"model": "a", "status": "ok", "latency": 1.0, "energy": 5.0},
            {"model": "a", "status": "ok", "latency": 2.0, "energy": 2.0},
            {"model": "a", "status": "ok", "latency": 2.0, "energy": 2.0},    # a tie: both kept
            {"model": "a", "status": "ok", "latency": 3.0, "energy": 2.0},    # dominated by the tie
            {"model": "a", "status": "invalid", "latency": None, "energy": None},
            {"model": "b", "status": "ok", "latency": 9.0, "energy": 9.0}]    # alone in its model: on its front
    best = pareto(rows, ["latency", "energy"])
    assert best == [rows[0], rows[1], rows[2], rows[5]]
    assert pareto(rows, ["energy"]) == [rows[1], rows[2], rows[3], rows[5]]
    assert front([(1, 2), (2, 1), (2, 2), (0, 3)]) == [0, 1, 3]


def test_grid_and_random_ask_each_point_once_and_random_is_seeded():
    grid, coords = Grid((3, 4, 2)), []
    while batch := grid.ask():
        coords += batch
    assert len(coords) == len(set(coords)) == 24 and set(coords) == set(itertools.product(range(3), range(4), range(2)))
    draws = [RandomSample((10, 10, 10), 50, seed).ask() for seed in (1, 1, 2)]
    assert draws[0] == draws[1] != draws[2] and len(set(draws[0])) == 50
    assert unravel(123, (10, 10, 10)) == (1, 2, 3)


def hardware_like(coord):
    """A stand-in for a systolic sweep with known answers: bigger arrays and SRAMs are faster but larger."""
    r, k, s, b, d = coord
    rows, cols, sram, bandwidth = 2 ** r, 2 ** k, 2 ** s, b + 1
    latency = 4096 / (rows * cols) * (1.2 if d else 1.0) + 64 / (bandwidth * (1 + s)) + 0.3 * d * s
    energy = 10 / (1 + s) + 0.05 * sram + 0.2 * d + 0.01 * rows
    return latency, energy, rows * cols + 8 * sram


def test_adaptive_finds_the_whole_front_with_fewer_evaluations_than_the_grid():
    shape = (6, 6, 5, 4, 2)
    every = list(itertools.product(*(range(n) for n in shape)))
    truth = {hardware_like(every[i]) for i in front([hardware_like(c) for c in every])}
    # measured: ranks 2 (the default) asks 1,137 and 1,058 of the 1,440 points, ranks 1 asks 819 and 740
    for ranks, most in ((2, 0.85), (1, 0.65)):
        for seed in (0, 1):
            search = Adaptive(shape, seed, ranks=ranks)
            while batch := search.ask():
                assert not set(batch) & (search.asked - set(batch))
                search.tell({c: [hardware_like(c)] for c in batch})
            found = {hardware_like(c) for c in search.front()}
            assert found == truth                                   # every front point, nothing else
            assert len(search.asked) < most * math.prod(shape)
    budgeted = Adaptive(shape, 0, budget=100)
    while batch := budgeted.ask():
        budgeted.tell({c: [hardware_like(c)] for c in batch})
    assert len(budgeted.asked) == 100


def test_the_content_key_changes_with_everything_that_decides_a_result():
    import json

    from accelsim.arch import arch_document, load_arch
    from accelsim.sweep.spec import ModelSpec
    from accelsim.sweep.tasks import content_key

    doc = arch_document(load_arch("systolic_8x8"))
    arch = json.dumps(doc, sort_keys=True)
    base = content_key(arch, ModelSpec("resnet18", (("image", 32),)), "int8", "tile")
    changed = {
        "an option's value": content_key(arch, ModelSpec("resnet18", (("image", 64),)), "int8", "tile"),
        "another option": content_key(arch, ModelSpec("resnet18", (("image", 32), ("width", 0.5))), "int8", "tile"),
        "the model": content_key(arch, ModelSpec("resnet50", (("image", 32),)), "int8", "tile"),
        "the dtype": content_key(arch, ModelSpec("resnet18", (("image", 32),)), "int16", "tile"),
        "the fidelity": content_key(arch, ModelSpec("resnet18", (("image", 32),)), "int8", "roofline"),
    }
    for path in (("clock",), ("memory", 0, "bandwidth"), ("compute", 0, "array", "rows")):
        edited = json.loads(arch)
        place = edited
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = f"{place[path[-1]]} " if isinstance(place[path[-1]], str) else place[path[-1]] + 1
        changed[f"arch {path}"] = content_key(json.dumps(edited, sort_keys=True),
                                              ModelSpec("resnet18", (("image", 32),)), "int8", "tile")
    assert all(key != base for key in changed.values()), [what for what, key in changed.items() if key == base]
    assert len(set(changed.values())) == len(changed)
    assert base == content_key(arch, ModelSpec("resnet18", (("image", 32),)), "int8", "tile")     # deterministic
