//! Synchronous `execute` of a model with no program on the simulator: ns per call, with its
//! baseline measured in the same run — the driver's own submit of the same request, which is
//! the floor the runtime cannot go below. Writes the `execute` section of `docs/PERFORMANCE.md`
//! (`NRT_BENCH_QUICK=1`: print only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Instant;

use nrt_core::driver::{Binding, Driver, ExecRequest};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, Runtime};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};

/// The median over `runs` runs of `iters` calls of `f`, in ns per call.
fn median_ns(runs: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_nanos() as f64 / iters as f64
        })
        .collect();
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples[samples.len() / 2]
}

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
    let input = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "in")
        .unwrap();
    let output = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "out")
        .unwrap();
    // The baseline's request: what the runtime hands the driver for this execution.
    let binding = |t: &nrt_core::tensor::Tensor<'_>| {
        let (buffer, offset) = t.device_location().unwrap();
        Binding {
            index: 0,
            buffer,
            offset,
            size: t.size(),
        }
    };
    let (in_b, out_b) = ([binding(&input)], [binding(&output)]);
    let staged = rt.model(h).unwrap().staged().to_vec();
    let request = ExecRequest {
        subgraphs: &staged,
        inputs: &in_b,
        outputs: &out_b,
        timeout_secs: None,
    };
    let mut inputs = TensorSet::new();
    inputs.add("in", input);
    let mut outputs = TensorSet::new();
    outputs.add("out", output);

    let (runs, iters) = if quick { (3, 20_000) } else { (7, 500_000) };
    // Interleave the two measurements so both see the same machine state.
    let mut runtime = Vec::new();
    let mut floor = Vec::new();
    for _ in 0..3 {
        floor.push(median_ns(runs, iters, || {
            rt.driver().submit(&request).unwrap();
        }));
        runtime.push(median_ns(runs, iters, || {
            rt.execute(h, &inputs, &outputs).unwrap();
        }));
    }
    runtime.sort_by(|a, b| a.partial_cmp(b).unwrap());
    floor.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let (ns, base) = (runtime[1], floor[1]);
    let line = format!(
        "| sync `execute`, one 64-byte input and output on device, no program | {ns:.0} ns | \
         {base:.0} ns | {:.0} ns | {:.2}× | < 2 µs | 0 (test `exec_alloc`) |",
        ns - base,
        ns / base
    );
    println!("{line}");
    if quick {
        return;
    }
    let doc = format!(
        "## Execute\n\n\
         Figures written by `cargo bench -p nrt-tests --bench execute` (release build): each \
         time is the middle of 3 medians of {runs} runs of {iters} synchronous executions. \
         `Runtime::execute` is the whole call — guard, model reference, resolving both tensor \
         sets to I/O indices, bindings, the simulator's submit (a model without a program \
         completes at once, zero-filling its output) and release. The **baseline**, measured \
         in the same run and interleaved with it, is the simulator driver's `submit` of the \
         same request built once by hand: the floor below which no runtime over this driver \
         can go; the difference is what the runtime itself costs. Heap allocations per call \
         are counted by a counting global allocator in the test `tests/tests/exec_alloc.rs`.\n\n\
         | case | `Runtime::execute` | baseline: `Driver::submit` | runtime's own cost | \
         ratio | target | heap allocations per call |\n\
         | --- | ---: | ---: | ---: | ---: | --- | ---: |\n{line}\n"
    );
    let path = nrt_tests::write_performance_section("execute", &doc).unwrap();
    println!("wrote {}", path.display());
}
