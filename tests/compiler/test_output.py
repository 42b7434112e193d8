"""compiler.output: a file is replaced whole or not at all; a full disk or a failed writer leaves the previous
file as it was and no temporary file behind; a folder is refused; a stream (/dev/null, a FIFO) is written straight
into."""
import os

import pytest

from compiler import output
from compiler.errors import UserError

PREVIOUS = b'{"previous": "good result"}\n'


def test_a_full_disk_leaves_the_previous_file_and_no_temporary(small_disk):
    full_disk = small_disk.path
    (full_disk / "result.json").write_bytes(PREVIOUS)
    small_disk.fill()
    with pytest.raises(UserError, match=r"result.json: cannot write \(No space left on device\)"):
        output.write_file(full_disk / "result.json", "x" * 10_000)
    assert (full_disk / "result.json").read_bytes() == PREVIOUS
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "result.json"]


def test_a_failed_writer_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = tmp_path / "m.onnx"
    target.write_bytes(PREVIOUS)
    with pytest.raises(RuntimeError, match="half way"):
        with output.replacing(target) as temporary:
            temporary.write_bytes(b"half a model")
            raise RuntimeError("half way")
    assert target.read_bytes() == PREVIOUS and [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


def test_a_file_is_replaced_whole_keeping_its_permissions(tmp_path):
    target = tmp_path / "r.json"
    target.write_bytes(PREVIOUS)
    target.chmod(0o640)
    assert output.write_file(target, "new\n") == target
    assert target.read_text() == "new\n" and target.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_new_file_gets_the_usual_permissions(tmp_path):
    mask = os.umask(0o022)
    try:
        output.write_file(tmp_path / "new.csv", b"a,b\n")
    finally:
        os.umask(mask)
    assert (tmp_path / "new.csv").stat().st_mode & 0o777 == 0o644   # not a temporary file's 0o600


def test_a_link_is_followed_and_kept(tmp_path):
    (tmp_path / "real.json").write_bytes(PREVIOUS)
    (tmp_path / "link.json").symlink_to("real.json")
    output.write_file(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"


def test_the_suffix_is_kept_for_writers_that_choose_a_format_by_it(tmp_path):
    with output.replacing(tmp_path / "film.gif") as temporary:
        assert temporary.parent == tmp_path and temporary.suffix == ".gif" and temporary.name.startswith(".")


def test_a_folder_is_refused_and_a_stream_written_straight_into(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(UserError, match="is a folder"):
        output.write_file(tmp_path / "out", "x", what="--json out")
    output.write_file("/dev/null", "x")
    with pytest.raises(UserError, match=r"--json /dev/full: cannot write \(No space left on device\)"):
        output.write_file("/dev/full", "x" * 10_000, what="--json /dev/full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
