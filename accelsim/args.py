"""The command-line arguments every command that takes a model shares (`run`, `map`, `compare`, ...), and
the checks on them; the main CLI and any sub-CLI import them from here.
"""
from __future__ import annotations

import argparse
import mmap
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from accelsim.parallel.plan import SCHEDULES
from compiler import output
from compiler.errors import UserError


def model_args(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument("model", nargs=None if default is None else "?", default=default,
                   help="a built-in model (see `accelsim models`), an .onnx file or a SCALE-Sim topology .csv"
                   + (f" (default: {default})" if default else ""))
    p.add_argument("--batch", type=int, help="batch size")
    p.add_argument("--seq", type=int, help="sequence length (language models; of an ONNX file, every symbolic "
                                           "second dimension of its inputs)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="an ONNX file's input shape (--shape input_ids=1,128), or the size of a symbolic "
                        "dimension wherever it appears (--shape sequence_length=128)")
    p.add_argument("--bind", action="append", default=[], metavar="NAME=V0,V1,...",
                   help="an ONNX file's graph input bound by value at import: one it needs as a constant (a "
                        "Reshape's shape, Resize's sizes, TopK's k), e.g. --bind shape=2,-1 --bind k=3")
    p.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE",
                   help="a built-in model's own option, e.g. --opt mode=decode --opt past=512 --opt layers=2")


def model_options(args) -> dict:
    options = {}
    if args.seq is not None:
        options["seq"] = args.seq
    for item in args.opt:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UserError(f"--opt {item!r}: expected KEY=VALUE")
        _model_option(args, key, item)
        options[key] = _literal(value)
    shapes = input_shapes(args.shape)
    if shapes:
        options["shapes"] = shapes
    bound = input_values(getattr(args, "bind", []))
    if bound:
        options["bind"] = bound
    return options


NOT_FLAGS = ("command", "handler", "model", "opt", "shape", "folders")   # argparse names that are not --KEY flags
MERGED = ("seq",)     # flags model_options itself folds into the model's options: --opt seq=N says the same


def _model_option(args, key: str, item: str) -> None:
    """An --opt is one of a built-in model's own options that the command does not set itself: `run --opt
    dtype=int8` reached the simulation twice, as --dtype's value and as the model's."""
    from compiler.zoo import MODELS, option_names

    model = getattr(args, "model", None)
    model = model if model in MODELS else None
    names = option_names(model) - {"weights"}      # shapes only to simulate, drawn to evaluate: the command's choice
    if key not in names:
        raise UserError(f"--opt {item}: {key!r} is not a model option; {model or 'built-in models'} take"
                        f"{'s' if model else ''} {', '.join(sorted(names))}")
    if key in MERGED:
        if getattr(args, key, None) is not None:
            raise UserError(f"--opt {item}: --{key} is given too; give one")
        return
    if key in vars(args) and key not in NOT_FLAGS and not key.endswith("_command"):
        raise UserError(f"--opt {item}: {key} is an option of the command itself; use --{key.replace('_', '-')}")


def input_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    """--shape NAME=D0,D1,... given any number of times, as NAME -> dimensions."""
    shapes = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            dims = tuple(int(d) for d in text.split(","))
        except ValueError:
            dims = ()
        if not sep or not name or not dims or any(d < 1 for d in dims):
            raise UserError(f"--shape {item!r}: expected NAME=D0,D1,... with positive integer sizes, e.g. "
                            f"--shape input_ids=1,128")
        if name in shapes:
            raise UserError(f"--shape {name} given twice")
        shapes[name] = dims
    return shapes


