//! The TensorE matmul kernel: a fast GEMM (the `gemm` crate, through [`super::fast`]) where
//! the CPU has FMA and the tile takes the crate's main path; the rule's own fused kernel
//! ([`super::fused`], AVX + FMA) for the other shapes; the scalar loop where neither runs.

use std::sync::OnceLock;

use super::fast::{gemm, gemm_into};
use crate::engine::nan::canon;

/// The largest K the fast path takes. The `gemm` crate (0.19) splits K into blocks of at
/// least 512 (`kc = min(k, max(512, …))`); inside one block each output's accumulator runs
/// sequentially in k from +0.0. One `MultiplyMoving` has K ≤ 128, and [`gemm_follows_rule`]
/// checks at first use that no split happens up to this depth.
const GEMM_MAX_K: usize = 128;

/// Whether a `[k, m] × [k, n]` tile takes the crate's main (packed micro-kernel) path: `k ≥ 3`
/// and `m, n ≥ 2` (smaller tiles go to its vector–vector, matrix–vector or dot-product kernels,
/// whose accumulation order is not the rule's), and `k ≤` [`GEMM_MAX_K`].
fn gemm_eligible(k: usize, m: usize, n: usize) -> bool {
    (3..=GEMM_MAX_K).contains(&k) && m >= 2 && n >= 2
}

/// Whether this CPU executes fused multiply-adds in hardware, so the `gemm` crate's
/// micro-kernels fuse (where it has none they multiply, then add: not the rule).
pub(super) fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true // NEON's `fmla` is part of the base AArch64 ISA
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// `c[m][n] = Σ_k a[k][m] · b[k][n]` with `a` = `[k][m]` (stationary), `b` = `[k][n]` (moving),
/// `c` = `[m][n]`, all row-major binary32.
///
/// **The rule** (every CPU, every operand type): each output element is accumulated over k
/// **in increasing k order, starting from +0.0**, each step one **fused multiply-add**:
/// `acc ← fma(a·b + acc)`, the exact product added and the sum rounded once to binary32 (RNE,
/// gradual underflow, overflow to ±∞). A NaN result is the canonical NaN. IEEE-754 defines the
/// fused multiply-add exactly, so the bits are the same on every machine, whichever of the
/// paths below computes them; [`matmul_rule`] is the rule, literally.
///
/// **The fast path** (the `gemm` crate's GEMM) is taken for [`gemm_eligible`] shapes when the
/// CPU has FMA ([`cpu_has_fma`]) and the probes passed ([`gemm_follows_rule`]): its
/// micro-kernels zero one register accumulator per output, fused-multiply-add in increasing k
/// and store `1·acc`, which is the rule (the accumulator starts at +0, so a sum of zeros is
/// +0 as in the rule). Other shapes take [`super::fused`]'s kernel, and without AVX and FMA
/// the scalar loop.
///
/// `b`'s rows are `ldb ≥ n` elements apart (row `kk` is `b[kk·ldb..kk·ldb + n]`; `b` may end
/// right after the last row's `n`).
#[cfg(test)]
pub(crate) fn matmul_stationary(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) {
    matmul_stationary_any_nan(a, b, ldb, c, k, m, n);
    c.iter_mut().take(m * n).for_each(|x| *x = canon(*x));
}

/// [`matmul_stationary`] except that a NaN result may carry any payload: the caller
/// canonicalises as it stores the product (the engine, in its PSUM write, where an
/// accumulation canonicalises anyway), saving a pass over the tile.
pub(crate) fn matmul_stationary_any_nan(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) {
    let ldb = ldb.max(n);
    // `b`'s last row needs only its first `n` elements (a tile read in place ends there).
    let b_len = k.checked_sub(1).map_or(0, |last| last * ldb + n);
    let (Some(a), Some(b), Some(c)) = (a.get(..k * m), b.get(..b_len), c.get_mut(..m * n)) else {
        // Operands too short (callers never pass such): the product reads as zeros.
        c.iter_mut().take(m * n).for_each(|x| *x = 0.0);
        return;
    };
    if gemm_eligible(k, m, n) && gemm_follows_rule() && gemm(a, b, ldb, c, k, m, n) {
        return;
    }
    if super::fused::matmul(a, b, ldb, c, k, m, n) {
        return;
    }
    matmul_rule(a, b, ldb, c, k, m, n);
}

