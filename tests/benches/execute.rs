//! Synchronous `execute` of a model with no program on the simulator: ns per call. Writes the
//! `execute` section of `docs/PERFORMANCE.md` (`NRT_BENCH_QUICK=1`: print only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, Runtime};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};

fn main() {
    let quick = std::env::var_os("NRT_BENCH_QUICK").is_some();
    let neff_bytes = nrt_tests::models::empty_neff();
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    rt.init(
        FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "ERROR")],
    )
    .unwrap();
    let h = rt.load(&neff_bytes, 0, -1).unwrap();
    let mut inputs = TensorSet::new();
    inputs.add(
        "in",
        rt.tensor_allocate(TensorPlacement::Device, 0, 64, "in")
            .unwrap(),
    );
    let mut outputs = TensorSet::new();
    outputs.add(
        "out",
        rt.tensor_allocate(TensorPlacement::Device, 0, 64, "out")
            .unwrap(),
    );
    let iters = if quick { 20_000 } else { 500_000 };
    let mut samples = Vec::new();
    for _ in 0..if quick { 3 } else { 7 } {
        let t = Instant::now();
        for _ in 0..iters {
            rt.execute(h, &inputs, &outputs).unwrap();
        }
        samples.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let ns = samples[samples.len() / 2];
    let line = format!(
        "| sync `execute`, one 64-byte input and output on device, no program | {ns:.0} ns | < 2 µs | 0 (test `exec_alloc`) |"
    );
    println!("{line}");
    if quick {
        return;
    }
    let doc = format!(
        "## Execute\n\n\
         Figures written by `cargo bench -p nrt-tests --bench execute` (release build): the \
         median of 7 runs of {iters} synchronous executions through `Runtime::execute` — guard, \
         model reference, I/O validation, bindings, the simulator's submit (a model without a \
         program completes at once, zero-filling its output) and release. Heap allocations per \
         call are counted by a counting global allocator in the test \
         `tests/tests/exec_alloc.rs`.\n\n\
         | case | time per call | target | heap allocations per call |\n\
         | --- | ---: | --- | ---: |\n{line}\n"
    );
    let path = nrt_tests::write_performance_section("execute", &doc).unwrap();
    println!("wrote {}", path.display());
}
