//! Helper of the C ABI hot-path benchmark (`bindings-c/bench/run.sh`) and the C tests:
//!
//! ```text
//! cargo run --release -p nrt-tests --example hot_path_support -- neff FILE
//! cargo run --release -p nrt-tests --example hot_path_support -- execute ITERS
//! ```
//!
//! `neff FILE` writes the one-subgraph NEFF with no program and a 64-byte fp32 input `in` and
//! output `out` ([`nrt_tests::models::empty_neff`]). `execute ITERS` times the Rust-level
//! `Runtime::execute` of that model on the simulator (the same work as the C driver's
//! `nrt_execute` scenario: device tensors, one thread) and prints `rust_execute <calls per
//! second>`.

use std::process::ExitCode;

use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, Runtime};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["neff", path] => std::fs::write(path, nrt_tests::models::empty_neff())
            .map_err(|e| format!("cannot write {path}: {e}")),
        ["execute", n] => match n.parse::<u64>() {
            Ok(n) => execute(n),
            Err(e) => Err(format!("ITERS {n}: {e}")),
        },
        _ => Err("usage: hot_path_support neff FILE | execute ITERS".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hot_path_support: {e}");
            ExitCode::FAILURE
        }
    }
}

fn execute(iters: u64) -> Result<(), String> {
    let e = |e: nrt_core::Error| e.message().to_string();
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    rt.init(
        FrameworkType::NoFw,
        "",
        "",
        &[("NEURON_RT_LOG_LEVEL", "QUIET")],
    )
    .map_err(e)?;
    let h = rt
        .load(&nrt_tests::models::empty_neff(), 0, -1)
        .map_err(e)?;
    let input = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "in")
        .map_err(e)?;
    let output = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "out")
        .map_err(e)?;
    let mut inputs = TensorSet::new();
    inputs.add("in", input);
    let mut outputs = TensorSet::new();
    outputs.add("out", output);
    let t0 = thread_cpu_secs();
    for _ in 0..iters {
        rt.execute(h, &inputs, &outputs).map_err(e)?;
    }
    let dt = thread_cpu_secs() - t0;
    println!("rust_execute {:.0}", iters as f64 / dt);
    Ok(())
}

/// CPU time of the calling thread, in seconds: the loop is timed with it, as the C driver times
/// its `nrt_execute` loop, so that time spent descheduled on a shared machine does not count.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
