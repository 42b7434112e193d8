"""`train`: one training step of a model on an arch (forward, loss, backward, optimizer update, as one Graph from
compiler.train), simulated by the same build and simulate as `run`, and the time to train.

Invariant: a batch of B in micro-batches of m simulates one micro-step's forward and backward at batch m (the
step repeats it B / m times) and the optimizer once; nothing is priced outside the pipeline.
"""
from __future__ import annotations

import inspect
import math
import os
import warnings
from dataclasses import replace

from accelsim.arch import Arch
from accelsim.results.training import PHASES, Layer, TrainResult
from accelsim.sim.build import FIDELITIES, build, simulate
from accelsim.sim.memory import against, fits
from accelsim.sim.model import load_arch, load_model
from compiler import zoo
from compiler.dtypes import DType
from compiler.errors import CapacityWarning, UserError
from compiler.graph import Graph
from compiler.train import LOSSES, Optimizer, TrainingStep, training_graph
from compiler.train.recompute import MODES

TRAINING_DTYPES = (DType.bf16, DType.fp16, DType.fp32)       # the default is the first the matrix units have
STORED = {DType.tf32: DType.fp32}                              # computed narrower than it is stored


def train(model: str | os.PathLike | Graph = "alexnet", arch: str | os.PathLike | Arch = "gtx580", *,
          batch: int | None = None, microbatch: int | None = None, optimizer: str = "sgd",
          settings: dict | None = None, dtype: str | DType | None = None, loss: str = "cross_entropy",
          samples: int | None = None, epochs: float | None = None, dataset_size: int | None = None,
          tokens: int | None = None, recompute: str = "none", fidelity: str = "tile", trace: bool = False,
          **model_options) -> TrainResult:
    """Simulate one training step of `model` on `arch`. `dtype` is the compute dtype (default bf16, else fp16,
    else fp32, whichever the arch's matrix units have); narrower than fp32, weights train from an fp32 master copy.
    The training length is `samples`, `epochs` x `dataset_size`, or `tokens` (language models). `recompute`: none,
    selective (attention's scores) or full (each layer from its input), trading memory for compute. `trace` keeps the
    step's timeline (TrainResult.result.timeline, for accelsim.results.trace). A zoo model with ternary layers (BitNet
    b1.58, the MatMul-free LM) trains in its training form: float latent weights quantised in the forward pass
    (`latent=False` keeps its frozen ternary weights and trains the rest)."""
    if fidelity not in FIDELITIES:
        raise UserError(f"fidelity {fidelity!r} is not available; choose from {', '.join(FIDELITIES)}")
    if loss not in LOSSES:
        raise UserError(f"unknown loss {loss!r}; allowed: {', '.join(LOSSES)}")
    if recompute not in MODES:
        raise UserError(f"unknown recompute mode {recompute!r}; allowed: {', '.join(MODES)}")
    hw = load_arch(arch)
    compute = compute_dtype(hw, dtype)
    micro, steps_per = _micro_batches(batch, microbatch)
    if is_zoo_model(model):
        model_options.setdefault("dtype", STORED.get(compute, compute).value)
    model_options = training_form(model, model_options)
    graph = load_model(model, batch=micro, **model_options)
    out = graph.tensors[graph.outputs[0]].shape if graph.outputs else ()
    total = training_length(samples, epochs, dataset_size, tokens,   # before simulating
                            out[1] if len(out) == 3 else None)
    result, _ = simulate_step(graph, hw, compute, micro, steps_per, Optimizer(optimizer, dict(settings or {})), loss,
                              recompute, fidelity, trace, warn_fit=True)
    return replace(result, samples=total)


