"""ONNX import: a `.onnx` file (or ModelProto) becomes a finalized Graph.

Opsets from OLDEST_OPSET to the newest the installed onnx defines are read as they are; an older model is first
converted by onnx.version_converter. What accelsim leaves out by design (strings, sequences and optionals, image
decoding, ONNX's training-only Gradient) is refused with an OutOfScopeError that says why.
External data is read only from files inside the model's folder, its declared extent checked against the file
before anything is mapped, and memory-mapped read-only (bf16, fp8 and packed types then widened); weights whose
external data is missing import as shape-only (value None), so the model still simulates; initializers that old
exporters also list as graph inputs are treated as weights.
"""
from __future__ import annotations

import functools
from typing import Iterable
import math
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper, version_converter

from compiler.dtypes import DType
from compiler.bind import bound, needed_values, outer_names, static_inputs, unbound
from compiler.errors import ModelError, OutOfScopeError, UnknownValueError, UserError
from compiler.graph import Graph, Node, Tensor
from compiler.ops.shapes import FOLD_READ_LIMIT_ELEMENTS, VALUE_NEEDED, check_node_count, finalize
from compiler.references import referenced

TERNARY_MARK = "accelsim:ternary"   # doc_string of an int8 initializer holding -1/0/+1 weights
OLDEST_OPSET = 7                    # older models are converted up to it (onnx.version_converter)
SUPPORTED_OPSETS = range(OLDEST_OPSET, onnx.defs.onnx_opset_version() + 1)
SHAPE_ONLY_KEEP_ELEMENTS = 4096     # without weights, initializers this small keep values (shapes, axes)


Shapes = dict[str, tuple[int, ...]]


