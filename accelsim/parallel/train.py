"""`train_parallel`: one training step of a model on a system of devices under a parallel plan.

The model is built at the micro-batch size, split into pipeline stages (compiler.parallel.pipeline) and each stage
into one tensor-parallel rank's share (compiler.parallel.tensor); each distinct stage's training step runs through
the same build and simulate as a single device (identical devices are simulated once). Its tensor-parallel
collectives, the activations sent between stages and the data-parallel gradient reduction are timed on the
system's links (accelsim.comm through accelsim.parallel.groups); the pipeline schedule places the passes.
Invariant: step = the pipeline's span + each stage's exposed data-parallel communication + its optimizer, for the
slowest stage; nothing a device computes is priced outside the pipeline.
"""
from __future__ import annotations

import math
import os
from dataclasses import replace

from accelsim.arch.system import System
from accelsim.arch.system_load import load_system
from accelsim.results.parallel import CATEGORIES, WORKSPACE, ParallelResult, Role
from accelsim.results.training import TrainResult
from accelsim.parallel.groups import Group, cost, groups, groups_on, level_name
from accelsim.parallel.plan import BUCKET, Plan, parse_plan
from accelsim.parallel.rank import micro_batch, partition, places, slice_shape, tp_collective, transfer
from accelsim.parallel.schedule import run_schedule as schedule
from accelsim.sim.model import load_model
from accelsim.sim.train import (STORED, compute_dtype, is_zoo_model, simulate_step, step_program, training_form,
                                training_length)
from compiler import zoo
from compiler.dtypes import DType
from compiler.errors import UserError
from compiler.graph import Graph
from compiler.memo import Memo, memo
from compiler.parallel.pipeline import BLOCK, Stage, split, structure
from compiler.compile import Options, compile_graph
from compiler.train import LOSSES, Optimizer, TrainingStep
from compiler.train.recompute import MODES


def train_parallel(model: str | os.PathLike | Graph, system: str | os.PathLike | System, *, devices: int | None = None,
                   slice: str | None = None, parallel: str | Plan | None = None, batch: int | None = None,
                   optimizer: str = "sgd", settings: dict | None = None, dtype: str | None = None,
                   loss: str = "cross_entropy", recompute: str = "none", samples: int | None = None,
                   epochs: float | None = None, dataset_size: int | None = None, tokens: int | None = None,
                   fidelity: str = "tile", **model_options) -> ParallelResult:
    """Simulate one training step of `model` on `devices` devices (or the torus `slice`) of `system` under
    `parallel` (`dp=8,tp=8,pp=16,mb=64,schedule=1f1b,zero=1,sp=1`; accelsim.parallel.plan). `batch` is the global
    batch, split over dp replicas and mb micro-batches."""
    if loss not in LOSSES or loss == "stage":
        raise UserError(f"unknown loss {loss!r}; allowed: {', '.join(x for x in LOSSES if x != 'stage')}")
    if recompute not in MODES:
        raise UserError(f"unknown recompute mode {recompute!r}; allowed: {', '.join(MODES)}")
    sys_ = load_system(system)
    cut = sys_.fit(devices, slice_shape(slice))
    sys_ = sys_.sliced(cut)        # a torus run's groups are priced on its slice (accelsim.parallel.groups)
    plan = parallel if isinstance(parallel, Plan) else parse_plan(parallel, cut.devices)
    if plan.devices != cut.devices:
        raise UserError(f"--parallel {plan.text()} uses {plan.devices} devices, the run has {cut.devices}")
    hw = sys_.device
    compute = compute_dtype(hw, dtype)
    micro = micro_batch(batch, plan)
    if is_zoo_model(model):
        model_options.setdefault("dtype", STORED.get(compute, compute).value)
    graph = load_model(model, batch=micro, **training_form(model, model_options))
    out = graph.tensors[graph.outputs[0]].shape if graph.outputs else ()
    per_sample = out[1] if len(out) == 3 else None
    total = training_length(samples, epochs, dataset_size, tokens, per_sample)
    graph.outputs = graph.outputs[:1]           # the loss's input; a decoder's KV cache is not trained
    stages = split(graph, plan.pp * plan.chunks)
    by_kind = groups_on(sys_, plan.tp, plan.dp, plan.pp)
    update = Optimizer(optimizer, dict(settings or {}))
    simulated: set[tuple] = set()
    shards: dict[tuple, Graph] = {}             # a uniform model's middle stages are partitioned once
    roles = []
    for stage in stages:
        last = stage.index == len(stages) - 1
        shard = stage.graph
        if plan.tp > 1:
            g = stage.graph
            whole = (structure(g), tuple(g.tensors[t].shape for t in (*g.inputs, *g.outputs)))
            if whole not in shards:
                shards[whole] = partition(g, plan)
            shard = shards[whole]
        key = stage_key(shard, hw, compute, micro, plan.microbatches, update, loss if last else "stage", recompute,
                        fidelity, stage.index > 0)
        simulated.add(key)
        roles.append(stage_passes(sys_, by_kind, plan, stage, *simulate_stage(key, shard)))
        roles[-1]["model_flops"] = rank_model_flops(stage.graph, roles[-1]["run"], plan.tp)
    model = {"name": graph.name, "source": graph.source, "parameters": zoo.parameter_count(graph)}
    return assemble(sys_, plan, roles, micro, per_sample, total, len(simulated), model)