def simulate_step(graph: Graph, hw: Arch, compute: DType, micro: int, steps_per: int, optimizer: Optimizer,
                  loss: str, recompute: str, fidelity: str = "tile", trace: bool = False,
                  input_grads: bool = False, warn_fit: bool = False,
                  program: tuple | None = None) -> tuple[TrainResult, TrainingStep]:
    """One training step of a loaded `graph` (at micro-batch `micro`, `steps_per` of them per step) simulated on
    `hw`; also the step's Graph. `input_grads`: a pipeline stage's inputs get gradients too (accelsim.parallel).
    `warn_fit`: a step that does not fit `hw`'s memory says so (a CapacityWarning) before it is simulated.
    `program`: what step_program gave for these arguments (a caller pricing one step at both fidelities builds once)."""
    out = graph.tensors[graph.outputs[0]].shape if graph.outputs else ()
    per_sample = out[1] if len(out) == 3 else None          # [batch, tokens, vocab]: a language model
    step, memory, compiled = program or step_program(graph, hw, compute, micro, steps_per, optimizer, loss, recompute,
                                                     input_grads)
    if warn_fit:
        for note in _memory_notes(memory, hw):
            warnings.warn(CapacityWarning(f"{note}; the step is simulated as if it did"), stacklevel=3)
    result = simulate(compiled, fidelity, trace=trace and fidelity == "tile", memory=False)   # the step's: below
    # the model's parameters, once: the step's graph also holds their fp32 master copies and optimizer state
    result = replace(result, model={**result.model, "parameters": zoo.parameter_count(graph)})
    phase_of = {op.name: _phase(step.phase[op.node]) for op in result.ops}
    flops = 2.0 * steps_per * sum(op.macs for op in result.ops if phase_of[op.name] in ("forward", "backward"))
    return TrainResult(result=result, phase_of=phase_of, layers=_layers(result, step, phase_of, steps_per),
                       microsteps=steps_per, batch=micro * steps_per, tokens_per_sample=per_sample, memory=memory,
                       model_flops=flops, peak_flops=2.0 * result.arch["peak_macs_per_second"],
                       notes=_memory_notes(memory, hw)), step


def step_program(graph: Graph, hw: Arch, compute: DType, micro: int, steps_per: int, optimizer: Optimizer, loss: str,
                 recompute: str, input_grads: bool = False) -> tuple:
    """(the step's TrainingStep, its memory from liveness alone, its build unmapped: simulate maps it at tile
    fidelity), the same at either fidelity."""
    step = training_graph(graph, loss=loss, optimizer=optimizer, accumulate=steps_per > 1, recompute=recompute,
                          input_grads=input_grads)
    memory = _memory(step, hw)          # known before anything is simulated
    # a training framework fuses element-wise chains (bias-GeLU, bias-dropout-add), not its GEMMs' epilogues
    return step, memory, build(step.graph, hw, batch=micro, dtype=compute, mapped=False, fuse="chains")


def is_zoo_model(model: str | os.PathLike | Graph) -> bool:
    """Whether `model` names a model of compiler.zoo (built here, at the dtype training stores), not a file or Graph."""
    return not isinstance(model, Graph) and str(model) in zoo.MODELS


def training_form(model, options: dict) -> dict:
    """The options that build a zoo model as it trains: BitNet's and the MatMul-free LM's latent weights."""
    if is_zoo_model(model) and "latent" in inspect.signature(zoo.MODELS[str(model)]).parameters:
        return {"latent": True, **options}
    return options


def compute_dtype(arch: Arch, dtype: str | DType | None) -> DType:
    """The float type a training step computes in on `arch`: `dtype` when given (a float, else UserError), or the
    first of TRAINING_DTYPES its matrix units support (UserError naming what they do support, if none)."""
    floats = [d for d in DType if d.is_float and any(u.supports(d) for u in arch.matrix_units)]
    if dtype is None:
        choice = next((d for d in TRAINING_DTYPES if d in floats), None)
        if choice is None:
            have = sorted({d.value for u in arch.matrix_units for d in DType if u.supports(d)})
            raise UserError(f"arch {arch.name!r} cannot train: training needs floating-point arithmetic (bf16, fp16, "
                            f"tf32 or fp32) and its matrix units compute only {', '.join(have)}")
        return choice
    chosen = DType.parse(dtype) if isinstance(dtype, str) else dtype
    if not chosen.is_float:
        raise UserError(f"--dtype {chosen.value}: training computes in a float type (bf16, fp16, fp8, tf32, fp32)")
    return chosen


