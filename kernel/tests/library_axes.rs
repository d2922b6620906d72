//! `library::softmax::softmax_axis` / `log_softmax` along any axis and
//! `library::reduce::reduce_axes` over several axes: softmax within a stated bound of
//! binary64 (the ISA's `exp` / `ln` are within 1 ULP), reductions bit for bit against the
//! documented fold (fp32, left to right over the reduced elements in row-major order, mean =
//! sum ÷ count), every run hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::reduce::{ReduceOp, reduce_axes};
use nrt_kernel::library::softmax::{log_softmax, softmax_axis};
use nrt_kernel::{DType, Kernel};
use refs::{cast, dec, enc};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit() * 5.0).collect()
}

/// Softmax along `axis` of `[a, l, b]`: `|y − exact| ≤ (L + 8)·2⁻²⁴·y` (the sum of L
/// terms, each exp within 1 ULP, the reciprocal and the product), plus the output rounding;
/// log-softmax: `(|x − m| + |ln s|)·2⁻²³ + (L + 8)·2⁻²⁴`.
fn check(shape: [usize; 3], axis_at: usize, log: bool, dt: DType) {
    let [a, l, b] = shape;
    let full = [a, l, b];
    let mut k = Kernel::new("sm_axis");
    let x = k.input("x", dt, &full).unwrap();
    let y = k.output("y", dt, &full).unwrap();
    if axis_at == 2 {
        // The last axis: a plain row softmax of [a·l, b].
        if log {
            log_softmax(&mut k, &y, &x).unwrap();
        } else {
            softmax_axis(&mut k, &y, &x, 2, false).unwrap();
        }
    } else {
        softmax_axis(&mut k, &y, &x, 1, log).unwrap();
    }
    let p = k.build().unwrap();
    let xv: Vec<f32> = data(a * l * b, 7).iter().map(|&v| cast(dt, v)).collect();
    let (outs, _) = run(&p, &[("x", enc(dt, &xv))]);
    let got = dec(dt, output(&outs, "y"));
    let (ll, stride, groups): (usize, usize, Vec<usize>) = if axis_at == 2 {
        (b, 1, (0..a * l).map(|r| r * b).collect())
    } else {
        (
            l,
            b,
            (0..a)
                .flat_map(|i| (0..b).map(move |j| i * l * b + j))
                .collect(),
        )
    };
    let u = 2f64.powi(-24);
    let uo = if dt == DType::Bf16 { 2f64.powi(-8) } else { u };
    for base in groups {
        let xs: Vec<f64> = (0..ll).map(|i| f64::from(xv[base + i * stride])).collect();
        let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = xs.iter().map(|v| (v - m).exp()).sum();
        for (i, &xi) in xs.iter().enumerate() {
            let g = f64::from(got[base + i * stride]);
            let (want, tol) = if log {
                let w = xi - m - s.ln();
                (
                    w,
                    ((xi - m).abs() + s.ln().abs()) * 2.0 * u
                        + (ll as f64 + 8.0) * u
                        + uo * w.abs(),
                )
            } else {
                let w = (xi - m).exp() / s;
                (w, (ll as f64 + 8.0) * u * w + uo * w + 1e-30)
            };
            assert!(
                (g - want).abs() <= tol,
                "{shape:?} axis {axis_at} log {log} {dt}: [{base} + {i}] {g} vs {want}"
            );
        }
    }
}

#[test]
fn softmax_and_log_softmax_along_any_axis() {
    check([3, 37, 130], 1, false, DType::F32);
    check([2, 200, 5], 1, true, DType::F32);
    check([2, 9, 300], 1, false, DType::Bf16);
    check([4, 3, 77], 2, true, DType::F32);
}

#[test]
fn reduce_over_several_axes() {
    let shape = [3usize, 4, 5, 6];
    let cases: [(&[usize], bool, &[usize]); 4] = [
        (&[1, 2], true, &[3, 1, 1, 6]),
        (&[0, 2], false, &[4, 6]),
        (&[], false, &[]),
        (&[3, 1], true, &[3, 1, 5, 1]),
    ];
    for (axes, keep, oshape) in cases {
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min] {
            let mut k = Kernel::new("reduce_axes");
            let x = k.input("x", DType::F32, &shape).unwrap();
            let y = k.output("y", DType::F32, oshape).unwrap();
            reduce_axes(&mut k, &y, &x, axes, op, keep).unwrap();
            let p = k.build().unwrap();
            let xv = data(360, 11);
            let (outs, _) = run(&p, &[("x", enc(DType::F32, &xv))]);
            let got = dec(DType::F32, output(&outs, "y"));
            let red: Vec<usize> = if axes.is_empty() {
                (0..4).collect()
            } else {
                let mut v = axes.to_vec();
                v.sort_unstable();
                v
            };
            // Group the elements by their kept coordinates, in row-major order of x (the
            // reduced elements of a group are then in row-major order too).
            let mut groups: std::collections::BTreeMap<Vec<usize>, Vec<f32>> = Default::default();
            for (i, &v) in xv.iter().enumerate() {
                let mut at = [0usize; 4];
                let mut rest = i;
                for d in (0..4).rev() {
                    at[d] = rest % shape[d];
                    rest /= shape[d];
                }
                let key: Vec<usize> = (0..4).filter(|d| !red.contains(d)).map(|d| at[d]).collect();
                groups.entry(key).or_default().push(v);
            }
            assert_eq!(got.len(), groups.len().max(1));
            for (gi, (key, vals)) in groups.iter().enumerate() {
                let fold = |f: fn(f32, f32) -> f32| vals[1..].iter().fold(vals[0], |a, &b| f(a, b));
                let want = match op {
                    ReduceOp::Sum => fold(|a, b| a + b),
                    ReduceOp::Mean => fold(|a, b| a + b) / vals.len() as f32,
                    ReduceOp::Max => fold(f32::max),
                    ReduceOp::Min => fold(f32::min),
                };
                assert_eq!(
                    got[gi].to_bits(),
                    want.to_bits(),
                    "{axes:?} {op:?}: {key:?}"
                );
            }
        }
    }
}
