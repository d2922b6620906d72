//! Registry hot path: resolve + release, against a baseline built the libnrt way
//! (`RwLock<HashMap<u32, Arc<Model>>>`, an atomic refcount bumped under the read lock), measured
//! in the same run. Writes `docs/PERFORMANCE.md`.
//!
//! ```text
//! cargo bench -p nrt-tests --bench registry            # full run, rewrites docs/PERFORMANCE.md
//! NRT_BENCH_QUICK=1 cargo bench -p nrt-tests --bench registry   # short run, prints only
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, RwLock, mpsc};
use std::time::Instant;

use nrt_core::registry::{Handle, Registry};
use nrt_core::{FrameworkType, Runtime};
use nrt_host::{StdHost, heavy_barrier, reader_id};
use nrt_sim::{Instance, SimDriver};
use nrt_tests::models::model;

/// The libnrt design: a process-wide rwlock over a hash map, refcount bumped under the lock.
struct Baseline {
    map: RwLock<HashMap<u32, Arc<BaselineModel>>>,
}

struct BaselineModel {
    ref_count: AtomicU64,
    _model: nrt_core::model::Model,
}

impl Baseline {
    /// `db_get_nn_ref_count`: read lock, hash lookup, refcount +1 under the lock, unlock;
    /// returns the model's address (the refcount, not the lock, keeps it alive).
    fn resolve(&self, id: u32) -> Option<*const BaselineModel> {
        let map = self.map.read().unwrap();
        let m = map.get(&id)?;
        m.ref_count.fetch_add(1, Ordering::AcqRel);
        Some(Arc::as_ptr(m))
    }

    /// `nn_ref_decrement`: no lock.
    fn release(m: *const BaselineModel) {
        // SAFETY: the benchmark never removes a model, so the pointer stays valid.
        unsafe { &*m }.ref_count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Which model thread `t` uses.
fn pick(scenario: Scenario, t: usize) -> usize {
    match scenario {
        Scenario::TwoDistinct => t,
        _ => 0,
    }
}

#[derive(Clone, Copy)]
enum Scenario {
    OneThread,
    TwoDistinct,
    TwoSame,
}

impl Scenario {
    fn threads(self) -> usize {
        match self {
            Scenario::OneThread => 1,
            _ => 2,
        }
    }
    fn label(self) -> &'static str {
        match self {
            Scenario::OneThread => "1 thread",
            Scenario::TwoDistinct => "2 threads, distinct models",
            Scenario::TwoSame => "2 threads, same model",
        }
    }
}

type Job<'a> = Box<dyn FnOnce() + Send + 'a>;

/// One measured operation, by worker index.
type Op<'a> = Box<dyn Fn(usize) + Sync + 'a>;

/// Two long-lived worker threads (so each keeps its registry reader row, as a server's threads
/// do) that run measurement jobs.
struct Pool<'a> {
    jobs: Vec<mpsc::Sender<Job<'a>>>,
    done: mpsc::Receiver<()>,
}

impl<'a> Pool<'a> {
    fn new(s: &'a std::thread::Scope<'a, '_>, threads: usize) -> Self {
        let (done_tx, done) = mpsc::channel();
        let jobs = (0..threads)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job<'a>>();
                let done_tx = done_tx.clone();
                s.spawn(move || {
                    for job in rx {
                        job();
                        done_tx.send(()).unwrap();
                    }
                });
                tx
            })
            .collect();
        Self { jobs, done }
    }

    /// Runs `op(thread_index)` `iters` times on each of `threads` workers; returns aggregate
    /// ns per operation (wall time / total operations) — lower is better.
    fn run(&self, threads: usize, iters: u64, op: &'a (dyn Fn(usize) + Sync)) -> f64 {
        // The workers time themselves: the machine may have fewer cores than workers plus
        // this thread, so this thread's own clock readings could be delayed.
        let barrier = Arc::new(Barrier::new(threads));
        let (times_tx, times) = mpsc::channel();
        for t in 0..threads {
            let barrier = Arc::clone(&barrier);
            let times_tx = times_tx.clone();
            self.jobs[t]
                .send(Box::new(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(t);
                    }
                    times_tx.send((start, Instant::now())).unwrap();
                }))
                .unwrap();
        }
        let spans: Vec<(Instant, Instant)> = (0..threads).map(|_| times.recv().unwrap()).collect();
        for _ in 0..threads {
            self.done.recv().unwrap();
        }
        let start = spans.iter().map(|s| s.0).min().unwrap();
        let end = spans.iter().map(|s| s.1).max().unwrap();
        (end - start).as_nanos() as f64 / (iters as f64 * threads as f64)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

