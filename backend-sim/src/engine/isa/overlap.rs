//! Exact intersection tests of strided sets of integers — the bytes of a footprint in one
//! partition, or its partitions — used by [`super::Footprint::overlaps`].
//!
//! A set is a [`Pattern`]: `base + Σ_d k_d·stride_d + e` for `k_d < count_d`, `e < run` (every
//! stride positive, the dimensions in any order, outermost first by convention). Two sets meet
//! when they share an element. The tests, cheapest first:
//!
//! * bounding intervals apart: no;
//! * (in [`super::Footprint`], before [`meet`]) residues modulo the GCD of both sets' strides
//!   apart: no;
//! * both sets at most one dimension ([`meet_1d`], every DMA footprint and every access pattern
//!   whose dimensions merge into one): exact in O(log stride) — the runs of one set that lie in
//!   the other's bounding interval are `K` consecutive indices, and run `k` meets the other set
//!   iff `(y₀ + k·s) mod t < L` (`t` the other's stride, `L` the sum of the run lengths minus
//!   one), counted over all `k` at once by two floor sums (`Σ ⌊(a·i + b)/m⌋`, Euclid-like);
//! * otherwise ([`meet`]) the set with more dimensions is split along its outermost dimension
//!   into the sub-blocks whose bounding intervals meet the other set's, recursively, down to
//!   one-dimensional pairs. A sub-block starting inside a plain interval meets it at once. When
//!   every dimension's stride spans the dimensions inside it (*nested* patterns: every view of a
//!   row-major tile) the sub-blocks are disjoint and ordered, so the recursion visits
//!   O((N_a + N_b)·depth) pairs, `N` the number of one-dimensional rows of a set;
//! * a recursion that exceeds `8·(N_a + N_b) + 64` visits (overlapping dimensions that do not
//!   merge, on both sides) stops, and both sets' runs inside the common bounding interval are
//!   listed, sorted and swept: O(R log R), `R` runs, at most the product of the counts (an
//!   access pattern's free size, ≤ 65,536). Sets of more than [`SWEEP_RUNS`] runs finish the
//!   recursion instead (never an engine footprint).
//!
//! Every bound assumes elements below 2^62 (the footprint constructor's limit), so products
//! of two of them fit in `u128`.

/// One dimension of a [`Pattern`]: `count` steps of `stride`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Step {
    /// Number of steps (≥ 1).
    pub(crate) count: u64,
    /// Distance between steps (≥ 1).
    pub(crate) stride: u64,
}

/// The set `base + Σ k_d·stride_d + [0, run)` over `dims`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pattern<'a> {
    pub(crate) base: u64,
    pub(crate) dims: &'a [Step],
    pub(crate) run: u64,
}

/// Most runs per set the sweep lists (beyond, the recursion runs to the end).
pub(crate) const SWEEP_RUNS: u64 = 1 << 18;

/// Distance from the first element of a set to one past its last.
pub(crate) fn extent(dims: &[Step], run: u64) -> u64 {
    dims.iter().fold(run, |e, d| {
        e.saturating_add(d.count.saturating_sub(1).saturating_mul(d.stride))
    })
}

/// A one-dimensional set: `count` runs of `run` elements, `stride` apart, from `base`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lin {
    pub(crate) base: u64,
    pub(crate) count: u64,
    pub(crate) stride: u64,
    pub(crate) run: u64,
}

impl Lin {
    fn end(&self) -> u64 {
        self.base
            .saturating_add(self.count.saturating_sub(1).saturating_mul(self.stride))
            .saturating_add(self.run)
    }

    /// The same set, as one run when its runs touch or overlap.
    fn solid(self) -> Lin {
        if self.count <= 1 || self.stride <= self.run {
            Lin {
                base: self.base,
                count: 1,
                stride: 1,
                run: self.end() - self.base,
            }
        } else {
            self
        }
    }
}

/// The indices `k` of the runs `[base + k·stride, base + k·stride + len)`, `k < count`, that
/// meet `[lo, hi)`, as an inclusive range (`None`: none).
fn runs_meeting(
    base: u64,
    count: u64,
    stride: u64,
    len: u64,
    lo: u64,
    hi: u64,
) -> Option<(u64, u64)> {
    if count == 0 || base >= hi || stride == 0 {
        return None;
    }
    // Smallest k with base + k·stride + len > lo.
    let k_lo = match lo.checked_sub(base.saturating_add(len)) {
        Some(d) => d / stride + 1,
        None => 0,
    };
    // Largest k with base + k·stride < hi.
    let k_hi = ((hi - base - 1) / stride).min(count - 1);
    (k_lo <= k_hi).then_some((k_lo, k_hi))
}