def input_values(items: list[str]) -> dict[str, tuple]:
    """--bind NAME=V0,V1,... given any number of times, as NAME -> its numbers (integers, or floats if any is one:
    the frontend checks them against the input's declared type and shape)."""
    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        parts = text.split(",") if text else []
        numbers = None
        for cast in (int, float):
            try:
                numbers = tuple(cast(part) for part in parts)
                break
            except ValueError:
                pass
        if not sep or not name or not numbers:
            raise UserError(f"--bind {item!r}: expected NAME=V0,V1,... (numbers, e.g. --bind shape=2,-1 or "
                            f"--bind scales=1,1,2,2)")
        if name in values:
            raise UserError(f"--bind {name} given twice")
        values[name] = numbers
    return values


def _literal(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UserError(f"--{name} {value}: must be a positive integer")


def rows(name: str, value: int | None) -> None:
    """A count of rows to show: 0 (all) or more."""
    if value is not None and value < 0:
        raise UserError(f"--{name} {value}: must be 0 (all) or more")


# flags that name what is written, by their dest (--rtl-vcd: rtl_vcd)
OUTPUTS = ("json", "csv", "html", "trace", "plot", "out", "rtl_vcd", "model_vcd", "db")
FOLDERS = ("plot",)   # output flags that name a folder, unless a command's parser sets `folders` to its own


def check_outputs(args: argparse.Namespace) -> None:
    """Every output a command was given, checked before anything runs (a long simulation is not lost to a
    typo in --json): the folder it goes in must exist; a file output must not be a folder, a block device,
    nor a file the command reads (the model, --arch, --inputs...: it would be destroyed), nor another output."""
    folders = getattr(args, "folders", FOLDERS)
    inputs = _inputs(args)
    named: list[tuple[str, str]] = []
    for dest in OUTPUTS:
        target, flag = getattr(args, dest, None), dest.replace("_", "-")
        if target == "":
            raise UserError(f"--{flag} '': an empty name; name a file to write"
                            + (" ('-' for stdout)" if flag in ("json", "csv") else ""))
        if target is None or target == "-":
            continue
        where = f"--{flag} {target}"
        if not Path(target).resolve().parent.is_dir():
            raise UserError(f"{where}: the folder {Path(target).parent} does not exist; create it or "
                            f"write elsewhere")
        if flag in folders:
            if os.path.lexists(target) and not os.path.isdir(target):
                raise UserError(f"{where}: is not a folder; name a folder (it is created if missing)")
        elif output.streaming(output.target(target, where)) and flag == "db":
            raise UserError(f"{where}: is a FIFO or device; a sweep's database is a file (it is reopened to resume)")
        for key, source in inputs + named:
            if _same_file(target, source):
                raise UserError(f"{where}: that is {key} {source}, which this command "
                                f"{'reads' if (key, source) in inputs else 'also writes'}; write to another file")
            if key == "the model file" and _external_data(source, target):
                raise UserError(f"{where}: that is the external data of the model {source}, which this command "
                                f"reads; write to another file")
        named.append((f"the --{flag} file", target))


def _inputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(option, path) for every argument that names an existing file: what the command reads."""
    found = []
    for key, value in vars(args).items():
        if key in OUTPUTS or key in ("handler", "folders"):
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, str) and item != "-" and _is_file(item):
                found.append((f"the {key.replace('_', ' ')} file", item))
    return found


def _external_data(model: str, target: str) -> bool:
    """Whether `target` is a file the ONNX `model` keeps its tensors in (external data lies beside the model): the
    model is parsed only when the file's name appears in it."""
    if not (model.endswith(".onnx") and _is_file(target) and _same_file(Path(model).parent, Path(target).parent)):
        return False
    name = Path(target).name
    with open(model, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return False
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
            if data.find(name.encode()) < 0:
                return False
    import onnx
    from onnx.external_data_helper import _get_all_tensors

    try:
        tensors = _get_all_tensors(onnx.load(model, load_external_data=False))
        return any(e.key == "location" and e.value == name for t in tensors for e in t.external_data)
    except Exception:   # not a readable model: the command says so when it reads it
        return False


def _is_file(text: str) -> bool:
    try:
        return os.path.isfile(text)
    except (OSError, ValueError):   # a name too long, or holding a NUL: not a file
        return False


def _same_file(a: str, b: str) -> bool:
    """Whether `a` and `b` name one file: the same path once links are followed, or links to one file."""
    try:
        return os.path.realpath(a) == os.path.realpath(b) or os.path.samefile(a, b)
    except (OSError, ValueError):   # either is not there (yet)
        return False


def write(target: str, text: str) -> None:
    """`text` to the file `target` (written aside and renamed: compiler.output), or to stdout for '-'; an
    unwritable file is the user's error."""
    if target == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    output.write_file(target, text if text.endswith("\n") else text + "\n")


class LateHelp(argparse.Action):
    """Stores the option's value, as argparse's default action does, with a help text `text()` built when --help
    prints it: an option that lists a registry's names (collective algorithms, system presets) is declared without
    importing the registry (`add_argument(..., action=LateHelp, text=...)`)."""

    def __init__(self, *args, text: Callable[[], str], **kwargs):
        self._text = text
        super().__init__(*args, **kwargs)

    help = property(lambda self: self._text(), lambda self, value: None)    # argparse's own help= is the text's

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)


def words(names: Sequence[str], last: str = "or") -> str:
    """`a, b or c`: names as a help text lists them."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)


def systems() -> str:
    """The system presets, comma-separated, as a help text lists them."""
    from accelsim.arch.system_load import system_names

    return ", ".join(system_names())


def many_devices(parser) -> None:
    """--system, --devices, --slice and --parallel: a run or a step on a system of devices (docs/multidevice.md)."""
    many = parser.add_argument_group("many devices (docs/multidevice.md)")
    many.add_argument("--system", action=LateHelp, text=lambda: f"a system of devices instead of one (see `accelsim "
                                                                f"archs`): {systems()}, or a YAML file")
    many.add_argument("--devices", type=int, help="devices of the system to use (default: the system's default)")
    many.add_argument("--slice", metavar="AxBxC", help="a torus slice instead of --devices (tpu_v4_pod: 4x4x4)")
    many.add_argument("--parallel", metavar="PLAN", help=f"dp=..,tp=..,pp=..[,mb=..,schedule={'|'.join(SCHEDULES)},"
                                                         "chunks=..,zero=0-3,sp=1] (default: data parallel over all); "
                                                         "groups=2: tp=2 along the model's channel groups, AlexNet's "
                                                         "two-GPU split of 2012 (LRN per device)")


def on_many_devices(args, alone: dict) -> bool:
    """Whether the command runs on a system; refuses options of a single device given with one (`alone`: option ->
    its default), and --devices, --slice or --parallel without --system."""
    if not (args.system or args.devices or args.slice or args.parallel):
        return False
    if not args.system:
        raise UserError("--devices, --slice and --parallel need --system (a system of devices; see `accelsim archs`)")
    given = [f"--{k.replace('_', '-')}" for k, default in alone.items()
             if getattr(args, k) not in (default, None, False)]
    if given:
        raise UserError(f"{', '.join(given)} do(es) not apply with --system: the system names the device, and "
                        f"micro-batches are the plan's mb=")
    return True


def report_many(result, args) -> None:
    """A step or batch on a system (accelsim.results.parallel), as `run` and `train` write it: --json, --csv, --trace,
    the table (unless JSON or CSV goes to stdout) and --html."""
    if args.json:
        write(args.json, result.to_json())
    if args.csv:
        write(args.csv, result.to_csv())
    if args.trace:
        from accelsim.results.parallel_trace import write_parallel_trace

        write_parallel_trace(result, args.trace)
    quiet = "-" in (args.json, args.csv)
    if not quiet:
        print(result.table(), end="")
    if args.html:
        from accelsim.report.parallel_page import parallel_report

        print(f"wrote {parallel_report(result, args.html)}", file=sys.stderr if quiet else sys.stdout)
