"""Property tests of the cache's files (compiler.map.entry) and of the mappings kept in them (compiler.map.disk):
whatever a file's bytes become, reading it gives the body that was written under that key, or nothing with a
CacheWarning; a mapping whose numbers a forger changed (and whose digest they recomputed) is either refused or is
one that is legal on the arch and prices to a finite, non-negative cost, never an exception."""
import json
import math
import os
import string
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.arch import load_arch
from accelsim.price.cost import reporter
from accelsim.sim.build import build
from compiler.errors import CacheWarning
from compiler.ir import Einsum
from compiler.map import CACHE, disk, entry, map_op
from compiler.mapping import op_signature

EXAMPLES = int(os.environ.get("ACCELSIM_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# Strategies for cache entries: keys as both caches make them (lists of format, names, digests, numbers), bodies
# of any text, and changes of one byte at any place.
words = st.text(alphabet=string.ascii_letters + string.digits + "|:,.-_ ()'", max_size=40)
keys = st.lists(st.one_of(st.integers(0, 2 ** 40), words), min_size=1, max_size=6)
bodies = st.text(max_size=400)
changes = st.tuples(st.integers(min_value=0), st.integers(1, 255))     # (where, xor with what)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path))
    return tmp_path / entry.user() / "entries"


@SETTINGS
@given(keys, bodies, changes)
def test_a_file_reads_back_whole_or_not_at_all(folder, key, body, change):
    file = folder / "ab" / "cdef.json"
    entry.write(file, key, body, 1 << 20)
    assert entry.read(file, key, 1 << 20) == body.encode()
    with pytest.warns(CacheWarning, match="holds another key"):
        assert entry.read(file, key + ["another"], 1 << 20) is None
    assert not file.exists()        # removed
    entry.write(file, key, body, 1 << 20)
    data = bytearray(file.read_bytes())
    where, flip = change
    data[where % len(data)] ^= flip
    file.write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match=str(file)):
        assert entry.read(file, key, 1 << 20) is None
    assert not file.exists()


@SETTINGS
@given(keys, bodies)
def test_a_file_over_its_limit_is_neither_written_nor_read(folder, key, body):
    file = folder / "ab" / "cdef.json"
    size = len(json.dumps({"key": key, "digest": "0" * 64}, separators=(",", ":")).encode()) + 1 + len(body.encode())
    entry.write(file, key, body, size - 1)
    assert not file.exists()
    entry.write(file, key, body, size)
    assert entry.read(file, key, size) == body.encode()
    with pytest.warns(CacheWarning, match=f"holds {size:,} bytes, over the {size - 1:,}"):
        assert entry.read(file, key, size - 1) is None


def searched():
    """(op, arch, report, key, the file's JSON) for each distinct Einsum of ResNet-18 on a systolic array and a
    GPU, as the search stores them."""
    found = []
    for name in ("tpu_v1", "h100"):
        arch = load_arch(name)
        ir = build("resnet18", arch, mapped=False, image=32).ir
        report = reporter(arch, ir)
        for op in [op for op in ir.ops if isinstance(op, Einsum)][:12]:
            mapping = map_op(op, arch, report, cache=None)
            key = [disk.FORMAT, op_signature(op), name]
            found.append((op, arch, report, key, mapping.to_dict()))
    return found


SEARCHED = searched()


def numbers(value, path=()):
    """Every place in a mapping's JSON that holds an int (a tile extent, a factor)."""
    if type(value) is int:
        yield path
    elif isinstance(value, (list, dict)):
        for k, item in (value.items() if isinstance(value, dict) else enumerate(value)):
            yield from numbers(item, path + (k,))


def replaced(value, path, new):
    value = json.loads(json.dumps(value))
    place = value
    for k in path[:-1]:
        place = place[k]
    place[path[-1]] = new
    return value


@SETTINGS
@given(st.integers(0, len(SEARCHED) - 1), st.integers(min_value=0), st.integers(-2 ** 64, 2 ** 64))
def test_a_forged_number_is_refused_or_legal_and_priced(folder, monkeypatch, which, where, new):
    op, arch, report, key, data = SEARCHED[which]
    places = list(numbers(data))
    forged = replaced(data, places[where % len(places)], new)
    monkeypatch.setattr(disk, "folder", lambda: folder)
    entry.write(disk.path(key), key, json.dumps(forged), disk.MAPPING_BYTES)     # the digest of the forgery
    CACHE.clear()
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        mapping = disk.load(key, op, arch)
    if mapping is None:
        assert [w.category for w in warned] == [CacheWarning]
        return
    assert disk.fault(mapping, key[1], op, arch) is None
    cost = report(mapping)
    assert math.isfinite(cost) and cost >= 0
