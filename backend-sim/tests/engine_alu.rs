//! The ALU operations of format 1.1 against plain Rust references: every operation on fp32,
//! bf16, fp16 and int32 operands with zeros, infinities, NaN, subnormals and extremes, through
//! `TensorTensor`, `TensorScalar`, `TensorScalarChain`, `ScalarTensorTensor`,
//! `TensorTensorScan` and `Reciprocal`; each test names the rule it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ops_common;

use nrt_sim::engine::{AccessPattern, AluOp, DType, EngineId, Instr, Operand, ScalarStep};
use ops_common::*;

/// Reference of one operation on binary32 (canonical NaN, −0 < +0 for max/min).
fn ref_f32(op: AluOp, a: f32, b: f32) -> f32 {
    let t = |c: bool| if c { 1.0 } else { 0.0 };
    let truth = |x: f32| x != 0.0;
    let r = match op {
        AluOp::Add => a + b,
        AluOp::Sub => a - b,
        AluOp::Mul => a * b,
        AluOp::Max | AluOp::Min => {
            let want_max = op == AluOp::Max;
            match (a.is_nan(), b.is_nan()) {
                (true, true) => f32::NAN,
                (true, false) => b,
                (false, true) => a,
                _ if a == b => {
                    // Only ±0 can differ.
                    if want_max == a.is_sign_positive() {
                        a
                    } else {
                        b
                    }
                }
                _ if (a > b) == want_max => a,
                _ => b,
            }
        }
        AluOp::Divide => a / b,
        AluOp::Power => f64::from(a).powf(f64::from(b)) as f32,
        AluOp::Equal => t(a == b),
        AluOp::NotEqual => t(a != b),
        AluOp::Greater => t(a > b),
        AluOp::GreaterEqual => t(a >= b),
        AluOp::Less => t(a < b),
        AluOp::LessEqual => t(a <= b),
        AluOp::LogicalAnd => t(truth(a) && truth(b)),
        AluOp::LogicalOr => t(truth(a) || truth(b)),
        AluOp::LogicalXor => t(truth(a) != truth(b)),
        _ => unreachable!("bitvec"),
    };
    if r.is_nan() {
        f32::from_bits(0x7FC0_0000)
    } else {
        r
    }
}

/// Reference of one operation on int32.
fn ref_i32(op: AluOp, a: i32, b: i32) -> i32 {
    let t = |c: bool| c as i32;
    match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::Mul => a.wrapping_mul(b),
        AluOp::Max => a.max(b),
        AluOp::Min => a.min(b),
        AluOp::Divide => a
            .checked_div(b)
            .unwrap_or(if b == 0 { 0 } else { i32::MIN }),
        AluOp::Power => {
            if b < 0 {
                match a {
                    1 => 1,
                    -1 => 1 - 2 * (b & 1),
                    _ => 0,
                }
            } else {
                a.wrapping_pow(b as u32)
            }
        }
        AluOp::Equal => t(a == b),
        AluOp::NotEqual => t(a != b),
        AluOp::Greater => t(a > b),
        AluOp::GreaterEqual => t(a >= b),
        AluOp::Less => t(a < b),
        AluOp::LessEqual => t(a <= b),
        AluOp::LogicalAnd => t(a != 0 && b != 0),
        AluOp::LogicalOr => t(a != 0 || b != 0),
        AluOp::LogicalXor => t((a != 0) != (b != 0)),
        AluOp::BitwiseAnd => a & b,
        AluOp::BitwiseOr => a | b,
        AluOp::BitwiseXor => a ^ b,
        AluOp::LeftShift => {
            if (0..32).contains(&b) {
                ((a as u32) << b) as i32
            } else {
                0
            }
        }
        AluOp::RightShift => {
            if (0..32).contains(&b) {
                ((a as u32) >> b) as i32
            } else {
                0
            }
        }
    }
}

const FLOAT_OPS: [AluOp; 16] = [
    AluOp::Add,
    AluOp::Sub,
    AluOp::Mul,
    AluOp::Max,
    AluOp::Min,
    AluOp::Divide,
    AluOp::Power,
    AluOp::Equal,
    AluOp::NotEqual,
    AluOp::Greater,
    AluOp::GreaterEqual,
    AluOp::Less,
    AluOp::LessEqual,
    AluOp::LogicalAnd,
    AluOp::LogicalOr,
    AluOp::LogicalXor,
];

