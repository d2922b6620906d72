//! `tensor_scalar` with NKI's two chained operations (immediates, `[P, 1]` operands,
//! reversed operands, ScalarE's multiply-then-add, int32 bitvec chains),
//! `scalar_tensor_tensor`, `reciprocal` and `tensor_tensor` on GpSimdE, against plain Rust
//! references — partial tiles, fp32/bf16/int32, NaN and ±∞ — run on the simulator with no
//! hazards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod refs;

use common::{Rng, output, run};
use nrt_kernel::{
    AluOp, DType, EngineId, Kernel, Scalar, ScalarTensorTensor, TensorScalarChain, TensorTensor,
};
use refs::{SPECIALS, alu, alu_i32, bf16, dec, enc, f32s, i32s, to_i32};

/// `[rows, cols]` fp32 data: random values with the special values sprinkled in.
fn data(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed);
    (0..rows * cols)
        .map(|i| {
            if i % 7 == 3 {
                SPECIALS[rng.below(SPECIALS.len())]
            } else {
                rng.unit() * 8.0
            }
        })
        .collect()
}

/// One chain over a `[rows, cols]` input in row tiles of at most 128 (the last one partial),
/// with `[rows, 1]` operands `s0`, `s1` available as tiles.
#[derive(Clone, Copy)]
struct Case {
    op0: AluOp,
    tile0: bool,
    rev0: bool,
    op1: Option<(AluOp, bool, bool)>,
    engine: Option<EngineId>,
    out: DType,
}

fn run_chain(c: Case, rows: usize, cols: usize) {
    let mut k = Kernel::new("chain");
    let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
    let s = k.input("s", DType::F32, &[rows, 2]).unwrap();
    let y = k.output("y", c.out, &[rows, cols]).unwrap();
    let (imm0, imm1) = (1.5f32, -0.25f32);
    for r0 in (0..rows).step_by(128) {
        let p = 128.min(rows - r0);
        k.scope(|k| {
            let xt = k.sbuf_tile("x", DType::F32, &[p, cols])?;
            let st = k.sbuf_tile("s", DType::F32, &[p, 2])?;
            let yt = k.sbuf_tile("y", c.out, &[p, cols])?;
            k.dma_copy(&xt, &x.slice(0, r0..r0 + p)?)?;
            k.dma_copy(&st, &s.slice(0, r0..r0 + p)?)?;
            let (s0, s1) = (st.slice(1, 0..1)?, st.slice(1, 1..2)?);
            let o0: Scalar<'_> = if c.tile0 { (&s0).into() } else { imm0.into() };
            let mut op = TensorScalarChain {
                reverse0: c.rev0,
                engine: c.engine,
                ..TensorScalarChain::new(&yt, &xt, c.op0, o0)
            };
            if let Some((op1, tile1, rev1)) = c.op1 {
                let o1: Scalar<'_> = if tile1 { (&s1).into() } else { imm1.into() };
                op = op.then(op1, o1);
                op.reverse1 = rev1;
            }
            k.emit(op)?;
            k.dma_copy(&y.slice(0, r0..r0 + p)?, &yt)
        })
        .unwrap();
    }
    let p = k.build().unwrap();
    let xv = data(rows, cols, 17);
    let mut rng = Rng(5);
    let sv: Vec<f32> = (0..rows * 2)
        .map(|i| if i == 7 { f32::NAN } else { rng.unit() * 3.0 })
        .collect();
    let (outs, _) = run(&p, &[("x", f32s(&xv)), ("s", f32s(&sv))]);
    let got = dec(c.out, output(&outs, "y"));
    for r in 0..rows {
        let (s0, s1) = (if c.tile0 { sv[r * 2] } else { imm0 }, sv[r * 2 + 1]);
        for col in 0..cols {
            let v = xv[r * cols + col];
            let mut t = if c.rev0 {
                alu(c.op0, s0, v)
            } else {
                alu(c.op0, v, s0)
            };
            if let Some((op1, tile1, rev1)) = c.op1 {
                let s1 = if tile1 { s1 } else { imm1 };
                t = if rev1 {
                    alu(op1, s1, t)
                } else {
                    alu(op1, t, s1)
                };
            }
            let want = if c.out == DType::Bf16 { bf16(t) } else { t };
            let g = got[r * cols + col];
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "({r}, {col}): {v} -> {g} vs {want}"
            );
        }
    }
}

