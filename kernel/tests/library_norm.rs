//! `library::softmax`, `library::norm::{layernorm, rmsnorm}` against plain references, on odd
//! sizes (rows 1, 129, 300; columns 1, 130, 513, 1000: one and several `bn_stats` chunks),
//! fp32 / bf16 / fp16 inputs, fp32 / bf16 outputs, with and without gamma/beta.
//!
//! Two references each:
//! * **bit-exact**: the documented fp32 order of operations step by step (every step an IEEE
//!   operation, `exp`/`rsqrt` the ISA's function `nrt_sim::engine::activate`, itself tested
//!   within 1 ULP of binary64 in `ops_activation.rs`): equal bits.
//! * **binary64**: softmax within `2^−24·(2·max|x − max| + C + 6)` relative (the rounding of
//!   `x − max` is amplified by exp by `|x − max|`, exp adds 1 ULP = 2^−23, the sum of C
//!   positive terms at most `(C − 1)·2^−24`, the reciprocal and product one rounding each),
//!   plus the output rounding (2^−8 bf16); layernorm and rmsnorm within
//!   `2^−24·(2C + 16)·(|γ|·(|x̂| + 1) + |β|)` (sums of C terms, two-pass variance, rsqrt's
//!   ULP, four more roundings), plus the output rounding.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::{norm, softmax};
use nrt_kernel::{ActFn, AluOp, DType};
use nrt_sim::engine::activate;
use refs::{act_arg, alu, canon, cast, dec, enc, f32s, max_num};

fn values(n: usize, dt: DType, seed: u64, scale: f32, shift: f32) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| cast(dt, rng.unit() * scale + shift))
        .collect()
}

/// Unit roundoff of the output type.
fn u_out(dt: DType) -> f64 {
    match dt {
        DType::Bf16 => 2f64.powi(-8),
        DType::F16 => 2f64.powi(-11),
        _ => 0.0,
    }
}

fn softmax_ref(row: &[f32], out: DType) -> (Vec<f32>, Vec<f64>) {
    let m = row[1..].iter().fold(canon(row[0]), |a, &v| max_num(a, v));
    let nm = alu(AluOp::Mul, m, -1.0);
    let e: Vec<f32> = row
        .iter()
        .map(|&x| activate(ActFn::Exp, act_arg(x, 1.0, nm)))
        .collect();
    let s = e.iter().fold(0.0f32, |a, &v| canon(a + v));
    let r = canon(1.0 / s);
    let bits = e.iter().map(|&v| cast(out, canon(v * r))).collect();
    let m64 = row.iter().map(|&v| f64::from(v)).fold(f64::MIN, f64::max);
    let e64: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m64).exp()).collect();
    let s64: f64 = e64.iter().sum();
    (bits, e64.iter().map(|v| v / s64).collect())
}

#[test]
fn softmax_rows() {
    use DType::*;
    for (r, c, dt, out) in [
        (129, 130, F32, F32),
        (1, 513, Bf16, F32),
        (300, 1, F16, Bf16),
        (129, 1000, Bf16, Bf16),
        (3, 7000, F32, F32), // single-buffered
    ] {
        let p = softmax::build(r, c, dt, out).unwrap();
        let xv = values(r * c, dt, 3 + c as u64, 12.0, 1.0);
        let (outs, _) = run(&p, &[("x", enc(dt, &xv))]);
        let got = dec(out, output(&outs, "out"));
        for i in 0..r {
            let row = &xv[i * c..(i + 1) * c];
            let (bits, y64) = softmax_ref(row, out);
            let m = row.iter().fold(f32::MIN, |a, &v| a.max(v));
            let spread = row.iter().map(|&v| f64::from(m - v)).fold(0.0, f64::max);
            let tol = 2f64.powi(-24) * (2.0 * spread + c as f64 + 6.0) + u_out(out);
            for j in 0..c {
                let g = got[i * c + j];
                assert_eq!(
                    g.to_bits(),
                    bits[j].to_bits(),
                    "{r}x{c} {dt}->{out} ({i}, {j})"
                );
                let d = (f64::from(g) - y64[j]).abs();
                assert!(d <= tol * y64[j], "({i}, {j}): {g} vs {} ({d:e})", y64[j]);
            }
        }
    }
}