def load_onnx(path: str | os.PathLike[str], input_shapes: Shapes | None = None, batch: int | None = None,
              weights: bool = True, seq: int | None = None, input_values: dict[str, np.ndarray] | None = None,
              feeds: dict[str, np.ndarray] | None = None) -> Graph:
    """`input_shapes` fixes symbolic dimensions: an input name -> its whole shape, or a symbolic dimension's
    name (an exporter's 'batch', 'sequence_length', 's0') -> (size,), wherever it appears. `batch` sets the
    first dimension of every input that `input_shapes` leaves alone (a dynamic or a fixed batch); `seq` sets
    every symbolic second dimension (the sequence of token inputs and their masks), by its name.
    `weights=False` keeps only small initializers' values (shapes, axes, indices): enough to import
    and simulate, at a fraction of the memory for a large model. `input_values` and `feeds`: as from_model's."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such ONNX file")
    if path.stat().st_size == 0:
        raise ModelError(f"{path}: the file is empty, not an ONNX model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as error:  # onnx raises DecodeError, ValueError... for a damaged file
        raise ModelError(f"{path}: not a readable ONNX model ({type(error).__name__}: {error})") from None
    return from_model(model, source=str(path), base_dir=path.parent, input_shapes=input_shapes, batch=batch,
                      weights=weights, seq=seq, input_values=input_values, feeds=feeds)


def from_model(model: onnx.ModelProto, source: str = "<onnx model>", base_dir: Path | None = None,
               input_shapes: Shapes | None = None, batch: int | None = None, weights: bool = True,
               input_values: dict[str, np.ndarray] | None = None, seq: int | None = None,
               feeds: dict[str, np.ndarray] | None = None) -> Graph:
    """`input_values` (input name -> array) binds graph inputs whose values must be known at import: a shape, axes
    or indices that the model takes as an input rather than an initializer (--bind). They import as weights.
    `feeds` (a run's inputs) bind those of them the model needs at import (compiler.bind.static_inputs)."""
    if not model.HasField("graph") or not model.graph.node:
        # protobuf parses many damaged files (text, truncated at a field boundary) into an empty model
        raise ModelError(f"{source}: not an ONNX model, or one with no graph or no nodes (damaged file?)")
    refuse_out_of_scope(model.graph, source)
    model, opset = _opset(model, source)
    g = model.graph
    values = weights
    arrays: dict[str, np.ndarray | None] = {}
    tensors: dict[str, Tensor] = {}
    static = static_inputs(g) if feeds else set()     # graph inputs given values become weights (compiler.bind)
    given = {**{k: v for k, v in (feeds or {}).items() if k in static}, **(input_values or {})}
    for name, (array, tensor) in bound(g, given, source).items():
        arrays[name], tensors[name] = array, tensor
    for init in g.initializer:
        where = f"{source}: initializer {init.name!r}"
        dtype = DType.from_onnx(init.data_type, where)
        _check_inline_data(init, dtype, where)
        small = math.prod(init.dims) <= SHAPE_ONLY_KEEP_ELEMENTS
        value = _initializer_value(init, base_dir, where, read=values or small)
        if dtype == DType.int8 and init.doc_string == TERNARY_MARK:
            dtype = DType.ternary
        arrays[init.name] = value
        tensors[init.name] = Tensor(init.name, tuple(int(d) for d in init.dims), dtype)
    inputs = [info.name for info in g.input if info.name not in arrays]
    # an initializer listed as an input too (IR version < 4 exports) is a weight, not an input
    overrides, named = _split_shapes(g.input, inputs, input_shapes or {}, source)
    if batch is not None:
        overrides = {**_batched(g.input, inputs, batch, named), **overrides}
    if seq is not None:
        named = {**_sequence(g.input, inputs, seq, source), **named}
    for info in g.input:
        if info.name not in arrays:
            tensors[info.name] = _value_info(info, source, overrides.get(info.name), named)
    def graph(needed: set[str]) -> Graph:
        nodes = [_node(n, i, source) for i, n in enumerate(g.node)]
        for node in nodes:
            if needed.intersection(node.outputs):
                node.resolved[VALUE_NEEDED] = True
        return Graph(name=g.name or Path(source).stem, inputs=inputs, outputs=[o.name for o in g.output],
                     import_body=functools.partial(from_subgraph, base_dir=base_dir, read=values),
                     nodes=nodes, tensors=dict(tensors), weights=dict(arrays), opset=opset, source=source)

    try:
        return finalize(graph(set()))
    except UnknownValueError:
        pass
    needed = needed_values(g)
    for init in g.initializer:   # without weights (`run`), read the ones import needs, as `eval` holds them
        if init.name in needed and arrays[init.name] is None and math.prod(init.dims) <= FOLD_READ_LIMIT_ELEMENTS:
            arrays[init.name] = _initializer_value(init, base_dir, f"{source}: initializer {init.name!r}")
    try:   # a value import needs computed from a weight (a Gather from a table): fold what it needs, weights too
        return finalize(graph(needed))
    except UnknownValueError as error:
        raise unbound(error, g, inputs) from None


def _symbolic(dim: onnx.TensorShapeProto.Dimension) -> str | None:
    """The name of a symbolic dimension ('' when it has none), None for a fixed one."""
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return None
    return dim.dim_param if dim.HasField("dim_param") else ""


def _split_shapes(infos: Iterable[onnx.ValueInfoProto], inputs: list[str], given: Shapes, source: str
                  ) -> tuple[Shapes, dict[str, int]]:
    """`given` (--shape) split into whole input shapes and sizes of named symbolic dimensions; an input's whole
    shape also sizes the names of its symbolic dimensions (x=2,5,4 on x[batch, sequence, 4]: batch=2, sequence=5)
    for the other inputs that share them."""
    declared = {info.name: info.type.tensor_type.shape.dim for info in infos if info.name in inputs}
    params = {p for dims in declared.values() for dim in dims if (p := _symbolic(dim))}
    shapes, named, implied = Shapes(), dict[str, int](), dict[str, int]()
    for name, shape in given.items():
        if name in inputs:
            shapes[name] = tuple(shape)
            implied.update((dim.dim_param, int(size)) for dim, size in zip(declared[name], shape)
                           if _symbolic(dim) and len(declared[name]) == len(shape))
        elif name in params:
            if len(tuple(shape)) != 1 or int(tuple(shape)[0]) <= 0:
                raise ModelError(f"{source}: --shape {name}={','.join(map(str, shape))}: {name!r} is a symbolic "
                                 f"dimension; give it one positive size, e.g. --shape {name}=128")
            named[name] = int(tuple(shape)[0])
        else:
            raise ModelError(f"{source}: --shape names {name!r}: not a graph input (inputs: "
                             f"{', '.join(inputs)}), nor a symbolic dimension (" +
                             (", ".join(sorted(params)) or "the model has none") + ")")
    return shapes, {**implied, **named}


def _batched(infos: Iterable[onnx.ValueInfoProto], inputs: list[str], batch: int, named: dict[str, int]) -> Shapes:
    """Shapes with the first dimension set to `batch`; other dimensions as declared or bound by name in
    `named`, a symbolic one left for _value_info to bind or refuse (-1 here)."""
    shapes: Shapes = {}
    for info in infos:
        dims = info.type.tensor_type.shape.dim
        if info.name not in inputs or not dims:
            continue
        rest = [named.get(s, -1) if (s := _symbolic(dim)) is not None else dim.dim_value for dim in dims[1:]]
        shapes[info.name] = (batch, *rest)
    return shapes


def _sequence(infos: Iterable[onnx.ValueInfoProto], inputs: list[str], seq: int, source: str) -> dict[str, int]:
    """--seq as sizes of named dimensions: the names of the symbolic second dimensions of inputs."""
    if seq < 1:
        raise ModelError(f"{source}: --seq {seq}: must be a positive integer")
    named = {}
    for info in infos:
        dims = info.type.tensor_type.shape.dim
        if info.name in inputs and len(dims) >= 2 and _symbolic(dims[1]):
            named[dims[1].dim_param] = seq
    if not named:
        raise ModelError(f"{source}: --seq {seq}: no graph input has a named symbolic second dimension (a "
                         f"sequence); set shapes with --shape INPUT=D0,D1,...")
    return named


def _opset(model: onnx.ModelProto, source: str) -> tuple[onnx.ModelProto, int]:
    """The model, converted when its opset is older than OLDEST_OPSET, and its default-domain opset."""
    versions = {imp.domain: imp.version for imp in model.opset_import}
    version = versions.get("", versions.get("ai.onnx"))
    newest = SUPPORTED_OPSETS.stop - 1
    if version is None:
        if any(node.domain in ("", "ai.onnx") for node in model.graph.node):
            raise ModelError(f"{source}: the model imports no default ONNX opset")
        return model, newest   # every node is in another domain: the op lookup names what is missing
    if version > newest:
        raise ModelError(f"{source}: opset {version} is newer than the newest the installed onnx "
                         f"{onnx.__version__} defines ({newest}); upgrade onnx, or export the model at opset "
                         f"{newest} or older")
    if version < OLDEST_OPSET:
        return _converted(model, version, source), OLDEST_OPSET
    return model, version


def _converted(model: onnx.ModelProto, version: int, source: str) -> onnx.ModelProto:
    """An opset older than OLDEST_OPSET converted by onnx's own converter (adapters per op, maintained by onnx)."""
    try:
        return version_converter.convert_version(model, OLDEST_OPSET)
    except Exception as error:  # the converter raises RuntimeError, ConvertError... for an op it has no adapter for
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(f"{source}: opset {version} is older than {OLDEST_OPSET}, and onnx.version_converter "
                         f"could not convert it ({reason}); re-export the model at opset {OLDEST_OPSET} to "
                         f"{SUPPORTED_OPSETS.stop - 1}") from None


# Left out by design, each with the reason a refusal gives (docs/onnx.md lists them).
STRINGS = ("text processing is out of scope by design: accelsim models tensor arithmetic on accelerators, and "
           "string handling runs on the host")
SEQUENCES = ("sequences and optionals are out of scope by design: accelsim's Graph holds tensors of static shape, "
             "not lists of tensors whose length is known only at run time")
OUT_OF_SCOPE = {
    **dict.fromkeys(("StringConcat", "StringNormalizer", "StringSplit", "RegexFullMatch", "TfIdfVectorizer"),
                    STRINGS),
    **dict.fromkeys(("SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
                     "SequenceLength", "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional",
                     "OptionalGetElement", "OptionalHasElement"), SEQUENCES),
    "ImageDecoder": ("image decoding is out of scope by design: turning JPEG or PNG bytes into pixels is input "
                     "preparation on the host; feed the decoded tensor instead"),
    "Gradient": ("ONNX's training-only Gradient op is out of scope by design: accelsim builds a training step's "
                 "backward pass itself (accelsim train, accelsim eval --train; docs/training.md)"),
}


def refuse_out_of_scope(g: onnx.GraphProto, source: str) -> None:
    """OutOfScopeError for the first op or graph input/output accelsim leaves out by design, bodies included; a
    ModelError for more nodes than accelsim simulates, before they are read."""
    check_node_count(len(g.node), source)
    for kind, infos in (("input", g.input), ("output", g.output)):
        for info in infos:
            value = info.type.WhichOneof("value")
            if value in ("sequence_type", "optional_type", "map_type"):
                what = {"sequence_type": "a sequence", "optional_type": "an optional", "map_type": "a map"}[value]
                raise OutOfScopeError(f"{source}: graph {kind} {info.name!r} is {what}: {SEQUENCES}")
            if value == "tensor_type" and info.type.tensor_type.elem_type == onnx.TensorProto.STRING:
                raise OutOfScopeError(f"{source}: graph {kind} {info.name!r} holds strings: {STRINGS}")
    for index, node in enumerate(g.node):
        if node.op_type in OUT_OF_SCOPE:
            raise OutOfScopeError(f"{source}: node {node.name or f'#{index}'!r} ({node.op_type}): "
                                  f"{OUT_OF_SCOPE[node.op_type]}")
        for attr in node.attribute:
            for body in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs):
                refuse_out_of_scope(body, source)


