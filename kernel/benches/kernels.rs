//! Kernel-library benchmark: program build times against stated targets, and simulation
//! speed of library kernels against numpy (single-threaded, in the same run).
//!
//! `cargo bench -p nrt-kernel --bench kernels` (full sizes) or `… -- --quick` (the build
//! targets once each at full size, the simulation comparisons at smaller sizes). Prints a
//! table with PASS/FAIL per target and exits non-zero when a target is missed. numpy is
//! found as `python3` on `PATH` (run with `OPENBLAS_NUM_THREADS=1` and friends); when
//! `python3 -c "import numpy"` fails the numpy comparisons are skipped with a message and
//! their targets are not checked.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use nrt_kernel::library::{attention, conv, elementwise, matmul, norm, pool, softmax, transpose};
use nrt_kernel::{AluOp, DType, Program};
use nrt_sim::Instance;
use nrt_sim::engine::{Device, ExecOptions, encode_f32, kernels};

/// Build-time target of the 8192³ looped matmuls (hand-built and library).
const LOOPED_TARGET: Duration = Duration::from_secs(1);
/// Build-time target of each library kernel.
const LIBRARY_TARGET: Duration = Duration::from_millis(100);
/// Simulation / numpy time, at most (softmax, layernorm).
const NORM_RATIO_TARGET: f64 = 4.0;
/// Simulation / numpy time, at most (matmul: at least half numpy's speed).
const MATMUL_RATIO_TARGET: f64 = 2.0;

/// The fastest of `reps` runs of `f`, and `f`'s last value.
fn best_of<T>(reps: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..reps.max(1) {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        last = Some(v);
    }
    (best, last.unwrap())
}

/// Targets met and missed.
#[derive(Default)]
struct Verdicts {
    failed: Vec<String>,
}

