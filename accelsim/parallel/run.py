"""`run_parallel`: one batch of inference on a system of devices under a parallel plan (forward passes only).

Tensor parallelism splits each stage's layers over `tp` ranks with their collectives on the critical path
(Llama decoding on 8 GPUs, say); pipeline stages pass micro-batches along; data-parallel replicas serve their
share of the batch independently. The same stage split, partition, simulation and link pricing as training.
A device's memory is its rank's liveness at the run's dtype (accelsim.sim.memory: weights and KV cache split by tp,
its stage's layers only), with the model inputs it reads (a decode step's KV cache) held for every micro-batch.
Invariant: the batch's time is the pipeline's span over its micro-batches; nothing is priced outside the pipeline.
"""
from __future__ import annotations

import os

from accelsim.arch.system import System
from accelsim.arch.system_load import load_system
from accelsim.results.parallel import ParallelResult, Role
from accelsim.parallel.groups import cost, groups_on, level_name
from accelsim.parallel.plan import Plan, parse_plan
from accelsim.parallel.schedule import run_schedule as schedule
from accelsim.parallel.rank import micro_batch, partition, places, slice_shape, tp_collective, transfer
from accelsim.sim.build import build, default_launch, simulate
from accelsim.sim.memory import footprint
from accelsim.sim.model import load_model
from compiler.dtypes import DType
from compiler.graph import Graph
from compiler.parallel.pipeline import split, structure
from compiler.passes.quantize import held
from compiler.compile import Options, compile_graph


def run_parallel(model: str | os.PathLike | Graph, system: str | os.PathLike | System, *, devices: int | None = None,
                 slice: str | None = None, parallel: str | Plan | None = None, batch: int | None = None,
                 dtype: str | None = None, **model_options) -> ParallelResult:
    """Simulate one batch of `model`'s inference on `devices` of `system` under `parallel` (tp, pp, dp, mb)."""
    sys_ = load_system(system)
    cut = sys_.fit(devices, slice_shape(slice))
    sys_ = sys_.sliced(cut)        # a torus run's groups are priced on its slice (accelsim.parallel.groups)
    plan = parallel if isinstance(parallel, Plan) else parse_plan(parallel, cut.devices)
    hw = sys_.device
    target = DType.parse(dtype) if isinstance(dtype, str) else dtype or hw.native_dtype
    micro = micro_batch(batch, plan)
    graph = load_model(model, batch=micro, **model_options)
    stages = split(graph, plan.pp * plan.chunks)
    by_kind = groups_on(sys_, plan.tp, plan.dp, plan.pp)
    tp = by_kind["tp"]
    simulated: dict[tuple, object] = {}
    roles, forward, sent = [], [], []
    for stage in stages:
        shard = partition(stage.graph, plan) if plan.tp > 1 else stage.graph
        key = structure(shard)
        if key not in simulated:
            compiled = build(shard, hw, batch=micro, dtype=target, launch=default_launch(model_options))
            own = [name for name in shard.inputs if name in graph.inputs]     # the model's, not the stage before's
            simulated[key] = (simulate(compiled, memory=False), shard, footprint(shard, compiled.ir, hw, own))
        result, shard, memory = simulated[key]
        seconds, comm, placed, transfers = 0.0, {}, places(shard), []
        for op in result.ops:
            seconds += op.seconds
            if priced := tp_collective(sys_, tp, op):
                kind, each = priced
                seconds += each
                key_ = (kind, level_name(sys_, tp))
                comm[key_] = comm.get(key_, 0.0) + each * plan.microbatches
                transfers.append(transfer(op, placed, kind, "forward", each, tp.size))
        forward.append(seconds)
        sent.append(sum(held(t.dtype, target).nbytes(t.elements) for t in map(stage.graph.tensor, stage.sent)))
        roles.append((stage, result, comm, _in_flight(memory, plan.microbatches), transfers))
    hops = [_hop(sys_, by_kind, nbytes) for nbytes in sent[:-1]]
    timeline = schedule(forward, [0.0] * len(forward), hops, "gpipe", plan.microbatches, plan.chunks,
                        back=[0.0] * len(hops))
    out = []
    for k, (stage, result, comm, memory, transfers) in enumerate(roles):
        if k < len(hops) and hops[k]:
            comm[("sendrecv", level_name(sys_, by_kind["pp"]))] = hops[k] * plan.microbatches
        out.append(Role(stage=k, device=k % plan.pp, blocks=stage.blocks, result=result,
                        model_flops=2.0 * plan.microbatches * _macs(stage.graph, result, plan.tp) / plan.tp,
                        forward=forward[k] * plan.microbatches, bubble=timeline.bubble(k % plan.pp),
                        communication=comm, memory=memory, collectives=transfers))
    out_shape = graph.tensors[graph.outputs[0]].shape if graph.outputs else ()
    return ParallelResult(training=False, system=sys_.name, devices=plan.devices, plan=plan, roles=out,
                          pipeline_seconds=timeline.seconds, ends=list(timeline.end),
                          batch=micro * plan.microbatches * plan.dp,
                          tokens_per_sample=out_shape[1] if len(out_shape) == 3 else None,
                          simulated=len(simulated), peak_flops=2.0 * out[0].result.arch["peak_macs_per_second"],
                          capacity=hw.memory[0].capacity_total, passes=list(timeline.passes),
                          hops=list(hops), link_levels={k: level_name(sys_, g) for k, g in by_kind.items()})


def _macs(whole: Graph, result, tp: int) -> int:
    """The stage's own multiply-adds (a layer left whole by tensor parallelism counts once, not on every rank)."""
    return sum(op.macs for op in result.ops) if tp == 1 else sum(op.macs for op in compile_graph(whole, Options()).ops)


def _in_flight(memory: dict, microbatches: int) -> dict:
    """A rank's memory with the model inputs its stage reads held for every micro-batch in flight, not one: each
    micro-batch's sequences keep their own KV cache on the device."""
    extra = memory["inputs"] * (microbatches - 1)
    return {**memory, "activations": memory["activations"] + extra, "peak": memory["peak"] + extra,
            "inputs": memory["inputs"] + extra}


def _hop(sys_: System, by_kind: dict, nbytes: int) -> float:
    priced = cost(sys_, by_kind["pp"], "sendrecv", nbytes)
    return priced.seconds if priced else 0.0
