//! The looped matmul (`kernels::matmul_looped`, format 1.1 loops): bit-identical to the
//! unrolled `kernels::matmul` with the same tiling, ticks compared, program size independent
//! of the problem size; and the 8192 × 8192 × 8192 bf16 → fp32 run, checked on sampled output
//! tiles against an f64 reference (`#[ignore]`d: 80-200 s in a release build, depending on
//! the machine's load — 26.25 ms simulated, built in about 1 ms — far longer in debug; run it
//! with
//! `cargo test --release -p nrt-sim --test suite -- engine_loops_matmul:: --ignored --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Instant;

use common::*;
use nrt_sim::Instance;
use nrt_sim::engine::{
    DType, Device, ExecOptions, ExecReport, MAX_DESCRIPTORS, MAX_STREAM_INSTRS, MAX_TERMS, Program,
    TICKS_PER_SECOND, decode_f32, encode_f32, kernels,
};

fn quiet() -> ExecOptions {
    ExecOptions {
        record_events: false,
        ..ExecOptions::default()
    }
}

/// Runs `p` on `(lhs_t, rhs)` and returns the output's bits and the report.
fn run_bits(p: Program, a: &[f32], b: &[f32], in_dt: DType) -> (Vec<u32>, ExecReport) {
    let out_dt = p.tensors[2].dtype;
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let (a, b) = (encode_f32(in_dt, a), encode_f32(in_dt, b));
    let (outs, report) = dev
        .run(&lp, &[("lhs_t", &a), ("rhs", &b)], &quiet())
        .unwrap();
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    check_counters(&report);
    let bits = decode_f32(out_dt, &outs[0].1)
        .iter()
        .map(|x| x.to_bits())
        .collect();
    (bits, report)
}

/// The looped and the unrolled kernel on one shape: identical output bits; returns both
/// tick counts.
fn compare(m: u64, k: u64, n: u64, in_dt: DType, out_dt: DType) -> (u64, u64) {
    let a = data(11, (k * m) as usize, in_dt);
    let b = data(12, (k * n) as usize, in_dt);
    let looped = kernels::matmul_looped(m, k, n, in_dt, out_dt).unwrap();
    // Shapes too small for any loop are plain format-1.0 programs.
    let has_loops = looped.streams.iter().flatten().any(|i| i.is_loop());
    assert_eq!(looped.format_minor(), u16::from(has_loops), "{m}x{k}x{n}");
    let unrolled = kernels::matmul(m, k, n, in_dt, out_dt).unwrap();
    let (lb, lr) = run_bits(looped, &a, &b, in_dt);
    let (ub, ur) = run_bits(unrolled, &a, &b, in_dt);
    assert_eq!(lb.len(), ub.len());
    if let Some(i) = lb.iter().zip(&ub).position(|(x, y)| x != y) {
        panic!(
            "{m}x{k}x{n}: element {i}: looped {:#x}, unrolled {:#x}",
            lb[i], ub[i]
        );
    }
    let want = ref_matmul(&a, &b, m as usize, k as usize, n as usize, out_dt);
    for (i, (g, w)) in lb.iter().zip(&want).enumerate() {
        assert_eq!(*g, w.to_bits(), "{m}x{k}x{n} element {i}");
    }
    (lr.ticks, ur.ticks)
}

#[test]
fn looped_matmul_1024_cubed_matches_unrolled() {
    let (looped, unrolled) = compare(1024, 1024, 1024, DType::Bf16, DType::F32);
    println!("1024^3 bf16->fp32: looped {looped} ticks, unrolled {unrolled} ticks");
    // Each loop instruction is a tick of its sequencer; the body's waits for 0 too.
    let diff = looped.abs_diff(unrolled);
    assert!(diff * 100 <= unrolled, "{looped} vs {unrolled}");
}

#[test]
fn looped_matmul_ragged_shapes_match_unrolled() {
    // Partial M group, odd N blocks with a partial one, odd K tiles with a partial one.
    for &(m, k, n, i, o) in &[
        (700u64, 600u64, 1300u64, DType::Bf16, DType::F32),
        (130, 129, 70, DType::F16, DType::F16),
        (64, 260, 96, DType::F32, DType::F32),
        (1, 1, 1, DType::F32, DType::F32),
        (1100, 384, 1536, DType::Bf16, DType::Bf16),
    ] {
        let (looped, unrolled) = compare(m, k, n, i, o);
        println!("{m}x{k}x{n}: looped {looped} ticks, unrolled {unrolled} ticks");
        // Small ragged shapes have few iterations to hide the loop instructions and the
        // per-step DMA spread (see `matmul_looped`'s documentation): within 10%.
        let diff = looped.abs_diff(unrolled);
        assert!(diff * 10 <= unrolled, "{m}x{k}x{n}: {looped} vs {unrolled}");
    }
}

