"""System descriptions (archs/systems/*.yaml): every preset loads with its sources cited and its published link
figures; slices fit or are refused by name; every kind of mistake in a file is an ArchError naming file, key
path and value."""
import math

import pytest

from accelsim.arch import ArchError, preset_names
from accelsim.arch.system import Topology, balanced_shape
from accelsim.arch.system_load import load_system, load_system_text, system_names, systems_dir
from compiler.errors import UserError

SYSTEMS = sorted(systems_dir().glob("*.yaml"))
BASE = """version: 1
kind: system
name: two_level
description: nodes of 8 devices on a switch, joined by a fat tree
device: a100
devices: {default: 8}
levels:
  - name: nvlink
    topology: switch
    devices: 8
    links: 12
    bandwidth: 25 GB/s
    latency: 1 us
  - name: ib
    topology: fat_tree
    nics: 8
    bandwidth: 25 GB/s
    latency: 3 us
"""
TORUS = """version: 1
kind: system
name: cube
description: a 4x4x4 torus
device: tpu_v4
devices: {default: 64, max: 64}
levels:
  - name: ici
    topology: torus3d
    shape: 4x4x4
    links: 6
    bandwidth: 45 GB/s
    latency: 1 us
"""


def load(text: str):
    return load_system_text(text, "test.yaml", systems_dir() / "test.yaml")


def test_presets_found():
    assert {"gtx580x2", "dgx_a100", "dgx_h100", "tpu_v4_pod"} <= set(system_names())
    assert not set(system_names()) & set(preset_names())     # a system and a device never share a name


@pytest.mark.parametrize("path", SYSTEMS, ids=lambda p: p.stem)
def test_preset_loads_with_sources(path):
    system = load_system(path.stem)
    assert system == load_system(path) and system.name == path.stem
    header = path.read_text().split("\nversion:")[0]
    assert header.startswith("#") and "Sources" in header and "[V]" in header
    assert system.device.name in preset_names()
    assert system.fit().devices == system.devices.default


# (system, level, per device per direction as published: links x rate)  REFERENCE.md 2.1, 2.3
PER_DEVICE = [("dgx_a100", "nvlink", 300e9), ("dgx_h100", "nvlink", 450e9), ("dgx_a100", "infiniband", 25e9),
              ("dgx_h100", "infiniband", 50e9), ("gtx580x2", "pcie", 8e9), ("tpu_v4_pod", "ici", 6 * 45e9)]


@pytest.mark.parametrize("name, level, rate", PER_DEVICE)
def test_published_link_rates(name, level, rate):
    lv = next(lv for lv in load_system(name).levels if lv.name == level)
    assert lv.ports * lv.bandwidth_bytes_per_s == pytest.approx(rate)


def test_tpu_pod_matches_googles_pod_figures():
    """A second source: docs.cloud.google.com/tpu/docs/v4 gives 1.1 PB/s all-reduce bandwidth per pod, i.e. every
    link of every chip busy (the preset's per-link rate is the scaling book's)."""
    system = load_system("tpu_v4_pod")
    ici = system.levels[0]
    assert ici.devices == 4096 and ici.shape == (16, 16, 16) and ici.topology is Topology.torus3d
    assert 4096 * ici.ports * ici.payload_bytes_per_s == pytest.approx(1.1e15, rel=0.01)
    assert ici.wraps(4) and ici.wraps(16) and not ici.wraps(2) and not ici.wraps(6)


def test_only_h100_nodes_reduce_in_the_switch():
    assert load_system("dgx_h100").levels[0].in_network_reduction
    assert not load_system("dgx_a100").levels[0].in_network_reduction


def test_slices_fit_the_hierarchy():
    dgx = load_system("dgx_a100")
    assert dgx.fit(16).participants == (8, 2) and dgx.fit(4).participants == (4, 1) and dgx.fit(16).active == (0, 1)
    assert dgx.fit(1024).participants == (8, 128)
    tpu = load_system("tpu_v4_pod")
    assert tpu.fit(4096).shape == ((16, 16, 16),) and tpu.fit(64).shape == ((4, 4, 4),)
    assert tpu.fit(shape=(4, 4, 8)).devices == 128 and tpu.fit(128, (4, 4, 8)).shape == ((4, 4, 8),)
    assert balanced_shape(512, 3, 4) == (8, 8, 8) and balanced_shape(12, 2) == (3, 4)


