//! Builders checked against reference implementations, and determinism.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_sim::engine::{ActFunc, DType, kernels};

fn matmul_case(m: usize, k: usize, n: usize, in_dt: DType, out_dt: DType) {
    let a = data(1, k * m, in_dt);
    let b = data(2, k * n, in_dt);
    let p = kernels::matmul(m as u64, k as u64, n as u64, in_dt, out_dt).unwrap();
    let (outs, report) = run(p, &[("lhs_t", in_dt, &a), ("rhs", in_dt, &b)]);
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    check_counters(&report);
    let want = ref_matmul(&a, &b, m, k, n, out_dt);
    let got = &outs[0].1;
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{m}x{k}x{n} {in_dt}->{out_dt} element {i}: {g} vs {w}"
        );
    }
}

#[test]
fn matmul_bf16_bit_exact_ragged_tiles() {
    // Two K tiles (accumulate), two M groups' worth of tiles in one group, two N blocks.
    matmul_case(200, 300, 600, DType::Bf16, DType::F32);
}

#[test]
fn matmul_fp16_to_fp16_bit_exact() {
    matmul_case(130, 129, 70, DType::F16, DType::F16);
}

#[test]
fn matmul_fp32_bit_exact() {
    matmul_case(64, 260, 96, DType::F32, DType::F32);
}

#[test]
fn matmul_many_m_tiles_uses_both_bank_sets() {
    // Five M tiles: a group of four and a group of one; 1 x 1 edge tiles elsewhere.
    matmul_case(520, 7, 3, DType::Bf16, DType::Bf16);
    matmul_case(1, 1, 1, DType::F32, DType::F32);
}

#[test]
fn elementwise_add_and_mul() {
    for (op, f) in [
        (
            kernels::Elementwise::Add,
            (|x: f32, y: f32| x + y) as fn(f32, f32) -> f32,
        ),
        (kernels::Elementwise::Mul, |x, y| x * y),
    ] {
        for dt in [DType::F32, DType::Bf16, DType::F16] {
            let (rows, cols) = (300, 5000);
            let a = data(3, rows * cols, dt);
            let b = data(4, rows * cols, dt);
            let p = kernels::elementwise(op, rows as u64, cols as u64, dt).unwrap();
            let (outs, report) = run(p, &[("a", dt, &a), ("b", dt, &b)]);
            assert!(report.hazards.is_empty());
            check_counters(&report);
            for (i, g) in outs[0].1.iter().enumerate() {
                let w = nrt_sim::engine::round_through(dt, f(a[i], b[i]));
                assert_eq!(g.to_bits(), w.to_bits(), "{op:?} {dt} element {i}");
            }
        }
    }
}

