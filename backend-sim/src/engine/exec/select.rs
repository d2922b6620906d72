//! Functional effects of the format-1.1 data-movement instructions: `AffineSelect` (a mask from
//! an affine expression of the partition and free indices), `RangeSelect` (the free index
//! against per-partition bounds) and `Transpose`. Selected values and transposed elements keep
//! their bits when source and destination share the element type (NaN payloads included);
//! otherwise they convert through binary32.

use super::Executor;
use super::effects::{gather_f32, mem, mem_mut, scatter_f32};
use crate::engine::dtype::store_f32;
use crate::engine::isa::{AccessPattern, Instr, MAX_DIMS, max_num};
use crate::engine::memory::OnChip;

impl Executor<'_, '_> {
    /// Applies `AffineSelect`, `RangeSelect` or `Transpose`.
    pub(super) fn apply_select(&mut self, ins: Instr) {
        let sbuf = &mut *self.env.sbuf;
        let psum = &mut *self.env.psum;
        match ins {
            Instr::AffineSelect {
                on_true,
                out,
                on_false,
                cmp,
                offset,
                channel_multiplier,
                steps,
            } => {
                let pred = affine_mask(&out, offset, channel_multiplier, &steps, |v| {
                    cmp.apply_i32(v, 0) != 0
                });
                if on_true.dtype == out.dtype {
                    let mut x = Vec::new();
                    gather_bits(mem(sbuf, psum, on_true.space), &on_true, &mut x);
                    let mut b = [0u8; 4];
                    store_f32(out.dtype, on_false, &mut b);
                    let fill = if out.dtype.size() == 2 {
                        u32::from(u16::from_le_bytes([b[0], b[1]]))
                    } else {
                        u32::from_le_bytes(b)
                    };
                    for (u, &keep) in x.iter_mut().zip(&pred) {
                        if !keep {
                            *u = fill;
                        }
                    }
                    scatter_bits(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = Vec::new();
                    gather_f32(mem(sbuf, psum, on_true.space), &on_true, &mut x);
                    for (u, &keep) in x.iter_mut().zip(&pred) {
                        if !keep {
                            *u = on_false;
                        }
                    }
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                }
            }
            Instr::RangeSelect {
                on_true,
                out,
                cmp0,
                bound0,
                cmp1,
                bound1,
                range_start,
                on_false,
                reduce_max,
            } => {
                let f = out.free_elems() as usize;
                let (mut x, mut b0, mut b1) = (Vec::new(), Vec::new(), Vec::new());
                gather_f32(mem(sbuf, psum, on_true.space), &on_true, &mut x);
                gather_f32(mem(sbuf, psum, bound0.space), &bound0, &mut b0);
                gather_f32(mem(sbuf, psum, bound1.space), &bound1, &mut b1);
                let mut maxes = Vec::with_capacity(usize::from(out.partitions));
                for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                    let lo = b0.get(p).copied().unwrap_or(0.0);
                    let hi = b1.get(p).copied().unwrap_or(0.0);
                    let mut m = f32::NEG_INFINITY;
                    for (i, u) in row.iter_mut().enumerate() {
                        let idx = (i as i64 + i64::from(range_start)) as f32;
                        let keep = cmp0.eval_f32(idx, lo) != 0.0 && cmp1.eval_f32(idx, hi) != 0.0;
                        if !keep {
                            *u = on_false;
                        }
                        m = max_num(m, *u);
                    }
                    maxes.push(m);
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                if let Some(r) = reduce_max {
                    scatter_f32(mem_mut(sbuf, psum, r.space), &r, &maxes);
                }
            }
            Instr::Transpose { src, out } => {
                let (p_in, f_in) = (usize::from(src.partitions), src.free_elems() as usize);
                let mut x = Vec::new();
                gather_bits(mem(sbuf, psum, src.space), &src, &mut x);
                let mut t = vec![0u32; p_in * f_in];
                for (p, row) in x.chunks(f_in.max(1)).enumerate() {
                    for (f, &v) in row.iter().enumerate() {
                        if let Some(d) = t.get_mut(f * p_in + p) {
                            *d = v;
                        }
                    }
                }
                scatter_bits(mem_mut(sbuf, psum, out.space), &out, &t);
            }
            _ => {}
        }
    }
}

/// The predicate of every element of `out` (row-major over partitions and the free pattern):
/// `keep(offset + p·channel_multiplier + Σ_d i_d·steps[d])`, int32 wrapping, `p` from 0 at
/// `out`'s first partition and `i_d` the index in `out`'s free dimension `d`.
fn affine_mask(
    out: &AccessPattern,
    offset: i32,
    channel_multiplier: i32,
    steps: &[i32; MAX_DIMS],
    keep: impl Fn(i32) -> bool,
) -> Vec<bool> {
    let dims = out.used_dims();
    let f = out.free_elems() as usize;
    let mut mask = Vec::with_capacity(usize::from(out.partitions) * f);
    let mut idx = [0u16; MAX_DIMS];
    for p in 0..i32::from(out.partitions) {
        let base = offset.wrapping_add(p.wrapping_mul(channel_multiplier));
        idx.fill(0);
        for _ in 0..f {
            let v = idx
                .iter()
                .zip(steps)
                .take(dims.len())
                .fold(base, |a, (&i, &s)| {
                    a.wrapping_add(i32::from(i).wrapping_mul(s))
                });
            mask.push(keep(v));
            // Advance the multi-index, innermost dimension fastest.
            for d in (0..dims.len()).rev() {
                let size = dims.get(d).map_or(1, |x| x.size);
                if let Some(i) = idx.get_mut(d) {
                    *i += 1;
                    if *i < size {
                        break;
                    }
                    *i = 0;
                }
            }
        }
    }
    mask
}

/// Reads `ap`'s elements as raw bits (2-byte elements zero-extended), `[partitions, free]`.
fn gather_bits(m: &OnChip, ap: &AccessPattern, out: &mut Vec<u32>) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    out.clear();
    out.resize(usize::from(ap.partitions) * f, 0);
    for (pi, row) in out.chunks_exact_mut(f.max(1)).enumerate() {
        let part = m.partition(usize::from(ap.start_partition) + pi);
        ap.for_each_offset(|i, o| {
            if let (Some(d), Some(s)) = (row.get_mut(i), part.get(o..o + es)) {
                *d = match *s {
                    [a, b] => u32::from(u16::from_le_bytes([a, b])),
                    [a, b, c, e] => u32::from_le_bytes([a, b, c, e]),
                    _ => 0,
                };
            }
        });
    }
}

/// Writes raw element bits (the low 2 bytes for 2-byte elements) to `ap`.
fn scatter_bits(m: &mut OnChip, ap: &AccessPattern, vals: &[u32]) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    let (lo, hi) = ap.byte_range();
    for (pi, row) in vals.chunks_exact(f.max(1)).enumerate() {
        let p = usize::from(ap.start_partition) + pi;
        m.touch(p, hi.max(0) as usize);
        let part = m.partition_mut(p, lo.max(0) as usize, hi.max(0) as usize);
        ap.for_each_offset(|i, o| {
            if let (Some(&v), Some(d)) = (row.get(i), part.get_mut(o..o + es)) {
                let b = v.to_le_bytes();
                if let Some(src) = b.get(..es) {
                    d.copy_from_slice(src);
                }
            }
        });
    }
}
