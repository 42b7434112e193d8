"""Property tests of the run cache's files (accelsim.sim.cache): any Result of in-range values is stored and read
back exactly, types included; one holding a negative, infinite or NaN count or time is not stored, and a file
forged to hold one (its digest recomputed) is refused with a CacheWarning naming it."""
import dataclasses
import json
import math
import os
import re
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelsim.results.result import OP_FIELDS, OpResult, Result
from accelsim.sim import cache
from compiler.errors import CacheWarning
from compiler.map import entry

EXAMPLES = int(os.environ.get("ACCELSIM_FUZZ_EXAMPLES", "30"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
ARCH = types.SimpleNamespace(source_file="/somewhere/arch.yaml")

# Strategies for cache entries: an OpResult field of each annotation, a Result of such ops.
names = st.text(max_size=12)
counts = st.integers(0, 2 ** 63 - 1)
times = st.floats(min_value=0, allow_nan=False, allow_infinity=False)
FIELD = {"str": names, "int": counts, "float": times, "int | None": st.none() | counts,
         "tuple[int, ...]": st.lists(st.integers(0, 2 ** 40), max_size=4).map(tuple),
         "dict[str, int]": st.dictionaries(names, counts, max_size=3),
         "dict[str, float]": st.dictionaries(names, times, max_size=3)}
op_results = st.builds(OpResult, **{f.name: FIELD[f.type] for f in dataclasses.fields(OpResult)})
plain = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 63, 2 ** 63) | times | names,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
                     max_leaves=6)
results = st.builds(Result, model=st.dictionaries(names, plain, max_size=3),
                    arch=st.dictionaries(names, plain, max_size=3),
                    fidelity=st.sampled_from(["tile", "roofline"]), ops=st.lists(op_results, min_size=1, max_size=4),
                    notes=st.lists(names, max_size=2), memory=st.dictionaries(names, plain, max_size=3))
KEY = [cache.FORMAT, "a model", "an arch"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "source_digest", lambda: cache.LOADED)
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path))
    return tmp_path


def never(*args):
    raise AssertionError("computed, though the file holds the mappings")


@SETTINGS
@given(results)
def test_a_result_reads_back_exactly(folder, result):
    cache.store(KEY, result)
    again = cache.load(KEY, ARCH, never)
    assert again is not None
    assert json.dumps(again.to_record()) == json.dumps(dataclasses.replace(
        result, arch={**result.arch, "file": ARCH.source_file}).to_record())
    assert dict(again.mappings) == {}


@SETTINGS
@given(results, st.integers(min_value=0), st.sampled_from([-1, -1.0, math.inf, math.nan, 2 ** 63]))
def test_an_out_of_range_value_is_not_stored_and_a_forged_one_is_refused(folder, result, which, bad):
    numeric = [(i, f.name) for i, op in enumerate(result.ops) for f in dataclasses.fields(op)
               if type(getattr(op, f.name)) is (int if type(bad) is int else float)]
    if not numeric:
        return
    index, name = numeric[which % len(numeric)]
    ops = list(result.ops)
    ops[index] = dataclasses.replace(ops[index], **{name: bad})
    cache.store(KEY, dataclasses.replace(result, ops=ops))
    file = cache.disk.path(KEY, cache.folder())
    assert not file.exists()
    cache.store(KEY, result)                      # then forged: the value put in, the digest recomputed
    header, _, body = file.read_bytes().partition(b"\n")
    rows, _, mappings = body.partition(b"\n")
    data = json.loads(rows)
    data["ops"][index][list(OP_FIELDS).index(name)] = bad
    body = json.dumps(data).encode() + b"\n" + mappings
    file.write_bytes(json.dumps({"key": KEY, "digest": entry.digest(KEY, body)}).encode() + b"\n" + body)
    with pytest.warns(CacheWarning, match=f"{re.escape(str(file))} .*counts and times are finite"):
        assert cache.load(KEY, ARCH, never) is None