/// The product of `a` = `[k][m]` (stationary) and `b` = `[k][n]` (moving, rows `ldb ≥ n`
/// apart) stored into `c`'s first `m` rows (`ldc ≥ n` elements apart; elements between rows
/// untouched): added to what is there, one rounding, with `accumulate`, replacing it otherwise;
/// NaN results canonical. That is the engine's PSUM store of a product (`c + product` in
/// binary32, the product by [`matmul_stationary`]'s rule) done by the fast GEMM in one pass,
/// without a product buffer. `false`, touching nothing, where the fast GEMM does not take the
/// tile (shape, CPU or probes): the caller computes the product and stores it itself.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_store_fast(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    k: usize,
    m: usize,
    n: usize,
    accumulate: bool,
) -> bool {
    if !matmul_store_fast_any_nan(a, b, ldb, c, ldc, k, m, n, accumulate) {
        return false;
    }
    canon_rows(c, ldc, m, n);
    true
}

/// [`matmul_store_fast`] except that a NaN result may carry any payload: a caller that adds
/// more products to the same rows canonicalises once after the last ([`canon_rows`]); a NaN
/// stays a NaN through every later addition, so the bits are the same.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul_store_fast_any_nan(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    ldc: usize,
    k: usize,
    m: usize,
    n: usize,
    accumulate: bool,
) -> bool {
    gemm_eligible(k, m, n)
        && gemm_follows_rule()
        && gemm_into(a, b, ldb.max(n), c, ldc, k, m, n, accumulate)
}

/// Every NaN among the first `n` elements of `c`'s first `m` rows (`ldc` apart) made the
/// canonical NaN.
pub(crate) fn canon_rows(c: &mut [f32], ldc: usize, m: usize, n: usize) {
    const NAN: f32 = crate::engine::CANONICAL_NAN;
    for row in c.chunks_mut(ldc.max(1)).take(m) {
        let used = n.min(row.len());
        let row = &mut row[..used];
        // A read-only scan first (it vectorises); NaN results are rare.
        if row.iter().fold(false, |any, x| any | x.is_nan()) {
            row.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = NAN);
        }
    }
}

/// The rule, literally: `c[i][j] = fma(a_{k−1}, b_{k−1}, … fma(a0, b0, +0))`, each step
/// `f32::mul_add` (a correctly rounded fused multiply-add on every target: the instruction
/// where the CPU has one, the C library's `fmaf` otherwise), NaN results canonical. Loop order
/// k-i-j keeps each element's steps in increasing k.
/// `b`'s rows are `ldb` elements apart (`ldb ≥ n`).
pub(crate) fn matmul_rule(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) {
    let Some(c) = c.get_mut(..m * n) else { return };
    c.fill(0.0);
    for (arow, brow) in a
        .chunks_exact(m.max(1))
        .zip(b.chunks(ldb.max(n).max(1)))
        .take(k)
    {
        for (&av, crow) in arow.iter().zip(c.chunks_exact_mut(n.max(1))) {
            for (cv, &bv) in crow.iter_mut().zip(&brow[..n.min(brow.len())]) {
                *cv = av.mul_add(bv, *cv);
            }
        }
    }
    c.iter_mut().for_each(|x| *x = canon(*x));
}