#[test]
fn chains_match_the_reference() {
    use AluOp::*;
    let f = DType::F32;
    let cases = [
        // One op, immediate (format 1.0's TensorScalar).
        Case {
            op0: Sub,
            tile0: false,
            rev0: false,
            op1: None,
            engine: None,
            out: f,
        },
        // [P, 1] operand, then an immediate.
        Case {
            op0: Mul,
            tile0: true,
            rev0: false,
            op1: Some((Add, false, false)),
            engine: None,
            out: f,
        },
        // Reversed subtract and divide, both operands tiles, bf16 out.
        Case {
            op0: Sub,
            tile0: true,
            rev0: true,
            op1: Some((Divide, true, true)),
            engine: None,
            out: DType::Bf16,
        },
        // max then min: a clamp with NaN handling.
        Case {
            op0: Max,
            tile0: false,
            rev0: false,
            op1: Some((Min, true, false)),
            engine: None,
            out: f,
        },
        // ScalarE: multiply then add.
        Case {
            op0: Mul,
            tile0: true,
            rev0: false,
            op1: Some((Add, true, false)),
            engine: Some(EngineId::Scalar),
            out: f,
        },
        // ScalarE: one add with a [P, 1] operand.
        Case {
            op0: Add,
            tile0: true,
            rev0: false,
            op1: None,
            engine: Some(EngineId::Scalar),
            out: f,
        },
        // Comparison chain.
        Case {
            op0: GreaterEqual,
            tile0: true,
            rev0: false,
            op1: Some((Mul, false, false)),
            engine: None,
            out: f,
        },
    ];
    for c in cases {
        run_chain(c, 200, 48);
    }
}

#[test]
fn the_one_op_immediate_form_stays_format_1_0() {
    let mut k = Kernel::new("simple");
    let t = k.sbuf_tile("t", DType::F32, &[64, 32]).unwrap();
    k.memset(&t, 1.0).unwrap();
    k.tensor_scalar(&t, &t, AluOp::Add, 2.0).unwrap();
    let p = k.build().unwrap();
    assert_eq!(p.format_minor(), 0);
    run(&p, &[]);
    let mut k = Kernel::new("chain");
    let t = k.sbuf_tile("t", DType::F32, &[64, 32]).unwrap();
    k.memset(&t, 1.0).unwrap();
    k.tensor_scalar_chain(&t, &t, AluOp::Add, 2.0, AluOp::Mul, 3.0)
        .unwrap();
    let p = k.build().unwrap();
    assert_eq!(p.format_minor(), 1);
    run(&p, &[]);
}

