"""The ONNX backend node tests on disk, and which of them a runner can take.

Older onnx wheels ship the cases as files (onnx/backend/test/data/node/test_*/model.onnx plus
test_data_set_*/input_*.pb and output_*.pb). Newer ones (1.19 and later) ship only the Python
generators and build the cases in memory (onnx.backend.test.loader.load_node_model_tests). Either
way this module returns a directory of the historical layout: the shipped one when present,
otherwise one written once into a cache directory by the package's own generators (with the global
NumPy RNG seeded, so the random inputs are the same on every run), laid out as the package's
former `backend-test-tools generate-data` wrote it, plus a data.json carrying each case's rtol and
atol.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

# Element types a .npy file holds natively (the runner contract passes tensors as .npy).
NPY_TYPES = {
    TensorProto.FLOAT,
    TensorProto.DOUBLE,
    TensorProto.FLOAT16,
    TensorProto.INT8,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.UINT8,
    TensorProto.UINT16,
    TensorProto.UINT32,
    TensorProto.UINT64,
    TensorProto.BOOL,
}

# The tolerances onnx.backend.test sets for every node case (case/node/__init__.py expect());
# a case's data.json overrides them, as onnx.backend.test.loader does.
DEFAULT_RTOL = 1e-3
DEFAULT_ATOL = 1e-7


def shipped_node_dir() -> str | None:
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    if os.path.isdir(path) and any(n.startswith("test_") for n in os.listdir(path)):
        return path
    return None


def _write_value(path: str, value, vi: onnx.ValueInfoProto) -> None:
    t = vi.type
    if t.HasField("sequence_type"):
        proto = numpy_helper.from_list(value, vi.name)
    elif t.HasField("optional_type"):
        proto = numpy_helper.from_optional(value, vi.name)
    elif t.HasField("map_type"):
        proto = numpy_helper.from_dict(value, vi.name)
    elif isinstance(value, TensorProto):
        proto = value
    else:
        proto = numpy_helper.from_array(value, vi.name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def generate(cache_root: str, log=print) -> str:
    """Writes the node cases into cache_root/onnx-<version>/node once; returns that directory."""
    dest = os.path.join(cache_root, f"onnx-{onnx.__version__}", "node")
    stamp = os.path.join(dest, ".complete")
    if os.path.isfile(stamp):
        return dest
    log(f"generating the onnx {onnx.__version__} backend node cases into {dest} (once)")
    tmp = dest + f".tmp{os.getpid()}"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    np.random.seed(0)  # the generators draw from the global RNG
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_node_model_tests

        cases = load_node_model_tests()
    for case in cases:
        d = os.path.join(tmp, case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        with open(os.path.join(d, "data.json"), "w") as f:
            json.dump({"rtol": case.rtol, "atol": case.atol}, f, sort_keys=True)
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds)
            for j, value in enumerate(inputs):
                _write_value(os.path.join(ds, f"input_{j}.pb"), value, graph.input[j])
            for j, value in enumerate(outputs):
                _write_value(os.path.join(ds, f"output_{j}.pb"), value, graph.output[j])
    with open(os.path.join(tmp, ".complete"), "w") as f:
        f.write(f"{len(cases)}\n")
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    os.rename(tmp, dest)
    return dest


@dataclass
class Case:
    name: str
    dir: str
    op: str  # the op the case tests (its node's op; for *_expanded, the op it expands)
    ops: list[str]  # every op in the graph, subgraphs included, domain-qualified if not ai.onnx
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    dtypes: list[str] = field(default_factory=list)
    skip: str = ""  # why it is not run, empty when it is selected

    def model_path(self) -> str:
        return os.path.join(self.dir, "model.onnx")


def _graph_ops(graph: onnx.GraphProto, acc: list[str]) -> None:
    for node in graph.node:
        dom = node.domain if node.domain not in ("", "ai.onnx") else ""
        acc.append(f"{dom}:{node.op_type}" if dom else node.op_type)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _graph_ops(attr.g, acc)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _graph_ops(g, acc)


def _io_problem(vis) -> tuple[str, list[str]]:
    dtypes = []
    for vi in vis:
        t = vi.type
        if not t.HasField("tensor_type"):
            kind = t.WhichOneof("value") or "untyped"
            return f"{vi.name!r} is a {kind.replace('_type', '')}, not a tensor", dtypes
        et = t.tensor_type.elem_type
        name = TensorProto.DataType.Name(et).lower()
        if name not in dtypes:
            dtypes.append(name)
        if et not in NPY_TYPES:
            return f"{vi.name!r} has element type {name}, which .npy cannot hold", dtypes
    return "", dtypes


def _base_name(name: str) -> str | None:
    i = name.find("_expanded")
    return name[:i] if i > 0 else None


def load_cases(node_dir: str, supported: set[str]) -> list[Case]:
    cases = []
    single_op = {}
    for name in sorted(os.listdir(node_dir)):
        d = os.path.join(node_dir, name)
        if not name.startswith("test_") or not os.path.isfile(os.path.join(d, "model.onnx")):
            continue
        model = onnx.load(os.path.join(d, "model.onnx"))
        ops: list[str] = []
        _graph_ops(model.graph, ops)
        case = Case(name=name, dir=d, op="", ops=sorted(set(ops)))
        if len(model.graph.node) == 1 and "_expanded" not in name:
            case.op = ops[0]
            single_op[name] = case.op
        meta = os.path.join(d, "data.json")
        if os.path.isfile(meta):
            with open(meta) as f:
                data = json.load(f)
            case.rtol = data.get("rtol", case.rtol)
            case.atol = data.get("atol", case.atol)
        unsupported = [o for o in case.ops if o not in supported]
        inits = {t.name for t in model.graph.initializer}
        problem, dtypes = _io_problem(
            [vi for vi in model.graph.input if vi.name not in inits] + list(model.graph.output)
        )
        case.dtypes = dtypes
        if unsupported:
            case.skip = "unsupported op(s): " + ", ".join(unsupported)
        elif problem:
            case.skip = problem
        elif not any(n.startswith("test_data_set_") for n in os.listdir(d)):
            case.skip = "no test_data_set"
        cases.append(case)
    for case in cases:
        if not case.op:
            base = _base_name(case.name)
            case.op = single_op.get(base, "") if base else ""
            if case.op and case.op not in supported:
                case.op += " (expanded)"
            if not case.op:
                case.op = "+".join(case.ops) or "(empty graph)"
    return cases


def read_data_set(case: Case, ds_dir: str):
    """(inputs by graph input name, reference outputs in graph order, output names)."""
    model = onnx.load(case.model_path())
    inits = {t.name for t in model.graph.initializer}
    in_vis = [vi for vi in model.graph.input if vi.name not in inits]
    inputs = {}
    j = 0
    while os.path.isfile(os.path.join(ds_dir, f"input_{j}.pb")):
        t = TensorProto()
        with open(os.path.join(ds_dir, f"input_{j}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        inputs[in_vis[j].name] = numpy_helper.to_array(t)
        j += 1
    refs = []
    j = 0
    while os.path.isfile(os.path.join(ds_dir, f"output_{j}.pb")):
        t = TensorProto()
        with open(os.path.join(ds_dir, f"output_{j}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        refs.append(numpy_helper.to_array(t))
        j += 1
    return inputs, refs, [vi.name for vi in model.graph.output]


# Operand positions that carry shapes, axes, pads, repeats or split sizes: values a compiler with
# static shapes needs at build time. Inputs consumed only there can be frozen into constants.
SHAPE_OPERANDS = {
    "Reshape": {1},
    "Expand": {1},
    "Tile": {1},
    "ConstantOfShape": {0},
    "Slice": {1, 2, 3, 4},
    "Split": {1},
    "Squeeze": {1},
    "Unsqueeze": {1},
    "ReduceMean": {1},
    "ReduceSum": {1},
    "ReduceMax": {1},
    "ReduceMin": {1},
    "ReduceProd": {1},
    "ReduceL1": {1},
    "ReduceL2": {1},
    "ReduceLogSum": {1},
    "ReduceLogSumExp": {1},
    "ReduceSumSquare": {1},
    "Pad": {1, 3},
    "CenterCropPad": {1},
}


# Operand positions that carry a layer's parameters (weights, biases, statistics, bounds): an
# exporter writes them as initializers, the node tests pass them as inputs.
PARAM_OPERANDS = {
    "Conv": {1, 2},
    "ConvTranspose": {1, 2},
    "Gemm": {1, 2},
    "BatchNormalization": {1, 2, 3, 4},
    "InstanceNormalization": {1, 2},
    "LayerNormalization": {1, 2},
    "PRelu": {1},
    "Clip": {1, 2},
}


def freeze_inputs(model: onnx.ModelProto, inputs: dict, params: bool = False) -> tuple[onnx.ModelProto, list[str]]:
    """The model with graph inputs turned into initializers holding the data set's values:
    integer inputs consumed only at SHAPE_OPERANDS positions, and with params also inputs
    consumed only at PARAM_OPERANDS positions. Returns the model and the frozen names."""
    uses: dict[str, list[tuple[str, int]]] = {}
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            uses.setdefault(name, []).append((node.op_type, k))
    frozen = []
    for vi in model.graph.input:
        et = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if vi.name not in inputs:
            continue
        u = uses.get(vi.name, [])
        shape_like = et in (TensorProto.INT64, TensorProto.INT32) and all(k in SHAPE_OPERANDS.get(op, ()) for op, k in u)
        param = params and all(k in PARAM_OPERANDS.get(op, ()) for op, k in u)
        if u and (shape_like or param):
            frozen.append(vi.name)
    if not frozen:
        return model, []
    m = onnx.ModelProto()
    m.CopyFrom(model)
    keep = [vi for vi in m.graph.input if vi.name not in frozen]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    for name in frozen:
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(inputs[name]), name))
    return m, frozen