#[test]
fn softmax_special_rows() {
    // A NaN is skipped by the maximum and propagates through the sum; -inf entries give 0;
    // a row of -inf gives NaN (documented).
    let inf = f32::INFINITY;
    let xv = [
        1.0,
        -inf,
        2.0,
        -inf, //
        f32::NAN,
        1.0,
        2.0,
        3.0, //
        -inf,
        -inf,
        -inf,
        -inf,
    ];
    let p = softmax::build(3, 4, DType::F32, DType::F32).unwrap();
    let (outs, _) = run(&p, &[("x", f32s(&xv))]);
    let got = dec(DType::F32, output(&outs, "out"));
    for i in 0..3 {
        let (bits, _) = softmax_ref(&xv[i * 4..i * 4 + 4], DType::F32);
        for j in 0..4 {
            assert_eq!(got[i * 4 + j].to_bits(), bits[j].to_bits(), "({i}, {j})");
        }
    }
    assert_eq!(got[1], 0.0);
    assert!(got[4..].iter().all(|v| v.is_nan()));
}

/// `(count, mean, M2)` of `xs` as `bn_stats` computes it.
fn moments(xs: &[f32]) -> [f32; 3] {
    if xs.is_empty() {
        return [0.0; 3];
    }
    let n = xs.len() as f32;
    let mean = canon(xs.iter().fold(0.0f32, |a, &v| canon(a + v)) / n);
    let m2 = xs.iter().fold(0.0f32, |a, &v| {
        let d = canon(v - mean);
        canon(a + canon(d * d))
    });
    [n, mean, m2]
}

/// Mean and variance as `bn_stats` over 512-chunks and `bn_aggr` compute them.
fn mean_var(row: &[f32]) -> (f32, f32) {
    let mut t = Vec::new();
    for ch in row.chunks(512) {
        let even: Vec<f32> = ch.iter().copied().step_by(2).collect();
        let odd: Vec<f32> = ch.iter().copied().skip(1).step_by(2).collect();
        t.extend(moments(&even));
        t.extend(moments(&odd));
    }
    let (mut n, mut mean, mut m2) = (0.0f32, 0.0f32, 0.0f32);
    for g in t.chunks(3) {
        let (c, m, v) = (g[0], g[1], g[2]);
        if c.is_nan() || c <= 0.0 {
            continue;
        }
        if n == 0.0 {
            (n, mean, m2) = (c, m, v);
            continue;
        }
        let nn = n + c;
        let d = canon(m - mean);
        mean = canon(mean + canon(d * canon(c / nn)));
        m2 = canon(canon(m2 + v) + canon(canon(d * d) * canon(canon(n * c) / nn)));
        n = nn;
    }
    (mean, canon(m2 / n))
}

