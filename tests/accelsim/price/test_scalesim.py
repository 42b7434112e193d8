"""SCALE-Sim compatibility: its measured compute cycles (tests/golden, made by benchmarks/scalesim_compare.py
with SCALE-Sim 3.0.0), its topology CSVs and .cfg files as inputs, and `accelsim arch convert`."""
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accelsim.sim.api import run, scalesim_layers
from accelsim import load_arch
from accelsim.arch import ArchError
from accelsim.price import systolic
from accelsim.importers.scalesim import CfgError, convert, read_cfg
from accelsim.price.compat import compat_layer_cycles
from compiler.errors import UserError
from compiler.topology import TopologyError, load_topology

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
ACCELSIM = Path(sys.executable).with_name("accelsim")
ROWS = list(csv.DictReader((GOLDEN / "scalesim_v3.csv").open()))
FILE_ROWS = list(csv.DictReader((GOLDEN / "scalesim_v3_files.csv").open()))
SHAPE = ("ifmap_h", "ifmap_w", "filter_h", "filter_w", "channels", "num_filter", "stride")


def test_golden_table_covers_what_it_claims():
    assert len(ROWS) >= 300
    assert {r["dataflow"] for r in ROWS} == {"os", "ws", "is"} and {r["form"] for r in ROWS} == {"gemm", "conv"}
    assert len({(r["rows"], r["cols"]) for r in ROWS}) >= 5
    stalled = [r for r in ROWS if int(r["stall_cycles"]) > 0]
    assert stalled and all(int(r["compute_cycles"]) == int(r["total_cycles"]) - int(r["stall_cycles"]) for r in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['form']}{i}-{r['rows']}x{r['cols']}-{r['dataflow']}"
                                           for i, r in enumerate(ROWS)])
def test_compat_equals_every_scalesim_row(row):
    shape = [int(row[k]) for k in SHAPE]
    cycles = compat_layer_cycles(*shape, int(row["rows"]), int(row["cols"]), row["dataflow"])
    assert cycles == int(row["compute_cycles"])


