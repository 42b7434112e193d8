"""If and Loop: control flow over imported body graphs.

A body may read the enclosing graph's run-time tensors: they become extra inputs of the node (after its ONNX
inputs), so evaluation hands them over and the scheduler sees the dependency. Invariant: a node whose control is
known at import is inlined in the IR (If: the taken branch's ops; Loop with a constant trip count: the body's ops
once per iteration, each iteration imported with its iteration number as a constant), priced like any other ops;
control known only at run time evaluates (accelsim eval) and refuses simulation, naming the node and the value.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from compiler.dtypes import DType
from compiler.errors import ModelError
from compiler.graph import Graph, Node, Tensor
from compiler.ir import IROp, Move, Operand, Role
from compiler.ops import room
from compiler.ops.base import OpDef, fail, given, out, register
from compiler.ops.runtime import forget_stand_in, known_input, require_static, stand_in

if TYPE_CHECKING:      # onnx (~1 s with ml_dtypes) is imported where a body is read: a built-in model has none
    import onnx

MAX_UNROLL = 4096   # iterations a constant-count Loop is unrolled into for simulation, and the most eval runs


@register("If")
class If(OpDef):
    value_inputs = (0,)        # read at import when known: the taken branch is inlined
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        import onnx

        forget_stand_in(node)
        if not ins or ins[0] is None or ins[0].elements != 1:
            raise fail(node, "input 0 (cond) must be one bool")
        branches = {key: node.attr(key) for key in ("then_branch", "else_branch")}
        if any(not isinstance(b, onnx.GraphProto) for b in branches.values()):
            raise fail(node, "attributes then_branch and else_branch must both be graphs")
        captured = _capture(node, graph, 1, list(branches.values()))
        feeds = [graph.tensor(name) for name in captured]
        cond = known_input(node, graph, 0)
        keys = [("then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")] if cond is not None \
            else ["then_branch", "else_branch"]
        bodies = {key: _import(node, graph, _with_inputs(branches[key], captured), feeds,
                                         f"{node.where()} {key}") for key in keys}
        node.resolved.update(bodies=bodies, captured=captured)
        taken = list(bodies.values())
        results = [[b.tensor(name) for name in b.outputs] for b in taken]
        if any(len(r) != len(node.outputs) for r in results):
            raise fail(node, f"its branches return {[len(r) for r in results]} outputs; the node has "
                             f"{len(node.outputs)}")
        if cond is not None:
            _register(graph, taken[0], f"{node.name}/")
        outs = []
        for i, candidates in enumerate(zip(*results)):
            if len({t.dtype for t in candidates}) > 1:
                raise fail(node, f"output {i} is {candidates[0].dtype.value} in one branch and "
                                 f"{candidates[1].dtype.value} in the other")
            shape = candidates[0].shape
            if len({t.shape for t in candidates}) > 1:
                shape = stand_in(node, shape, f"which branch runs (condition {node.inputs[0]!r}), as the branches "
                                              f"return output {i} in shapes {[list(t.shape) for t in candidates]}")
            outs.append(out(node, shape, candidates[0].dtype, i))
        return outs

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        from compiler.ops.interpret import run_graph

        bodies = node.resolved["bodies"]
        key = "then_branch" if bool(np.asarray(args[0]).reshape(-1)[0]) else "else_branch"
        body = bodies.get(key) or next(iter(bodies.values()))
        results = run_graph(body, dict(zip(body.inputs, given(node, args, len(args))[1:])))
        return [results[name] for name in body.outputs]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        bodies = node.resolved["bodies"]
        if len(bodies) != 1:
            raise fail(node, f"its condition {node.inputs[0]!r} is known only at run time, so which branch runs "
                             f"cannot be simulated (accelsim eval runs it); make the condition a constant (an "
                             f"initializer) to simulate the taken branch")
        body = next(iter(bodies.values()))
        ops, names = _inline(graph, body, f"{node.name}/", {n: n for n in node.resolved["captured"]})
        return ops + [_copy(node, graph, names(src), i) for i, src in enumerate(body.outputs)]


@register("Loop")
class Loop(OpDef):
    value_inputs = (0, 1)      # read at import when known: a constant trip count unrolls
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        import onnx

        forget_stand_in(node)
        body_proto = node.attr("body")
        if not isinstance(body_proto, onnx.GraphProto):
            raise fail(node, "attribute body must be a graph")
        own = node.resolved.get("own_inputs", len(node.inputs))
        carried = [t for t in ins[2:own] if t is not None]
        if len(carried) != len(ins[2:own]):
            raise fail(node, "a loop-carried initial value (inputs 2 on) may not be omitted")
        if len(body_proto.input) != 2 + len(carried):
            raise fail(node, f"the body has {len(body_proto.input)} inputs; it needs 2 + {len(carried)} (iteration "
                             f"number, condition, one per loop-carried value)")
        captured = _capture(node, graph, own, [body_proto])
        trips, cond = known_input(node, graph, 0), known_input(node, graph, 1)
        static = trips is not None and (not node.inputs[1] or cond is not None and bool(cond.reshape(-1)[0])) \
            and _condition_passes_through(body_proto)
        proto = _with_inputs(body_proto, captured)
        scalar = [Tensor("i", (), DType.int64), Tensor("cond", (), DType.bool)]
        extra = [graph.tensor(n) for n in captured]
        bodies: list[Graph] | None
        generic: Graph | None
        if static and trips is not None:        # static needs a known trip count
            count = int(trips.reshape(-1)[0])
            if count > MAX_UNROLL:
                raise fail(node, f"trip count {count} is more than the {MAX_UNROLL} iterations unrolled for "
                                 f"simulation")
            bodies, state = [], carried
            for t in range(count):
                body = _import(node, graph, _bound(proto, t), state + extra, f"{node.where()} iteration {t}")
                _register(graph, body, f"{node.name}/{t}/")
                bodies.append(body)
                state = [body.tensor(n) for n in body.outputs[1:1 + len(carried)]]
            generic = None
        else:
            bodies = None
            try:
                generic = _import(node, graph, proto, scalar + carried + extra, f"{node.where()} body")
            except ModelError:
                # the body needs its iteration number as a constant (a Slice at row i): evaluation imports
                # it once per iteration it runs
                generic = None
                node.resolved["lazy"] = (graph, proto, extra)
            first = generic or _import(node, graph, _bound(proto, 0), carried + extra,
                                                 f"{node.where()} iteration 0")
            state = [first.tensor(n) for n in first.outputs[1:1 + len(carried)]]
        node.resolved.update(bodies=bodies, generic=generic, captured=captured, carried=len(carried))
        if not static:
            template = first
        elif bodies:
            template = bodies[0]
        else:                   # a constant count of zero iterations: the body's shapes still tell the outputs'
            template = _import(node, graph, _bound(proto, 0), carried + extra, f"{node.where()} body")
        node.resolved["template"] = template
        scans = [template.tensor(n) for n in template.outputs[1 + len(carried):]]
        if len(node.outputs) != len(carried) + len(scans):
            raise fail(node, f"the node has {len(node.outputs)} outputs for {len(carried)} loop-carried values "
                             f"and {len(scans)} scan outputs")
        count = len(bodies) if bodies is not None else int(trips.reshape(-1)[0]) if trips is not None else 1
        if not static:
            stand_in(node, (count,), f"how many iterations run (trip count {node.inputs[0] or '(none)'!r}, "
                                     f"condition {node.inputs[1] or '(none)'!r} and the body's condition output)")
        outs = [out(node, t.shape, t.dtype, i) for i, t in enumerate(state)]
        return outs + [out(node, (count, *t.shape), t.dtype, len(state) + i) for i, t in enumerate(scans)]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        from compiler.ops.interpret import run_graph

        n = node.resolved["carried"]
        values = given(node, args[2:], len(args) - 2)     # the loop-carried values and the captured tensors
        captured = values[n:]
        state, stacks = values[:n], []
        bodies, generic = node.resolved["bodies"], node.resolved["generic"]
        trips = None if args[0] is None else int(np.asarray(args[0]).reshape(-1)[0])
        go = True if args[1] is None else bool(np.asarray(args[1]).reshape(-1)[0])
        t = 0
        while go and (trips is None or t < trips):
            if t == MAX_UNROLL:
                count = "none" if trips is None else trips
                raise ModelError(f"{room.where(node)}: ran {MAX_UNROLL} iterations (trip count {count}) and its "
                                 f"condition still holds; eval runs at most {MAX_UNROLL}, as many as simulation "
                                 f"unrolls")
            room.iterate(node)
            body = bodies[t] if bodies is not None else generic or _iteration(node, t, state)
            feeds = state + captured if bodies is not None or generic is None else \
                [np.array(t, np.int64), np.array(go)] + state + captured
            results = run_graph(body, dict(zip(body.inputs, feeds)))
            go = bool(np.asarray(results[body.outputs[0]]).reshape(-1)[0])
            state = [results[name] for name in body.outputs[1:1 + n]]
            stacks.append([results[name] for name in body.outputs[1 + n:]])
            room.charge(node, sum(np.asarray(v).nbytes for v in stacks[-1]), f"its scan outputs after {t + 1} "
                                                                             f"iterations hold")
            t += 1
        template = node.resolved["template"]
        scans = []
        for k, name in enumerate(template.outputs[1 + n:]):
            if stacks:
                scans.append(np.stack([s[k] for s in stacks]))
            else:
                t_ = template.tensor(name)
                scans.append(np.zeros((0, *t_.shape), t_.dtype.numpy))
        return state + scans

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        require_static(node)
        n, bodies = node.resolved["carried"], node.resolved["bodies"]
        current = list(node.inputs[2:2 + n])
        captured = {name: name for name in node.resolved["captured"]}
        ops: list[IROp] = []
        per_step: list[list[Operand]] = []
        for t, body in enumerate(bodies):
            bound = dict(zip(body.inputs, current)) | captured
            body_ops, names = _inline(graph, body, f"{node.name}/{t}/", bound)
            ops += body_ops
            current = [names(o) for o in body.outputs[1:1 + n]]
            per_step.append([Operand(names(o), body.tensor(o).shape, body.tensor(o).dtype, Role.input)
                             for o in body.outputs[1 + n:]])
        ops += [_copy(node, graph, src, i) for i, src in enumerate(current)]
        for k in range(len(node.outputs) - n):
            result = Operand(node.outputs[n + k], graph.tensor(node.outputs[n + k]).shape,
                             graph.tensor(node.outputs[n + k]).dtype, Role.output)
            inputs = tuple(step[k] for step in per_step)
            ops.append(Move(name=f"{node.name}:{n + k}", node=node.name, op=node.op, inputs=inputs, output=result,
                            fn=lambda *a, shape=result.shape, dtype=result.dtype.numpy:
                            np.stack(a) if a else np.zeros(shape, dtype)))
        return ops


# -- bodies: what they read from outside, binding, inlining --------------------------------------------------

def _free_names(g: onnx.GraphProto) -> list[str]:
    """Names a graph reads that neither it nor its nested graphs define, in first-use order."""
    import onnx

    defined = {i.name for i in g.input} | {i.name for i in g.initializer}
    free: list[str] = []
    for n in g.node:
        reads = list(n.input)
        for a in n.attribute:
            reads += _free_names(a.g) if a.type == onnx.AttributeProto.GRAPH else []
            for sub in a.graphs:
                reads += _free_names(sub)
        free += [name for name in reads if name and name not in defined and name not in free]
        defined.update(n.output)
    return free + [o.name for o in g.output if o.name not in defined and o.name not in free]


def _capture(node: Node, graph: Graph, own: int, bodies: list[onnx.GraphProto]) -> list[str]:
    """The enclosing graph's run-time tensors the bodies read; appended to node.inputs once, after its own."""
    node.resolved.setdefault("own_inputs", own)
    own = node.resolved["own_inputs"]
    captured = []
    for body in bodies:
        captured += [name for name in _free_names(body) if name in graph.tensors and name not in captured
                     and name not in graph.weights and name not in graph.constants]
    node.inputs = tuple(node.inputs[:own]) + tuple(captured)
    return captured