def stage_key(shard: Graph, hw, compute: DType, micro: int, steps_per: int, update: Optimizer, loss: str,
              recompute: str, fidelity: str, input_grads: bool) -> tuple:
    """All a stage's simulated training step depends on: its ops and shapes (not names), the device and the step's
    settings; plans that differ only in dp, the schedule or ZeRO share it, as do a uniform model's middle stages."""
    return (structure(shard), hw, compute, micro, steps_per, update.name, tuple(sorted(update.settings.items())),
            update.step, loss, recompute, fidelity, input_grads)


def simulate_stage(key: tuple, shard: Graph) -> tuple:
    """The stage's training step simulated, (TrainResult, TrainingStep), once per process and `stage_key`: a planner
    asks for the same stage programs across many plans (accelsim.parallel.search). A stage priced at roofline
    fidelity keeps its build, unmapped, for the same stage at tile fidelity (a planner's lower bound, then its
    simulation), until 256 later ones have been kept."""
    found = _STAGES.get(key)
    if found is None:
        _, hw, compute, micro, steps_per, name, settings, step, loss, recompute, fidelity, input_grads = key
        update = Optimizer(name, dict(settings), step)
        either = key[:10] + key[11:]                    # the key but its fidelity
        program = _BUILDS.pop(either, None) if fidelity == "tile" else None
        if program is None:
            program = step_program(shard, hw, compute, micro, steps_per, update, loss, recompute, input_grads)
        if fidelity == "roofline":
            _BUILDS[either] = program
        found = _STAGES[key] = simulate_step(shard, hw, compute, micro, steps_per, update, loss, recompute, fidelity,
                                             input_grads=input_grads, program=program)
    return found


# stage programs kept per process (a GPT-3 stage's Result is a few MB); roofline-priced stages' builds kept for their
# tile pricing (taken out when used)
_STAGES: Memo[tuple, tuple] = Memo("accelsim.parallel.train.simulate_stage", 64)
_BUILDS: Memo[tuple, tuple] = Memo("accelsim.parallel.train: stage builds", 256)


def assemble(sys_: System, plan: Plan, roles: list[dict], micro: int, per_sample: int | None, total: int | None,
             distinct: int, model: dict | None = None) -> ParallelResult:
    """The step from its pipeline stages' passes, in order: the activations' hops, the schedule, the data-parallel
    reduction and each device's memory (`model`: its name, source and parameters, for the JSON)."""
    pp = groups(plan.tp, plan.dp, plan.pp)["pp"]
    hops = [_hop(sys_, pp, role) for role in roles[:-1]]
    timeline = _timeline(tuple(r["forward"] for r in roles), tuple(r["backward"] for r in roles), tuple(hops),
                         plan.schedule, plan.microbatches, plan.chunks)
    return _result(sys_, plan, roles, timeline, hops, micro, per_sample, total, distinct, model or {})


