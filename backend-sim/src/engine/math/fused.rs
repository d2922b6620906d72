//! The matmul rule, vectorised: `c[i][j] = fma(a_{k−1}, b_{k−1}, … fma(a1, b1, fma(a0, b0, +0)))`
//! over k in increasing order, every step one fused multiply-add (one rounding) — exactly
//! [`super::matmul::matmul_rule`]'s bits (NaN canonicalisation aside, which the caller does),
//! at register-blocked speed, for the shapes the `gemm` crate's main path does not take
//! (K ≤ 2, a single row or column: its vector and dot-product kernels accumulate in another
//! order) and wherever its order probe fails.
//!
//! The micro-kernel keeps a 6 × 16 block of outputs in twelve AVX registers, walks k in
//! increasing order, and per k broadcasts six stationary values against two 8-wide moving
//! vectors (one `vfmadd` each), both operands packed into contiguous panels first. A fused
//! multiply-add is one IEEE operation per lane, so the bits are the same at any vector width,
//! on any CPU that has the instruction. A last block of fewer than six rows runs the same loop
//! with fewer rows; a last panel of fewer than sixteen columns is packed to 8 or 16 with zeros
//! and stored through a lane mask. Without AVX and FMA (or off x86-64) [`matmul`] declines and
//! the caller runs the scalar rule loop (`f32::mul_add`, correctly rounded everywhere).
//!
//! The crate's second `unsafe` module (with `fast.rs`): raw-pointer SIMD loads and stores, over
//! slices whose bounds [`matmul`] checks once before any access.
#![allow(unsafe_code)]

