//! `engine::tensor_matmul`, the host-side product with the engine's bits: equal, bit for bit,
//! to `kernels::matmul` run on the engine and to the rule's literal statement
//! (`common::ref_matmul`), for ragged shapes, several output tiles each way, both operand paths
//! (exact bf16 products through the `gemm` crate, full fp32 significands), special values; and
//! its errors for bad shapes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_sim::engine::{DType, kernels, tensor_matmul};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn host(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut out = vec![f32::NAN; m * n];
    tensor_matmul(a, b, &mut out, m, k, n).unwrap();
    out
}

fn engine(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let p = kernels::matmul(m as u64, k as u64, n as u64, DType::F32, DType::F32).unwrap();
    let (outs, report) = run(p, &[("lhs_t", DType::F32, a), ("rhs", DType::F32, b)]);
    assert!(report.hazards.is_empty());
    outs.into_iter().find(|(name, _)| name == "out").unwrap().1
}

#[test]
fn equals_the_engine_and_the_rule_bit_for_bit() {
    // (M, K, N): one tile; ragged K / M / N tails; several output tiles each way; tiny tiles
    // that leave the gemm crate's main path (K < 3, M or N = 1).
    let shapes = [
        (128, 128, 512),
        (130, 300, 65),
        (257, 385, 1030),
        (1, 2, 1),
        (3, 1, 700),
        (200, 129, 1),
        // Past the 2048-wide output blocks both ways, a last K tile of 2 rows.
        (2050, 130, 2060),
    ];
    for (s, &(m, k, n)) in shapes.iter().enumerate() {
        for dt in [DType::Bf16, DType::F32] {
            let a = data(2 * s as u64 + 1, k * m, dt);
            let b = data(2 * s as u64 + 2, k * n, dt);
            let got = host(&a, &b, m, k, n);
            let what = format!("{dt} operands, {m}x{k}x{n}");
            assert_eq!(bits(&got), bits(&engine(&a, &b, m, k, n)), "engine, {what}");
            assert_eq!(
                bits(&got),
                bits(&ref_matmul(&a, &b, m, k, n, DType::F32)),
                "rule, {what}"
            );
        }
    }
}

#[test]
fn special_values_follow_psum_accumulation() {
    // The second K tile's fused sum 2^-75·2^-74 + 2^-75·2^-75 is 2^-149 + 2^-150, which rounds
    // (a tie, to even) to 2^-148; the first tile gives +0. Element (0, 1) is 2^-75 · 1. A NaN
    // operand in row 1's first K tile gives the canonical NaN, whatever (here ±∞) the second
    // tile adds to it.
    let (m, k, n) = (2, 130, 2);
    let mut a = vec![0f32; k * m];
    let mut b = vec![0f32; k * n];
    a[128 * m] = 2f32.powi(-75);
    a[129 * m] = 2f32.powi(-75);
    b[128 * n] = 2f32.powi(-74);
    b[129 * n] = 2f32.powi(-75);
    a[1] = f32::from_bits(0xFF81_0000); // a signalling NaN with a payload, row 1
    a[129 * m + 1] = f32::INFINITY;
    b[129 * n + 1] = 1.0;
    let got = host(&a, &b, m, k, n);
    assert_eq!(
        bits(&got),
        [
            2f32.powi(-148).to_bits(),
            2f32.powi(-75).to_bits(),
            0x7FC0_0000,
            0x7FC0_0000
        ]
    );
    assert_eq!(bits(&got), bits(&engine(&a, &b, m, k, n)));
}

#[test]
fn bad_shapes_are_refused() {
    let mut out = vec![0f32; 4];
    let (a, b) = (vec![1f32; 4], vec![1f32; 4]);
    let e = tensor_matmul(&a, &b, &mut out, 2, 0, 2).unwrap_err();
    assert_eq!(e.status(), nrt_core::NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        "tensor_matmul: M = 2, K = 0, N = 2: every dimension must be at least 1"
    );
    let e = tensor_matmul(&a, &b[..3], &mut out, 2, 2, 2).unwrap_err();
    assert_eq!(e.status(), nrt_core::NrtStatus::Invalid);
    assert_eq!(
        e.message(),
        "tensor_matmul: rhs holds 3 elements, its shape [2, 2] needs 4"
    );
    let e = tensor_matmul(&a, &b, &mut out, usize::MAX, 2, 2).unwrap_err();
    assert_eq!(e.status(), nrt_core::NrtStatus::Invalid);
    assert_eq!(out, [0.0; 4], "nothing written on an error");
}
