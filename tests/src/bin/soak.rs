//! Soak (issue 17): N host threads, each on its own logical core, loop until a deadline over
//! load → allocate tensors → write inputs → execute → check every output element → free →
//! unload, on a simulated trn1 machine, while the main thread samples the process RSS and the
//! machine's device memory.
//!
//! ```text
//! cargo run --release -p nrt-tests --bin soak -- --seconds 60 --threads 2
//! ```
//!
//! **Two runtimes.** The implicit-async mode (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`) is
//! fixed at `init` for a whole runtime, and in it a plain `execute` is always queued: one
//! runtime cannot run both the synchronous and the implicit-async path. So two runtimes
//! ("processes") share one machine of `2N` cores: `sync` (cores `0..N`) runs the synchronous
//! `execute` and the explicit `nrta` schedule API; `implicit` (cores `N..2N`, queue depth 4)
//! runs the implicit-async `execute`. Thread `t` uses logical core `t` of each. One host
//! worker thread per runtime runs its queues (`Runtime::run_async_worker`).
//!
//! **Rotation.** Iteration `k` (offset by the thread index) runs path `k % 3` (sync, implicit
//! async, explicit async) on model `k % 2` (a 64×64×64 fp32 matmul, a 128×64 fp32 elementwise
//! add), so every pairing comes round every 6 iterations; every other round of 6, the
//! synchronous executions use host tensors (device clones made and freed by `execute`).
//! Inputs differ per thread and iteration and the output is filled with `0xFF` bytes before
//! each execution, so a stale or missing output cannot pass. References are bit-exact:
//! `nrt_sim::engine::tensor_matmul` has the engine's matmul bits, and an fp32 add is one
//! correctly rounded operation.
//!
//! **Verdict** (exit 1 on any; 2 for bad arguments): a wrong output element, a failed call,
//! a lost or duplicated execution (the machine's count against the iterations), device memory
//! not back at its post-`init` figure once the threads are done, or not 0 after `close`, a
//! model still loaded or staged, a core still reserved, or RSS growth past the bound of
//! [`rss_bound`] between the post-warm-up sample and the last sample of the run.
//!
//! Output: JSON lines on stdout, `{"soak":"sample",…}` every 10 s and one
//! `{"soak":"summary",…}`, then `PASS` or `FAIL: …` lines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{CompletionHook, FrameworkType, NrtStatus, Runtime};
use nrt_host::StdHost;
use nrt_sim::engine::kernels::{self, Elementwise};
use nrt_sim::engine::{DType, Program, TensorKind, tensor_matmul};
use nrt_sim::neff::neff_from_programs;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

type Rt = Runtime<SimDriver, StdHost>;

/// Most threads accepted (each takes two physical cores of the machine).
const MAX_THREADS: usize = 64;
/// Longest run accepted: a week.
const MAX_SECONDS: u64 = 7 * 24 * 3600;
/// How long a wait for one completion may take before it counts as a failure.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(60);
/// Matmul dimensions M, K, N.
const MM: (usize, usize, usize) = (64, 64, 64);
/// Elementwise add: rows, columns.
const ADD: (usize, usize) = (128, 64);
/// Failure messages kept for the report (all are counted).
const KEPT_MESSAGES: usize = 20;

const USAGE: &str = "usage: soak --seconds S --threads N\n\
    \n  --seconds S   how long to run, 1..=604800 (required)\
    \n  --threads N   worker threads, each on its own logical core, 1..=64 (default 2)\
    \n  -h, --help    this text\n";

#[derive(Debug, PartialEq, Eq)]
struct Args {
    seconds: u64,
    threads: usize,
}

