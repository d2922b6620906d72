#!/usr/bin/env python3
"""Runs the ONNX project's backend node tests for the supported ops through a runner.

Every case whose graph uses only ops listed in supported_ops.txt (and whose inputs and outputs
are tensors .npy can hold) is run: its inputs are written as .npy, the runner command
(`nrt run MODEL.onnx --input NAME=FILE.npy ... -o DIR`) is executed, and the outputs it wrote are
compared with the case's reference outputs by onnx.backend.test.runner.Runner.assert_similar_outputs
itself (same shape, same dtype, np.testing.assert_allclose with the case's rtol/atol: 1e-3/1e-7
for every node case, overridable by a case's data.json; rtol at least 2**-6 for bfloat16), i.e.
exactly the check the ONNX backend test runner makes. Every other case is listed as not run with
the reason.

Writes a markdown report (table: op, cases, passed, failed, known failing; then every failure
with its error). Exit status 1 when a case not listed in the known-failures file fails, 0
otherwise; 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import onnx  # noqa: E402
from onnx.backend.test.runner import Runner as OnnxRunner  # noqa: E402

import node_data  # noqa: E402
from harness import REPO, Runner, add_runner_args, tail  # noqa: E402


def read_list(path: str) -> list[str]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                rows.append(line)
    return rows


def read_known(path: str | None) -> dict[str, str]:
    """Known-failing cases: one per line, `test_name  reason...`; '#' starts a comment."""
    known = {}
    if not path:
        return known
    with open(path) as f:
        for line in f:
            if line.lstrip().startswith("#") or not line.strip():
                continue
            name, _, reason = line.strip().partition(" ")
            known[name] = reason.strip() or "(no reason given)"
    return known


def compare(refs, outs, names, rtol, atol) -> str:
    """'' when the runner's outputs match, else the assertion message."""
    try:
        OnnxRunner.assert_similar_outputs(refs, [outs[n] for n in names], rtol=rtol, atol=atol)
    except AssertionError as e:
        return str(e).strip()
    except Exception as e:  # e.g. dtype promotion errors in assert_allclose
        return f"{type(e).__name__}: {e}"
    return ""


def run_case(case, runner: Runner, work_root: str, keep: bool, freeze: str = "none") -> tuple[str, str, float]:
    """(status 'pass'|'fail', detail, seconds) for every data set of one case."""
    t0 = time.perf_counter()
    work = tempfile.mkdtemp(prefix=case.name + ".", dir=work_root)
    try:
        sets = sorted(n for n in os.listdir(case.dir) if n.startswith("test_data_set_"))
        for ds in sets:
            try:
                inputs, refs, names = node_data.read_data_set(case, os.path.join(case.dir, ds))
            except Exception as e:
                return "fail", f"{ds}: cannot read the case's data: {e}", time.perf_counter() - t0
            model_path = case.model_path()
            if freeze != "none":
                frozen_model, frozen = node_data.freeze_inputs(onnx.load(model_path), inputs, freeze == "params")
                if frozen:
                    model_path = os.path.join(work, "model.onnx")
                    onnx.save(frozen_model, model_path)
                    inputs = {k: v for k, v in inputs.items() if k not in frozen}
            res = runner.run(model_path, inputs, names, work)
            if not res.ok:
                cmd = " ".join(res.command)
                return "fail", f"{ds}: {res.error.strip()}\ncommand: {cmd}", time.perf_counter() - t0
            msg = compare(refs, res.outputs, names, case.rtol, case.atol)
            if msg:
                return (
                    "fail",
                    f"{ds}: outputs differ (rtol {case.rtol:g}, atol {case.atol:g}):\n{msg}",
                    time.perf_counter() - t0,
                )
        return "pass", "", time.perf_counter() - t0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def first_reason(detail: str) -> str:
    """One line for a failure: the runner's `error:` line if any, else the first line."""
    lines = [ln.strip() for ln in detail.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("error:"):
            return re.sub(r"^error: \S+\.onnx: ", "error: ", ln)
    return lines[0] if lines else "(no detail)"


def clip(text: str, limit: int = 2500) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more chars)"


