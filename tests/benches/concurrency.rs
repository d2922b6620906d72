//! Concurrency of the simulator, each figure against its baseline measured in the same run:
//!
//! * **Two cores, two threads.** Two matmul models loaded on the two cores of one trn1
//!   device, executed through `Runtime::execute` from two host threads at once, against one
//!   thread executing the same models alternately. The ratio is the throughput gained.
//! * **LNC-2.** A model whose two subgraphs each compute half of a matmul's rows, run together
//!   on the two physical cores of a trn2 logical core (`Device::execute_group`: two host
//!   threads in lock step), against the same two subgraphs run back to back on one thread.
//! * **Host baseline.** In each run of the two-core case, right after it: the functional GEMM
//!   alone (no simulator state shared) from one thread and from two — what this host gives two
//!   threads of that work, which bounds the two-core ratio; each run's two-core ratio is also
//!   given over it.
//!
//! Asserts nothing; writes the `concurrency` section of `docs/PERFORMANCE.md`
//! (`NRT_BENCH_QUICK=1`: print only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, ModelHandle, Runtime};
use nrt_host::StdHost;
use nrt_sim::engine::{DType, Device, ExecOptions, LoadedProgram, Program, encode_f32, kernels};
use nrt_sim::{Instance, SimDriver};

type Rt = Runtime<SimDriver, StdHost>;

/// The matmul of the benchmark: `lhs_t` `[K, M]` by `rhs` `[K, N]`, fp32, with its tensors
/// renamed by `suffix` (so two subgraphs of one model have their own).
fn matmul(m: u64, k: u64, n: u64, suffix: &str) -> Program {
    let mut p = kernels::matmul(m, k, n, DType::F32, DType::F32).unwrap();
    for t in &mut p.tensors {
        if t.name == "lhs_t" || t.name == "out" {
            t.name.push_str(suffix);
        }
    }
    p
}

fn values(n: u64, seed: u64) -> Vec<u8> {
    let v: Vec<f32> = (0..n)
        .map(|i| ((i.wrapping_mul(seed) % 17) as f32 - 8.0) / 8.0)
        .collect();
    encode_f32(DType::F32, &v)
}

struct Model<'r> {
    handle: ModelHandle,
    inputs: TensorSet<'r>,
    outputs: TensorSet<'r>,
}

/// Loads `program` as a model on logical core `core` with its inputs and output allocated.
fn load<'r>(rt: &'r Rt, program: &Program, core: i32) -> Model<'r> {
    let neff = nrt_sim::neff::neff_from_programs("mm", std::slice::from_ref(program)).unwrap();
    let handle = rt.load(&neff, core, 1).unwrap();
    let mut inputs = TensorSet::new();
    let mut outputs = TensorSet::new();
    for (i, t) in program.tensors.iter().enumerate() {
        let size = t.size_bytes().unwrap();
        let tensor = rt
            .tensor_allocate(TensorPlacement::Device, core, size, &t.name)
            .unwrap();
        match t.kind {
            nrt_sim::engine::TensorKind::Input => {
                tensor
                    .write(0, &values(size / 4, 3 + i as u64 * 7))
                    .unwrap();
                inputs.add(&t.name, tensor);
            }
            nrt_sim::engine::TensorKind::Output => outputs.add(&t.name, tensor),
            _ => {}
        }
    }
    Model {
        handle,
        inputs,
        outputs,
    }
}

