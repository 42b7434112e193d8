"""A PE array's loop nest shows its streamed loop: the step's dims no spatial loop unrolls pass through the array,
one vector a cycle per fold (WS: a conv's output pixels), split over the units that share the step."""
from compiler.mapping import LevelTile, Mapping, Spatial

LOOPS = (("n", 1), ("k", 64), ("p", 7), ("q", 14), ("c", 32))


def conv(step: dict[str, int], spatial: tuple[Spatial, ...]) -> Mapping:
    inner = LevelTile("sram", tuple((d, step[d]) for d, _ in LOOPS), ("k", "c"))
    return Mapping(op="conv", signature="s", unit="pe_array", loops=LOOPS,
                   levels=(LevelTile("dram", LOOPS, ("k", "c"), False), inner), spatial=spatial, dataflow="ws",
                   parts=(("n", "m"), ("k", "n"), ("p", "m"), ("q", "m"), ("c", "k")))


def test_the_streamed_pixels_are_a_loop_between_the_units_and_the_pe_array():
    # a step of 7 x 14 pixels over 2 arrays along q: each array streams 7 x 7 = 49 pixels per fold
    mapping = conv({"n": 1, "k": 32, "p": 7, "q": 14, "c": 32},
                   (Spatial("q", "units", 2), Spatial("c", "rows", 32), Spatial("k", "cols", 32)))
    lines = [line.strip() for line in mapping.text().splitlines()]
    at = lines.index("parallel_for q in range(2):  # units")
    assert lines[at + 1].startswith("for p in range(7):  # streamed: 49 input rows (p x q) per fold, one a cycle")
    assert lines[at + 2:at + 5] == ["for q in range(7):", "parallel_for c in range(32):  # rows",
                                    "parallel_for k in range(32):  # cols"]


def test_a_stream_of_one_vector_still_shows():
    # batch-1 FC: one input row a fold, what leaves a full fold idle while the next weights load
    mapping = conv({"n": 1, "k": 32, "p": 1, "q": 1, "c": 32}, (Spatial("c", "rows", 32), Spatial("k", "cols", 32)))
    assert "for n in range(1):  # streamed: 1 input row (n) per fold" in mapping.text()


def test_no_stream_off_an_array():
    mapping = conv({"n": 1, "k": 32, "p": 7, "q": 14, "c": 32}, ())
    assert "streamed" not in Mapping(**{**mapping.__dict__, "dataflow": None}).text()
