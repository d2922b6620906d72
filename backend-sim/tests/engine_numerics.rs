//! Numerics through whole programs, against the rules `docs/SIM_ISA.md` states: the TensorE
//! matmul (one fused multiply-add per step, in increasing k from +0.0 per K tile, tile sums
//! added in PSUM) for ordinary and extreme-exponent inputs, NaN and ±∞ through the matmul
//! and PSUM accumulation, and the NaN / ±∞ / signed-zero / conversion rules of `TensorTensor`,
//! `TensorScalar`, `Activation`, `TensorCopy`, `Memset` and `Iota`. Every NaN that arithmetic
//! produces is the canonical `0x7FC0_0000`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_sim::engine::{
    AccessPattern, ActFunc, AluOp, Bias, DType, Device, DmaDescriptor, DmaEndpoint, EngineId,
    ExecOptions, Instr, ProgramBuilder, encode_f32, exp_f64, f32_to_bf16, f32_to_f16, f32_to_i32,
    gelu_f64, kernels, tanh_f64,
};

const QNAN: u32 = 0x7FC0_0000;
const INF: f32 = f32::INFINITY;

fn canon(v: f32) -> f32 {
    if v.is_nan() { f32::from_bits(QNAN) } else { v }
}

fn p2(e: i32) -> f32 {
    2f64.powi(e) as f32
}

fn bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn words(b: &[u8], es: usize) -> Vec<u32> {
    b.chunks_exact(es)
        .map(|c| match *c {
            [x, y] => u32::from(u16::from_le_bytes([x, y])),
            [x, y, z, w] => u32::from_le_bytes([x, y, z, w]),
            _ => unreachable!(),
        })
        .collect()
}

// ---- matmul -------------------------------------------------------------------------------------

/// The rule as the engine applies it to `kernels::matmul`: per 128-deep K tile a sequential
/// chain of fused multiply-adds from +0.0 (one rounding per step); tile sums added in PSUM in increasing order; NaN
/// canonical; then one conversion to `out`. Returns the output's bit patterns.
fn rule_matmul(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, out: DType) -> Vec<u32> {
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for (t, k0) in (0..k).step_by(128).enumerate() {
                let mut part = 0f32;
                for kk in k0..(k0 + 128).min(k) {
                    part = a[kk * m + i].mul_add(b[kk * n + j], part);
                }
                acc = if t == 0 {
                    canon(part)
                } else {
                    canon(acc + canon(part))
                };
            }
            c.push(narrow(out, acc));
        }
    }
    c
}

/// Runs `kernels::matmul` on raw operand values (already representable in `dt`).
fn engine_matmul(
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
    dt: DType,
    out: DType,
) -> Vec<u32> {
    let p = kernels::matmul(m as u64, k as u64, n as u64, dt, out).unwrap();
    let dev = Device::new(trn1());
    let lp = dev.load(0, p).unwrap();
    let (ab, bb) = (encode_f32(dt, a), encode_f32(dt, b));
    let (outs, report) = dev
        .run(
            &lp,
            &[("lhs_t", &ab), ("rhs", &bb)],
            &ExecOptions::default(),
        )
        .unwrap();
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    words(
        &outs.iter().find(|(n, _)| n == "out").unwrap().1,
        out.size(),
    )
}

/// ±(1 + f)·2^e with e in `[e0, e1]`, about one in eight zero, rounded to `dt`.
fn values(seed: u64, len: usize, dt: DType, e0: i32, e1: i32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let r = s >> 11;
            if r % 8 == 0 {
                return 0.0;
            }
            let e = e0 + ((r >> 4) % (e1 - e0 + 1) as u64) as i32;
            let v = ((1.0 + ((r >> 16) & 0xFFFF) as f64 / 65536.0) * 2f64.powi(e)) as f32;
            nrt_sim::engine::round_through(dt, if r & 8 != 0 { -v } else { v })
        })
        .collect()
}

