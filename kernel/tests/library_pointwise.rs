//! `library::pointwise`: ONNX's composite element-wise operators (unary, PRelu, Where, the
//! variadic Sum / Max / Min / Mean, any-rank binary incl. Pow) against plain references of the
//! documented order of operations — bit-exact where every step is an IEEE operation, within
//! a stated bound where the ISA's `exp` enters — with broadcasting, ranks 1 to 5, several
//! blocks, ±0 / ±∞ / NaN in the data, every run hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::pointwise::{self, Unary, Variadic};
use nrt_kernel::{AluOp, DType, Kernel};
use refs::{SPECIALS, alu, canon, cast, dec, enc, max_num, min_num};

fn data(n: usize, seed: u64, specials: bool) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            if specials && i % 13 == 5 {
                SPECIALS[rng.below(SPECIALS.len())]
            } else {
                rng.unit() * 4.0
            }
        })
        .collect()
}

/// Row-major index of `out` position `i` into an operand of `shape` broadcast to `out`.
fn bidx(out: &[usize], shape: &[usize], mut i: usize) -> usize {
    let r = out.len();
    let pad = r - shape.len();
    let (mut idx, mut stride) = (0, 1);
    for d in (0..r).rev() {
        let c = i % out[d];
        i /= out[d];
        if d >= pad {
            let s = shape[d - pad];
            if s != 1 {
                idx += c * stride;
            }
            stride *= s;
        }
    }
    idx
}

fn same(got: f32, want: f32) -> bool {
    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan())
}

fn run_unary(shape: &[usize], op: Unary, dt: DType, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut k = Kernel::new("unary_test");
    let x = k.input("x", dt, shape).unwrap();
    let y = k.output("y", dt, shape).unwrap();
    pointwise::unary(&mut k, &y, &x, op).unwrap();
    let p = k.build().unwrap();
    let n: usize = shape.iter().product();
    let xs: Vec<f32> = data(n, seed, true).iter().map(|&v| cast(dt, v)).collect();
    let (outs, _) = run(&p, &[("x", enc(dt, &xs))]);
    (xs, dec(dt, output(&outs, "y")))
}

#[test]
fn exact_unaries_match_their_fp32_sequences() {
    type Ref = fn(f32) -> f32;
    let ops: [(Unary, Ref); 8] = [
        (Unary::Neg, |x| canon(-x)),
        (Unary::Sign, |x| {
            (if x > 0.0 { 1.0 } else { 0.0 }) - (if x < 0.0 { 1.0 } else { 0.0 })
        }),
        (Unary::LeakyRelu { alpha: 0.01 }, |x| {
            canon(max_num(x, 0.0) + canon(min_num(x, 0.0) * 0.01))
        }),
        (
            Unary::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
            |x| min_num(max_num(canon(canon(x * 0.2) + 0.5), 0.0), 1.0),
        ),
        (Unary::HardSwish, |x| {
            let h = min_num(max_num(canon(canon(x * (1.0 / 6.0)) + 0.5), 0.0), 1.0);
            canon(x * h)
        }),
        (Unary::Clip { lo: -1.5, hi: 2.0 }, |x| {
            min_num(max_num(x, -1.5), 2.0)
        }),
        (
            Unary::Shrink {
                lambd: 0.5,
                bias: 0.25,
            },
            |x| {
                if x > 0.5 {
                    canon(x - 0.25)
                } else if x < -0.5 {
                    canon(x + 0.25)
                } else {
                    0.0
                }
            },
        ),
        (Unary::Softsign, |x| canon(x / canon(x.abs() + 1.0))),
    ];
    for (op, f) in ops {
        for (shape, dt) in [
            (&[3usize, 5, 7][..], DType::F32),
            (&[300, 1000][..], DType::F32),
            (&[2, 65], DType::Bf16),
        ] {
            let (xs, got) = run_unary(shape, op, dt, 7);
            for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
                let want = cast(dt, f(x));
                assert!(
                    same(g, want),
                    "{op:?} {shape:?} {dt}: x[{i}] = {x}: {g} vs {want}"
                );
            }
        }
    }
}

