//! A tiled matmul for M, K, N that are not multiples of 128 / 512 (fp32 and bf16 inputs, fp32
//! output), K tiles accumulated in PSUM, checked against a plain Rust reference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::{DType, EngineId, Kernel, NcMatmul, Program};
use nrt_sim::engine::{Instr, decode_f32, encode_f32, round_through};

/// `out[M, N] = lhs_t[K, M]ᵀ · rhs[K, N]`: operands resident in SBUF (one tile per K tile),
/// one PSUM tile per (M tile, N block) accumulating the K tiles, evacuated by VectorE.
fn matmul_kernel(m: usize, kd: usize, n: usize, dtype: DType) -> Program {
    let mut k = Kernel::new("matmul");
    let lhs = k.input("lhs_t", dtype, &[kd, m]).unwrap();
    let rhs = k.input("rhs", dtype, &[kd, n]).unwrap();
    let out = k.output("out", DType::F32, &[m, n]).unwrap();
    let mut w = Vec::new();
    let mut x = Vec::new();
    for k0 in (0..kd).step_by(128) {
        let kh = 128.min(kd - k0);
        let wt = k.sbuf_tile(&format!("w{k0}"), dtype, &[kh, m]).unwrap();
        let xt = k.sbuf_tile(&format!("x{k0}"), dtype, &[kh, n]).unwrap();
        k.dma_copy(&wt, &lhs.slice(0, k0..k0 + kh).unwrap())
            .unwrap();
        k.dma_copy(&xt, &rhs.slice(0, k0..k0 + kh).unwrap())
            .unwrap();
        w.push(wt);
        x.push(xt);
    }
    for m0 in (0..m).step_by(128) {
        let mw = 128.min(m - m0);
        for n0 in (0..n).step_by(512) {
            let nw = 512.min(n - n0);
            k.scope(|k| {
                let ps = k.psum_tile("ps", DType::F32, &[mw, nw])?;
                for (wt, xt) in w.iter().zip(&x) {
                    k.nc_matmul(&ps, &wt.slice(1, m0..m0 + mw)?, &xt.slice(1, n0..n0 + nw)?)?;
                }
                let o = k.sbuf_tile("o", DType::F32, &[mw, nw])?;
                k.tensor_copy(&o, &ps)?;
                k.dma_copy(&out.slice(0, m0..m0 + mw)?.slice(1, n0..n0 + nw)?, &o)
            })
            .unwrap();
        }
    }
    k.build().unwrap()
}

fn check(m: usize, kd: usize, n: usize, dtype: DType) {
    let p = matmul_kernel(m, kd, n, dtype);
    // K tiles accumulate: per output block, one overwrite then accumulations.
    let kt = kd.div_ceil(128);
    let blocks = m.div_ceil(128) * n.div_ceil(512);
    let mm = |acc: bool| {
        common::count(
            &p,
            EngineId::Tensor,
            |i| matches!(i, Instr::MultiplyMoving { accumulate, .. } if *accumulate == acc),
        )
    };
    assert_eq!(mm(false), blocks);
    assert_eq!(mm(true), blocks * (kt - 1));
    let mut rng = Rng(42 + m as u64);
    let a: Vec<f32> = (0..kd * m)
        .map(|_| round_through(dtype, rng.unit()))
        .collect();
    let b: Vec<f32> = (0..kd * n)
        .map(|_| round_through(dtype, rng.unit()))
        .collect();
    let (outs, report) = run(
        &p,
        &[
            ("lhs_t", encode_f32(dtype, &a)),
            ("rhs", encode_f32(dtype, &b)),
        ],
    );
    let got = decode_f32(DType::F32, output(&outs, "out"));
    for i in 0..m {
        for j in 0..n {
            let (mut exact, mut mag) = (0f64, 0f64);
            for q in 0..kd {
                let t = f64::from(a[q * m + i]) * f64::from(b[q * n + j]);
                exact += t;
                mag += t.abs();
            }
            let tol = mag * (kd as f64 + 2.0) * f64::from(f32::EPSILON) / 2.0 + 1e-30;
            let g = f64::from(got[i * n + j]);
            assert!(
                (g - exact).abs() <= tol,
                "{dtype} ({i}, {j}): got {g}, want {exact} ± {tol}"
            );
        }
    }
    eprintln!(
        "matmul M={m} K={kd} N={n} {dtype}: {} ticks, {} instructions",
        report.ticks,
        p.instruction_count()
    );
}

#[test]
fn tiled_matmul_fp32() {
    check(200, 300, 700, DType::F32);
}

#[test]
fn tiled_matmul_bf16() {
    check(200, 300, 700, DType::Bf16);
    check(129, 129, 513, DType::Bf16);
}

#[test]
fn explicit_accumulate_and_inference_errors() {
    let mut k = Kernel::new("acc");
    let w = k.sbuf_tile("w", DType::F32, &[128, 64]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[64, 512]).unwrap();
    k.memset(&w, 0.5).unwrap();
    // The first matmul into the tile overwrites, the second accumulates (inferred).
    let mv = k.sbuf_tile("mv", DType::F32, &[128, 512]).unwrap();
    k.memset(&mv, 1.0).unwrap();
    k.nc_matmul(&ps, &w, &mv).unwrap();
    k.nc_matmul(&ps, &w, &mv).unwrap();
    let ps2 = k.psum_tile("ps2", DType::F32, &[64, 512]).unwrap();
    k.nc_matmul(
        &ps2.slice(1, 0..256).unwrap(),
        &w,
        &mv.slice(1, 0..256).unwrap(),
    )
    .unwrap();
    let e = k
        .nc_matmul(
            &ps2.slice(1, 128..384).unwrap(),
            &w,
            &mv.slice(1, 0..256).unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "nc_matmul: cannot infer accumulate for dst PSUM tile 'ps2' [64, 256] fp32: it partly \
         overlaps an earlier matmul output; pass accumulate explicitly"
    );
    k.emit(NcMatmul {
        dst: &ps2.slice(1, 128..384).unwrap(),
        stationary: &w,
        moving: &mv.slice(1, 0..256).unwrap(),
        accumulate: Some(true),
    })
    .unwrap();
    let out = k.output("out", DType::F32, &[64, 512]).unwrap();
    let o = k.sbuf_tile("o", DType::F32, &[64, 512]).unwrap();
    k.tensor_copy(&o, &ps).unwrap();
    k.dma_copy(&out, &o).unwrap();
    let p = k.build().unwrap();
    let (outs, _) = run(&p, &[]);
    // Two matmuls of 128 × 0.5 × 1.0 each.
    assert!(
        decode_f32(DType::F32, output(&outs, "out"))
            .iter()
            .all(|&v| v == 128.0)
    );
}