/// Whether this build's GEMM computes the rule on this CPU, checked once per process: the CPU
/// has FMA ([`cpu_has_fma`]), and for each shape of [`PROBE_SHAPES`]
/// - the order probe: `[GEMM_MAX_K, m] × [GEMM_MAX_K, n]` products with exact products whose
///   sum depends on the order (one 1.0 per column, at a different depth each, among multiples
///   of 2^−24 that a running sum near 1 rounds away but a partial sum keeps) equal
///   [`matmul_rule`]'s bits, so a blocked, split or reordered accumulation fails it;
/// - the fusion probe ([`fusion_operands`]): a K = 3 product that is 2^−24 fused and 0 with a
///   separately rounded product equals the rule's bits, so a kernel that does not fuse fails it;
/// - the accumulation probe: the order probe's product stored with `accumulate` onto
///   prefilled rows with gaps gives `c + product` (one rounding) and leaves the gaps alone,
///   as [`matmul_store_fast`] relies on.
///
/// When it fails, every matmul takes [`super::fused`]'s kernel or the scalar loop.
pub(crate) fn gemm_follows_rule() -> bool {
    static FOLLOWS: OnceLock<bool> = OnceLock::new();
    *FOLLOWS.get_or_init(|| {
        let agrees = |(a, b): (Vec<f32>, Vec<f32>), k: usize, m: usize, n: usize, ldb: usize| {
            let (mut fast, mut slow) = (vec![0f32; m * n], vec![0f32; m * n]);
            gemm_eligible(k, m, n) && gemm(&a, &b, ldb, &mut fast, k, m, n) && {
                matmul_rule(&a, &b, ldb, &mut slow, k, m, n);
                fast.iter()
                    .zip(&slow)
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            }
        };
        // The accumulating store: `c` prefilled, rows `n + 3` apart; each element must become
        // `c + product` (the product from +0 by the rule, then one rounding), the gaps
        // untouched. A kernel that started its accumulator from `c` instead rounds the
        // probe's small terms away against the larger running sum and fails.
        let accumulates =
            |(a, b): (Vec<f32>, Vec<f32>), k: usize, m: usize, n: usize, ldb: usize| {
                let ldc = n + 3;
                let fill = |i: usize| 1.0 + (i % 5) as f32;
                let mut fast: Vec<f32> = (0..m * ldc).map(fill).collect();
                let mut product = vec![0f32; m * n];
                matmul_rule(&a, &b, ldb, &mut product, k, m, n);
                gemm_eligible(k, m, n)
                    && gemm_into(&a, &b, ldb, &mut fast, ldc, k, m, n, true)
                    && fast.iter().enumerate().all(|(idx, x)| {
                        let (i, j) = (idx / ldc, idx % ldc);
                        let want = if j < n {
                            fill(idx) + product[i * n + j]
                        } else {
                            fill(idx)
                        };
                        x.to_bits() == want.to_bits()
                    })
            };
        cpu_has_fma()
            && PROBE_SHAPES.iter().all(|&(m, n, ldb)| {
                agrees(probe_operands(m, n, ldb), GEMM_MAX_K, m, n, ldb)
                    && agrees(fusion_operands(m, n, ldb), 3, m, n, ldb)
                    && accumulates(probe_operands(m, n, ldb), GEMM_MAX_K, m, n, ldb)
            })
    })
}

/// `[3, m]` and `[3, n]` operands (`b`'s rows `ldb` apart) whose every output is 2^−24 when
/// each step is fused and +0 when products are rounded first: `(1 + 2^−12)·−(1 + 2^−12)`
/// is `−(1 + 2^−11 + 2^−24)`, which rounds (a tie, to even) to `−(1 + 2^−11)`; adding the
/// exact `(1 + 2^−12)²` leaves 2^−24, adding its rounding leaves 0; the third row is zeros.
fn fusion_operands(m: usize, n: usize, ldb: usize) -> (Vec<f32>, Vec<f32>) {
    let x = 1.0 + f32::from_bits(0x3980_0000); // 1 + 2^-12
    let a = [x, x, 0.0]
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, m))
        .collect();
    let b = [-x, x, 0.0]
        .iter()
        .flat_map(|&v| (0..ldb).map(move |j| if j < n { v } else { 0.0 }))
        .collect();
    (a, b)
}

/// `(m, n, ldb)` of the probes: 17 × 17 (two micro-kernel tiles and a masked edge each way,
/// the crate's small-matrix path) and 17 × 80 with padded moving rows (past 64 columns: its
/// cache-blocked path, which the engine's 128 × 512 tiles take, with their row stride).
const PROBE_SHAPES: [(usize, usize, usize); 2] = [(PROBE_M, PROBE_M, PROBE_M), (PROBE_M, 80, 96)];

/// Rows of the probe's stationary operand.
const PROBE_M: usize = 17;