#[test]
fn looped_program_size_does_not_grow_with_the_problem() {
    // 2048^3 has every loop of 8192^3 (1024^3 has one N-block pair, which is no loop).
    let small = kernels::matmul_looped(2048, 2048, 2048, DType::Bf16, DType::F32).unwrap();
    let t = Instant::now();
    let big = kernels::matmul_looped(8192, 8192, 8192, DType::Bf16, DType::F32).unwrap();
    let built = t.elapsed();
    assert!(built.as_secs_f64() < 1.0, "built in {built:?}");
    assert!(big.streams.iter().all(|s| s.len() <= MAX_STREAM_INSTRS));
    assert!(big.descriptors.len() <= MAX_DESCRIPTORS && big.terms.len() <= MAX_TERMS);
    assert_eq!(small.instruction_count(), big.instruction_count());
    assert_eq!(small.descriptors.len(), big.descriptors.len());
    let bytes = big.to_bytes();
    assert_eq!(Program::from_bytes(&bytes).unwrap(), big);
    println!(
        "8192^3 looped: built in {built:?}, {} instructions, {} descriptors, {} terms, {} bytes",
        big.instruction_count(),
        big.descriptors.len(),
        big.terms.len(),
        bytes.len()
    );
    // The unrolled kernel cannot express it.
    let e = kernels::matmul(8192, 8192, 8192, DType::Bf16, DType::F32).unwrap_err();
    assert!(e.message().contains("DMA descriptors"), "{e}");
}

/// f64 reference of output element `(i, j)`.
fn ref_elem(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, i: usize, j: usize) -> f64 {
    (0..k)
        .map(|kk| f64::from(a[kk * m + i]) * f64::from(b[kk * n + j]))
        .sum()
}

#[test]
#[ignore = "the full 8192^3 run: 80-200 s in a release build, far longer in debug"]
fn looped_matmul_8192_cubed() {
    let (m, k, n) = (8192usize, 8192usize, 8192usize);
    let t = Instant::now();
    let p = kernels::matmul_looped(m as u64, k as u64, n as u64, DType::Bf16, DType::F32).unwrap();
    let build = t.elapsed();
    let a = data(21, k * m, DType::Bf16);
    let b = data(22, k * n, DType::Bf16);
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    dev.write_tensor(&lp, "lhs_t", &encode_f32(DType::Bf16, &a))
        .unwrap();
    dev.write_tensor(&lp, "rhs", &encode_f32(DType::Bf16, &b))
        .unwrap();
    let t = Instant::now();
    let report = dev.execute(&lp, &quiet()).unwrap();
    let host = t.elapsed();
    report.result().unwrap();
    assert!(report.hazards.is_empty());
    check_counters(&report);
    let out = decode_f32(DType::F32, &dev.read_tensor(&lp, "out").unwrap());
    // Sampled tiles: corners, the middle, and a spread of others (128 x 128 each, every
    // 8th element), against f64; bound: K products of values in [-1, 1), each rounded to
    // fp32 and summed in fp32: |error| <= K · 2^-24 · Σ|a·b| (Higham's bound, γ_K).
    let tiles = [
        (0, 0),
        (63, 63),
        (0, 63),
        (63, 0),
        (31, 17),
        (5, 42),
        (50, 9),
    ];
    let mut worst = 0.0f64;
    for &(ti, tj) in &tiles {
        for i in (ti * 128..ti * 128 + 128).step_by(8) {
            for j in (tj * 128..tj * 128 + 128).step_by(8) {
                let want = ref_elem(&a, &b, m, k, n, i, j);
                let abs: f64 = (0..k)
                    .map(|kk| (f64::from(a[kk * m + i]) * f64::from(b[kk * n + j])).abs())
                    .sum();
                let bound = k as f64 * f64::powi(2.0, -24) * abs;
                let err = (f64::from(out[i * n + j]) - want).abs();
                assert!(
                    err <= bound,
                    "({i}, {j}): {} vs {want}, bound {bound}",
                    out[i * n + j]
                );
                worst = worst.max(err / bound.max(f64::MIN_POSITIVE));
            }
        }
    }
    println!(
        "8192^3 bf16->fp32 looped: built in {build:?}; {} ticks = {:.3} ms simulated; host \
         {host:?}; worst error {:.3e} of the bound",
        report.ticks,
        report.ticks as f64 * 1e3 / TICKS_PER_SECOND as f64,
        worst
    );
}