fn exec(rt: &Rt, m: &Model<'_>) {
    rt.execute(m.handle, &m.inputs, &m.outputs).unwrap();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Per run: products per second of the functional GEMM alone (`tensor_matmul`, 512³ fp32,
/// each of two operand sets its own) from one thread alternating between the sets, and from
/// two threads, one per set — what the host gives two threads of the same kind of work, with
/// no simulator state shared.
struct HostGemm {
    sets: [(Vec<f32>, Vec<f32>, Vec<f32>); 2],
}

impl HostGemm {
    const N: usize = 512;

    fn new() -> Self {
        let set = |seed: u64| {
            let v: Vec<f32> = (0..(Self::N * Self::N) as u64)
                .map(|i| ((i.wrapping_mul(seed) % 17) as f32 - 8.0) / 8.0)
                .collect();
            (v.clone(), v, vec![0.0; Self::N * Self::N])
        };
        Self {
            sets: [set(3), set(5)],
        }
    }

    fn product(set: &mut (Vec<f32>, Vec<f32>, Vec<f32>)) {
        let n = Self::N;
        nrt_sim::engine::tensor_matmul(&set.0, &set.1, &mut set.2, n, n, n).unwrap();
    }

    /// One run: (per second from one thread, per second from two threads).
    fn run(&mut self, iters: usize) -> (f64, f64) {
        let t = Instant::now();
        for _ in 0..iters {
            for set in &mut self.sets {
                Self::product(set);
            }
        }
        let one = (2 * iters) as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::thread::scope(|s| {
            for set in &mut self.sets {
                s.spawn(move || {
                    for _ in 0..iters {
                        Self::product(set);
                    }
                });
            }
        });
        (one, (2 * iters) as f64 / t.elapsed().as_secs_f64())
    }
}

/// Per run of [`two_cores`]: executions (products) per second from one thread and from two.
#[derive(Default)]
struct Rates {
    one: Vec<f64>,
    two: Vec<f64>,
}

/// Two models on the two cores of one device: per run, executions per second from one
/// thread and from two threads; and in the same runs, right after, the host's own figures for
/// the functional GEMM alone ([`HostGemm`]).
fn two_cores(reps: usize, iters: usize) -> (Rates, Rates) {
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    rt.init(
        FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "ERROR")],
    )
    .unwrap();
    let p = matmul(512, 512, 512, "");
    let models = [load(&rt, &p, 0), load(&rt, &p, 1)];
    for m in &models {
        exec(&rt, m);
    }
    let (mut one, mut two) = (Vec::new(), Vec::new());
    let mut gemm = HostGemm::new();
    let mut host = Rates::default();
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            for m in &models {
                exec(&rt, m);
            }
        }
        one.push((2 * iters) as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::thread::scope(|s| {
            for m in &models {
                let rt = &rt;
                s.spawn(move || {
                    for _ in 0..iters {
                        exec(rt, m);
                    }
                });
            }
        });
        two.push((2 * iters) as f64 / t.elapsed().as_secs_f64());
        let (o, w) = gemm.run(iters);
        host.one.push(o);
        host.two.push(w);
    }
    (Rates { one, two }, host)
}

/// An LNC-2 model's two subgraphs on the two physical cores of a trn2 logical core: per run,
/// ms per execution back to back and in lock step; the simulated µs of each way.
fn lnc2(reps: usize, iters: usize) -> (Vec<f64>, Vec<f64>, f64, f64) {
    let dev = Device::new(Instance::Trn2);
    let halves: Vec<LoadedProgram> = (0..2u32)
        .map(|c| {
            let lp = dev.load(c, matmul(512, 512, 512, &c.to_string())).unwrap();
            for t in &lp.program().tensors {
                if t.kind == nrt_sim::engine::TensorKind::Input {
                    let size = t.size_bytes().unwrap();
                    dev.write_tensor(&lp, &t.name, &values(size / 4, 5 + u64::from(c)))
                        .unwrap();
                }
            }
            lp
        })
        .collect();
    let opts = ExecOptions::default();
    let group: Vec<(&LoadedProgram, &[(usize, u64)])> =
        halves.iter().map(|lp| (lp, &[][..])).collect();
    let apart: u64 = halves
        .iter()
        .map(|lp| dev.execute(lp, &opts).unwrap().ticks)
        .max()
        .unwrap();
    let together = dev
        .execute_group(&group, &opts)
        .unwrap()
        .iter()
        .map(|r| r.ticks)
        .max()
        .unwrap();
    let (mut seq, mut par) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..iters {
            for lp in &halves {
                dev.execute(lp, &opts).unwrap().result().unwrap();
            }
        }
        seq.push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
        let t = Instant::now();
        for _ in 0..iters {
            for r in dev.execute_group(&group, &opts).unwrap() {
                r.result().unwrap();
            }
        }
        par.push(t.elapsed().as_secs_f64() * 1e3 / iters as f64);
    }
    let us = |ticks: u64| ticks as f64 / 1400.0;
    (seq, par, us(apart), us(together))
}

/// The host CPU as `/proc/cpuinfo` names it, with its family and model numbers (which tell
/// generations apart where the name does not); "unknown CPU" elsewhere.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    };
    match (field("model name"), field("cpu family"), field("model")) {
        (Some(name), Some(family), Some(model)) => {
            format!("{name}, family {family} model {model}")
        }
        (Some(name), ..) => name,
        _ => "unknown CPU".to_string(),
    }
}