/// Elu / Selu: `exp` within 1 ULP of fp32 (relative 2⁻²³), then `(e − 1)·α` (each rounded):
/// the result is within `|α|·(2⁻²³·e + 2⁻²⁴·|e − 1|)·(1 + 2⁻²³) + 2⁻²⁴·|y|` of the exact
/// value; a factor 2 of slack.
#[test]
fn elu_and_selu_within_bound() {
    for (op, alpha, gamma) in [
        (Unary::Elu { alpha: 1.5 }, 1.5f64, 1.0f64),
        (
            Unary::Selu {
                alpha: 1.673_263_2,
                gamma: 1.050_701,
            },
            f64::from(1.673_263_2f32),
            f64::from(1.050_701f32),
        ),
    ] {
        let (xs, got) = run_unary(&[129, 37], op, DType::F32, 3);
        for (i, (&x, &g)) in xs.iter().zip(&got).enumerate() {
            let xd = f64::from(x);
            if x.is_nan() {
                // maximumNumber / minimumNumber drop the NaN (documented).
                assert_eq!(g, 0.0, "{op:?}: x[{i}] NaN gave {g}");
                continue;
            }
            let want = if x > 0.0 {
                gamma * xd
            } else {
                gamma * alpha * (xd.exp() - 1.0)
            };
            if (want as f32).is_infinite() {
                assert_eq!(g, want as f32, "{op:?}: x[{i}] = {x}");
                continue;
            }
            let e = xd.min(0.0).exp();
            let tol = 2.0
                * gamma
                * (alpha * (e * 2f64.powi(-23) + (e - 1.0).abs() * 2f64.powi(-24))
                    + want.abs() * 2f64.powi(-23))
                + 1e-30;
            assert!(
                (f64::from(g) - want).abs() <= tol,
                "{op:?}: x[{i}] = {x}: {g} vs {want} ± {tol}"
            );
        }
    }
}

