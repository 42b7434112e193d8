"""ONNX RNN, GRU and LSTM (every direction, layout 0 and 1, optional B, sequence_lens, initial states, peepholes,
activations with alpha/beta, clip, input_forget, linear_before_reset), unrolled over the static sequence length.

Invariant: one step program per op (_program) is both the numpy reference and the lowering, so the two cannot drift:
per direction one Einsum projects every time step's input (X W^T), then each step runs a recurrent Einsum (H R^T)
and Maps for the gates. sequence_lens given at run time is honoured by evaluation (a batch entry keeps its state
past its length, its Y rows are zero); simulation prices the full sequence length for every entry.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.graph import Graph, Node, Tensor
from compiler.ir import Axis, Einsum, IROp, Map, Move, Operand, Role
from compiler.ops.base import OpDef, fail, given, operand, out, output_operand, register
from compiler.ops.matmul import accumulator

# activation (lower case, as onnxruntime matches names) -> (f(x, alpha, beta), ops per element, default alpha, beta).
# alpha/beta None: the function takes none. Costs follow compiler/ops/activation.py's table (Sigmoid 4, Tanh 5...).
# Defaults are onnxruntime's: Affine, ScaledTanh and ThresholdedRelu default to 0 (no standalone op to inherit from;
# ThresholdedRelu's own default, 1, is not what onnxruntime's recurrent kernels use).
Activate = Callable[[np.ndarray, Any, Any], np.ndarray]
# One step's values by name (xw, h, c, b, the gates...); a term the node does not have is None.
Values = dict[str, Any]
_ACTIVATIONS: dict[str, tuple[Activate, int, float | None, float | None]] = {
    "relu": (lambda x, a, b: np.maximum(x, 0), 1, None, None),
    "tanh": (lambda x, a, b: np.tanh(x), 5, None, None),
    "sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), 4, None, None),
    "affine": (lambda x, a, b: a * x + b, 2, 0.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 2, 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 2, 0.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 7, 0.0, 0.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 3, 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 4, 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), 3, None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0, x), 3, None, None),
}
# op -> (gates stacked in W and R, default activations per direction, states carried: h, or h and c)
_CELLS = {"RNN": (1, ("Tanh",), 1), "GRU": (3, ("Sigmoid", "Tanh"), 1), "LSTM": (4, ("Sigmoid", "Tanh", "Tanh"), 2)}
_X, _W, _R, _B, _LENS, _H0, _C0, _P = range(8)
# Operands of one Move that stacks step states: codegen gives an instruction at most MAX_DEPS (8) dependencies.
_FAN_IN = 6


@dataclass(frozen=True)
class _Activation:
    name: str
    alpha: float
    beta: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            y: np.ndarray = _ACTIVATIONS[self.name][0](x, x.dtype.type(self.alpha), x.dtype.type(self.beta))
            return y.astype(x.dtype)

    @property
    def ops(self) -> int:
        return _ACTIVATIONS[self.name][1]


@dataclass(frozen=True)
class _Plan:
    steps: int
    batch: int
    hidden: int
    reverse: tuple[bool, ...]                       # per direction
    activations: tuple[tuple[_Activation, ...], ...]  # per direction, in the op's order (f, g, h)
    layout: int
    clip: float | None
    input_forget: bool
    linear_before_reset: bool
    present: frozenset[int]                         # optional inputs given (B, sequence_lens, P...)


@dataclass(frozen=True)
class _Product:
    """out[n, g] = sum_j src[n, j] * R[d, first_row + g, j]: the recurrent projection of one step."""
    out: str
    src: str
    first_row: int
    rows: int


@dataclass(frozen=True)
class _Gate:
    """out = fn(plan, d, k, values): element-wise over [batch, hidden]."""
    out: str
    args: tuple[str, ...]
    fn: Callable[[_Plan, int, int, Values], np.ndarray]
    ops: int


@register("RNN", "GRU", "LSTM")
class Recurrent(OpDef):
    def infer(self, node: Node, ins: list[Tensor | None], graph: Graph) -> list[Tensor]:
        gates, _, states = _CELLS[node.op]
        if len(ins) < 3 or any(t is None for t in ins[:3]) or len(ins) > (8 if states == 2 else 6):
            raise fail(node, f"expects X, W, R and up to {5 if states == 2 else 3} optional inputs, got "
                             f"{len(ins)} inputs")
        x, w, r = given(node, ins, 3)
        if not x.dtype.is_float or len(x.shape) != 3:
            raise fail(node, f"X must be a 3-D float tensor, got {x.dtype.value} {list(x.shape)}")
        layout = int(node.attr("layout", 0))
        if layout not in (0, 1):
            raise fail(node, f"attribute layout={layout} is not allowed (0: [seq, batch, ...], 1: [batch, seq, ...])")
        steps, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
        direction = node.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise fail(node, f"attribute direction={direction!r} is not allowed ('forward', 'reverse' or "
                             f"'bidirectional')")
        dirs = 2 if direction == "bidirectional" else 1
        hidden = int(node.attr("hidden_size", r.shape[-1] if r.shape else 0))
        expected = {_W: (dirs, gates * hidden, x.shape[2]), _R: (dirs, gates * hidden, hidden),
                    _B: (dirs, 2 * gates * hidden), _LENS: (batch,), _P: (dirs, 3 * hidden),
                    _H0: (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)}
        expected[_C0] = expected[_H0]
        labels = {_W: "W", _R: "R", _B: "B", _LENS: "sequence_lens", _H0: "initial_h", _C0: "initial_c", _P: "P"}
        present = frozenset(i for i in range(3, len(ins)) if ins[i] is not None)
        tensors = {i: t for i, t in enumerate(ins) if t is not None}
        for i in (_W, _R, *sorted(present)):
            t = tensors[i]
            if t.shape != expected[i]:
                raise fail(node, f"input {labels[i]} ({t.name!r}) has shape {list(t.shape)}; with "
                                 f"hidden_size {hidden}, {dirs} direction(s) and X {list(x.shape)} (layout "
                                 f"{layout}) it must be {list(expected[i])}")
            wanted = "int32" if i == _LENS else x.dtype.value
            if t.dtype.value != wanted:
                raise fail(node, f"input {labels[i]} ({t.name!r}) is {t.dtype.value}; it must be {wanted}")
        if node.attr("clip") is not None and not node.attr("clip") > 0:
            raise fail(node, f"attribute clip={node.attr('clip')} is not allowed (a positive threshold)")
        plan = _Plan(steps, batch, hidden, (direction == "reverse",) if dirs == 1 else (False, True),
                     _activations(node, dirs), layout, node.attr("clip"), bool(node.attr("input_forget", 0)),
                     bool(node.attr("linear_before_reset", 0)), present)
        node.resolved["plan"] = plan
        shapes = [(steps, dirs, batch, hidden) if layout == 0 else (batch, steps, dirs, hidden), expected[_H0],
                  expected[_H0]]
        return [out(node, shapes[i], x.dtype, i) for i in range(min(len(node.outputs), states + 1))
                if node.outputs[i]]

    def reference(self, node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
        plan = node.resolved["plan"]
        args = list(args) + [None] * (8 - len(args))
        dtype = given(node, args, 1)[0].dtype
        work = np.float64 if dtype == np.float64 else np.float32
        x, w, r = (np.asarray(a, dtype=work) for a in args[:3])
        finals: list[Values] = []
        hs: list[list[np.ndarray]] = []
        for d in range(len(plan.reverse)):
            xw = _in_step_order(plan, d, _project(plan, x, w[d]), args[_LENS])
            values: Values = {"b": args[_B], "p": args[_P], "lens": args[_LENS],
                      "h": _initial(plan, d, args[_H0], work), "c": _initial(plan, d, args[_C0], work)}
            hs.append([])
            for k in range(plan.steps):
                values["xw"] = xw[k]
                for stage in _program(node.op, plan, d):
                    if isinstance(stage, _Product):
                        rows = r[d, stage.first_row:stage.first_row + stage.rows]
                        src = values[stage.src]
                        values[stage.out] = None if src is None else src @ rows.T
                    else:
                        values[stage.out] = stage.fn(plan, d, k, values)
                values["h"], values["c"] = values["h_next"], values.get("c_next")
                hs[-1].append(values["h"])
            finals.append(values)
        outs = [_stack_y(plan, args[_LENS], hs), _stack_final(plan, [f["h"] for f in finals])]
        if node.op == "LSTM":
            outs.append(_stack_final(plan, [f["c"] for f in finals]))
        return [o.astype(dtype) for o in outs][: len(node.outputs)]

    def lower(self, node: Node, graph: Graph) -> list[IROp]:
        plan = node.resolved["plan"]
        given = {i: operand(graph, name) for i, name in enumerate(node.inputs) if name}
        dtype = given[_X].dtype
        ops: list[IROp] = []
        hs: list[list[Operand]] = []
        finals: list[dict[str, Operand]] = []
        for d in range(len(plan.reverse)):
            values = _lower_direction(node, plan, d, given, ops, hs)
            finals.append(values)
        used = set(graph.outputs) | {name for other in graph.nodes for name in other.inputs}
        wanted = [i for i, name in enumerate(node.outputs) if name and name in used]
        wanted = wanted or [next(i for i, name in enumerate(node.outputs) if name)]
        lens = (given[_LENS],) if _LENS in given else ()
        for i in wanted:
            if i == 0:
                runs = tuple(_stacked(node, f"{node.name}:d{d}", list(per_dir), ops) for d, per_dir in enumerate(hs))
                ops.append(Move(name=f"{node.name}:Y", node=node.name, op=node.op, inputs=runs + lens,
                                output=output_operand(node, graph, 0), fn=lambda *a: _y_from_runs(plan, a)))
            else:
                key = "h" if i == 1 else "c"
                ops.append(Move(name=f"{node.name}:Y_{key}", node=node.name, op=node.op,
                                inputs=tuple(f[key] for f in finals), output=output_operand(node, graph, i),
                                fn=lambda *a: _stack_final(plan, list(a)).astype(dtype.numpy)))
        return ops


def _activations(node: Node, dirs: int) -> tuple[tuple[_Activation, ...], ...]:
    """activations per direction; alpha and beta values are taken in order by the functions that use them."""
    defaults = _CELLS[node.op][1]
    names = list(node.attr("activations", list(defaults) * dirs))
    if len(names) != len(defaults) * dirs:
        raise fail(node, f"attribute activations has {len(names)} names; {node.op} with {dirs} direction(s) "
                         f"takes {len(defaults) * dirs} ({', '.join(defaults)} per direction)")
    alphas, betas = list(node.attr("activation_alpha", [])), list(node.attr("activation_beta", []))
    chosen = []
    for name in names:
        name = name.decode() if isinstance(name, bytes) else str(name)   # ONNX string attributes arrive as bytes
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise fail(node, f"activation {name!r} is not supported; allowed: "
                             f"{', '.join(sorted(_ACTIVATIONS))} (case does not matter)")
        _, _, alpha, beta = _ACTIVATIONS[key]
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        chosen.append(_Activation(key, alpha or 0.0, beta or 0.0))
    per = len(defaults)
    return tuple(tuple(chosen[d * per:(d + 1) * per]) for d in range(dirs))


# -- the step program: the gates of one time step, shared by the reference and the lowering --------------------

def _program(op: str, plan: _Plan, d: int) -> list[_Product | _Gate]:
    """One time step of direction d; a gate's ops per [batch, hidden] element count what its function computes."""
    hid = plan.hidden
    acts = plan.activations[d]
    pre = 1 + 2 * (_B in plan.present) + 2 * (plan.clip is not None)   # x W^T + h R^T (+ Wb + Rb), clip: min, max
    mask = int(_LENS in plan.present)                                 # past its length an entry keeps its state
    if op == "RNN":
        return [_Product("hr", "h", 0, hid),
                _Gate("h_next", ("xw", "hr", "b", "h", "lens"), _rnn, pre + acts[0].ops + mask)]
    if op == "LSTM":
        peep = 2 * (_P in plan.present)                                # P * c: mul, add
        forget = 1 if plan.input_forget else pre + peep + acts[0].ops  # 1 - i, or its own gate
        cell = (pre + peep + acts[0].ops) + forget + (pre + acts[1].ops) + 3 + mask   # i, f, g; f c + i g
        hidden = pre + peep + acts[0].ops + acts[2].ops + 1 + mask                  # o; o h(c)
        return [_Product("hr", "h", 0, 4 * hid),
                _Gate("c_next", ("xw", "hr", "b", "p", "c", "lens"), _lstm_cell, cell),
                _Gate("h_next", ("xw", "hr", "b", "p", "c_next", "h", "lens"), _lstm_hidden, hidden)]
    gate = pre + acts[0].ops                                           # z or r
    candidate = pre + acts[1].ops                                      # x Wh^T + Wbh + recurrent + Rbh
    blend = 4 + mask                                                   # (1 - z) h~ + z h
    if plan.linear_before_reset:                                       # r gate and r * (h Rh^T + Rbh): one mul
        return [_Product("hr", "h", 0, 3 * hid),
                _Gate("h_next", ("xw", "hr", "b", "h", "lens"), _gru, 2 * gate + candidate + 1 + blend)]
    return [_Product("hr", "h", 0, 2 * hid),
            _Gate("rh", ("xw", "hr", "b", "h"), _gru_reset, gate + 1),
            _Product("hr_h", "rh", 2 * hid, hid),
            _Gate("h_next", ("xw", "hr", "hr_h", "b", "h", "lens"), _gru, gate + candidate + blend)]


