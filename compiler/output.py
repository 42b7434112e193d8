"""Files a command writes. Each is written aside, in a temporary file of the same folder, flushed to disk and then
renamed onto its name: a reader, a crash or a full disk sees the previous file whole or the new one whole, never
half of one, and no temporary file stays behind. A folder is refused; a stream (/dev/null, /dev/stdout, a FIFO or a
shell's >(...)) is written straight into, since it keeps nothing to lose.
"""
from __future__ import annotations

import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from compiler.errors import UserError


def target(path: str | os.PathLike[str], what: str | None = None) -> Path:
    """The file `path` names, links followed, or `path` itself if it is a stream (`streaming`): refused
    (UserError naming `what`, default the path) if it is a folder or a block device or socket."""
    what = what or str(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return Path(os.path.realpath(path))
    except (OSError, ValueError) as error:
        raise UserError(f"{what}: cannot write ({getattr(error, 'strerror', None) or error})") from None
    if stat.S_ISDIR(mode):
        raise UserError(f"{what}: is a folder; name a file to write")
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return Path(path)
    if not stat.S_ISREG(mode):
        raise UserError(f"{what}: is a block device or socket, not a file; name a file to write")
    return Path(os.path.realpath(path))


def streaming(path: Path) -> bool:
    """Whether `path` is a FIFO or a character device (/dev/null, /dev/stdout on a terminal or pipe)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@contextmanager
def replacing(path: str | os.PathLike[str], what: str | None = None) -> Iterator[Path]:
    """A temporary file beside `path` to write into; when the block ends without an error it is flushed to disk
    and renamed onto `path`, otherwise removed and `path` left as it was. An OSError (a full disk, a folder that
    cannot be written) becomes a UserError naming `what` (default: the path)."""
    what = what or str(path)
    final = target(path, what)
    if streaming(final):
        try:
            yield final
        except OSError as error:
            raise UserError(f"{what}: cannot write ({error.strerror or error})") from None
        return
    # the suffix kept: some writers pick the format by it (a .gif, a .png)
    temporary = final.with_name(f".{final.stem[:64]}.{secrets.token_hex(4)}.tmp{final.suffix[:16]}")
    try:
        # 0o666 less the umask, as a file opened plainly gets; a file replaced keeps its own permissions
        os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        yield temporary
        _flush(temporary)
        if final.exists():
            os.chmod(temporary, stat.S_IMODE(final.stat().st_mode))
        os.replace(temporary, final)
    except OSError as error:
        raise UserError(f"{what}: cannot write ({error.strerror or error})") from None
    finally:
        temporary.unlink(missing_ok=True)
    _flush_folder(final.parent)


def write_file(path: str | os.PathLike[str], data: str | bytes, what: str | None = None) -> Path:
    """`data` (text as UTF-8) written to `path` as `replacing` does; returns the path written."""
    with replacing(path, what) as temporary:
        temporary.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)


def _flush(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _flush_folder(folder: Path) -> None:
    """The rename itself made durable; a file system that cannot sync a folder (some network ones) is no error."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
