"""compiler.map.space._tiled answers a question asked before (the same b, m and n dims, extents, steps and instances;
another K, or other groups' dims, do not change it) from what it kept, as it would work it out afresh."""
from compiler.map import space


def test_tiled_answers_again_as_it_would_afresh_and_its_answer_is_the_callers_to_change():
    groups = {"b": [], "m": ["m"], "n": ["n"], "k": ["k"]}
    step = {"m": 256, "n": 128, "k": 64}
    space._TILED.clear()
    first = space._tiled(groups, {"m": 16384, "n": 6144, "k": 768}, step, 108)   # 64 x 48 blocks on 108 SMs
    assert first == {"m": 9, "n": 12} and len(space._TILED) == 1
    first["m"] = 1                               # a caller's change does not reach what is kept
    again = space._tiled(groups, {"m": 16384, "n": 6144, "k": 3072}, step, 108)      # another K: the same question
    assert again == {"m": 9, "n": 12} and len(space._TILED) == 1
    other = space._tiled(groups, {"m": 16384, "n": 6144, "k": 768}, step, 64)
    space._TILED.clear()
    assert other == space._tiled(groups, {"m": 16384, "n": 6144, "k": 768}, step, 64) and other != again
