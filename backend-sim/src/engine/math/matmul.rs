//! The TensorE matmul kernel: a fast GEMM (the `gemm` crate, through [`super::fast`]) for
//! the tiles where it provably gives the rule's bits on every CPU, with or without FMA; for
//! the others, the rule's own register-blocked unfused kernel ([`super::unfused`], AVX), or the
//! scalar loop where that is unavailable.

use std::sync::OnceLock;

use super::fast::gemm;
use crate::engine::nan::canon;

/// The largest K the fast path takes. The `gemm` crate (0.19) splits K into blocks of at
/// least 512 (`kc = min(k, max(512, …))`); inside one block each output's accumulator runs
/// sequentially in k from +0.0. One `MultiplyMoving` has K ≤ 128, and [`gemm_is_sequential`]
/// checks at first use that no split happens up to this depth.
const GEMM_MAX_K: usize = 128;

/// Whether a `[k, m] × [k, n]` tile takes the crate's main (packed micro-kernel) path: `k ≥ 3`
/// and `m, n ≥ 2` (smaller tiles go to its vector–vector, matrix–vector or dot-product kernels,
/// whose accumulation order is not the rule's), and `k ≤` [`GEMM_MAX_K`].
fn gemm_eligible(k: usize, m: usize, n: usize) -> bool {
    (3..=GEMM_MAX_K).contains(&k) && m >= 2 && n >= 2
}

/// `c[m][n] = Σ_k a[k][m] · b[k][n]` with `a` = `[k][m]` (stationary), `b` = `[k][n]` (moving),
/// `c` = `[m][n]`, all row-major binary32.
///
/// **The rule** (every CPU, every operand type): each output element is the sum over k **in
/// increasing k order, starting from +0.0**; each product `a·b` is rounded to binary32 (RNE,
/// gradual underflow, overflow to ±∞), then added with one more rounding — a separate multiply
/// and add, never fused. A NaN result is the canonical NaN. [`matmul_rule`] is that rule,
/// literally.
///
/// **The fast path** (the `gemm` crate's GEMM, which fuses the multiply-add where the CPU has
/// FMA) is taken only for [`gemm_eligible`] shapes and only when [`in_exact_window`] holds for
/// both operands, so every product `a·b` of the tile is exactly representable in binary32.
/// Then the product's rounding is the
/// identity, so fused `R(s + a·b)` and unfused `R(s + R(a·b))` are the same operation, and the
/// GEMM's per-element sequential order from +0.0 is the rule's order. The accumulator never
/// becomes −0 (it starts at +0; RNE gives +0 for an exact zero sum, and the sum of two binary32
/// values is never a nonzero value that rounds to zero), so the kernel's final store `1·s`
/// gives `s`; and with finite products no NaN can arise. The operands'
/// element type is not consulted: the decision rests on the values.
///
/// `a_exact` is [`in_exact_window`] of the stationary operand, checked once when it was
/// loaded: of a slice that contains `a[..k·m]` (every part of a slice in the window is in it,
/// so a whole-load check holds for any `k` rows of it).
///
/// `b`'s rows are `ldb ≥ n` elements apart (row `kk` is `b[kk·ldb..kk·ldb + n]`; `b` may end
/// right after the last row's `n`), and `b_exact` is [`in_exact_window`] of the elements of
/// its `k` rows (the engine checks each moving tile once and reuses the answer while its
/// memory is unchanged).
#[allow(clippy::too_many_arguments)] // the GEMM's shape, operands, stride and window checks
#[cfg(test)]
pub(crate) fn matmul_stationary(
    a: &[f32],
    a_exact: bool,
    b: &[f32],
    b_exact: bool,
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) {
    matmul_stationary_any_nan(a, a_exact, b, b_exact, ldb, c, k, m, n);
    c.iter_mut().take(m * n).for_each(|x| *x = canon(*x));
}