def _gate_inputs(plan: _Plan, d: int, v: Values, first: int, count: int) -> np.ndarray:
    """Pre-activations of `count` gates from gate `first`: x W^T + h R^T + Wb + Rb (absent terms are zero)."""
    cols = slice(first * plan.hidden, (first + count) * plan.hidden)
    pre: np.ndarray = v["xw"][:, cols]
    if v.get("hr") is not None:
        pre = pre + v["hr"][:, cols]
    if v.get("b") is not None:
        b = np.asarray(v["b"][d], dtype=pre.dtype)
        total = b.size // 2
        pre = pre + b[cols] + b[total:][cols]
    return pre


def _clip(plan: _Plan, x: np.ndarray) -> np.ndarray:
    return x if plan.clip is None else np.clip(x, -plan.clip, plan.clip)


def _keep(plan: _Plan, k: int, v: Values, new: np.ndarray, old: np.ndarray | None) -> np.ndarray:
    """Past a batch entry's sequence length its state stays as it was."""
    if v.get("lens") is None:
        return new
    live = (k < np.asarray(v["lens"]))[:, None]
    return np.where(live, new, 0 if old is None else old)


def _rnn(plan: _Plan, d: int, k: int, v: Values) -> np.ndarray:
    f = plan.activations[d][0]
    return _keep(plan, k, v, f(_clip(plan, _gate_inputs(plan, d, v, 0, 1))), v.get("h"))


