//! `library::matmul` and `library::transpose` against plain references: odd sizes (M 1, 129,
//! 300; K 1, 130; N 1, 513), every input/output dtype combination (fp32 → fp32, bf16 → fp32,
//! bf16 → bf16, fp16 → fp32, fp16 → fp16), `a` as `[M, K]` and as `aᵀ`; bit-exact (the
//! reduction order is fixed: one fused multiply-add per step, K-tile sums from +0 in increasing k, tile sums
//! added in order, one rounding to the output dtype), under both schedules; every run
//! hazard-free. Speed: the resident schedule keeps the DMA engines busy, stays within 1.8×
//! the time the bytes need at the core's DMA bandwidth, overlaps TensorE with DMA and beats
//! the streamed schedule by more than 30 %.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, busy, output, overlap, run};
use nrt_kernel::library::{matmul, transpose};
use nrt_kernel::{DType, EngineId};
use refs::{canon, cast, dec, enc};

/// `a[M, K] · b[K, N]` in the documented order, rounded to `out`.
fn reference(a: &[f32], b: &[f32], m: usize, kd: usize, n: usize, out: DType) -> Vec<f32> {
    let mut r = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc: Option<f32> = None;
            for k0 in (0..kd).step_by(128) {
                let mut s = 0.0f32;
                for l in k0..kd.min(k0 + 128) {
                    s = canon(a[i * kd + l].mul_add(b[l * n + j], s));
                }
                acc = Some(acc.map_or(s, |x| canon(x + s)));
            }
            r.push(cast(out, acc.unwrap()));
        }
    }
    r
}

fn values(n: usize, dt: DType, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| cast(dt, rng.unit() * 4.0)).collect()
}

fn check(m: usize, kd: usize, n: usize, dt: DType, out: DType, a_transposed: bool) {
    for schedule in [matmul::Schedule::Resident, matmul::Schedule::Streamed] {
        check_with(m, kd, n, dt, out, a_transposed, schedule);
    }
}

fn check_with(
    m: usize,
    kd: usize,
    n: usize,
    dt: DType,
    out: DType,
    a_transposed: bool,
    schedule: matmul::Schedule,
) {
    let opts = matmul::MatmulOpts {
        a_transposed,
        schedule,
        b_transposed: false,
    };
    let p = matmul::build(m, kd, n, dt, out, &opts).unwrap();
    let av = values(m * kd, dt, 1 + m as u64);
    let bv = values(kd * n, dt, 2 + n as u64);
    let a_in: Vec<f32> = if a_transposed {
        (0..kd * m).map(|e| av[(e % m) * kd + e / m]).collect()
    } else {
        av.clone()
    };
    let (outs, report) = run(&p, &[("a", enc(dt, &a_in)), ("b", enc(dt, &bv))]);
    let got = dec(out, output(&outs, "out"));
    let want = reference(&av, &bv, m, kd, n, out);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "[{m}, {kd}] x [{kd}, {n}] {dt} -> {out} {schedule:?}: ({}, {}): {g} vs {w}",
            i / n,
            i % n
        );
    }
    eprintln!(
        "matmul {m}x{kd}x{n} {dt}->{out} {schedule:?}: {} ticks",
        report.ticks
    );
}

#[test]
fn odd_sizes_and_every_dtype_combination() {
    use DType::*;
    for (m, kd, n, dt, out, tr) in [
        (129, 130, 513, F32, F32, false),
        (300, 130, 1, Bf16, F32, false),
        (1, 130, 513, Bf16, Bf16, false),
        (129, 1, 513, F16, F32, true),
        (300, 1, 1, F16, F16, false),
        (1, 1, 1, F32, F32, false),
        (129, 130, 1, F16, F16, true),
        (300, 130, 40, F32, F32, true),
        (129, 300, 65, Bf16, F32, false), // three K tiles accumulated
    ] {
        check(m, kd, n, dt, out, tr);
    }
}