impl Verdicts {
    fn check(&mut self, label: &str, ok: bool) -> &'static str {
        if ok {
            "PASS"
        } else {
            self.failed.push(label.to_string());
            "FAIL"
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn build_times(quick: bool, v: &mut Verdicts) {
    let reps = if quick { 1 } else { 3 };
    println!("## Program build times (release; best of {reps})");
    println!();
    println!("| kernel | instructions | build | target | verdict |");
    println!("| --- | ---: | ---: | ---: | --- |");
    let mut row = |label: &str, target: Duration, f: &dyn Fn() -> Program| {
        let (d, p) = best_of(reps, f);
        let verdict = v.check(&format!("build {label}"), d <= target);
        println!(
            "| {label} | {} | {:.2} ms | < {} ms | {verdict} |",
            p.instruction_count(),
            ms(d),
            target.as_millis()
        );
    };
    row(
        "`kernels::matmul_looped` 8192³ bf16 → fp32",
        LOOPED_TARGET,
        &|| kernels::matmul_looped(8192, 8192, 8192, DType::Bf16, DType::F32).unwrap(),
    );
    row(
        "library matmul 8192³ bf16 → fp32 (`for_range` loops)",
        LOOPED_TARGET,
        &|| {
            matmul::build(
                8192,
                8192,
                8192,
                DType::Bf16,
                DType::F32,
                &matmul::MatmulOpts::default(),
            )
            .unwrap()
        },
    );
    let t = LIBRARY_TARGET;
    for (heads, causal) in [(1, false), (1, true), (8, false), (8, true)] {
        let label = format!(
            "attention {heads} head(s), seq 2048, d 128, bf16{}",
            if causal { ", causal" } else { "" }
        );
        row(&label, t, &|| {
            attention::build_attention(heads, 2048, 128, DType::Bf16, causal).unwrap()
        });
    }
    row("conv 3×3 64→64, 56×56, pad 1, bf16", t, &|| {
        conv::build_conv2d(
            [1, 64, 56, 56],
            [64, 64, 3, 3],
            &conv::Conv2dConfig::new(1, 1, 1),
            DType::Bf16,
            false,
        )
        .unwrap()
    });
    row("conv 1×1 256→64, 56×56, bf16", t, &|| {
        conv::build_conv2d(
            [1, 256, 56, 56],
            [64, 256, 1, 1],
            &conv::Conv2dConfig::new(1, 0, 1),
            DType::Bf16,
            false,
        )
        .unwrap()
    });
    for (name, kind) in [
        ("max", pool::PoolKind::Max),
        (
            "average",
            pool::PoolKind::Average {
                count_include_pad: false,
            },
        ),
    ] {
        row(
            &format!("{name} pool 3×3 s2 p1 on [1, 64, 112, 112] bf16"),
            t,
            &|| {
                pool::build_pool2d(
                    [1, 64, 112, 112],
                    &pool::Pool2dConfig::new(kind, 3, 2, 1),
                    DType::Bf16,
                )
                .unwrap()
            },
        );
    }
    row("softmax [4096, 4096] fp32", t, &|| {
        softmax::build(4096, 4096, DType::F32, DType::F32).unwrap()
    });
    row("layernorm [4096, 4096] fp32 (affine)", t, &|| {
        norm::build_layernorm(4096, 4096, DType::F32, DType::F32, true, 1e-5).unwrap()
    });
    row("rmsnorm [4096, 4096] fp32 (affine)", t, &|| {
        norm::build_rmsnorm(4096, 4096, DType::F32, DType::F32, true, 1e-5).unwrap()
    });
    row("matmul 2048³ bf16 → fp32 (library)", t, &|| {
        matmul::build(
            2048,
            2048,
            2048,
            DType::Bf16,
            DType::F32,
            &matmul::MatmulOpts::default(),
        )
        .unwrap()
    });
    row("transpose [4096, 4096] fp32", t, &|| {
        transpose::build(4096, 4096, DType::F32).unwrap()
    });
    row("add [4096, 4096] + [4096] fp32 (broadcast)", t, &|| {
        elementwise::build(
            (&[4096, 4096], DType::F32),
            (&[4096], DType::F32),
            DType::F32,
            AluOp::Add,
        )
        .unwrap()
    });
    println!();
}

/// Runs `script` (which prints one float, seconds) under single-threaded BLAS.
fn numpy_seconds(script: &str) -> Option<f64> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("OMP_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// A numpy script timing `body` (over `x`, and `w` for the matmul) best of `reps`.
fn numpy_script(setup: &str, body: &str, reps: usize) -> String {
    format!(
        "import time, numpy as np\n\
         rng = np.random.default_rng(0)\n\
         {setup}\n\
         def f():\n\
         \x20   {body}\n\
         f()\n\
         best = 1e9\n\
         for _ in range({reps}):\n\
         \x20   t = time.perf_counter(); f(); best = min(best, time.perf_counter() - t)\n\
         print(best)\n"
    )
}

/// Host seconds (best of `reps`) of one execution of `p` on a fresh device with `inputs`.
fn simulate(p: Program, inputs: &[(&str, Vec<u8>)], reps: usize) -> (Duration, u64) {
    // Every run checks hazards, as a first execution does.
    let quiet = ExecOptions {
        record_events: false,
        recheck_hazards: true,
        ..ExecOptions::default()
    };
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (name, bytes) in inputs {
        dev.write_tensor(&lp, name, bytes).unwrap();
    }
    let (d, ticks) = best_of(reps, || {
        let r = dev.execute(&lp, &quiet).unwrap();
        assert!(r.hazards.is_empty(), "hazards: {:?}", r.hazards);
        r.result().unwrap();
        r.ticks
    });
    (d, ticks)
}

fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect()
}

/// A simulation case: label, program, inputs, numpy script, ratio target.
type SimCase = (String, Program, Vec<(&'static str, Vec<u8>)>, String, f64);

fn simulation_speed(quick: bool, v: &mut Verdicts) {
    let (rows, cols, mm, reps) = if quick {
        (1024, 1024, 512, 1)
    } else {
        (4096, 4096, 2048, 3)
    };
    let np_reps = if quick { 3 } else { 5 };
    println!(
        "## Simulation speed vs numpy (single thread; simulator best of {reps}, numpy best of \
         {np_reps} after a warm-up)"
    );
    println!();
    let have_numpy = numpy_seconds("import numpy; print(0.0)").is_some();
    if !have_numpy {
        println!(
            "numpy unavailable (`python3 -c 'import numpy'` failed): simulation times only, \
             ratio targets not checked"
        );
        println!();
    }
    println!(
        "| case | simulated ticks | simulator | numpy | simulator / numpy | target | verdict |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | --- |");
    let x = encode_f32(DType::F32, &data(rows * cols, 1));
    let x_setup = format!("x = rng.standard_normal(({rows}, {cols}), dtype=np.float32)");
    let cases: Vec<SimCase> = vec![
        (
            format!("softmax [{rows}, {cols}] fp32"),
            softmax::build(rows, cols, DType::F32, DType::F32).unwrap(),
            vec![("x", x.clone())],
            numpy_script(
                &x_setup,
                "e = np.exp(x - x.max(1, keepdims=True)); return e / e.sum(1, keepdims=True)",
                np_reps,
            ),
            NORM_RATIO_TARGET,
        ),
        (
            format!("layernorm [{rows}, {cols}] fp32 (no affine)"),
            norm::build_layernorm(rows, cols, DType::F32, DType::F32, false, 1e-5).unwrap(),
            vec![("x", x)],
            numpy_script(
                &x_setup,
                "m = x.mean(1, keepdims=True); v = x.var(1, keepdims=True); \
                 return (x - m) / np.sqrt(v + np.float32(1e-5))",
                np_reps,
            ),
            NORM_RATIO_TARGET,
        ),
        (
            format!("matmul {mm}³ bf16 → fp32 (library; numpy fp32)"),
            matmul::build(
                mm,
                mm,
                mm,
                DType::Bf16,
                DType::F32,
                &matmul::MatmulOpts::default(),
            )
            .unwrap(),
            vec![
                ("a", encode_f32(DType::Bf16, &data(mm * mm, 2))),
                ("b", encode_f32(DType::Bf16, &data(mm * mm, 3))),
            ],
            numpy_script(
                &format!(
                    "a = rng.random(({mm}, {mm}), dtype=np.float32); \
                     b = rng.random(({mm}, {mm}), dtype=np.float32)"
                ),
                "return np.matmul(a, b)",
                np_reps,
            ),
            MATMUL_RATIO_TARGET,
        ),
    ];
    for (label, p, inputs, script, target) in cases {
        let (sim, ticks) = simulate(p, &inputs, reps);
        let np = if have_numpy {
            numpy_seconds(&script)
        } else {
            None
        };
        match np {
            Some(np_s) => {
                let ratio = sim.as_secs_f64() / np_s;
                let verdict = v.check(&format!("simulate {label}"), ratio <= target);
                println!(
                    "| {label} | {ticks} | {:.1} ms | {:.1} ms | {ratio:.2}× | ≤ {target}× | \
                     {verdict} |",
                    ms(sim),
                    np_s * 1e3
                );
            }
            None => println!(
                "| {label} | {ticks} | {:.1} ms | — | — | ≤ {target}× | not checked |",
                ms(sim)
            ),
        }
    }
    println!();
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: then do nothing.
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--bench") {
        println!(
            "kernels bench: run with `cargo bench -p nrt-kernel --bench kernels [-- --quick]`"
        );
        return ExitCode::SUCCESS;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let start = Instant::now();
    let mut v = Verdicts::default();
    build_times(quick, &mut v);
    simulation_speed(quick, &mut v);
    println!(
        "total {:.1} s{}",
        start.elapsed().as_secs_f64(),
        if quick { " (--quick)" } else { "" }
    );
    if v.failed.is_empty() {
        println!("all targets met");
        ExitCode::SUCCESS
    } else {
        println!("targets missed: {}", v.failed.join("; "));
        ExitCode::FAILURE
    }
}