def _lstm_cell(plan: _Plan, d: int, k: int, v: Values) -> np.ndarray:
    """Gates i, o, f, c in W's order; peepholes P = [Pi, Po, Pf]; c' = f * c + i * g(c~)."""
    f, g, _ = plan.activations[d]
    hid, pre = plan.hidden, _gate_inputs(plan, d, v, 0, 4)
    c = v.get("c") if v.get("c") is not None else np.zeros_like(pre[:, :hid])
    p = None if v.get("p") is None else np.asarray(v["p"][d], dtype=pre.dtype)
    i_pre, f_pre = pre[:, :hid], pre[:, 2 * hid:3 * hid]
    if p is not None:
        i_pre, f_pre = i_pre + p[:hid] * c, f_pre + p[2 * hid:] * c
    i = f(_clip(plan, i_pre))
    forget = 1 - i if plan.input_forget else f(_clip(plan, f_pre))
    return _keep(plan, k, v, forget * c + i * g(_clip(plan, pre[:, 3 * hid:])), c)


def _lstm_hidden(plan: _Plan, d: int, k: int, v: Values) -> np.ndarray:
    f, _, h = plan.activations[d]
    hid, pre = plan.hidden, _gate_inputs(plan, d, v, 0, 4)
    c = v["c_next"]
    o_pre = pre[:, hid:2 * hid]
    if v.get("p") is not None:
        o_pre = o_pre + np.asarray(v["p"][d], dtype=pre.dtype)[hid:2 * hid] * c
    return _keep(plan, k, v, f(_clip(plan, o_pre)) * h(c), v.get("h"))