def _initializer_value(init: onnx.TensorProto, base_dir: Path | None, where: str, read: bool = True
                       ) -> np.ndarray | None:
    """The initializer's values in the numpy type the Graph holds them in (bf16/fp8 as float32, int4 as
    int8), or None when its external data file is absent or `read` is False. External data is checked (path and
    declared extent) either way, and plain types are memory-mapped read-only, never read into memory."""
    if init.data_location == onnx.TensorProto.EXTERNAL:
        info = {e.key: e.value for e in init.external_data}
        location = _external_file(info, base_dir, where)
        if location is None:
            return None  # shapes suffice to simulate; `eval` reports the missing weights
        offset, size = _external_extent(init, info, location, where)
        return _read_external(init, location, offset, size, where) if read else None
    if not read:
        return None
    try:
        value = numpy_helper.to_array(init)
    except Exception as error:
        raise ModelError(f"{where}: cannot decode ({error})") from None
    return held(value)


_TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data")


def _check_inline_data(init: onnx.TensorProto, dtype: DType, where: str) -> None:
    """An initializer stored in the model holds as much data as its dims say, checked without decoding it: `run`
    reads no weights, so a w of dims [2^36, 4] with 16 bytes of raw_data simulated as a 1 TiB tensor that `eval`
    could not decode. raw_data holds dtype.nbytes(elements) bytes; a typed field (float_data, int32_data...)
    one entry per element, or per byte for the types packed below a byte (int4: two to an entry)."""
    if init.data_location == onnx.TensorProto.EXTERNAL:
        return                                    # _external_extent checks it against its file
    if any(d < 0 for d in init.dims):
        raise ModelError(f"{where}: shape {list(init.dims)} has a negative dimension")
    count = math.prod(int(d) for d in init.dims)
    if init.HasField("raw_data"):
        stored, need, unit = len(init.raw_data), dtype.nbytes(count), "bytes of raw_data"
    else:
        fields = [name for name in _TYPED_FIELDS if len(getattr(init, name))] or ["data"]
        stored = sum(len(getattr(init, name, ())) for name in fields)
        need = dtype.nbytes(count) if dtype.bits < 8 else count
        unit = f"entries of {' and '.join(fields)}"
    if stored != need:
        raise ModelError(f"{where}: shape {list(init.dims)} of {dtype.value} needs {need:,} {unit}, but it holds "
                         f"{stored:,}")


