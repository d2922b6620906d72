//! Plain Rust references for the format-1.1 operation tests: the documented semantics of the
//! ALU operations (fp32, one rounding, canonical NaN, maximumNumber), binary64 references of
//! the activation functions (erf by its series and continued fraction), element conversions,
//! ULP distances, byte encodings and a small kernel-building helper.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    dead_code,
    unreachable_pub
)]

use nrt_kernel::{ActFn, AluOp, DType};
use nrt_sim::engine::{decode_f32, encode_f32};

/// The canonical quiet NaN every arithmetic NaN result is.
pub const QNAN: u32 = 0x7FC0_0000;

/// `v` with any NaN replaced by the canonical one.
pub fn canon(v: f32) -> f32 {
    if v.is_nan() { f32::from_bits(QNAN) } else { v }
}

/// fp32 bytes.
pub fn f32s(v: &[f32]) -> Vec<u8> {
    encode_f32(DType::F32, v)
}

/// Bytes of `dtype` from fp32 values (nearest even).
pub fn enc(dtype: DType, v: &[f32]) -> Vec<u8> {
    encode_f32(dtype, v)
}

/// Values of a float tensor's bytes, as fp32.
pub fn dec(dtype: DType, b: &[u8]) -> Vec<f32> {
    decode_f32(dtype, b)
}

/// int32 bytes.
pub fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// int32 values of bytes.
pub fn to_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// fp32 → bf16 → fp32, nearest even; NaN stays NaN (quiet).
pub fn bf16(v: f32) -> f32 {
    let b = v.to_bits();
    if v.is_nan() {
        return f32::from_bits((b | 0x0040_0000) & 0xFFFF_0000);
    }
    let r = b.wrapping_add(0x7FFF + ((b >> 16) & 1));
    f32::from_bits(r & 0xFFFF_0000)
}

/// fp32 → int32: nearest even, saturating, NaN → 0.
pub fn to_int(v: f32) -> i32 {
    if v.is_nan() {
        0
    } else {
        let r = v.round_ties_even();
        if r >= 2_147_483_648.0 {
            i32::MAX
        } else if r < -2_147_483_648.0 {
            i32::MIN
        } else {
            r as i32
        }
    }
}

/// The value's place on the fp32 number line (±0 both 0).
fn ordinal(v: f32) -> i64 {
    let b = v.to_bits() as i32;
    if b < 0 {
        -i64::from(b & 0x7FFF_FFFF)
    } else {
        i64::from(b)
    }
}

/// ULPs between two fp32 values (0 for two NaNs; huge for a NaN and a number).
pub fn ulps(a: f32, b: f32) -> u64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => 0,
        (false, false) => (ordinal(a) - ordinal(b)).unsigned_abs(),
        _ => u64::MAX,
    }
}

/// ULPs between two bf16 values held as fp32.
pub fn ulps_bf16(a: f32, b: f32) -> u64 {
    ulps(a, b) >> 16
}

/// IEEE 754-2019 maximumNumber with −0 < +0 (a NaN operand yields the other).
pub fn max_num(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f32::from_bits(QNAN),
        (true, false) => b,
        (false, true) => a,
        _ if a == b => {
            if a.is_sign_positive() {
                a
            } else {
                b
            }
        }
        _ => {
            if a > b {
                a
            } else {
                b
            }
        }
    }
}

/// minimumNumber with −0 < +0.
pub fn min_num(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f32::from_bits(QNAN),
        (true, false) => b,
        (false, true) => a,
        _ if a == b => {
            if a.is_sign_negative() {
                a
            } else {
                b
            }
        }
        _ => {
            if a < b {
                a
            } else {
                b
            }
        }
    }
}

/// The fp32 ALU operations the tests use, as documented (one rounding, canonical NaN).
pub fn alu(op: AluOp, a: f32, b: f32) -> f32 {
    let bit = |c: bool| if c { 1.0 } else { 0.0 };
    match op {
        AluOp::Add => canon(a + b),
        AluOp::Sub => canon(a - b),
        AluOp::Mul => canon(a * b),
        AluOp::Divide => canon(a / b),
        AluOp::Max => max_num(a, b),
        AluOp::Min => min_num(a, b),
        AluOp::Equal => bit(a == b),
        AluOp::NotEqual => bit(a != b),
        AluOp::Greater => bit(a > b),
        AluOp::GreaterEqual => bit(a >= b),
        AluOp::Less => bit(a < b),
        AluOp::LessEqual => bit(a <= b),
        AluOp::Power => canon(f64::from(a).powf(f64::from(b)) as f32),
        other => panic!("no fp32 reference for {}", other.name()),
    }
}

/// The int32 ALU operations the tests use (wrapping; bit patterns).
pub fn alu_i32(op: AluOp, a: i32, b: i32) -> i32 {
    match op {
        AluOp::Add => a.wrapping_add(b),
        AluOp::Sub => a.wrapping_sub(b),
        AluOp::Mul => a.wrapping_mul(b),
        AluOp::Max => a.max(b),
        AluOp::Min => a.min(b),
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
        other => panic!("no int32 reference for {}", other.name()),
    }
}

/// erf in binary64: its Maclaurin series below 2.5, 1 − erfc above.
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() < 2.5 {
        let mut term = x;
        let mut sum = x;
        let x2 = x * x;
        for n in 1..200 {
            term *= -x2 / f64::from(n);
            let t = term / f64::from(2 * n + 1);
            sum += t;
            if t.abs() < 1e-18 * sum.abs() {
                break;
            }
        }
        return sum * 2.0 / std::f64::consts::PI.sqrt();
    }
    let c = erfc(x.abs());
    if x > 0.0 { 1.0 - c } else { c - 1.0 }
}

