"""What every validation dataset folder shares: the preset its predictions are for (arch.yaml, written first and
loaded back as any preset is) and the commit that measured it.

Invariant: arch.yaml is exactly the text the predictions were priced on, so `validate score` re-predicts against
the same hardware description later.
"""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from compiler import output
from compiler.errors import UserError


def arch_text(arch: str | None, threads: int) -> tuple[str, str]:
    """(preset YAML, where it came from): the host's, with `threads` cores, unless --arch names one."""
    from accelsim.arch import load_arch, load_arch_text, presets_dir

    if arch is None:
        from accelsim.importers.host import read_host
        from accelsim.importers.host_preset import preset_yaml

        text = preset_yaml(read_host(), cores=threads)
        load_arch_text(text, "detect-host", Path("detect-host.yaml"))
        return text, f"accelsim arch detect-host, {threads} core(s) = the threads used"
    load_arch(arch)   # a clear error for an unknown name or a bad file before anything is timed
    if arch.endswith(".cfg"):
        from accelsim.importers.scalesim import convert

        return convert(arch), f"{arch} (SCALE-Sim .cfg, converted)"
    path = Path(arch) if arch.endswith((".yaml", ".yml")) or "/" in arch else presets_dir() / f"{arch}.yaml"
    return path.read_text(), f"--arch {arch}"


def git_commit() -> str:
    try:
        proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return proc.stdout.strip() if proc.returncode == 0 and proc.stdout.strip() else "unknown"


def new_folder(out_dir: str | None, default_name: str) -> Path:
    """The dataset folder a run writes: --out if it is new or empty, else a new `<default_name>-<date>-<time>`
    here. A run never writes over a dataset it did not make (a committed one, with hand-written targets)."""
    folder = Path(out_dir) if out_dir else Path(f"{default_name}-{time.strftime('%Y%m%d-%H%M%S')}")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UserError(f"{folder}: already holds files; a validation run writes a new dataset and never over one "
                        f"it did not make in this run (give --out a new or empty folder)")
    return folder


def write_arch(folder: Path, text: str):
    """Create `folder`, write `text` to its arch.yaml and return the Arch it loads as; UserError naming the
    folder when it cannot be written."""
    from accelsim.arch import load_arch_text

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"{folder}: cannot write ({error.strerror})") from None
    output.write_file(folder / "arch.yaml", text)
    return load_arch_text(text, str(folder / "arch.yaml"), folder / "arch.yaml")
