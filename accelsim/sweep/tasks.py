"""One unit of work: a point of the grid on one model, with the content hash that keys its row in the store.

Invariant: the key is a hash of exactly what decides the result (the resolved arch document, the model and its
options, the dtype, the fidelity), so the same evaluation has the same key in any sweep, spec or machine, and a
changed arch or option never reuses a stale row.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from accelsim.sweep.derive import DeriveError
from accelsim.sweep.spec import ModelSpec, Spec

KEY_VERSION = 1   # bump when an evaluation's meaning changes, so old rows are not taken for new ones


@dataclass(frozen=True)
class Task:
    key: str
    coord: tuple[int, ...]
    params_json: str                 # the point's axis values, in axis order
    model: ModelSpec
    dtype: str | None                # None: the arch's native dtype
    fidelity: str
    arch_json: str                   # the resolved arch document ("" when it could not be resolved)
    source: str                      # the base arch file (messages and the mapping cache name it)
    reason: str | None = None        # set when the point failed before evaluation (a derived key)

    @property
    def params(self) -> dict:
        return json.loads(self.params_json)


def content_key(arch_json: str, model: ModelSpec, dtype: str | None, fidelity: str) -> str:
    identity = {"arch": json.loads(arch_json) if arch_json else None, "model": model.name,
                "options": dict(model.options), "dtype": dtype, "fidelity": fidelity, "version": KEY_VERSION}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def tasks_for(spec: Spec, coord: tuple[int, ...]) -> list[Task]:
    """One task per model at this point of the grid."""
    params_json = json.dumps(spec.params(coord))
    reason = None
    try:
        doc, dtype = spec.document(coord)
        arch_json = json.dumps(doc, sort_keys=True)
    except DeriveError as error:
        # no arch to hash: key the failure by the point's values, which decide it
        dtype, arch_json, reason = spec.dtype, "", f"derived key: {error}"
    out = []
    for model in spec.models:
        if reason is None:
            key = content_key(arch_json, model, dtype, spec.fidelity)
        else:
            key = content_key(json.dumps({"base": str(spec.base_file), "point": params_json}), model, dtype,
                              spec.fidelity)
        out.append(Task(key, tuple(coord), params_json, model, dtype, spec.fidelity, arch_json,
                        str(spec.base_file), reason))
    return out
