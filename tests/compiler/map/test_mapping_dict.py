"""Mapping.to_dict and from_dict: a mapping as JSON values and back, exactly (what the on-disk caches keep); a value
of another type (True for an extent, 3 for a flag) is refused."""
import json

import pytest

from compiler.mapping import LevelTile, Mapping, Spatial

MAPPING = Mapping(op="gemm", signature="einsum:mk,kn->mn", unit="mxu", loops=(("m", 64), ("n", 32), ("k", 16)),
                  levels=(LevelTile("dram", (("m", 64), ("n", 32), ("k", 16)), ("m", "n", "k")),
                          LevelTile("sram", (("m", 8), ("n", 32), ("k", 16)), ("k", "m"), double_buffered=False)),
                  spatial=(Spatial("n", "cols", 4),), dataflow="ws", notes=("a note",), dtype="int8",
                  parts=(("m", "m"), ("n", "n"), ("k", "k")))


def test_a_mapping_reads_back_as_it_was_through_json():
    data = json.loads(json.dumps(MAPPING.to_dict()))
    assert Mapping.from_dict(data) == MAPPING and Mapping.from_dict(data).to_dict() == data
    assert data["levels"][1] == {"level": "sram", "tile": [["m", 8], ["n", 32], ["k", 16]], "order": ["k", "m"],
                                 "double_buffered": False}
    bare = Mapping(op="relu", signature="vector", unit="vpu", loops=(("e", 4),), levels=())
    assert Mapping.from_dict(json.loads(json.dumps(bare.to_dict()))) == bare


@pytest.mark.parametrize("path, bad", [(("loops", 0, 1), True), (("levels", 0, "double_buffered"), 1),
                                       (("spatial", 0, 2), 4.0), (("dataflow",), 3)])
def test_a_value_of_another_type_is_refused(path, bad):
    data = json.loads(json.dumps(MAPPING.to_dict()))
    *inner, last = path
    place = data
    for step in inner:
        place = place[step]
    place[last] = bad
    with pytest.raises(TypeError, match="is not a"):
        Mapping.from_dict(data)
