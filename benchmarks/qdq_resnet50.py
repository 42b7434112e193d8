"""An int8 ResNet-50 (onnxruntime.quantization, static QDQ, per channel) against the float one: time, bytes and
energy per image simulated by `accelsim run`, on TPU v1 and on presets with both float and int8 matrix units.

The float model is the zoo's resnet50 exported to ONNX, its BatchNorms folded into the convolutions by
onnxruntime's pre-processing; the int8 one is that file quantized with random calibration images (enough for
timing: the scales change the numbers, not the work). TPU v1 computes only int8 (and int16), so there the float
model runs as accelsim quantizes it (every tensor int8, no requantisation priced); the float dtypes are compared
on the other presets.

Rerun: .venv/bin/python benchmarks/qdq_resnet50.py [--dir DIR] [--arch tpu_v1:int8 --arch a100:fp16 ...]
(writes DIR/resnet50.onnx and DIR/resnet50_int8_qdq.onnx once, about 30 s, then simulates, about 10 s); one
of them alone: .venv/bin/accelsim run /tmp/accelsim_qdq/resnet50_int8_qdq.onnx --arch tpu_v1
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

RUNS = ["tpu_v1:int8", "tpu_v4:bf16", "a100:fp16", "npu4:fp16"]   # arch:the float model's dtype


def models(folder: Path) -> tuple[Path, Path]:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from compiler.export import save_onnx
    from compiler.zoo import build

    exported, fused, quantized = folder / "resnet50_export.onnx", folder / "resnet50.onnx", \
        folder / "resnet50_int8_qdq.onnx"
    if not quantized.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        save_onnx(build("resnet50", batch=1), exported)
        quant_pre_process(str(exported), str(fused), skip_symbolic_shape=True)

        class Images(CalibrationDataReader):
            def __init__(self):
                rng = np.random.default_rng(0)
                self.batches = iter([{"image": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
                                     for _ in range(2)])

            def get_next(self):
                return next(self.batches, None)
        quantize_static(str(fused), str(quantized), Images(), quant_format=QuantFormat.QDQ, per_channel=True)
    return fused, quantized


def line(label: str, result) -> str:
    total = result.totals()
    levels = total["bytes_by_level"]
    dram = next(iter(levels.values()))   # levels run from DRAM inward
    return (f"{label:30s} {total['seconds'] * 1e3:9.3f} ms {dram / 1e6:9.1f} MB {sum(levels.values()) / 1e6:9.1f} MB "
            f"{total['energy_j'] * 1e3:9.3f} mJ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/accelsim_qdq"))
    parser.add_argument("--arch", action="append", help="arch:float-dtype (repeatable)")
    opts = parser.parse_args()
    import accelsim

    fused, quantized = models(opts.dir)
    print(f"{'model on arch (dtype)':30s} {'time':>12s} {'DRAM bytes':>12s} {'all levels':>12s} {'energy':>12s}")
    for run in opts.arch or RUNS:
        arch, dtype = run.split(":")
        print(line(f"float on {arch} ({dtype})", accelsim.run(str(fused), arch, dtype=dtype)))
        print(line(f"int8 QDQ on {arch} (int8)", accelsim.run(str(quantized), arch, dtype="int8")))


if __name__ == "__main__":
    main()