/// [`matmul_stationary`] except that a NaN result may carry any payload: the caller
/// canonicalises as it stores the product (the engine, in its PSUM write, where an
/// accumulation canonicalises anyway), saving a pass over the tile.
#[allow(clippy::too_many_arguments)] // the GEMM's shape, operands, stride and window checks
pub(crate) fn matmul_stationary_any_nan(
    a: &[f32],
    a_exact: bool,
    b: &[f32],
    b_exact: bool,
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
    if gemm_eligible(k, m, n)
        && a_exact
        && b_exact
        && gemm_is_sequential()
        && gemm(a, b, ldb, c, k, m, n)
    {
        return;
    }
    if super::unfused::matmul(a, b, ldb, c, k, m, n) {
        return;
    }
    matmul_rule(a, b, ldb, c, k, m, n);
}

/// The rule, literally: `c[i][j] = ((+0 + R(a0·b0)) + R(a1·b1)) + …` over k, every operation
/// rounded to binary32 (Rust never fuses `s + a * b`), NaN results canonical. Loop order k-i-j
/// keeps each element's additions in increasing k.
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
                *cv += av * bv;
            }
        }
    }
    c.iter_mut().for_each(|x| *x = canon(*x));
}

/// Whether every element of `v` is ±0 or a normal value of magnitude in [2^−63, 2^63) whose
/// significand has at most 12 bits (the low 12 of its 23 fraction bits are zero — true of every
/// bf16 and every fp16 value). A product of two such values is ±0 or has at most 24
/// significant bits and a magnitude in [2^−126, 2^126): exactly representable in binary32. Every
/// finite fp16 value passes, and every bf16 value in the window; ±∞, NaN and subnormals do
/// not. One branch-free pass of integer compares and ORs, which vectorises.
pub(crate) fn in_exact_window(v: &[f32]) -> bool {
    const LO: i32 = 64 << 23; // 2^-63
    const HI: i32 = 190 << 23; // 2^63
    // `mag + i32::MAX` maps 0 to i32::MAX and 1.. to i32::MIN.., so one signed compare finds
    // 0 < mag < LO.
    const SMALL: i32 = (LO - 1).wrapping_add(i32::MIN);
    let (mut out, mut bits) = (0u32, 0u32);
    for x in v {
        let b = x.to_bits();
        let mag = (b & 0x7FFF_FFFF) as i32;
        out |= u32::from((mag.wrapping_add(i32::MAX) < SMALL) | (mag >= HI));
        bits |= b;
    }
    out == 0 && bits & 0xFFF == 0
}

/// [`in_exact_window`] of `rows` rows of `n` elements, `ld` apart in `v` (a tile read in
/// place); `false` when `v` is too short.
pub(crate) fn in_exact_window_rows(v: &[f32], ld: usize, rows: usize, n: usize) -> bool {
    (0..rows).all(|r| v.get(r * ld..r * ld + n).is_some_and(in_exact_window))
}

/// Whether this build's GEMM accumulates sequentially in k up to [`GEMM_MAX_K`], checked once
/// per process: `[GEMM_MAX_K, m] × [GEMM_MAX_K, n]` products (for each shape of
/// [`PROBE_SHAPES`]) with exact products whose sum depends on the order (one 1.0 per column,
/// at a different depth each, among multiples of 2^−24 that a running sum near 1 rounds away
/// but a partial sum keeps) must equal [`matmul_rule`]'s bits. A blocked, split or reordered
/// accumulation fails it, and every matmul then takes the scalar path.
pub(crate) fn gemm_is_sequential() -> bool {
    static SEQUENTIAL: OnceLock<bool> = OnceLock::new();
    *SEQUENTIAL.get_or_init(|| {
        PROBE_SHAPES.iter().all(|&(m, n, ldb)| {
            let (a, b) = probe_operands(m, n, ldb);
            let k = GEMM_MAX_K;
            let (mut fast, mut slow) = (vec![0f32; m * n], vec![0f32; m * n]);
            gemm_eligible(k, m, n) && gemm(&a, &b, ldb, &mut fast, k, m, n) && {
                matmul_rule(&a, &b, ldb, &mut slow, k, m, n);
                fast.iter()
                    .zip(&slow)
                    .all(|(x, y)| x.to_bits() == y.to_bits())
            }
        })
    })
}

/// `(m, n, ldb)` of the probes: 17 × 17 (two micro-kernel tiles and a masked edge each way,
/// the crate's small-matrix path) and 17 × 80 with padded moving rows (past 64 columns: its
/// cache-blocked path, which the engine's 128 × 512 tiles take, with their row stride).
const PROBE_SHAPES: [(usize, usize, usize); 2] = [(PROBE_M, PROBE_M, PROBE_M), (PROBE_M, 80, 96)];