@memo(size=4096)
def _timeline(forward: tuple, backward: tuple, hops: tuple, name: str, microbatches: int, chunks: int):
    """The schedule's timeline, once for plans whose passes take the same times (ZeRO changes only what follows)."""
    return schedule(list(forward), list(backward), list(hops), name, microbatches, chunks)


def _sharded_weights(sys_: System, dp: Group, plan: Plan, role: dict) -> tuple[float, float]:
    """ZeRO stage 3 (FSDP): each pass gathers the stage's weights first, prefetched behind the previous pass's
    compute. (seconds on the links per micro-batch, seconds exposed per micro-batch)."""
    if plan.zero < 3 or dp.trivial:
        return 0.0, 0.0
    gather = _seconds(cost(sys_, dp, "allgather", role["grad_bytes"]))
    return 2 * gather, max(0.0, gather - role["forward"]) + max(0.0, gather - role["backward"])


def rank_model_flops(whole: Graph, run: TrainResult, tp: int) -> float:
    """One rank's share of the model's FLOPs in the step: what the rank simulated, scaled by the whole stage's
    forward multiply-adds over the rank's (a layer tensor parallelism left whole, such as an undivided vocabulary,
    runs on every rank but counts once)."""
    if tp == 1:
        return run.model_flops
    mine = sum(op.macs for op in run.result.ops if run.phase_of[op.name] == "forward")
    key = structure(whole)
    # a planner asks again for each plan sharing the stage
    ours = _MACS.recall(key, lambda: sum(op.macs for op in compile_graph(whole, Options()).ops))
    return run.model_flops * ours / (tp * mine) if mine else run.model_flops


_MACS: Memo[tuple, int] = Memo("accelsim.parallel.train: whole stages' MACs", 64)


def stage_passes(sys_: System, by_kind: dict[str, Group], plan: Plan, stage: Stage, run: TrainResult,
                 step: TrainingStep) -> dict:
    """One stage's pass times per micro-batch (compute plus its blocking tensor-parallel collectives), its
    optimizer, the gradients it reduces over dp, and what it sends on."""
    phase = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
    comm: dict[tuple[str, str], float] = {}
    tp = by_kind["tp"]
    placed, transfers = places(step.graph), []
    for op in run.result.ops:
        which = "backward" if run.phase_of[op.name] in ("backward", "recompute") else run.phase_of[op.name]
        phase[which] += op.seconds
        if priced := tp_collective(sys_, tp, op):
            kind, seconds = priced
            phase[which] += seconds
            key = (kind, level_name(sys_, tp))
            comm[key] = comm.get(key, 0.0) + seconds * (1 if which == "optimizer" else plan.microbatches)
            transfers.append(transfer(op, placed, kind, which, seconds, tp.size))
    grads = sum(step.graph.tensors[g].nbytes for g in step.grads.values())
    sent = sum(stage.graph.tensors[t].nbytes for t in stage.sent)
    run = replace(run, memory={**run.memory, "units": fsdp_units(step)})
    return {"stage": stage, "run": run, "step": step, "forward": phase["forward"], "backward": phase["backward"],
            "optimizer": phase["optimizer"], "tp_comm": comm, "transfers": transfers, "grad_bytes": grads,
            "sent_bytes": sent,
            "params": sum(step.graph.tensors[p].elements for p in step.params)}


def _hop(sys_: System, pp: Group, role: dict) -> float:
    priced = cost(sys_, pp, "sendrecv", role["sent_bytes"])
    return priced.seconds if priced else 0.0