/// Parses the arguments; `Err(None)` asks for the usage on stdout (help), `Err(Some(why))` is
/// a bad command line.
fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Args, Option<String>> {
    let (mut seconds, mut threads) = (None, 2usize);
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if flag == "-h" || flag == "--help" {
            return Err(None);
        }
        if flag != "--seconds" && flag != "--threads" {
            return Err(Some(format!("unknown argument {arg:?}")));
        }
        let Some(value) = inline.or_else(|| it.next()) else {
            return Err(Some(format!("{flag} needs a value")));
        };
        let n: u64 = value
            .parse()
            .map_err(|_| Some(format!("{flag}: {value:?} is not a whole number")))?;
        if flag == "--seconds" {
            if !(1..=MAX_SECONDS).contains(&n) {
                return Err(Some(format!("--seconds {n} is outside 1..={MAX_SECONDS}")));
            }
            seconds = Some(n);
        } else {
            if !(1..=MAX_THREADS as u64).contains(&n) {
                return Err(Some(format!("--threads {n} is outside 1..={MAX_THREADS}")));
            }
            threads = n as usize;
        }
    }
    let seconds = seconds.ok_or_else(|| Some("--seconds is required".to_string()))?;
    Ok(Args { seconds, threads })
}

/// The three execute paths, in rotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// `Runtime::execute` on the synchronous runtime.
    Sync,
    /// `Runtime::execute` on the implicit-async runtime, then `async_drain` and the callback.
    Implicit,
    /// `Runtime::execute_schedule` (`nrta`), then `is_completed` polled and the hook's status.
    Explicit,
}

const PATHS: [Path; 3] = [Path::Sync, Path::Implicit, Path::Explicit];
const PATH_NAMES: [&str; 3] = ["sync", "implicit_async", "explicit_async"];

/// A model: its NEFF and the names and element counts of its tensors.
struct ModelSpec {
    matmul: bool,
    neff: Vec<u8>,
    inputs: Vec<(String, usize)>,
    output: (String, usize),
}

impl ModelSpec {
    fn new(matmul: bool, program: Program) -> Result<Self, String> {
        let neff = neff_from_programs(&program.name, std::slice::from_ref(&program))
            .map_err(|e| format!("NEFF of {}: {e}", program.name))?;
        let elems = |t: &nrt_sim::engine::TensorDecl| t.shape.iter().product::<u64>() as usize;
        let inputs = program
            .tensors
            .iter()
            .filter(|t| t.kind == TensorKind::Input)
            .map(|t| (t.name.clone(), elems(t)))
            .collect();
        let output = program
            .tensors
            .iter()
            .find(|t| t.kind == TensorKind::Output)
            .map(|t| (t.name.clone(), elems(t)))
            .ok_or_else(|| format!("{} has no output", program.name))?;
        Ok(Self {
            matmul,
            neff,
            inputs,
            output,
        })
    }

    /// The exact output for `inputs` (in the order of `self.inputs`).
    fn reference(&self, inputs: &[Vec<f32>]) -> Result<Vec<f32>, String> {
        let mut out = vec![0f32; self.output.1];
        if self.matmul {
            let (m, k, n) = MM;
            let lhs_t = self.input(inputs, "lhs_t")?;
            let rhs = self.input(inputs, "rhs")?;
            tensor_matmul(lhs_t, rhs, &mut out, m, k, n).map_err(|e| e.to_string())?;
        } else {
            let (a, b) = (self.input(inputs, "a")?, self.input(inputs, "b")?);
            for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
                *o = x + y;
            }
        }
        Ok(out)
    }

    fn input<'v>(&self, inputs: &'v [Vec<f32>], name: &str) -> Result<&'v [f32], String> {
        self.inputs
            .iter()
            .position(|(n, _)| n == name)
            .and_then(|i| inputs.get(i))
            .map(Vec::as_slice)
            .ok_or_else(|| format!("model has no input {name:?}"))
    }
}

/// Deterministic inputs: 24-bit integers scaled into [-1, 1), every one exact in fp32.
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            (r as f32 - 8_388_608.0) / 8_388_608.0
        })
        .collect()
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Implicit-async completions per process-relative core (the runtime-wide callback), and
/// those that did not succeed.
static IMPLICIT_DONE: [AtomicU64; MAX_THREADS] = [const { AtomicU64::new(0) }; MAX_THREADS];
static IMPLICIT_BAD: [AtomicU64; MAX_THREADS] = [const { AtomicU64::new(0) }; MAX_THREADS];
/// The explicit hook's last status per thread: `code + 1`, 0 before it ran.
static EXPLICIT_STATUS: [AtomicU32; MAX_THREADS] = [const { AtomicU32::new(0) }; MAX_THREADS];