def _import(node: Node, graph: Graph, proto: onnx.GraphProto, feeds: list[Tensor], where: str) -> Graph:
    if graph.import_body is None:
        raise fail(node, "its body is an ONNX graph, and this graph was not imported from ONNX")
    body: Graph = graph.import_body(proto, graph, feeds, where)
    return body


def _with_inputs(body: onnx.GraphProto, names: list[str]) -> onnx.GraphProto:
    import onnx

    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    copy.input.extend(onnx.ValueInfoProto(name=name) for name in names)
    return copy


def _bound(body: onnx.GraphProto, t: int) -> onnx.GraphProto:
    """A Loop body for iteration t: the iteration number and the incoming condition become constants."""
    import onnx

    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    iteration, condition = copy.input[0].name, copy.input[1].name
    del copy.input[:2]
    constants = [onnx.helper.make_node("Constant", [], [iteration], value=onnx.numpy_helper.from_array(
                     np.array(t, np.int64))),
                 onnx.helper.make_node("Constant", [], [condition], value=onnx.numpy_helper.from_array(
                     np.array(True)))]
    nodes = list(copy.node)
    del copy.node[:]
    copy.node.extend(constants + nodes)
    return copy


def _iteration(node: Node, t: int, state: list[np.ndarray]) -> Graph:
    """Iteration t's body, imported for the loop-carried values' run-time shapes (a body that needs its
    iteration number at import)."""
    graph, proto, extra = node.resolved["lazy"]
    feeds = [Tensor(f"v{i}", np.shape(v), DType.from_numpy(np.asarray(v).dtype)) for i, v in enumerate(state)]
    return _import(node, graph, _bound(proto, t), feeds + extra, f"{node.where()} iteration {t}")