def _gru_reset(plan: _Plan, d: int, k: int, v: Values) -> np.ndarray:
    """r * h, the input of the candidate's recurrent product when linear_before_reset is 0 (gates z, r, h)."""
    r = plan.activations[d][0](_clip(plan, _gate_inputs(plan, d, v, 1, 1)))
    return r * v["h"] if v.get("h") is not None else np.zeros_like(r)


def _gru(plan: _Plan, d: int, k: int, v: Values) -> np.ndarray:
    f, g = plan.activations[d]
    hid = plan.hidden
    z = f(_clip(plan, _gate_inputs(plan, d, v, 0, 1)))
    h = v.get("h") if v.get("h") is not None else np.zeros_like(z)
    b = np.zeros(6 * hid, z.dtype) if v.get("b") is None else np.asarray(v["b"][d], dtype=z.dtype)
    candidate = v["xw"][:, 2 * hid:] + b[2 * hid:3 * hid]
    if plan.linear_before_reset:
        r = f(_clip(plan, _gate_inputs(plan, d, v, 1, 1)))
        recurrent = v["hr"][:, 2 * hid:] if v.get("hr") is not None else 0
        candidate = candidate + r * (recurrent + b[5 * hid:])
    else:
        candidate = candidate + (v["hr_h"] if v.get("hr_h") is not None else 0) + b[5 * hid:]
    return _keep(plan, k, v, (1 - z) * g(_clip(plan, candidate)) + z * h, v.get("h"))