@pytest.mark.parametrize("name, devices, shape, message", [
    ("dgx_a100", 12, None, "12 devices do not fill whole groups of 8"),
    ("dgx_a100", 1, None, "takes at least 2"),
    ("gtx580x2", 4, None, "takes 2 to 2"),
    ("tpu_v4_pod", 8192, None, "takes 2 to 4,096"),
    ("tpu_v4_pod", 32, (4, 4, 4), "--slice 4x4x4 is 64 devices, not --devices 32"),
    ("tpu_v4_pod", None, (4, 16), "has 2 dimensions"),
    ("dgx_h100", None, (4, 4, 4), "needs a torus level"),
])
def test_slices_that_do_not_fit_are_refused(name, devices, shape, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(")):
        load_system(name).fit(devices, shape)


def test_an_unknown_system_gets_a_suggestion_and_the_list():
    with pytest.raises(ArchError, match=r"unknown system 'dgx_h10'; did you mean 'dgx_h100'\? systems: dgx_a100"):
        load_system("dgx_h10")


@pytest.mark.parametrize("old, new, message", [
    ("bandwidth: 25 GB/s\n    latency: 1 us", "bandwidth: 0 GB/s\n    latency: 1 us",
     r"levels\[0\].bandwidth: '0 GB/s' must be greater than zero"),
    ("bandwidth: 25 GB/s\n    latency: 3 us", "bandwidth: -25 GB/s\n    latency: 3 us",
     r"levels\[1\].bandwidth: '-25 GB/s' is negative"),
    ("latency: 1 us", "latency: 1", r"levels\[0\].latency: 1 is not a time"),
    ("bandwidth: 25 GB/s\n    latency: 1 us", "bandwidth: 200 Gb/s\n    latency: 1 us",
     r"levels\[0\].bandwidth: '200 Gb/s' is not a bandwidth \(did you mean 'GB/s'\?\)"),
    ("topology: fat_tree", "topology: fat-tree", r"levels\[1\].topology: unknown topology 'fat-tree'; did you mean "
                                                 r"'fat_tree'\?"),
    ("    links: 12\n", "    link: 12\n", r"levels\[0\].link: unknown key 'link'; did you mean 'links'\?"),
    ("device: a100", "device: a1000", r"test.yaml: device: unknown arch 'a1000'; did you mean 'a100'\? presets: "),
    ("kind: system", "kind: simt", r"kind: 'simt' in a system file"),
    ("devices: {default: 8}", "devices: {default: 12}", r"devices.default: 12: 12 devices do not fill whole groups"),
    ("devices: {default: 8}", "devices: {default: 8, max: 4}", r"devices.default: 8 is outside min 2 .. max 4"),
    ("    devices: 8\n", "    devices: 6\n    nics: 2\n", r"levels\[0\].nics: 2 makes no sense on a switch level"),
    ("    nics: 8\n", "    nics: 8\n    links: 1\n", r"levels\[1\]: give exactly one of `links`"),
    ("    devices: 8\n", "", r"levels\[0\].devices: missing key 'devices'"),
    ("    latency: 1 us\n", "    latency: 1 us\n    efficiency: 1.2\n", r"efficiency: 1.2 is not a fraction"),
    ("    latency: 3 us\n", "    latency: 3 us\n    devices: 12\n", r"levels\[1\].devices: 12 must be a multiple of "
                                                                     r"the 8"),
    ("name: nvlink", "name: ib", r"levels\[1\].name: 'ib' is used twice"),
    ("levels:\n", "algorithms: [ring, ring]\nlevels:\n", r"algorithms: \['ring', 'ring'\]: name each algorithm once"),
    ("levels:\n", "overhead: 5 us\nprotocols: [{name: ll, overhead: 6 us}]\nlevels:\n",
     r"overhead: give the overhead of each protocol under `protocols`, not both"),
    ("levels:\n", "protocols: [{name: ll, overhead: 6 us}, {name: ll, overhead: 8 us}]\nlevels:\n",
     r"protocols\[1\].name: 'll' is used twice"),
    ("levels:\n", "protocols: [{name: simple, overhead: 8 us, latency_scale: 0}]\nlevels:\n",
     r"protocols\[0\].latency_scale: 0 is not a positive finite number"),
    ("levels:\n", "protocols: [{name: simple, overhead: 8 us, latency_scale: .inf}]\nlevels:\n",
     r"protocols\[0\].latency_scale: inf is not a positive finite number"),
    ("levels:\n", "protocols: [{name: simple, overhead: 8 us, latency_scale: .nan}]\nlevels:\n",
     r"protocols\[0\].latency_scale: nan is not a positive finite number"),
    ("levels:\n", "protocols: [{name: ll, overhead: 6 us, efficiency: 1.5}]\nlevels:\n",
     r"protocols\[0\].efficiency: 1.5 is not a fraction"),
    ("    latency: 1 us\n", "    latency: 1 us\n    reduction_latency: 25 us\n",
     r"levels\[0\].reduction_latency: '25 us' needs `in_network_reduction: true` on the level"),
    ("levels:\n", "levels: [\n", r"test.yaml: line \d+: YAML syntax error"),
])
def test_mistakes_name_file_key_and_value(old, new, message):
    assert old in BASE
    with pytest.raises(ArchError, match=r"test.yaml: .*" + message if not message.startswith("test") else message):
        load(BASE.replace(old, new, 1))


@pytest.mark.parametrize("old, new, message", [
    ("shape: 4x4x4", "shape: 4x4x4\n    devices: 32", r"levels\[0\].shape: 4x4x4 is 64 groups of 1, 64 devices, "
                                                      r"not the level's 32"),
    ("shape: 4x4x4", "shape: 4x4", r"levels\[0\].shape: '4x4' has 2 dimensions, the topology 3"),
    ("shape: 4x4x4", "shape: 4 by 4", r"levels\[0\].shape: '4 by 4' is not a shape"),
    ("    shape: 4x4x4\n", "", r"levels\[0\].shape: missing key 'shape'"),
    ("links: 6", "links: 4", r"levels\[0\].links: 4 links cannot be spread over the 6 neighbours"),
    ("devices: {default: 64, max: 64}", "devices: {default: 64, max: 128}", r"devices.max: 128 exceeds the 64"),
    ("    latency: 1 us\n", "    latency: 1 us\n    in_network_reduction: true\n",
     r"levels\[0\].in_network_reduction: True makes no sense on a torus3d level"),
    ("    latency: 1 us\n", "    latency: 1 us\n    wrap: yes please\n",
     r"levels\[0\].wrap: 'yes please' is not true or false"),
])
def test_torus_mistakes(old, new, message):
    assert old in TORUS
    with pytest.raises(ArchError, match=r"test.yaml: " + message):
        load(TORUS.replace(old, new, 1))


def test_a_good_torus_loads_and_its_default_slice_is_the_whole():
    system = load(TORUS)
    assert system.fit().shape == ((4, 4, 4),) and math.prod(system.fit().shape[0]) == 64
