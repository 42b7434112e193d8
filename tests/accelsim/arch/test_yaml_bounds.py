"""YAML from anywhere: aliases that expand past a bound (an alias bomb) or into themselves, and lists or mappings
nested past a depth, are refused at once, in an arch file, a system file, a sweep spec and a dataset's provenance,
before anything walks or prints the value."""
import subprocess
import sys

import pytest

from accelsim.arch import ArchError, load_arch
from accelsim.arch.load import MAX_YAML_DEPTH, MAX_YAML_VALUES, bounded_yaml
from accelsim.arch.system_load import load_system
from accelsim.sweep.spec import SpecError, load_spec

LEVELS = "abcdefghi"
BOMB = "version: 1\n" + "".join(
    f"{x}: &{x} [{', '.join([repr('lol')] * 9 if i == 0 else [f'*{LEVELS[i - 1]}'] * 9)}]\n"
    for i, x in enumerate(LEVELS)) + "name: *i\n"      # 9^9 = 387 M values from 600 bytes


def test_an_alias_bomb_is_refused_by_every_reader(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB) < 700
    with pytest.raises(ArchError, match=r"bomb.yaml: its aliases expand to more than 100,000 values"):
        load_arch(path)
    with pytest.raises(SpecError, match="alias bomb"):
        load_spec(path)


def test_the_command_line_answers_at_once(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    done = subprocess.run([sys.executable, "-m", "accelsim.cli", "run", "resnet18", "--arch", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "alias bomb is refused" in done.stderr and "Traceback" not in done.stderr


def test_a_self_referring_alias_is_refused():
    with pytest.raises(Exception, match="refers to itself"):
        bounded_yaml("a: &a [1, *a]\n")


def test_ordinary_aliases_still_read():
    text = "unit: &u {int8: 1}\nother: *u\nmany: [" + ", ".join(["*u"] * 1000) + "]\n"
    data = bounded_yaml(text)
    assert data["other"] == {"int8": 1} and len(data["many"]) == 1000 and MAX_YAML_VALUES >= 10_000


@pytest.mark.parametrize("levels", [MAX_YAML_DEPTH + 1, 300, 100_000])
@pytest.mark.parametrize("opening, closing", [("[", "]"), ("{a: ", "}")])
def test_deep_nesting_is_refused_naming_the_file(levels, opening, closing, tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: " + opening * levels + closing * levels + "\n")
    for reader in (load_arch, load_system):
        with pytest.raises(ArchError, match=rf"deep.yaml: it nests lists or mappings more than {MAX_YAML_DEPTH} "):
            reader(path)


def test_nesting_up_to_the_bound_reads():
    data = bounded_yaml("[" * MAX_YAML_DEPTH + "1" + "]" * MAX_YAML_DEPTH)
    for _ in range(MAX_YAML_DEPTH):
        data = data[0]
    assert data == 1


def test_a_key_given_twice_is_refused_by_every_reader(tmp_path):
    """PyYAML keeps the last of two equal keys silently: `name: other` appended to a copied preset renamed it."""
    from pathlib import Path

    import accelsim

    root = Path(accelsim.__file__).parents[1]
    arch = tmp_path / "twice.yaml"
    arch.write_text((root / "archs/tpu_v1.yaml").read_text() + "name: other\n")
    with pytest.raises(ArchError, match=r"twice.yaml: line \d+: key 'name' is given twice \(first on line \d+\)"):
        load_arch(arch)
    system = tmp_path / "system.yaml"
    system.write_text((root / "archs/systems/dgx_a100.yaml").read_text().replace("\n", "\nname: x\n", 1) + "")
    with pytest.raises(ArchError, match="key 'name' is given twice"):
        load_system(system)
    spec = tmp_path / "spec.yaml"
    spec.write_text((root / "examples/sweep/systolic.yaml").read_text() + "\nbase: tpu_v1\n")
    with pytest.raises(SpecError, match="key 'base' is given twice"):
        load_spec(spec)
    assert bounded_yaml("a: 1\nb: &x {c: 1}\nd:\n  <<: *x\n  c: 2\n") == {"a": 1, "b": {"c": 1}, "d": {"c": 2}}