def _external_file(info: dict[str, str], base_dir: Path | None, where: str) -> Path | None:
    """The external data file, resolved (links followed) and inside the model's folder, or None when absent."""
    text = info.get("location", "")
    relative = Path(text)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts or "\0" in text:
        raise ModelError(f"{where}: external data location {text!r} must be a file beside the model")
    try:   # links followed: a link beside the model may point anywhere
        location = referenced(text, base_dir or Path("."))
    except UserError as error:
        raise ModelError(f"{where}: external data {error}, the model's folder; external data must be a file in "
                         f"that folder") from None
    if not location.exists():
        return None
    if not location.is_file():
        raise ModelError(f"{where}: external data {text!r} is not a regular file ({location})")
    return location


def _external_extent(init: onnx.TensorProto, info: dict[str, str], location: Path, where: str) -> tuple[int, int]:
    """(offset, bytes) of the tensor in its file, checked against its shape and the file's real size before a
    byte is allocated or mapped: a 100-byte model may declare gigabytes."""
    declared: dict[str, int | None] = {}
    for key in ("offset", "length"):
        try:
            declared[key] = int(info[key]) if key in info else None
        except ValueError:
            declared[key] = -1
        if (n := declared[key]) is not None and n < 0:
            raise ModelError(f"{where}: external data {key} {info[key]!r} in {location.name} is not a "
                             f"byte count (a whole number, 0 or more)")
    if any(d < 0 for d in init.dims):
        raise ModelError(f"{where}: shape {list(init.dims)} has a negative dimension")
    count = math.prod(int(d) for d in init.dims)
    size = DType.from_onnx(init.data_type, where).nbytes(count)   # as ONNX stores it: int4 two to a byte
    if declared["length"] is not None and declared["length"] != size:
        raise ModelError(f"{where}: external data length {declared['length']} bytes in {location.name}, but "
                         f"its shape {list(init.dims)} needs {size}")
    offset = declared["offset"] or 0
    file_bytes = location.stat().st_size
    available = max(0, file_bytes - offset)
    if size > available:
        raise ModelError(f"{where}: external data file {location} is truncated ({available} of {size} bytes "
                         f"at offset {offset}; the file holds {file_bytes})")
    return offset, size


