"""Skips are loud: a test skipped because a tool or package is missing (Icarus, Verilator, Yosys, Chromium,
Triton, PyTorch...) is listed at the end of the run, and under CI, where the test command installed them, such a
skip fails the run instead of hiding a missing install step. The mappings the suite searches are kept in a folder
of its own, never in ~/.cache."""
import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """ACCELSIM_CACHE points at a fresh folder for the session (subprocesses inherit it): no mapping an earlier
    checkout searched (compiler.map.disk) is read, and none is left behind. RTL builds, minutes each and keyed by
    their toolchain, are still found where accelsim.rtl.runner keeps them: the folder links to them.

    Under pytest-xdist the workers of one run share its mappings and whole runs (a folder made to be shared:
    compiler.map.disk), so a model searched or simulated by one worker is read back by the other, as it already
    is by a later test of the same worker; simulator builds stay each worker's own (two builds of a shape at once
    would write one folder)."""
    shared = Path(os.environ.get("ACCELSIM_CACHE") or os.path.join(          # as accelsim.rtl.runner.cache_dir
        os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"), "accelsim"))
    root = tmp_path_factory.mktemp("accelsim_cache")
    if (shared / "rtl").is_dir():
        (root / "rtl").symlink_to(shared / "rtl", target_is_directory=True)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = tmp_path_factory.getbasetemp().parent / "accelsim_cache"     # this run's, beside the workers' folders
        from compiler.map.entry import user

        (root / user()).mkdir(mode=0o700)
        for part in ("mappings", "runs"):
            (run / part).mkdir(parents=True, exist_ok=True)
            (root / user() / part).symlink_to(run / part, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACCELSIM_CACHE", str(root))
        yield root

MISSING = ("not installed", "not on PATH", "No module named", "could not import", "no node", "cannot re-synthesize",
           "not found")


def _missing_tool(report) -> str | None:
    if not report.skipped or not isinstance(report.longrepr, tuple):
        return None
    reason = str(report.longrepr[2])
    return reason if any(word in reason for word in MISSING) else None


# PyTorch is the one the test command installs only where a CPU wheel lies on the machine (Makefile): its
# absence is listed, not failed.
OPTIONAL = ("torch", "PyTorch")


def _fail_under_ci(report) -> None:
    reason = _missing_tool(report)
    if reason and os.environ.get("CI") == "true" and not any(name in reason for name in OPTIONAL):
        report.outcome = "failed"          # CI has every tool: a skip for a missing one is a broken install
        report.longrepr = f"under CI every tool is installed, yet: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_under_ci(outcome.get_result())      # a whole module skipped at import (allow_module_level=True)


def pytest_terminal_summary(terminalreporter):
    missing = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = _missing_tool(report)
        if reason:
            missing.setdefault(reason.removeprefix("Skipped: "), []).append(report.nodeid)
    if missing:
        terminalreporter.write_sep("!", f"{sum(map(len, missing.values()))} tests did not run: a tool is missing",
                                   red=True, bold=True)
        for reason, ids in missing.items():
            terminalreporter.write_line(f"{len(ids):4} x {reason} (e.g. {ids[0]})", red=True)
        terminalreporter.write_line("`make test` installs them all", red=True)


class SmallDisk:
    """A 64 KiB tmpfs at `path`; `fill()` takes its last free page, as a full disk would."""

    def __init__(self, path: Path):
        self.path = path

    def fill(self) -> None:
        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as error:
            assert error.strerror == "No space left on device", error
        finally:
            os.close(fd)


@pytest.fixture
def small_disk(tmp_path):
    """A disk that can be filled (a 64 KiB tmpfs, mounted for the test and unmounted after): outputs written on
    a full disk. Mounting needs root; elsewhere the test is skipped, saying so."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("a full disk is a 64 KiB tmpfs, and mounting one needs root")
    mount = tmp_path / "small_disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"this host refuses a tmpfs mount ({done.stderr.decode().strip()})")
    try:
        yield SmallDisk(mount)
    finally:
        subprocess.run(["umount", str(mount)], check=True)