/// Every pair of `vals` as two `[n, n]` operands: `a[p][i] = vals[p]`, `b[p][i] = vals[i]`.
fn pairs(vals: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let n = vals.len();
    let a = (0..n * n).map(|k| vals[k / n]).collect();
    let b = (0..n * n).map(|k| vals[k % n]).collect();
    (a, b)
}

/// Checks `got` (bits of `dt`) against the reference rounded to `dt`; power within 1 ULP of a
/// libm reference, everything else exact; every NaN canonical.
fn check_float(op: AluOp, dt: DType, a: &[f32], b: &[f32], got: &[u32]) {
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        let want = ref_f32(op, through(dt, x), through(dt, y));
        let g = got[k];
        if want.is_nan() {
            assert_eq!(
                g,
                qnan_bits(dt),
                "{op:?} {dt}: {x} {y} → {g:#x}, want canonical NaN"
            );
            continue;
        }
        let w = to_bits(dt, want);
        if op == AluOp::Power && g != w {
            assert!(
                ulps_bits(dt, g, w) <= 1,
                "power {dt}: {x}^{y} = {g:#x}, want {w:#x} within 1 ULP"
            );
            continue;
        }
        assert_eq!(g, w, "{op:?} {dt}: {x} op {y} → {g:#x}, want {w:#x}");
    }
}

/// Rule: each arithmetic, comparison and logical operation on binary32 operands — zeros,
/// infinities, NaN, subnormals, extremes — computes the reference exactly (power within 1 ULP),
/// rounds once to the output type, and gives the canonical NaN.
#[test]
fn float_ops_follow_the_reference_on_special_values() {
    let (a, b) = pairs(&specials());
    for dt in [DType::F32, DType::Bf16, DType::F16] {
        for op in FLOAT_OPS {
            let engine = if op == AluOp::Power {
                EngineId::GpSimd
            } else {
                EngineId::Vector
            };
            let ia = Buf::sbuf(dt, 16, 0, &a);
            let ib = Buf::sbuf(dt, 16, 4096, &b);
            let out = AccessPattern::sbuf(dt, 0, 16, 8192, 16);
            // TensorTensor keeps the host's IEEE arithmetic for the four 1.0 operations
            // (`format_1_0_ops_in_1_1_instructions_are_deterministic` covers them).
            if op.in_format_1_0() {
                continue;
            }
            let got = exec_one(
                engine,
                Instr::TensorTensor {
                    op,
                    a: ia.ap,
                    b: ib.ap,
                    out,
                },
                &[ia, ib],
                &[out],
            );
            check_float(op, dt, &a, &b, &bits(dt, &got[0]));
        }
    }
}

/// Rule: in a format-1.1 instruction the four operations of 1.0 are deterministic too: NaN
/// results canonical, max/min order −0 below +0 (`ScalarTensorTensor` with `0 + data` as the
/// first step applies `op1` to the pairs).
#[test]
fn format_1_0_ops_in_1_1_instructions_are_deterministic() {
    let (a, b) = pairs(&specials());
    for op in [AluOp::Add, AluOp::Sub, AluOp::Mul, AluOp::Max] {
        let ia = Buf::sbuf(DType::F32, 16, 0, &a);
        let ib = Buf::sbuf(DType::F32, 16, 4096, &b);
        let out = AccessPattern::sbuf(DType::F32, 0, 16, 8192, 16);
        let got = exec_one(
            EngineId::Vector,
            Instr::ScalarTensorTensor {
                data: ia.ap,
                first: ScalarStep {
                    op: AluOp::Max,
                    operand: Operand::Imm(f32::NEG_INFINITY),
                    reverse: false,
                },
                op1: op,
                data2: ib.ap,
                reverse1: false,
                out,
            },
            &[ia, ib],
            &[out],
        );
        // max(x, −∞) = x for every x, NaN included (maxNum: the NaN operand yields −∞).
        let a2: Vec<f32> = a
            .iter()
            .map(|&x| ref_f32(AluOp::Max, x, f32::NEG_INFINITY))
            .collect();
        check_float(op, DType::F32, &a2, &b, &bits(DType::F32, &got[0]));
    }
}

