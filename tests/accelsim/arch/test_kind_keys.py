"""Which unit keys an arch kind allows and requires in YAML comes from its profile (compiler.hardware.profiles): a
PE array's array and dataflows, a GPU SM's limits and pipeline stages, a CPU's micro-kernel, a vector unit beside an
array running its epilogues; a key of another kind is refused naming the file, the key and the kind."""
import pytest
import yaml

from accelsim.arch import load_arch, presets_dir
from compiler.errors import UserError


def changed(tmp_path, preset: str, change) -> str:
    data = yaml.safe_load((presets_dir() / f"{preset}.yaml").read_text())
    change(data["compute"])
    path = tmp_path / f"{preset}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def matrix(compute) -> dict:
    return next(u for u in compute if u["role"] == "matrix")


def vector(compute) -> dict:
    return next(u for u in compute if u["role"] == "vector")


CASES = [
    ("systolic_8x8", lambda c: matrix(c).update(pipeline_stages=2), r"compute\[0\]\.pipeline_stages.*makes no sense "
     r"on a systolic matrix unit"),
    ("a100", lambda c: matrix(c).pop("limits"), r"missing key 'limits' \(required on a simt matrix unit\)"),
    ("a100", lambda c: matrix(c).update(micro_kernel={"rows": 1, "cols": 1, "register_rows": 1,
                                                      "register_bytes": "64 B"}), r"makes no sense on a simt matrix"),
    ("xeon_spr", lambda c: vector(c).update(limits={"warp": 32}), r"makes no sense on a simd vector unit"),
    ("xeon_spr", lambda c: vector(c).update(output_stage=True), r"only a vector unit beside a systolic or ternary "
     r"array runs its epilogues as they leave it, not a simd vector unit"),
]


@pytest.mark.parametrize("preset, change, message", CASES, ids=[f"{p}-{i}" for i, (p, _, _) in enumerate(CASES)])
def test_a_key_of_another_kind_is_refused(tmp_path, preset, change, message):
    with pytest.raises(UserError, match=message):
        load_arch(changed(tmp_path, preset, change))


def test_a_ternary_arch_needs_a_ternary_matrix_unit(tmp_path):
    ternary = next(p.stem for p in sorted(presets_dir().glob("*.yaml")) if "kind: ternary" in p.read_text())

    def untern(compute):       # the matrix units compute int8 instead
        for unit in compute:
            for key in ("macs_per_cycle", "mac_energy"):
                if "ternary" in unit.get(key, {}):
                    unit[key]["int8"] = unit[key].pop("ternary")

    with pytest.raises(UserError, match=r"a ternary arch needs a matrix unit with `ternary` in macs_per_cycle"):
        load_arch(changed(tmp_path, ternary, untern))