# -- layout: inputs to step order, step results to Y, Y_h, Y_c --------------------------------------------------

def _project(plan: _Plan, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x W^T for every step: [steps, batch, gates * hidden] whatever the layout."""
    xw: np.ndarray = np.einsum("sni,gi->sng" if plan.layout == 0 else "nsi,gi->sng", x, w)
    return xw


def _in_step_order(plan: _Plan, d: int, xw: np.ndarray, lens: np.ndarray | None) -> np.ndarray:
    """The reverse direction reads each batch entry from its own last step backwards."""
    if not plan.reverse[d]:
        return xw
    if lens is None:
        return xw[::-1]
    ordered = np.zeros_like(xw)
    for n, length in enumerate(np.asarray(lens)):
        ordered[:length, n] = xw[:length, n][::-1]
    return ordered


def _initial(plan: _Plan, d: int, state: np.ndarray | None, work: type[np.floating[Any]] | np.dtype[Any]
             ) -> np.ndarray | None:
    if state is None:
        return None
    return np.asarray(state[d] if plan.layout == 0 else state[:, d], dtype=work)


def _stack_y(plan: _Plan, lens: np.ndarray | None, hs: list[list[np.ndarray]]) -> np.ndarray:
    """Y[step, direction, batch, hidden] (layout 1: [batch, step, direction, hidden]); zero past a length."""
    y = np.stack([_in_step_order(plan, d, np.stack(per_dir), lens) for d, per_dir in enumerate(hs)], axis=1)
    if lens is not None:
        y = np.where((np.arange(plan.steps)[:, None] < np.asarray(lens)[None, :])[:, None, :, None], y, 0)
    return y if plan.layout == 0 else y.transpose(2, 0, 1, 3)


def _y_from_runs(plan: _Plan, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    """Y from each direction's [steps, batch, hidden] run of states (then sequence_lens, if given)."""
    dirs = len(plan.reverse)
    return _stack_y(plan, arrays[dirs] if len(arrays) > dirs else None, [list(a) for a in arrays[:dirs]])


def _stack_final(plan: _Plan, states: list[np.ndarray]) -> np.ndarray:
    return np.stack(states, axis=0 if plan.layout == 0 else 1)


# -- lowering ------------------------------------------------------------------------------------------------

def _lower_direction(node: Node, plan: _Plan, d: int, given: dict[int, Operand], ops: list[IROp],
                     hs: list[list[Operand]]) -> dict[str, Operand]:
    """Append one direction's IR (projection, then per step the program) to ops; returns its final states."""
    x, w, r = given[_X], given[_W], given[_R]
    dtype, acc = x.dtype, accumulator(x.dtype)
    tag = f"{node.name}:d{d}"
    rows, width = w.shape[1], x.shape[2]
    xw = Operand(f"{tag}:xw", (plan.steps, plan.batch, rows), dtype, Role.output)
    x_axes = (Axis.of("s"), Axis.of("n"), Axis.of("i")) if plan.layout == 0 else (
        Axis.of("n"), Axis.of("s"), Axis.of("i"))
    ops.append(Einsum(name=f"{tag}:xw", node=node.name, op=node.op, inputs=(x, w), output=xw,
                      loops=(("s", plan.steps), ("n", plan.batch), ("g", rows), ("i", width)),
                      in_axes=(x_axes, (Axis((), d), Axis.of("g"), Axis.of("i"))), out_dims=("s", "n", "g"),
                      acc=acc))
    lens = given.get(_LENS)
    if plan.reverse[d] and lens is not None:   # each batch entry reversed over its own length: a real copy
        ordered = Operand(f"{tag}:xw_reversed", xw.shape, dtype, Role.output)
        ops.append(Move(name=ordered.tensor, node=node.name, op=node.op, inputs=(xw, lens), output=ordered,
                        fn=lambda a, n, d=d: _in_step_order(plan, d, a, n)))
        xw, reversed_already = ordered, True
    else:
        reversed_already = not plan.reverse[d]
    values: dict[str, Operand] = {}
    if _B in given:
        values["b"] = given[_B]
    if _P in given:
        values["p"] = given[_P]
    if lens is not None:
        values["lens"] = lens
    initial = {"h": given.get(_H0), "c": given.get(_C0)}
    hs.append([])
    state_shape = (plan.batch, plan.hidden)
    for k in range(plan.steps):
        position = k if reversed_already else plan.steps - 1 - k
        step_xw = Operand(f"{tag}:t{k}:xw", (plan.batch, rows), dtype, Role.output)
        # a leading-axis slice of [steps, batch, gates*hidden] is contiguous: a view, no bytes move
        ops.append(Move(name=step_xw.tensor, node=node.name, op=node.op, inputs=(xw,), output=step_xw, view=True,
                        fn=lambda a, p=position: a[p]))
        values["xw"] = step_xw
        for stage in _program(node.op, plan, d):
            name = f"{tag}:t{k}:{stage.out}"
            if isinstance(stage, _Product):
                src = values.get(stage.src) if k or stage.src != "h" else initial["h"]
                if src is None:
                    values.pop(stage.out, None)
                    continue
                result = Operand(name, (plan.batch, stage.rows), dtype, Role.output)
                src_axes: tuple[Axis, ...] = (Axis.of("n"), Axis.of("j"))
                if len(src.shape) == 3:   # initial_h: [directions, batch, hidden] or [batch, directions, hidden]
                    src_axes = (Axis((), d),) + src_axes if plan.layout == 0 else (
                        Axis.of("n"), Axis((), d), Axis.of("j"))
                ops.append(Einsum(name=name, node=node.name, op=node.op, inputs=(src, r), output=result,
                                  loops=(("n", plan.batch), ("g", stage.rows), ("j", plan.hidden)),
                                  in_axes=(src_axes, (Axis((), d), Axis((("g", 1),), stage.first_row),
                                                      Axis.of("j"))), out_dims=("n", "g"), acc=acc))
            else:
                result = Operand(name, state_shape, dtype, Role.output)
                ops.append(_gate_map(node, plan, d, k, stage, values, initial, result))
            values[stage.out] = result
        values["h"] = values.pop("h_next")
        hs[-1].append(values["h"])
        if "c_next" in values:
            values["c"] = values.pop("c_next")
        initial = {"h": None, "c": None}
    return values


def _gate_map(node: Node, plan: _Plan, d: int, k: int, stage: _Gate, values: dict[str, Operand],
              initial: dict[str, Operand | None], result: Operand) -> Map:
    """A Map over the operands present among stage.args; an initial state tensor is cut to its direction."""
    names, inputs = [], []
    for arg in dict.fromkeys(stage.args):
        source = initial.get(arg) if k == 0 and arg in ("h", "c") else values.get(arg)
        if source is not None:
            names.append(arg)
            inputs.append(source)
    starts = {arg for arg in names if k == 0 and arg in ("h", "c")}

    def compute(*arrays: np.ndarray) -> np.ndarray:
        v: Values = {}
        for arg, a in zip(names, arrays):
            a = np.asarray(a)
            v[arg] = _initial(plan, d, a, a.dtype) if arg in starts else a
        return stage.fn(plan, d, k, v)
    return Map(name=result.tensor, node=node.name, op=node.op, inputs=tuple(inputs), output=result, fn=compute,
               ops_per_element=stage.ops)


def _stacked(node: Node, tag: str, parts: list[Operand], ops: list[IROp]) -> Operand:
    """The steps' [batch, hidden] states stacked to [steps, batch, hidden] by Moves of at most _FAN_IN operands:
    a tree whose every level copies the sequence once (one level up to _FAN_IN steps)."""
    level = 0
    while True:
        groups = [parts[i:i + _FAN_IN] for i in range(0, len(parts), _FAN_IN)]
        merged = []
        for j, group in enumerate(groups):
            count = sum(p.shape[0] if len(p.shape) == 3 else 1 for p in group)
            name = f"{tag}:steps" if len(groups) == 1 else f"{tag}:steps{level}.{j}"
            result = Operand(name, (count,) + group[0].shape[-2:], group[0].dtype, Role.output)
            ops.append(Move(name=name, node=node.name, op=node.op, inputs=tuple(group), output=result,
                            fn=lambda *a: np.concatenate([x.reshape((-1,) + x.shape[-2:]) for x in a])))
            merged.append(result)
        if len(merged) == 1:
            return merged[0]
        parts, level = merged, level + 1