/// Rows of the probe's stationary operand.
const PROBE_M: usize = 17;

/// The probe's `[GEMM_MAX_K, m]` and `[GEMM_MAX_K, n]` operands (see
/// [`gemm_is_sequential`]), `b`'s rows `ldb ≥ n` apart (zeros between).
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
        /// ±(1 + f)·2^e, e uniform in `[e0, e1]`, about 1 in 10 zero.
        fn value(&mut self, e0: i32, e1: i32) -> f32 {
            let r = self.next();
            if r % 10 == 0 {
                return 0.0;
            }
            let e = e0 + ((r >> 8) % (e1 - e0 + 1) as u64) as i32;
            let f = 1.0 + ((r >> 20) & 0xFFFF) as f64 / 65536.0;
            let v = (f * 2f64.powi(e)) as f32;
            if r & 0x10 != 0 { -v } else { v }
        }
    }

    /// The rule, written independently of `matmul_rule`: per output, `acc = acc + a·b`.
    fn rule(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
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

    /// The same order with every step a correctly rounded fused multiply-add.
    fn fused(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
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

    fn engine(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![f32::from_bits(0xFFC0_0001); m * n]; // garbage: β = 0 must ignore it
        matmul_stationary(
            a,
            in_exact_window(a),
            b,
            in_exact_window(b),
            n,
            &mut c,
            k,
            m,
            n,
        );
        c.iter().map(|x| x.to_bits()).collect()
    }

    fn fast(a: &[f32], b: &[f32], k: usize, m: usize, n: usize) -> Vec<u32> {
        let mut c = vec![f32::from_bits(0xFFC0_0001); m * n];
        assert!(gemm(a, b, n, &mut c, k, m, n));
        c.iter().map(|x| canon(*x).to_bits()).collect()
    }

    fn exact(a: &[f32], b: &[f32]) -> bool {
        in_exact_window(a) && in_exact_window(b)
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

    /// Operands of `dtype` with exponents in `[e0, e1]`; `fp32` ones carry 12-bit significands.
    fn operands(seed: u64, len: usize, dtype: DType, e0: i32, e1: i32) -> Vec<f32> {
        let mut r = Rng(seed);
        (0..len)
            .map(|_| {
                let v = r.value(e0, e1);
                match dtype {
                    DType::F32 => f32::from_bits(v.to_bits() & !0xFFF),
                    d => round_through(d, v),
                }
            })
            .collect()
    }

    #[test]
    fn fast_path_gives_the_rules_bits_on_normal_range_inputs() {
        // The window is [2^-63, 2^63): bf16 up to 2^61·(1 + f) (2^62·1.99… rounds to 2^63);
        // fp16 up to 2^14·(1 + f) (2^15·1.99… would round to ∞).
        let cases = [
            (DType::Bf16, -63, 61),
            (DType::F16, -24, 14),
            (DType::F32, -50, 50),
        ];
        for (dtype, e0, e1) in cases {
            for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
                let a = operands(2 * s as u64, k * m, dtype, e0, e1);
                let b = operands(2 * s as u64 + 1, k * n, dtype, e0, e1);
                assert!(exact(&a, &b), "{dtype} {k}x{m}x{n} must take the fast path");
                let want = rule(&a, &b, k, m, n);
                // The crate's small-shape kernels (k ≤ 2, m or n = 1) start from the first
                // product, not +0 (they give −0 for the 2×3×5 tile's cancelling sums): the
                // engine keeps such tiles off the GEMM.
                if gemm_eligible(k, m, n) {
                    assert_eq!(fast(&a, &b, k, m, n), want, "GEMM {dtype} {k}x{m}x{n}");
                }
                assert_eq!(engine(&a, &b, k, m, n), want, "engine {dtype} {k}x{m}x{n}");
            }
        }
    }

    /// The engine gathers moving rows with a padded stride: the bits do not depend on it, on
    /// either path.
    #[test]
    fn padded_moving_rows_give_the_same_bits() {
        for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
            for dtype in [DType::Bf16, DType::F32] {
                let a = operands(50 + s as u64, k * m, dtype, -20, 20);
                let mut b = operands(60 + s as u64, k * n, dtype, -20, 20);
                if dtype == DType::F32 {
                    // Full significands: the scalar path.
                    b.iter_mut().for_each(|x| *x *= 1.000_000_1);
                }
                let want = rule(&a, &b, k, m, n);
                let ldb = n + 16;
                let padded: Vec<f32> = b
                    .chunks(n)
                    .flat_map(|row| row.iter().copied().chain([0.0; 16]))
                    .collect();
                let mut c = vec![f32::from_bits(0xFFC0_0001); m * n];
                let (ea, eb) = (in_exact_window(&a), in_exact_window(&padded));
                matmul_stationary(&a, ea, &padded, eb, ldb, &mut c, k, m, n);
                let got: Vec<u32> = c.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "{dtype} {k}x{m}x{n}");
            }
        }
    }

    #[test]
    fn full_precision_fp32_takes_the_scalar_rule() {
        for (s, &(k, m, n)) in SHAPES.iter().enumerate() {
            let mut r = Rng(100 + s as u64);
            let a: Vec<f32> = (0..k * m).map(|_| r.value(-3, 3)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| r.value(-3, 3)).collect();
            if a.iter().chain(&b).any(|x| x.to_bits() & 0xFFF != 0) {
                assert!(!exact(&a, &b));
            }
            assert_eq!(engine(&a, &b, k, m, n), rule(&a, &b, k, m, n));
        }
        // Such products round, so the rule is observable: fused gives other bits here.
        let mut r = Rng(7);
        let a: Vec<f32> = (0..64 * 8).map(|_| r.value(-3, 3)).collect();
        let b: Vec<f32> = (0..64 * 8).map(|_| r.value(-3, 3)).collect();
        assert_ne!(rule(&a, &b, 64, 8, 8), fused(&a, &b, 64, 8, 8));
    }

    /// (name, K, M, N, a, b).
    type Tile = (&'static str, usize, usize, usize, Vec<f32>, Vec<f32>);

    /// Tiles whose products leave the exact range: subnormal products, overflowing products,
    /// subnormal inputs, and these mixed into ordinary values. Each must be routed to the
    /// scalar path and give the rule's bits.
    fn extreme_tiles() -> Vec<Tile> {
        let p = |e: i32| 2f64.powi(e) as f32;
        let mut t = Vec::new();
        // 2^-149 + R(2^-150): the rule rounds the product to 0 (tie to even) and keeps 2^-149;
        // fused rounds the tie of the sum to 2^-148.
        t.push((
            "subnormal tie",
            2,
            1,
            1,
            vec![p(-75), p(-75)],
            vec![p(-74), p(-75)],
        ));
        // −1.5·2^127 + 1.5·2^128: the rule's product overflows to +∞; fused gives 1.5·2^127.
        t.push((
            "overflowing product",
            2,
            1,
            1,
            vec![-1.5 * p(64), 1.5 * p(64)],
            vec![p(63), p(64)],
        ));
        // +∞ and −∞ products: NaN under the rule.
        t.push((
            "overflow both ways",
            2,
            1,
            1,
            vec![p(70), -p(70)],
            vec![p(70), p(70)],
        ));
        let bf = |v: Vec<f32>| -> Vec<f32> {
            v.into_iter()
                .map(|x| round_through(DType::Bf16, x))
                .collect()
        };
        t.push((
            "random subnormal products",
            64,
            8,
            9,
            bf(operands(11, 64 * 8, DType::Bf16, -80, -60)),
            bf(operands(12, 64 * 9, DType::Bf16, -80, -60)),
        ));
        t.push((
            "random overflowing products",
            64,
            8,
            9,
            bf(operands(13, 64 * 8, DType::Bf16, 55, 75)),
            bf(operands(14, 64 * 9, DType::Bf16, 55, 75)),
        ));
        // bf16 subnormal inputs times large values: normal products, but the check rejects
        // subnormal inputs outright.
        let mut a = bf(operands(15, 32 * 4, DType::Bf16, -135, -127));
        a[0] = f32::from_bits(0x0001_0000);
        t.push((
            "subnormal inputs",
            32,
            4,
            4,
            a,
            bf(operands(16, 32 * 4, DType::Bf16, 60, 70)),
        ));
        // One extreme element among ordinary ones.
        let mut a = operands(17, 100 * 16, DType::Bf16, -5, 5);
        let b = operands(18, 100 * 20, DType::Bf16, -5, 5);
        a[37] = p(-140);
        t.push(("mixed", 100, 16, 20, a, b));
        t
    }

    #[test]
    fn extreme_exponents_follow_the_rule() {
        let mut observable = 0;
        for (name, k, m, n, a, b) in extreme_tiles() {
            assert!(!exact(&a, &b), "{name}: must leave the fast path");
            let want = rule(&a, &b, k, m, n);
            assert_eq!(engine(&a, &b, k, m, n), want, "{name}");
            if fused(&a, &b, k, m, n) != want {
                observable += 1;
            }
        }
        // The tiles discriminate: fused arithmetic gives other bits on most of them.
        assert!(
            observable >= 4,
            "only {observable} tiles tell fused from unfused"
        );
        // The two crafted cases, by value.
        let p = |e: i32| 2f64.powi(e) as f32;
        assert_eq!(
            engine(&[p(-75), p(-75)], &[p(-74), p(-75)], 2, 1, 1),
            [p(-149).to_bits()]
        );
        let of = engine(&[-1.5 * p(64), 1.5 * p(64)], &[p(63), p(64)], 2, 1, 1);
        assert_eq!(of, [f32::INFINITY.to_bits()]);
    }

    /// Where the CPU has FMA, the GEMM fuses: on the extreme tiles it gives the fused bits,
    /// which is why those tiles must not reach it.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_gemm_fuses_where_the_cpu_has_fma() {
        if !(std::arch::is_x86_feature_detected!("fma")
            && std::arch::is_x86_feature_detected!("avx2"))
        {
            return;
        }
        let mut differs = 0;
        for (name, k, m, n, a, b) in extreme_tiles() {
            if !gemm_eligible(k, m, n) {
                continue; // the 1×1 tiles: the crate's dot-product kernel, never called
            }
            let f = fast(&a, &b, k, m, n);
            assert_eq!(f, fused(&a, &b, k, m, n), "{name}");
            if f != rule(&a, &b, k, m, n) {
                differs += 1;
            }
        }
        // The random subnormal- and overflowing-product tiles (the subnormal-input tile has
        // exact products; in the mixed tile the one tiny product is absorbed either way).
        assert!(differs >= 2, "{differs}");
    }

    #[test]
    fn the_order_probe_passes_here_and_catches_a_blocked_order() {
        assert!(gemm_is_sequential());
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
                            s += a[kk * m + i] * b[kk * m + j];
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
                    let p = a[kk * m + i] * b[kk * m + j];
                    if kk % 2 == 0 {
                        e += p
                    } else {
                        o += p
                    }
                    r += a[(k - 1 - kk) * m + i] * b[(k - 1 - kk) * m + j];
                }
                split[i * m + j] = (e + o).to_bits();
                rev[i * m + j] = r.to_bits();
            }
        }
        assert_ne!(split, want);
        assert_ne!(rev, want);
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
        // A NaN or ±∞ inside an otherwise fast tile sends it to the scalar path: only the
        // outputs whose dot product meets it are NaN (or ±∞).
        let (k, m, n) = (64, 16, 24);
        let mut a = operands(40, k * m, DType::Bf16, -10, 10);
        let b = operands(41, k * n, DType::Bf16, -10, 10);
        assert!(exact(&a, &b));
        a[5 * m + 3] = f32::from_bits(0xFFC1_0000); // a bf16 NaN with a payload: row 3
        a[9 * m + 7] = -inf; // row 7
        assert!(!exact(&a, &b));
        let got = engine(&a, &b, k, m, n);
        assert_eq!(got, rule(&a, &b, k, m, n));
        for j in 0..n {
            assert_eq!(got[3 * n + j], QNAN);
            assert!(!f32::from_bits(got[2 * n + j]).is_nan());
            assert!(f32::from_bits(got[7 * n + j]).is_infinite() || got[7 * n + j] == QNAN);
        }
    }
}
