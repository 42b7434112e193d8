"""IR -> IR passes, one per file, each a verb: `def quantize(ir, options) -> IR`."""
from __future__ import annotations

from typing import Protocol

from compiler.dtypes import DType
from compiler.hardware import Arch


class PassOptions(Protocol):
    """What the passes read of their options (compiler.compile.Options)."""

    @property
    def dtype(self) -> DType | None: ...
    @property
    def arch(self) -> Arch | None: ...
    @property
    def fuse(self) -> str: ...
    @property
    def launch(self) -> str: ...
    @property
    def caches(self) -> str: ...