def _data_parallel(sys_: System, dp: Group, plan: Plan, role: dict) -> dict[tuple[str, str], float]:
    """The gradient reduction of one stage: buckets of BUCKET bytes in the order the backward pass finishes them
    (an all-reduce; a reduce-scatter from ZeRO stage 1 on, then an all-gather of the updated weights)."""
    if dp.trivial:
        return {}
    level = level_name(sys_, dp)
    reduce = "allreduce" if plan.zero == 0 else "reducescatter"
    buckets = max(1, math.ceil(role["grad_bytes"] / BUCKET))
    size = role["grad_bytes"] / buckets
    seconds = {(reduce, level): buckets * _seconds(cost(sys_, dp, reduce, size))}
    if plan.zero:
        weights = role["grad_bytes"]          # the updated shard of each, gathered back (same dtype as gradients)
        seconds[("allgather", level)] = buckets * _seconds(cost(sys_, dp, "allgather", weights / buckets))
    return seconds


def _seconds(result) -> float:
    return result.seconds if result else 0.0


def _result(sys_, plan, roles, timeline, hops, micro, per_sample, total, distinct, model) -> ParallelResult:
    dp = groups(plan.tp, plan.dp, plan.pp)["dp"]
    out = []
    for k, role in enumerate(roles):
        d = k % plan.pp
        data = _data_parallel(sys_, dp, plan, role)
        reduce = sum(s for (op, _), s in data.items() if op != "allgather")
        overlap = max(0.0, timeline.end[d] - timeline.last_backward_start[k])     # the last backward's span
        busy = _sharing(sys_, plan, role)
        exposed = max(0.0, reduce + busy - overlap) + sum(s for (op, _), s in data.items() if op == "allgather")
        gathered, hidden_not = _sharded_weights(sys_, dp, plan, role)
        if gathered:
            data[("allgather", level_name(sys_, dp))] = data.get(("allgather", level_name(sys_, dp)), 0.0) \
                + gathered * plan.microbatches
            exposed += hidden_not * plan.microbatches
        communication = dict(role["tp_comm"])
        for key, s in data.items():
            communication[key] = communication.get(key, 0.0) + s
        if k < len(hops) and hops[k]:
            key = ("sendrecv", level_name(sys_, groups(plan.tp, plan.dp, plan.pp)["pp"]))
            communication[key] = communication.get(key, 0.0) + 2 * hops[k] * plan.microbatches
        out.append(Role(stage=k, device=d, blocks=role["stage"].blocks, result=role["run"].result,
                        model_flops=role["model_flops"],
                        forward=role["forward"] * plan.microbatches, backward=role["backward"] * plan.microbatches,
                        optimizer=role["optimizer"], bubble=timeline.bubble(d), exposed=exposed,
                        communication=communication, memory=rank_memory(role, plan, k),
                        collectives=role["transfers"]))
    result = ParallelResult(training=True, system=sys_.name, devices=plan.devices, plan=plan, roles=out,
                            pipeline_seconds=timeline.seconds, ends=list(timeline.end),
                            batch=micro * plan.microbatches * plan.dp,
                            tokens_per_sample=per_sample, samples=total, simulated=distinct,
                            peak_flops=2.0 * roles[0]["run"].result.arch["peak_macs_per_second"],
                            capacity=sys_.device.memory[0].capacity_total, passes=list(timeline.passes),
                            hops=list(hops), link_levels={k: level_name(sys_, g) for k, g in
                                                          groups(plan.tp, plan.dp, plan.pp).items()},
                            model=model)
    if not result.fits:
        memory = result.memory
        largest = sorted(((memory[c], c) for c in CATEGORIES), reverse=True)[:2]
        result.notes.append(f"device {memory['device']} (pipeline position) needs {memory['peak'] / 2**30:,.2f} GiB "
                            f"at its peak but holds {result.capacity / 2**30:,.2f} GiB: the plan does not fit; "
                            f"largest: {', '.join(f'{c} {b / 2**30:,.2f} GiB' for b, c in largest)}")
    return result