#[allow(clippy::too_many_arguments)]
fn check_norm(rms: bool, r: usize, c: usize, dt: DType, out: DType, affine: bool) {
    let eps = 1e-5f32;
    let p = if rms {
        norm::build_rmsnorm(r, c, dt, out, affine, eps)
    } else {
        norm::build_layernorm(r, c, dt, out, affine, eps)
    }
    .unwrap();
    let xv = values(r * c, dt, 7 + c as u64, 3.0, 0.5);
    let gv = values(c, DType::F32, 8, 1.5, 0.0);
    let bv = values(c, DType::F32, 9, 1.0, 0.25);
    let mut ins = vec![("x", enc(dt, &xv))];
    if affine {
        ins.push(("gamma", f32s(&gv)));
        if !rms {
            ins.push(("beta", f32s(&bv)));
        }
    }
    let (outs, _) = run(&p, &ins);
    let got = dec(out, output(&outs, "out"));
    let what = if rms { "rmsnorm" } else { "layernorm" };
    for i in 0..r {
        let row = &xv[i * c..(i + 1) * c];
        let (want, x64): (Vec<f32>, Vec<f64>) = if rms {
            let ss = row.iter().fold(0.0f32, |a, &x| {
                canon(a + activate(ActFn::Square, act_arg(x, 1.0, 0.0)))
            });
            let rstd = activate(ActFn::Rsqrt, act_arg(ss, 1.0 / c as f32, eps));
            let ms: f64 = row.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>() / c as f64;
            let r64 = 1.0 / (ms + f64::from(eps)).sqrt();
            row.iter()
                .enumerate()
                .map(|(j, &x)| {
                    let y = canon(x * rstd);
                    let y = if affine { canon(y * gv[j]) } else { y };
                    (cast(out, y), f64::from(x) * r64)
                })
                .unzip()
        } else {
            let (mean, var) = mean_var(row);
            let rstd = activate(ActFn::Rsqrt, act_arg(var, 1.0, eps));
            let m64 = row.iter().map(|&x| f64::from(x)).sum::<f64>() / c as f64;
            let v64 = row
                .iter()
                .map(|&x| (f64::from(x) - m64).powi(2))
                .sum::<f64>()
                / c as f64;
            let r64 = 1.0 / (v64 + f64::from(eps)).sqrt();
            row.iter()
                .enumerate()
                .map(|(j, &x)| {
                    let mut y = canon(canon(x - mean) * rstd);
                    if affine {
                        y = canon(canon(y * gv[j]) + bv[j]);
                    }
                    (cast(out, y), (f64::from(x) - m64) * r64)
                })
                .unzip()
        };
        for j in 0..c {
            let g = got[i * c + j];
            assert_eq!(
                g.to_bits(),
                want[j].to_bits(),
                "{what} {r}x{c} {dt}->{out} ({i}, {j})"
            );
            let (ga, ba) = if affine {
                (f64::from(gv[j]), if rms { 0.0 } else { f64::from(bv[j]) })
            } else {
                (1.0, 0.0)
            };
            let y64 = x64[j] * ga + ba;
            let scale = ga.abs() * (x64[j].abs() + 1.0) + ba.abs();
            let tol = 2f64.powi(-24) * (2.0 * c as f64 + 16.0) * scale + u_out(out) * y64.abs();
            let d = (f64::from(g) - y64).abs();
            assert!(
                d <= tol,
                "{what} ({i}, {j}): {g} vs {y64} ({d:e} > {tol:e})"
            );
        }
    }
}

#[test]
fn layernorm_rows() {
    use DType::*;
    for (r, c, dt, out, affine) in [
        (129, 130, F32, F32, true),
        (1, 1000, Bf16, F32, true),
        (300, 513, F16, Bf16, false),
        (129, 1, F32, F32, true),
        (2, 5000, F32, F32, true), // single-buffered, 10 bn_stats chunks
    ] {
        check_norm(false, r, c, dt, out, affine);
    }
}

#[test]
fn rmsnorm_rows() {
    use DType::*;
    for (r, c, dt, out, affine) in [
        (129, 130, F32, F32, true),
        (1, 1000, Bf16, Bf16, true),
        (300, 513, F16, F32, false),
        (129, 1, F32, F32, true),
        (2, 8192, Bf16, F32, true), // the longest row
    ] {
        check_norm(true, r, c, dt, out, affine);
    }
}

#[test]
fn norm_misuse() {
    let mut k = nrt_kernel::Kernel::new("bad");
    let x = k.input("x", DType::F32, &[4, 6]).unwrap();
    let g = k.input("g", DType::F32, &[5]).unwrap();
    let o = k.output("o", DType::F32, &[4, 6]).unwrap();
    let e = norm::layernorm(&mut k, &o, &x, Some(&g), None, 1e-5).unwrap_err();
    assert_eq!(
        e.message(),
        "layernorm: gamma HBM tensor 'g' [5] fp32 must have shape [6] (x's last dimension)"
    );
    let big = k.input("big", DType::F32, &[2, 20000]).unwrap();
    let ob = k.output("ob", DType::F32, &[2, 20000]).unwrap();
    let e = softmax::softmax(&mut k, &ob, &big).unwrap_err();
    assert_eq!(
        e.message(),
        "softmax: rows of 20000 elements; at most 16384 (x HBM tensor 'big' [2, 20000] fp32)"
    );
}
