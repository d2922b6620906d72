#!/usr/bin/env python3
"""Checks of the harness itself, no nrt needed (a few seconds): the output file-name rule, and
that every way a runner can go wrong is one clear failure of the case, not a crash: a missing
binary, a non-zero exit, a timeout, a missing output file, wrong values, shape or dtype. Fake
runners are small shell scripts written into a temporary directory. Exit status 1 on any
mismatch."""

from __future__ import annotations

import os
import stat
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import node_tests  # noqa: E402
from harness import Runner, sanitize  # noqa: E402

FAILS = []


def expect(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def fake(dirname: str, name: str, body: str) -> str:
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def writer(dirname: str, name: str, value: str) -> str:
    """A fake nrt that writes DIR/y.npy = value (a Python expression over np)."""
    script = os.path.join(dirname, name + ".py")
    with open(script, "w") as f:
        f.write(
            "import sys, numpy as np\n"
            "out = sys.argv[sys.argv.index('-o') + 1]\n"
            f"np.save(out + '/gpu_0_softmax_1.npy', {value})\n"
        )
    return fake(dirname, name, f'exec "{sys.executable}" "{script}" "$@"')


def main() -> int:
    expect(sanitize("gpu_0/softmax_1") == "gpu_0_softmax_1", "sanitize('gpu_0/softmax_1')")
    expect(sanitize("a.b-c_D9:é x") == "a.b-c_D9___x", "sanitize keeps letters, digits, . _ -")

    with tempfile.TemporaryDirectory(prefix="onnx-selftest.") as tmp:
        # A one-node model whose output name needs sanitizing.
        node = helper.make_node("Relu", ["x"], ["gpu_0/softmax_1"])
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("gpu_0/softmax_1", TensorProto.FLOAT, [2, 3])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 14)])
        model.ir_version = 8
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
        ref = np.maximum(x, 0)
        names = ["gpu_0/softmax_1"]

        def run(nrt: str, timeout: float = 20.0, kind: str = "nrt"):
            work = tempfile.mkdtemp(dir=tmp)
            res = Runner(kind, nrt, "fp32", timeout).run(path, {"x": x}, names, work)
            msg = "" if not res.ok else node_tests.compare([ref], res.outputs, names, 1e-3, 1e-7)
            return res, msg

        res, msg = run("", kind="ort")
        expect(res.ok and msg == "", "the onnxruntime stand-in passes (writes gpu_0_softmax_1.npy)")
        res, _ = run(os.path.join(tmp, "absent"))
        expect(not res.ok and "cannot start" in res.error, "missing binary: 'cannot start'")
        res, _ = run(fake(tmp, "boom", "echo 'error: node x: unsupported' >&2; exit 3"))
        expect(not res.ok and "exit status 3" in res.error and "unsupported" in res.error, "exit 3: status and stderr tail")
        res, _ = run(fake(tmp, "slow", "sleep 30; exit 0"), timeout=1)
        expect(not res.ok and "timed out" in res.error and res.wall_s < 10, "timeout: 'timed out', its children killed too")
        res, _ = run(fake(tmp, "silent", "exit 0"))
        expect(not res.ok and "wrote no file" in res.error, "no output file: 'wrote no file'")
        res, msg = run(writer(tmp, "right", "np.maximum(np.array([[-1,2,-3],[4,-5,6]], np.float32), 0)"))
        expect(res.ok and msg == "", "right values pass")
        res, msg = run(writer(tmp, "wrong", "np.ones((2, 3), np.float32)"))
        expect(res.ok and "Mismatched elements" in msg, "wrong values: assert_allclose mismatch")
        res, msg = run(writer(tmp, "shape", "np.zeros((3, 2), np.float32)"))
        expect(res.ok and "incorrect shape" in msg, "wrong shape: 'incorrect shape'")
        res, msg = run(writer(tmp, "dtype", "np.maximum(np.array([[-1,2,-3],[4,-5,6]]), 0).astype(np.float64)"))
        expect(res.ok and msg != "", "wrong dtype (float64 for float): a mismatch")
        res, _ = run(fake(tmp, "garbage", 'while [ $# -gt 0 ]; do [ "$1" = -o ] && o="$2"; shift; done; echo junk > "$o/gpu_0_softmax_1.npy"'))
        expect(not res.ok and "cannot read" in res.error, "unreadable .npy: 'cannot read'")
    if FAILS:
        print(f"{len(FAILS)} self-test check(s) failed")
        return 1
    print("harness self-test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