def test_compat_is_vectorised_over_the_golden_table():
    by_array: dict[tuple, list] = {}
    for r in ROWS:
        by_array.setdefault((int(r["rows"]), int(r["cols"]), r["dataflow"]), []).append(r)
    for (rows, cols, dataflow), group in by_array.items():
        h, w, r_, s, c, k, st = (np.array([int(g[key]) for g in group]) for key in SHAPE)
        m = -(-(h - r_ + st) // st) * -(-(w - s + st) // st)
        got = systolic.compat_cycles(m, k, r_ * s * c, rows, cols, dataflow)
        assert got.tolist() == [int(g["compute_cycles"]) for g in group]


def _wanted(topology: str, cfg: str) -> dict[str, int]:
    """SCALE-Sim's per-layer report, a depthwise layer's per-channel rows summed back into one layer."""
    want: dict[str, int] = {}
    for r in FILE_ROWS:
        if (r["topology"], r["cfg"]) == (topology, cfg):
            name = r["layer"].split("Channel_")[0]
            want[name] = want.get(name, 0) + int(r["compute_cycles"])
    return want


PAIRS = sorted({(r["topology"], r["cfg"]) for r in FILE_ROWS})


@pytest.mark.parametrize("topology,cfg", PAIRS)
def test_scalesim_files_through_the_compiler(topology, cfg):
    """Topology CSV -> Graph -> IR -> compat cycles per layer, equal to SCALE-Sim's run of the same files."""
    got = {layer["name"]: layer["compute_cycles"] for layer in scalesim_layers(GOLDEN / topology, GOLDEN / cfg)}
    assert got == _wanted(topology, cfg)


def test_cli_run_topology_on_cfg_with_compat(tmp_path):
    topology, cfg = "scalesim_conv.csv", "scalesim_16x8_ws.cfg"
    proc = subprocess.run([str(ACCELSIM), "run", str(GOLDEN / topology), "--arch", str(GOLDEN / cfg),
                           "--compat", "scalesim", "--json", "-"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    got = {op["name"]: op["compute_cycles"] for op in result["ops"] if op["kind"] == "einsum"}
    assert got == _wanted(topology, cfg)
    assert result["arch"]["name"] == "golden_16x8_ws" and result["model"]["batch"] == 1


def test_run_rejects_an_unknown_compat():
    with pytest.raises(UserError, match="compat"):
        run(GOLDEN / "scalesim_gemm.csv", arch=GOLDEN / "scalesim_16x8_os.cfg", compat="timeloop")


# -- topology CSVs ---------------------------------------------------------------------------------------

def test_conv_topology_shapes():
    graph = load_topology(GOLDEN / "scalesim_conv.csv")
    shapes = {n.name: graph.tensors[n.outputs[0]].shape for n in graph.nodes}
    # 56x56, 7x7, stride 2: SCALE-Sim's ceil((56 - 7 + 2) / 2) = 26 (a valid conv would give 25)
    assert shapes["Conv1"] == (1, 16, 26, 26)
    assert shapes["Conv2_dw"] == (1, 1, 26, 26)          # the trailing `#dw` is a comment, as in SCALE-Sim
    assert shapes["CB2_DP"] == (1, 16, 13, 13)           # depthwise: 8 channels x 2 filters each
    assert graph.nodes[2].attrs["group"] == 8
    assert shapes["Conv3"] == (1, 40, 6, 5) and shapes["FC"] == (1, 70, 1, 1)
    assert all(value is None for value in graph.weights.values())   # shape-only


def test_gemm_topology_is_matmuls(tmp_path):
    graph = load_topology(GOLDEN / "scalesim_gemm.csv")
    assert [n.op for n in graph.nodes] == ["MatMul"] * 4
    assert graph.tensors[graph.nodes[2].outputs[0]].shape == (1, 13, 100)    # FF_A_0: M=13, N=100, K=7
    assert graph.tensors[graph.nodes[2].inputs[1]].shape == (7, 100)
    # no trailing comma, any header case, a sparsity ratio: still read
    path = tmp_path / "g.csv"
    path.write_text("layer, m, n, k\nA,4,5,6,1:1\n")
    assert load_topology(path).tensors["A"].shape == (1, 4, 5)


@pytest.mark.parametrize("text,needles", [
    ("", ["empty"]),
    ("Layer,Rows,Cols,\nA,1,2,\n", ["line 1", "neither"]),
    ("Layer,M,N,K,\nA,1,2,3,\nB,1,x,3,\n", ["line 3", "column 3 (n)", "'x'"]),
    ("Layer,M,N,K,\nA,1,2,\n", ["line 2", "expected 4"]),
    ("Layer,M,N,K,\nA,1,0,3,\n", ["line 2", "positive"]),
    ("Layer name,IFMAP Height,IFMAP Width,Filter Height,Filter Width,Channels,Num Filter,Strides,\n"
     "C,4,4,5,3,1,1,1,\n", ["line 2", "filter height 5", "ifmap height 4"]),
    ("Layer,M,N,K,\n", ["no layers"]),
])
def test_bad_topology_names_file_line_column(tmp_path, text, needles):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    assert isinstance(info.value, UserError) and str(path) in str(info.value)
    for needle in needles:
        assert needle in str(info.value)


# -- .cfg files ------------------------------------------------------------------------------------------

def test_cfg_reads_as_scalesim_does():
    cfg = read_cfg(GOLDEN / "scalesim_16x8_ws.cfg")
    assert (cfg.rows, cfg.cols, cfg.dataflow, cfg.ifmap_kb, cfg.ofmap_kb) == (16, 8, "ws", 64, 32)
    assert cfg.words_per_cycle == 4 and cfg.user_bandwidth and cfg.run_name == "golden_16x8_ws"


def test_cfg_loads_as_an_arch():
    arch = load_arch(str(GOLDEN / "scalesim_16x8_os.cfg"))
    assert (arch.matrix.array.rows, arch.matrix.array.cols, arch.matrix.array.weight_buffers) == (16, 8, 1)
    assert [d.value for d in arch.matrix.dataflows] == ["os"]
    assert arch.level("ifmap_sram").capacity_bytes == 64 * 1024
    assert arch.level("dram").bandwidth_bytes_per_s == 4e9     # 4 words/cycle x 1 B x 1 GHz (assumed)


@pytest.mark.parametrize("edit,needles", [
    (("ArrayWidth:     8", ""), ["[architecture_presets] ArrayWidth", "missing key"]),
    (("ArrayHeight:    16", "ArrayHeight: sixteen"), ["ArrayHeight", "'sixteen'"]),
    (("Dataflow : ws", "Dataflow : rs"), ["Dataflow", "'rs'"]),
    (("[general]", "general"), ["not a SCALE-Sim .cfg"]),
    (("InterfaceBandwidth: USER", "InterfaceBandwidth: SOME"), ["[run_presets] InterfaceBandwidth"]),
])
def test_bad_cfg_names_file_section_key(tmp_path, edit, needles):
    path = tmp_path / "bad.cfg"
    path.write_text((GOLDEN / "scalesim_16x8_ws.cfg").read_text().replace(*edit))
    with pytest.raises(CfgError) as info:
        load_arch(str(path))
    assert isinstance(info.value, ArchError) and str(path) in str(info.value)
    for needle in needles:
        assert needle in str(info.value)


def test_arch_convert_writes_yaml_the_loader_accepts(tmp_path):
    out = tmp_path / "google.yaml"
    proc = subprocess.run([str(ACCELSIM), "arch", "convert", str(GOLDEN / "scalesim_16x8_is.cfg"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "16x8 IS" in proc.stdout
    text = out.read_text()
    assert text == convert(GOLDEN / "scalesim_16x8_is.cfg") and "# [A]" in text and "1 GHz" in text
    arch = load_arch(str(out))
    assert arch.name == "golden_16x8_is" and arch.matrix.peak_per_cycle(arch.native_dtype) == 128
    bad = subprocess.run([str(ACCELSIM), "arch", "convert", str(tmp_path / "none.cfg")], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and "none.cfg" in bad.stderr and "Traceback" not in bad.stderr


def test_32x32_preset_prices_a_1024_cubed_gemm_instantly():
    """The issue's speed workload: 1024^3 on the 32x32 WS preset; SCALE-Sim 3.0.0 measured 1,144,831 cycles
    in 752 s and 3.4 GiB (benchmarks/scalesim_compare.py speed)."""
    arch = load_arch("systolic_32x32")
    assert int(systolic.scalesim_split(1024, 1024, 1024, arch.matrix, arch, None)[0]) == \
        compat_layer_cycles(1024, 1024, 1, 1024, 1, 1024, 1, 32, 32, "ws")
    assert compat_layer_cycles(1024, 1024, 1, 1024, 1, 1024, 1, 32, 32, "ws") == 32 * 32 * (64 + 32 + 1024 - 2) - 1


def test_a_percent_sign_in_a_cfg_is_text_not_an_interpolation(tmp_path):
    # found by tests/fuzz/test_parsers.py: configparser's interpolation raised its own error class on "%"
    path = tmp_path / "pct.cfg"
    path.write_text((GOLDEN / "scalesim_16x8_ws.cfg").read_text().replace("ArrayHeight", "ArrayHeight: 8%\n#", 1))
    with pytest.raises(CfgError, match=r"ArrayHeight: '8%' is not a positive integer"):
        read_cfg(path)
    named = tmp_path / "named.cfg"
    named.write_text((GOLDEN / "scalesim_16x8_ws.cfg").read_text().replace("golden_16x8_ws", "a%(b", 1))
    assert read_cfg(named).run_name.startswith("a_")


def test_a_topology_of_more_layers_than_accelsim_reads_is_refused_before_it_is_built(tmp_path, monkeypatch):
    from compiler import topology

    monkeypatch.setattr(topology, "MAX_LAYERS", 3)
    rows = "".join(f"L{i}, 8, 8, 3, 3, 4, 4, 1,\n" for i in range(4))
    path = tmp_path / "big.csv"
    path.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, "
                    "Strides,\n" + rows)
    with pytest.raises(topology.TopologyError, match=r"big\.csv: 4 layers; accelsim reads topologies of at most 3"):
        topology.load_topology(path)
    path.write_text(path.read_text().rsplit("L3", 1)[0])
    assert len(topology.load_topology(path).nodes) == 3