#[test]
fn matmul_normal_range_bits_equal_the_rule() {
    // (M, K, N): K tiles of 128 with ragged remainders, ragged M and N.
    let shapes = [(5, 7, 9), (33, 129, 70), (130, 300, 65)];
    for (dt, e0, e1) in [
        (DType::Bf16, -40, 40),
        (DType::F16, -14, 14),
        (DType::F32, -3, 3),
    ] {
        for (s, &(m, k, n)) in shapes.iter().enumerate() {
            let a = values(10 * s as u64 + 1, k * m, dt, e0, e1);
            let b = values(10 * s as u64 + 2, k * n, dt, e0, e1);
            let got = engine_matmul(&a, &b, m, k, n, dt, DType::F32);
            assert_eq!(
                got,
                rule_matmul(&a, &b, m, k, n, DType::F32),
                "{dt} {m}x{k}x{n}"
            );
        }
    }
    // fp32 operands holding bf16 values (the GEMM path) and full-precision ones (the loop).
    let a = values(5, 200 * 40, DType::Bf16, -20, 20);
    let b = values(6, 200 * 50, DType::Bf16, -20, 20);
    let got = engine_matmul(&a, &b, 40, 200, 50, DType::F32, DType::Bf16);
    assert_eq!(got, rule_matmul(&a, &b, 40, 200, 50, DType::Bf16));
    let a = data(7, 200 * 40, DType::F32);
    let b = data(8, 200 * 50, DType::F32);
    let got = engine_matmul(&a, &b, 40, 200, 50, DType::F32, DType::F32);
    assert_eq!(got, rule_matmul(&a, &b, 40, 200, 50, DType::F32));
}

#[test]
fn matmul_extreme_exponents_follow_the_rule() {
    let (m, k, n) = (24, 260, 40);
    let cases: [(&str, i32, i32, i32, i32); 5] = [
        ("subnormal products", -80, -60, -80, -60),
        ("overflowing products", 55, 75, 55, 75),
        ("subnormal inputs", -133, -127, 0, 20),
        (
            "huge times tiny (exact products: the GEMM path)",
            100,
            127,
            -120,
            -100,
        ),
        ("full bf16 range", -133, 127, -133, 127),
    ];
    for (name, a0, a1, b0, b1) in cases {
        let a = values(21, k * m, DType::Bf16, a0, a1);
        let b = values(22, k * n, DType::Bf16, b0, b1);
        let got = engine_matmul(&a, &b, m, k, n, DType::Bf16, DType::F32);
        assert_eq!(got, rule_matmul(&a, &b, m, k, n, DType::F32), "{name}");
    }
    // Crafted: 2^-149 + 2^-150 rounds (a tie, to even) to 2^-148 (rounding the product first
    // would give 2^-149), and −1.5·2^127 + 1.5·2^128 = 1.5·2^127 (rounding the product first
    // would overflow to +∞), each in the second K tile.
    let (m, k, n) = (1, 130, 2);
    let mut a = vec![0f32; k];
    let mut b = vec![0f32; k * n];
    a[128] = p2(-75);
    a[129] = p2(-75);
    b[128 * n] = p2(-74);
    b[129 * n] = p2(-75);
    a[0] = -1.5 * p2(64);
    a[1] = 1.5 * p2(64);
    b[1] = p2(63);
    b[n + 1] = p2(64);
    let got = engine_matmul(&a, &b, m, k, n, DType::Bf16, DType::F32);
    assert_eq!(got, [p2(-148).to_bits(), (1.5 * p2(127)).to_bits()]);
    assert_eq!(got, rule_matmul(&a, &b, m, k, n, DType::F32));
}