fn implicit_callback(_params: usize, _model: u32, lnc: u32, _job: u64, status: NrtStatus) {
    let i = lnc as usize % MAX_THREADS;
    if status != NrtStatus::Success {
        IMPLICIT_BAD[i].fetch_add(1, Ordering::SeqCst);
    }
    IMPLICIT_DONE[i].fetch_add(1, Ordering::SeqCst);
}

fn explicit_hook(ctx: usize, _seq: u64, status: NrtStatus) {
    EXPLICIT_STATUS[ctx % MAX_THREADS].store(status.code() + 1, Ordering::SeqCst);
}

/// What went wrong in one iteration.
enum Failure {
    /// A runtime call failed (or a completion never came).
    Call(String),
    /// The output differs from the reference.
    Wrong(String),
}

/// Counters shared by the threads.
#[derive(Default)]
struct Tally {
    /// Per path: iterations whose output matched.
    ok: [AtomicU64; 3],
    /// Executions submitted (what the machine should count).
    submitted: AtomicU64,
    /// Per model (matmul, add): iterations.
    per_model: [AtomicU64; 2],
    host_tensor_iters: AtomicU64,
    elements_checked: AtomicU64,
    call_failures: AtomicU64,
    wrong_outputs: AtomicU64,
    messages: Mutex<Vec<String>>,
}

impl Tally {
    fn record(&self, thread: usize, iter: u64, path: Path, f: Failure) {
        let (kind, msg) = match f {
            Failure::Call(m) => {
                self.call_failures.fetch_add(1, Ordering::SeqCst);
                ("call failed", m)
            }
            Failure::Wrong(m) => {
                self.wrong_outputs.fetch_add(1, Ordering::SeqCst);
                ("wrong output", m)
            }
        };
        let mut kept = self.messages.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < KEPT_MESSAGES {
            kept.push(format!(
                "thread {thread} iteration {iter} ({path:?}): {kind}: {msg}"
            ));
        }
    }
}

struct Ctx<'a> {
    sync: &'a Rt,
    implicit: &'a Rt,
    models: &'a [ModelSpec; 2],
    tally: &'a Tally,
    deadline: Instant,
}

fn call<T>(what: &str, r: nrt_core::Result<T>) -> Result<T, Failure> {
    r.map_err(|e| Failure::Call(format!("{what}: {e}")))
}

