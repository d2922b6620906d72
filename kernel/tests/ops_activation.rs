//! `activation` with every `ActFn` (immediate and `[P, 1]` scales, immediate and tile
//! biases) and `activation_reduce` (add and maximum), against binary64 references: within
//! 1 ULP of fp32 (exact for the correctly rounded functions), the special values at the
//! ISA's documented limits, bf16 outputs within 1 bf16 ULP, int32 inputs; the reduction
//! exactly the left-to-right fold of the fp32 results.
//!
//! Why 1 ULP: the simulator evaluates each function in binary64 (IEEE `+ − × /` and a
//! correctly rounded `sqrt` only; relative error below about 2^−45 over these inputs) and
//! rounds once to fp32; the references here are binary64 too (Rust's libm, accurate to about
//! 1 binary64 ULP, and a series / continued fraction for erf). Both binary64 values are within
//! far less than half an fp32 ULP of the exact value, so after rounding to fp32 they agree
//! except when the exact value lies within about 2^−45 (relative) of a rounding boundary —
//! there they may fall on the two adjacent floats: at most 1 ULP apart, never more. The
//! functions the ISA documents as correctly rounded (identity, relu, sqrt, reciprocal,
//! square, abs) are compared bit for bit. bf16 outputs round the same binary64 value once
//! more, so the same argument gives 1 bf16 ULP. GELU's tanh approximation is `ActFn::Gelu`,
//! the erf form `ActFn::GeluErf` (both in `ActFn::ALL`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::{ActBias, ActFn, Activation, AluOp, DType, Kernel, Scalar};
use refs::{
    SPECIALS, act_arg, act_exact, act_ref, canon, dec, f32s, grid, i32s, max_num, ulps, ulps_bf16,
};

/// Inputs over each function's interesting range, with the special values.
fn inputs(f: ActFn, n: usize) -> Vec<f32> {
    let (lo, hi) = match f {
        ActFn::Log | ActFn::Sqrt | ActFn::Rsqrt => (0.0, 50.0),
        ActFn::Exp => (-100.0, 90.0),
        _ => (-30.0, 30.0),
    };
    let mut v = grid(n, lo, hi, 7 + f.code() as u64);
    for (i, s) in SPECIALS.iter().enumerate() {
        v[i * 13 % n] = *s;
    }
    v[5] = 1.0e-30;
    v[6] = 3.0e30;
    v
}

/// Runs `op` over a `[rows, cols]` input with a `[rows, 1]` scale and bias (tiles or
/// immediates) and returns `(x, scale, bias, got, sums)`.
#[allow(clippy::type_complexity)]
fn run_act(
    f: ActFn,
    rows: usize,
    cols: usize,
    tile_scale: bool,
    out: DType,
    reduce: Option<AluOp>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut k = Kernel::new("act");
    let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
    let sb = k.input("sb", DType::F32, &[rows, 2]).unwrap();
    let y = k.output("y", out, &[rows, cols]).unwrap();
    let sums = k.output("sums", DType::F32, &[rows, 1]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[rows, cols]).unwrap();
    let st = k.sbuf_tile("sb", DType::F32, &[rows, 2]).unwrap();
    let yt = k.sbuf_tile("y", out, &[rows, cols]).unwrap();
    let rt = k.sbuf_tile("r", DType::F32, &[rows, 1]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&st, &sb).unwrap();
    let (sc, bi) = (st.slice(1, 0..1).unwrap(), st.slice(1, 1..2).unwrap());
    let scale: Scalar<'_> = if tile_scale { (&sc).into() } else { 1.0.into() };
    let bias = if tile_scale {
        ActBias::Tile(&bi)
    } else {
        // -0 keeps a -0 input -0 (x·1 + (-0) = x for every x).
        ActBias::Scalar(-0.0)
    };
    k.emit(Activation {
        bias,
        scale,
        reduce: reduce.map(|op| (op, rt.view())),
        ..Activation::new(&yt, f, &xt)
    })
    .unwrap();
    k.dma_copy(&y, &yt).unwrap();
    if reduce.is_some() {
        k.dma_copy(&sums, &rt).unwrap();
    }
    let p = k.build().unwrap();
    let xv = inputs(f, rows * cols);
    let mut rng = Rng(31 + f.code() as u64);
    let sbv: Vec<f32> = (0..rows * 2)
        .map(|i| {
            if i % 2 == 0 {
                0.5 + rng.unit().abs()
            } else {
                rng.unit()
            }
        })
        .collect();
    let (outs, _) = run(&p, &[("x", f32s(&xv)), ("sb", f32s(&sbv))]);
    let got = dec(out, output(&outs, "y"));
    let sums = dec(DType::F32, output(&outs, "sums"));
    let (scale, bias): (Vec<f32>, Vec<f32>) = (0..rows)
        .map(|r| {
            if tile_scale {
                (sbv[2 * r], sbv[2 * r + 1])
            } else {
                (1.0, -0.0)
            }
        })
        .unzip();
    (xv, scale, bias, got, sums)
}