/// Rule: on int32 operands every operation is exact int32 arithmetic (wrapping; divide
/// truncates, `x ÷ 0 = 0`; comparisons and logical operations give 1/0; shifts are logical
/// and give 0 outside 0..=31; bitvec operations act on the bit patterns).
#[test]
fn int32_ops_follow_the_reference() {
    let vals = [
        0,
        1,
        -1,
        2,
        -7,
        31,
        32,
        i32::MAX,
        i32::MIN,
        5,
        -2,
        100,
        3,
        16,
        -32,
        0x5555_5555,
    ];
    let n = vals.len();
    let a: Vec<i32> = (0..n * n).map(|k| vals[k / n]).collect();
    let b: Vec<i32> = (0..n * n).map(|k| vals[k % n]).collect();
    for op in nrt_sim::engine::AluOp::ALL {
        let engine = if op == AluOp::Power {
            EngineId::GpSimd
        } else {
            EngineId::Vector
        };
        let ia = Buf::sbuf_i32(16, 0, &a);
        let ib = Buf::sbuf_i32(16, 4096, &b);
        let out = AccessPattern::sbuf(DType::I32, 0, 16, 8192, 16);
        let got = i32s(
            &exec_one(
                engine,
                Instr::TensorTensor {
                    op,
                    a: ia.ap,
                    b: ib.ap,
                    out,
                },
                &[ia, ib],
                &[out],
            )[0],
        );
        for k in 0..n * n {
            assert_eq!(
                got[k],
                ref_i32(op, a[k], b[k]),
                "{op:?}: {} op {}",
                a[k],
                b[k]
            );
        }
    }
}

/// Rule: `TensorScalar` (the 1.0 instruction) takes the new operations in a 1.1 program; its
/// binary32 immediate converts to int32 for int32 data.
#[test]
fn tensor_scalar_takes_new_ops() {
    let x: Vec<i32> = (0..64).map(|i| i * 37 - 900).collect();
    let ix = Buf::sbuf_i32(4, 0, &x);
    let out = AccessPattern::sbuf(DType::I32, 0, 4, 4096, 16);
    for (op, s) in [
        (AluOp::RightShift, 3.0f32),
        (AluOp::Min, -7.4),
        (AluOp::Divide, 5.0),
    ] {
        let got = i32s(
            &exec_one(
                EngineId::Vector,
                Instr::TensorScalar {
                    op,
                    src: ix.ap,
                    scalar: s,
                    out,
                },
                std::slice::from_ref(&ix),
                &[out],
            )[0],
        );
        let si = s.round_ties_even() as i32;
        let want: Vec<i32> = x.iter().map(|&v| ref_i32(op, v, si)).collect();
        assert_eq!(got, want, "{op:?}");
    }
}

/// Rule: `TensorScalarChain` computes `(x op0 s0) op1 s1` per element with per-partition or
/// immediate operands, `reverse` swapping each step's operands, one binary32 rounding per
/// step; in int32 with int32 operands (bitvec included).
#[test]
fn tensor_scalar_chain_matches_reference() {
    let x: Vec<f32> = (0..8 * 24)
        .map(|i| ((i * 7919) % 113) as f32 * 0.37 - 20.0)
        .collect();
    let pp: Vec<f32> = (0..8).map(|p| p as f32 * 1.5 - 3.0).collect();
    let cases: Vec<(ScalarStep, Option<ScalarStep>, DType)> = vec![
        (
            ScalarStep {
                op: AluOp::Mul,
                operand: Operand::Imm(0.1),
                reverse: false,
            },
            Some(ScalarStep {
                op: AluOp::Add,
                operand: Operand::Int(3),
                reverse: false,
            }),
            DType::F32,
        ),
        (
            ScalarStep {
                op: AluOp::Sub,
                operand: Operand::PerPartition(AccessPattern::sbuf(DType::F32, 0, 8, 4096, 1)),
                reverse: true,
            },
            Some(ScalarStep {
                op: AluOp::Divide,
                operand: Operand::Imm(3.0),
                reverse: true,
            }),
            DType::Bf16,
        ),
        (
            ScalarStep {
                op: AluOp::GreaterEqual,
                operand: Operand::PerPartition(AccessPattern::sbuf(DType::F32, 0, 8, 4096, 1)),
                reverse: false,
            },
            None,
            DType::F16,
        ),
    ];
    for (first, second, dt) in cases {
        let ix = Buf::sbuf(DType::F32, 8, 0, &x);
        let ip = Buf::sbuf(DType::F32, 8, 4096, &pp);
        let out = AccessPattern::sbuf(dt, 0, 8, 8192, 24);
        let ins = Instr::TensorScalarChain {
            src: ix.ap,
            out,
            first,
            second,
        };
        let got = bits(dt, &exec_one(EngineId::Vector, ins, &[ix, ip], &[out])[0]);
        for (k, &v) in x.iter().enumerate() {
            let p = k / 24;
            let val = |o: &Operand| match o {
                Operand::Imm(f) => *f,
                Operand::Int(i) => *i as f32,
                Operand::PerPartition(_) => pp[p],
            };
            let step = |s: &ScalarStep, v: f32| {
                if s.reverse {
                    ref_f32(s.op, val(&s.operand), v)
                } else {
                    ref_f32(s.op, v, val(&s.operand))
                }
            };
            let mut r = step(&first, v);
            if let Some(s) = &second {
                r = step(s, r);
            }
            assert_eq!(got[k], to_bits(dt, r), "{first:?} {second:?} at {k}");
        }
    }
    // int32 bitvec chain: (x & 0xFF) << s[p].
    let xi: Vec<i32> = (0..4 * 16).map(|i| i * 0x0101_0101 - 77).collect();
    let sh: Vec<i32> = vec![0, 4, 31, 32];
    let ix = Buf::sbuf_i32(4, 0, &xi);
    let is = Buf::sbuf_i32(4, 4096, &sh);
    let out = AccessPattern::sbuf(DType::I32, 0, 4, 8192, 16);
    let ins = Instr::TensorScalarChain {
        src: ix.ap,
        out,
        first: ScalarStep {
            op: AluOp::BitwiseAnd,
            operand: Operand::Int(0xFF),
            reverse: false,
        },
        second: Some(ScalarStep {
            op: AluOp::LeftShift,
            operand: Operand::PerPartition(is.ap),
            reverse: false,
        }),
    };
    let got = i32s(&exec_one(EngineId::Vector, ins, &[ix, is], &[out])[0]);
    for (k, &v) in xi.iter().enumerate() {
        assert_eq!(got[k], ref_i32(AluOp::LeftShift, v & 0xFF, sh[k / 16]));
    }
}