/// The probe's `[GEMM_MAX_K, m]` and `[GEMM_MAX_K, n]` operands (see
/// [`gemm_follows_rule`]), `b`'s rows `ldb ≥ n` apart (zeros between).
fn probe_operands(m: usize, n: usize, ldb: usize) -> (Vec<f32>, Vec<f32>) {
    let k = GEMM_MAX_K;
    let tiny = f32::from_bits(0x3380_0000); // 2^-24
    let a = (0..k * m)
        .map(|idx| {
            let (kk, i) = (idx / m, idx % m);
            if kk == (i * 37) % k {
                1.0
            } else {
                tiny * (1 + (kk + i) % 3) as f32
            }
        })
        .collect();
    let b = (0..k * ldb)
        .map(|idx| {
            let (kk, j) = (idx / ldb, idx % ldb);
            if j < n {
                (1 + (kk * n + j) % 2) as f32
            } else {
                0.0
            }
        })
        .collect();
    (a, b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::engine::dtype::{DType, round_through};

    const QNAN: u32 = crate::engine::CANONICAL_NAN.to_bits();

    /// A 64-bit LCG.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            self.0 >> 16
        }
        /// ±(1 + f)·2^e, e uniform in `[e0, e1]`, about 1 in 10 zero; `f` has 23 random bits.
        fn value(&mut self, e0: i32, e1: i32) -> f32 {
            let r = self.next();
            if r % 10 == 0 {
                return 0.0;
            }
            let e = e0 + ((r >> 8) % (e1 - e0 + 1) as u64) as i32;
            let f = 1.0 + ((r >> 20) & 0x7F_FFFF) as f64 / 8_388_608.0;
            let v = (f * 2f64.powi(e)) as f32;
            if r & 0x10 != 0 { -v } else { v }
        }
    }

    /// The rule, written independently of `matmul_rule`: per output, `acc = fma(a, b, acc)`.
    fn rule(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![0u32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for kk in 0..k {
                    acc = a[kk * m + i].mul_add(b[kk * n + j], acc);
                }
                c[i * n + j] = canon(acc).to_bits();
            }
        }
        c
    }

    /// The same order with each product rounded before it is added (not the rule).
    fn unfused(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![0u32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for kk in 0..k {
                    let p = a[kk * m + i] * b[kk * n + j];
                    acc += p;
                }
                c[i * n + j] = canon(acc).to_bits();
            }
        }
        c
    }

    fn engine(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![f32::from_bits(0xFFC0_0001); m * n]; // garbage: β = 0 must ignore it
        matmul_stationary(a, b, n, &mut c, k, m, n);
        c.iter().map(|x| x.to_bits()).collect()
    }

    fn fast(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![f32::from_bits(0xFFC0_0001); m * n];
        assert!(gemm(a, b, n, &mut c, k, m, n));
        c.iter().map(|x| canon(*x).to_bits()).collect()
    }

    const SHAPES: [(usize, usize, usize); 8] = [
        (1, 1, 1),
        (2, 3, 5),
        (3, 8, 8),
        (5, 9, 17),
        (100, 17, 33),
        (127, 40, 70),
        (128, 64, 130),
        (128, 128, 512),
    ];

    /// Operands of `dtype` with exponents in `[e0, e1]`.
    fn operands(seed: u64, len: usize, dtype: DType, e0: i32, e1: i32) -> Vec<f32> {
        let mut r = Rng(seed);
        (0..len)
            .map(|_| round_through(dtype, r.value(e0, e1)))
            .collect()
    }

    #[test]
    fn every_path_gives_the_rules_bits() {
        // bf16 and fp16 operands have exact products (fused and unfused agree); fp32 ones
        // carry full significands, so their products round and the rule is observable.
        let cases = [
            (DType::Bf16, -63, 61),
            (DType::F16, -24, 14),
            (DType::F32, -50, 50),
        ];
        let mut observable = 0;
        for (dtype, e0, e1) in cases {
            for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
                let a = operands(2 * s as u64, k * m, dtype, e0, e1);
                let b = operands(2 * s as u64 + 1, k * n, dtype, e0, e1);
                let want = rule(&a, &b, k, m, n);
                // The crate's small-shape kernels (k ≤ 2, m or n = 1) accumulate in another
                // order: the engine keeps such tiles off the GEMM.
                if gemm_eligible(k, m, n) && cpu_has_fma() {
                    assert_eq!(fast(&a, &b, k, m, n), want, "GEMM {dtype} {k}x{m}x{n}");
                }
                assert_eq!(engine(&a, &b, k, m, n), want, "engine {dtype} {k}x{m}x{n}");
                let mut c = vec![0f32; m * n];
                matmul_rule(&a, &b, n, &mut c, k, m, n);
                let lit: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                assert_eq!(lit, want, "matmul_rule {dtype} {k}x{m}x{n}");
                if dtype == DType::F32 && unfused(&a, &b, k, m, n) != want {
                    observable += 1;
                }
            }
        }
        // Rounding the products first would give other bits on the fp32 tiles past K = 2.
        assert!(observable >= 5, "{observable}");
    }

    /// The fast store into PSUM rows (`ldc` apart) gives what the engine's store of the rule's
    /// product gives: `canon(c + product)` with `accumulate`, `canon(product)` without, and
    /// leaves the elements between rows alone; NaNs (∞ − ∞ across the accumulation, a NaN
    /// already there) come out canonical.
    #[test]
    fn the_fast_store_is_the_rules_product_stored() {
        if !(cpu_has_fma() && gemm_follows_rule()) {
            return; // nothing to compare: every tile takes the store of the rule's product
        }
        for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
            if !gemm_eligible(k, m, n) {
                let mut c = vec![0f32; m * n];
                let (a, b) = (vec![1f32; k * m], vec![1f32; k * n]);
                assert!(!matmul_store_fast(&a, &b, n, &mut c, n, k, m, n, true));
                continue;
            }
            let a = operands(70 + s as u64, k * m, DType::F32, -30, 30);
            let mut b = operands(80 + s as u64, k * n, DType::F32, -30, 30);
            b[0] = f32::INFINITY; // column 0 of every output row: ±∞ or NaN
            let product: Vec<u32> = rule(&a, &b, k, m, n);
            let ldc = n + 5;
            for accumulate in [false, true] {
                let mut r = Rng(90 + s as u64);
                let mut c: Vec<f32> = (0..m * ldc).map(|_| r.value(-30, 30)).collect();
                c[1] = f32::NEG_INFINITY;
                if n > 1 {
                    c[ldc + 1.min(n - 1)] = f32::from_bits(0x7FA0_0001); // a signalling NaN
                }
                let before = c.clone();
                assert!(matmul_store_fast(
                    &a, &b, n, &mut c, ldc, k, m, n, accumulate
                ));
                for (idx, (&x, &old)) in c.iter().zip(&before).enumerate() {
                    let (i, j) = (idx / ldc, idx % ldc);
                    let want = if i >= m || j >= n {
                        old.to_bits()
                    } else {
                        let p = f32::from_bits(product[i * n + j]);
                        canon(if accumulate { old + p } else { p }).to_bits()
                    };
                    assert_eq!(x.to_bits(), want, "{k}x{m}x{n} acc {accumulate} ({i}, {j})");
                }
            }
        }
    }

    /// The engine gathers moving rows with a padded stride: the bits do not depend on it, on
    /// any path.
    #[test]
    fn padded_moving_rows_give_the_same_bits() {
        for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
            for dtype in [DType::Bf16, DType::F32] {
                let a = operands(50 + s as u64, k * m, dtype, -20, 20);
                let b = operands(60 + s as u64, k * n, dtype, -20, 20);
                let want = rule(&a, &b, k, m, n);
                let ldb = n + 16;
                let padded: Vec<f32> = b
                    .chunks(n)
                    .flat_map(|row| row.iter().copied().chain([0.0; 16]))
                    .collect();
                let mut c = vec![f32::from_bits(0xFFC0_0001); m * n];
                matmul_stationary(&a, &padded, ldb, &mut c, k, m, n);
                let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "{dtype} {k}x{m}x{n}");
            }
        }
    }

    /// (name, K, M, N, a, b).
    type Tile = (&'static str, usize, usize, usize, Vec<f32>, Vec<f32>);

    /// Tiles whose products leave the normal range: subnormal products, overflowing products,
    /// subnormal inputs, and these mixed into ordinary values.
    fn extreme_tiles() -> Vec<Tile> {
        let p = |e: i32| 2f64.powi(e) as f32;
        let mut sub_in = operands(15, 32 * 4, DType::F32, -135, -127);
        sub_in[0] = f32::from_bits(0x0001_0000);
        let mut mixed = operands(17, 100 * 16, DType::F32, -5, 5);
        mixed[37] = p(-140);
        vec![
            // 2^-149 + 2^-150: the exact sum is a tie between 2^-149 and 2^-148, to even:
            // 2^-148 (rounding the product first would make it 0 and keep 2^-149).
            (
                "subnormal tie",
                2,
                1,
                1,
                vec![p(-75), p(-75)],
                vec![p(-74), p(-75)],
            ),
            // −1.5·2^127 + 1.5·2^128 = 1.5·2^127: the exact product never overflows alone.
            (
                "overflowing product",
                2,
                1,
                1,
                vec![-1.5 * p(64), 1.5 * p(64)],
                vec![p(63), p(64)],
            ),
            // 2^140 overflows to +∞, and ∞ − 2^140 stays +∞ (rounded products: ∞ − ∞ = NaN).
            (
                "overflow both ways",
                2,
                1,
                1,
                vec![p(70), -p(70)],
                vec![p(70), p(70)],
            ),
            (
                "random subnormal products",
                64,
                8,
                9,
                operands(11, 64 * 8, DType::F32, -80, -60),
                operands(12, 64 * 9, DType::F32, -80, -60),
            ),
            (
                "random overflowing products",
                64,
                8,
                9,
                operands(13, 64 * 8, DType::F32, 55, 75),
                operands(14, 64 * 9, DType::F32, 55, 75),
            ),
            (
                "subnormal inputs",
                32,
                4,
                4,
                sub_in,
                operands(16, 32 * 4, DType::F32, 60, 70),
            ),
            (
                "mixed",
                100,
                16,
                20,
                mixed,
                operands(18, 100 * 20, DType::F32, -5, 5),
            ),
        ]
    }

    #[test]
    fn extreme_exponents_follow_the_rule() {
        let mut observable = 0;
        for (name, k, m, n, a, b) in extreme_tiles() {
            let want = rule(&a, &b, k, m, n);
            assert_eq!(engine(&a, &b, k, m, n), want, "{name}");
            if gemm_eligible(k, m, n) && cpu_has_fma() {
                assert_eq!(fast(&a, &b, k, m, n), want, "GEMM {name}");
            }
            if unfused(&a, &b, k, m, n) != want {
                observable += 1;
            }
        }
        // The tiles discriminate: rounding products first gives other bits on most of them.
        assert!(
            observable >= 4,
            "only {observable} tiles tell fused from unfused"
        );
        // The crafted cases, by value.
        let p = |e: i32| 2f64.powi(e) as f32;
        assert_eq!(
            engine(&[p(-75), p(-75)], &[p(-74), p(-75)], 2, 1, 1),
            [p(-148).to_bits()]
        );
        let of = engine(&[-1.5 * p(64), 1.5 * p(64)], &[p(63), p(64)], 2, 1, 1);
        assert_eq!(of, [(1.5 * p(127)).to_bits()]);
        let inf = engine(&[p(70), -p(70)], &[p(70), p(70)], 2, 1, 1);
        assert_eq!(inf, [f32::INFINITY.to_bits()]);
    }

    #[test]
    fn the_probes_pass_here_and_catch_a_blocked_order_or_an_unfused_kernel() {
        assert_eq!(gemm_follows_rule(), cpu_has_fma());
        let (a, b) = probe_operands(PROBE_M, PROBE_M, PROBE_M);
        let (k, m) = (GEMM_MAX_K, PROBE_M);
        let want = rule(&a, &b, k, m, m);
        for block in [2, 8, 64, 100, 126] {
            // What a GEMM blocking K by `block` computes: block sums, added in order.
            let mut got = vec![0u32; m * m];
            for i in 0..m {
                for j in 0..m {
                    let mut c = 0f32;
                    for k0 in (0..k).step_by(block) {
                        let mut s = 0f32;
                        for kk in k0..(k0 + block).min(k) {
                            s = a[kk * m + i].mul_add(b[kk * m + j], s);
                        }
                        c += s;
                    }
                    got[i * m + j] = c.to_bits();
                }
            }
            assert_ne!(got, want, "a K block of {block} would go unnoticed");
        }
        // Two accumulators (even and odd k), and the reverse order.
        let mut split = vec![0u32; m * m];
        let mut rev = vec![0u32; m * m];
        for i in 0..m {
            for j in 0..m {
                let (mut e, mut o, mut r) = (0f32, 0f32, 0f32);
                for kk in 0..k {
                    if kk % 2 == 0 {
                        e = a[kk * m + i].mul_add(b[kk * m + j], e);
                    } else {
                        o = a[kk * m + i].mul_add(b[kk * m + j], o);
                    }
                    r = a[(k - 1 - kk) * m + i].mul_add(b[(k - 1 - kk) * m + j], r);
                }
                split[i * m + j] = (e + o).to_bits();
                rev[i * m + j] = r.to_bits();
            }
        }
        assert_ne!(split, want);
        assert_ne!(rev, want);
        // The fusion probe: 2^-24 under the rule, +0 with products rounded first.
        for &(m, n, ldb) in &PROBE_SHAPES {
            let (a, b) = fusion_operands(m, n, ldb);
            let mut c = vec![0f32; m * n];
            matmul_rule(&a, &b, ldb, &mut c, 3, m, n);
            assert!(c.iter().all(|x| x.to_bits() == 0x3380_0000), "{m}x{n}");
            let packed: Vec<f32> = b
                .chunks(ldb)
                .flat_map(|row| row[..n].iter().copied())
                .collect();
            assert!(unfused(&a, &packed, 3, m, n).iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn nan_and_infinity_through_the_matmul() {
        let inf = f32::INFINITY;
        let odd_nan = f32::from_bits(0xFF80_0001); // negative, signalling, with a payload
        // (a column, b column, expected) for a 1×1 output, K = 3.
        let cases: [([f32; 3], [f32; 3], u32); 8] = [
            ([1.0, odd_nan, 2.0], [1.0, 1.0, 1.0], QNAN),
            ([1.0, 2.0, 3.0], [1.0, odd_nan, 0.0], QNAN),
            ([inf, 1.0, 1.0], [0.0, 1.0, 1.0], QNAN),  // ∞·0
            ([inf, 1.0, 1.0], [1.0, -inf, 1.0], QNAN), // ∞ + (−∞)
            ([inf, 1.0, 1.0], [-2.0, 3.0, 4.0], (-inf).to_bits()), // −∞ + finite
            ([0.5, 1.0, 1.0], [inf, 3.0, 4.0], inf.to_bits()),
            ([-0.0, 0.0, -0.0], [1.0, -1.0, 1.0], 0), // +0 + −0 + … = +0
            ([f32::MAX, f32::MAX, 1.0], [1.0, 1.0, 1.0], inf.to_bits()), // sum overflow
        ];
        for (i, (a, b, want)) in cases.iter().enumerate() {
            assert_eq!(engine(a, b, 3, 1, 1), [*want], "case {i}");
            assert_eq!(rule(a, b, 3, 1, 1), [*want], "case {i} (reference)");
        }
        // A NaN or ±∞ inside a tile the GEMM takes: only the outputs whose dot product meets
        // it are NaN (or ±∞).
        let (k, m, n) = (64, 16, 24);
        let mut a = operands(40, k * m, DType::F32, -10, 10);
        let b = operands(41, k * n, DType::F32, -10, 10);
        a[5 * m + 3] = f32::from_bits(0xFFC1_0000); // a NaN with a payload: row 3
        a[9 * m + 7] = -inf; // row 7
        let got = engine(&a, &b, k, m, n);
        assert_eq!(got, rule(&a, &b, k, m, n));
        for j in 0..n {
            assert_eq!(got[3 * n + j], QNAN);
            assert!(!f32::from_bits(got[2 * n + j]).is_nan());
            assert!(f32::from_bits(got[7 * n + j]).is_infinite() || got[7 * n + j] == QNAN);
        }
    }
}