#[test]
fn prelu_broadcasts_its_slope() {
    let (xs_shape, ss) = ([2usize, 3, 5, 7], [3usize, 1, 1]);
    let mut k = Kernel::new("prelu_test");
    let x = k.input("x", DType::F32, &xs_shape).unwrap();
    let s = k.input("s", DType::F32, &ss).unwrap();
    let y = k.output("y", DType::F32, &xs_shape).unwrap();
    pointwise::prelu(&mut k, &y, &x, &s).unwrap();
    let p = k.build().unwrap();
    let xv = data(210, 1, true);
    let sv = [0.25f32, -0.5, 2.0];
    let (outs, _) = run(
        &p,
        &[("x", enc(DType::F32, &xv)), ("s", enc(DType::F32, &sv))],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    for i in 0..210 {
        let sl = sv[bidx(&xs_shape, &ss, i)];
        let want = canon(max_num(xv[i], 0.0) + canon(min_num(xv[i], 0.0) * sl));
        assert!(same(got[i], want), "y[{i}]: {} vs {want}", got[i]);
    }
}

#[test]
fn where_selects_bits_with_broadcasting() {
    for dt in [DType::F32, DType::Bf16, DType::I32] {
        let (os, cs, as_, bs) = (
            [2usize, 3, 5, 7],
            [1usize, 1, 5, 7],
            [2usize, 3, 5, 7],
            [1usize],
        );
        let mut k = Kernel::new("where_test");
        let c = k.input("c", DType::F32, &cs).unwrap();
        let a = k.input("a", dt, &as_).unwrap();
        let b = k.input("b", dt, &bs).unwrap();
        let y = k.output("y", dt, &os).unwrap();
        pointwise::where_(&mut k, &y, &c, &a, &b).unwrap();
        let p = k.build().unwrap();
        let mut rng = Rng(9);
        let cv: Vec<f32> = (0..35)
            .map(|i| {
                if i % 7 == 3 {
                    f32::NAN
                } else {
                    rng.below(2) as f32
                }
            })
            .collect();
        let (av, bv): (Vec<f32>, Vec<f32>) = if dt == DType::I32 {
            ((0..210).map(|i| (i as f32) - 100.0).collect(), vec![-7.0])
        } else {
            (
                data(210, 4, true).iter().map(|&v| cast(dt, v)).collect(),
                vec![f32::NEG_INFINITY],
            )
        };
        let encode = |v: &[f32]| {
            if dt == DType::I32 {
                refs::i32s(&v.iter().map(|&x| x as i32).collect::<Vec<_>>())
            } else {
                enc(dt, v)
            }
        };
        let (outs, _) = run(
            &p,
            &[
                ("c", enc(DType::F32, &cv)),
                ("a", encode(&av)),
                ("b", encode(&bv)),
            ],
        );
        let got: Vec<f32> = if dt == DType::I32 {
            refs::to_i32(output(&outs, "y"))
                .iter()
                .map(|&v| v as f32)
                .collect()
        } else {
            dec(dt, output(&outs, "y"))
        };
        for i in 0..210 {
            let cond = cv[bidx(&os, &cs, i)];
            let want = if cond != 0.0 { av[i] } else { bv[0] };
            assert!(
                got[i].to_bits() == want.to_bits(),
                "{dt}: y[{i}] (cond {cond}) = {} vs {want}",
                got[i]
            );
        }
    }
}

#[test]
fn variadic_folds_left_to_right() {
    let shapes: [&[usize]; 3] = [&[4, 1, 6], &[5, 6], &[6]];
    let os = [4usize, 5, 6];
    for op in [Variadic::Sum, Variadic::Max, Variadic::Min, Variadic::Mean] {
        let mut k = Kernel::new("variadic_test");
        let ins: Vec<_> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| k.input(&format!("x{i}"), DType::F32, s).unwrap())
            .collect();
        let y = k.output("y", DType::F32, &os).unwrap();
        let refs_: Vec<&nrt_kernel::View> = ins.iter().map(|t| &**t).collect();
        pointwise::variadic(&mut k, &y, &refs_, op).unwrap();
        let p = k.build().unwrap();
        let vals: Vec<Vec<f32>> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| data(s.iter().product(), 20 + i as u64, true))
            .collect();
        let inputs: Vec<(String, Vec<u8>)> = vals
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("x{i}"), enc(DType::F32, v)))
            .collect();
        let inputs: Vec<(&str, Vec<u8>)> = inputs
            .iter()
            .map(|(n, v)| (n.as_str(), v.clone()))
            .collect();
        let (outs, _) = run(&p, &inputs);
        let got = dec(DType::F32, output(&outs, "y"));
        let aop = match op {
            Variadic::Sum | Variadic::Mean => AluOp::Add,
            Variadic::Max => AluOp::Max,
            Variadic::Min => AluOp::Min,
        };
        for i in 0..120 {
            let x: Vec<f32> = (0..3).map(|j| vals[j][bidx(&os, shapes[j], i)]).collect();
            let mut want = alu(aop, alu(aop, x[0], x[1]), x[2]);
            if op == Variadic::Mean {
                want = canon(want / 3.0);
            }
            assert!(
                same(got[i], want),
                "{op:?}: y[{i}] {x:?}: {} vs {want}",
                got[i]
            );
        }
    }
}

