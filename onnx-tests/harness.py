"""Shared pieces of the ONNX harness: the runner contract and its two implementations.

The contract (issue 15) is the command line
    nrt run MODEL.onnx --input NAME=FILE.npy [--input ...] -o DIR [--dtype fp32|bf16]
which writes every graph output to DIR/<sanitized name>.npy. `Runner` invokes either the real
`nrt` binary or the stand-in `ort_run.py` (same command line, executes with onnxruntime), always
as a child process, and turns every way the command can fail into a `RunResult` with an error
string instead of an exception.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ORT_RUN = os.path.join(HERE, "ort_run.py")
DEFAULT_NRT = os.path.join(REPO, "target", "release", "nrt")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def sanitize(name: str) -> str:
    """File stem for an ONNX tensor name: every char but ASCII letters, digits, . _ - becomes _."""
    return _UNSAFE.sub("_", name)


def tail(text: str, lines: int = 15) -> str:
    rows = text.strip().splitlines()
    return "\n".join(rows[-lines:])


@dataclass
class RunResult:
    ok: bool
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    error: str = ""
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    max_rss_kib: int | None = None
    command: list[str] = field(default_factory=list)


def add_runner_args(parser) -> None:
    parser.add_argument(
        "--runner",
        choices=("nrt", "ort"),
        default="nrt",
        help="nrt: the nrt binary (default); ort: the onnxruntime stand-in ort_run.py",
    )
    parser.add_argument(
        "--nrt",
        default=os.environ.get("NRT", DEFAULT_NRT),
        help="path to the nrt binary (default: $NRT or target/release/nrt)",
    )
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per runner command (default 300)"
    )


class Runner:
    def __init__(self, kind: str, nrt: str, dtype: str = "fp32", timeout: float = 300.0):
        self.kind = kind
        self.nrt = nrt
        self.dtype = dtype
        self.timeout = timeout

    def describe(self) -> str:
        if self.kind == "ort":
            return f"ort (stand-in {os.path.relpath(ORT_RUN, REPO)}), dtype {self.dtype}"
        return f"nrt ({self.nrt}), dtype {self.dtype}"

    def preflight(self) -> str | None:
        """A reason every case will fail (missing binary), or None."""
        if self.kind == "nrt":
            path = self.nrt if os.sep in self.nrt else shutil.which(self.nrt)
            if not path or not os.path.isfile(path):
                return f"nrt binary not found at {self.nrt!r} (build it: cargo build --release -p nrt-cli, or pass --nrt)"
            if not os.access(path, os.X_OK):
                return f"nrt binary {self.nrt!r} is not executable"
        return None

    def base_command(self, verb: str = "run") -> list[str]:
        if self.kind == "ort":
            return [sys.executable, ORT_RUN, verb]
        return [self.nrt, verb]

    def command(self, model: str, input_files: dict[str, str], outdir: str) -> list[str]:
        cmd = self.base_command("run") + [model]
        for name, path in input_files.items():
            cmd += ["--input", f"{name}={path}"]
        cmd += ["-o", outdir, "--dtype", self.dtype]
        return cmd

    def run(
        self,
        model: str,
        inputs: dict[str, np.ndarray],
        output_names: list[str],
        workdir: str,
    ) -> RunResult:
        """Writes inputs as .npy under workdir, runs the command, reads every named output back."""
        indir = os.path.join(workdir, "in")
        outdir = os.path.join(workdir, "out")
        os.makedirs(indir, exist_ok=True)
        if os.path.isdir(outdir):
            shutil.rmtree(outdir)
        os.makedirs(outdir)
        files = {}
        for i, (name, arr) in enumerate(inputs.items()):
            path = os.path.join(indir, f"{i}_{sanitize(name)}.npy")
            np.save(path, arr, allow_pickle=False)
            files[name] = path
        cmd = self.command(model, files, outdir)
        res = run_command(cmd, self.timeout)
        if not res.ok:
            return res
        missing = []
        for name in output_names:
            path = os.path.join(outdir, sanitize(name) + ".npy")
            if not os.path.isfile(path):
                missing.append(f"{name!r} (expected {os.path.relpath(path, workdir)})")
                continue
            try:
                res.outputs[name] = np.load(path, allow_pickle=False)
            except Exception as e:  # a malformed file is a case failure, not a crash
                res.ok = False
                res.error += f"output {name!r}: cannot read {path}: {e}\n"
        if missing:
            res.ok = False
            written = sorted(os.listdir(outdir))
            res.error += f"command succeeded but wrote no file for output(s) {', '.join(missing)}; DIR has {written}\n"
        return res


def run_command(cmd: list[str], timeout: float) -> RunResult:
    """Runs cmd; never raises. Records wall time and the child's peak RSS (Linux: KiB)."""
    start = time.perf_counter()
    try:
        # Own session: a timeout kills the command's whole process group (children holding the
        # pipes open would otherwise keep communicate() waiting).
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as e:
        return RunResult(False, error=f"cannot start {cmd[0]!r}: {e}", command=cmd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
        wall = time.perf_counter() - start
        return RunResult(
            False,
            error=f"timed out after {timeout:.0f} s\nstderr tail:\n{tail(err)}",
            wall_s=wall,
            stdout=out,
            stderr=err,
            command=cmd,
        )
    wall = time.perf_counter() - start
    res = RunResult(True, wall_s=wall, stdout=out, stderr=err, command=cmd)
    if proc.returncode != 0:
        res.ok = False
        if proc.returncode < 0:
            what = f"killed by signal {-proc.returncode}"
        else:
            what = f"exit status {proc.returncode}"
        res.error = f"command failed ({what})\nstderr tail:\n{tail(err) or '(empty)'}\n"
    return res


# Linux carries a process's RSS high-water mark across fork and exec (the child of a large parent
# reports at least the parent's size in ru_maxrss), so measured commands are started by this small
# intermediate process, whose own footprint (~10 MiB) is the floor of what it can report. It
# forks, execs the command, waits, and writes the command's wall time and peak RSS to a pipe.
_WRAP = r"""
import os, sys, time, json
fd = int(sys.argv[1]); cmd = sys.argv[2:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        os.write(2, f"cannot start {cmd[0]!r}: {e}\n".encode()); os._exit(127)
_, status, ru = os.wait4(pid, 0)
wall = time.perf_counter() - t0
os.write(fd, json.dumps({"wall_s": wall, "maxrss_kib": ru.ru_maxrss}).encode())
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(cmd: list[str], timeout: float) -> RunResult:
    """Runs cmd (never raises) and records its own wall time and peak RSS (ru_maxrss, KiB)."""
    rfd, wfd = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", _WRAP, str(wfd)] + cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            pass_fds=(wfd,),
            start_new_session=True,
        )
    except OSError as e:
        os.close(rfd)
        os.close(wfd)
        return RunResult(False, error=f"cannot start the measuring wrapper: {e}", command=cmd)
    os.close(wfd)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    with os.fdopen(rfd, "rb") as f:
        raw = f.read()
    res = RunResult(True, stdout=out, stderr=err, command=cmd)
    if raw:
        info = json.loads(raw)
        res.wall_s = info["wall_s"]
        res.max_rss_kib = info["maxrss_kib"]
    if timed_out:
        res.ok = False
        res.error = f"timed out after {timeout:.0f} s"
    elif proc.returncode != 0:
        res.ok = False
        code = proc.returncode
        what = f"killed by signal {code - 128}" if code > 128 else f"exit status {code}"
        res.error = f"command failed ({what})\nstderr tail:\n{tail(err) or '(empty)'}"
    return res


def self_peak_rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
