"""Time ONNX import (load_onnx + lower) of a ResNet-50-shaped model written in torch, with peak memory.

The model (bottleneck blocks 3-4-6-3, 25.6 M parameters, ~98 MiB file) is built by hand, not from
torchvision, and exported with torch's legacy exporter; the import runs in a fresh process so its
peak RSS is its own. Rerun: .venv/bin/python benchmarks/import_onnx.py [--external] [--keep DIR]
Measured on the project's 2-core machine (onnx 1.23, torch 2.13 CPU): 97.3 MiB file, 169 nodes -> 217 IR ops;
load_onnx 0.2-0.4 s, lower 0.04-0.07 s; peak RSS 251 MiB embedded (56 MiB baseline + ~2x the weights:
protobuf's copy and the arrays), 154 MiB with --external (external data is read straight into arrays).
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_resnet50():
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, mid, stride):
            super().__init__()
            cout = mid * 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.skip = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

        def forward(self, x):
            return torch.relu(self.body(x) + self.skip(x))   # y = F(x) + x

    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for mid, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Bottleneck(cin, mid, stride if i == 0 else 1))
            cin = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 1000)]
    return nn.Sequential(*layers).eval()


def export(directory: Path, external: bool) -> tuple[Path, int, float]:
    import warnings

    import onnx
    import torch

    warnings.simplefilter("ignore")
    model = build_resnet50()
    params = sum(p.numel() for p in model.parameters())
    path = directory / "resnet50.onnx"
    start = time.perf_counter()
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(path), dynamo=False, opset_version=17,
                      input_names=["x"], output_names=["y"])
    if external:
        onnx.save_model(onnx.load(str(path)), str(path), save_as_external_data=True, location="resnet50.data")
    return path, params, time.perf_counter() - start


def measure_import(path: str) -> dict:
    """Runs in the child process: baseline RSS after imports, then load_onnx and lower."""
    sys.path.insert(0, str(ROOT))
    from compiler.frontend import load_onnx
    from compiler.ops.lower import lower
    import compiler.ops  # noqa: F401  (register ops before the baseline, not during the timed part)

    baseline = _peak_rss_kib()
    start = time.perf_counter()
    graph = load_onnx(path)
    imported = time.perf_counter()
    ir = lower(graph)
    lowered = time.perf_counter()
    peak = _peak_rss_kib()
    return {"nodes": len(graph.nodes), "ir_ops": len(ir.ops), "import_s": imported - start,
            "lower_s": lowered - imported, "baseline_rss_mib": baseline / 1024, "peak_rss_mib": peak / 1024}


def _peak_rss_kib() -> int:
    """This process's peak RSS. Not getrusage's ru_maxrss: Linux carries that across exec, so the child
    would report the parent's peak (torch's export, ~850 MiB) rather than its own."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux: the best there is


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--external", action="store_true", help="store weights as external data")
    parser.add_argument("--keep", type=Path, help="write the model here instead of a temporary folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure_import(args.child)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        path, params, export_s = export(directory, args.external)
        size = sum(f.stat().st_size for f in directory.glob("resnet50*"))
        child = subprocess.run([sys.executable, __file__, "--child", str(path)], check=True,
                               capture_output=True, text=True)
        result = json.loads(child.stdout.strip().splitlines()[-1])
    result.update(params_m=params / 1e6, file_mib=size / 2**20, torch_export_s=export_s)
    for key, value in result.items():
        print(f"{key:>18}: {value:.3f}" if isinstance(value, float) else f"{key:>18}: {value}")


if __name__ == "__main__":
    main()