/// Rule: ScalarE runs the multiply-then-add chain with the same results as VectorE.
#[test]
fn tensor_scalar_chain_on_scalar_engine_matches_vector() {
    let x: Vec<f32> = (0..4 * 32).map(|i| i as f32 * 0.731 - 40.0).collect();
    let ix = Buf::sbuf(DType::F32, 4, 0, &x);
    let out = AccessPattern::sbuf(DType::Bf16, 0, 4, 4096, 32);
    let ins = Instr::TensorScalarChain {
        src: ix.ap,
        out,
        first: ScalarStep {
            op: AluOp::Mul,
            operand: Operand::Imm(1.7),
            reverse: false,
        },
        second: Some(ScalarStep {
            op: AluOp::Add,
            operand: Operand::Imm(-0.3),
            reverse: false,
        }),
    };
    let v = exec_one(EngineId::Vector, ins, std::slice::from_ref(&ix), &[out]);
    let s = exec_one(EngineId::Scalar, ins, &[ix], &[out]);
    assert_eq!(v, s);
}

/// Rule: `ScalarTensorTensor` computes `(data op0 s) op1 data2` (or `data2 op1 (…)` with
/// `reverse1`), one rounding per operation; int32 when every tensor is int32; `data2` may be
/// in PSUM.
#[test]
fn scalar_tensor_tensor_matches_reference() {
    let d: Vec<f32> = (0..8 * 16).map(|i| (i as f32 - 60.0) * 0.173).collect();
    let d2: Vec<f32> = (0..8 * 16).map(|i| (i as f32 * 0.91).sin()).collect();
    let s: Vec<f32> = (0..8).map(|p| 0.5 + p as f32).collect();
    for reverse1 in [false, true] {
        let id = Buf::sbuf(DType::F32, 8, 0, &d);
        let id2 = Buf::sbuf(DType::Bf16, 8, 4096, &d2).in_psum(0);
        let is = Buf::sbuf(DType::F32, 8, 8192, &s);
        let out = AccessPattern::sbuf(DType::F32, 0, 8, 12288, 16);
        let ins = Instr::ScalarTensorTensor {
            data: id.ap,
            first: ScalarStep {
                op: AluOp::Mul,
                operand: Operand::PerPartition(is.ap),
                reverse: false,
            },
            op1: AluOp::Sub,
            data2: id2.ap,
            reverse1,
            out,
        };
        let got = bits(
            DType::F32,
            &exec_one(EngineId::Vector, ins, &[id, id2, is], &[out])[0],
        );
        for k in 0..d.len() {
            let t = d[k] * s[k / 16];
            let y = through(DType::Bf16, d2[k]);
            let want = if reverse1 { y - t } else { t - y };
            assert_eq!(got[k], want.to_bits(), "reverse1={reverse1} at {k}");
        }
    }
    // int32: (x max 3) * y.
    let x: Vec<i32> = (0..32).map(|i| i - 9).collect();
    let y: Vec<i32> = (0..32).map(|i| 100 - 7 * i).collect();
    let ix = Buf::sbuf_i32(2, 0, &x);
    let iy = Buf::sbuf_i32(2, 4096, &y);
    let out = AccessPattern::sbuf(DType::I32, 0, 2, 8192, 16);
    let ins = Instr::ScalarTensorTensor {
        data: ix.ap,
        first: ScalarStep {
            op: AluOp::Max,
            operand: Operand::Int(3),
            reverse: false,
        },
        op1: AluOp::Mul,
        data2: iy.ap,
        reverse1: false,
        out,
    };
    let got = i32s(&exec_one(EngineId::Vector, ins, &[ix, iy], &[out])[0]);
    let want: Vec<i32> = x.iter().zip(&y).map(|(&a, &b)| a.max(3) * b).collect();
    assert_eq!(got, want);
}

