"""Each op's mapping as a loop nest (Mapping.text(), `accelsim map`'s view) for the reports.

Invariant: the nests are the mappings the tile engine simulated: the same mapper, budget and cost model
(accelsim.sim.tile.mappings_for), so in the same process they come out of the mapper's cache.
"""
from __future__ import annotations

import os

from accelsim.arch import Arch
from compiler.dtypes import DType
from compiler.graph import Graph


def loop_nests(model: str | os.PathLike | Graph, arch: Arch, batch: int | None = None,
               dtype: str | DType | None = None, compat: str | None = None, **model_options) -> dict[str, str]:
    """Op name -> its loop nest as text, in execution order."""
    # imported here: `from accelsim.report import sweep_report` should not load the engine
    from accelsim.sim.model import load_model
    from accelsim.sim.tile import mappings_for
    from compiler.codegen import vector_unit
    from compiler.codegen.vector import vector_rows
    from compiler.ir import Kind
    from compiler.pipeline import Options, compile_graph

    target = DType.parse(dtype) if isinstance(dtype, str) else dtype or arch.native_dtype
    ir = compile_graph(load_model(model, batch=batch, **model_options), Options(dtype=target))
    mappings = mappings_for(ir, arch, compat=compat)
    out = {}
    for op in ir.ops:
        if getattr(op, "view", False):
            out[op.name] = f"# {op.name}: a view (reshape); no data moves, no time"
        elif op.kind == Kind.einsum:
            out[op.name] = mappings[op.name].text()
        else:
            # vector ops run in the chunks codegen cuts (compiler.codegen.vector), as `accelsim map` prints
            mapping = vector_rows(op, arch, 0, vector_unit(arch))[5]
            out[op.name] = mapping.text() + "\n# vector op: chunks along one output axis, as simulated"
    return out