/// `c[i][j] = Σ_k a[k][i] · b[k][j]` in the rule's order and rounding (no canonicalisation of
/// NaN results), `a` = `[k][m]`, `b` = `[k][·]` with rows `ldb ≥ n` apart, `c` = `[m][n]`, all
/// row-major. Every element of `c[..m·n]` is written. Returns `false`, touching nothing, when
/// this CPU has no AVX or no FMA, the target is not x86-64, or an operand is shorter than its
/// shape.
pub(super) fn matmul(
    a: &[f32],
    b: &[f32],
    ldb: usize,
    c: &mut [f32],
    k: usize,
    m: usize,
    n: usize,
) -> bool {
    if ldb < n || m == 0 || n == 0 {
        return false;
    }
    let (Some(km), Some(mn)) = (k.checked_mul(m), m.checked_mul(n)) else {
        return false;
    };
    // The last row of `b` needs only its first `n` elements.
    let b_len = match k.checked_sub(1) {
        None => 0,
        Some(last) => match last.checked_mul(ldb).and_then(|x| x.checked_add(n)) {
            Some(len) => len,
            None => return false,
        },
    };
    if a.len() < km || b.len() < b_len || c.len() < mn {
        return false;
    }
    x86::run(a, b, ldb, &mut c[..mn], k, m, n)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use core::arch::x86_64::{
        __m256, __m256i, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps,
        _mm256_maskstore_ps, _mm256_setr_epi32, _mm256_setzero_ps, _mm256_storeu_ps,
    };
    use std::cell::RefCell;

    /// Rows per micro-tile: 6 × 2 accumulators + 2 moving vectors + 1 broadcast = 15 of the
    /// 16 AVX registers.
    const MR: usize = 6;

    thread_local! {
        /// Packing buffers, kept between calls: the stationary operand by row block, and one
        /// moving column panel.
        static PACKED: RefCell<(Vec<f32>, Vec<f32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }

    /// See [`super::matmul`]; the bounds are checked there.
    ///
    /// Both operands are packed first, so the micro-kernel streams through contiguous memory:
    /// their rows are `m` and `ldb` elements apart, typically 512 bytes, which would put a
    /// tile's 128 rows into a handful of L1 sets and evict them as fast as they are used.
    /// `a` becomes its row blocks one after another (block `i..i + r`: `[k][r]`); each moving
    /// panel of 16 (or 8) columns becomes `[k][16]` (`[k][8]`), a last partial panel padded
    /// with zeros whose products are computed and never stored.
    pub(super) fn run(
        a: &[f32],
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
        k: usize,
        m: usize,
        n: usize,
    ) -> bool {
        if !(std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            return false;
        }
        PACKED.with(|bufs| {
            let Ok(mut bufs) = bufs.try_borrow_mut() else {
                return false;
            };
            let (ap, bp) = &mut *bufs;
            pack_stationary(ap, &a[..k * m], k, m);
            let mut j = 0;
            while j < n {
                let w = if n - j >= 16 { 16 } else { (n - j).min(8) };
                let width = if w > 8 { 16 } else { 8 };
                pack_moving(bp, b, ldb, j, k, w, width);
                let cj = &mut c[j..];
                // SAFETY: AVX and FMA are present (checked above); `ap` holds `k·m` elements (every
                // row block, `k·r` each), `bp` holds `k·width`, and `cj` holds at least
                // `(m − 1)·n + w` elements (`c` holds `m·n`, `j + w ≤ n`); `panel` reads and
                // writes only those.
                unsafe {
                    if width == 16 {
                        panel::<2>(ap.as_ptr(), bp.as_ptr(), cj.as_mut_ptr(), k, m, n, w);
                    } else {
                        panel::<1>(ap.as_ptr(), bp.as_ptr(), cj.as_mut_ptr(), k, m, n, w);
                    }
                }
                j += w;
            }
            true
        })
    }

    /// `a` (`[k][m]`) as its blocks of [`MR`] rows one after another, each `[k][r]`. Full
    /// blocks copy fixed-size groups (no call per group); a last partial block element-wise.
    fn pack_stationary(ap: &mut Vec<f32>, a: &[f32], k: usize, m: usize) {
        // Every element is written below: only a grown buffer is filled first.
        ap.resize(k * m, 0.0);
        let mut o = 0;
        let mut i0 = 0;
        while i0 < m {
            let r = MR.min(m - i0);
            let block = &mut ap[o..o + k * r];
            if r == MR {
                for (d, row) in block.chunks_exact_mut(MR).zip(a.chunks_exact(m)) {
                    let s = row.get(i0..i0 + MR).map(<&[f32; MR]>::try_from);
                    if let (Ok(d), Some(Ok(s))) = (<&mut [f32; MR]>::try_from(d), s) {
                        *d = *s;
                    }
                }
            } else {
                for (d, row) in block.chunks_exact_mut(r).zip(a.chunks_exact(m)) {
                    d.copy_from_slice(&row[i0..i0 + r]);
                }
            }
            o += k * r;
            i0 += r;
        }
    }

    /// Columns `j..j + w` of `b`'s first `k` rows as `[k][width]`, zero-padded to `width`.
    fn pack_moving(
        bp: &mut Vec<f32>,
        b: &[f32],
        ldb: usize,
        j: usize,
        k: usize,
        w: usize,
        width: usize,
    ) {
        // Every element is written below (a partial panel's padding as zeros): only a grown
        // buffer is filled first.
        bp.resize(k * width, 0.0);
        if w == 16 {
            for (kk, d) in bp.chunks_exact_mut(16).enumerate() {
                let s = b
                    .get(kk * ldb + j..kk * ldb + j + 16)
                    .map(<&[f32; 16]>::try_from);
                if let (Ok(d), Some(Ok(s))) = (<&mut [f32; 16]>::try_from(d), s) {
                    *d = *s;
                }
            }
        } else {
            for (kk, d) in bp.chunks_exact_mut(width).enumerate() {
                let (head, pad) = d.split_at_mut(w);
                head.copy_from_slice(&b[kk * ldb + j..kk * ldb + j + w]);
                pad.fill(0.0);
            }
        }
    }

    /// One packed column panel (`8·NV` columns of which the first `w` are stored) over every
    /// row block.
    ///
    /// # Safety
    /// AVX and FMA present; `a` packed as in [`run`] (`k·m` elements), `b` packed `[k][8·NV]`, `c`
    /// writable at `c[i·ldc + l]` for `i < m`, `l < w`.
    #[target_feature(enable = "avx,fma")]
    unsafe fn panel<const NV: usize>(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        k: usize,
        m: usize,
        ldc: usize,
        w: usize,
    ) {
        let full = w == 8 * NV;
        // Lane l is active when its mask element's sign bit is set (`w ≤ 8` when partial).
        let lane = |l: usize| if l < w { -1 } else { 0 };
        let mask = _mm256_setr_epi32(
            lane(0),
            lane(1),
            lane(2),
            lane(3),
            lane(4),
            lane(5),
            lane(6),
            lane(7),
        );
        let mut i = 0;
        // SAFETY: row block `i..i + rows` is within `0..m`; its packed stationary values
        // start at `i·k`.
        unsafe {
            while i + MR <= m {
                let (ai, ci) = (a.add(i * k), c.add(i * ldc));
                if full {
                    tile::<MR, NV>(ai, b, ci, ldc, k, None);
                } else {
                    tile::<MR, 1>(ai, b, ci, ldc, k, Some(mask));
                }
                i += MR;
            }
            let (ai, ci) = (a.add(i * k), c.add(i * ldc));
            macro_rules! rest {
                ($($r:literal)*) => {
                    match m - i {
                        $($r => if full {
                            tile::<$r, NV>(ai, b, ci, ldc, k, None)
                        } else {
                            tile::<$r, 1>(ai, b, ci, ldc, k, Some(mask))
                        },)*
                        _ => {}
                    }
                };
            }
            rest!(1 2 3 4 5);
        }
    }

    /// `R` rows × `8·NV` columns (with `mask`: `NV = 1`, only the mask's lanes stored): the
    /// accumulators start at +0.0 and take `fma(a, b, acc)` for k = 0, 1, … in order.
    ///
    /// # Safety
    /// `a[kk·R + r]` and `b[kk·8·NV + l]` readable for `kk < k`, `r < R`, `l < 8·NV`;
    /// `c[r·ldc + l]` writable for the stored lanes.
    #[inline(always)]
    unsafe fn tile<const R: usize, const NV: usize>(
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        k: usize,
        mask: Option<__m256i>,
    ) {
        // SAFETY: the offsets stay within the ranges the caller guarantees.
        unsafe {
            let mut acc: [[__m256; NV]; R] = [[_mm256_setzero_ps(); NV]; R];
            for kk in 0..k {
                let bp = b.add(kk * 8 * NV);
                let mut bv = [_mm256_setzero_ps(); NV];
                for (v, x) in bv.iter_mut().enumerate() {
                    *x = _mm256_loadu_ps(bp.add(8 * v));
                }
                let ap = a.add(kk * R);
                for (r, row) in acc.iter_mut().enumerate() {
                    let av = _mm256_broadcast_ss(&*ap.add(r));
                    for (x, &bx) in row.iter_mut().zip(&bv) {
                        *x = _mm256_fmadd_ps(av, bx, *x);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                let cp = c.add(r * ldc);
                for (v, &x) in row.iter().enumerate() {
                    match mask {
                        Some(mk) => _mm256_maskstore_ps(cp, mk, x),
                        None => _mm256_storeu_ps(cp.add(8 * v), x),
                    }
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod x86 {
    /// Not x86-64: the caller runs the scalar rule loop.
    pub(super) fn run(
        _: &[f32],
        _: &[f32],
        _: usize,
        _: &mut [f32],
        _: usize,
        _: usize,
        _: usize,
    ) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::matmul;

    /// The rule written out per element, independently of the engine's code.
    fn reference(a: &[f32], b: &[f32], ldb: usize, k: usize, m: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0f32;
                for kk in 0..k {
                    acc = a[kk * m + i].mul_add(b[kk * ldb + j], acc);
                }
                c[i * n + j] = acc;
            }
        }
        c
    }

    /// Bits, with every NaN read as one NaN (the caller canonicalises).
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter()
            .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
            .collect()
    }

    /// Values with full 24-bit significands over a wide exponent range, so products round
    /// and order matters, plus zeros of both signs, subnormals, infinities and NaN.
    fn values(seed: u64, len: usize, specials: bool) -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let r = s >> 16;
                if specials {
                    match r % 97 {
                        0 => return -0.0,
                        1 => return f32::from_bits(1 + (r as u32 & 0xFF)),
                        2 => return f32::INFINITY,
                        3 => return f32::NAN,
                        _ => {}
                    }
                }
                let e = (r >> 8) % 40;
                let v = f32::from_bits((((e as u32) + 107) << 23) | ((r >> 20) as u32 & 0x7F_FFFF));
                if r & 0x10 != 0 { -v } else { v }
            })
            .collect()
    }

    #[test]
    fn every_tail_and_stride_gives_the_rules_bits() {
        if !cfg!(target_arch = "x86_64")
            || !std::arch::is_x86_feature_detected!("avx")
            || !std::arch::is_x86_feature_detected!("fma")
        {
            // The kernel declines there (checked below); the scalar rule runs instead.
            assert!(!matmul(&[1.0], &[1.0], 1, &mut [0.0], 1, 1, 1));
            return;
        }
        let mut seed = 1;
        for &k in &[0usize, 1, 2, 5, 64, 128, 131] {
            for m in (1..=14).chain([64, 128]) {
                for &n in &[1usize, 3, 7, 8, 9, 15, 16, 17, 24, 31, 40, 512] {
                    if k * m * n > 2_000_000 {
                        continue;
                    }
                    for &(pad, specials) in &[(0usize, false), (5, true)] {
                        seed += 1;
                        let ldb = n + pad;
                        let a = values(seed, k * m, specials);
                        // Only `(k−1)·ldb + n` elements: the last row's padding is absent.
                        let b = values(seed ^ 0xABCD, (k.max(1) - 1) * ldb + n, specials);
                        let mut c = vec![f32::from_bits(0x7FC0_1234); m * n + 3];
                        assert!(matmul(&a, &b, ldb, &mut c, k, m, n), "{k}x{m}x{n}");
                        let want = reference(&a, &b, ldb, k, m, n);
                        assert_eq!(bits(&c[..m * n]), bits(&want), "{k}x{m}x{n} ldb {ldb}");
                        // Nothing past `m·n` is written.
                        assert!(c[m * n..].iter().all(|x| x.to_bits() == 0x7FC0_1234));
                    }
                }
            }
        }
    }

    #[test]
    fn short_operands_and_empty_shapes_are_declined_untouched() {
        let mut c = [7.0f32; 4];
        assert!(!matmul(&[1.0; 3], &[1.0; 4], 2, &mut c, 2, 2, 2)); // a needs 4
        assert!(!matmul(&[1.0; 4], &[1.0; 3], 2, &mut c, 2, 2, 2)); // b needs 4
        assert!(!matmul(&[1.0; 4], &[1.0; 4], 2, &mut c[..3], 2, 2, 2)); // c needs 4
        assert!(!matmul(&[1.0; 4], &[1.0; 4], 1, &mut c, 2, 2, 2)); // ldb < n
        assert!(!matmul(&[], &[], 1, &mut c, 1, 0, 1)); // m = 0
        assert!(!matmul(&[1.0; 4], &[1.0; 4], 2, &mut c, usize::MAX, 2, 2)); // overflow
        assert_eq!(c, [7.0; 4]);
    }
}