#[test]
fn every_function_within_one_ulp() {
    let (rows, cols) = (100, 64);
    for f in ActFn::ALL {
        for tile_scale in [false, true] {
            let (xv, sc, bi, got, _) = run_act(f, rows, cols, tile_scale, DType::F32, None);
            for r in 0..rows {
                for c in 0..cols {
                    let i = r * cols + c;
                    let t = act_arg(xv[i], sc[r], bi[r]);
                    let want = canon(act_ref(f, t) as f32);
                    let d = ulps(got[i], want);
                    let ok = if act_exact(f) { d == 0 } else { d <= 1 };
                    assert!(
                        ok && (!want.is_nan() || got[i].to_bits() == refs::QNAN),
                        "{} ({r}, {c}): f({t:e}) = {:e}, want {want:e} ({d} ULP)",
                        f.name(),
                        got[i]
                    );
                    // Signed zeros at the documented limits.
                    if want == 0.0 && act_exact(f) {
                        assert_eq!(got[i].to_bits(), want.to_bits(), "{} at {t}", f.name());
                    }
                }
            }
        }
    }
}

#[test]
fn documented_special_values() {
    use ActFn::*;
    let inf = f32::INFINITY;
    let cases: [(ActFn, f32, f32); 16] = [
        (Exp, -inf, 0.0),
        (Exp, inf, inf),
        (Tanh, -0.0, -0.0),
        (Log, 0.0, -inf),
        (Log, -0.0, -inf),
        (Sqrt, -0.0, -0.0),
        (Rsqrt, 0.0, inf),
        (Rsqrt, -0.0, -inf),
        (Reciprocal, -0.0, -inf),
        (Sigmoid, -inf, 0.0),
        (Sigmoid, inf, 1.0),
        (Silu, -inf, -0.0),
        (GeluErf, -inf, -0.0),
        (Gelu, -inf, -0.0),
        (Softplus, inf, inf),
        (Erf, -inf, -1.0),
    ];
    for (f, x, want) in cases {
        let mut k = Kernel::new("special");
        let xi = k.input("x", DType::F32, &[1, 1]).unwrap();
        let yo = k.output("y", DType::F32, &[1, 1]).unwrap();
        let xt = k.sbuf_tile("x", DType::F32, &[1, 1]).unwrap();
        let yt = k.sbuf_tile("y", DType::F32, &[1, 1]).unwrap();
        k.dma_copy(&xt, &xi).unwrap();
        k.activation(&yt, f, &xt, -0.0, 1.0).unwrap();
        k.dma_copy(&yo, &yt).unwrap();
        let (outs, _) = run(&k.build().unwrap(), &[("x", f32s(&[x]))]);
        let got = dec(DType::F32, output(&outs, "y"))[0];
        assert_eq!(got.to_bits(), want.to_bits(), "{}({x}) = {got}", f.name());
    }
    // Log of a negative number and NaN inputs give the canonical NaN.
    for (f, x) in [
        (Log, -1.0),
        (Sqrt, -4.0),
        (Identity, f32::NAN),
        (Relu, f32::NAN),
    ] {
        let mut k = Kernel::new("nan");
        let xi = k.input("x", DType::F32, &[1, 1]).unwrap();
        let yo = k.output("y", DType::F32, &[1, 1]).unwrap();
        let xt = k.sbuf_tile("x", DType::F32, &[1, 1]).unwrap();
        let yt = k.sbuf_tile("y", DType::F32, &[1, 1]).unwrap();
        k.dma_copy(&xt, &xi).unwrap();
        k.activation(&yt, f, &xt, ActBias::None, 1.0).unwrap();
        k.dma_copy(&yo, &yt).unwrap();
        let (outs, _) = run(&k.build().unwrap(), &[("x", f32s(&[x]))]);
        let got = dec(DType::F32, output(&outs, "y"))[0];
        assert_eq!(got.to_bits(), refs::QNAN, "{}({x}) = {got}", f.name());
    }
}