#[test]
fn matmul_nan_and_infinity() {
    let (m, k, n) = (4, 256, 3);
    let base_a = values(31, k * m, DType::Bf16, -3, 3);
    let base_b = values(32, k * n, DType::Bf16, -3, 3);
    let sig_nan = f32::from_bits(0xFF81_0000); // negative, with a payload
    // (what, edits to a, edits to b, output element that must be NaN or (−)∞)
    type Edits = Vec<(usize, f32)>;
    let cases: [(&str, Edits, Edits, usize, u32); 5] = [
        // NaN in the first K tile, carried through the accumulation of the second.
        ("NaN", vec![(3 * m + 1, sig_nan)], vec![], n, QNAN),
        // ∞·0 in the second K tile.
        (
            "inf*0",
            vec![(200 * m + 2, INF)],
            vec![(200 * n, 0.0)],
            2 * n,
            QNAN,
        ),
        // +∞ in tile 0 and −∞ in tile 1: NaN only when PSUM adds the tile sums.
        (
            "inf-inf in PSUM",
            vec![(10 * m, INF), (150 * m, INF)],
            vec![(10 * n + 1, 1.0), (150 * n + 1, -1.0)],
            1,
            QNAN,
        ),
        // Both signs within one tile.
        (
            "inf-inf",
            vec![(20 * m + 3, INF), (21 * m + 3, -INF)],
            vec![(20 * n + 2, 1.0), (21 * n + 2, 1.0)],
            3 * n + 2,
            QNAN,
        ),
        (
            "-inf",
            vec![(5 * m + 3, -INF)],
            vec![(5 * n, 2.0)],
            3 * n,
            (-INF).to_bits(),
        ),
    ];
    for (name, ea, eb, at, want) in cases {
        let (mut a, mut b) = (base_a.clone(), base_b.clone());
        ea.iter().for_each(|&(i, v)| a[i] = v);
        eb.iter().for_each(|&(i, v)| b[i] = v);
        let got = engine_matmul(&a, &b, m, k, n, DType::Bf16, DType::F32);
        assert_eq!(got[at], want, "{name}");
        assert_eq!(got, rule_matmul(&a, &b, m, k, n, DType::F32), "{name}");
        // Narrowed: the canonical NaN in bf16 is 0x7FC0.
        let got16 = engine_matmul(&a, &b, m, k, n, DType::Bf16, DType::Bf16);
        assert_eq!(
            got16,
            rule_matmul(&a, &b, m, k, n, DType::Bf16),
            "{name} -> bf16"
        );
        if want == QNAN {
            assert_eq!(got16[at], 0x7FC0);
        }
    }
}

// ---- elementwise, activation, copy, memset, iota ----------------------------------------------

const X_OFF: u32 = 0;
const Y_OFF: u32 = 16 * 1024;
const O_OFF: u32 = 32 * 1024;

/// One tile, `parts` partitions × `cols` elements: inputs `x` (`xd`) and `y` (`yd`) from raw
/// bytes to SBUF at `X_OFF` / `Y_OFF`, `ins` on `engine`, output `out` (`od`) from `O_OFF`.
/// Returns the output's bit patterns.
#[allow(clippy::too_many_arguments)]
fn one_tile(
    engine: EngineId,
    parts: usize,
    cols: usize,
    (xd, x): (DType, &[u8]),
    (yd, y): (DType, &[u8]),
    od: DType,
    ins: &[Instr],
) -> Vec<u32> {
    let mut b = ProgramBuilder::new("numerics");
    let tx = b.input("x", xd, &[parts as u64, cols as u64]);
    let ty = b.input("y", yd, &[parts as u64, cols as u64]);
    let to = b.output("out", od, &[parts as u64, cols as u64]);
    let (loaded, stored) = (b.sem().unwrap(), b.sem().unwrap());
    let mut loads = Vec::new();
    for p in 0..parts {
        for (t, d, off) in [(tx, xd, X_OFF), (ty, yd, Y_OFF)] {
            loads.push(DmaDescriptor {
                src: DmaEndpoint::Hbm {
                    tensor: t,
                    offset: (p * cols * d.size()) as u64,
                },
                dst: DmaEndpoint::Sbuf {
                    partition: p as u8,
                    offset: off,
                },
                len: (cols * d.size()) as u32,
            });
        }
    }
    b.dma_on(EngineId::Sync, 0, 0, &loads, loaded, 1);
    b.wait(engine, loaded, 1);
    for &i in ins {
        b.push(engine, i);
    }
    let stores: Vec<DmaDescriptor> = (0..parts)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: p as u8,
                offset: O_OFF,
            },
            dst: DmaEndpoint::Hbm {
                tensor: to,
                offset: (p * cols * od.size()) as u64,
            },
            len: (cols * od.size()) as u32,
        })
        .collect();
    b.dma_on(engine, 1, 0, &stores, stored, 1);
    let dev = Device::new(trn1());
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    let (outs, report) = dev
        .run(&lp, &[("x", x), ("y", y)], &ExecOptions::default())
        .unwrap();
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    words(&outs.iter().find(|(n, _)| n == "out").unwrap().1, od.size())
}

