"""Derived keys: a value computed from others, `compute.pe_array.macs_per_cycle.int8: compute.pe_array.array.rows
* compute.pe_array.array.cols`, so a swept array keeps a coherent peak, bandwidth or energy.

An expression is arithmetic (+ - * / // % **, min, max, round, sqrt, log2) over numbers and key paths (by
name, not index). Quantities with units read as SI numbers (`64 KiB` -> 65536, `500 MHz` -> 5e8) and the result
is written back in the unit kind the target already has (bytes and cycles rounded to whole numbers). Invariant:
only that whitelist is ever evaluated, on expressions of bounded length and nesting, and every value it makes is
a finite number within a float's range, so no expression can run long or exhaust memory (`9 ** 9 ** 9 ** 9` is
refused at its first step, as the spec loads: parts made of numbers alone are computed then); anything else is a
DeriveError.
"""
from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, field

from accelsim.arch import units
from accelsim.sweep.keypath import KeyPathError, Location, locate

# (parser, SI unit written back, whole number?) per kind of quantity, tried in this order.
_KINDS = (
    (units.parse_size, "B", True), (units.parse_bandwidth, "B/s", False), (units.parse_frequency, "Hz", False),
    (units.parse_energy, "J", False), (units.parse_power, "W", False), (units.parse_time, "s", False),
    (units.parse_cycles, "cycles", True),
)
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_CALLS = {"min": min, "max": max, "round": round, "sqrt": math.sqrt, "log2": math.log2}
MAX_CHARACTERS = 1000   # the longest expression read; real ones are under 200
MAX_DEPTH = 50          # the deepest nesting of operations and calls read
_MAX_BITS = 1100        # a whole number beyond a float's range (2^1024) is no hardware figure


class DeriveError(ValueError):
    """An expression that cannot be read, or a value it cannot compute for one point."""


@dataclass(frozen=True)
class Derived:
    key: str
    expression: str
    target: Location
    references: tuple[tuple[str, Location], ...]
    tree: ast.Expression = field(compare=False, repr=False)

    def apply(self, doc) -> None:
        """Evaluate against `doc` (one point's document) and write the result at the target, in its unit."""
        missing = [path for path, loc in self.references if not loc.exists(doc)]
        if missing:
            raise DeriveError(f"{self.key} = {self.expression}: {missing[0]} is not set in the arch")
        values = {path: number(loc.get(doc), path) for path, loc in self.references}
        try:
            result = _evaluate(self.tree.body, values)
        except (ArithmeticError, ValueError, TypeError) as error:
            raise DeriveError(f"{self.key} = {self.expression}: {error}") from None
        current = self.target.get(doc) if self.target.exists(doc) else None
        self.target.set(doc, _written(result, current, self.key))


def parse_derived(doc, key: str, expression) -> Derived:
    """Check the expression against the base document `doc`: syntax, allowed operations, references."""
    target = locate(doc, key)
    if not isinstance(expression, (str, int, float)) or isinstance(expression, bool):
        raise DeriveError(f"{expression!r} is not an expression (write it as a string)")
    text = str(expression)
    if len(text) > MAX_CHARACTERS:
        raise DeriveError(f"{text[:40]!r}...: an expression of {len(text)} characters is too long (at most "
                          f"{MAX_CHARACTERS})")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as error:
        raise DeriveError(f"{text!r} is not an expression ({error.msg})") from None
    except (RecursionError, MemoryError):   # the parser's own nesting limit
        raise DeriveError(f"{text!r} is nested too deeply (at most {MAX_DEPTH} levels)") from None
    _check(tree.body, text)
    _fold_constants(tree.body, text)
    references = []
    for node in ast.walk(tree.body):
        if isinstance(node, (ast.Name, ast.Attribute)) and not _inside_reference(node, tree.body):
            path = _dotted(node)
            if path in _CALLS:
                continue
            try:
                references.append((path, locate(doc, path)))
            except KeyPathError as error:
                raise DeriveError(f"{text!r}: {path}: {error}") from None
    return Derived(key, text, target, tuple(dict(references).items()), tree)


def number(value, path: str) -> float:
    """A document value as a number: plain numbers as they are, quantities in SI."""
    if isinstance(value, bool):
        raise DeriveError(f"{path} is {value!r}, not a number")
    if isinstance(value, (int, float)):
        return value
    for parse, _, _ in _KINDS:
        try:
            return parse(value)
        except units.UnitError:
            continue
    raise DeriveError(f"{path} is {value!r}, not a number or a quantity with a unit")


