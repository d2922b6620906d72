//! `library::gemm`: NumPy `matmul` (batched, broadcast batch dimensions, 1-D operands) and
//! ONNX `Gemm` (alpha, beta, transA, transB, C broadcast) against plain references of the
//! documented order — fused multiply-adds from +0 within each 128-deep K tile,
//! tile sums added in order, then `fl(fl(alpha·p) + fl(beta·c))` — bit for bit, every run
//! hazard-free.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::library::gemm::{self, GemmOpts};
use nrt_kernel::{DType, Kernel};
use refs::{dec, enc};

fn data(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..n).map(|_| rng.unit() * 2.0).collect()
}

/// The matmul's order: per K tile of 128 a chain of fused multiply-adds from +0, tiles in order.
fn dot(a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32, kd: usize) -> f32 {
    let mut acc = 0f32;
    for t0 in (0..kd).step_by(128) {
        let mut s = 0f32;
        for i in t0..kd.min(t0 + 128) {
            s = a(i).mul_add(b(i), s);
        }
        acc = if t0 == 0 { s } else { acc + s };
    }
    acc
}

#[test]
fn matmul_nd_broadcasts_batches_and_vectors() {
    let cases: [(&[usize], &[usize], &[usize]); 6] = [
        (&[2, 1, 5, 130], &[3, 130, 7], &[2, 3, 5, 7]),
        (&[130], &[2, 130, 6], &[2, 6]),
        (&[4, 9, 20], &[20], &[4, 9]),
        (&[20], &[20], &[]),
        (&[3, 4, 9, 20], &[1, 20, 6], &[3, 4, 9, 6]),
        (&[2, 3, 128, 64], &[1, 3, 64, 128], &[2, 3, 128, 128]),
    ];
    for (sa, sb, so) in cases {
        let mut k = Kernel::new("mm_nd");
        let a = k.input("a", DType::F32, sa).unwrap();
        let b = k.input("b", DType::F32, sb).unwrap();
        let y = k.output("y", DType::F32, so).unwrap();
        gemm::matmul_nd(&mut k, &y, &a, &b).unwrap();
        let p = k.build().unwrap();
        let (na, nb) = (sa.iter().product::<usize>(), sb.iter().product::<usize>());
        let (av, bv) = (data(na, 1), data(nb, 2));
        let (outs, _) = run(
            &p,
            &[("a", enc(DType::F32, &av)), ("b", enc(DType::F32, &bv))],
        );
        let got = dec(DType::F32, output(&outs, "y"));
        // Reference through explicit 4-D indexing.
        let a4: Vec<usize> = if sa.len() == 1 {
            vec![1, 1, 1, sa[0]]
        } else {
            let mut v = vec![1; 4 - sa.len()];
            v.extend_from_slice(sa);
            v
        };
        let b4: Vec<usize> = if sb.len() == 1 {
            vec![1, 1, sb[0], 1]
        } else {
            let mut v = vec![1; 4 - sb.len()];
            v.extend_from_slice(sb);
            v
        };
        let (m, kd, n) = (a4[2], a4[3], b4[3]);
        let (b0, b1) = (a4[0].max(b4[0]), a4[1].max(b4[1]));
        let mut want = Vec::new();
        for i0 in 0..b0 {
            for i1 in 0..b1 {
                let ai = |i: usize, s: usize| if s == 1 { 0 } else { i };
                let abase = (ai(i0, a4[0]) * a4[1] + ai(i1, a4[1])) * m * kd;
                let bbase = (ai(i0, b4[0]) * b4[1] + ai(i1, b4[1])) * kd * n;
                for r in 0..m {
                    for c in 0..n {
                        want.push(dot(
                            |t| av[abase + r * kd + t],
                            |t| bv[bbase + t * n + c],
                            kd,
                        ));
                    }
                }
            }
        }
        assert_eq!(got.len(), want.len(), "{sa:?} x {sb:?}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{sa:?} x {sb:?}: y[{i}]");
        }
    }
}