def write_report(path, runner, node_dir, selected, skipped, results, known, elapsed, filtered, frozen="none"):
    by_op = defaultdict(list)
    for c in selected:
        by_op[c.op].append(c)
    lines = [
        "# ONNX backend node tests",
        "",
        f"- runner: {runner.describe()}",
        f"- onnx {onnx.__version__}; cases from `{os.path.relpath(node_dir, REPO) if node_dir.startswith(REPO) else node_dir}`",
        "- comparison: onnx.backend.test.runner.Runner.assert_similar_outputs with each case's "
        "rtol/atol (1e-3 / 1e-7 for every node case in this onnx version)",
        f"- selected {len(selected)} cases" + (" (filtered)" if filtered else "") + f", {elapsed:.0f} s",
        f"- --freeze {frozen}: inputs used only as "
        + ("shapes/axes/pads/repeats/split sizes" if frozen == "shapes" else "shapes/axes/... or layer parameters")
        + " made constants holding the case's values"
        if frozen != "none"
        else "- every input passed with --input as the case defines it",
        "",
        "| op | cases | passed | failed | known failing |",
        "|---|---:|---:|---:|---:|",
    ]
    tot = [0, 0, 0, 0]
    for op in sorted(by_op):
        cs = by_op[op]
        p = sum(1 for c in cs if results[c.name][0] == "pass")
        kf = sum(1 for c in cs if results[c.name][0] == "fail" and c.name in known)
        f = sum(1 for c in cs if results[c.name][0] == "fail") - kf
        lines.append(f"| {op} | {len(cs)} | {p} | {f} | {kf} |")
        for i, v in enumerate((len(cs), p, f, kf)):
            tot[i] += v
    lines.append(f"| **total** | **{tot[0]}** | **{tot[1]}** | **{tot[2]}** | **{tot[3]}** |")
    fails = [c for c in selected if results[c.name][0] == "fail" and c.name not in known]
    kfails = [c for c in selected if results[c.name][0] == "fail" and c.name in known]
    xpass = [c for c in selected if results[c.name][0] == "pass" and c.name in known]
    lines += ["", f"## Failures ({len(fails)})", ""]
    for c in fails:
        lines += [f"### {c.name} ({c.op}; {', '.join(c.dtypes)})", "", "```", clip(results[c.name][1]), "```", ""]
    if kfails:
        lines += [f"## Known failures ({len(kfails)})", ""]
        lines += [f"- `{c.name}` ({c.op}): {known[c.name]}" for c in kfails]
        lines.append("")
    if xpass:
        lines += [f"## Listed as known failing but passed ({len(xpass)}): remove from the list", ""]
        lines += [f"- `{c.name}`" for c in xpass]
        lines.append("")
    # Not run: cases of supported ops individually, unsupported ops one line each.
    sup_skips = [c for c in skipped if c.op in by_op or "unsupported op" not in c.skip]
    other = defaultdict(int)
    for c in skipped:
        if c not in sup_skips:
            other[c.op] += 1
    lines += [f"## Not run ({len(skipped)})", ""]
    if sup_skips:
        lines += ["Cases of supported ops, or not run for another reason than the op:", ""]
        lines += [f"- `{c.name}` ({c.op}): {c.skip}" for c in sup_skips]
        lines.append("")
    if other:
        lines += ["Cases of ops not in supported_ops.txt (op: cases):", ""]
        lines.append(", ".join(f"{op}: {n}" for op, n in sorted(other.items())))
        lines.append("")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return tot, fails, xpass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_runner_args(p)
    p.add_argument("--op", default="", help="comma-separated ops to run (default: all supported)")
    p.add_argument("--case", default="", help="regex on case names (search)")
    p.add_argument("-j", "--jobs", type=int, default=2)
    p.add_argument(
        "--known-failures",
        default=None,
        help="file of known-failing cases (`name reason`); default known_failures.txt "
        "(known_failures_ort.txt with --runner ort)",
    )
    p.add_argument(
        "--excluded",
        default=os.path.join(HERE, "excluded.txt"),
        help="cases no implementation can pass (listed as not run with the reason)",
    )
    p.add_argument("--supported", default=os.path.join(HERE, "supported_ops.txt"))
    p.add_argument(
        "--data-dir",
        default=os.path.join(REPO, "target", "onnx-node-data"),
        help="cache for the generated cases when the onnx wheel ships none",
    )
    p.add_argument("--report", default=os.path.join(REPO, "target", "onnx-tests", "node_tests.md"))
    p.add_argument(
        "--write-failures",
        metavar="FILE",
        help="also write every failing case as `name  first error line` (the known-failures format)",
    )
    p.add_argument("--list", action="store_true", help="print the selected cases per op and exit")
    p.add_argument("--keep", action="store_true", help="keep each case's .npy files")
    p.add_argument(
        "--freeze",
        choices=("none", "shapes", "params"),
        default="none",
        help="turn graph inputs into constants holding the case's values (for a compiler that "
        "needs them at build time): shapes = integer inputs used only as shapes, axes, pads, "
        "repeats or split sizes; params = those and inputs used only as weights, biases, "
        "normalization statistics or Clip bounds. Default none: every input as the case has it",
    )
    a = p.parse_args()

    supported = set(read_list(a.supported))
    if a.known_failures is None:
        name = "known_failures_ort.txt" if a.runner == "ort" else "known_failures.txt"
        a.known_failures = os.path.join(HERE, name)
    known = read_known(a.known_failures)
    node_dir = node_data.shipped_node_dir() or node_data.generate(a.data_dir)
    cases = node_data.load_cases(node_dir, supported)
    ops = {o for o in a.op.split(",") if o}
    unknown = ops - supported
    if unknown:
        print(f"error: --op {sorted(unknown)} not in {a.supported}", file=sys.stderr)
        return 2
    pattern = re.compile(a.case) if a.case else None

    def wanted(c):
        return (not ops or c.op in ops) and (not pattern or pattern.search(c.name))

    excluded = read_known(a.excluded)
    for c in cases:
        if c.name in excluded and not c.skip:
            c.skip = "excluded: " + excluded[c.name]
    selected = [c for c in cases if not c.skip and wanted(c)]
    skipped = [c for c in cases if c.skip and wanted(c)]
    stale = sorted(set(known) - {c.name for c in cases})
    if stale:
        print(f"warning: known-failures entries match no case: {stale}", file=sys.stderr)
    if a.list:
        by_op = defaultdict(list)
        for c in selected:
            by_op[c.op].append(c.name)
        for op in sorted(by_op):
            print(f"{op} ({len(by_op[op])}): {' '.join(by_op[op])}")
        print(f"{len(selected)} selected, {len(skipped)} not run")
        return 0

    runner = Runner(a.runner, a.nrt, a.dtype, a.timeout)
    print(f"runner: {runner.describe()}; {len(selected)} cases, -j{a.jobs}", flush=True)
    pre = runner.preflight()
    if pre:
        print(f"warning: {pre}: every case will fail", file=sys.stderr)
    work_root = tempfile.mkdtemp(prefix="onnx-node-tests.")
    t0 = time.perf_counter()
    results = {}
    try:
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futs = {c.name: pool.submit(run_case, c, runner, work_root, a.keep, a.freeze) for c in selected}
            for i, c in enumerate(selected):
                try:
                    results[c.name] = futs[c.name].result()
                except Exception as e:  # a harness bug must not hide the other cases
                    results[c.name] = ("fail", f"harness error: {type(e).__name__}: {e}", 0.0)
                st, detail, secs = results[c.name]
                if st == "fail":
                    tag = "KNOWN-FAIL" if c.name in known else "FAIL"
                    print(f"[{i + 1}/{len(selected)}] {tag} {c.name}: {tail(detail, 3)}", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work_root, ignore_errors=True)
        else:
            print(f"case files kept under {work_root}")
    elapsed = time.perf_counter() - t0
    tot, fails, xpass = write_report(
        a.report, runner, node_dir, selected, skipped, results, known, elapsed, bool(ops or pattern), a.freeze
    )
    print(
        f"{tot[0]} cases: {tot[1]} passed, {tot[2]} failed, {tot[3]} known failing; "
        f"{len(skipped)} not run; report {a.report}"
    )
    if xpass:
        print(f"note: {len(xpass)} known-failing cases passed: {[c.name for c in xpass]}")
    if a.write_failures:
        with open(a.write_failures, "w") as f:
            for c in selected:
                st, detail, _ = results[c.name]
                if st == "fail":
                    f.write(f"{c.name}  {first_reason(detail)}\n")
        print(f"failing cases written to {a.write_failures}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