#[test]
fn resident_schedule_is_dma_efficient_and_overlaps() {
    // Two blocks of b (2048 + 952 columns): the second loads while the first is multiplied.
    let (m, kd, n) = (256, 256, 3000);
    let av = values(m * kd, DType::Bf16, 5);
    let bv = values(kd * n, DType::Bf16, 6);
    let ins = [("a", enc(DType::Bf16, &av)), ("b", enc(DType::Bf16, &bv))];
    let ticks = |schedule| {
        let opts = matmul::MatmulOpts {
            schedule,
            ..Default::default()
        };
        let p = matmul::build(m, kd, n, DType::Bf16, DType::F32, &opts).unwrap();
        let (_, report) = run(&p, &ins);
        report
    };
    let report = ticks(matmul::Schedule::Auto);
    let streamed = ticks(matmul::Schedule::Streamed).ticks;
    let (dma, pe) = (busy(&report, None), busy(&report, Some(EngineId::Tensor)));
    let pe_total: u64 = pe.iter().map(|(s, e)| e - s).sum();
    let dma_total: u64 = dma.iter().map(|(s, e)| e - s).sum();
    let both = overlap(&dma, &pe);
    // Bytes moved at the 435.2 GB/s of a core's 16 DMA engines at 27.2 GB/s each (136/7·16 =
    // 310.9 B per tick): the DMA-bound lower limit.
    let bytes = (m * kd + kd * n) * 2 + m * n * 4;
    let bound = bytes as f64 / (435.2 / 1.4);
    eprintln!(
        "resident {} ticks ({:.2} x the DMA bound {bound:.0}), streamed {streamed}; DMA busy \
         {dma_total}; TensorE busy {pe_total}, overlapping DMA {both}",
        report.ticks,
        report.ticks as f64 / bound
    );
    // DMA-bound: the DMA engines are busy most of the time (84 % when written), and
    // TensorE works while they move data.
    assert!(dma_total * 10 >= report.ticks * 8, "DMA idle too long");
    assert!(both * 3 > pe_total, "TensorE mostly waits for DMA");
    // At least a fifth faster than streaming b tile by tile (26 % since the next stationary
    // loads behind each matmul, which helps the streamed schedule more; 31 % before).
    assert!(
        report.ticks * 5 < streamed * 4,
        "resident not faster than streamed"
    );
    assert!((report.ticks as f64) < 1.8 * bound);
}

#[test]
fn matmul_misuse() {
    let mut k = nrt_kernel::Kernel::new("bad");
    let a = k.input("a", DType::Bf16, &[4, 5]).unwrap();
    let b = k.input("b", DType::F32, &[5, 6]).unwrap();
    let b2 = k.input("b2", DType::Bf16, &[4, 6]).unwrap();
    let o = k.output("o", DType::F32, &[4, 6]).unwrap();
    let opts = matmul::MatmulOpts::default();
    let e = matmul::matmul(&mut k, &o, &a, &b, &opts).unwrap_err();
    assert_eq!(
        e.message(),
        "matmul: a HBM tensor 'a' [4, 5] bf16 and b HBM tensor 'b' [5, 6] fp32 must have the \
         same dtype"
    );
    let e = matmul::matmul(&mut k, &o, &a, &b2, &opts).unwrap_err();
    assert_eq!(
        e.message(),
        "matmul: shapes do not chain: a HBM tensor 'a' [4, 5] bf16 ([M, K]), b HBM tensor 'b2' \
         [4, 6] bf16, out HBM tensor 'o' [4, 6] fp32 (want b [5, N], out [4, N])"
    );
    let e = matmul::matmul(&mut k, &a, &a, &b2, &opts).unwrap_err();
    assert_eq!(
        e.message(),
        "matmul: out HBM tensor 'a' must be an output or scratch tensor"
    );
}

#[test]
fn transpose_any_shape_and_dtype() {
    for (r, c, dt) in [
        (1, 1, DType::F32),
        (1, 300, DType::Bf16),
        (300, 1, DType::I32),
        (129, 257, DType::F32),
        (2100, 3, DType::F16),
    ] {
        let p = transpose::build(r, c, dt).unwrap();
        let mut rng = Rng(r as u64 * 31 + c as u64);
        let bytes: Vec<u8> = (0..r * c * dt.size()).map(|_| rng.next() as u8).collect();
        let (outs, _) = run(&p, &[("x", bytes.clone())]);
        let got = output(&outs, "out");
        let s = dt.size();
        for i in 0..r {
            for j in 0..c {
                let src = &bytes[(i * c + j) * s..(i * c + j + 1) * s];
                let dst = &got[(j * r + i) * s..(j * r + i + 1) * s];
                assert_eq!(src, dst, "{r}x{c} {dt} ({i}, {j})");
            }
        }
    }
}
