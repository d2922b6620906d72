//! `library::chnorm`: BatchNormalization (inference), InstanceNormalization and
//! LayerNormalization over trailing axes against references of the documented order —
//! bit for bit (the ISA's `bn_stats` / `bn_aggr` order reproduced with `refs::moments` /
//! `refs::aggregate`) — and, as a sanity bound, within 1e-5 relative of ONNX's formula in
//! binary64. Several channel blocks, planes larger than a block, fp32 and bf16, no hazards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::chnorm;
use nrt_kernel::{DType, Kernel};
use refs::{aggregate, cast, dec, enc, moments};

fn data(n: usize, seed: u64, scale: f32, off: f32) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit() * scale + off).collect()
}

/// The per-channel steps: `s = scale/√(var + eps)`, `b = bias − mean·s`.
fn affine(scale: f32, bias: f32, mean: f32, var: f32, eps: f32) -> (f32, f32) {
    let s = scale / (var + eps).sqrt();
    (s, bias - mean * s)
}

#[test]
fn batchnorm_is_a_per_channel_affine() {
    for (shape, dt) in [
        (vec![2usize, 130, 5, 7], DType::F32),
        (vec![3, 20, 70, 70], DType::Bf16),
        (vec![300, 6], DType::F32),
    ] {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let l = n / shape[0] / c;
        let mut k = Kernel::new("bn_test");
        let x = k.input("x", dt, &shape).unwrap();
        let ps: Vec<_> = ["scale", "bias", "mean", "var"]
            .iter()
            .map(|nm| k.input(nm, DType::F32, &[c]).unwrap())
            .collect();
        let y = k.output("y", dt, &shape).unwrap();
        chnorm::batchnorm(&mut k, &y, &x, &ps[0], &ps[1], &ps[2], &ps[3], 1e-5).unwrap();
        let p = k.build().unwrap();
        let xv: Vec<f32> = data(n, 1, 3.0, 0.5).iter().map(|&v| cast(dt, v)).collect();
        let sc = data(c, 2, 1.0, 0.0);
        let bi = data(c, 3, 1.0, 0.0);
        let me = data(c, 4, 1.0, 0.0);
        let va: Vec<f32> = data(c, 5, 1.0, 0.0).iter().map(|v| v.abs() + 0.1).collect();
        let (outs, _) = run(
            &p,
            &[
                ("x", enc(dt, &xv)),
                ("scale", enc(DType::F32, &sc)),
                ("bias", enc(DType::F32, &bi)),
                ("mean", enc(DType::F32, &me)),
                ("var", enc(DType::F32, &va)),
            ],
        );
        let got = dec(dt, output(&outs, "y"));
        for i in 0..n {
            let ch = (i / l) % c;
            let (s, b) = affine(sc[ch], bi[ch], me[ch], va[ch], 1e-5);
            let want = cast(dt, xv[i] * s + b);
            assert_eq!(got[i].to_bits(), want.to_bits(), "{shape:?} {dt}: y[{i}]");
            let onnx = (f64::from(xv[i]) - f64::from(me[ch]))
                / (f64::from(va[ch]) + 1e-5f32 as f64).sqrt()
                * f64::from(sc[ch])
                + f64::from(bi[ch]);
            let tol = if dt == DType::Bf16 { 1e-2 } else { 1e-5 } * (onnx.abs() + 1.0);
            assert!(
                (f64::from(got[i]) - onnx).abs() <= tol,
                "y[{i}] {} vs {onnx}",
                got[i]
            );
        }
    }
}

#[test]
fn instancenorm_normalises_each_plane() {
    for shape in [vec![2usize, 3, 9, 11], vec![1, 2, 70, 70], vec![1, 130, 6]] {
        let c = shape[1];
        let n: usize = shape.iter().product();
        let l = n / shape[0] / c;
        let mut k = Kernel::new("in_test");
        let x = k.input("x", DType::F32, &shape).unwrap();
        let sc = k.input("scale", DType::F32, &[c]).unwrap();
        let bi = k.input("bias", DType::F32, &[c]).unwrap();
        let y = k.output("y", DType::F32, &shape).unwrap();
        chnorm::instancenorm(&mut k, &y, &x, &sc, &bi, 1e-5).unwrap();
        let p = k.build().unwrap();
        let xv = data(n, 6, 2.0, 1.0);
        let (scv, biv) = (data(c, 7, 1.0, 1.0), data(c, 8, 1.0, 0.0));
        let (outs, _) = run(
            &p,
            &[
                ("x", enc(DType::F32, &xv)),
                ("scale", enc(DType::F32, &scv)),
                ("bias", enc(DType::F32, &biv)),
            ],
        );
        let got = dec(DType::F32, output(&outs, "y"));
        for plane in 0..n / l {
            let xs = &xv[plane * l..(plane + 1) * l];
            let mut trip = Vec::new();
            for ch in xs.chunks(512) {
                let ev: Vec<f32> = ch.iter().step_by(2).copied().collect();
                let od: Vec<f32> = ch.iter().skip(1).step_by(2).copied().collect();
                trip.extend(moments(&ev));
                trip.extend(moments(&od));
            }
            let [mean, var] = aggregate(&trip);
            let ch = plane % c;
            let (s, b) = affine(scv[ch], biv[ch], mean, var, 1e-5);
            for (j, &xj) in xs.iter().enumerate() {
                let want = xj * s + b;
                let g = got[plane * l + j];
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "{shape:?}: plane {plane} [{j}]"
                );
            }
        }
    }
}

#[test]
fn layernorm_over_trailing_axes() {
    let shape = [2usize, 3, 4, 5];
    let mut k = Kernel::new("ln_axis");
    let x = k.input("x", DType::F32, &shape).unwrap();
    let g = k.input("g", DType::F32, &[3, 4, 5]).unwrap();
    let b = k.input("b", DType::F32, &[3, 4, 5]).unwrap();
    let y = k.output("y", DType::F32, &shape).unwrap();
    chnorm::layernorm_axis(&mut k, &y, &x, -3, Some(&g), Some(&b), 1e-5).unwrap();
    let p = k.build().unwrap();
    let xv = data(120, 9, 2.0, 0.0);
    let (gv, bv) = (data(60, 10, 1.0, 1.0), data(60, 11, 1.0, 0.0));
    let (outs, _) = run(
        &p,
        &[
            ("x", enc(DType::F32, &xv)),
            ("g", enc(DType::F32, &gv)),
            ("b", enc(DType::F32, &bv)),
        ],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    for r in 0..2 {
        let xs: Vec<f64> = xv[r * 60..(r + 1) * 60]
            .iter()
            .map(|&v| f64::from(v))
            .collect();
        let mean = xs.iter().sum::<f64>() / 60.0;
        let var = xs.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 60.0;
        for j in 0..60 {
            let want = (xs[j] - mean) / (var + 1e-5).sqrt() * f64::from(gv[j]) + f64::from(bv[j]);
            let g = f64::from(got[r * 60 + j]);
            assert!(
                (g - want).abs() <= 1e-5 * (want.abs() + 1.0),
                "y[{r}, {j}] {g} vs {want}"
            );
        }
    }
    let mut k = Kernel::new("ln_bad");
    let x = k.input("x", DType::F32, &shape).unwrap();
    let y = k.output("y", DType::F32, &shape).unwrap();
    let e = chnorm::layernorm_axis(&mut k, &y, &x, 4, None, None, 1e-5).unwrap_err();
    assert!(e.message().contains("out of range"), "{}", e.message());
}