#[test]
fn int32_bitvec_and_wrapping_chains() {
    let (rows, cols) = (100, 40);
    let mut k = Kernel::new("bits");
    let x = k.input("x", DType::I32, &[rows, cols]).unwrap();
    let s = k.input("s", DType::I32, &[rows, 1]).unwrap();
    let y = k.output("y", DType::I32, &[rows, cols]).unwrap();
    let z = k.output("z", DType::I32, &[rows, cols]).unwrap();
    let xt = k.sbuf_tile("x", DType::I32, &[rows, cols]).unwrap();
    let st = k.sbuf_tile("s", DType::I32, &[rows, 1]).unwrap();
    let yt = k.sbuf_tile("y", DType::I32, &[rows, cols]).unwrap();
    let zt = k.sbuf_tile("z", DType::I32, &[rows, cols]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&st, &s).unwrap();
    // (x & 0xFF0) >> 4 : exact int32 immediates.
    k.tensor_scalar_chain(&yt, &xt, AluOp::BitwiseAnd, 0xFF0, AluOp::RightShift, 4)
        .unwrap();
    // (x · s) + s, wrapping, with the [P, 1] operand.
    k.tensor_scalar_chain(&zt, &xt, AluOp::Mul, &st, AluOp::Add, &st)
        .unwrap();
    k.dma_copy(&y, &yt).unwrap();
    k.dma_copy(&z, &zt).unwrap();
    let p = k.build().unwrap();
    let mut rng = Rng(9);
    let xv: Vec<i32> = (0..rows * cols).map(|_| rng.next() as i32).collect();
    let sv: Vec<i32> = (0..rows).map(|_| rng.next() as i32).collect();
    let (outs, _) = run(&p, &[("x", i32s(&xv)), ("s", i32s(&sv))]);
    let (gy, gz) = (to_i32(output(&outs, "y")), to_i32(output(&outs, "z")));
    for r in 0..rows {
        for c in 0..cols {
            let v = xv[r * cols + c];
            let want_y = alu_i32(AluOp::RightShift, alu_i32(AluOp::BitwiseAnd, v, 0xFF0), 4);
            assert_eq!(gy[r * cols + c], want_y);
            let want_z = alu_i32(AluOp::Add, alu_i32(AluOp::Mul, v, sv[r]), sv[r]);
            assert_eq!(gz[r * cols + c], want_z);
        }
    }
}

#[test]
fn scalar_tensor_tensor_forms() {
    let (rows, cols) = (72, 64);
    for (rev0, rev1, op0, op1) in [
        (false, false, AluOp::Mul, AluOp::Add),
        (true, true, AluOp::Sub, AluOp::Divide),
        (false, true, AluOp::Max, AluOp::Sub),
    ] {
        let mut k = Kernel::new("stt");
        let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
        let x2 = k.input("x2", DType::Bf16, &[rows, cols]).unwrap();
        let s = k.input("s", DType::F32, &[rows, 1]).unwrap();
        let y = k.output("y", DType::F32, &[rows, cols]).unwrap();
        let xt = k.sbuf_tile("x", DType::F32, &[rows, cols]).unwrap();
        let x2t = k.sbuf_tile("x2", DType::Bf16, &[rows, cols]).unwrap();
        let st = k.sbuf_tile("s", DType::F32, &[rows, 1]).unwrap();
        let yt = k.psum_tile("y", DType::F32, &[rows, cols]).unwrap();
        let ys = k.sbuf_tile("ys", DType::F32, &[rows, cols]).unwrap();
        k.dma_copy(&xt, &x).unwrap();
        k.dma_copy(&x2t, &x2).unwrap();
        k.dma_copy(&st, &s).unwrap();
        k.emit(ScalarTensorTensor {
            dst: &yt,
            data: &xt,
            op0,
            operand0: (&st).into(),
            reverse0: rev0,
            op1,
            operand1: &x2t,
            reverse1: rev1,
        })
        .unwrap();
        k.tensor_copy(&ys, &yt).unwrap();
        k.dma_copy(&y, &ys).unwrap();
        let p = k.build().unwrap();
        let xv = data(rows, cols, 3);
        let x2v: Vec<f32> = data(rows, cols, 4).into_iter().map(bf16).collect();
        let mut rng = Rng(8);
        let sv: Vec<f32> = (0..rows).map(|_| rng.unit() * 2.0).collect();
        let (outs, _) = run(
            &p,
            &[
                ("x", f32s(&xv)),
                ("x2", enc(DType::Bf16, &x2v)),
                ("s", f32s(&sv)),
            ],
        );
        let got = dec(DType::F32, output(&outs, "y"));
        for (r, &s0) in sv.iter().enumerate() {
            for c in 0..cols {
                let i = r * cols + c;
                let t = if rev0 {
                    alu(op0, s0, xv[i])
                } else {
                    alu(op0, xv[i], s0)
                };
                let want = if rev1 {
                    alu(op1, x2v[i], t)
                } else {
                    alu(op1, t, x2v[i])
                };
                assert_eq!(got[i].to_bits(), want.to_bits(), "({r}, {c})");
            }
        }
    }
}

