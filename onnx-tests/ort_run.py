#!/usr/bin/env python3
"""Stand-in for `nrt run` / `nrt bench` that executes the model with onnxruntime.

Same command line as the nrt contract (issue 15), so the harness can be validated before the
ONNX importer exists:
    ort_run.py run MODEL.onnx [--input NAME=FILE.npy ...] [-o DIR] [--dtype fp32|bf16]
Inputs not given are seeded random data (said so on stderr). Every graph output is written as
DIR/<name>.npy with the same file-name rule as nrt. --dtype bf16 is emulated (onnxruntime's CPU
provider has no bf16 compute): weights, inputs and every node's float outputs are rounded to bf16,
each op computing in fp32. It reports `host build: X ms` (session creation) and
`host simulate: X ms` (one run) on stderr, the form bench.py parses from nrt as well.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import sanitize  # noqa: E402

_ONNX_TO_NP = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint64)": np.uint64,
    "tensor(uint32)": np.uint32,
    "tensor(uint16)": np.uint16,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def bf16_emulation(path: str):
    """The model with every float tensor rounded to bf16: Cast(bf16) -> Cast(float) pairs after
    every float graph input and node output, float initializers rounded."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    floats = {
        v.name
        for v in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)
        if v.type.tensor_type.elem_type == TensorProto.FLOAT
    }
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == TensorProto.FLOAT:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(round_bf16(numpy_helper.to_array(t)), t.name))
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 13:  # Cast to bfloat16 exists from opset 13: weights and inputs only
        return m, False
    inits = {t.name for t in m.graph.initializer}
    outputs = {o.name for o in m.graph.output}
    rounded = {}
    nodes = []

    def rnd(name):
        a_ = helper.make_node("Cast", [name], [name + "/bf16"], to=TensorProto.BFLOAT16)
        b_ = helper.make_node("Cast", [name + "/bf16"], [name + "/rounded"], to=TensorProto.FLOAT)
        rounded[name] = name + "/rounded"
        return [a_, b_]

    for v in m.graph.input:
        if v.name in floats and v.name not in inits:
            nodes += rnd(v.name)
    for node in m.graph.node:
        for k, name in enumerate(node.input):
            if name in rounded:
                node.input[k] = rounded[name]
        nodes.append(node)
        for name in node.output:
            if name in floats and name not in outputs:
                nodes += rnd(name)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m, True


def round_bf16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even), kept as float32."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return bits.view(np.float32)


def main() -> int:
    p = argparse.ArgumentParser(prog="ort_run.py")
    p.add_argument("verb", choices=("run", "bench"))
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("-o", "--output-dir")
    p.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import onnxruntime as ort

    given = {}
    for spec in a.input:
        name, sep, path = spec.partition("=")
        if not sep:
            print(f"error: --input {spec!r}: expected NAME=FILE.npy", file=sys.stderr)
            return 2
        given[name] = np.load(path, allow_pickle=False)
    model_arg = a.model
    if a.dtype == "bf16":
        emulated, all_nodes = bf16_emulation(a.model)
        model_arg = emulated.SerializeToString()
        what = "weights, inputs and every node's float outputs" if all_nodes else "weights and inputs (opset < 13)"
        print(f"note: bf16 emulated: {what} rounded to bf16, fp32 compute inside each op", file=sys.stderr)
        given = {k: round_bf16(v) if v.dtype == np.float32 else v for k, v in given.items()}

    t0 = time.perf_counter()
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model_arg, so, providers=["CPUExecutionProvider"])
    except Exception as e:
        print(f"error: onnxruntime cannot load {a.model}: {e}", file=sys.stderr)
        return 1
    t1 = time.perf_counter()
    feeds = {}
    rng = np.random.default_rng(0)
    for inp in sess.get_inputs():
        if inp.name in given:
            feeds[inp.name] = given.pop(inp.name)
            continue
        shape = [d if isinstance(d, int) else 1 for d in inp.shape]
        dt = _ONNX_TO_NP.get(inp.type)
        if dt is None:
            print(f"error: input {inp.name!r} of type {inp.type} not given", file=sys.stderr)
            return 2
        feeds[inp.name] = rng.standard_normal(shape).astype(dt)
        print(f"note: input {inp.name!r} not given: seeded random data {shape}", file=sys.stderr)
    if given:
        print(f"error: no graph input named {sorted(given)}", file=sys.stderr)
        return 2
    t2 = time.perf_counter()
    try:
        outs = sess.run(None, feeds)
    except Exception as e:
        print(f"error: onnxruntime failed: {e}", file=sys.stderr)
        return 1
    t3 = time.perf_counter()
    print(f"host build: {(t1 - t0) * 1e3:.3f} ms", file=sys.stderr)
    print(f"host simulate: {(t3 - t2) * 1e3:.3f} ms", file=sys.stderr)
    if a.output_dir:
        os.makedirs(a.output_dir, exist_ok=True)
        for meta, val in zip(sess.get_outputs(), outs):
            np.save(os.path.join(a.output_dir, sanitize(meta.name) + ".npy"), np.asarray(val), allow_pickle=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
