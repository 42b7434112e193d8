"""A Result's record (what a stored run keeps, accelsim.sim.cache): to_record and from_record give the same Result
back, ops as dicts (each value's type checked) or as rows (the layout checked); a value of another type is refused."""
import json

import pytest

from accelsim.results.result import OP_FIELDS, OpResult, Result


def op(name: str, **changes) -> OpResult:
    fields = dict(name=name, node=name, op="Conv", kind="einsum", shape=(1, 8), dtype="int8", rate_dtype="int8",
                  unit="pe", macs=64, ops=0, bytes=80, bytes_by_level={"dram": 80}, compute_seconds=1e-6,
                  level_seconds={"dram": 2e-6}, latency_seconds=0.0, seconds=2e-6, cycles=2, bound="dram",
                  utilisation=0.5, energy_j={"pe": 1e-9}, compute_cycles=1, stall_cycles=1)
    return OpResult(**{**fields, **changes})


RESULT = Result(model={"name": "m"}, arch={"name": "toy"}, fidelity="tile", ops=[op("a"), op("b", kernel="a")],
                notes=["a note"], memory={"peak": 3})


@pytest.mark.parametrize("rows", [False, True])
def test_a_record_gives_the_result_back_through_json(rows):
    data = json.loads(json.dumps(RESULT.to_record(rows=rows)))
    again = Result.from_record(data, rows=rows)
    assert again == RESULT and again.ops[0].shape == (1, 8)
    assert again.to_record(rows=rows) == data


def test_a_row_is_the_ops_fields_in_order_and_the_dict_is_the_reports():
    assert RESULT.to_record(rows=True)["ops"][0] == [RESULT.ops[0].to_dict()[name] for name in OP_FIELDS]
    assert RESULT.to_record()["ops"][0] == RESULT.ops[0].to_dict()
    assert set(RESULT.to_record()) == {"model", "arch", "fidelity", "notes", "memory", "ops"}


@pytest.mark.parametrize("name, bad", [("cycles", 2.0), ("seconds", 2), ("shape", [1, True]), ("stall_cycles", "1")])
def test_an_op_value_of_another_type_is_refused(name, bad):
    data = json.loads(json.dumps(RESULT.to_record()))
    data["ops"][0][name] = bad
    with pytest.raises(TypeError, match="is not a"):
        Result.from_record(data)


def test_a_field_missing_or_extra_or_a_row_of_another_length_is_refused():
    data = RESULT.to_record()
    with pytest.raises(KeyError, match="a result with fields"):
        Result.from_record({**data, "extra": 1})
    with pytest.raises(KeyError, match="an op with fields"):
        OpResult.from_dict({**RESULT.ops[0].to_dict(), "extra": 1})
    with pytest.raises(KeyError, match="an op row of other than"):
        OpResult.from_row(RESULT.ops[0].to_row()[:-1])
