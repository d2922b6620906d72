//! Deterministic arithmetic: activation functions built only from IEEE-754 `+ - * /` (no
//! platform `libm`, so every machine computes the same bits), the elementwise ALU rules, the
//! canonical NaN, and the TensorE matmul kernel (one fused multiply-add per step, in a fixed
//! order: a fast GEMM where the CPU has FMA, a vectorised kernel or a scalar loop otherwise —
//! the same bits on every CPU).
//!
//! Everything here assumes the default floating-point environment (round to nearest even,
//! gradual underflow), which Rust requires, and relies on Rust never contracting `a * b + c`
//! into a fused multiply-add: where a rule fuses, it says so with `mul_add`.

mod fast;
mod fused;
mod matmul;
mod tensor;

pub(crate) use self::matmul::{matmul_stationary_any_nan, matmul_store_fast};
pub use self::tensor::{gemm_whole_depth, tensor_matmul};
use super::isa::ActFunc;
use super::nan::canon;

const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const LOG2E: f64 = core::f64::consts::LOG2_E;

/// eˣ in binary64 from a Cody–Waite range reduction and a degree-13 Taylor polynomial
/// (relative error below 1e-15 on the reduced range); deterministic on every IEEE machine.
pub fn exp_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -745.0 {
        return 0.0;
    }
    let k = round_ties_even_small(x * LOG2E);
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Horner on the Taylor series of e^r, |r| <= 0.35.
    let mut p = EXP_C13;
    for c in EXP_COEFFS {
        p = p * r + c;
    }
    scale_pow2(p, k as i32)
}

/// 1/13!, the leading coefficient of [`exp_f64`]'s polynomial.
const EXP_C13: f64 = 1.0 / 6_227_020_800.0;

/// The rest of [`exp_f64`]'s Horner coefficients, 1/12! down to 1/0!.
const EXP_COEFFS: [f64; 13] = [
    1.0 / 479_001_600.0,
    1.0 / 39_916_800.0,
    1.0 / 3_628_800.0,
    1.0 / 362_880.0,
    1.0 / 40_320.0,
    1.0 / 5_040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// Four lanes of `activation(ActFunc::Exp, t)`, the same bits: when every lane lies in
/// [−690, 690] (no NaN, no clamp, and |k| ≤ 996 so [`scale_pow2`] is one multiply) the four
/// [`exp_f64`] evaluations run interleaved, the same operations in the same order per lane
/// (independent dependency chains the CPU overlaps); otherwise each lane goes through
/// [`activation`].
pub(crate) fn exp_f32_x4(t: [f32; 4]) -> [f32; 4] {
    if !t.iter().all(|&v| (-690.0..=690.0).contains(&v)) {
        return t.map(|v| activation(ActFunc::Exp, v));
    }
    let x = t.map(f64::from);
    let k = x.map(|x| round_ties_even_small(x * LOG2E));
    let mut r = [0.0f64; 4];
    for ((r, &x), &k) in r.iter_mut().zip(&x).zip(&k) {
        *r = (x - k * LN2_HI) - k * LN2_LO;
    }
    let mut p = [EXP_C13; 4];
    for c in EXP_COEFFS {
        for (p, &r) in p.iter_mut().zip(&r) {
            *p = *p * r + c;
        }
    }
    let mut y = [0.0f32; 4];
    for ((y, &p), &k) in y.iter_mut().zip(&p).zip(&k) {
        *y = canon((p * pow2(k as i32)) as f32);
    }
    y
}

/// `v` rounded to an integer, ties to even, for `|v| < 2^51` (here `|v| ≤ 1075`): adding
/// and subtracting 1.5·2^52 rounds in the FPU's round-to-nearest-even mode. Equal to
/// `v.round_ties_even()` except that it gives +0 for `v` in (−0.5, −0] (−0 there): the
/// caller only multiplies it into a subtraction from `x` and converts it to an integer, where
/// the sign of a zero makes no difference. (`round_ties_even` is a library call on x86-64
/// without SSE4.1, about a tenth of the cost of `exp_f64`.)
#[inline]
fn round_ties_even_small(v: f64) -> f64 {
    const MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 · 2^52
    (v + MAGIC) - MAGIC
}

/// `v · 2^k` exactly (for results in the normal or subnormal range) by bit construction.
fn scale_pow2(v: f64, k: i32) -> f64 {
    // Split k so each factor is a normal power of two.
    let mut v = v;
    let mut k = k;
    while k > 1000 {
        v *= pow2(1000);
        k -= 1000;
    }
    while k < -1000 {
        v *= pow2(-1000);
        k += 1000;
    }
    v * pow2(k)
}

fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// tanh x in binary64 (odd polynomial near 0, exponential form elsewhere).
pub fn tanh_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let t = if a < 0.02 {
        let a2 = a * a;
        a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))))
    } else if a > 20.0 {
        1.0
    } else {
        let e = exp_f64(-2.0 * a);
        (1.0 - e) / (1.0 + e)
    };
    // Odd: tanh(−0) = −0.
    if x.is_sign_negative() { -t } else { t }
}

/// GELU, tanh approximation: `0.5·x·(1 + tanh(u))`, `u = √(2/π)·(x + 0.044715·x³)`, in
/// binary64, evaluated as the algebraically equal `x / (1 + e^(−2u))`, which does not cancel
/// in the negative tail. `gelu(+∞) = +∞`, `gelu(−∞) = −0` (the limit; the formula would give
/// `−∞/∞`).
pub fn gelu_f64(x: f64) -> f64 {
    const C: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    let u = C * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_f64(-2.0 * u))
}

