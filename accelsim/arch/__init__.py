"""Hardware descriptions: the only reader of archs/*.yaml, turning it into frozen Arch objects (schema, units, area).

It imports no tool and no importer: a SCALE-Sim .cfg reaches it as YAML text from accelsim.importers.
"""
from compiler.hardware import (SCHEMA_VERSION, Arch, ArchError, ArchKind, ComputeUnit, Dataflow, MemoryLevel,
                               UnitRole)
from accelsim.arch.load import arch_document, load_arch, load_arch_text, preset_names, presets_dir

__all__ = ["SCHEMA_VERSION", "Arch", "ArchError", "ArchKind", "ComputeUnit", "Dataflow", "MemoryLevel", "UnitRole",
           "arch_document", "load_arch", "load_arch_text", "preset_names", "presets_dir"]
