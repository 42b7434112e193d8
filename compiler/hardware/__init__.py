"""The hardware vocabulary both packages speak: Arch, its compute units and memory levels, dataflows and kinds,
typed and frozen. The compiler takes these types; only accelsim.arch reads YAML into them."""
from compiler.hardware.arch import (SCHEMA_VERSION, Arch, ArchError, ArchKind, ComputeUnit, Dataflow, Interconnect,
                                    Link, MemoryLevel, MicroKernel, Power, SimtLimits, SystolicArray, UnitRole)

__all__ = ["SCHEMA_VERSION", "Arch", "ArchError", "ArchKind", "ComputeUnit", "Dataflow", "Interconnect", "Link",
           "MemoryLevel", "MicroKernel", "Power", "SimtLimits", "SystolicArray", "UnitRole"]