def held(value: np.ndarray) -> np.ndarray:
    """An ml_dtypes array (bf16, fp8, int4...: no numpy arithmetic on it) in the type the reference holds it in."""
    if value.dtype.kind == "V":
        return value.astype(DType.from_numpy(value.dtype).numpy)
    return value


def _plain_numpy(data_type: int) -> np.dtype | None:
    """The little-endian numpy type whose bytes ONNX stores as is (not packed int4, not strings)."""
    for dtype in (DType.fp64, DType.fp32, DType.fp16, DType.int64, DType.int32, DType.int16, DType.int8,
                  DType.uint64, DType.uint32, DType.uint16, DType.uint8, DType.bool):
        if dtype.onnx == data_type:
            return dtype.numpy.newbyteorder("<")
    return None


def _read_external(init: onnx.TensorProto, location: Path, offset: int, size: int, where: str) -> np.ndarray:
    """The tensor memory-mapped read-only from its checked extent: pages are read only when used, and a
    many-gigabyte weight costs no memory until `eval` touches it. Narrow types are widened (a copy)."""
    shape = tuple(int(d) for d in init.dims)
    plain = _plain_numpy(init.data_type)
    dtype = DType.from_onnx(init.data_type, where)
    if size == 0:
        return np.zeros(shape, plain if plain is not None else dtype.numpy)
    if plain is not None:
        stored = plain
    elif dtype.bits % 8 == 0:                  # bf16, fp8: whole bytes, which ml_dtypes reads
        stored = np.dtype(dtype.narrow)
    else:                                      # int4, int2, fp4: packed several to a byte
        stored = np.dtype(np.uint8)
    try:
        mapped = np.memmap(location, dtype=stored, mode="r", offset=offset, shape=(size // stored.itemsize,))
    except (OSError, ValueError) as error:
        raise ModelError(f"{where}: cannot map external data {location} ({error})") from None
    if plain is not None:
        return mapped.astype(plain.newbyteorder("="), copy=False).reshape(shape)
    if dtype.bits % 8 == 0:
        return held(mapped.reshape(shape))
    packed = onnx.TensorProto()                # onnx unpacks the bytes: its packing rule stays in one place
    packed.CopyFrom(init)
    packed.ClearField("external_data")
    packed.data_location = onnx.TensorProto.DEFAULT
    packed.raw_data = mapped.tobytes()
    try:
        return held(numpy_helper.to_array(packed))
    except Exception as error:
        raise ModelError(f"{where}: cannot decode ({error})") from None


def _value_info(info: onnx.ValueInfoProto, source: str, override: tuple[int, ...] | None = None,
                named: dict[str, int] | None = None) -> Tensor:
    """The input's Tensor: its shape from `override` (-1 where a dimension is still open), else as declared,
    each symbolic dimension bound by its name in `named`; one left unbound is an error naming the CLI flag."""
    where = f"{source}: graph input {info.name!r}"
    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        raise ModelError(f"{where}: only tensor inputs are supported, not {kind}")
    tensor_type = info.type.tensor_type
    dtype = DType.from_onnx(tensor_type.elem_type, where)
    if dtype == DType.int8 and info.doc_string == TERNARY_MARK:
        dtype = DType.ternary
    if not tensor_type.HasField("shape") and override is None:
        raise ModelError(f"{where}: the model gives no shape (not even a rank); set it with "
                         f"--shape {info.name}=D0,D1,...")
    dims = tensor_type.shape.dim
    if override is not None:
        given = tuple(int(d) for d in override)
        if tensor_type.HasField("shape") and len(given) != len(dims):
            raise ModelError(f"{where}: --shape gives rank {len(given)} ({list(given)}), the model "
                             f"rank {len(dims)}")
        if any(d <= 0 and d != -1 for d in given) or (not dims and -1 in given):
            raise ModelError(f"{where}: --shape gives {list(given)}; every dimension must be positive")
        if -1 not in given:
            return Tensor(info.name, given, dtype)
    else:
        given = (-1,) * len(dims)
    shape = []
    for i, (dim, size) in enumerate(zip(dims, given)):
        param = _symbolic(dim)
        if size != -1:
            shape.append(size)
        elif param is None:
            shape.append(dim.dim_value)      # 0: an empty tensor, which ONNX allows
        elif named is not None and param in named:
            shape.append(named[param])
        else:
            flags = ["--batch N"] * (i == 0) + ["--seq N"] * (i == 1 and bool(param))   # --seq binds by name
            flags += [f"--shape {param}=N"] * bool(param)
            flags.append(f"--shape {info.name}={','.join(f'D{k}' for k in range(len(dims)))}")
            what = f"symbolic ({param!r})" if param else "unsized"
            raise ModelError(f"{where}: dimension {i} is {what}; set it with {', '.join(flags[:-1])}"
                             f"{' or ' if len(flags) > 1 else ''}{flags[-1]}")
    return Tensor(info.name, tuple(shape), dtype)


def _node(proto: onnx.NodeProto, index: int, source: str) -> Node:
    attrs = {}
    for attr in proto.attribute:
        try:
            attrs[attr.name] = onnx.helper.get_attribute_value(attr)
        except Exception as error:
            raise ModelError(f"{source}: node {proto.name or index!r} ({proto.op_type}): attribute "
                             f"{attr.name!r} cannot be read ({error})") from None
        if isinstance(attrs[attr.name], bytes):
            attrs[attr.name] = attrs[attr.name].decode()
        if attr.type == onnx.AttributeProto.TENSOR:     # a Constant's value: as much data as its dims say
            where = f"{source}: node {proto.name or index!r} ({proto.op_type}): attribute {attr.name!r}"
            if attr.t.data_location == onnx.TensorProto.EXTERNAL:   # onnx would read it from the working folder
                raise ModelError(f"{where}: its data is in an external file; accelsim reads external data for "
                                 f"initializers only (make the value an initializer, or store it in the model)")
            _check_inline_data(attr.t, DType.from_onnx(attr.t.data_type, where), where)
    return Node(proto.name, proto.op_type, tuple(proto.input), tuple(proto.output), attrs, proto.domain)


def from_subgraph(body: onnx.GraphProto, outer: Graph, input_tensors: list[Tensor], where: str,
                  base_dir: Path | None = None, read: bool = True) -> Graph:
    """Import a control-flow body (Scan's `body`) as a finalized Graph whose inputs take `input_tensors`'
    shapes and dtypes. Outer-scope names it reads must be the outer graph's weights or constants.
    `base_dir` and `read` are the model's: external data beside the model file, weights read or not."""
    source = f"{outer.source}: {where} body"
    if len(body.input) != len(input_tensors):
        raise ModelError(f"{source}: the body has {len(body.input)} inputs, the op feeds it "
                         f"{len(input_tensors)}")
    weights: dict[str, np.ndarray | None] = {}
    tensors: dict[str, Tensor] = {}
    for init in body.initializer:
        dtype = DType.from_onnx(init.data_type, f"{source}: initializer {init.name!r}")
        _check_inline_data(init, dtype, where)
        small = math.prod(init.dims) <= SHAPE_ONLY_KEEP_ELEMENTS
        weights[init.name] = _initializer_value(init, base_dir, f"{source}: initializer {init.name!r}",
                                                read=read or small)
        if dtype == DType.int8 and init.doc_string == TERNARY_MARK:
            dtype = DType.ternary
        tensors[init.name] = Tensor(init.name, tuple(int(d) for d in init.dims), dtype)
    for info, given in zip(body.input, input_tensors):
        declared = info.type.tensor_type.elem_type
        if declared and DType.from_onnx(declared, source) != given.dtype and given.dtype != DType.ternary:
            raise ModelError(f"{source}: input {info.name!r} is declared "
                             f"{DType.from_onnx(declared, source).value}, the op feeds {given.dtype.value}")
        tensors[info.name] = Tensor(info.name, given.shape, given.dtype)
    inputs = [info.name for info in body.input]
    nodes = [_node(n, i, source) for i, n in enumerate(body.node)]
    produced = {name for n in nodes for name in n.outputs if name}
    for name in sorted(outer_names(body) - produced - set(inputs) - set(weights)):
        # Outer weights and folded constants become weights of the body (read at every step).
        if name in outer.weights or name in outer.constants:
            weights[name] = outer.value(name)
        elif name in outer.tensors:
            raise ModelError(f"{source}: reads {name!r}, which the enclosing graph computes at run time; "
                             f"a body may read only the enclosing graph's initializers and constants")
        else:
            continue  # finalize reports the dangling name
        tensors[name] = outer.tensor(name)
    graph = Graph(name=body.name or where, inputs=inputs, outputs=[o.name for o in body.output], nodes=nodes,
                  import_body=functools.partial(from_subgraph, base_dir=base_dir, read=read),
                  tensors=tensors, weights=weights, opset=outer.opset, source=source)
    return finalize(graph)