/// `Σ_{i<n} ⌊(a·i + b)/m⌋` modulo 2^128 (`m ≥ 1`; the Euclid-like reduction of the AtCoder
/// library's `floor_sum`). Exact while `a, b, m < 2^62` and `n < 2^64`; a difference of two
/// such sums that is below 2^128 is then exact too.
fn floor_sum(n: u64, m: u64, a: u64, b: u64) -> u128 {
    let (mut n, mut m, mut a, mut b) = (u128::from(n), u128::from(m), u128::from(a), u128::from(b));
    let mut ans = 0u128;
    if m == 0 {
        return 0;
    }
    loop {
        if n == 0 {
            return ans;
        }
        if a >= m {
            let tri = n.wrapping_mul(n - 1) / 2;
            ans = ans.wrapping_add(tri.wrapping_mul(a / m));
            a %= m;
        }
        if b >= m {
            ans = ans.wrapping_add(n.wrapping_mul(b / m));
            b %= m;
        }
        // a, b < m, so y_max < m·(n + 1): no overflow under the stated bounds.
        let y_max = a.wrapping_mul(n).wrapping_add(b);
        if y_max < m {
            return ans;
        }
        n = y_max / m;
        b = y_max % m;
        core::mem::swap(&mut m, &mut a);
    }
}

/// Whether two one-dimensional sets share an element. O(log stride).
pub(crate) fn meet_1d(a: Lin, b: Lin) -> bool {
    let (a, b) = (a.solid(), b.solid());
    if a.run == 0 || b.run == 0 || a.base >= b.end() || b.base >= a.end() {
        return false;
    }
    // `b` is the periodic side; a plain interval, if any, is `a`.
    let (a, b) = if b.count == 1 { (b, a) } else { (a, b) };
    if b.count == 1 {
        return true; // two intervals whose bounds meet
    }
    let Some((k_lo, k_hi)) = runs_meeting(a.base, a.count, a.stride, a.run, b.base, b.end()) else {
        return false;
    };
    // Run k of `a`, [x, x + ra) with x = a.base + k·s, meets run j of `b` iff
    // x - b.base + ra - 1 - j·t ∈ [0, L), L = ra + rb - 1. Inside b's bounding interval only
    // runs 0..count of b's periodic extension can meet it, so run k meets b iff
    // (y₀ + (k - k_lo)·s) mod t < L, y₀ = a.base + k_lo·s + ra - 1 - b.base ≥ 0.
    let (s, t) = (a.stride, b.stride);
    let l = a.run + b.run - 1;
    if l >= t {
        return true;
    }
    let y0 = a.base + k_lo * s + a.run - 1 - b.base;
    let n = k_hi - k_lo + 1;
    // [y mod t < L] = ⌊y/t⌋ - ⌊(y - L)/t⌋ for 0 < L ≤ t; both shifted by t to stay ≥ 0.
    let hits = floor_sum(n, t, s, y0 + t).wrapping_sub(floor_sum(n, t, s, y0 + t - l));
    hits != 0
}

/// Number of one-dimensional rows of a set (the product of all counts but the innermost).
fn rows(p: &Pattern<'_>) -> u64 {
    match p.dims.split_last() {
        Some((_, outer)) => outer.iter().fold(1u64, |n, d| n.saturating_mul(d.count)),
        None => 1,
    }
}

/// Whether two sets share an element (see the module docs for the method and its cost).
pub(crate) fn meet(a: Pattern<'_>, b: Pattern<'_>) -> bool {
    let mut budget = rows(&a)
        .saturating_add(rows(&b))
        .saturating_mul(8)
        .saturating_add(64);
    if let Some(r) = meet_rec(a, b, &mut budget) {
        return r;
    }
    if let Some(r) = sweep(a, b) {
        return r;
    }
    let mut unlimited = u64::MAX;
    meet_rec(a, b, &mut unlimited).unwrap_or(true)
}

fn lin(p: &Pattern<'_>) -> Lin {
    match p.dims.first() {
        Some(d) => Lin {
            base: p.base,
            count: d.count,
            stride: d.stride,
            run: p.run,
        },
        None => Lin {
            base: p.base,
            count: 1,
            stride: 1,
            run: p.run,
        },
    }
}