/// Rule: `TensorTensorScan` is the recurrence `s ← op1(op0(data0[i], s), data1[i])` from
/// `initial`, in binary32 (each operation rounded once), over the flattened free pattern,
/// reversing operands on request; a NaN propagates as the canonical NaN.
#[allow(clippy::needless_range_loop)]
#[test]
fn tensor_tensor_scan_is_the_recurrence() {
    let f = 40;
    let a: Vec<f32> = (0..4 * f)
        .map(|i| {
            if i == 2 * f + 7 {
                f32::NAN
            } else {
                0.9 + (i % 7) as f32 * 0.01
            }
        })
        .collect();
    let b: Vec<f32> = (0..4 * f).map(|i| (i as f32 * 0.37).cos()).collect();
    let init: Vec<f32> = vec![0.0, 1.0, -2.0, 3.5];
    for (initial, reverse0, reverse1) in [
        (Operand::Imm(0.25), false, false),
        (
            Operand::PerPartition(AccessPattern::sbuf(DType::F32, 0, 4, 8192, 1)),
            true,
            true,
        ),
    ] {
        let ia = Buf::sbuf(DType::F32, 4, 0, &a);
        let ib = Buf::sbuf(DType::F32, 4, 4096, &b);
        let ii = Buf::sbuf(DType::F32, 4, 8192, &init);
        let out = AccessPattern::sbuf(DType::F32, 0, 4, 12288, f as u16);
        let ins = Instr::TensorTensorScan {
            data0: ia.ap,
            data1: ib.ap,
            out,
            initial,
            op0: AluOp::Sub,
            op1: AluOp::Sub,
            reverse0,
            reverse1,
        };
        let got = bits(
            DType::F32,
            &exec_one(EngineId::Vector, ins, &[ia, ib, ii], &[out])[0],
        );
        for p in 0..4 {
            let mut s = match initial {
                Operand::Imm(v) => v,
                _ => init[p],
            };
            for i in 0..f {
                let k = p * f + i;
                let t = if reverse0 { s - a[k] } else { a[k] - s };
                s = if reverse1 { b[k] - t } else { t - b[k] };
                if s.is_nan() {
                    s = f32::from_bits(0x7FC0_0000);
                }
                assert_eq!(got[k], s.to_bits(), "p {p} i {i}");
            }
        }
    }
}

/// Rule: `Reciprocal` is the correctly rounded binary32 `1/x` (±0 → ±∞, ±∞ → ±0, NaN →
/// canonical NaN), rounded once to the output type.
#[test]
fn reciprocal_is_correctly_rounded() {
    let mut x = specials();
    x.extend((1..113).map(|i| i as f32 * 0.0371 - 2.0));
    x.truncate(128);
    for dt in [DType::F32, DType::Bf16, DType::F16] {
        let ix = Buf::sbuf(DType::F32, 4, 0, &x);
        let out = AccessPattern::sbuf(dt, 0, 4, 4096, 32);
        let got = bits(
            dt,
            &exec_one(
                EngineId::Vector,
                Instr::Reciprocal { src: ix.ap, out },
                &[ix],
                &[out],
            )[0],
        );
        for (k, &v) in x.iter().enumerate() {
            let want = 1.0 / v;
            let wb = if want.is_nan() {
                qnan_bits(dt)
            } else {
                to_bits(dt, want)
            };
            assert_eq!(got[k], wb, "{dt} 1/{v}");
        }
    }
}
