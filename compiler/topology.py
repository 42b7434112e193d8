"""SCALE-Sim topology CSVs (its conv and GEMM forms) read into a shape-only Graph, one Conv or MatMul a row.

Invariant: rows stay independent (each its own graph input and output, as SCALE-Sim's layers are), batch 1,
SCALE-Sim's output size ceil((H - R + stride) / stride), so every row's MACs equal SCALE-Sim's.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from compiler.builder import Builder
from compiler.errors import ModelError, read_text
from compiler.graph import Graph

# The header spellings of SCALE-Sim v3's sample topologies (topologies/conv_nets/*.csv, GEMM_mnk/*.csv),
# compared case- and space-insensitively.
CONV_HEADER = ("layer name", "ifmap height", "ifmap width", "filter height", "filter width", "channels",
               "num filter", "strides")
GEMM_HEADER = ("layer", "m", "n", "k")
# the most rows a topology may have: SCALE-Sim's own have tens, and each row is a layer of its own, mapped and
# simulated on its own (20,000 take about 14 s), so a larger file is refused before it is read into a graph
MAX_LAYERS = 10_000
_SPARSITY = re.compile(r"^\d+:\d+$")


class TopologyError(ModelError):
    """A topology CSV that cannot be read: names the file, the line and the column at fault."""


def load_topology(path: str | os.PathLike[str]) -> Graph:
    """The Graph of a SCALE-Sim topology file; the form (conv or GEMM) is read off its header."""
    path = Path(path)
    lines = read_text(path, TopologyError).splitlines()
    numbered = [(i + 1, _fields(line)) for i, line in enumerate(lines) if line.strip()]
    if not numbered:
        raise TopologyError(f"{path}: empty; expected a header line `{', '.join(CONV_HEADER)},` "
                            f"or `{', '.join(GEMM_HEADER)},`")
    (_, header), rows = numbered[0], numbered[1:]
    if len(rows) > MAX_LAYERS:
        raise TopologyError(f"{path}: {len(rows):,} layers; accelsim reads topologies of at most {MAX_LAYERS:,} "
                            f"(each layer is mapped and simulated on its own)")
    form = _form(path, header)
    builder = Builder(path.stem or "topology", weights=False)
    outputs = []
    for line, fields in rows:
        where = f"{path}: line {line}"
        if form == "gemm":
            outputs.append(_gemm(builder, where, fields))
        else:
            outputs += _conv(builder, where, fields)
    if not outputs:
        raise TopologyError(f"{path}: no layers after the header")
    graph = builder.build(outputs)
    graph.source = f"SCALE-Sim topology {path}"
    return graph


def _fields(line: str) -> list[str]:
    """Comma-separated cells. SCALE-Sim drops whatever follows a row's last comma (sample files end every
    row with `,` and some with `,#dw`); we drop it only when empty or a `#` comment, so a row without the
    trailing comma keeps its last value instead of silently losing it."""
    cells = [c.strip() for c in line.split(",")]
    if len(cells) > 1 and (cells[-1] == "" or cells[-1].startswith("#")):
        cells.pop()
    return cells


def _form(path: Path, header: list[str]) -> str:
    names = tuple(" ".join(c.lower().split()) for c in header)
    if names[:4] == GEMM_HEADER or (len(names) >= 4 and names[1:4] == GEMM_HEADER[1:]):
        return "gemm"
    if names[:8] == CONV_HEADER:
        return "conv"
    raise TopologyError(f"{path}: line 1: header {', '.join(header)!r} is neither SCALE-Sim's conv form "
                        f"({', '.join(CONV_HEADER)}) nor its GEMM form ({', '.join(GEMM_HEADER)})")


def _ints(where: str, fields: list[str], names: tuple[str, ...]) -> list[int]:
    values = []
    for column, (name, text) in enumerate(zip(names, fields), start=1):
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise TopologyError(f"{where}: column {column + 1} ({name}) is {text!r}; expected a positive integer")
        values.append(value)
    return values


def _check_count(where: str, fields: list[str], names: tuple[str, ...]) -> None:
    """The header's columns, plus optionally SCALE-Sim's N:M sparsity ratio (ignored: dense, as SCALE-Sim
    runs a layer when its cfg has SparsitySupport off)."""
    extra = fields[len(names):]
    if len(fields) < len(names) or len(extra) > 1 or (extra and not _SPARSITY.match(extra[0])):
        raise TopologyError(f"{where}: {len(fields)} columns {fields}; expected {len(names)} "
                            f"({', '.join(names)}), optionally followed by a sparsity ratio N:M")
    if not fields[0]:
        raise TopologyError(f"{where}: column 1 (layer name) is empty")


def _gemm(b: Builder, where: str, fields: list[str]) -> str:
    """Layer, M, N, K: out[M, N] = in[M, K] @ w[K, N] (SCALE-Sim: an M x K ifmap, N filters of 1 x K)."""
    _check_count(where, fields, GEMM_HEADER)
    m, n, k = _ints(where, fields[1:4], GEMM_HEADER[1:])
    x = b.input(b.fresh(f"{fields[0]}.in"), (1, m, k))   # batch 1, as conv rows have
    return b.node("MatMul", [x, b.weight(f"{fields[0]}.w", (k, n))], name=fields[0])


def _conv(b: Builder, where: str, fields: list[str]) -> list[str]:
    """One conv row: valid windows (no padding), the same stride both ways, batch 1.

    A layer whose name contains "DP" is depthwise in SCALE-Sim: it runs as Channels separate one-channel
    layers of Num Filter filters each; here that is one Conv with group = Channels and Channels x Num
    Filter outputs (the same MACs and the same per-channel GEMMs)."""
    _check_count(where, fields, CONV_HEADER)
    h, w, r, s, c, k, stride = _ints(where, fields[1:8], CONV_HEADER[1:])
    for (size, name), (window, wname) in (((h, "ifmap height"), (r, "filter height")),
                                          ((w, "ifmap width"), (s, "filter width"))):
        if window > size:
            raise TopologyError(f"{where}: {wname} {window} is larger than the {name} {size} (SCALE-Sim "
                                f"convolutions are unpadded)")
    # SCALE-Sim's ofmap is ceil((H - R + stride) / stride) rows: no begin padding, but where the stride
    # does not divide H - R the last window hangs over the end, e.g. H=224, R=7, stride 2: 110 rows, the
    # last reading row 224, one zero row past the end (a valid conv would give 109).
    pads = [(-(-(size - window) // stride)) * stride + window - size for size, window in ((h, r), (w, s))]
    name = fields[0]
    groups = c if "DP" in name else 1
    x = b.input(b.fresh(f"{name}.in"), (1, c, h, w))
    weight = b.weight(f"{name}.w", (k * groups, c // groups, r, s))
    return [b.node("Conv", [x, weight], name=name, strides=[stride, stride], group=groups, pads=[0, 0, *pads])]