fn ap(dt: DType, parts: usize, off: u32, cols: usize) -> AccessPattern {
    AccessPattern::sbuf(dt, 0, parts as u8, off, cols as u16)
}

/// The fp32 → `od` conversion's bits (the rule `store` applies after the arithmetic).
fn narrow(od: DType, v: f32) -> u32 {
    match od {
        DType::F32 => v.to_bits(),
        DType::Bf16 => u32::from(f32_to_bf16(v)),
        DType::F16 => u32::from(f32_to_f16(v)),
        DType::I32 => f32_to_i32(v) as u32,
    }
}

#[test]
fn tensor_tensor_special_values() {
    let nan_p = f32::from_bits(0xFFC1_2345); // negative quiet NaN with a payload
    let nan_s = f32::from_bits(0x7F80_0001); // signalling
    // (x, y, [x + y, x − y, x × y, max(x, y)])
    let table: [(f32, f32, [f32; 4]); 12] = [
        (INF, -INF, [f32::NAN, INF, -INF, INF]),
        (INF, INF, [INF, f32::NAN, INF, INF]),
        (0.0, -0.0, [0.0, 0.0, -0.0, 0.0]),
        (-0.0, 0.0, [0.0, -0.0, -0.0, 0.0]),
        (-0.0, -0.0, [-0.0, 0.0, 0.0, -0.0]),
        (0.0, INF, [INF, -INF, f32::NAN, INF]),
        (nan_p, 1.0, [f32::NAN, f32::NAN, f32::NAN, 1.0]),
        (-2.0, nan_s, [f32::NAN, f32::NAN, f32::NAN, -2.0]),
        (nan_p, nan_s, [f32::NAN; 4]),
        (f32::MAX, f32::MAX, [INF, 0.0, INF, f32::MAX]),
        (p2(-100), p2(-49), [p2(-49), -p2(-49), p2(-149), p2(-49)]),
        (-INF, -3.0, [-INF, -INF, INF, -3.0]),
    ];
    let cols = table.len();
    let x: Vec<f32> = table.iter().map(|r| r.0).collect();
    let y: Vec<f32> = table.iter().map(|r| r.1).collect();
    for (oi, op) in [AluOp::Add, AluOp::Sub, AluOp::Mul, AluOp::Max]
        .into_iter()
        .enumerate()
    {
        for od in [DType::F32, DType::Bf16, DType::F16, DType::I32] {
            let ins = [Instr::TensorTensor {
                op,
                a: ap(DType::F32, 1, X_OFF, cols),
                b: ap(DType::F32, 1, Y_OFF, cols),
                out: ap(od, 1, O_OFF, cols),
            }];
            let got = one_tile(
                EngineId::Vector,
                1,
                cols,
                (DType::F32, &bytes_f32(&x)),
                (DType::F32, &bytes_f32(&y)),
                od,
                &ins,
            );
            let want: Vec<u32> = table.iter().map(|r| narrow(od, canon(r.2[oi]))).collect();
            assert_eq!(got, want, "{op:?} -> {od}");
        }
    }
    // The canonical NaN per output type.
    assert_eq!(narrow(DType::Bf16, canon(f32::NAN)), 0x7FC0);
    assert_eq!(narrow(DType::F16, canon(f32::NAN)), 0x7E00);
}

