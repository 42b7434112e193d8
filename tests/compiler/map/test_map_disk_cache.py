"""The on-disk mapping cache (compiler.map.disk) never changes a result: what a fresh process reads back equals
what the search finds (checked against a search that uses no cache), a corrupt file is searched again, and the key
changes with everything the search reads. Every test points ACCELSIM_CACHE at a folder of its own."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelsim.arch import load_arch
from accelsim.price.compat import KNOWN
from accelsim.price.cost import reporter
from accelsim.sim.build import build
from compiler.errors import CacheWarning
from compiler.map import CACHE, disk, entry, map_ir, map_op
from compiler.mapping import op_signature

ROOT = Path(__file__).resolve().parents[3]
PRESETS = ("tpu_v1", "h100")      # a systolic array and a GPU: other units, levels and notes

# Maps ResNet-18 on PRESETS through the process-wide cache and prints every mapping's repr; with "forbid" the
# search itself is replaced by one that fails, so every Einsum must come from the disk.
SCRIPT = """
import json, sys
import compiler.map
from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from accelsim.sim.build import build

def refuse(*args):
    raise AssertionError("searched, though the disk holds every mapping")

if sys.argv[1] == "forbid":
    compiler.map.search = refuse
out = {}
for name in json.loads(sys.argv[2]):
    arch = load_arch(name)
    ir = build("resnet18", arch, mapped=False).ir
    out[name] = {op: repr(m) for op, m in compiler.map.map_ir(ir, arch, reporter(arch, ir)).items()}
print(json.dumps(out))
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """An empty cache folder, and an empty in-memory cache (so the disk is asked)."""
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path))
    CACHE.clear()
    yield tmp_path / entry.user() / "mappings"
    CACHE.clear()


def mapped_in_fresh_process(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode, json.dumps(PRESETS)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_mappings_read_back_in_a_fresh_process_equal_the_search(folder):
    expected = {}
    for name in PRESETS:
        arch = load_arch(name)
        ir = build("resnet18", arch, mapped=False).ir
        expected[name] = {op: repr(m) for op, m in map_ir(ir, arch, reporter(arch, ir), cache=None).items()}
    assert not folder.exists()          # cache=None neither reads nor writes
    written = mapped_in_fresh_process("search")
    files = list(folder.rglob("*.json"))
    assert len(files) >= 2 * 10 and not list(folder.rglob("*.tmp"))    # ResNet-18 has ~20 distinct convs
    read = mapped_in_fresh_process("forbid")
    assert written == expected
    assert read == expected


def test_the_suite_never_writes_to_the_home_cache():
    home = Path.home() / ".cache"
    assert not Path(os.environ["ACCELSIM_CACHE"]).resolve().is_relative_to(home.resolve())


def resnet_conv(arch):
    ir = build("resnet18", arch, mapped=False).ir
    return ir, next(op for op in ir.ops if op.name == "layer1.0/conv1")


def rehashed(file, edit) -> None:
    """The mapping in `file` changed by `edit(mapping dict)` and written back with its digest recomputed, as a
    forger with write access to the file would: only the checks on what it holds can refuse it."""
    header, _, body = file.read_bytes().partition(b"\n")
    header = json.loads(header)
    mapping = json.loads(body)
    edit(mapping)
    body = json.dumps(mapping).encode()
    file.write_bytes(json.dumps({**header, "digest": entry.digest(header["key"], body)}).encode() + b"\n" + body)


def set_tile(level: int, dim: str, extent):
    def edit(mapping):
        mapping["levels"][level]["tile"] = [[d, extent if d == dim else e] for d, e in mapping["levels"][level]["tile"]]
    return edit


FORGERIES = {   # each a mapping of the right types that is not this op's legal mapping on tpu_v1
    "factor of the wrong type": lambda m: m["spatial"][0].__setitem__(2, str(m["spatial"][0][2])),
    "zero tile": set_tile(-1, "c", 0),                 # was a ZeroDivisionError on every run
    "negative tile": set_tile(-1, "c", -5),            # was priced: 1433 cycles instead of 1729
    "tile over its level": set_tile(-1, "c", 65),
    "tile under its spatial loops": set_tile(-1, "c", 2),      # 22 -> 2 with the digest recomputed: rows x22
    "another op's loops": lambda m: m.__setitem__("loops", [[d, 1 if d == "k" else e] for d, e in m["loops"]]),
    "a dataflow the array lacks": lambda m: m.__setitem__("dataflow", "os"),
    "an unknown level": lambda m: m["levels"][-1].__setitem__("level", "l9"),
    "an unknown unit": lambda m: m.__setitem__("unit", "gpu"),
    "a loop order over other dims": lambda m: m["levels"][0].__setitem__("order", ["x"]),
    "a spatial factor over its loop": lambda m: m["spatial"][0].__setitem__(2, 10 ** 6),
}
DAMAGES = [b"{not json", b"", b'{"key": [1], "mapping": {}}', "one digit", *FORGERIES]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_corrupt_or_forged_file_is_warned_about_and_searched_again(folder, damage, monkeypatch):
    import compiler.map

    searches = []
    search = compiler.map.search
    monkeypatch.setattr(compiler.map, "search", lambda *args, **kw: searches.append(args) or search(*args, **kw))
    arch = load_arch("tpu_v1")
    ir, op = resnet_conv(arch)
    first = map_op(op, arch, reporter(arch, ir))
    (file,) = folder.rglob("*.json")
    if damage == "one digit":      # a one-character change, the digest not recomputed
        text = file.read_text()
        assert '["c",22]' in text
        file.write_text(text.replace('["c",22]', '["c",2]', 1))
    elif damage in FORGERIES:
        rehashed(file, FORGERIES[damage])
    else:
        file.write_bytes(damage)
    CACHE.clear()
    with pytest.warns(CacheWarning, match=str(file)):
        again = map_op(op, arch, reporter(arch, ir))
    assert len(searches) == 2, "the damaged file was read as a mapping"
    assert again == first
    key = disk.key(op_signature(op), arch, 24, reporter(arch, ir))
    assert disk.path(key) == file and disk.load(key, op, arch) == first     # the damaged file was replaced


def test_an_unwritable_folder_is_no_error(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "file"))     # mkdir under a file fails
    arch = load_arch("tpu_v1")
    ir, op = resnet_conv(arch)
    CACHE.clear()
    with pytest.warns(CacheWarning, match="file/user-.*: cannot be read .*; the cache is not used"):
        assert map_op(op, arch, reporter(arch, ir)) == map_op(op, arch, reporter(arch, ir), cache=None)


