//! Deterministic math of the format-1.1 operations: the activation functions beyond the five of
//! format 1.0 (logarithm, error function, sigmoid family, square roots, ...) and `power`.
//! Everything is built from IEEE-754 `+ − × /`, correctly rounded `sqrt` and
//! bit manipulation — no platform `libm`; erf and erfc come from the pure-Rust `libm`
//! crate, built the same way — so every machine computes the same bits. Functions
//! evaluate in binary64 and the caller rounds once to binary32; the binary64 error (a few
//! units of 2⁻⁵³ relative) is far below half a binary32 ULP, so each result is within 1 ULP of
//! the exact value (tested against binary64 references in `tests/engine_act.rs`).

use super::math::exp_f64;

const LN2_HI: f64 = 6.931_471_803_691_238e-1;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const FRAC_1_SQRT_2: f64 = core::f64::consts::FRAC_1_SQRT_2;

/// ln x in binary64: `x = m·2^e` with `m ∈ [√½, √2)` (from the bits), then
/// `ln m = 2·atanh(s)`, `s = (m − 1)/(m + 1)` (`|s| ≤ 0.172`) by its odd series to s²⁵, and
/// `e·ln 2` split in two parts. ln 0 = −∞, ln of a negative number or NaN = NaN, ln ∞ = ∞.
pub fn log_f64(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    let (mut x, mut e) = (x, 0i64);
    if x < f64::MIN_POSITIVE {
        x *= 18_014_398_509_481_984.0; // 2^54: make a subnormal normal
        e -= 54;
    }
    let bits = x.to_bits();
    e += ((bits >> 52) & 0x7FF) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000F_FFFF_FFFF_FFFF) | 0x3FF0_0000_0000_0000);
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    // 2·(s + s³/3 + s⁵/5 + … + s²⁵/25), Horner in z.
    let mut p = 1.0 / 25.0;
    let mut k = 23.0;
    while k > 0.0 {
        p = p * z + 1.0 / k;
        k -= 2.0;
    }
    let lnm = 2.0 * s * p;
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + lnm)
}

/// ln(1 + u) in binary64 without cancellation for small `u` (the `w = 1 + u` correction).
pub fn log1p_f64(u: f64) -> f64 {
    let w = 1.0 + u;
    if w == 1.0 {
        return u;
    }
    if w.is_infinite() {
        return w;
    }
    log_f64(w) * (u / (w - 1.0))
}

/// erfc x with relative accuracy in both tails (erfc(−∞) = 2, erfc(∞) = 0, NaN → NaN):
/// the `libm` crate's port of FreeBSD's `s_erf.c` (rational approximations on five ranges
/// of |x| with an `exp` of a split argument; under 1 ULP of binary64), pure Rust with its
/// architecture-specific paths off, so every host computes the same bits.
pub fn erfc_f64(x: f64) -> f64 {
    libm::erfc(x)
}

/// erf x (odd: erf(−0) = −0), from the same source as [`erfc_f64`].
pub fn erf_f64(x: f64) -> f64 {
    libm::erf(x)
}

/// GELU, exact (erf) form: `x·Φ(x) = ½·x·erfc(−x/√2)`; gelu(−∞) = −0.
pub fn gelu_erf_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    0.5 * x * erfc_f64(-x * FRAC_1_SQRT_2)
}

/// The logistic sigmoid `1/(1 + e^(−x))`.
pub fn sigmoid_f64(x: f64) -> f64 {
    1.0 / (1.0 + exp_f64(-x))
}

/// SiLU `x·sigmoid(x)`, computed as `x/(1 + e^(−x))`; silu(−∞) = −0.
pub fn silu_f64(x: f64) -> f64 {
    if x == f64::NEG_INFINITY {
        return -0.0;
    }
    x / (1.0 + exp_f64(-x))
}

/// Softplus `ln(1 + eˣ)`: x for x > 40 (the correction is below binary32 resolution),
/// `log1p(eˣ)` otherwise.
pub fn softplus_f64(x: f64) -> f64 {
    if x > 40.0 {
        return x;
    }
    log1p_f64(exp_f64(x))
}