def _condition_passes_through(body: onnx.GraphProto) -> bool:
    """The body's condition output is its condition input (through Identity nodes): it never stops early."""
    source = {n.output[0]: n.input[0] for n in body.node if n.op_type == "Identity"}
    name = body.output[0].name
    while name in source:
        name = source[name]
    passes: bool = name == body.input[1].name
    return passes


def _register(graph: Graph, body: Graph, prefix: str) -> None:
    """The body's own constants and initializers, renamed into the enclosing graph for its inlined ops."""
    for name, value in list(body.constants.items()) + list(body.weights.items()):
        if value is not None and name not in graph.tensors:
            graph.constants[prefix + name] = np.asarray(value)
            graph.tensors[prefix + name] = Tensor(prefix + name, body.tensor(name).shape, body.tensor(name).dtype)


def _inline(graph: Graph, body: Graph, prefix: str, bound: dict[str, str]
            ) -> tuple[list[IROp], Callable[[str], str]]:
    """The body's IR ops with its tensors renamed: bound inputs to outer names, the enclosing graph's weights and
    constants kept, everything else under `prefix`. Returns (ops, the renaming)."""
    from compiler.ops.lower import lower

    internal = {o for n in body.nodes for o in n.outputs} | set(body.constants)

    def names(name: str) -> str:
        if name in bound:
            return bound[name]
        return name if name in graph.tensors and name not in internal else prefix + name

    def rename(o: Operand) -> Operand:
        return dataclasses.replace(o, tensor=names(o.tensor))
    ops = [dataclasses.replace(op, name=prefix + op.name, inputs=tuple(rename(o) for o in op.inputs),
                               output=rename(op.output)) for op in lower(body).ops]
    return ops, names


def _copy(node: Node, graph: Graph, source: str, index: int) -> IROp:
    result = graph.tensor(node.outputs[index])
    return Move(name=f"{node.name}:{index}", node=node.name, op=node.op, fn=lambda a: np.array(a, copy=True),
                inputs=(Operand(source, result.shape, result.dtype, Role.input),),
                output=Operand(result.name, result.shape, result.dtype, Role.output))
