//! The format-1.1 reductions against plain Rust references: `TensorReduce` (every legal
//! reduction operation, innermost axes of multi-dimensional patterns, negate, fp32/bf16/int32,
//! NaN), `BnStats` + `BnAggr` (layernorm statistics, chunked), `Max8` and `FindIndex8`. Each
//! test names the rule it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ops_common;

use nrt_sim::engine::{AccessPattern, AluOp, DType, EngineId, Instr, Space};
use ops_common::*;

fn canon(v: f32) -> f32 {
    if v.is_nan() {
        f32::from_bits(0x7FC0_0000)
    } else {
        v
    }
}

/// Reference fold of binary32 values (the operations' 1.1 semantics).
fn fold_f32(op: AluOp, xs: &[f32]) -> f32 {
    let t = |c: bool| if c { 1.0 } else { 0.0 };
    let mut acc = canon(xs[0]);
    for &x in &xs[1..] {
        acc = canon(match op {
            AluOp::Add => acc + x,
            AluOp::Sub => acc - x,
            AluOp::Mul => acc * x,
            AluOp::Max | AluOp::Min => {
                let max = op == AluOp::Max;
                if x.is_nan() {
                    acc
                } else if acc.is_nan() {
                    x
                } else if acc == x {
                    if (x.is_sign_positive()) == max {
                        x
                    } else {
                        acc
                    }
                } else if (x > acc) == max {
                    x
                } else {
                    acc
                }
            }
            AluOp::LogicalAnd => t(acc != 0.0 && x != 0.0),
            AluOp::LogicalOr => t(acc != 0.0 || x != 0.0),
            AluOp::LogicalXor => t((acc != 0.0) != (x != 0.0)),
            _ => unreachable!(),
        });
    }
    acc
}

/// Rule: `TensorReduce` folds the innermost `axes` free dimensions left to right from the
/// first element in the pattern's order (so the result is bit-reproducible), keeps the outer
/// dimensions, rounds once to the output type, and `negate` multiplies by −1; a NaN operand
/// follows the operation's NaN rule (add: canonical NaN; max/min: ignored).
#[test]
fn tensor_reduce_folds_innermost_axes() {
    // [P=8] × [3 rows at stride 40] × [5 groups at stride 8] × [4 at stride 2] elements.
    let (p, n) = (8usize, 3 * 40);
    let mut x: Vec<f32> = (0..p * n)
        .map(|i| ((i * 7919) % 211) as f32 * 0.013 - 1.3)
        .collect();
    x[17] = f32::NAN;
    x[n + 9] = f32::INFINITY;
    x[2 * n + 2] = -0.0;
    x[3 * n] = 1e-40;
    let ap = AccessPattern::new(
        Space::Sbuf,
        DType::F32,
        0,
        p as u8,
        0,
        &[(3, 40), (5, 8), (4, 2)],
    );
    let elems = |part: usize| -> Vec<f32> {
        let mut v = Vec::new();
        for a in 0..3 {
            for b in 0..5 {
                for c in 0..4 {
                    v.push(x[part * n + a * 40 + b * 8 + c * 2]);
                }
            }
        }
        v
    };
    for (op, axes, negate, dt) in [
        (AluOp::Add, 1u8, false, DType::F32),
        (AluOp::Add, 2, true, DType::Bf16),
        (AluOp::Max, 3, false, DType::F32),
        (AluOp::Min, 2, true, DType::F16),
        (AluOp::Mul, 1, false, DType::F32),
        (AluOp::Sub, 1, false, DType::F32),
        (AluOp::LogicalOr, 2, false, DType::F32),
    ] {
        let ix = Buf::sbuf(DType::F32, p as u8, 0, &x);
        let group: usize = [3usize, 5, 4][3 - axes as usize..].iter().product();
        let kept = 60 / group;
        let out = AccessPattern::sbuf(dt, 0, p as u8, 4096, kept as u16);
        let ins = Instr::TensorReduce {
            op,
            src: ap,
            out,
            axes,
            negate,
        };
        let got = bits(dt, &exec_one(EngineId::Vector, ins, &[ix], &[out])[0]);
        for part in 0..p {
            let e = elems(part);
            for k in 0..kept {
                let mut r = fold_f32(op, &e[k * group..(k + 1) * group]);
                if negate {
                    r = canon(-r);
                }
                let want = if r.is_nan() {
                    qnan_bits(dt)
                } else {
                    to_bits(dt, r)
                };
                assert_eq!(
                    got[part * kept + k],
                    want,
                    "{op:?} axes {axes} p {part} k {k}"
                );
            }
        }
    }
}