def _sharing(sys_: System, plan: Plan, role: dict) -> float:
    """Seconds the links of the data-parallel reduction carry tensor-parallel collectives during the last backward
    pass, when both groups use the same level (tp=2, dp=4 in one NVSwitch node): a link carries one transfer's bytes
    at a time, so whatever the two share it in, the reduction finishes that much later than it would alone."""
    by_kind = groups(plan.tp, plan.dp, plan.pp)
    if (by_kind["tp"].trivial or by_kind["dp"].trivial
            or level_name(sys_, by_kind["tp"]) != level_name(sys_, by_kind["dp"])):
        return 0.0
    return sum(t["seconds"] for t in role["transfers"] if t["phase"] == "backward")


def rank_memory(role: dict, plan: Plan, k: int) -> dict:
    """One rank's memory for stage k as DeepSpeed and PyTorch FSDP hold it (Rajbhandari et al. 2020, sec. 5): the
    model states for the whole step, sharded over the Nd = dp replicas by ZeRO stage: the weights (2 bytes a
    parameter in bf16), every gradient (2) and the optimizer's state with its fp32 master copy (K = 12 for AdamW,
    8 for SGD with momentum): stage 0 (2 + 2 + K)Psi, 1 (2 + 2)Psi + K Psi / Nd, 2 2 Psi + (2 + K)Psi / Nd,
    3 (2 + 2 + K)Psi / Nd. Beside them, the activations and the backward pass's temporaries where, together, the
    stage's liveness has most of them (the activations with those one micro-batch keeps for its backward pass times
    the micro-batches in flight: 1F1B pp - stage, GPipe all of them), and the workspace, by what it holds
    (accelsim.results.parallel.WORKSPACE): the backward pass's own temporaries (activation gradients, a gradient cast to
    fp32 for its update); ZeRO stage 2's gradient bucket being reduce-scattered (BUCKET bytes, or all when fewer);
    for ZeRO stage 3 (FSDP, wrapped by layer, resharded after forward) the whole weights of the unit it computes and
    of the next, prefetched (the two largest units: a block, or the parameters outside the blocks), and a unit's
    whole gradient until its reduce-scatter. DDP's buckets (ZeRO 0 and 1) are views of the gradients: nothing more."""
    m = role["run"].memory
    if plan.schedule == "gpipe":
        inflight = plan.microbatches
    else:
        inflight = min(plan.microbatches, plan.pp - k % plan.pp + (plan.chunks - 1) * plan.pp)
    whole = m.get("gradients_total", m["gradients"])
    memory = {"weights": m["weights"], "gradients": whole, "optimizer": m["optimizer"]}
    for stage, category in ((1, "optimizer"), (2, "gradients"), (3, "weights")):
        if plan.zero >= stage:
            memory[category] = memory[category] // plan.dp
    memory["activations"] = max(m.get("transient_activations", m["activations"]),
                                m.get("saved_activations", 0) * inflight // plan.chunks)
    holds = dict.fromkeys(WORKSPACE, 0)
    holds["temporaries"] = m.get("transient_workspace", m["workspace"])
    units = list(m.get("units", ())) + [0, 0]
    if plan.dp > 1 and plan.zero == 2:
        holds["gradient_bucket"] = min(BUCKET, whole)
    if plan.dp > 1 and plan.zero >= 3:
        holds["gathered_weights"] = units[0] + units[1]
        holds["gradient_bucket"] = units[0]
    memory["workspace"] = sum(holds.values())
    memory["workspace_holds"] = holds
    memory["peak"] = sum(memory[c] for c in CATEGORIES)
    return memory


def fsdp_units(step: TrainingStep) -> list[int]:
    """Bytes of the stage's parameters per FSDP unit, the two largest: a unit per block (`layers.3`), one for the
    parameters outside the blocks (embedding, head, final norm)."""
    units: dict[str, int] = {}
    for p in step.params:
        match = BLOCK.match(p)
        unit = match.group(0) if match else ""
        units[unit] = units.get(unit, 0) + step.graph.tensors[p].nbytes
    return sorted(units.values(), reverse=True)[:2]