def test_the_key_follows_budget_arch_content_and_pricing():
    arch = load_arch("tpu_v1")
    ir, op = resnet_conv(arch)
    report = reporter(arch, ir)
    signature = op_signature(op)
    base = disk.key(signature, arch, 24, report)
    assert base == disk.key(signature, load_arch("tpu_v1"), 24, reporter(arch, ir))   # same content, new objects
    moved = dataclasses.replace(arch, source_file=Path("/elsewhere/tpu_v1.yaml"))
    assert disk.key(signature, moved, 24, report) == base                              # the file's place is no content
    level = dataclasses.replace(arch.memory[-1], capacity_bytes=arch.memory[-1].capacity_bytes // 2)
    smaller = dataclasses.replace(arch, memory=arch.memory[:-1] + (level,))
    others = [disk.key(signature, arch, 25, report), disk.key(signature, smaller, 24, report),
              disk.key(signature, dataclasses.replace(arch, clock_hz=arch.clock_hz * 2), 24, report),
              disk.key(signature.replace("1x64x56x56", "1x64x28x28", 1), arch, 24, report),
              disk.key(signature, arch, 24, reporter(arch, ir, KNOWN["scalesim"]))]
    paths = {disk.path(k) for k in [base] + others}
    assert None not in others and len(paths) == len(others) + 1


def test_scalesim_pricing_is_not_served_native_mappings():
    """The in-memory cache keys on the cost model's binding too: on a 32x32 array SCALE-Sim's prices pick other
    tiles than native ones for two ResNet-18 convs."""
    arch = load_arch("systolic_32x32")
    ir = build("resnet18", arch, mapped=False).ir
    scalesim = KNOWN["scalesim"]
    alone = map_ir(ir, arch, reporter(arch, ir, scalesim), cache=None)
    native = map_ir(ir, arch, reporter(arch, ir), cache=None)
    assert alone != native       # else this test shows nothing
    map_ir(ir, arch, reporter(arch, ir))
    assert map_ir(ir, arch, reporter(arch, ir, scalesim)) == alone