/// Rule: on int32 `TensorReduce` is exact int32 (wrapping add/mul, bitwise on bit patterns;
/// negate wraps).
#[test]
fn tensor_reduce_int32() {
    let x: Vec<i32> = (0..4 * 32)
        .map(|i: i32| i.wrapping_mul(0x3C6E_F372) ^ 0x0F0F)
        .collect();
    for (op, negate) in [
        (AluOp::Add, true),
        (AluOp::Mul, false),
        (AluOp::BitwiseXor, false),
        (AluOp::BitwiseOr, false),
        (AluOp::Max, true),
    ] {
        let ix = Buf::sbuf_i32(4, 0, &x);
        let out = AccessPattern::sbuf(DType::I32, 0, 4, 4096, 1);
        let ins = Instr::TensorReduce {
            op,
            src: ix.ap,
            out,
            axes: 1,
            negate,
        };
        let got = i32s(&exec_one(EngineId::Vector, ins, &[ix], &[out])[0]);
        for (p, row) in x.chunks(32).enumerate() {
            let mut r = row[1..].iter().fold(row[0], |a, &b| match op {
                AluOp::Add => a.wrapping_add(b),
                AluOp::Mul => a.wrapping_mul(b),
                AluOp::BitwiseXor => a ^ b,
                AluOp::BitwiseOr => a | b,
                AluOp::Max => a.max(b),
                _ => unreachable!(),
            });
            if negate {
                r = r.wrapping_neg();
            }
            assert_eq!(got[p], r, "{op:?}");
        }
    }
}

/// The documented statistics of one chunk: (count, mean, count·variance) of the even, then the
/// odd elements: sums from +0 in order, binary32.
fn ref_stats(row: &[f32]) -> [f32; 6] {
    let mut r = [0f32; 6];
    for parity in 0..2 {
        let xs: Vec<f32> = row.iter().skip(parity).step_by(2).copied().collect();
        if xs.is_empty() {
            continue;
        }
        let n = xs.len() as f32;
        let mean = xs.iter().fold(0f32, |a, &b| a + b) / n;
        let m2 = xs.iter().fold(0f32, |a, &b| a + (b - mean) * (b - mean));
        r[parity * 3..parity * 3 + 3].copy_from_slice(&[n, mean, m2]);
    }
    r
}

