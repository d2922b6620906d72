//! Deterministic arithmetic: activation functions built only from IEEE-754 `+ - * /` (no
//! platform `libm`, so every machine computes the same bits), and the TensorE matmul kernel.

use super::dtype::DType;

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
    let k = (x * LOG2E).round_ties_even();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Horner on the Taylor series of e^r, |r| <= 0.35.
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    let coeffs = [
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
    for c in coeffs {
        p = p * r + c;
    }
    scale_pow2(p, k as i32)
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
    if x < 0.0 { -t } else { t }
}

/// GELU, tanh approximation: `0.5·x·(1 + tanh(u))`, `u = √(2/π)·(x + 0.044715·x³)`, in
/// binary64, evaluated as the algebraically equal `x / (1 + e^(−2u))`, which does not cancel
/// in the negative tail.
pub fn gelu_f64(x: f64) -> f64 {
    const C: f64 = 0.797_884_560_802_865_4; // sqrt(2/pi)
    let u = C * (x + 0.044_715 * x * x * x);
    x / (1.0 + exp_f64(-2.0 * u))
}

/// Applies an activation to a binary32 argument: evaluated in binary64, rounded once to
/// binary32.
#[inline]
pub(crate) fn activation(func: super::isa::ActFunc, t: f32) -> f32 {
    use super::isa::ActFunc;
    match func {
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
    }
}

/// `c[m][n] = Σ_k a[k][m] · b[k][n]` with `a` = `[k][m]` (stationary), `b` = `[k][n]` (moving),
/// `c` = `[m][n]`, all row-major binary32.
///
/// Every output element is the sum over k **in increasing k order, starting from +0.0**, each
/// product rounded to binary32 and each addition rounded to binary32. For bf16/fp16 operands
/// (`exact_products`) every product is exact in binary32, so fused and unfused multiply-add
/// give the same bits and the work goes to the `matrixmultiply` GEMM (whose kernels accumulate
/// each element sequentially in k within a 256-deep block; K here is at most 128). For fp32
/// operands the products round, so a plain loop with separate multiply and add is used.
pub(crate) fn matmul_kmajor(
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
    dtype: DType,
) {
    let exact_products = matches!(dtype, DType::Bf16 | DType::F16);
    if a.len() < k * m || b.len() < k * n || c.len() < m * n {
        // Operands too short (callers never pass such): the product reads as zeros.
        c.iter_mut().take(m * n).for_each(|x| *x = 0.0);
        return;
    }
    if exact_products && k <= 256 && gemm_exact(a, b, c, k, m, n) {
        return;
    }
    gemm_loop(a, b, c, k, m, n);
}

/// The reference order: `c[i][j] = ((0 + a0·b0) + a1·b1) + …` over k.
pub(crate) fn gemm_loop(a: &[f32], b: &[f32], c: &mut [f32], k: usize, m: usize, n: usize) {
    c[..m * n].fill(0.0);
    for kk in 0..k {
        let arow = &a[kk * m..kk * m + m];
        let brow = &b[kk * n..kk * n + n];
        for (i, &av) in arow.iter().enumerate() {
            let crow = &mut c[i * n..i * n + n];
            for (cv, &bv) in crow.iter_mut().zip(brow) {
                *cv += av * bv;
            }
        }
    }
}

/// `matrixmultiply` through ndarray's safe API (β = 0, α = 1: the kernel's per-element
/// accumulator is written out unchanged). Returns `false` if the views cannot be formed.
fn gemm_exact(a: &[f32], b: &[f32], c: &mut [f32], k: usize, m: usize, n: usize) -> bool {
    use ndarray::{ArrayView2, ArrayViewMut2};
    let (Ok(av), Ok(bv), Ok(mut cv)) = (
        ArrayView2::from_shape((k, m), &a[..k * m]),
        ArrayView2::from_shape((k, n), &b[..k * n]),
        ArrayViewMut2::from_shape((m, n), &mut c[..m * n]),
    ) else {
        return false;
    };
    ndarray::linalg::general_mat_mul(1.0, &av.t(), &bv, 0.0, &mut cv);
    true
}
