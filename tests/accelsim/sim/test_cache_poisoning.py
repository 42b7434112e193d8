"""Poisoning the on-disk caches (accelsim.sim.cache, compiler.map.disk) never changes a result: a file changed by
one digit, one another user wrote or may write, a folder others may write, a FIFO, a link or a sparse giant in
place of a file is warned about (naming it), never served, and the run computed again equals one computed with
the cache off; a corrupted mapping does not spread into the stored run."""
import json
import os

import pytest

import accelsim
from accelsim.sim import cache
from compiler.errors import CacheWarning
from compiler.map import CACHE, entry
from compiler.memo import clear_all

MODEL, ARCH, OPTIONS = "resnet18", "tpu_v1", {"image": 32}


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty cache folder of this test's own; the sources hold still (test_run_cache.py's fixture says why)."""
    monkeypatch.setattr(cache, "source_digest", lambda: cache.LOADED)
    monkeypatch.setenv("ACCELSIM_CACHE", str(tmp_path / "cache"))
    CACHE.clear()
    yield tmp_path / "cache"
    CACHE.clear()


def computed(monkeypatch):
    with monkeypatch.context() as patch:
        patch.setenv("ACCELSIM_CACHE", "off")
        return accelsim.run(MODEL, ARCH, **OPTIONS)


def run_file(root):
    (file,) = (root / entry.user() / "runs").rglob("*.json")
    return file


def forge(file) -> None:
    """Every time in the stored Result made 1000 times longer, the digest recomputed: what a forger who can write
    the folder (but not run as you) would leave."""
    header, _, body = file.read_bytes().partition(b"\n")
    header = json.loads(header)
    result, _, mappings = body.partition(b"\n")
    data = json.loads(result)
    data["ops"] = [[v * 1000.0 if type(v) is float else v for v in row] for row in data["ops"]]
    body = json.dumps(data, separators=(",", ":")).encode() + b"\n" + mappings
    file.write_bytes(json.dumps({**header, "digest": entry.digest(header["key"], body)}).encode() + b"\n" + body)


def assert_right(result, monkeypatch):
    assert json.dumps(result.to_dict()) == json.dumps(computed(monkeypatch).to_dict())


def test_a_file_another_user_wrote_is_not_served(root, monkeypatch):
    """The file is this user's as far as the kernel goes; the reader is made another user (its uid), as a file
    written by someone else into this user's folder would look: refused by its owner, whatever it holds."""
    accelsim.run(MODEL, ARCH, **OPTIONS)
    file = run_file(root)
    forge(file)
    folder = entry.user()
    monkeypatch.setattr(entry, "UID", os.stat(file).st_uid + 1)
    monkeypatch.setattr(entry, "user", lambda: folder)               # the same folder: it is the file that is not
    monkeypatch.setattr(entry, "_foreign", lambda path: None)
    with pytest.warns(CacheWarning, match=f"{file}.*owned by another user"):
        again = accelsim.run(MODEL, ARCH, **OPTIONS)
    assert again.seconds < 1e-3, "the forged run was served"
    assert_right(again, monkeypatch)


def test_a_file_others_may_write_is_not_served(root, monkeypatch):
    accelsim.run(MODEL, ARCH, **OPTIONS)
    file = run_file(root)
    forge(file)
    file.chmod(0o622)
    with pytest.warns(CacheWarning, match=f"{file}.*written by other users"):
        again = accelsim.run(MODEL, ARCH, **OPTIONS)
    assert_right(again, monkeypatch)
    assert run_file(root).stat().st_mode & 0o077 == 0       # written again, this user's only


def test_a_user_folder_others_may_write_is_not_used(root, monkeypatch):
    accelsim.run(MODEL, ARCH, **OPTIONS)
    forge(run_file(root))
    (root / entry.user()).chmod(0o777)
    clear_all()             # a folder is checked once per process: what follows computes as a new process would
    with pytest.warns(CacheWarning, match=f"{root / entry.user()}: can be written by other users"):
        again = accelsim.run(MODEL, ARCH, **OPTIONS)
    assert_right(again, monkeypatch)


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "sparse 3 GiB", "folder"])
def test_what_is_not_a_small_regular_file_is_refused_before_it_is_read(kind, root, monkeypatch):
    """A FIFO used to hang the run, a link to /dev/zero to take 7.6 GB, a sparse file its size in memory."""
    accelsim.run(MODEL, ARCH, **OPTIONS)
    file = run_file(root)
    file.unlink()
    if kind == "fifo":
        os.mkfifo(file)
    elif kind == "folder":
        file.mkdir()
    elif kind.startswith("link"):
        file.symlink_to("/dev/zero")
    else:
        with open(file, "wb") as out:
            out.truncate(3 << 30)
    why = {"fifo": "a FIFO", "folder": "a folder", "sparse 3 GiB": "3,221,225,472 bytes"}.get(kind, "a symbolic link")
    with pytest.warns(CacheWarning, match=f"{file} .*{why}"):
        again = accelsim.run(MODEL, ARCH, **OPTIONS)
    assert_right(again, monkeypatch)
    assert file.is_dir() if kind == "folder" else file.is_file() and file.stat().st_size < 1 << 20


def test_a_mapping_changed_by_one_digit_is_searched_again_and_does_not_spread(root, monkeypatch):
    """One tile extent edited in the mapping cache (22 -> 2) used to make this conv 5x slower in every later run,
    and the wrong run was stored too."""
    accelsim.run(MODEL, ARCH, **OPTIONS)
    files = [f for f in (root / entry.user() / "mappings").rglob("*.json") if '"op":"layer1.0/conv1"' in f.read_text()]
    (file,) = files
    assert '["c",22]' in file.read_text()
    file.write_text(file.read_text().replace('["c",22]', '["c",2]', 1))
    run_file(root).unlink()
    CACHE.clear()
    with pytest.warns(CacheWarning, match=f"{file} does not match its digest"):
        again = accelsim.run(MODEL, ARCH, **OPTIONS)
    assert_right(again, monkeypatch)
    CACHE.clear()
    assert_right(accelsim.run(MODEL, ARCH, **OPTIONS), monkeypatch)      # the stored run is the right one