/// Rule: `BnStats` gives `[count, mean, count·var]` of the even and of the odd elements of each
/// partition (≤ 512 elements), `BnAggr` combines any number of such triples with Chan's update
/// into `[mean, variance]` (population variance) — bit-exact against the documented order, and
/// within binary32 rounding of the binary64 statistics, for a row split into 512-element
/// chunks.
#[test]
fn bn_stats_and_aggr_give_layernorm_statistics() {
    let (p, f) = (16usize, 1000usize);
    let x: Vec<f32> = (0..p * f)
        .map(|i| ((i * 7919 + 13) % 997) as f32 * 0.01 + (i / f) as f32 * 3.0)
        .collect();
    let ix = Buf::sbuf(DType::F32, p as u8, 0, &x);
    let st0 = AccessPattern::sbuf(DType::F32, 0, p as u8, 8192, 6);
    let st1 = AccessPattern::sbuf(DType::F32, 0, p as u8, 8192 + 24, 6);
    let all = AccessPattern::sbuf(DType::F32, 0, p as u8, 8192, 12);
    let agg = AccessPattern::sbuf(DType::F32, 0, p as u8, 12288, 2);
    let chunk = |off: u32, n: u16| AccessPattern::sbuf(DType::F32, 0, p as u8, off, n);
    let prog = program_seq(
        EngineId::Vector,
        &[
            Instr::BnStats {
                src: chunk(0, 512),
                out: st0,
            },
            Instr::BnStats {
                src: chunk(2048, (f - 512) as u16),
                out: st1,
            },
            Instr::BnAggr { src: all, out: agg },
        ],
        std::slice::from_ref(&ix),
        &[all, agg],
    );
    let (outs, _) = run_raw(prog, &[ix]);
    let stats = bits(DType::F32, &outs[0]);
    let mv = bits(DType::F32, &outs[1]);
    for k in 0..p {
        let row = &x[k * f..(k + 1) * f];
        let mut want = ref_stats(&row[..512]).to_vec();
        want.extend(ref_stats(&row[512..]));
        let got: Vec<f32> = stats[k * 12..(k + 1) * 12]
            .iter()
            .map(|&b| f32::from_bits(b))
            .collect();
        assert_eq!(got, want, "stats p {k}");
        // Aggregation in the documented order.
        let (mut n, mut mean, mut m2) = (0f32, 0f32, 0f32);
        for g in want.chunks(3) {
            let (c, m, v) = (g[0], g[1], g[2]);
            if n == 0.0 {
                (n, mean, m2) = (c, m, v);
                continue;
            }
            let nn = n + c;
            let d = m - mean;
            mean += d * (c / nn);
            m2 = (m2 + v) + (d * d) * ((n * c) / nn);
            n = nn;
        }
        assert_eq!(
            (f32::from_bits(mv[2 * k]), f32::from_bits(mv[2 * k + 1])),
            (mean, m2 / n),
            "aggr p {k}"
        );
        // And close to the binary64 truth.
        let m64 = row.iter().map(|&v| f64::from(v)).sum::<f64>() / f as f64;
        let v64 = row
            .iter()
            .map(|&v| (f64::from(v) - m64).powi(2))
            .sum::<f64>()
            / f as f64;
        assert!((f64::from(mean) - m64).abs() <= 1e-5 * m64.abs());
        assert!((f64::from(m2 / n) - v64).abs() <= 1e-4 * v64);
    }
}

/// Rule: `BnAggr` skips groups whose count is not above 0 and gives NaN without any.
#[test]
fn bn_aggr_skips_empty_groups() {
    let rows = [
        [0.0, 9.0, 9.0, 2.0, 1.0, 2.0],
        [0.0, 1.0, 1.0, f32::NAN, 5.0, 5.0],
    ];
    let x: Vec<f32> = rows.iter().flatten().copied().collect();
    let ix = Buf::sbuf(DType::F32, 2, 0, &x);
    let out = AccessPattern::sbuf(DType::F32, 0, 2, 4096, 2);
    let got = bits(
        DType::F32,
        &exec_one(
            EngineId::Vector,
            Instr::BnAggr { src: ix.ap, out },
            &[ix],
            &[out],
        )[0],
    );
    assert_eq!(&got[..2], &[1.0f32.to_bits(), 1.0f32.to_bits()]);
    assert_eq!(&got[2..], &[0x7FC0_0000, 0x7FC0_0000]);
}

