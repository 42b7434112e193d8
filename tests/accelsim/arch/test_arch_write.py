"""Writing arch YAML from data: what `arch_yaml` writes reads back as the same document, comments included
where asked, and data the schema refuses is refused before anything is written."""
import dataclasses

import pytest
import yaml

from accelsim.arch import ArchError, arch_document, load_arch, load_arch_text, preset_names
from accelsim.arch.write import arch_yaml


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_round_trips(name, tmp_path):
    document = arch_document(load_arch(name))
    text = arch_yaml(document, ["a header", "of two lines"], {"clock": "from the datasheet", "memory[0]": "off chip"})
    assert yaml.safe_load(text) == document          # the same data, whatever YAML's spelling
    assert text.startswith("# a header\n# of two lines\n")
    assert "     # from the datasheet" in text.split("\nclock:", 1)[1].splitlines()[0]
    written = load_arch_text(text, "written.yaml", tmp_path / "written.yaml")
    assert written == dataclasses.replace(load_arch(name), source_file=written.source_file)


@pytest.mark.parametrize("text", ["yes", "No", "null", "12", "1e9", "-3.5", "a: b", "x #y", " lead", "trail:", "[1]"])
def test_strings_yaml_would_misread_are_quoted(text):
    document = arch_document(load_arch("systolic_8x8")) | {"description": text}
    assert yaml.safe_load(arch_yaml(document))["description"] == text


def test_the_schema_refuses_before_writing():
    document = arch_document(load_arch("tpu_v1"))
    document["memory"][0]["bandwidth"] = "fast"
    with pytest.raises(ArchError, match=r"memory\[0\]\.bandwidth"):
        arch_yaml(document)
