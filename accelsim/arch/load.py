"""Reading hardware descriptions: archs/*.yaml (or YAML text) parsed once, by a safe loader, into an Arch.

This is the only module that reads arch YAML. Invariant: a loaded Arch has passed every check in
accelsim.arch.schema; a bad file is an ArchError naming file, key and value.
"""
from __future__ import annotations

import difflib
import os
from pathlib import Path

import yaml

from compiler.hardware import Arch, ArchError
from accelsim.arch.schema import build_arch
from compiler.errors import read_text


def presets_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "archs"


def preset_names() -> list[str]:
    return sorted(path.stem for path in presets_dir().glob("*.yaml"))


def load_arch(name_or_path: str | os.PathLike) -> Arch:
    """A preset by name (`tpu_v1`) or a .yaml file by path, parsed and checked. (A SCALE-Sim .cfg is another
    format: accelsim.sim.model.load_arch converts it through accelsim.importers first.)"""
    text = str(name_or_path)
    if text.endswith(".cfg"):
        raise ArchError(f"{text}: a SCALE-Sim .cfg, not arch YAML; accelsim.load_arch and the command line "
                        f"convert it (accelsim arch convert writes the YAML)")
    if text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text:
        path = Path(text)
        if not path.is_file():
            raise ArchError(f"{text}: no such arch file")
    else:
        path = presets_dir() / f"{text}.yaml"
        if not path.is_file():
            close = difflib.get_close_matches(text, preset_names(), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ArchError(f"unknown arch {text!r}; {hint}presets: {', '.join(preset_names())} (or give a path "
                            f"to a .yaml file)")
    return load_arch_text(read_text(path, ArchError, shown_path(path)), shown_path(path), path.resolve())


MAX_YAML_VALUES = 100_000    # values a document may expand to: a preset has a few hundred, an alias bomb billions
MAX_YAML_DEPTH = 100         # levels of nested lists and mappings: a preset has 4, a hostile file 100,000


class YamlRefused(yaml.YAMLError):
    """A document PyYAML would read that accelsim refuses before reading it."""


class YamlTooLarge(YamlRefused):
    """A document whose aliases expand past MAX_YAML_VALUES values (or into themselves), or that nests deeper
    than MAX_YAML_DEPTH."""


class YamlDuplicateKey(YamlRefused):
    """A mapping that gives one key twice: YAML leaves it undefined, PyYAML keeps the last silently (a `name:`
    appended to a copied preset renamed it without a word)."""


# libyaml's parser, where PyYAML was built with it, reads the presets ~10x faster than the pure-Python one; its
# messages word some syntax errors differently, so a document it refuses is read again by the pure one, whose
# message (and line) the user sees.
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def bounded_yaml(text: str):
    """yaml.safe_load, refusing a document whose aliases would expand past MAX_YAML_VALUES values before anything
    walks or prints it: 600 bytes of nested aliases (an alias bomb) expand to billions, and one error message
    that formats the value would take the machine's memory. Counted on the composed nodes, in linear time.
    A document nested deeper than MAX_YAML_DEPTH is refused too (PyYAML composes by recursion)."""
    try:
        return _bounded(text, FAST_LOADER)
    except yaml.YAMLError:
        if FAST_LOADER is yaml.SafeLoader:
            raise
    return _bounded(text, yaml.SafeLoader)      # its verdict, in its words


def _bounded(text: str, loader_class: type):
    loader = loader_class(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:                  # hundreds of levels: past Python's stack, far past MAX_YAML_DEPTH
            raise YamlTooLarge(f"it nests lists or mappings more than {MAX_YAML_DEPTH} levels deep") from None
        if node is None:
            return None
        _expanded(node, {}, set(), 0)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _expanded(node, sizes: dict, open_: set, depth: int) -> int:
    """Values `node` stands for once every alias is expanded (each shared node counted where it is used); `depth`
    lists and mappings hold it."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise YamlTooLarge(f"an alias refers to itself (line {node.start_mark.line + 1}): it expands forever")
    collection = isinstance(node, (yaml.SequenceNode, yaml.MappingNode))
    if collection and depth >= MAX_YAML_DEPTH:     # `depth` collections hold this one
        raise YamlTooLarge(f"it nests lists or mappings more than {MAX_YAML_DEPTH} levels deep (line "
                           f"{node.start_mark.line + 1})")
    if isinstance(node, yaml.MappingNode):
        _unique_keys(node)
    open_.add(key)
    children = node.value if isinstance(node, yaml.SequenceNode) else \
        [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
    total = 1 + sum(_expanded(child, sizes, open_, depth + 1) for child in children)
    open_.discard(key)
    if total > MAX_YAML_VALUES:
        raise YamlTooLarge(f"its aliases expand to more than {MAX_YAML_VALUES:,} values (line "
                           f"{node.start_mark.line + 1}); an alias bomb is refused")
    sizes[key] = total
    return total


def _unique_keys(node: yaml.MappingNode) -> None:
    seen: dict[str, int] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            raise YamlDuplicateKey(f"line {line}: key {key.value[:60]!r} is given twice (first on line "
                                   f"{seen[key.value]}); give each key once")
        seen[key.value] = line


def load_arch_text(text: str, shown: str, source: Path) -> Arch:
    """An Arch from YAML text; messages name the file as `shown` (SCALE-Sim .cfg files convert to text)."""
    return build_arch(read_document(text, shown), shown, source)


def read_document(text: str, shown: str):
    """The YAML document in `text` (bounded_yaml), or an ArchError naming the file `shown` and the line."""
    try:
        return bounded_yaml(text)
    except YamlRefused as e:
        raise ArchError(f"{shown}: {e}") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise ArchError(f"{shown}: {line}YAML syntax error: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise ArchError(f"{shown}: YAML syntax error: {e}") from None


def arch_document(arch: Arch) -> dict:
    """The mapping a YAML preset was parsed from, read again from its file: for tools that derive new archs
    from it by key path (accelsim.sweep) and hand each back to build_arch."""
    return bounded_yaml(read_text(arch.source_file, ArchError))


def shown_path(path: Path) -> str:
    """The file as messages name it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