/// Rule: `Max8` gives each partition's 8 largest values in descending order — duplicates kept,
/// NaN above +∞, −0 below +0 — converted to the output type.
#[test]
fn max8_is_the_top_eight() {
    let (p, f) = (4usize, 100usize);
    let mut x: Vec<f32> = (0..p * f)
        .map(|i| ((i * 7919) % 173) as f32 - 86.0)
        .collect();
    x[3] = f32::NAN;
    x[50] = f32::INFINITY;
    x[f + 1] = 86.0;
    x[2 * f..3 * f].fill(-0.0);
    x[2 * f + 7] = 0.0;
    for dt in [DType::F32, DType::Bf16] {
        let ix = Buf::sbuf(DType::F32, p as u8, 0, &x);
        let out = AccessPattern::sbuf(dt, 0, p as u8, 4096, 8);
        let got = bits(
            dt,
            &exec_one(
                EngineId::Vector,
                Instr::Max8 { src: ix.ap, out },
                &[ix],
                &[out],
            )[0],
        );
        for k in 0..p {
            let mut row: Vec<f32> = x[k * f..(k + 1) * f].to_vec();
            let key = |v: &f32| {
                if v.is_nan() {
                    i64::MAX
                } else {
                    let b = v.to_bits() as i32;
                    i64::from(b ^ ((((b >> 31) as u32) >> 1) as i32))
                }
            };
            row.sort_by_key(|v| std::cmp::Reverse(key(v)));
            let want: Vec<u32> = row[..8].iter().map(|&v| to_bits(dt, v)).collect();
            assert_eq!(&got[k * 8..(k + 1) * 8], &want[..], "{dt} p {k}");
        }
    }
}

/// Rule: `FindIndex8` gives, for each of the 8 values, the index of its first occurrence not
/// claimed by an earlier equal value (so duplicates pair with ascending positions), or −1;
/// NaN is found nowhere; −0 finds +0.
#[test]
fn find_index8_claims_first_occurrences() {
    let data: Vec<f32> = vec![
        5.0,
        8.0,
        3.0,
        8.0,
        0.0,
        8.0,
        1.0,
        2.0,
        f32::NAN,
        9.0,
        4.0,
        7.0,
    ];
    let vals: Vec<f32> = vec![8.0, 8.0, 3.0, 42.0, f32::NAN, -0.0, 8.0, 8.0];
    let id = Buf::sbuf(DType::F32, 1, 0, &data);
    let iv = Buf::sbuf(DType::Bf16, 1, 4096, &vals);
    let out = AccessPattern::sbuf(DType::I32, 0, 1, 8192, 8);
    let got = i32s(
        &exec_one(
            EngineId::Vector,
            Instr::FindIndex8 {
                data: id.ap,
                vals: iv.ap,
                out,
            },
            &[id, iv],
            &[out],
        )[0],
    );
    assert_eq!(got, vec![1, 3, 2, -1, -1, 4, 5, -1]);
}

/// Rule: `Max8` then `FindIndex8` on the same data gives the top-8 indices (the top-k
/// building block).
#[test]
fn max8_then_find_index8_is_top8() {
    let (p, f) = (32usize, 128usize);
    let x: Vec<f32> = (0..p * f)
        .map(|i| ((i * 2_654_435_761usize) % 100_003) as f32 / 100_003.0)
        .collect();
    let ix = Buf::sbuf(DType::F32, p as u8, 0, &x);
    let m = AccessPattern::sbuf(DType::F32, 0, p as u8, 4096, 8);
    let idx = AccessPattern::sbuf(DType::I32, 0, p as u8, 8192, 8);
    let prog = program_seq(
        EngineId::Vector,
        &[
            Instr::Max8 { src: ix.ap, out: m },
            Instr::FindIndex8 {
                data: ix.ap,
                vals: m,
                out: idx,
            },
        ],
        std::slice::from_ref(&ix),
        &[idx],
    );
    let got = i32s(&run_raw(prog, &[ix]).0[0]);
    for k in 0..p {
        let row = &x[k * f..(k + 1) * f];
        let mut order: Vec<usize> = (0..f).collect();
        order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
        let want: Vec<i32> = order[..8].iter().map(|&i| i as i32).collect();
        assert_eq!(&got[k * 8..(k + 1) * 8], &want[..], "p {k}");
    }
}
