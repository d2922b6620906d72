//! Functional effects of the format-1.1 reductions: `TensorReduce` (a left fold from the first
//! element, in the access pattern's order), `BnStats` / `BnAggr` (two-pass statistics, then
//! Chan's pairwise aggregation, each step one binary32 operation in a fixed order), `Max8` and
//! `FindIndex8`. Every result is reproducible bit for bit.

use super::Executor;
use super::effects::{all_int, gather_f32, gather_i32, mem, mem_mut, scatter_f32, scatter_i32};
use crate::engine::isa::{AluOp, Instr, max_num};
use crate::engine::nan::{CANONICAL_NAN, canon};

impl Executor<'_, '_> {
    /// Applies `TensorReduce`, `BnStats`, `BnAggr`, `Max8` or `FindIndex8`.
    pub(super) fn apply_reduce(&mut self, ins: Instr) {
        let sbuf = &mut *self.env.sbuf;
        let psum = &mut *self.env.psum;
        match ins {
            Instr::TensorReduce {
                op,
                src,
                out,
                negate,
                ..
            } => {
                let f = src.free_elems() as usize;
                let kept = (out.free_elems() as usize).max(1);
                let group = (f / kept).max(1);
                if all_int(&[src.dtype, out.dtype]) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    let r: Vec<i32> = x
                        .chunks(group)
                        .map(|g| {
                            let v = g
                                .iter()
                                .skip(1)
                                .fold(g.first().copied().unwrap_or(0), |a, &b| op.apply_i32(a, b));
                            if negate { v.wrapping_neg() } else { v }
                        })
                        .collect();
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &r);
                } else {
                    let mut x = Vec::new();
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    let r: Vec<f32> = x
                        .chunks(group)
                        .map(|g| {
                            let first = canon(g.first().copied().unwrap_or(0.0));
                            let rest = g.iter().skip(1);
                            // The common folds with the operation fixed (`eval_f32`'s arms),
                            // the rest through it.
                            let v = match op {
                                AluOp::Add => rest.fold(first, |a, &b| canon(a + b)),
                                AluOp::Max => rest.fold(first, |a, &b| max_num(a, b)),
                                _ => rest.fold(first, |a, &b| op.eval_f32(a, b)),
                            };
                            if negate {
                                AluOp::Mul.eval_f32(v, -1.0)
                            } else {
                                v
                            }
                        })
                        .collect();
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &r);
                }
            }
            Instr::BnStats { src, out } => {
                let f = src.free_elems() as usize;
                let mut x = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let mut r = Vec::with_capacity(usize::from(out.partitions) * 6);
                for row in x.chunks(f.max(1)) {
                    r.extend(moments_even_odd(row));
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &r);
            }
            Instr::BnAggr { src, out } => {
                let f = src.free_elems() as usize;
                let mut x = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let mut r = Vec::with_capacity(usize::from(out.partitions) * 2);
                for row in x.chunks(f.max(1)) {
                    let (mean, var) = aggregate(row);
                    r.extend([mean, var]);
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &r);
            }
            Instr::Max8 { src, out } => {
                let f = src.free_elems() as usize;
                let mut x = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let mut r = Vec::with_capacity(usize::from(out.partitions) * 8);
                for row in x.chunks(f.max(1)) {
                    r.extend(top8(row));
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &r);
            }
            Instr::FindIndex8 { data, vals, out } => {
                let f = data.free_elems() as usize;
                let (mut x, mut v) = (Vec::new(), Vec::new());
                gather_f32(mem(sbuf, psum, data.space), &data, &mut x);
                gather_f32(mem(sbuf, psum, vals.space), &vals, &mut v);
                let mut r = Vec::with_capacity(usize::from(out.partitions) * 8);
                let mut claimed = vec![false; f];
                for (row, want) in x.chunks(f.max(1)).zip(v.chunks(8)) {
                    claimed.fill(false);
                    for &w in want {
                        let hit = row
                            .iter()
                            .zip(claimed.iter())
                            .position(|(&d, &c)| !c && d == w);
                        r.push(match hit {
                            Some(i) => {
                                if let Some(c) = claimed.get_mut(i) {
                                    *c = true;
                                }
                                i as i32
                            }
                            None => -1,
                        });
                    }
                }
                scatter_i32(mem_mut(sbuf, psum, out.space), &out, &r);
            }
            _ => {}
        }
    }
}

