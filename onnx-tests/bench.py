#!/usr/bin/env python3
"""Host time of one batch-1 inference: onnxruntime single-threaded vs the runner, same model and
input, measured in the same run (issue 15's target: nrt at most 5x onnxruntime).

onnxruntime: in a child process (so its peak RSS is its own), CPUExecutionProvider with
intra_op_num_threads = inter_op_num_threads = 1, the session created once, --warmup runs, then
the best of --repeat runs of session.run.
runner: the whole `nrt run MODEL.onnx --input NAME=FILE.npy ... -o DIR` command, best of
--runner-repeat runs; phases the command reports on a line starting with `host` (nrt's summary
`host time  load X ms, execute Y ms`, or `host build: X ms` / `host simulate: X ms`; units s, ms,
us; stdout or stderr) are reported too (best of the runs): `nrt run`'s execute phase is the
model's *first* execution in a fresh process (cold: the simulated core's SBUF and the model's
device memory touched for the first time). With the nrt runner, the same measurement as
onnxruntime's is made too: `nrt bench MODEL.onnx --warmup W -n N` (the model built and loaded
once, W untimed executions, then N timed ones; its `min` latency, each execute call's host
wall-clock), and the target ratio is that warm best / onnxruntime's warm best; without it (a
stand-in runner) the simulate or execute phase / onnxruntime. `nrt build MODEL.onnx -o X.neff`
is also timed once on its own (the build part of `nrt run`). Peak RSS of each process comes
from wait4's rusage (ru_maxrss).

Exit status: 0 when every command ran (the ratio is reported, not enforced, unless
--max-ratio is given: then 1 when a model's ratio is above it), 1 when a command failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import textwrap

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import models  # noqa: E402
from harness import Runner, add_runner_args, run_measured  # noqa: E402

DEFAULT_MODELS = ["resnet50", "bert_layer"]
_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_BENCH_MIN = re.compile(r"^latency\b.*\bmin ([0-9][0-9,]*(?:\.[0-9]+)?) (ms|us|µs|s)\b", re.M)
_PHASE = re.compile(r"\b(build|load|simulate|execute)\s*[:=]?\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*(ms|us|µs|s)\b", re.I)
SIM_PHASES = ("simulate", "execute")


def parse_phases(text: str) -> dict[str, float]:
    """Seconds per phase from the lines that start with `host` (`host build: X ms`,
    `host simulate: X ms`, or nrt's summary line `host time  load X ms, execute Y ms`); the last
    report of each phase wins."""
    out = {}
    for line in text.splitlines():
        if not line.strip().lower().startswith("host"):
            continue
        for m in _PHASE.finditer(line):
            out[m.group(1).lower()] = float(m.group(2).replace(",", "")) * _UNIT[m.group(3).lower()]
    return out


def ort_child(path: str, inputs_npz: str, warmup: int, repeat: int) -> int:
    """Runs in the child: prints one JSON line with the timings."""
    import time

    import onnxruntime as ort

    feeds = dict(np.load(inputs_npz))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    create = time.perf_counter() - t0
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    print(json.dumps({"create_s": create, "best_s": min(times), "median_s": float(np.median(times)), "runs": len(times)}))
    return 0


def fmt_s(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x * 1e3:.1f} ms" if x < 10 else f"{x:.2f} s"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_runner_args(p)
    p.add_argument("models", nargs="*", help=f"default: {' '.join(DEFAULT_MODELS)}")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--model-dir", default=models.DEFAULT_OUT)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeat", type=int, default=10, help="onnxruntime timed runs (best of)")
    p.add_argument("--runner-repeat", type=int, default=3, help="runner command runs (best of)")
    p.add_argument("--bench-runs", type=int, default=5, help="nrt bench: timed executions (best of)")
    p.add_argument("--bench-warmup", type=int, default=1, help="nrt bench: untimed executions first")
    p.add_argument("--max-ratio", type=float, default=None, help="fail when runner/ort exceeds this")
    p.add_argument("--ort-child", nargs=2, metavar=("MODEL", "INPUTS_NPZ"), help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.ort_child:
        return ort_child(a.ort_child[0], a.ort_child[1], a.warmup, a.repeat)

    reg = models.registry(a.seq, a.hidden)
    names = a.models or DEFAULT_MODELS
    unknown = [n for n in names if n not in reg]
    if unknown:
        print(f"error: unknown model(s) {unknown}; known: {', '.join(reg)}", file=sys.stderr)
        return 2
    runner = Runner(a.runner, a.nrt, a.dtype, a.timeout)
    print(f"runner: {runner.describe()}; onnxruntime: 1 thread, best of {a.repeat} after {a.warmup} warm-up runs")
    status = 0
    rows = []
    for n in names:
        spec = reg[n]
        path = models.ensure(spec, a.model_dir, a.seq, a.hidden)
        feeds = models.make_inputs(spec, onnx.load(path, load_external_data=False))
        with tempfile.TemporaryDirectory(prefix=f"bench-{n}.") as work:
            npz = os.path.join(work, "inputs.npz")
            np.savez(npz, **feeds)
            cmd = [sys.executable, os.path.abspath(__file__), "--ort-child", path, npz, "--warmup", str(a.warmup), "--repeat", str(a.repeat)]
            o = run_measured(cmd, a.timeout)
            if not o.ok:
                print(f"{n}: onnxruntime FAILED: {textwrap.indent(o.error.strip(), '    ').lstrip()}")
                status = 1
                continue
            ort_t = json.loads(o.stdout.strip().splitlines()[-1])
            # The runner: write the inputs once, time the whole command.
            files = {}
            for i, (k, v) in enumerate(feeds.items()):
                files[k] = os.path.join(work, f"in{i}.npy")
                np.save(files[k], v)
            best = None
            phases: dict[str, float] = {}
            rss = 0
            err = None
            warm = None
            if runner.kind == "nrt":
                # As onnxruntime is measured: loaded once, warmed up, best of the timed runs.
                cmd = runner.base_command("bench") + [path, "--dtype", a.dtype]
                for k, f in files.items():
                    cmd += ["--input", f"{k}={f}"]
                cmd += ["--warmup", str(a.bench_warmup), "-n", str(max(1, a.bench_runs))]
                b = run_measured(cmd, a.timeout)
                m = _BENCH_MIN.search(b.stdout) if b.ok else None
                if not b.ok:
                    err = b
                elif m is None:
                    print(f"{n}: nrt bench printed no latency line: {b.stdout[-2000:]}")
                    status = 1
                    continue
                else:
                    warm = float(m.group(1).replace(",", "")) * _UNIT[m.group(2)]
            for _ in range(max(1, a.runner_repeat) if err is None else 0):
                outdir = os.path.join(work, "out")
                os.makedirs(outdir, exist_ok=True)
                r = run_measured(runner.command(path, files, outdir), a.timeout)
                if not r.ok:
                    err = r
                    break
                best = r.wall_s if best is None else min(best, r.wall_s)
                rss = max(rss, r.max_rss_kib or 0)
                for k, v in parse_phases(r.stdout + "\n" + r.stderr).items():
                    phases[k] = min(phases.get(k, v), v)
        ort_best = ort_t["best_s"]
        print(f"{n}: {spec.about}")
        print(
            f"  onnxruntime 1 thread: best {fmt_s(ort_best)}, median {fmt_s(ort_t['median_s'])} "
            f"(session creation {fmt_s(ort_t['create_s'])}); peak RSS {o.max_rss_kib / 1024:.0f} MiB"
        )
        if err is not None:
            print(f"  runner FAILED: {textwrap.indent(err.error.strip(), '    ').lstrip()}\n  command: {' '.join(err.command)}")
            status = 1
            continue
        line = f"  runner whole command: best {fmt_s(best)} = {best / ort_best:.1f}x onnxruntime"
        if phases:
            line += "; " + ", ".join(f"{k} {fmt_s(v)}" for k, v in sorted(phases.items()))
        else:
            line += "; no build/simulate phases reported"
        print(line + f"; peak RSS {rss / 1024:.0f} MiB")
        if runner.kind == "nrt":
            # `nrt build MODEL.onnx -o X.neff` alone: the ONNX import, lowering and NEFF writing
            # that `nrt run` does before it loads and simulates.
            with tempfile.TemporaryDirectory(prefix=f"bench-build-{n}.") as bdir:
                b = run_measured(runner.base_command("build") + [path, "-o", os.path.join(bdir, "m.neff")], a.timeout)
            if b.ok:
                print(f"  nrt build alone: {fmt_s(b.wall_s)}; peak RSS {(b.max_rss_kib or 0) / 1024:.0f} MiB")
            else:
                print(f"  nrt build alone FAILED: {textwrap.indent(b.error.strip(), '    ').lstrip()}")
        sim = next((phases[k] for k in SIM_PHASES if k in phases), None)
        if sim is not None:
            print(f"  first execution in a fresh process (nrt run's execute phase): {fmt_s(sim)} = {sim / ort_best:.2f}x onnxruntime")
        if warm is not None:
            ratio = warm / ort_best
            basis = f"nrt bench, best of {max(1, a.bench_runs)} after {a.bench_warmup} warm-up"
            print(f"  nrt bench: best {fmt_s(warm)} of {max(1, a.bench_runs)} executions after {a.bench_warmup} warm-up")
        else:
            ratio = (sim if sim is not None else best) / ort_best
            basis = next((f"{k} phase" for k in SIM_PHASES if k in phases), "whole command")
        print(f"  ratio ({basis} / onnxruntime): {ratio:.2f}x (target <= 5x)")
        rows.append((n, ratio))
        if a.max_ratio is not None and ratio > a.max_ratio:
            print(f"  FAIL: above --max-ratio {a.max_ratio}")
            status = 1
        sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