#[test]
fn tensor_scalar_special_values() {
    let x = [INF, -INF, 0.0, -0.0, 1.5, f32::from_bits(0xFFC0_0007)];
    // (op, scalar, expected per x)
    let cases: [(AluOp, f32, [f32; 6]); 5] = [
        (
            AluOp::Mul,
            0.0,
            [f32::NAN, f32::NAN, 0.0, -0.0, 0.0, f32::NAN],
        ),
        (
            AluOp::Add,
            -INF,
            [f32::NAN, -INF, -INF, -INF, -INF, f32::NAN],
        ),
        (AluOp::Add, -0.0, [INF, -INF, 0.0, -0.0, 1.5, f32::NAN]),
        (AluOp::Max, f32::NAN, [INF, -INF, 0.0, -0.0, 1.5, f32::NAN]),
        (AluOp::Max, -0.0, [INF, -0.0, 0.0, -0.0, 1.5, -0.0]),
    ];
    for (op, scalar, want) in cases {
        let ins = [Instr::TensorScalar {
            op,
            src: ap(DType::F32, 1, X_OFF, x.len()),
            scalar,
            out: ap(DType::F32, 1, O_OFF, x.len()),
        }];
        let got = one_tile(
            EngineId::Scalar,
            1,
            x.len(),
            (DType::F32, &bytes_f32(&x)),
            (DType::F32, &bytes_f32(&x)),
            DType::F32,
            &ins,
        );
        let want: Vec<u32> = want.iter().map(|v| canon(*v).to_bits()).collect();
        assert_eq!(got, want, "{op:?} {scalar}");
    }
}

#[test]
fn activation_special_values() {
    let x = [
        f32::from_bits(0xFF80_0001),
        INF,
        -INF,
        -0.0,
        0.0,
        1.0,
        -1.0,
        88.8,
        -104.0,
        f32::MAX,
        -f32::MAX,
        p2(-140),
    ];
    let n = x.len();
    let f64_to = |v: f64| v as f32;
    for func in [
        ActFunc::Identity,
        ActFunc::Relu,
        ActFunc::Exp,
        ActFunc::Tanh,
        ActFunc::Gelu,
    ] {
        // bias −0 keeps −0 inputs (−0 + +0 would be +0).
        let ins = [Instr::Activation {
            func,
            src: ap(DType::F32, 1, X_OFF, n),
            out: ap(DType::F32, 1, O_OFF, n),
            scale: 1.0,
            bias: Bias::Imm(-0.0),
        }];
        let got = one_tile(
            EngineId::Scalar,
            1,
            n,
            (DType::F32, &bytes_f32(&x)),
            (DType::F32, &bytes_f32(&x)),
            DType::F32,
            &ins,
        );
        let want: Vec<u32> = x
            .iter()
            .map(|&v| {
                let t = v + -0.0;
                canon(match func {
                    ActFunc::Identity => t,
                    ActFunc::Relu => {
                        if t > 0.0 || t.is_nan() {
                            t
                        } else {
                            0.0
                        }
                    }
                    ActFunc::Exp => f64_to(exp_f64(f64::from(t))),
                    ActFunc::Tanh => f64_to(tanh_f64(f64::from(t))),
                    ActFunc::Gelu => f64_to(gelu_f64(f64::from(t))),
                })
                .to_bits()
            })
            .collect();
        assert_eq!(got, want, "{func:?}");
        // The edges, spelled out: NaN → canonical NaN everywhere.
        assert_eq!(got[0], QNAN, "{func:?}(NaN)");
        let (pinf, ninf, nzero) = (got[1], got[2], got[3]);
        let expect: [(ActFunc, [f32; 3]); 5] = [
            (ActFunc::Identity, [INF, -INF, -0.0]),
            (ActFunc::Relu, [INF, 0.0, 0.0]),
            (ActFunc::Exp, [INF, 0.0, 1.0]),
            (ActFunc::Tanh, [1.0, -1.0, -0.0]),
            (ActFunc::Gelu, [INF, -0.0, -0.0]),
        ];
        let e = expect.iter().find(|(f, _)| *f == func).unwrap().1;
        assert_eq!(
            [pinf, ninf, nzero],
            e.map(f32::to_bits),
            "{func:?} at ±∞, −0"
        );
    }
    // scale·x + bias: 0·∞ is NaN before the function; a NaN per-partition bias poisons its
    // partition only.
    let ins = [Instr::Activation {
        func: ActFunc::Relu,
        src: ap(DType::F32, 2, X_OFF, 3),
        out: ap(DType::F32, 2, O_OFF, 3),
        scale: 0.0,
        bias: Bias::PerPartition(ap(DType::F32, 2, Y_OFF, 1)),
    }];
    let x = [INF, 1.0, 2.0, 3.0, 4.0, 5.0];
    let y = [0.5, 0.0, 0.0, f32::from_bits(0x7F80_0005), 0.0, 0.0];
    let got = one_tile(
        EngineId::Scalar,
        2,
        3,
        (DType::F32, &bytes_f32(&x)),
        (DType::F32, &bytes_f32(&y)),
        DType::F32,
        &ins,
    );
    assert_eq!(
        got,
        [QNAN, 0.5f32.to_bits(), 0.5f32.to_bits(), QNAN, QNAN, QNAN]
    );
}