#[test]
fn bf16_outputs_within_one_bf16_ulp() {
    let (rows, cols) = (64, 96);
    for f in [
        ActFn::Exp,
        ActFn::Sigmoid,
        ActFn::GeluErf,
        ActFn::Silu,
        ActFn::Rsqrt,
    ] {
        let (xv, sc, bi, got, _) = run_act(f, rows, cols, true, DType::Bf16, None);
        for r in 0..rows {
            for c in 0..cols {
                let i = r * cols + c;
                let t = act_arg(xv[i], sc[r], bi[r]);
                let want = refs::bf16(canon(act_ref(f, t) as f32));
                assert!(
                    ulps_bf16(got[i], want) <= 1,
                    "{} ({r}, {c}): {} vs {want}",
                    f.name(),
                    got[i]
                );
            }
        }
    }
}

#[test]
fn reductions_fold_the_fp32_results() {
    let (rows, cols) = (128, 80);
    for (f, op) in [
        (ActFn::Exp, AluOp::Add),
        (ActFn::Square, AluOp::Add),
        (ActFn::Tanh, AluOp::Max),
        (ActFn::Identity, AluOp::Max),
    ] {
        let (_, _, _, got, sums) = run_act(f, rows, cols, true, DType::F32, Some(op));
        for r in 0..rows {
            let row = &got[r * cols..(r + 1) * cols];
            let want = if op == AluOp::Add {
                row.iter().fold(0.0f32, |a, &v| canon(a + v))
            } else {
                row.iter().fold(f32::NEG_INFINITY, |a, &v| max_num(a, v))
            };
            assert_eq!(
                sums[r].to_bits(),
                want.to_bits(),
                "{} {} row {r}",
                f.name(),
                op.name()
            );
        }
    }
}

#[test]
fn int32_inputs_and_psum_outputs() {
    // Activate reads any dtype (NKI: the engine computes in fp32): int32 in, PSUM fp32 out,
    // a [P, 1] scale and an immediate bias.
    let (rows, cols) = (40, 30);
    let mut k = Kernel::new("int_act");
    let x = k.input("x", DType::I32, &[rows, cols]).unwrap();
    let s = k.input("s", DType::F32, &[rows, 1]).unwrap();
    let y = k.output("y", DType::F32, &[rows, cols]).unwrap();
    let xt = k.sbuf_tile("x", DType::I32, &[rows, cols]).unwrap();
    let st = k.sbuf_tile("s", DType::F32, &[rows, 1]).unwrap();
    let pt = k.psum_tile("p", DType::F32, &[rows, cols]).unwrap();
    let yt = k.sbuf_tile("y", DType::F32, &[rows, cols]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&st, &s).unwrap();
    k.activation(&pt, ActFn::Square, &xt, 0.5, &st).unwrap();
    k.tensor_copy(&yt, &pt).unwrap();
    k.dma_copy(&y, &yt).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(4);
    let xv: Vec<i32> = (0..rows * cols).map(|_| rng.small(1000) as i32).collect();
    let sv: Vec<f32> = (0..rows).map(|_| rng.unit()).collect();
    let (outs, _) = run(&p, &[("x", i32s(&xv)), ("s", f32s(&sv))]);
    let got = dec(DType::F32, output(&outs, "y"));
    for r in 0..rows {
        for c in 0..cols {
            let t = act_arg(xv[r * cols + c] as f32, sv[r], 0.5);
            assert_eq!(got[r * cols + c].to_bits(), canon(t * t).to_bits());
        }
    }
}