/// Pow through `binary_any` at rank 5 with a broadcast exponent: the simulator's power is
/// `pow` in binary64 rounded once (so within 1 ULP of, and almost always equal to, `powf`).
#[test]
fn pow_any_rank_broadcasts() {
    let (as_, bs, os) = ([2usize, 1, 3, 4, 5], [5usize], [2usize, 1, 3, 4, 5]);
    let mut k = Kernel::new("pow_test");
    let a = k.input("a", DType::F32, &as_).unwrap();
    let b = k.input("b", DType::F32, &bs).unwrap();
    let y = k.output("y", DType::F32, &os).unwrap();
    pointwise::binary_any(&mut k, &y, &a, &b, AluOp::Power).unwrap();
    let p = k.build().unwrap();
    let av: Vec<f32> = data(120, 5, false).iter().map(|v| v.abs() + 0.1).collect();
    let bv = [2.0f32, 0.5, -1.0, 3.0, 1.7];
    let (outs, _) = run(
        &p,
        &[("a", enc(DType::F32, &av)), ("b", enc(DType::F32, &bv))],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    for i in 0..120 {
        let e = bv[bidx(&os, &bs, i)];
        let want = alu(AluOp::Power, av[i], e);
        assert!(
            same(got[i], want),
            "y[{i}] = {}^{e}: {} vs {want}",
            av[i],
            got[i]
        );
        let powf = av[i].powf(e);
        assert!(refs::ulps(got[i], powf) <= 1, "y[{i}] vs powf {powf}");
    }
}

#[test]
fn misuse_is_an_error() {
    let mut k = Kernel::new("pointwise_misuse");
    let x = k.input("x", DType::F32, &[4, 5]).unwrap();
    let y = k.output("y", DType::F32, &[4, 6]).unwrap();
    let e = pointwise::unary(&mut k, &y, &x, Unary::Neg).unwrap_err();
    assert!(e.message().contains("must have x"), "{}", e.message());
    let s = k.input("s", DType::F32, &[3]).unwrap();
    let y2 = k.output("y2", DType::F32, &[4, 5]).unwrap();
    let e = pointwise::prelu(&mut k, &y2, &x, &s).unwrap_err();
    assert!(
        e.message().contains("does not broadcast"),
        "{}",
        e.message()
    );
    let e = pointwise::variadic(&mut k, &y2, &[], Variadic::Sum).unwrap_err();
    assert!(e.message().contains("at least one"), "{}", e.message());
    let i = k.input("i", DType::I32, &[4, 5]).unwrap();
    let e = pointwise::where_(&mut k, &y2, &x, &i, &x).unwrap_err();
    assert!(e.message().contains("dtype"), "{}", e.message());
}

/// Float → int32 truncates toward zero (ONNX), saturating, NaN → 0; other pairs convert as
/// the DMA does.
#[test]
fn cast_truncates_to_int() {
    let mut k = Kernel::new("cast_test");
    let x = k.input("x", DType::F32, &[3, 50]).unwrap();
    let y = k.output("y", DType::I32, &[3, 50]).unwrap();
    pointwise::cast(&mut k, &y, &x).unwrap();
    let p = k.build().unwrap();
    let mut xv = data(150, 8, false);
    xv[..10].copy_from_slice(&[
        2.5,
        -2.5,
        3.0,
        -3.0,
        0.5,
        -0.5,
        1e10,
        -1e10,
        f32::NAN,
        16_777_217.0,
    ]);
    let (outs, _) = run(&p, &[("x", enc(DType::F32, &xv))]);
    let got = refs::to_i32(output(&outs, "y"));
    for (i, (&x, &g)) in xv.iter().zip(&got).enumerate() {
        let want = if x.is_nan() { 0 } else { x.trunc() as i32 };
        assert_eq!(g, want, "x[{i}] = {x}");
    }
}

/// An attention-mask shaped broadcast (`[2, 6, 64, 64] + [1, 1, 64, 64]`): the tiler splits
/// the 4096 columns so blocks fill the partitions; results bit-exact.
#[test]
fn mask_broadcast_fills_partitions() {
    let (os, ms) = ([2usize, 6, 64, 64], [1usize, 1, 64, 64]);
    let mut k = Kernel::new("mask_add");
    let a = k.input("a", DType::F32, &os).unwrap();
    let m = k.input("m", DType::F32, &ms).unwrap();
    let y = k.output("y", DType::F32, &os).unwrap();
    pointwise::binary_any(&mut k, &y, &a, &m, AluOp::Add).unwrap();
    let p = k.build().unwrap();
    let (av, mv) = (data(49152, 12, true), data(4096, 13, true));
    let (outs, _) = run(
        &p,
        &[("a", enc(DType::F32, &av)), ("m", enc(DType::F32, &mv))],
    );
    let got = dec(DType::F32, output(&outs, "y"));
    for i in 0..49152 {
        let want = alu(AluOp::Add, av[i], mv[i % 4096]);
        assert!(same(got[i], want), "y[{i}]: {} vs {want}", got[i]);
    }
}