#[test]
fn tensor_copy_conversions() {
    let x = [
        f32::from_bits(0x7FC1_2345), // quiet NaN with a payload
        f32::from_bits(0xFF80_0001), // negative signalling NaN
        INF,
        -INF,
        f32::MAX,
        65520.0, // fp16: rounds to ∞
        65519.0,
        p2(-25), // fp16: half the smallest subnormal, ties to 0
        1.5 * p2(-24),
        -0.0,
        2.5,
        -3.5,
        1e10,
        -1e10,
        f32::from_bits(0x3F80_8000), // bf16 tie, to even (down)
        f32::from_bits(0x3F81_8000), // bf16 tie, to even (up)
    ];
    let n = x.len();
    for od in [DType::F32, DType::Bf16, DType::F16, DType::I32] {
        let ins = [Instr::TensorCopy {
            src: ap(DType::F32, 1, X_OFF, n),
            out: ap(od, 1, O_OFF, n),
        }];
        let got = one_tile(
            EngineId::Vector,
            1,
            n,
            (DType::F32, &bytes_f32(&x)),
            (DType::F32, &bytes_f32(&x)),
            od,
            &ins,
        );
        // No arithmetic, so no canonicalisation: NaN payloads are kept (narrowed, quieted).
        let want: Vec<u32> = x.iter().map(|&v| narrow(od, v)).collect();
        assert_eq!(got, want, "fp32 -> {od}");
    }
    // Spelled out: the NaNs, ±∞ and saturation.
    let bf: Vec<u32> = x[..6].iter().map(|&v| narrow(DType::Bf16, v)).collect();
    assert_eq!(bf, [0x7FC1, 0xFFC0, 0x7F80, 0xFF80, 0x7F80, 0x4780]);
    let h: Vec<u32> = x[..9].iter().map(|&v| narrow(DType::F16, v)).collect();
    assert_eq!(
        h,
        [
            0x7E09, 0xFE00, 0x7C00, 0xFC00, 0x7C00, 0x7C00, 0x7BFF, 0x0000, 0x0002
        ]
    );
    let i: Vec<i32> = x.iter().map(|&v| narrow(DType::I32, v) as i32).collect();
    assert_eq!(&i[..4], [0, 0, i32::MAX, i32::MIN]);
    assert_eq!(&i[9..14], [0, 2, -4, i32::MAX, i32::MIN]);
    // int32 → float: RNE to fp32, then RNE to the output type (two roundings).
    let v: [i32; 3] = [16_777_217, i32::MAX, 16_842_753]; // 2^24+1, 2^31−1, 2^24+2^16+1
    let xb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    for (od, want) in [
        (DType::F32, [0x4B80_0000, 0x4F00_0000, 0x4B80_8000]),
        // 2^24+2^16+1 → fp32 2^24+2^16 (tie, to even) → bf16 2^24 (tie, to even); one
        // rounding would give 2^24+2^17.
        (DType::Bf16, [0x4B80, 0x4F00, 0x4B80]),
    ] {
        let ins = [Instr::TensorCopy {
            src: ap(DType::I32, 1, X_OFF, 3),
            out: ap(od, 1, O_OFF, 3),
        }];
        let got = one_tile(
            EngineId::Vector,
            1,
            3,
            (DType::I32, &xb),
            (DType::I32, &xb),
            od,
            &ins,
        );
        assert_eq!(got, want, "int32 -> {od}");
    }
}

