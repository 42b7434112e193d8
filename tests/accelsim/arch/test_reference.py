"""An arch named inside another file (a system's `device:`, a sweep spec's `base:`) is a preset or a file found from
the naming file's folder, whatever the working directory, and never one outside that folder or the presets; no
message quotes a file that is not an arch (a credentials file, a private key)."""
import os

import pytest
import yaml

from accelsim.arch import ArchError, presets_dir
from accelsim.arch.system_load import load_system, systems_dir
from accelsim.cli import main
from accelsim.sweep.spec import SpecError, load_spec

SECRET = "s3cr3tFAKE"
SYSTEM = (systems_dir() / "dgx_a100.yaml").read_text()
SPEC = {"base": "systolic_8x8", "axes": {"compute.pe_array.array.rows": [4, 8]}, "models": ["resnet18"],
        "objectives": ["latency"]}


@pytest.fixture
def tree(tmp_path):
    """tmp/secret/credentials (outside), tmp/work/ (the naming files' folder) with a device YAML and a link out."""
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "credentials").write_text(f"aws_access_key_id = AKIAFAKE\n"
                                                     f"aws_secret_access_key = {SECRET}\n")
    work = tmp_path / "work"
    (work / "devices").mkdir(parents=True)
    a100 = (presets_dir() / "a100.yaml").read_text().replace("name: a100", "name: my_a100")
    (work / "devices" / "my_a100.yaml").write_text(a100)
    (work / "systolic.yaml").write_text((presets_dir() / "systolic_8x8.yaml").read_text())
    os.symlink(tmp_path / "secret" / "credentials", work / "link.yaml")
    os.symlink(work / "devices" / "my_a100.yaml", work / "inside_link.yaml")
    (work / "token.yaml").write_text(f"ghp_{SECRET}: x\n")
    (work / "key.yaml").write_text(f"-----BEGIN OPENSSH PRIVATE KEY-----\n{SECRET}\n-----END OPENSSH PRIVATE KEY-----"
                                   f"\n")
    return tmp_path


def system(tree, device: str):
    path = tree / "work" / "system.yaml"
    path.write_text(SYSTEM.replace("device: a100", f"device: {device}"))
    return path


def spec(tree, base: str):
    path = tree / "work" / "sweep.yaml"
    path.write_text(yaml.safe_dump({**SPEC, "base": base}))
    return path


HINT = r"name a preset, or a \.yaml file in the folder of "
OUTSIDE = ["{tree}/secret/credentials", "../secret/credentials", "devices/../../secret/credentials", "link.yaml",
           "../../../../../../../../etc/passwd"]


@pytest.mark.parametrize("device", OUTSIDE)
def test_a_system_cannot_name_a_device_outside_its_folder(tree, device):
    with pytest.raises(ArchError,
                       match=rf"system\.yaml: device: .* outside .*work and .*archs: {HINT}system\.yaml") as e:
        load_system(system(tree, device.format(tree=tree)))
    assert SECRET not in str(e.value) and "root:" not in str(e.value)


@pytest.mark.parametrize("base", OUTSIDE)
def test_a_sweep_cannot_name_a_base_outside_its_folder(tree, base):
    with pytest.raises(SpecError, match=rf"sweep\.yaml: base: .* outside .*work and .*archs: {HINT}sweep\.yaml") as e:
        load_spec(spec(tree, base.format(tree=tree)))
    assert SECRET not in str(e.value)


@pytest.mark.parametrize("device", ["devices/my_a100.yaml", "./devices/../devices/my_a100.yaml", "inside_link.yaml",
                                    "{tree}/work/devices/my_a100.yaml"])
def test_a_device_in_the_system_files_folder_loads_from_any_working_directory(tree, monkeypatch, device):
    path = system(tree, device.format(tree=tree))
    for cwd in (tree, tree / "work", tree / "secret"):
        monkeypatch.chdir(cwd)
        assert load_system(path).device.name == "my_a100"


def test_presets_load_by_name_and_by_path(tree):
    assert load_system(system(tree, "h100")).device.name == "h100"
    assert load_system(system(tree, str(presets_dir() / "h100.yaml"))).device.name == "h100"
    assert load_spec(spec(tree, "systolic.yaml")).base_file == tree / "work" / "systolic.yaml"
    assert load_spec(spec(tree, str(presets_dir() / "systolic_8x8.yaml"))).base_kind.value == "systolic"


@pytest.mark.parametrize("name", ["key.yaml", "link.yaml", "token.yaml"])
def test_a_file_that_is_not_an_arch_is_named_by_its_type_never_quoted(tree, capsys, name):
    """key.yaml (beside the system file) is read, and refused as a document that is a string, not a mapping."""
    assert main(["collective", "allreduce", "--system", str(system(tree, name))]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "PRIVATE" not in err and len(err.splitlines()) == 1
    if name == "key.yaml":
        assert "key.yaml: (top level): the document is not a mapping (it is a str)" in err
    if name == "token.yaml":
        assert "token.yaml: (top level): the document has none of the keys version, name, kind" in err
    assert main(["sweep", str(spec(tree, name)), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert SECRET not in err and "PRIVATE" not in err and len(err.splitlines()) == 1


def test_a_long_value_is_quoted_cut_short(tree):
    path = system(tree, "a100")
    path.write_text(path.read_text().replace("name: dgx_a100", f"name: [{'x' * 5000}]"))
    with pytest.raises(ArchError, match=r"name: \['xxx.*\.\.\. \(5004 characters\) is not a non-empty string") as e:
        load_system(path)
    assert len(str(e.value).replace(str(path), "")) < 160        # the value cut, whatever the folder's length