/// The recursion of [`meet`]; `None` when `budget` visits did not settle it.
fn meet_rec(a: Pattern<'_>, b: Pattern<'_>, budget: &mut u64) -> Option<bool> {
    let a_end = a.base.saturating_add(extent(a.dims, a.run));
    let b_end = b.base.saturating_add(extent(b.dims, b.run));
    if a.run == 0 || b.run == 0 || a.base >= b_end || b.base >= a_end {
        return Some(false);
    }
    if a.dims.len() <= 1 && b.dims.len() <= 1 {
        return Some(meet_1d(lin(&a), lin(&b)));
    }
    *budget = budget.checked_sub(1)?;
    // Split the set with more dimensions (of two alike, the coarser) along its outermost one.
    let split_b = b.dims.len() > a.dims.len()
        || (b.dims.len() == a.dims.len()
            && b.dims.first().map(|d| d.stride) > a.dims.first().map(|d| d.stride));
    let (x, y, y_end) = if split_b {
        (b, a, a_end)
    } else {
        (a, b, b_end)
    };
    let (d, inner) = x.dims.split_first()?;
    let inner_extent = extent(inner, x.run);
    let Some((k_lo, mut k_hi)) =
        runs_meeting(x.base, d.count, d.stride, inner_extent, y.base, y_end)
    else {
        return Some(false);
    };
    if y.dims.is_empty() {
        // A sub-block holds its first element: one starting inside the interval `y` meets it.
        let k_in = y
            .base
            .checked_sub(x.base)
            .map_or(0, |gap| gap.div_ceil(d.stride))
            .max(k_lo);
        if k_in <= k_hi {
            return Some(true);
        }
        // Otherwise only sub-blocks starting before the interval can meet it.
        k_hi = k_hi.min(k_in.checked_sub(1)?);
    }
    for k in k_lo..=k_hi {
        let sub = Pattern {
            base: x.base + k * d.stride,
            dims: inner,
            run: x.run,
        };
        if meet_rec(sub, y, budget)? {
            return Some(true);
        }
    }
    Some(false)
}

/// Appends the runs of `p` that meet `[lo, hi)`, clipped to it; `false` when more than `cap`.
fn runs_in(p: Pattern<'_>, lo: u64, hi: u64, cap: usize, out: &mut Vec<(u64, u64)>) -> bool {
    let Some((d, inner)) = p.dims.split_first() else {
        let (s, e) = (p.base.max(lo), p.base.saturating_add(p.run).min(hi));
        if s < e {
            if out.len() >= cap {
                return false;
            }
            out.push((s, e));
        }
        return true;
    };
    let Some((k_lo, k_hi)) = runs_meeting(p.base, d.count, d.stride, extent(inner, p.run), lo, hi)
    else {
        return true;
    };
    (k_lo..=k_hi).all(|k| {
        let sub = Pattern {
            base: p.base + k * d.stride,
            dims: inner,
            run: p.run,
        };
        runs_in(sub, lo, hi, cap, out)
    })
}