def _written(result: float, current, key: str):
    if isinstance(current, str):
        for parse, unit, whole in _KINDS:
            try:
                parse(current)
            except units.UnitError:
                continue
            return f"{round(result)} {unit}" if whole else f"{result:.12g} {unit}"
    if isinstance(current, int) and not isinstance(current, bool) or current is None and float(result).is_integer():
        if abs(result - round(result)) > 1e-9 * max(1.0, abs(result)):
            raise DeriveError(f"{key}: {result!r} is not a whole number")
        return int(round(result))
    return float(result)


def _inside_reference(node: ast.AST, root: ast.AST) -> bool:
    """True for the inner parts of a dotted name (`compute.pe_array` inside `compute.pe_array.count`)."""
    return any(isinstance(parent, ast.Attribute) and parent.value is node for parent in ast.walk(root))


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    raise DeriveError(f"{ast.unparse(node)!r} is not a key path; name list entries, not indices")


def _check(node: ast.AST, text: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise DeriveError(f"{text!r} is nested too deeply (at most {MAX_DEPTH} levels)")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        _check(node.left, text, depth + 1), _check(node.right, text, depth + 1)
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        _check(node.operand, text, depth + 1)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS \
            and not node.keywords:
        for arg in node.args:
            _check(arg, text, depth + 1)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        pass
    elif isinstance(node, (ast.Name, ast.Attribute)):
        _dotted(node)
    else:
        allowed = "numbers, key paths, + - * / // % **, " + ", ".join(_CALLS)
        raise DeriveError(f"{text!r}: {ast.unparse(node)!r} is not allowed (allowed: {allowed})")


def _fold_constants(root: ast.AST, text: str) -> None:
    """Compute every largest part made of numbers alone, so that one no point can compute (`9 ** 9 ** 9 ** 9`,
    `1 / 0`) is refused as the spec loads, not point by point."""
    if _constant(root, text):
        _fold(root, text, whole=True)


def _constant(node: ast.AST, text: str) -> bool:
    """True if `node` holds no key path; the largest such parts below one that does are computed."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Name, ast.Attribute)):
        return False
    parts = [node.left, node.right] if isinstance(node, ast.BinOp) else \
        [node.operand] if isinstance(node, ast.UnaryOp) else list(node.args)
    constant = [_constant(part, text) for part in parts]
    if not all(constant):
        for part, alone in zip(parts, constant):
            if alone:
                _fold(part, text)
    return all(constant)


def _fold(node: ast.AST, text: str, whole: bool = False) -> None:
    try:
        _evaluate(node, {})
    except (ArithmeticError, ValueError, TypeError) as error:
        part = "" if whole else f" {ast.unparse(node)}:"
        raise DeriveError(f"{text!r}:{part} {error}") from None


def _evaluate(node: ast.AST, values: dict[str, float]) -> float:
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except OverflowError:   # float ** says only "(34, 'Numerical result out of range')"
            raise OverflowError(f"{ast.unparse(node)} is too large") from None
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_evaluate(node.operand, values))
    if isinstance(node, ast.Call):
        args = [_evaluate(arg, values) for arg in node.args]
        if node.func.id == "round" and len(args) == 2 and abs(args[1]) > 400:
            # round(5, -10**9) would build 10**(10**9); past 400 digits every float rounds to itself or 0
            raise ValueError(f"round to {args[1]} digits (at most 400)")
        return _bounded(_CALLS[node.func.id](*args))
    if isinstance(node, ast.Constant):
        return _bounded(node.value)
    return _bounded(values[_dotted(node)])


def _check_power(base, exponent) -> None:
    """Refuse a whole-number power before it is computed: Python would build all of 9 ** 9 ** 9's digits."""
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0 \
            and exponent * (abs(base).bit_length() - 1) > _MAX_BITS:
        raise OverflowError(f"{base} ** {exponent} is too large (more than {_MAX_BITS} bits)")


def _bounded(value):
    """A value an expression may hold: a finite int or float within a float's range (complex is refused too:
    (-8) ** 0.5)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{value!r} is not a real number")
    huge = value.bit_length() > _MAX_BITS if isinstance(value, int) else not math.isfinite(value)
    if huge:
        raise OverflowError(f"{value if isinstance(value, float) else 'a value'} is too large")
    return value