/// Waits up to [`COMPLETION_TIMEOUT`] for `done`, sleeping briefly between checks.
fn wait_for(what: &str, mut done: impl FnMut() -> Result<bool, Failure>) -> Result<(), Failure> {
    let start = Instant::now();
    while !done()? {
        if start.elapsed() > COMPLETION_TIMEOUT {
            return Err(Failure::Call(format!(
                "{what}: not completed after {COMPLETION_TIMEOUT:?}"
            )));
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Ok(())
}

/// One iteration: load, allocate, write, execute by `path`, check, free, unload.
fn iteration(ctx: &Ctx<'_>, t: usize, k: u64, path: Path, spec: &ModelSpec) -> Result<(), Failure> {
    let rt = if path == Path::Implicit {
        ctx.implicit
    } else {
        ctx.sync
    };
    let core = t as i32;
    let h = call("load", rt.load(&spec.neff, core, 1))?;
    let body = run_loaded(ctx, rt, h, t, k, path, spec);
    let unloaded = call("unload", rt.unload(h));
    body.and(unloaded)
}

fn run_loaded(
    ctx: &Ctx<'_>,
    rt: &Rt,
    h: nrt_core::ModelHandle,
    t: usize,
    k: u64,
    path: Path,
    spec: &ModelSpec,
) -> Result<(), Failure> {
    let core = t as i32;
    let host = path == Path::Sync && (k / 6) % 2 == 1;
    let placement = if host {
        ctx.tally.host_tensor_iters.fetch_add(1, Ordering::Relaxed);
        TensorPlacement::Host
    } else {
        TensorPlacement::Device
    };
    let seed = ((t as u64) << 40) ^ k;
    let mut ins = TensorSet::new();
    let mut in_values = Vec::with_capacity(spec.inputs.len());
    for (j, (name, n)) in spec.inputs.iter().enumerate() {
        let v = values(seed.wrapping_mul(31).wrapping_add(j as u64 + 1), *n);
        let tensor = call(
            "tensor_allocate",
            rt.tensor_allocate(placement, core, 4 * *n as u64, name),
        )?;
        call("tensor write", tensor.write(0, &to_bytes(&v)))?;
        ins.add(name, tensor);
        in_values.push(v);
    }
    let (out_name, out_n) = (&spec.output.0, spec.output.1);
    let out_size = 4 * out_n as u64;
    let out = call(
        "tensor_allocate",
        rt.tensor_allocate(placement, core, out_size, out_name),
    )?;
    call("tensor memset", out.memset(0, 0xFF, out_size))?;
    let mut outs = TensorSet::new();
    outs.add(out_name, out);
    ctx.tally.submitted.fetch_add(1, Ordering::Relaxed);
    match path {
        Path::Sync => call("execute", rt.execute(h, &ins, &outs))?,
        Path::Implicit => {
            let before = IMPLICIT_DONE[t].load(Ordering::SeqCst);
            let bad = IMPLICIT_BAD[t].load(Ordering::SeqCst);
            call("execute (implicit async)", rt.execute(h, &ins, &outs))?;
            call("async_drain", rt.async_drain(core))?;
            // The queue reads as drained before the callback has run: wait for it too.
            wait_for("implicit-async callback", || {
                Ok(IMPLICIT_DONE[t].load(Ordering::SeqCst) > before)
            })?;
            if IMPLICIT_BAD[t].load(Ordering::SeqCst) != bad {
                return Err(Failure::Call(
                    "the implicit-async callback reported a failure".into(),
                ));
            }
        }
        Path::Explicit => {
            EXPLICIT_STATUS[t].store(0, Ordering::SeqCst);
            let hook = CompletionHook {
                call: explicit_hook,
                ctx: t,
            };
            let seq = call(
                "execute_schedule",
                rt.execute_schedule(h, &ins, &outs, 0, Some(hook)),
            )?;
            wait_for("explicit-async request", || {
                call("is_completed", rt.is_completed(seq))
            })?;
            let status = EXPLICIT_STATUS[t].load(Ordering::SeqCst);
            if status != NrtStatus::Success.code() + 1 {
                return Err(Failure::Call(format!(
                    "explicit-async completion status {} (code + 1; 0: the hook never ran)",
                    status
                )));
            }
        }
    }
    let mut got = vec![0u8; out_size as usize];
    call(
        "tensor read",
        outs.get(out_name).and_then(|o| o.read(0, &mut got)),
    )?;
    let want = spec.reference(&in_values).map_err(Failure::Call)?;
    let mut wrong = 0usize;
    let mut first = None;
    for (i, (g, w)) in got.chunks_exact(4).zip(&want).enumerate() {
        let g = u32::from_le_bytes([g[0], g[1], g[2], g[3]]);
        if g != w.to_bits() {
            wrong += 1;
            first.get_or_insert((i, g, w.to_bits()));
        }
    }
    ctx.tally
        .elements_checked
        .fetch_add(want.len() as u64, Ordering::Relaxed);
    if let Some((i, g, w)) = first {
        return Err(Failure::Wrong(format!(
            "{wrong} of {} elements differ; first: element {i} is {g:#010x} ({}), want \
             {w:#010x} ({})",
            want.len(),
            f32::from_bits(g),
            f32::from_bits(w)
        )));
    }
    Ok(())
    // The tensors are dropped here: their device memory is freed before the unload.
}

fn worker(ctx: &Ctx<'_>, t: usize) {
    let mut i = 0u64;
    while Instant::now() < ctx.deadline {
        let k = i + t as u64;
        let path = PATHS[(k % 3) as usize];
        let model = (k % 2) as usize;
        let spec = &ctx.models[model];
        ctx.tally.per_model[model].fetch_add(1, Ordering::Relaxed);
        match iteration(ctx, t, k, path, spec) {
            Ok(()) => {
                ctx.tally.ok[(k % 3) as usize].fetch_add(1, Ordering::Relaxed);
            }
            Err(f) => ctx.tally.record(t, i, path, f),
        }
        i += 1;
    }
}

/// Resident set size of this process in bytes (`VmRSS` of `/proc/self/status`), if readable.
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The largest RSS growth accepted from the post-warm-up sample to the end: 16 MiB + 5 %.
///
/// After warm-up every buffer the loop needs exists, but the process's heap still moves: the
/// allocator keeps freed chunks in per-thread arenas and trims the top of a heap only past a
/// threshold, so identical iterations can leave RSS a few MiB apart depending on where they
/// stopped, and thread stacks and the runtime's registry chunks are touched lazily. 16 MiB
/// covers that with margin for up to 64 threads; 5 % scales it for a larger process (the
/// soak's own RSS is about 27 MiB with 2 threads). A steady leak still exceeds it: at the
/// ~2,000 iterations per second of 2 threads on a 2-CPU host, a 60 s run (54 s after warm-up)
/// fails from about 170 bytes leaked per iteration (a leaked 1 KiB every 4th iteration was
/// seen to add 11 MiB in 18 s), a 30-minute run from about 5 bytes per iteration.
fn rss_bound(baseline: u64) -> u64 {
    (16 << 20) + baseline / 20
}

/// RSS samples: the post-warm-up baseline, the maximum and the last one of the run.
#[derive(Default)]
struct Rss {
    baseline: Option<u64>,
    max: u64,
    last: u64,
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

fn new_runtime(machine: &Arc<SimMachine>, vars: &[(&str, &str)]) -> Result<Rt, String> {
    let rt = Runtime::with_host(SimDriver::attach(machine), StdHost::new());
    rt.init(FrameworkType::NoFw, "", "", &vars)
        .map_err(|e| format!("init with {vars:?}: {e}"))?;
    Ok(rt)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(Some(why)) => {
            eprint!("soak: {why}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(failures) if failures.is_empty() => {
            println!("PASS");
            ExitCode::SUCCESS
        }
        Ok(failures) => {
            for f in failures {
                println!("FAIL: {f}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("FAIL: setup: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the soak; returns the failed checks (empty: pass). `Err`: it could not start.
fn run(args: &Args) -> Result<Vec<String>, String> {
    let n = args.threads;
    let (m, k, nn) = MM;
    let matmul = kernels::matmul(m as u64, k as u64, nn as u64, DType::F32, DType::F32);
    let add = kernels::elementwise(Elementwise::Add, ADD.0 as u64, ADD.1 as u64, DType::F32);
    let models = [
        ModelSpec::new(true, matmul.map_err(|e| e.to_string())?)?,
        ModelSpec::new(false, add.map_err(|e| e.to_string())?)?,
    ];
    let rss_start = rss_bytes();
    // trn1: two physical cores per device; the two runtimes take N cores each.
    let machine = SimMachine::new(SimConfig::emulate_driver(Instance::Trn1, n as u32));
    let last = n - 1;
    let sync_cores = format!("0-{last}");
    let implicit_cores = format!("{n}-{}", n + last);
    let log = ("NEURON_RT_LOG_LEVEL", "WARNING");
    let rt_sync = new_runtime(&machine, &[log, ("NEURON_RT_VISIBLE_CORES", &sync_cores)])?;
    let rt_implicit = new_runtime(
        &machine,
        &[
            log,
            ("NEURON_RT_VISIBLE_CORES", &implicit_cores),
            ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4"),
        ],
    )?;
    rt_implicit
        .register_async_exec_callback(implicit_callback, 0)
        .map_err(|e| format!("register_async_exec_callback: {e}"))?;
    let dev_after_init = machine.total_device_bytes_allocated();
    let reserved_after_init = machine.reserved().iter().count();
    let tally = Tally::default();
    let duration = Duration::from_secs(args.seconds);
    // Warm-up: the first 10 % of the run, at least 2 s (at most half of a short run).
    let warmup = (duration / 10).max(Duration::from_secs(2).min(duration / 2));
    let start = Instant::now();
    let ctx = Ctx {
        sync: &rt_sync,
        implicit: &rt_implicit,
        models: &models,
        tally: &tally,
        deadline: start + duration,
    };
    let stop_workers = AtomicBool::new(false);
    let mut rss = Rss::default();
    let mut dev_max = dev_after_init;
    println!(
        "{{\"soak\":\"start\",\"seconds\":{},\"threads\":{n},\"machine\":\"trn1 x{n} devices\",\
         \"sync_cores\":{},\"implicit_cores\":{},\"warmup_s\":{:.1},\"rss_bytes\":{},\
         \"device_bytes_after_init\":{dev_after_init},\"reserved_cores\":{reserved_after_init}}}",
        args.seconds,
        json_str(&sync_cores),
        json_str(&implicit_cores),
        warmup.as_secs_f64(),
        opt(rss_start),
    );
    std::thread::scope(|s| {
        let async_workers = [&rt_sync, &rt_implicit].map(|rt| {
            let stop = &stop_workers;
            s.spawn(move || rt.run_async_worker(stop))
        });
        let ctx = &ctx;
        let threads: Vec<_> = (0..n)
            .map(|t| {
                std::thread::Builder::new()
                    .name(format!("soak-{t}"))
                    .spawn_scoped(s, move || worker(ctx, t))
            })
            .collect();
        // The sampler: every 200 ms, a line every 10 s.
        let mut next_line = Duration::from_secs(10);
        while Instant::now() < ctx.deadline {
            let left = ctx.deadline.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(200)));
            let now = start.elapsed();
            let dev = machine.total_device_bytes_allocated();
            dev_max = dev_max.max(dev);
            if let Some(r) = rss_bytes() {
                rss.max = rss.max.max(r);
                rss.last = r;
                if rss.baseline.is_none() && now >= warmup {
                    rss.baseline = Some(r);
                }
            }
            if now >= next_line {
                next_line += Duration::from_secs(10);
                let ok: Vec<u64> = tally.ok.iter().map(|c| c.load(Ordering::Relaxed)).collect();
                println!(
                    "{{\"soak\":\"sample\",\"t_s\":{:.1},\"rss_bytes\":{},\"device_bytes\":{dev},\
                     \"ok\":[{},{},{}],\"failures\":{}}}",
                    now.as_secs_f64(),
                    rss.last,
                    ok[0],
                    ok[1],
                    ok[2],
                    tally.call_failures.load(Ordering::Relaxed)
                        + tally.wrong_outputs.load(Ordering::Relaxed)
                );
            }
        }
        for th in threads {
            if !th.is_ok_and(|h| h.join().is_ok()) {
                let why = "a soak thread did not start or panicked";
                tally.record(n, 0, Path::Sync, Failure::Call(why.into()));
            }
        }
        stop_workers.store(true, Ordering::Release);
        if !async_workers.into_iter().all(|w| w.join().is_ok()) {
            let why = "an async worker panicked";
            tally.record(n, 0, Path::Sync, Failure::Call(why.into()));
        }
    });
    let elapsed = start.elapsed();
    let dev_idle = machine.total_device_bytes_allocated();
    let pending = rt_sync.async_pending() + rt_implicit.async_pending();
    let loaded: usize = [&rt_sync, &rt_implicit]
        .iter()
        .map(|rt| rt.loaded_models().map_or(usize::MAX, |v| v.len()))
        .sum();
    let rss_idle = rss_bytes();
    rt_sync.close();
    rt_implicit.close();
    let dev_closed = machine.total_device_bytes_allocated();
    let staged = machine.staged_models().len();
    let reserved = machine.reserved().iter().count();
    let owned = machine.cores().iter().filter(|c| c.owner.is_some()).count();
    let rss_closed = rss_bytes();
    let executions = machine.executions();

    let ok: Vec<u64> = tally.ok.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let total_ok: u64 = ok.iter().sum();
    let call_failures = tally.call_failures.load(Ordering::Relaxed);
    let wrong = tally.wrong_outputs.load(Ordering::Relaxed);
    let submitted = tally.submitted.load(Ordering::Relaxed);
    let per_path = PATH_NAMES
        .iter()
        .zip(&ok)
        .map(|(p, c)| format!("\"{p}\":{c}"))
        .collect::<Vec<_>>()
        .join(",");
    let bound = rss.baseline.map(rss_bound);
    let growth = rss.baseline.map(|b| rss.last as i64 - b as i64);
    println!(
        "{{\"soak\":\"summary\",\"elapsed_s\":{:.1},\"threads\":{n},\"iterations_ok\":{{{per_path}}},\
         \"iterations_ok_total\":{total_ok},\"per_second\":{:.0},\"matmul\":{},\"add\":{},\
         \"sync_with_host_tensors\":{},\"elements_checked\":{},\"call_failures\":{call_failures},\
         \"wrong_outputs\":{wrong},\"executions_submitted\":{submitted},\
         \"machine_executions\":{executions}}}",
        elapsed.as_secs_f64(),
        total_ok as f64 / elapsed.as_secs_f64(),
        tally.per_model[0].load(Ordering::Relaxed),
        tally.per_model[1].load(Ordering::Relaxed),
        tally.host_tensor_iters.load(Ordering::Relaxed),
        tally.elements_checked.load(Ordering::Relaxed),
    );
    println!(
        "{{\"soak\":\"rss\",\"start_bytes\":{},\"after_warmup_bytes\":{},\"max_bytes\":{},\
         \"end_bytes\":{},\"growth_bytes\":{},\"bound_bytes\":{},\"after_join_bytes\":{},\
         \"after_close_bytes\":{}}}",
        opt(rss_start),
        opt(rss.baseline),
        rss.max,
        rss.last,
        growth.map_or_else(|| "null".into(), |g| g.to_string()),
        opt(bound),
        opt(rss_idle),
        opt(rss_closed),
    );
    println!(
        "{{\"soak\":\"device\",\"after_init_bytes\":{dev_after_init},\"max_bytes\":{dev_max},\
         \"after_join_bytes\":{dev_idle},\"after_close_bytes\":{dev_closed},\
         \"async_pending\":{pending},\"loaded_models\":{loaded},\"staged_after_close\":{staged},\
         \"reserved_after_close\":{reserved},\"owned_cores_after_close\":{owned}}}"
    );
    for m in tally
        .messages
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
    {
        println!("{{\"soak\":\"failure\",\"message\":{}}}", json_str(m));
    }

    let mut failures = Vec::new();
    if call_failures + wrong > 0 {
        failures.push(format!(
            "{call_failures} failed call(s), {wrong} wrong output(s)"
        ));
    }
    if ok.contains(&0) {
        failures.push(format!("a path never completed an iteration: {per_path}"));
    }
    if executions != submitted {
        failures.push(format!(
            "the machine ran {executions} executions for {submitted} submitted"
        ));
    }
    if pending != 0 || loaded != 0 {
        failures.push(format!(
            "after the threads: {pending} async request(s) pending, {loaded} model(s) loaded"
        ));
    }
    if dev_idle != dev_after_init {
        failures.push(format!(
            "device memory after the threads is {dev_idle} bytes, {dev_after_init} after init"
        ));
    }
    if dev_closed != 0 {
        failures.push(format!("device memory after close is {dev_closed} bytes"));
    }
    if staged != 0 || reserved != 0 || owned != 0 {
        failures.push(format!(
            "after close: {staged} staged model(s), {reserved} reserved core(s), {owned} owned"
        ));
    }
    match (rss.baseline, bound) {
        (Some(b), Some(bound)) if rss.last > b + bound => failures.push(format!(
            "RSS grew by {} bytes after warm-up ({b} → {}), bound {bound}",
            rss.last - b,
            rss.last
        )),
        (Some(_), _) => {}
        _ => println!("{{\"soak\":\"note\",\"message\":\"RSS unreadable: not checked\"}}"),
    }
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, Option<String>> {
        parse_args(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse(&["--seconds", "60", "--threads=3"]),
            Ok(Args {
                seconds: 60,
                threads: 3
            })
        );
        assert_eq!(parse(&["--seconds=5"]).map(|a| a.threads), Ok(2));
        assert_eq!(parse(&["--help"]), Err(None));
        for bad in [
            &[][..],
            &["--seconds"],
            &["--seconds", "0"],
            &["--seconds", "-1"],
            &["--seconds", "x"],
            &["--seconds", "1", "--threads", "0"],
            &["--seconds", "1", "--threads", "65"],
            &["--seconds", "1", "--bogus"],
            &["60"],
        ] {
            assert!(matches!(parse(bad), Err(Some(_))), "{bad:?}");
        }
    }

    #[test]
    fn inputs_are_deterministic_and_in_range() {
        let v = values(7, 16);
        assert_eq!(v, values(7, 16));
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert_ne!(values(7, 16), values(8, 16));
    }
}
