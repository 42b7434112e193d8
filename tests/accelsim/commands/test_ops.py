"""`accelsim ops` keeps its catalogue on disk: a second run lowers nothing, and a file that is not a catalogue this
code wrote is warned about, removed and computed again."""
import json

import pytest

from accelsim.commands import ops as ops_cli
from compiler.errors import CacheWarning
from compiler.map import disk, entry


@pytest.fixture
def lowerings(monkeypatch, tmp_path):
    """A fresh cache, and a stand-in for lowering every conformance case (seconds) that counts its calls."""
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "cache"))
    calls = []

    def lowered_kinds():
        calls.append(1)
        return {"Relu": {"map": ""}, "Shape": {"folded": ""}}

    monkeypatch.setattr(ops_cli, "lowered_kinds", lowered_kinds)
    return calls


def test_a_second_catalogue_is_read_from_the_cache_as_computed(lowerings):
    first = ops_cli.catalogue()
    assert lowerings == [1] and first[0]["Relu"][3] == {"map": ""} and "StringSplit" in first[1]
    assert ops_cli.catalogue() == first and lowerings == [1]


def test_a_catalogue_of_code_that_changed_is_computed_again(lowerings, monkeypatch):
    ops_cli.catalogue()
    monkeypatch.setattr("accelsim.sim.cache.LOADED", "other code")
    monkeypatch.setattr("accelsim.sim.cache.source_digest", lambda: "other code")
    ops_cli.catalogue()
    assert lowerings == [1, 1]


@pytest.mark.parametrize("body", ['{"ops": {"Relu": [7, 28, [6], {"map": 3}]}, "out_of_scope": {}}',
                                  '{"ops": {"Relu": [7, 28, "6", {}]}, "out_of_scope": {}}',
                                  '{"ops": {}}', '[]', 'not json'])
def test_a_file_with_its_digest_but_not_a_catalogue_is_warned_about_and_computed_again(lowerings, body):
    key = ops_cli.catalogue_key()
    where = disk.path(key, entry.folder(disk.root(), "ops"))
    entry.write(where, key, body, ops_cli.CATALOGUE_BYTES)
    with pytest.warns(CacheWarning, match="does not hold a catalogue of ops"):
        supported, _ = ops_cli.catalogue()
    assert lowerings == [1] and supported["Relu"][3] == {"map": ""}
    assert json.loads(entry.read(where, key, ops_cli.CATALOGUE_BYTES))["ops"]["Relu"][3] == {"map": ""}


@pytest.mark.parametrize("damage", ["fifo", "too large", "edited"])
def test_a_fifo_an_oversized_or_edited_file_is_warned_about_and_computed_again(lowerings, damage):
    import os

    ops_cli.catalogue()
    key = ops_cli.catalogue_key()
    where = disk.path(key, entry.folder(disk.root(), "ops"))
    if damage == "fifo":
        where.unlink()
        os.mkfifo(where)
    elif damage == "too large":
        with open(where, "ab") as file:
            file.truncate(ops_cli.CATALOGUE_BYTES + 1)
    else:
        where.write_bytes(where.read_bytes().replace(b'"map"', b'"einsum"'))
    with pytest.warns(CacheWarning, match=str(where)):
        supported, _ = ops_cli.catalogue()
    assert lowerings == [1, 1] and supported["Relu"][3] == {"map": ""}
