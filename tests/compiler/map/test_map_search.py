"""The budgeted search and its cache key: the cheapest of the first `budget` candidates (the earlier on a tie), and
an arch key that changes with the file's bytes and with the object, never with a second load."""
import shutil
from dataclasses import replace

import pytest

from accelsim.arch import load_arch
from compiler.errors import UserError
from compiler.map.search import CACHE, Cache, search
from compiler.targeting.identity import arch_key
from compiler.mapping import LevelTile, Mapping

PRESETS = load_arch("tpu_v1").source_file.parent


def candidates(count: int) -> list[Mapping]:
    return [Mapping(op=f"c{i}", signature="", unit="u", loops=(("m", i + 1),), levels=()) for i in range(count)]


def test_the_cheapest_within_the_budget_wins():
    cost = {"c0": 5.0, "c1": 3.0, "c2": 4.0, "c3": 1.0}
    assert search(candidates(4), lambda m: cost[m.op], budget=4).op == "c3"
    assert search(candidates(4), lambda m: cost[m.op], budget=3).op == "c1"      # c3 is past the budget
    assert search(candidates(4), lambda m: cost[m.op], budget=1).op == "c0"


def test_a_tie_keeps_the_earlier_candidate_and_reports_only_the_budget():
    seen = []

    def report(m):
        seen.append(m.op)
        return 2.0
    assert search(iter(candidates(10)), report, budget=4).op == "c0"
    assert seen == ["c0", "c1", "c2", "c3"]


def test_an_empty_space_and_a_zero_budget_are_refused():
    with pytest.raises(UserError, match="the mapper was given no candidates"):
        search([], lambda m: 1.0)
    with pytest.raises(UserError, match="mapping budget 0: must be at least 1"):
        search(candidates(2), lambda m: 1.0, budget=0)


def test_the_arch_key_follows_the_file_bytes_and_the_object(tmp_path):
    copy = tmp_path / "tpu_v1.yaml"
    shutil.copy(PRESETS / "tpu_v1.yaml", copy)
    first, again = load_arch(copy), load_arch(copy)
    key = arch_key(first)
    assert key == arch_key(again) and key.startswith("tpu_v1:")         # a second load: the same key
    assert arch_key(replace(first, clock_hz=first.clock_hz * 2)) != key  # an Arch changed in Python
    copy.write_text(copy.read_text() + "\n# edited\n")                  # the same values, other bytes
    edited = arch_key(load_arch(copy))
    assert edited != key and edited.split(":")[2] == key.split(":")[2]


def test_the_cache_returns_the_mapping_renamed_for_a_twin_op():
    cache = Cache()
    mapping = candidates(1)[0]
    assert cache.lookup(("k",), "c0") is None and cache.misses == 1
    cache.store(("k",), mapping)
    assert cache.lookup(("k",), "c0") is mapping
    twin = cache.lookup(("k",), "other")
    assert twin.op == "other" and twin.loops == mapping.loops and cache.hits == 2
    cache.clear()
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)
    assert isinstance(CACHE, Cache)



def tiled(count: int, tilings: int) -> list[Mapping]:
    """`count` candidates over `tilings` tilings, as the space lists them: every tiling's first, then the seconds."""
    return [Mapping(op=f"c{i}", signature="", unit="u", loops=(("m", 64),),
                    levels=(LevelTile("l", (("m", 1 + i % tilings),), ("m",)),)) for i in range(count)]


def test_every_tiling_is_reported_however_small_the_budget():
    """A space that holds smaller buffers' tilings (on a PE array): each of 10 tilings' first candidate, then
    budget - 1 more, the second candidates of the tilings whose first did best."""
    cost = {f"c{i}": float(10 - i) for i in range(10)}                   # firsts: c9 best, then c8, c7
    cost |= {f"c{i}": cost[f"c{i - 10}"] + 1 for i in range(10, 20)}      # seconds: one worse ...
    cost["c17"] = 0.5                                                     # ... but tiling 7's, the best of all
    seen = []

    def report(m):
        seen.append(m.op)
        return cost[m.op]
    assert search(tiled(20, 10), report, budget=3, every_tiling=True).op == "c9"
    assert seen == [f"c{i}" for i in range(10)] + ["c19", "c18"]
    assert search(tiled(20, 10), report, budget=4, every_tiling=True).op == "c17"
    seen.clear()
    assert search(tiled(20, 10), report, budget=3).op == "c2"            # without: the first 3 candidates
    assert seen == ["c0", "c1", "c2"]