/// Both sets' runs inside the common bounding interval, sorted and swept; `None` when a set
/// has more than [`SWEEP_RUNS`] there.
fn sweep(a: Pattern<'_>, b: Pattern<'_>) -> Option<bool> {
    let lo = a.base.max(b.base);
    let hi = a
        .base
        .saturating_add(extent(a.dims, a.run))
        .min(b.base.saturating_add(extent(b.dims, b.run)));
    if lo >= hi {
        return Some(false);
    }
    let cap = SWEEP_RUNS as usize;
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    if !runs_in(a, lo, hi, cap, &mut ra) || !runs_in(b, lo, hi, cap, &mut rb) {
        return None;
    }
    ra.sort_unstable();
    rb.sort_unstable();
    let (mut i, mut j) = (0, 0);
    while let (Some(&(s0, e0)), Some(&(s1, e1))) = (ra.get(i), rb.get(j)) {
        if s0 < e1 && s1 < e0 {
            return Some(true);
        }
        // Drop the run that ends first: it meets nothing later on the other side.
        if e0 <= e1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn brute_floor_sum(n: u64, m: u64, a: u64, b: u64) -> u128 {
        (0..n).map(|i| u128::from((a * i + b) / m)).sum()
    }

    #[test]
    fn floor_sum_matches_the_sum() {
        for n in 0..12 {
            for m in 1..9 {
                for a in 0..20 {
                    for b in 0..20 {
                        assert_eq!(floor_sum(n, m, a, b), brute_floor_sum(n, m, a, b));
                    }
                }
            }
        }
        // Near the limits: values below 2^62, many terms.
        let big = (1u64 << 62) - 12345;
        let brute = |n: u64, m: u64, a: u64, b: u64| -> u128 {
            (0..n)
                .map(|i| (u128::from(a) * u128::from(i) + u128::from(b)) / u128::from(m))
                .sum()
        };
        for (n, m, a, b) in [
            (3, big, big - 1, 5),
            (1000, big, big / 3 + 7, big - 1),
            (777, 3, big, big),
            (5000, big / 7919, big / 104_729, 1),
        ] {
            assert_eq!(floor_sum(n, m, a, b), brute(n, m, a, b), "{n} {m} {a} {b}");
        }
    }

    fn set(p: Pattern<'_>) -> Vec<u64> {
        let mut v = Vec::new();
        let mut runs = Vec::new();
        runs_in(p, 0, u64::MAX, usize::MAX, &mut runs);
        for (s, e) in runs {
            v.extend(s..e);
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn one_dimension_against_enumeration() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..20_000 {
            let mut l = || Lin {
                base: rnd(60),
                count: 1 + rnd(8),
                stride: 1 + rnd(12),
                run: 1 + rnd(5),
            };
            let (a, b) = (l(), l());
            let da = [Step {
                count: a.count,
                stride: a.stride,
            }];
            let db = [Step {
                count: b.count,
                stride: b.stride,
            }];
            let pa = Pattern {
                base: a.base,
                dims: &da,
                run: a.run,
            };
            let pb = Pattern {
                base: b.base,
                dims: &db,
                run: b.run,
            };
            let (sa, sb) = (set(pa), set(pb));
            let want = sa.iter().any(|x| sb.binary_search(x).is_ok());
            assert_eq!(meet_1d(a, b), want, "{a:?} {b:?}");
            assert_eq!(sweep(pa, pb), Some(want), "{a:?} {b:?}");
        }
    }

    #[test]
    fn every_path_agrees_with_enumeration() {
        let mut seed = 0xD1B5_4A32_D192_ED03u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut pats = Vec::new();
        for _ in 0..300 {
            let nd = rnd(4) as usize;
            let mut dims: Vec<Step> = (0..nd)
                .map(|_| Step {
                    count: 1 + rnd(6),
                    stride: 1 + rnd(40),
                })
                .collect();
            dims.sort_by_key(|d| core::cmp::Reverse(d.stride));
            pats.push((rnd(50), dims, 1 + rnd(4)));
        }
        let (mut budget_hit, mut met) = (0, 0);
        for (i, (ba, da, ra)) in pats.iter().enumerate() {
            for (bb, db, rb) in &pats[i..] {
                let a = Pattern {
                    base: *ba,
                    dims: da,
                    run: *ra,
                };
                let b = Pattern {
                    base: *bb,
                    dims: db,
                    run: *rb,
                };
                let (sa, sb) = (set(a), set(b));
                let want = sa.iter().any(|x| sb.binary_search(x).is_ok());
                met += usize::from(want);
                assert_eq!(meet(a, b), want, "{a:?} {b:?}");
                assert_eq!(meet(b, a), want, "{b:?} {a:?}");
                assert_eq!(meet_rec(a, b, &mut u64::MAX.clone()), Some(want));
                assert_eq!(sweep(a, b), Some(want), "{a:?} {b:?}");
                let mut small = 2;
                match meet_rec(a, b, &mut small) {
                    Some(r) => assert_eq!(r, want),
                    None => budget_hit += 1,
                }
            }
        }
        assert!(budget_hit > 1000 && met > 5000, "{budget_hit} {met}");
    }

    #[test]
    fn large_one_dimensional_sets() {
        let l = |base, count, stride, run| Lin {
            base,
            count,
            stride,
            run,
        };
        let rows = l(0, 1 << 30, 1 << 20, 8);
        assert!(!meet_1d(rows, l((12345 << 20) + 8, 1, 1, 4)));
        assert!(meet_1d(rows, l((12345 << 20) + 7, 1, 1, 1)));
        assert!(!meet_1d(rows, l(1 << 50, 1, 1, 1)), "past the last row");
        // Multiples of 6 against 10·j + 3 (odd): never; against 10·j + 2: at 12.
        let sixes = l(0, 1 << 40, 6, 1);
        assert!(!meet_1d(sixes, l(3, 1 << 40, 10, 1)));
        assert!(meet_1d(sixes, l(2, 1 << 40, 10, 1)));
        // ... and from far away: 6k = 10^12 + 4 + 10j first at j = 1 (10^12 ≡ 4 mod 6).
        assert!(!meet_1d(sixes, l(1_000_000_000_004, 1, 10, 1)));
        assert!(meet_1d(sixes, l(1_000_000_000_004, 2, 10, 1)));
        // Runs of 3 every 7 against runs of 2 every 11 from 4: (11j + 4 + {0, 1}) mod 7 < 3
        // first at j = 1 (15 = 2·7 + 1).
        let a = l(0, 1000, 7, 3);
        assert!(!meet_1d(a, l(4, 1, 11, 2)), "4, 5");
        assert!(meet_1d(a, l(4, 2, 11, 2)), "15 = 2·7 + 1");
    }
}