#[test]
fn reciprocal_and_tensor_tensor_on_gpsimd() {
    let (rows, cols) = (100, 50);
    let mut k = Kernel::new("recip");
    let x = k.input("x", DType::F32, &[rows, cols]).unwrap();
    let e = k.input("e", DType::F32, &[rows, cols]).unwrap();
    let r_out = k.output("r", DType::Bf16, &[rows, cols]).unwrap();
    let p_out = k.output("p", DType::F32, &[rows, cols]).unwrap();
    let d_out = k.output("d", DType::F32, &[rows, cols]).unwrap();
    let xt = k.sbuf_tile("x", DType::F32, &[rows, cols]).unwrap();
    let et = k.sbuf_tile("e", DType::F32, &[rows, cols]).unwrap();
    let rt = k.sbuf_tile("r", DType::Bf16, &[rows, cols]).unwrap();
    let pt = k.sbuf_tile("p", DType::F32, &[rows, cols]).unwrap();
    let dt = k.sbuf_tile("d", DType::F32, &[rows, cols]).unwrap();
    k.dma_copy(&xt, &x).unwrap();
    k.dma_copy(&et, &e).unwrap();
    k.reciprocal(&rt, &xt).unwrap(); // VectorE
    k.tensor_tensor(&pt, &xt, &et, AluOp::Power).unwrap(); // GpSimdE by default
    k.emit(TensorTensor {
        dst: &dt,
        data1: &xt,
        data2: &et,
        op: AluOp::Divide,
        engine: Some(EngineId::GpSimd),
    })
    .unwrap();
    k.dma_copy(&r_out, &rt).unwrap();
    k.dma_copy(&p_out, &pt).unwrap();
    k.dma_copy(&d_out, &dt).unwrap();
    let p = k.build().unwrap();
    assert_eq!(p.format_minor(), 1);
    let gp = |i: &nrt_sim::engine::Instr| {
        matches!(
            i,
            nrt_sim::engine::Instr::TensorTensor {
                op: AluOp::Power | AluOp::Divide,
                ..
            }
        )
    };
    assert_eq!(common::count(&p, EngineId::GpSimd, gp), 2);
    let xv = data(rows, cols, 21);
    let mut rng = Rng(2);
    let ev: Vec<f32> = (0..rows * cols)
        .map(|i| match i % 11 {
            0 => 0.0,
            1 => 2.0,
            2 => -3.0,
            3 => 0.5,
            _ => rng.small(4),
        })
        .collect();
    let (outs, _) = run(&p, &[("x", f32s(&xv)), ("e", f32s(&ev))]);
    let (gr, gpow, gd) = (
        dec(DType::Bf16, output(&outs, "r")),
        dec(DType::F32, output(&outs, "p")),
        dec(DType::F32, output(&outs, "d")),
    );
    for i in 0..rows * cols {
        let (v, w) = (xv[i], ev[i]);
        assert_eq!(
            gr[i].to_bits(),
            bf16(alu(AluOp::Divide, 1.0, v)).to_bits(),
            "1/{v}"
        );
        assert_eq!(
            gd[i].to_bits(),
            alu(AluOp::Divide, v, w).to_bits(),
            "{v}/{w}"
        );
        let want = alu(AluOp::Power, v, w);
        // pow is within 1 ULP (binary64 e^(y·ln|x|)); integer exponents of these values are
        // exact in binary64.
        assert!(
            refs::ulps(gpow[i], want) <= 1,
            "{v}^{w}: {} vs {want}",
            gpow[i]
        );
    }
}