#[test]
fn elementwise_int32() {
    use nrt_sim::Instance;
    use nrt_sim::engine::{Device, ExecOptions};
    let p = kernels::elementwise(kernels::Elementwise::Mul, 3, 4, DType::I32).unwrap();
    let dev = Device::new(Instance::Inf2);
    let lp = dev.load(1, p).unwrap();
    let a: Vec<u8> = (0..12i32)
        .flat_map(|v| (v * 1_000_000).to_le_bytes())
        .collect();
    let b: Vec<u8> = (0..12i32).flat_map(|v| (v - 5).to_le_bytes()).collect();
    let (outs, _) = dev
        .run(&lp, &[("a", &a), ("b", &b)], &ExecOptions::default())
        .unwrap();
    let got: Vec<i32> = outs[0]
        .1
        .chunks(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let want: Vec<i32> = (0..12i32)
        .map(|v| (v * 1_000_000).wrapping_mul(v - 5))
        .collect();
    assert_eq!(got, want);
}

/// Stated bound: activations are evaluated in binary64 and rounded once, so they are within
/// 1 ULP of the output type of the exact value (and the argument `x*scale+bias` is rounded to
/// fp32 first).
#[test]
fn bias_activation_within_one_ulp() {
    for func in [
        ActFunc::Identity,
        ActFunc::Relu,
        ActFunc::Exp,
        ActFunc::Tanh,
        ActFunc::Gelu,
    ] {
        for dt in [DType::F32, DType::Bf16] {
            let (f, n) = (130, 300);
            let x: Vec<f32> = data(5, f * n, dt).iter().map(|v| v * 6.0).collect();
            let x: Vec<f32> = x
                .iter()
                .map(|&v| nrt_sim::engine::round_through(dt, v))
                .collect();
            let bias = data(6, f, dt);
            let p = kernels::bias_activation(func, f as u64, n as u64, dt).unwrap();
            let (outs, report) = run(p, &[("x", dt, &x), ("bias", dt, &bias)]);
            assert!(report.hazards.is_empty());
            check_counters(&report);
            for (i, g) in outs[0].1.iter().enumerate() {
                let t = x[i] * 1.0 + bias[i / n];
                let w = ref_act(func, f64::from(t)) as f32;
                let w = nrt_sim::engine::round_through(dt, w);
                assert!(ulps(dt, *g, w) <= 1, "{func:?} {dt} x={t}: {g} vs {w}");
            }
        }
    }
}

#[test]
fn two_layer_mlp_matches_reference() {
    let (batch, d_in, hidden, d_out) = (64usize, 200usize, 150usize, 20usize);
    let dt = DType::Bf16;
    let x = data(7, d_in * batch, dt);
    let w1 = data(8, d_in * hidden, dt);
    let b1 = data(9, hidden, dt);
    let w2 = data(10, hidden * d_out, dt);
    let b2 = data(11, d_out, dt);
    let p = kernels::mlp(
        batch as u64,
        d_in as u64,
        hidden as u64,
        d_out as u64,
        dt,
        ActFunc::Relu,
    )
    .unwrap();
    let (outs, report) = run(
        p,
        &[
            ("x_t", dt, &x),
            ("w1", dt, &w1),
            ("b1", dt, &b1),
            ("w2", dt, &w2),
            ("b2", dt, &b2),
        ],
    );
    assert!(report.hazards.is_empty(), "{:?}", report.error);
    check_counters(&report);
    // Reference with the same order: h_t = relu(W1ᵀ x_t + b1) rounded to bf16, then y_t.
    let h_acc = ref_matmul(&w1, &x, hidden, d_in, batch, DType::F32);
    let h: Vec<f32> = h_acc
        .iter()
        .enumerate()
        .map(|(i, v)| nrt_sim::engine::round_through(dt, (v * 1.0 + b1[i / batch]).max(0.0)))
        .collect();
    let y_acc = ref_matmul(&w2, &h, d_out, hidden, batch, DType::F32);
    let y: Vec<f32> = y_acc
        .iter()
        .enumerate()
        .map(|(i, v)| nrt_sim::engine::round_through(dt, v * 1.0 + b2[i / batch]))
        .collect();
    assert_eq!(outs[0].0, "y_t");
    for (i, (g, w)) in outs[0].1.iter().zip(&y).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "y_t[{i}]: {g} vs {w}");
    }
}

#[test]
fn deterministic_golden() {
    let mk = || {
        let a = data(12, 256 * 192, DType::Bf16);
        let b = data(13, 256 * 300, DType::Bf16);
        let p = kernels::matmul(192, 256, 300, DType::Bf16, DType::F32).unwrap();
        let bytes = p.to_bytes();
        let p = nrt_sim::engine::Program::from_bytes(&bytes).unwrap();
        run(p, &[("lhs_t", DType::Bf16, &a), ("rhs", DType::Bf16, &b)])
    };
    let (o1, r1) = mk();
    let (o2, r2) = mk();
    assert_eq!(
        r1, r2,
        "reports (ticks, counters, event log) differ between runs"
    );
    let bits = |o: &Vec<(String, Vec<f32>)>| -> Vec<u8> {
        o[0].1.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    assert_eq!(bits(&o1), bits(&o2));
    let log = format!("{:?}", r1.events);
    // Golden values: any change to the timing model or numerics shows up here.
    let golden = (
        fnv(&bits(&o1)),
        r1.ticks,
        fnv(log.as_bytes()),
        r1.events.len(),
    );
    println!("golden = {golden:?}");
    assert_eq!(golden, GOLDEN);
}

/// 6,541 ticks since the next LoadStationary loads in the background of a matmul, with the
/// semaphore waits and updates between them issued behind it (6,550 before).
const GOLDEN: (u64, u64, u64, usize) = (4396245624586279475, 6422, 16749375898110854037, 825);