#[test]
fn gemm_alpha_beta_transposes_and_c_broadcast() {
    let (m, kd, n) = (70, 150, 600);
    for (ta, tb, alpha, beta, cs, dt) in [
        (false, true, 1.0f32, 1.0f32, vec![n], DType::F32),
        (true, false, 0.5, 2.0, vec![m, 1], DType::F32),
        (false, false, 1.5, 0.0, vec![n], DType::F32),
        (true, true, 1.0, -1.0, vec![m, n], DType::Bf16),
    ] {
        let mut k = Kernel::new("gemm_test");
        let sa = if ta { [kd, m] } else { [m, kd] };
        let sb = if tb { [n, kd] } else { [kd, n] };
        let a = k.input("a", DType::F32, &sa).unwrap();
        let b = k.input("b", DType::F32, &sb).unwrap();
        let c = k.input("c", DType::F32, &cs).unwrap();
        let y = k.output("y", dt, &[m, n]).unwrap();
        let opts = GemmOpts {
            alpha,
            beta,
            trans_a: ta,
            trans_b: tb,
        };
        gemm::gemm(&mut k, &y, &a, &b, Some(&c), &opts).unwrap();
        let p = k.build().unwrap();
        let (av, bv) = (data(m * kd, 3), data(kd * n, 4));
        let cv = data(cs.iter().product(), 5);
        let (outs, _) = run(
            &p,
            &[
                ("a", enc(DType::F32, &av)),
                ("b", enc(DType::F32, &bv)),
                ("c", enc(DType::F32, &cv)),
            ],
        );
        let got = dec(dt, output(&outs, "y"));
        for r in 0..m {
            for col in 0..n {
                let p = dot(
                    |t| if ta { av[t * m + r] } else { av[r * kd + t] },
                    |t| {
                        if tb {
                            bv[col * kd + t]
                        } else {
                            bv[t * n + col]
                        }
                    },
                    kd,
                );
                let cval = match cs.len() {
                    1 => cv[col],
                    _ if cs[1] == 1 => cv[r],
                    _ => cv[r * n + col],
                };
                let sp = if alpha == 1.0 { p } else { alpha * p };
                let w = if beta == 0.0 {
                    sp
                } else if beta == 1.0 {
                    sp + cval
                } else {
                    beta * cval + sp
                };
                let w = refs::cast(dt, w);
                let g = got[r * n + col];
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "{opts:?} {dt}: y[{r}, {col}] {g} vs {w}"
                );
            }
        }
    }
}

/// `matmul_fused` (bias + activation applied at PSUM evacuation) equals `matmul`, the
/// broadcasting add and the activation run as separate passes, bit for bit (fp32 out), in
/// both schedules, with `b` transposed, with only an activation, and past the fused width.
#[test]
fn fused_epilogue_equals_separate_passes() {
    use nrt_kernel::ActFn;
    use nrt_kernel::library::matmul::{self, Epilogue, MatmulOpts, Schedule};
    use nrt_kernel::library::{activation, pointwise};
    let cases = [
        (
            200usize,
            300usize,
            600usize,
            Schedule::Auto,
            false,
            true,
            Some(ActFn::Relu),
        ),
        (
            130,
            260,
            700,
            Schedule::Streamed,
            true,
            true,
            Some(ActFn::GeluErf),
        ),
        (64, 100, 96, Schedule::Auto, false, false, Some(ActFn::Tanh)),
        (
            3,
            20,
            4100,
            Schedule::Auto,
            false,
            true,
            Some(ActFn::Sigmoid),
        ),
        (70, 129, 300, Schedule::Auto, true, true, None),
    ];
    for (m, kd, n, schedule, tb, with_bias, act) in cases {
        let opts = MatmulOpts {
            b_transposed: tb,
            schedule,
            ..MatmulOpts::default()
        };
        let sb = if tb { [n, kd] } else { [kd, n] };
        let mk = |fused: bool| {
            let mut k = Kernel::new("fused");
            let a = k.input("a", DType::F32, &[m, kd]).unwrap();
            let b = k.input("b", DType::F32, &sb).unwrap();
            let c = k.input("c", DType::F32, &[n]).unwrap();
            let y = k.output("y", DType::F32, &[m, n]).unwrap();
            let bias = with_bias.then_some(&*c);
            if fused {
                matmul::matmul_fused(&mut k, &y, &a, &b, &opts, &Epilogue { bias, act }).unwrap();
            } else {
                matmul::matmul(&mut k, &y, &a, &b, &opts).unwrap();
                if let Some(c) = bias {
                    pointwise::binary_any(&mut k, &y, &y, c, nrt_kernel::AluOp::Add).unwrap();
                }
                if let Some(f) = act {
                    activation::activation(&mut k, &y, &y, f).unwrap();
                }
            }
            k.build().unwrap()
        };
        let ins = [
            ("a", enc(DType::F32, &data(m * kd, 7))),
            ("b", enc(DType::F32, &data(kd * n, 8))),
            ("c", enc(DType::F32, &data(n, 9))),
        ];
        let ins: Vec<(&str, Vec<u8>)> = ins.iter().map(|(a, b)| (*a, b.clone())).collect();
        let (fo, _) = run(&mk(true), &ins);
        let (so, _) = run(&mk(false), &ins);
        assert_eq!(
            output(&fo, "y"),
            output(&so, "y"),
            "[{m}, {kd}] x [{kd}, {n}] {schedule:?} tb {tb} bias {with_bias} {act:?}"
        );
    }
}