struct Row {
    scenario: Scenario,
    baseline: f64,
    registry: f64,
    asym: f64,
    runtime: f64,
}

fn main() {
    let quick = std::env::var_os("NRT_BENCH_QUICK").is_some();
    let iters: u64 = if quick { 200_000 } else { 5_000_000 };
    let reps = if quick { 3 } else { 7 };

    // Ours: the registry itself, and the runtime's guarded `model()`.
    let registry: Registry<nrt_core::model::Model> = Registry::new(256);
    let ours: Vec<Handle> = (0..2)
        .map(|i| registry.insert(model(&format!("m{i}"), 0)).unwrap())
        .collect();
    let asym: Registry<nrt_core::model::Model> = Registry::with_heavy_barrier(256, heavy_barrier());
    let asym_handles: Vec<Handle> = (0..2)
        .map(|i| asym.insert(model(&format!("a{i}"), 0)).unwrap())
        .collect();
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    rt.init(
        FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "QUIET")],
    )
    .unwrap();
    let rt_handles: Vec<_> = (0..2)
        .map(|i| rt.register_model(model(&format!("r{i}"), 0)).unwrap())
        .collect();
    // Fill both with 256 models so lookups are not in a trivially small table.
    for i in 2..256 {
        registry.insert(model(&format!("m{i}"), 0)).unwrap();
        asym.insert(model(&format!("a{i}"), 0)).unwrap();
        rt.register_model(model(&format!("r{i}"), 0)).unwrap();
    }

    let baseline = Baseline {
        map: RwLock::new(HashMap::new()),
    };
    for id in 0..256u32 {
        baseline.map.write().unwrap().insert(
            id,
            Arc::new(BaselineModel {
                ref_count: AtomicU64::new(0),
                _model: model("b", 0),
            }),
        );
    }

    let baseline_op = |t: usize, scenario: Scenario| {
        let m = baseline
            .resolve(black_box(pick(scenario, t) as u32))
            .unwrap();
        black_box(m);
        Baseline::release(m);
    };
    let registry_op = |t: usize, scenario: Scenario| {
        let m = registry
            .resolve(black_box(ours[pick(scenario, t)]), reader_id())
            .unwrap();
        black_box(&*m);
    };
    let asym_op = |t: usize, scenario: Scenario| {
        let m = asym
            .resolve(black_box(asym_handles[pick(scenario, t)]), reader_id())
            .unwrap();
        black_box(&*m);
    };
    let runtime_op = |t: usize, scenario: Scenario| {
        let m = rt.model(black_box(rt_handles[pick(scenario, t)])).unwrap();
        black_box(&*m);
    };
    let scenarios = [
        Scenario::OneThread,
        Scenario::TwoDistinct,
        Scenario::TwoSame,
    ];
    let ops: Vec<[Op<'_>; 4]> = scenarios
        .iter()
        .map(|&sc| -> [Op<'_>; 4] {
            [
                Box::new(move |t| baseline_op(t, sc)),
                Box::new(move |t| registry_op(t, sc)),
                Box::new(move |t| asym_op(t, sc)),
                Box::new(move |t| runtime_op(t, sc)),
            ]
        })
        .collect();
    let mut rows = Vec::new();
    std::thread::scope(|s| {
        let pool = Pool::new(s, 2);
        for (scenario, [b_op, r_op, a_op, g_op]) in scenarios.iter().zip(&ops) {
            let mut b = Vec::new();
            let mut r = Vec::new();
            let mut a = Vec::new();
            let mut g = Vec::new();
            for _ in 0..reps {
                b.push(pool.run(scenario.threads(), iters, &**b_op));
                r.push(pool.run(scenario.threads(), iters, &**r_op));
                a.push(pool.run(scenario.threads(), iters, &**a_op));
                g.push(pool.run(scenario.threads(), iters, &**g_op));
            }
            rows.push(Row {
                scenario: *scenario,
                baseline: median(b),
                registry: median(r),
                asym: median(a),
                runtime: median(g),
            });
        }
    });

    let footprint = Registry::<nrt_core::model::Model>::new(256).footprint_bytes();
    let row_count = nrt_core::registry::EXCLUSIVE_ROWS + nrt_core::registry::SHARED_ROWS;
    let mut out = String::new();
    writeln!(
        out,
        "| scenario | baseline | registry, fences | speed-up | registry, membarrier | speed-up | `Runtime::model` | speed-up | target |"
    )
    .unwrap();
    writeln!(
        out,
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    .unwrap();
    for row in &rows {
        let target = match row.scenario {
            Scenario::OneThread => "≥ 3×",
            Scenario::TwoDistinct => "≥ 8×",
            Scenario::TwoSame => "≥ 3×",
        };
        writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1}× | {:.1} | {:.1}× | {:.1} | {:.1}× | {} |",
            row.scenario.label(),
            row.baseline,
            row.registry,
            row.baseline / row.registry,
            row.asym,
            row.baseline / row.asym,
            row.runtime,
            row.baseline / row.runtime,
            target
        )
        .unwrap();
    }
    println!("{out}");
    println!("registry footprint for 256 models: {footprint} bytes");

    if quick {
        return;
    }
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let doc = format!(
        "## Model registry: resolve + release\n\n\
         Figures written by `cargo bench -p nrt-tests --bench registry` (release build), on {cpu}, \
         {cores} hardware threads. Each cell is the median of {reps} runs of {iters} operations per \
         thread; ns/op is wall time divided by all operations of all threads (aggregate), so for \
         two threads a speed-up is a ratio of aggregate throughput.\n\n\
         One operation takes a reference to a loaded model and releases it. The **baseline** is \
         the libnrt design measured in the same run: `std::sync::RwLock<HashMap<u32, \
         Arc<Model>>>`, read lock, hash lookup, atomic refcount increment under the lock, unlock, \
         and the decrement at release (no lock). **registry, fences** is \
         `nrt_core::registry::Registry` (slot table, a reader row per thread counted with plain \
         loads and stores, one SeqCst fence per resolve; see `core/src/registry.rs`); \
         **registry, membarrier** is the same table with the asymmetric barrier of the std host \
         (Linux `membarrier`): readers use a compiler fence and the unloader pays instead; \
         **`Runtime::model`** is the public entry (state guard, fork check, membarrier \
         registry). All ns/op columns are nanoseconds per operation; the tables \
         hold 256 models. The contended baseline (two threads, one model) varies from run to \
         run with how the threads interleave on the lock and refcount lines.\n\n{out}\n\
         Fixed memory footprint of the registry for 256 models: **{footprint} bytes** \
         ({kib:.1} KiB: 256 slots of {slot} bytes holding the model records inline, plus {rows} \
         reader rows of 256 × 4-byte counters, each row on its own cache lines).\n",
        kib = footprint as f64 / 1024.0,
        slot = (footprint
            - row_count * 256 * 4
            - std::mem::size_of::<Registry<nrt_core::model::Model>>())
            / 256,
        rows = row_count,
    );
    let path = nrt_tests::write_performance_section("registry", &doc).unwrap();
    println!("wrote {}", path.display());
}
