"""Property-based: every SCALE-Sim file, whatever it holds, imports or is refused with a UserError naming the file
(the CLI's exit 2), never another exception. Configs (.cfg) load as an Arch through accelsim.arch; topologies (.csv)
read into a Graph, and with a config they compile and price (roofline). Examples per property: FUZZ_EXAMPLES
(ACCELSIM_FUZZ_EXAMPLES raises it)."""
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.importers.scalesim import load_cfg
from compiler.errors import UserError
from compiler.topology import CONV_HEADER, GEMM_HEADER, load_topology

FUZZ_EXAMPLES = int(os.environ.get("ACCELSIM_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=True)
GOLDEN = Path(__file__).resolve().parents[2] / "golden"

# numbers as people and generators write them, and the edges: 0, negatives, 2^63 and past, floats, nan, words
numbers = st.one_of(st.integers(-3, 300).map(str), st.integers(2**31, 2**80).map(str),
                    st.sampled_from(["0", "-0", "1e3", "8.0", "nan", "inf", "0x10", "1_000", "", " ", "\u0661"]))
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
cells = st.one_of(numbers, texts)
bad_bytes = st.binary(max_size=300).map(lambda b: b"\xff" + b)     # never UTF-8


def _answers(read, *args) -> None:
    try:
        read(*args)
    except UserError:
        pass


def _file(tmp_path_factory, name: str, content) -> Path:
    path = tmp_path_factory.mktemp("scalesim") / name
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    return path


CFG_KEYS = ("ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB", "OfmapSramSzkB", "Dataflow", "Bandwidth")


@SETTINGS
@given(st.dictionaries(st.sampled_from(CFG_KEYS), st.one_of(cells, st.sampled_from(["ws", "os", "is", "WS"]),
                                                             st.lists(numbers, min_size=1, max_size=3).map(",".join)),
                       max_size=7),
       st.sampled_from(["USER", "CALC", "user", "x", ""]), st.sampled_from(["=", ":", " : "]), texts)
def test_any_config_loads_as_an_arch_or_is_refused(tmp_path_factory, keys, mode, sep, run_name):
    body = "\n".join(f"{k}{sep}{v}" for k, v in keys.items())
    text = (f"[general]\nrun_name{sep}{run_name}\n[architecture_presets]\n{body}\n[run_presets]\n"
            f"InterfaceBandwidth{sep}{mode}\n")
    _answers(load_cfg, _file(tmp_path_factory, "fuzzed.cfg", text))


@SETTINGS
@given(st.one_of(bad_bytes, st.binary(max_size=400), st.text(max_size=400)))
def test_any_bytes_as_a_config_load_or_are_refused(tmp_path_factory, content):
    _answers(load_cfg, _file(tmp_path_factory, "fuzzed.cfg", content))


rows = st.lists(st.lists(cells, min_size=1, max_size=10), max_size=4)


@SETTINGS
@given(st.sampled_from([CONV_HEADER, GEMM_HEADER, ("Layer", "M", "N")]), rows,
       st.sampled_from([",", ""]), st.sampled_from(["\n", "\r\n"]))
def test_any_topology_reads_or_is_refused(tmp_path_factory, header, table, end, newline):
    lines = [", ".join(header) + ","] + [",".join(row) + end for row in table]
    _answers(load_topology, _file(tmp_path_factory, "fuzzed.csv", newline.join(lines)))


@SETTINGS
@given(st.one_of(bad_bytes, st.binary(max_size=400), st.text(max_size=400)))
def test_any_bytes_as_a_topology_read_or_are_refused(tmp_path_factory, content):
    _answers(load_topology, _file(tmp_path_factory, "fuzzed.csv", content))


sizes = st.one_of(st.integers(1, 64), st.integers(2**20, 2**40))


def _priced(tmp_path_factory, layers, rows: int, cols: int, dataflow: str, fidelity: str) -> None:
    from accelsim.sim.api import run

    cfg = (GOLDEN / "scalesim_16x8_ws.cfg").read_text().replace("ArrayHeight:    16", f"ArrayHeight: {rows}") \
        .replace("ArrayWidth:     8", f"ArrayWidth: {cols}").replace("Dataflow : ws", f"Dataflow : {dataflow}")
    table = "Layer,M,N,K,\n" + "\n".join(f"l{i},{m},{n},{k}," for i, (m, n, k) in enumerate(layers))
    folder = tmp_path_factory.mktemp("pair")
    (folder / "a.cfg").write_text(cfg)
    (folder / "t.csv").write_text(table)
    _answers(lambda: run(str(folder / "t.csv"), arch=load_cfg(folder / "a.cfg"), fidelity=fidelity, trace=True))


@settings(SETTINGS, max_examples=max(10, FUZZ_EXAMPLES // 3))
@given(st.lists(st.tuples(sizes, sizes, sizes), min_size=1, max_size=3), st.integers(1, 2**20), st.integers(1, 2**20),
       st.sampled_from(["ws", "os", "is"]))
def test_a_read_topology_prices_on_a_read_config_or_is_refused(tmp_path_factory, layers, rows, cols, dataflow):
    """What imports also compiles: GEMMs of any size on arrays of any shape, priced at the roofline."""
    _priced(tmp_path_factory, layers, rows, cols, dataflow, "roofline")


small = st.integers(1, 48)


@settings(SETTINGS, max_examples=max(5, FUZZ_EXAMPLES // 10))
@given(st.lists(st.tuples(small, small, small), min_size=1, max_size=2), st.integers(1, 8), st.integers(1, 8),
       st.sampled_from(["ws", "os", "is"]))
def test_a_small_topology_simulates_tile_by_tile_or_is_refused(tmp_path_factory, layers, rows, cols, dataflow):
    _priced(tmp_path_factory, layers, rows, cols, dataflow, "tile")