/// `xʸ` in binary64 with the IEEE-754 `pow` special cases: `x⁰ = 1` and `1ʸ = 1` (even for
/// NaN), a finite negative base needs an integer exponent (else NaN), a negative base takes an
/// odd integer exponent's sign, `(±0)^y` and `(±∞)^y` by the sign of y, `(−1)^±∞ = 1`; otherwise
/// `e^(y·ln|x|)` (error far below a binary32 ULP wherever the result is a finite binary32).
pub fn pow_f64(x: f64, y: f64) -> f64 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if x.is_nan() || y.is_nan() {
        return f64::NAN;
    }
    let ax = x.abs();
    if y.is_infinite() {
        return if ax == 1.0 {
            1.0
        } else if (ax > 1.0) == (y > 0.0) {
            f64::INFINITY
        } else {
            0.0
        };
    }
    let integer = y == y.trunc();
    let odd = integer && (y % 2.0).abs() == 1.0;
    if x < 0.0 && x.is_finite() && !integer {
        return f64::NAN;
    }
    let mag = if ax == 0.0 {
        if y < 0.0 { f64::INFINITY } else { 0.0 }
    } else if ax.is_infinite() {
        if y < 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        exp_f64(y * log_f64(ax))
    };
    if x.is_sign_negative() && odd {
        -mag
    } else {
        mag
    }
}

/// `1/√x` in binary64 (correctly rounded `sqrt`, then a division): rsqrt(+0) = +∞,
/// rsqrt(−0) = −∞, negative or NaN → NaN, rsqrt(∞) = 0.
pub fn rsqrt_f64(x: f64) -> f64 {
    if x == 0.0 {
        return if x.is_sign_negative() {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        };
    }
    1.0 / x.sqrt()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn rel(a: f64, b: f64) -> f64 {
        if a == b { 0.0 } else { ((a - b) / b).abs() }
    }

    #[test]
    fn log_matches_libm_to_a_few_binary64_ulps() {
        for &x in &[
            1e-300, 1e-10, 0.3, 0.7, 1.0, 1.5, 2.0, 10.0, 1e10, 1e300, 5e-324,
        ] {
            assert!(
                rel(log_f64(x), x.ln()) < 1e-15,
                "{x}: {} vs {}",
                log_f64(x),
                x.ln()
            );
        }
        assert_eq!(log_f64(1.0), 0.0);
        assert!(log_f64(-1.0).is_nan());
        assert_eq!(log_f64(0.0), f64::NEG_INFINITY);
    }

    #[test]
    fn erf_tails_are_relative() {
        // erfc(5) = 1.5374597944280348e-12, erfc(10) = 2.088487583762545e-45.
        assert!(rel(erfc_f64(5.0), 1.537_459_794_428_034_8e-12) < 1e-14);
        assert!(rel(erfc_f64(10.0), 2.088_487_583_762_545e-45) < 1e-14);
        assert!(rel(erf_f64(0.5), 0.520_499_877_813_046_5) < 1e-15);
        assert_eq!(erfc_f64(-40.0), 2.0);
        // Odd, signed zero included.
        assert_eq!(erf_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(erf_f64(0.0).to_bits(), 0);
    }

    #[test]
    fn pow_special_cases() {
        assert_eq!(pow_f64(f64::NAN, 0.0), 1.0);
        assert_eq!(pow_f64(1.0, f64::NAN), 1.0);
        assert_eq!(pow_f64(-2.0, 3.0) as f32, -8.0);
        assert!(pow_f64(-2.0, 0.5).is_nan());
        assert_eq!(pow_f64(f64::NEG_INFINITY, 2.5), f64::INFINITY);
        assert_eq!(pow_f64(f64::NEG_INFINITY, 3.0), f64::NEG_INFINITY);
        assert_eq!(
            pow_f64(f64::NEG_INFINITY, -3.0).to_bits(),
            (-0.0f64).to_bits()
        );
        assert_eq!(pow_f64(-0.0, -1.0), f64::NEG_INFINITY);
        assert_eq!(pow_f64(0.0, -2.0), f64::INFINITY);
        assert_eq!(pow_f64(-1.0, f64::INFINITY), 1.0);
        assert_eq!(pow_f64(0.5, f64::INFINITY), 0.0);
        assert!(rel(pow_f64(3.0, 2.0), 9.0) < 1e-15);
    }
}
