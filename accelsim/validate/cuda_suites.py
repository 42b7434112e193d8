"""The GPU validation suites: case keys (accelsim.validate.cases) per suite, and each suite's accuracy target.

Sized so that `accelsim validate cuda --suite all` (every suite) runs in about 8 minutes on one H100/H200-class GPU:
the largest GEMM (16384^3 in fp32, about 0.15 s) is timed 25 times per library. `smoke` is a handful of small cases
for checking the harness itself (tests run it under Triton's CPU interpreter).
"""
from __future__ import annotations

from compiler.errors import UserError
from accelsim.validate.cpu import ALEXNET_CONVS, RESNET50_CONVS

GEMM_SIDES = (256, 512, 1024, 2048, 4096, 8192, 16384)
GEMM_DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8")     # fp8 only where the GPU has it (compute 8.9+)
# Llama-2-7B's projections at decode: M tokens against the attention (4096^2) and MLP (11008 x 4096) weights
DECODE_NK = ((4096, 4096), (11008, 4096), (4096, 11008), (32000, 4096))
ATTENTION = [
    "attention 1 12 128 128 64",       # BERT-base, seq 128
    "attention 8 12 512 512 64",       # BERT-base, batch 8, seq 512
    "attention 1 32 1024 1024 128",    # Llama-2-7B prefill, 1k tokens
    "attention 1 32 4096 4096 128",    # ... 4k tokens
    "attention 1 32 1 1024 128",       # decode: one token against a 1k KV cache
    "attention 1 32 1 4096 128",
    "attention 16 32 1 2048 128",      # batched decode
]
AROUND_ATTENTION = [
    "softmax 1536 128", "softmax 32768 1024", "softmax 131072 4096",      # the attention rows above
    "layernorm 128 768", "layernorm 4096 768", "layernorm 4096 4096", "layernorm 16384 8192",
    "gelu 128 3072", "gelu 4096 3072", "gelu 16384 16384",
]
ZOO = {   # model: its options; batch 1, as served
    "resnet50": {},
    "bert_base": {"seq": 128},
    "llama": {"mode": "decode", "past": 1024, "layers": 2},   # two of the 32 identical layers, plus the head
}
SUITES = {
    "gemm": [f"gemm {n} {n} {n} {dt}" for dt in GEMM_DTYPES for n in GEMM_SIDES],
    "decode": [f"gemm {m} {n} {k} bf16" for n, k in DECODE_NK for m in (1, 2, 4, 8, 16)],
    "conv": [key.replace(" fp32", " bf16") for key in ALEXNET_CONVS + RESNET50_CONVS]
    + [key.replace("conv 1 ", "conv 32 ", 1).replace(" fp32", " bf16") for key in RESNET50_CONVS],
    "attention": [f"{key} bf16" for key in ATTENTION + AROUND_ATTENTION],
    "zoo": [],   # filled per model by accelsim.validate.zoo_cases at run time: suites zoo_<model>
    "smoke": ["gemm 64 48 40 fp32", "gemm 1 64 32 bf16", "bgemm 2 16 24 32 fp32", "conv 1 8 10 10 16 3 3 2 1 2 fp32",
              "attention 1 2 16 16 16 fp32", "softmax 8 50 fp32", "layernorm 8 40 fp32", "gelu 4 33 fp32",
              "add 4 33 fp32", "addrow 6 40 fp32", "batchnorm 1 8 5 7 fp32"],
}
TARGETS = {"gemm": {"mape": 0.10, "spearman": 0.95}}   # the rest are reported beside it


def suite_keys(suite: str, fp8: bool) -> dict[str, list[str]]:
    """{suite: case keys} for one suite or `all` (every suite but smoke); fp8 cases only when `fp8`."""
    names = [s for s in SUITES if s != "smoke"] if suite == "all" else [suite]
    if any(n not in SUITES for n in names):
        raise UserError(f"--suite {suite!r}: expected one of {', '.join([*SUITES, 'all'])}")
    keep = {n: [k for k in SUITES[n] if fp8 or not k.endswith(" fp8")] for n in names}
    return keep