/// erfc in binary64: `1 − erf` below 2.5, Laplace's continued fraction above (x ≥ 0.5 in
/// practice), with its limits at ±∞.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    if x < 2.5 {
        return 1.0 - erf(x);
    }
    // erfc x = e^(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + …)))))
    let mut k = x;
    for n in (1..200).rev() {
        k = x + f64::from(n) / 2.0 / k;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / k
}

/// The exact (binary64) value of an activation function at `t`, with the limits the ISA
/// documents at the infinities; NaN for NaN.
pub fn act_ref(f: ActFn, t: f32) -> f64 {
    let x = f64::from(t);
    if x.is_nan() {
        return f64::NAN;
    }
    match f {
        ActFn::Identity => x,
        ActFn::Relu => {
            if x > 0.0 {
                x
            } else {
                0.0
            }
        }
        ActFn::Exp => x.exp(),
        ActFn::Tanh => x.tanh(),
        ActFn::Gelu => {
            if x == f64::NEG_INFINITY {
                return -0.0;
            }
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            x / (1.0 + (-2.0 * u).exp())
        }
        ActFn::GeluErf => {
            if x == f64::NEG_INFINITY {
                return -0.0;
            }
            0.5 * x * erfc(-x / std::f64::consts::SQRT_2)
        }
        ActFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        ActFn::Silu => {
            if x == f64::NEG_INFINITY {
                return -0.0;
            }
            x / (1.0 + (-x).exp())
        }
        ActFn::Softplus => {
            if x > 40.0 {
                x
            } else {
                x.exp().ln_1p()
            }
        }
        ActFn::Log => x.ln(),
        ActFn::Sqrt => x.sqrt(),
        ActFn::Rsqrt => 1.0 / x.sqrt(),
        ActFn::Reciprocal => 1.0 / x,
        ActFn::Square => x * x,
        ActFn::Abs => x.abs(),
        ActFn::Erf => erf(x),
    }
}

/// Whether ISA documents the function as correctly rounded (exact against the reference).
pub fn act_exact(f: ActFn) -> bool {
    matches!(
        f,
        ActFn::Identity
            | ActFn::Relu
            | ActFn::Sqrt
            | ActFn::Reciprocal
            | ActFn::Square
            | ActFn::Abs
    )
}

/// The fp32 argument `x·scale + bias` (two roundings).
pub fn act_arg(x: f32, scale: f32, bias: f32) -> f32 {
    canon(canon(x * scale) + bias)
}

/// Deterministic values: a fine grid over `[lo, hi]`, shuffled by a generator seed.
pub fn grid(n: usize, lo: f32, hi: f32, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let jitter = (s >> 40) as f32 / (1u64 << 24) as f32;
            lo + (hi - lo) * ((i as f32 + jitter) / n as f32)
        })
        .collect()
}

/// Special fp32 values: zeros, infinities, NaN, extremes, subnormals.
pub const SPECIALS: [f32; 10] = [
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    1.0e-40,
    -1.0e-40,
];

/// fp32 → fp16 → fp32, nearest even in binary64 arithmetic (subnormals, overflow to ±∞);
/// a NaN stays NaN with the quiet bit set and its top 9 payload bits kept.
pub fn f16(v: f32) -> f32 {
    if v.is_nan() {
        let b = v.to_bits();
        return f32::from_bits((b & 0x8000_0000) | 0x7FC0_0000 | (b & 0x003F_E000));
    }
    if v.is_infinite() || v == 0.0 {
        return v;
    }
    let x = f64::from(v);
    // The exact binary exponent (f32 subnormals are far below fp16's −14).
    let e = (f64::from(((v.to_bits() >> 23) & 0xFF) as i32 - 127)).max(-14.0);
    let q = (e - 10.0).exp2();
    let r = (x / q).round_ties_even() * q;
    if r.abs() > 65504.0 {
        return if x > 0.0 {
            f32::INFINITY
        } else {
            f32::NEG_INFINITY
        };
    }
    if r == 0.0 {
        return if x < 0.0 { -0.0 } else { 0.0 };
    }
    r as f32
}

/// fp32 → the value `dtype` stores (int32 values as f32), as a conversion through fp32 does.
pub fn cast(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F32 => v,
        DType::Bf16 => bf16(v),
        DType::F16 => f16(v),
        DType::I32 => to_int(v) as f32,
    }
}

/// `(count, mean, count·variance)` of `xs` as the ISA documents it: fp32, the sum from +0 in
/// order divided by the count, then the sum from +0 of squared deviations.
pub fn moments(xs: &[f32]) -> [f32; 3] {
    if xs.is_empty() {
        return [0.0; 3];
    }
    let n = xs.len() as f32;
    let mean = canon(xs.iter().fold(0.0f32, |a, &v| a + v) / n);
    let m2 = xs.iter().fold(0.0f32, |a, &v| {
        let d = v - mean;
        a + d * d
    });
    [n, mean, canon(m2)]
}

/// Chan's aggregation of `(n, mean, M2)` triples as the ISA documents it.
pub fn aggregate(t: &[f32]) -> [f32; 2] {
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
        let d = m - mean;
        mean += d * (c / nn);
        m2 = (m2 + v) + (d * d) * ((n * c) / nn);
        n = nn;
    }
    if n == 0.0 {
        return [f32::from_bits(QNAN); 2];
    }
    [canon(mean), canon(m2 / n)]
}
