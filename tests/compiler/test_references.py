"""compiler.references: a file named inside another resolves from the naming file's folder, links followed, and
never lies outside that folder or the folders allowed; quoted() cuts a file's content short."""
import os

import pytest

from compiler.errors import UserError
from compiler.references import QUOTED_CHARS, quoted, referenced


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "home" / "sub").mkdir(parents=True)
    (tmp_path / "home" / "sub" / "a.yaml").write_text("a")
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "p.yaml").write_text("p")
    (tmp_path / "secret").write_text("s")
    os.symlink(tmp_path / "secret", tmp_path / "home" / "out")
    os.symlink(tmp_path / "home" / "sub", tmp_path / "home" / "in")
    os.symlink(tmp_path / "home" / "loop", tmp_path / "home" / "loop")
    return tmp_path


@pytest.mark.parametrize("text", ["sub/a.yaml", "./sub/../sub/a.yaml", "in/a.yaml", "{tmp}/home/sub/a.yaml",
                                  "missing.yaml"])
def test_a_file_inside_the_folder_resolves_from_it(tree, monkeypatch, text):
    monkeypatch.chdir(tree / "presets")           # not the working directory's
    found = referenced(text.format(tmp=tree), tree / "home")
    assert found.parent.parent == tree / "home" or found == tree / "home" / "missing.yaml"


@pytest.mark.parametrize("text", ["../secret", "out", "sub/../../secret", "{tmp}/secret", "/etc/passwd",
                                  "../presets/p.yaml"])
def test_a_file_outside_the_folder_is_refused_naming_where_it_leads(tree, text):
    with pytest.raises(UserError, match=r"resolves to /.*, outside .*home$"):
        referenced(text.format(tmp=tree), tree / "home")


def test_an_allowed_folder_is_allowed_too(tree):
    assert referenced("../presets/p.yaml", tree / "home", [tree / "presets"]) == tree / "presets" / "p.yaml"
    with pytest.raises(UserError, match=r"outside .*home and .*presets$"):
        referenced("../secret", tree / "home", [tree / "presets"])


@pytest.mark.parametrize("text", ["", "  ", "a\0b", None, 7, ["a"]])
def test_what_is_not_a_file_name_is_refused(tree, text):
    with pytest.raises(UserError, match="is not a file name"):
        referenced(text, tree / "home")


def test_a_link_loop_is_refused(tree):
    with pytest.raises(UserError, match=r"'loop'"):
        referenced("loop", tree / "home")


def test_quoted_cuts_long_values_and_keeps_short_ones():
    assert quoted("h100") == "'h100'" and quoted(None) == "None"
    long = quoted("k" * 10_000)
    assert long.startswith("'kkk") and long.endswith("... (10002 characters)")
    assert len(long) < QUOTED_CHARS + 30
