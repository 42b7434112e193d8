"""Where `accelsim validate cuda` runs: the GPU it records (name, SMs, clocks, memory, driver, CUDA, torch and
triton versions) and the clock it times with.

CudaClock times with CUDA events: warm-up runs, then `repeats` timed runs, each after the L2 cache is flushed by
writing a buffer twice its size, and keeps the median. InterpreterClock is the same protocol on the host (Triton's
CPU interpreter, perf_counter): it checks the harness end to end without a GPU; its times mean nothing.
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import time

from compiler.errors import UserError

WARMUP = 5
L2_FLUSH_FACTOR = 2


class CudaClock:
    device = "cuda"

    def __init__(self, repeats: int):
        import torch

        if not torch.cuda.is_available():
            raise UserError("validate cuda: PyTorch sees no CUDA device (torch.cuda.is_available() is False); "
                            "--device cpu-interpreter checks the harness without one")
        self.torch = torch
        self.repeats = repeats
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or 64 << 20
        self.flush = torch.empty(L2_FLUSH_FACTOR * l2, dtype=torch.uint8, device="cuda")

    def median_s(self, fn) -> float:
        torch = self.torch
        for _ in range(WARMUP):
            fn()
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(self.repeats)]
        for start, end in events:
            self.flush.zero_()        # the op starts with a cold L2, as the model assumes its operands in DRAM
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return statistics.median(start.elapsed_time(end) for start, end in events) / 1e3

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def release(self) -> None:
        self.torch.cuda.empty_cache()


class InterpreterClock:
    device = "cpu"

    def __init__(self, repeats: int):
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise UserError("--device cpu-interpreter needs TRITON_INTERPRET=1 set before triton is imported")
        self.repeats = repeats

    def median_s(self, fn) -> float:
        fn()
        samples = []
        for _ in range(self.repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    def sync(self) -> None:
        pass

    def release(self) -> None:
        pass


def _smi(fields: list[str]) -> dict[str, str]:
    """nvidia-smi's answer for `fields` on GPU 0; {} where there is no nvidia-smi or it fails."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        proc = subprocess.run(["nvidia-smi", "-i", "0", f"--query-gpu={','.join(fields)}",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    values = [v.strip() for v in proc.stdout.strip().split(",")]
    return dict(zip(fields, values)) if proc.returncode == 0 and len(values) == len(fields) else {}


def device_info(clock) -> dict:
    """The machine the measurements come from, as dataset.yaml records it."""
    import torch

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    software = {"python": platform.python_version(), "torch": str(torch.__version__), "triton": triton_version}
    if clock.device == "cpu":
        return {"name": f"host CPU ({platform.processor() or platform.machine()}), Triton interpreter",
                "note": "harness check only: times are the interpreter's, not a GPU's", "software": software}
    p = torch.cuda.get_device_properties(0)
    smi = _smi(["driver_version", "clocks.max.sm", "clocks.max.memory", "clocks.sm", "power.limit", "memory.total"])
    software.update(cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), driver=smi.get("driver_version"))
    return {
        "name": p.name,
        "compute_capability": f"{p.major}.{p.minor}",
        "sms": p.multi_processor_count,
        "memory_bytes": p.total_memory,
        "l2_bytes": getattr(p, "L2_cache_size", None),
        "clocks_mhz": {"sm_max": smi.get("clocks.max.sm"), "memory_max": smi.get("clocks.max.memory"),
                       "sm_at_start": smi.get("clocks.sm")},
        "power_limit_w": smi.get("power.limit"),
        "software": software,
    }


def has_fp8(clock) -> bool:
    """fp8 (e4m3) tensor cores: compute capability 8.9 (Ada) and newer."""
    if clock.device == "cpu":
        return True   # the interpreter computes fp8 values widened; the harness checks the path
    import torch

    return torch.cuda.get_device_capability(0) >= (8, 9)