#[test]
fn memset_and_iota() {
    let none = [0u8; 16];
    let memset = |od: DType, bits: u32| {
        one_tile(
            EngineId::GpSimd,
            1,
            4,
            (DType::F32, &none),
            (DType::F32, &none),
            od,
            &[Instr::Memset {
                out: ap(od, 1, O_OFF, 4),
                bits,
            }],
        )[0]
    };
    // fp32: the bits as given, NaN payloads and signs included (no arithmetic).
    assert_eq!(memset(DType::F32, 0xFF80_0001), 0xFF80_0001);
    assert_eq!(memset(DType::F32, 0x8000_0000), 0x8000_0000);
    // Narrower floats: the binary32 converted with RNE (NaN: quieted, top payload bits kept).
    assert_eq!(memset(DType::Bf16, 0x3F80_8000), 0x3F80);
    assert_eq!(memset(DType::Bf16, 0x7F80_0001), 0x7FC0);
    assert_eq!(memset(DType::F16, 0x7F7F_FFFF), 0x7C00);
    // int32: the bits as an int32.
    assert_eq!(memset(DType::I32, 0xFFFF_FFFF), 0xFFFF_FFFF);
    let iota = |od: DType, base: i32, step: i32| {
        one_tile(
            EngineId::GpSimd,
            1,
            4,
            (DType::F32, &none),
            (DType::F32, &none),
            od,
            &[Instr::Iota {
                out: ap(od, 1, O_OFF, 4),
                base,
                partition_step: 0,
                free_step: step,
            }],
        )
    };
    // int32 arithmetic wraps.
    let w = iota(DType::I32, i32::MAX - 1, 1);
    assert_eq!(w, [0x7FFF_FFFE, 0x7FFF_FFFF, 0x8000_0000, 0x8000_0001]);
    // Float outputs: each int32 rounded to fp32 (RNE), then to the output type (RNE).
    assert_eq!(
        iota(DType::F32, 16_777_215, 1),
        [0x4B7F_FFFF, 0x4B80_0000, 0x4B80_0000, 0x4B80_0001]
    );
    assert_eq!(iota(DType::Bf16, 16_842_753, 0)[0], 0x4B80);
    assert_eq!(
        iota(DType::F16, 65_520, -65_520),
        [0x7C00, 0x0000, 0xFC00, 0xFC00]
    );
}