def _micro_batches(batch: int | None, microbatch: int | None) -> tuple[int, int]:
    for name, value in (("batch", batch), ("microbatch", microbatch)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise UserError(f"{name} {value!r}: must be a positive integer")
    batch = batch or microbatch or 1
    micro = microbatch or batch
    if batch % micro:
        raise UserError(f"microbatch {micro} does not divide batch {batch}: a step is a whole number of "
                        f"micro-batches")
    return micro, batch // micro


def training_length(samples: int | None, epochs: float | None, dataset_size: int | None, tokens: int | None,
                    per_sample: int | None) -> int | None:
    """The samples a whole training run takes, from one of samples, epochs x dataset_size or tokens (over
    `per_sample` tokens a sample); None when none is given. A length given twice or out of range: UserError."""
    given = [name for name, v in (("samples", samples), ("epochs", epochs), ("tokens", tokens)) if v is not None]
    if len(given) > 1:
        raise UserError(f"give one training length, not {' and '.join(given)}")
    for name, value in (("samples", samples), ("dataset_size", dataset_size), ("tokens", tokens)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise UserError(f"{name} {value!r}: must be a positive integer")
    if epochs is not None:
        if not isinstance(epochs, (int, float)) or not math.isfinite(epochs) or epochs <= 0:
            raise UserError(f"epochs {epochs!r}: must be a positive number")
        if dataset_size is None:
            raise UserError("epochs need --dataset-size (samples per epoch)")
        return _counted("epochs x dataset_size", epochs * dataset_size)
    if dataset_size is not None:
        raise UserError("--dataset-size goes with --epochs")
    if tokens is not None:
        if not per_sample:
            raise UserError("--tokens applies to language models (an output of [batch, tokens, vocab])")
        return _counted("tokens", -(-tokens // per_sample))
    return None if samples is None else _counted("samples", samples)


MAX_SAMPLES = 2 ** 62   # 4.6e18, ten million times the 3e11 tokens GPT-3 trained on: past it a length is a typo


def _counted(what: str, samples: float) -> int:
    """A training length in whole samples, at most MAX_SAMPLES (`--epochs 1e308` is inf samples, no length)."""
    if not samples <= MAX_SAMPLES:
        shown = f"{samples:.3g}" if isinstance(samples, float) else f"over 2^{samples.bit_length() - 1}"
        raise UserError(f"{what}: {shown} samples; at most 2^62 (4.6e18) are counted")
    return math.ceil(samples)


def _phase(phase: str) -> str:
    return "forward" if phase == "loss" else phase


def _layers(result, step, phase_of: dict[str, str], steps_per: int) -> list[Layer]:
    ops_of = {node.name: node.op for node in step.graph.nodes}
    grouped: dict[str, list] = {}
    for op in result.ops:
        owner = step.owner.get(op.node, "loss")
        grouped.setdefault("loss" if step.phase.get(owner) == "loss" else owner, []).append(op)
    layers = []
    for name, ops in grouped.items():
        seconds = {p: 0.0 for p in PHASES}
        for op in ops:
            phase = phase_of[op.name]
            seconds[phase] += op.seconds * (1 if phase == "optimizer" else steps_per)
        longest = max(ops, key=lambda op: op.seconds)
        layers.append(Layer(name=name, op=ops_of.get(name, "SoftmaxCrossEntropyLoss"), seconds=seconds,
                            bound=longest.bound))
    return layers


def _memory(step: TrainingStep, arch: Arch) -> dict:
    """The step's memory by category (compiler.train.memory's liveness) against the device's outermost level."""
    return against(step.memory().to_dict(), arch)


def _memory_notes(memory: dict, arch: Arch) -> list[str]:
    if fits(memory):
        return []
    largest = ", ".join(f"{t['tensor']} ({t['category']}, {t['bytes'] / 2**20:,.0f} MiB)"
                        for t in memory["largest"][:3])
    return [f"the step needs {memory['peak'] / 2**30:,.2f} GiB at its peak ({memory['peak_phase']}, node "
            f"{memory['peak_node']!r}) but {arch.name}'s {memory['capacity_level']} holds "
            f"{memory['capacity'] / 2**30:,.2f} GiB: it does not fit; largest: {largest}"]
