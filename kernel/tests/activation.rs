//! Bias + activation on ScalarE: a per-partition bias tile, a scale, several functions, from
//! SBUF and straight out of PSUM after a matmul, against plain Rust references (exact for
//! identity and relu, within 1 ULP for gelu and tanh).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_kernel::{ActBias, ActFunc, DType, Kernel};
use nrt_sim::engine::{decode_f32, encode_f32, gelu_f64, tanh_f64};

fn reference(func: ActFunc, x: f32) -> f32 {
    match func {
        ActFunc::Identity => x,
        ActFunc::Relu => x.max(0.0),
        ActFunc::Gelu => gelu_f64(f64::from(x)) as f32,
        ActFunc::Tanh => tanh_f64(f64::from(x)) as f32,
        ActFunc::Exp => nrt_sim::engine::exp_f64(f64::from(x)) as f32,
    }
}

fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

#[test]
fn bias_activation_feature_major() {
    let (f, n) = (200, 300);
    for (func, scale) in [
        (ActFunc::Relu, 1.0),
        (ActFunc::Identity, 2.0),
        (ActFunc::Gelu, 1.0),
        (ActFunc::Tanh, 0.5),
    ] {
        let mut k = Kernel::new("bias_act");
        let x = k.input("x", DType::F32, &[f, n]).unwrap();
        let bias = k.input("bias", DType::F32, &[f]).unwrap();
        let out = k.output("out", DType::F32, &[f, n]).unwrap();
        for f0 in (0..f).step_by(128) {
            let fh = 128.min(f - f0);
            k.scope(|k| {
                let bt = k.sbuf_tile("b", DType::F32, &[fh, 1])?;
                let xt = k.sbuf_tile("x", DType::F32, &[fh, n])?;
                let ot = k.sbuf_tile("o", DType::F32, &[fh, n])?;
                k.dma_copy(&bt, &bias.slice(0, f0..f0 + fh)?)?;
                k.dma_copy(&xt, &x.slice(0, f0..f0 + fh)?)?;
                k.activation(&ot, func, &xt, &bt, scale)?;
                k.dma_copy(&out.slice(0, f0..f0 + fh)?, &ot)
            })
            .unwrap();
        }
        let p = k.build().unwrap();
        let mut rng = Rng(3);
        let xv: Vec<f32> = (0..f * n).map(|_| rng.unit() * 4.0).collect();
        let bv: Vec<f32> = (0..f).map(|_| rng.unit()).collect();
        let (outs, _) = run(
            &p,
            &[
                ("x", encode_f32(DType::F32, &xv)),
                ("bias", encode_f32(DType::F32, &bv)),
            ],
        );
        let got = decode_f32(DType::F32, output(&outs, "out"));
        let exact = matches!(func, ActFunc::Identity | ActFunc::Relu);
        for r in 0..f {
            for c in 0..n {
                let want = reference(func, xv[r * n + c] * scale + bv[r]);
                let g = got[r * n + c];
                let d = ulps(g, want);
                assert!(
                    if exact { d == 0 } else { d <= 1 },
                    "{} ({r}, {c}): {g} vs {want}",
                    func.name()
                );
            }
        }
    }
}

#[test]
fn dense_layer_activation_from_psum() {
    // y[M, B] = relu(Wᵀ x + b) with small integers: every value exact.
    let (kd, m, b) = (96, 100, 64);
    let mut k = Kernel::new("dense");
    let w = k.input("w", DType::Bf16, &[kd, m]).unwrap();
    let x = k.input("x", DType::Bf16, &[kd, b]).unwrap();
    let bias = k.input("bias", DType::F32, &[m]).unwrap();
    let y = k.output("y", DType::F32, &[m, b]).unwrap();
    let wt = k.sbuf_tile("w", DType::Bf16, &[kd, m]).unwrap();
    let xt = k.sbuf_tile("x", DType::Bf16, &[kd, b]).unwrap();
    let bt = k.sbuf_tile("b", DType::F32, &[m, 1]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[m, b]).unwrap();
    let yt = k.sbuf_tile("y", DType::F32, &[m, b]).unwrap();
    k.dma_copy(&wt, &w).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&bt, &bias).unwrap();
    k.nc_matmul(&ps, &wt, &xt).unwrap();
    k.activation(&yt, ActFunc::Relu, &ps, ActBias::Tile(&bt), 1.0)
        .unwrap();
    k.dma_copy(&y, &yt).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(11);
    let wv: Vec<f32> = (0..kd * m).map(|_| rng.small(3)).collect();
    let xv: Vec<f32> = (0..kd * b).map(|_| rng.small(3)).collect();
    let bv: Vec<f32> = (0..m).map(|_| rng.small(20)).collect();
    let (outs, _) = run(
        &p,
        &[
            ("w", encode_f32(DType::Bf16, &wv)),
            ("x", encode_f32(DType::Bf16, &xv)),
            ("bias", encode_f32(DType::F32, &bv)),
        ],
    );
    let got = decode_f32(DType::F32, output(&outs, "y"));
    for i in 0..m {
        for j in 0..b {
            let s: f32 = (0..kd).map(|q| wv[q * m + i] * xv[q * b + j]).sum();
            assert_eq!(got[i * b + j], (s + bv[i]).max(0.0), "({i}, {j})");
        }
    }
}