/// Two `MultiplyMoving`s read the same moving access pattern; between them another engine
/// overwrites that SBUF region (synchronised by semaphores). The second product must use the
/// new bytes (the engine reuses a gathered moving tile only while its region is unwritten),
/// and a write elsewhere in SBUF meanwhile changes nothing. Expected values: plain loops.
#[test]
fn matmul_moving_reuse_sees_writes_between_matmuls() {
    let (k, m, n) = (8usize, 4usize, 64usize);
    let x: Vec<f32> = (0..k * m).map(|i| (i % 7) as f32 - 3.0).collect(); // [k, m]
    let y: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect(); // [k, n]
    let mut b = ProgramBuilder::new("moving_reuse");
    let tx = b.input("x", DType::F32, &[k as u64, m as u64]);
    let ty = b.input("y", DType::F32, &[k as u64, n as u64]);
    let to = b.output("out", DType::F32, &[2 * m as u64, n as u64]);
    let [loaded, mm1, rewritten, mm2, evacuated, stored] = [(); 6].map(|_| b.sem().unwrap());
    let mut loads = Vec::new();
    for p in 0..k {
        for (t, cols, off) in [(tx, m, X_OFF), (ty, n, Y_OFF)] {
            loads.push(DmaDescriptor {
                src: DmaEndpoint::Hbm {
                    tensor: t,
                    offset: (p * cols * 4) as u64,
                },
                dst: DmaEndpoint::Sbuf {
                    partition: p as u8,
                    offset: off,
                },
                len: (cols * 4) as u32,
            });
        }
    }
    b.dma_on(EngineId::Sync, 0, 0, &loads, loaded, 1);
    let moving = ap(DType::F32, k, Y_OFF, n);
    let mm = |bank: u32| Instr::MultiplyMoving {
        moving,
        dst: AccessPattern::psum(DType::F32, 0, m as u8, bank * 2048, n as u16),
        accumulate: false,
    };
    b.wait(EngineId::Tensor, loaded, 1);
    b.push(
        EngineId::Tensor,
        Instr::LoadStationary {
            src: ap(DType::F32, k, X_OFF, m),
        },
    );
    b.push(EngineId::Tensor, mm(0));
    b.signal(EngineId::Tensor, mm1, 1);
    // GpSimd: a write elsewhere, then the moving region's columns 10..30 set to 1.5.
    b.wait(EngineId::GpSimd, mm1, 1);
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: ap(DType::F32, k, O_OFF + 4096, n),
            bits: 2.0f32.to_bits(),
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::sbuf(DType::F32, 0, k as u8, Y_OFF + 40, 20),
            bits: 1.5f32.to_bits(),
        },
    );
    b.signal(EngineId::GpSimd, rewritten, 1);
    b.wait(EngineId::Tensor, rewritten, 1);
    b.push(EngineId::Tensor, mm(1));
    b.signal(EngineId::Tensor, mm2, 1);
    b.wait(EngineId::Vector, mm2, 1);
    for bank in 0..2u32 {
        b.push(
            EngineId::Vector,
            Instr::TensorCopy {
                src: AccessPattern::psum(DType::F32, 0, m as u8, bank * 2048, n as u16),
                out: ap(DType::F32, m, O_OFF + bank * (n as u32) * 4, n),
            },
        );
    }
    b.signal(EngineId::Vector, evacuated, 1);
    b.wait(EngineId::Sync, evacuated, 1);
    let stores: Vec<DmaDescriptor> = (0..2 * m)
        .map(|r| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: (r % m) as u8,
                offset: O_OFF + (r / m * n * 4) as u32,
            },
            dst: DmaEndpoint::Hbm {
                tensor: to,
                offset: (r * n * 4) as u64,
            },
            len: (n * 4) as u32,
        })
        .collect();
    b.dma_on(EngineId::Sync, 0, 0, &stores, stored, 1);
    let dev = Device::new(trn1());
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    let (outs, report) = dev
        .run(
            &lp,
            &[("x", &bytes_f32(&x)), ("y", &bytes_f32(&y))],
            &ExecOptions::default(),
        )
        .unwrap();
    assert!(report.hazards.is_empty(), "{:?}", report.hazards.first());
    let got = words(&outs.iter().find(|(n, _)| n == "out").unwrap().1, 4);
    let mut y2 = y.clone();
    for row in y2.chunks_mut(n) {
        row[10..30].fill(1.5);
    }
    let mut want = Vec::new();
    for yy in [&y, &y2] {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for kk in 0..k {
                    acc = x[kk * m + i].mul_add(yy[kk * n + j], acc);
                }
                want.push(acc.to_bits());
            }
        }
    }
    assert_eq!(got, want);
}