fn main() {
    let quick = std::env::var_os("NRT_BENCH_QUICK").is_some();
    let (reps, iters) = if quick { (3, 10) } else { (15, 40) };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (sim, host) = two_cores(reps, iters);
    let (ones, twos) = (sim.one, sim.two);
    let (seqs, pars, apart, together) = lnc2(reps, iters);
    // Each run's ratio (its two measurements were taken back to back): the median and the
    // range over the runs.
    let spread = |r: Vec<f64>| -> (f64, f64, f64) {
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(0.0, f64::max);
        (median(r), lo, hi)
    };
    let ratios =
        |num: &[f64], den: &[f64]| spread(num.iter().zip(den).map(|(a, b)| a / b).collect());
    let (one, two) = (median(ones.clone()), median(twos.clone()));
    let (r1, lo1, hi1) = ratios(&twos, &ones);
    let (h1, h2) = (median(host.one.clone()), median(host.two.clone()));
    let (rh, loh, hih) = ratios(&host.two, &host.one);
    // Per run, the two-core ratio over the host's: how much of what the host gives two
    // threads the simulator keeps.
    let (rr, lor, hir) = spread(
        (0..twos.len())
            .map(|i| (twos[i] / ones[i]) / (host.two[i] / host.one[i]))
            .collect(),
    );
    let (seq, par) = (median(seqs.clone()), median(pars.clone()));
    let (r2, lo2, hi2) = ratios(&seqs, &pars);
    let l1 = format!(
        "| two matmul models (512×512×512 fp32) on the two cores of a trn1 device, \
         `Runtime::execute` | {two:.0} exec/s from two threads | {one:.0} exec/s from one \
         thread, alternating | {r1:.2}× ({lo1:.2}–{hi1:.2}); per run over the host \
         baseline's: {rr:.2} ({lor:.2}–{hir:.2}) | ≥ 1.8× |"
    );
    let l2 = format!(
        "| LNC-2 model: two subgraphs (each 512×512×512 fp32) on a trn2 logical core, \
         `Device::execute_group` | {par:.2} ms per execution in lock step | {seq:.2} ms back \
         to back | {r2:.2}× ({lo2:.2}–{hi2:.2}) | ≥ 1.6× |"
    );
    let l0 = format!(
        "| host baseline: the functional GEMM alone (`tensor_matmul`, 512³ fp32, two operand \
         sets), in the same runs as the row below | {h2:.0} products/s from two threads | \
         {h1:.0} products/s from one thread, alternating | {rh:.2}× ({loh:.2}–{hih:.2}) | \
         (what this host gives) |"
    );
    let cpu = cpu_model();
    println!("host CPUs: {cpus} ({cpu})\n{l0}\n{l1}\n{l2}");
    println!("simulated: each subgraph alone {apart:.2} µs, both in lock step {together:.2} µs");
    if quick {
        return;
    }
    let doc = format!(
        "## Concurrency\n\n\
         Figures written by `cargo bench -p nrt-tests --bench concurrency` (release build) on a \
         machine with {cpus} host CPUs ({cpu}): each is the median of {reps} runs of {iters} \
         executions per model, the measurement and its baseline interleaved in each run; a \
         ratio is the median of the runs' ratios, with their range in brackets. No \
         device-wide lock is held for an execution, so executions on different cores run on \
         their host threads at once; the subgraphs of one model run together on their own \
         threads in lock step (`nrt_sim::engine::share`).\n\n\
         A ratio above 2× is possible: the one-thread baseline alternates between the two \
         cores, whose memories (24 MiB of SBUF each) then compete for one CPU's caches, \
         while each of the two threads keeps to one core (our reading of it, not measured).\n\n\
         The first row is the host's own scaling for the same kind of work with no \
         simulator state shared: the work each execution is mostly made of, the functional \
         GEMM, run alone from one and from two threads in the same runs as the two-core case \
         (right after it in each run). On a host whose two CPUs are not both free, neither \
         reaches 2×; the two-core ratio is then to be read against it.\n\n\
         | case | measured | baseline (same run) | ratio | target |\n\
         | --- | ---: | ---: | ---: | --- |\n{l0}\n{l1}\n{l2}\n\n\
         Simulated time of the LNC-2 case: each subgraph alone {apart:.2} µs; both together \
         {together:.2} µs (a trn2 device's 3 TB/s covers all its engines at their peaks, so \
         its cores never hold each other back; on trn1 they can, and lock-stepped subgraphs \
         then meet every 1,024 ticks).\n"
    );
    let path = nrt_tests::write_performance_section("concurrency", &doc).unwrap();
    println!("wrote {}", path.display());
}