/// `(count, mean, count·variance)` of the even-indexed elements of `row`, then of the
/// odd-indexed ones, in binary32, each in two passes in order: the sum from +0 divided by the
/// count, then the sum from +0 of the squared deviations. No element: (0, 0, 0). Both parities
/// are summed in the same pass over the row (each sum still in its own element order); the
/// count is what counting up by 1.0 in binary32 gives (it stops at 2²⁴).
fn moments_even_odd(row: &[f32]) -> [f32; 6] {
    let pairs = row.chunks_exact(2);
    let last = pairs.remainder().first().copied();
    let (mut s0, mut s1) = (0.0f32, 0.0f32);
    for c in pairs.clone() {
        s0 += c[0];
        s1 += c[1];
    }
    if let Some(x) = last {
        s0 += x;
    }
    let count = |k: usize| k.min(1 << 24) as f32;
    let (n0, n1) = (count(row.len().div_ceil(2)), count(row.len() / 2));
    let (m0, m1) = (s0 / n0, s1 / n1);
    let (mut q0, mut q1) = (0.0f32, 0.0f32);
    for c in pairs {
        let (d0, d1) = (c[0] - m0, c[1] - m1);
        q0 += d0 * d0;
        q1 += d1 * d1;
    }
    if let Some(x) = last {
        let d0 = x - m0;
        q0 += d0 * d0;
    }
    let one = |n: f32, m: f32, q: f32| {
        if n == 0.0 {
            [0.0, 0.0, 0.0]
        } else {
            [n, canon(m), canon(q)]
        }
    };
    let (a, b) = (one(n0, m0, q0), one(n1, m1, q1));
    [a[0], a[1], a[2], b[0], b[1], b[2]]
}

/// Mean and (population) variance from `(count, mean, count·variance)` triples, folded left to
/// right with Chan's update: for a group `(c, m, v)` joining `(n, mean, M2)`,
/// `n' = n + c`, `δ = m − mean`, `mean' = mean + δ·(c/n')`, `M2' = (M2 + v) + (δ·δ)·((n·c)/n')`.
/// Groups whose count is not above 0 are skipped; with none left the result is NaN.
fn aggregate(row: &[f32]) -> (f32, f32) {
    let (mut n, mut mean, mut m2) = (0.0f32, 0.0f32, 0.0f32);
    for g in row.chunks_exact(3) {
        let (c, m, v) = (g[0], g[1], g[2]);
        if c.is_nan() || c <= 0.0 {
            continue;
        }
        if n == 0.0 {
            (n, mean, m2) = (c, m, v);
            continue;
        }
        let nn = n + c;
        let delta = m - mean;
        mean += delta * (c / nn);
        m2 = (m2 + v) + (delta * delta) * ((n * c) / nn);
        n = nn;
    }
    if n == 0.0 {
        return (CANONICAL_NAN, CANONICAL_NAN);
    }
    (canon(mean), canon(m2 / n))
}

/// Rank of a value for `Max8`: NaN above +∞, then IEEE total order (−0 below +0).
fn rank(v: f32) -> i64 {
    if v.is_nan() {
        return i64::MAX;
    }
    let b = v.to_bits() as i32;
    i64::from(b ^ ((((b >> 31) as u32) >> 1) as i32))
}

/// The 8 largest values of `row` in descending rank (equal ranks in input order; a row of
/// fewer than 8 values, refused at load, would be padded with −∞).
fn top8(row: &[f32]) -> [f32; 8] {
    let mut best = [(i64::MIN, f32::NEG_INFINITY); 8];
    for &v in row {
        let k = rank(v);
        if k <= best[7].0 {
            continue;
        }
        let mut i = 7;
        while i > 0 && best[i - 1].0 < k {
            best[i] = best[i - 1];
            i -= 1;
        }
        best[i] = (k, v);
    }
    best.map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn top8_keeps_duplicates_and_ranks_nan_first() {
        let row = [1.0, 5.0, f32::NAN, 5.0, -0.0, 0.0, 3.0, 2.0, -1.0, 4.0];
        let t = top8(&row);
        assert!(t[0].is_nan());
        assert_eq!(&t[1..], &[5.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0]);
        assert!(t[7].is_sign_positive());
    }

    #[test]
    fn aggregate_of_one_stats_group_is_its_moments() {
        // Even-indexed 1, 3, 5 (mean 3, squared deviations 4 + 0 + 4); odd-indexed 2, 4 (mean
        // 3, 1 + 1).
        let m = moments_even_odd(&[1.0f32, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(m, [3.0, 3.0, 8.0, 2.0, 3.0, 2.0]);
        assert_eq!(moments_even_odd(&[5.0]), [1.0, 5.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(aggregate(&[4.0, 2.5, 5.0]), (2.5, 1.25));
        assert!(aggregate(&[0.0, 1.0, 1.0]).0.is_nan());
    }
}