// ---- NaN, the ALU and activations -----------------------------------------------------------

/// Applies an activation to a binary32 argument: evaluated in binary64, rounded once to
/// binary32; a NaN result is the canonical NaN.
#[inline]
pub(crate) fn activation(func: ActFunc, t: f32) -> f32 {
    let y = match func {
        ActFunc::Identity => t,
        ActFunc::Relu => {
            if t > 0.0 || t.is_nan() {
                t
            } else {
                0.0
            }
        }
        ActFunc::Exp => exp_f64(f64::from(t)) as f32,
        ActFunc::Tanh => tanh_f64(f64::from(t)) as f32,
        ActFunc::Gelu => gelu_f64(f64::from(t)) as f32,
    };
    canon(y)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    const QNAN: u32 = crate::engine::CANONICAL_NAN.to_bits();

    #[test]
    fn small_rounding_is_round_ties_even() {
        // Every half-integer and its neighbours over exp's range, and a dense sweep.
        let mut vs: Vec<f64> = Vec::new();
        for i in -2200..=2200 {
            let h = f64::from(i) / 2.0;
            vs.extend([h, h.next_up(), h.next_down()]);
        }
        vs.extend((0..200_000).map(|i| -1100.0 + f64::from(i) * 0.011));
        for v in vs {
            let (a, b) = (round_ties_even_small(v), v.round_ties_even());
            // Equal as numbers (only the sign of a zero may differ).
            assert!(a == b, "{v}: {a} vs {b}");
        }
    }

    /// The ALU rule every engine applies ([`AluOp::eval_f32`]), checked here beside the
    /// other numerics.
    fn alu_f32(op: crate::engine::isa::AluOp, a: f32, b: f32) -> f32 {
        op.eval_f32(a, b)
    }

    #[test]
    fn alu_rules() {
        use crate::engine::isa::AluOp;
        let inf = f32::INFINITY;
        let nan = f32::from_bits(0xFFC1_2345);
        let q = |v: f32| v.to_bits();
        assert_eq!(q(alu_f32(AluOp::Max, 0.0, -0.0)), 0);
        assert_eq!(q(alu_f32(AluOp::Max, -0.0, 0.0)), 0);
        assert_eq!(q(alu_f32(AluOp::Max, -0.0, -0.0)), q(-0.0));
        assert_eq!(alu_f32(AluOp::Max, nan, -3.0), -3.0);
        assert_eq!(alu_f32(AluOp::Max, -3.0, nan), -3.0);
        assert_eq!(q(alu_f32(AluOp::Max, nan, nan)), QNAN);
        assert_eq!(alu_f32(AluOp::Max, -inf, 1.0), 1.0);
        assert_eq!(alu_f32(AluOp::Max, inf, 1.0), inf);
        assert_eq!(q(alu_f32(AluOp::Add, inf, -inf)), QNAN);
        assert_eq!(q(alu_f32(AluOp::Sub, inf, inf)), QNAN);
        assert_eq!(q(alu_f32(AluOp::Mul, 0.0, -inf)), QNAN);
        assert_eq!(q(alu_f32(AluOp::Add, nan, 1.0)), QNAN);
        assert_eq!(q(alu_f32(AluOp::Mul, 2.0, nan)), QNAN);
        assert_eq!(alu_f32(AluOp::Add, inf, 1.0), inf);
        assert_eq!(alu_f32(AluOp::Mul, -inf, 2.0), -inf);
        assert_eq!(q(alu_f32(AluOp::Add, -0.0, -0.0)), q(-0.0));
        assert_eq!(q(alu_f32(AluOp::Sub, 1.0, 1.0)), 0);
        assert_eq!(alu_f32(AluOp::Mul, f32::MAX, 2.0), inf);
        // Gradual underflow: the smallest subnormal survives.
        assert_eq!(q(alu_f32(AluOp::Mul, 2f32.powi(-100), 2f32.powi(-49))), 1);
    }

    #[test]
    fn activation_rules_at_the_edges() {
        use ActFunc::*;
        let inf = f32::INFINITY;
        let nan = f32::from_bits(0xFF80_0001);
        let q = |v: f32| v.to_bits();
        for f in [Identity, Relu, Exp, Tanh, Gelu] {
            assert_eq!(q(activation(f, nan)), QNAN, "{f:?}");
            assert_eq!(q(activation(f, f32::from_bits(0x7FC0_0001))), QNAN, "{f:?}");
        }
        let cases: [(ActFunc, f32, f32); 16] = [
            (Identity, inf, inf),
            (Identity, -inf, -inf),
            (Identity, -0.0, -0.0),
            (Relu, inf, inf),
            (Relu, -inf, 0.0),
            (Relu, -0.0, 0.0),
            (Exp, inf, inf),
            (Exp, -inf, 0.0),
            (Exp, 89.0, inf),
            (Exp, -104.0, 0.0),
            (Tanh, inf, 1.0),
            (Tanh, -inf, -1.0),
            (Tanh, -0.0, -0.0),
            (Gelu, inf, inf),
            (Gelu, -inf, -0.0),
            (Gelu, -0.0, -0.0),
        ];
        for (f, x, want) in cases {
            assert_eq!(q(activation(f, x)), q(want), "{f:?}({x})");
        }
        assert_eq!(q(activation(Gelu, -f32::MAX)), q(-0.0));
        assert_eq!(q(activation(Gelu, f32::MAX)), q(f32::MAX));
        // e^-103.9 is subnormal in binary32 and kept (gradual underflow), not flushed.
        let e = activation(Exp, -103.0);
        assert!(e > 0.0 && !e.is_normal());
    }
}
