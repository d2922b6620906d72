//! Functional effects: when a data-path instruction's unit finishes, its result is computed and
//! written to SBUF/PSUM (stationary loads, matmuls, elementwise, activation, copies, memset,
//! iota), through the gather/scatter helpers that read and write access patterns.

use std::rc::Rc;

use super::{Executor, Pending, Stationary, join};
use crate::engine::dtype::{DType, f32_to_i32, load_f32, load_i32, store_f32, store_i32};
use crate::engine::isa::{AccessPattern, ActFunc, Bias, Instr, Space};
use crate::engine::math::{activation, matmul_stationary_any_nan, matmul_store_fast};
use crate::engine::memory::OnChip;
use crate::engine::nan::canon;

impl Executor<'_, '_> {
    pub(super) fn complete_seq_ops(&mut self) {
        for i in 0..5 {
            let t = self.t;
            let s = &mut self.seqs[i];
            let ls = if s.ls_op.is_some() && s.ls_until <= t {
                s.ls_op.take()
            } else {
                None
            };
            let main = if s.main_op.is_some() && s.main_until <= t {
                s.main_op.take()
            } else {
                None
            };
            if let Some(p) = ls {
                self.apply(p);
            }
            if let Some(p) = main {
                self.apply(p);
                let posted = std::mem::take(&mut self.seqs[i].post);
                for sig in posted {
                    let s = usize::from(sig.sem);
                    if let Some(v) = self.sems.get_mut(s) {
                        *v = if sig.set {
                            sig.value
                        } else {
                            v.wrapping_add(sig.value)
                        };
                    }
                    if let Some(c) = self.sem_clocks.get_mut(s) {
                        join(c, &sig.clock);
                    }
                    self.wake = true;
                }
            }
        }
    }

    /// Applies the effects of the instruction `p` issued (its instance, operands resolved).
    fn apply(&mut self, p: Pending) {
        let ins = p.ins;
        let sbuf = &mut *self.env.sbuf;
        let psum = &mut *self.env.psum;
        match ins {
            Instr::LoadStationary { src } => {
                // The previous stationary's buffer, when no issued multiply still holds it.
                let mut data = match self.stationary.take().map(Rc::try_unwrap) {
                    Some(Ok(old)) => old.data,
                    _ => Vec::new(),
                };
                gather_f32(mem(sbuf, psum, src.space), &src, &mut data);
                self.stationary = Some(Rc::new(Stationary {
                    k: usize::from(src.partitions),
                    m: src.free_elems() as usize,
                    data,
                }));
            }
            Instr::MultiplyMoving {
                moving,
                dst,
                accumulate,
            } => {
                let Some(st) = p.stationary else { return };
                let mut mv = std::mem::take(&mut self.mm_moving);
                let n = moving.free_elems() as usize;
                let k = st.k.min(usize::from(moving.partitions));
                // Only the moving operand's memory is borrowed, so PSUM stays writable while
                // an SBUF tile is read in place.
                let (src, psum_free) = match moving.space {
                    Space::Sbuf => (&*sbuf, Some(&mut *psum)),
                    Space::Psum => (&*psum, None),
                };
                let (lo, hi) = moving.byte_range();
                let p0 = usize::from(moving.start_partition);
                let p1 = p0 + usize::from(moving.partitions);
                let generation = src.generation(p0, p1, lo.max(0) as usize, hi.max(0) as usize);
                // An fp32 tile contiguous in each partition is read in place (no copy);
                // anything else is gathered into `mv`, rows `moving_row_stride(n)` apart.
                let direct = if moving.dtype == DType::F32 && moving.is_contiguous() {
                    src.rows_f32(p0, k, moving.offset as usize, n)
                } else {
                    None
                };
                let ld = direct.map_or(moving_row_stride(n), |(_, ld)| ld);
                // A gathered tile is kept while its memory and stride are unchanged.
                let cached = self.mm_moving_key == Some((moving, generation, ld));
                if !cached && direct.is_none() {
                    gather_rows_f32(src, &moving, &mut mv, ld);
                    self.mm_moving_key = Some((moving, generation, ld));
                }
                let b: &[f32] = direct.map_or(&mv, |(v, _)| v);
                let off = dst.offset as usize;
                let d0 = usize::from(dst.start_partition);
                // The fast GEMM stores (or accumulates) straight into the PSUM rows, one pass
                // with no product buffer, where it takes the tile.
                if let Some((cells, ldc)) =
                    psum_free.and_then(|ps| ps.rows_f32_mut(d0, st.m, off, n))
                {
                    if matmul_store_fast(&st.data, b, ld, cells, ldc, k, st.m, n, accumulate) {
                        self.mm_moving = mv;
                        return;
                    }
                }
                // Every element of the product is written (β = 0), so the buffer is reused
                // without clearing.
                let mut c = std::mem::take(&mut self.mm_out);
                if c.len() < st.m * n {
                    c.resize(st.m * n, 0.0);
                }
                let c_used = &mut c[..st.m * n];
                // NaN payloads are canonicalised here, as the product is stored (an
                // accumulation canonicalises its sum anyway).
                matmul_stationary_any_nan(&st.data, b, ld, c_used, k, st.m, n);
                for (row, p) in c_used.chunks_exact(n).zip(d0..) {
                    let cell = psum.write(p, off, n * 4);
                    store_row(cell, row, accumulate);
                }
                self.mm_moving = mv;
                self.mm_out = c;
            }
            Instr::TensorTensor { op, a, b, out } => {
                if all_int(&[a.dtype, b.dtype, out.dtype]) {
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    gather_i32(mem(sbuf, psum, a.space), &a, &mut x);
                    gather_i32(mem(sbuf, psum, b.space), &b, &mut y);
                    for (u, v) in x.iter_mut().zip(&y) {
                        *u = op.apply_i32(*u, *v);
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    let mut y = std::mem::take(&mut self.fbuf[1]);
                    gather_f32(mem(sbuf, psum, a.space), &a, &mut x);
                    gather_f32(mem(sbuf, psum, b.space), &b, &mut y);
                    super::rowops::binary_rows(op, &mut x, &y);
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf = [x, y];
                }
            }
            Instr::TensorScalar {
                op,
                src,
                scalar,
                out,
            } => {
                if all_int(&[src.dtype, out.dtype]) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    let s = f32_to_i32(scalar);
                    for u in x.iter_mut() {
                        *u = op.apply_i32(*u, s);
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    super::rowops::step_row(op, false, &mut x, scalar);
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf[0] = x;
                }
            }
            Instr::Activation {
                func,
                src,
                out,
                scale,
                bias,
            } => {
                let mut x = std::mem::take(&mut self.fbuf[0]);
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let per_part = match bias {
                    Bias::Imm(_) => None,
                    Bias::PerPartition(b) => {
                        let mut v = Vec::new();
                        gather_f32(mem(sbuf, psum, b.space), &b, &mut v);
                        Some(v)
                    }
                };
                let f = src.free_elems() as usize;
                for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                    let bv = match (&per_part, bias) {
                        (Some(v), _) => v.get(p).copied().unwrap_or(0.0),
                        (None, Bias::Imm(b)) => b,
                        (None, Bias::PerPartition(_)) => 0.0,
                    };
                    // The function chosen once per row: identity and relu (the usual ones)
                    // as straight loops the compiler vectorises; `activation`'s bits.
                    match func {
                        ActFunc::Identity => {
                            for u in row.iter_mut() {
                                *u = canon(*u * scale + bv);
                            }
                        }
                        ActFunc::Relu => {
                            for u in row.iter_mut() {
                                let t = *u * scale + bv;
                                *u = canon(if t > 0.0 || t.is_nan() { t } else { 0.0 });
                            }
                        }
                        _ => {
                            for u in row.iter_mut() {
                                *u = activation(func, *u * scale + bv);
                            }
                        }
                    }
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                self.fbuf[0] = x;
            }
            Instr::TensorCopy { src, out } => {
                if all_int(&[src.dtype, out.dtype]) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf[0] = x;
                }
            }
            Instr::Memset { out, bits } => {
                let n = usize::from(out.partitions) * out.free_elems() as usize;
                if out.dtype == DType::I32 {
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &vec![bits as i32; n]);
                } else {
                    scatter_f32(
                        mem_mut(sbuf, psum, out.space),
                        &out,
                        &vec![f32::from_bits(bits); n],
                    );
                }
            }
            Instr::Iota {
                out,
                base,
                partition_step,
                free_step,
            } => {
                let f = out.free_elems() as usize;
                let mut v = Vec::with_capacity(usize::from(out.partitions) * f);
                for p in 0..i32::from(out.partitions) {
                    let row = base.wrapping_add(p.wrapping_mul(partition_step));
                    for j in 0..f {
                        v.push(row.wrapping_add((j as i32).wrapping_mul(free_step)));
                    }
                }
                scatter_i32(mem_mut(sbuf, psum, out.space), &out, &v);
            }
            _ => self.apply_1_1(ins),
        }
    }
}

/// `cell[j] = canon(cell[j] + row[j])` over little-endian binary32 bytes: PSUM accumulation.
/// The NaN test is on the bits (as in `nan::canon`) and written as a select, so the loop
/// vectorises; the bits equal `canon`'s.
/// Stores a product row into PSUM bytes `cell`: with `accumulate` added to what is there (one
/// rounding), otherwise replacing it; NaN results canonical. fp32 lanes in place where the
/// cell is aligned on a little-endian host (one vectorisable pass), bytewise otherwise.
fn store_row(cell: &mut [u8], row: &[f32], accumulate: bool) {
    const NAN: f32 = crate::engine::CANONICAL_NAN;
    let lanes = if cfg!(target_endian = "little") {
        bytemuck::try_cast_slice_mut::<u8, f32>(cell).ok()
    } else {
        None
    };
    match (lanes, accumulate) {
        (Some(c), true) => {
            for (x, &v) in c.iter_mut().zip(row) {
                let s = *x + v;
                *x = if s.is_nan() { NAN } else { s };
            }
        }
        (Some(c), false) => {
            for (x, &v) in c.iter_mut().zip(row) {
                *x = if v.is_nan() { NAN } else { v };
            }
        }
        (None, true) => {
            for (b, &v) in cell.chunks_exact_mut(4).zip(row) {
                let s = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) + v;
                b.copy_from_slice(&canon(s).to_le_bytes());
            }
        }
        (None, false) => {
            for (b, &v) in cell.chunks_exact_mut(4).zip(row) {
                b.copy_from_slice(&canon(v).to_le_bytes());
            }
        }
    }
}

pub(super) fn all_int(d: &[DType]) -> bool {
    d.iter().all(|&x| x == DType::I32)
}

pub(super) fn mem<'m>(sbuf: &'m OnChip, psum: &'m OnChip, s: Space) -> &'m OnChip {
    match s {
        Space::Sbuf => sbuf,
        Space::Psum => psum,
    }
}

pub(super) fn mem_mut<'m>(sbuf: &'m mut OnChip, psum: &'m mut OnChip, s: Space) -> &'m mut OnChip {
    match s {
        Space::Sbuf => sbuf,
        Space::Psum => psum,
    }
}

/// The row stride (in elements) the moving operand of `n` columns is gathered with: `n`, or
/// `n + 16` when `n` is a multiple of 64. A stride of a multiple of 256 bytes puts the GEMM's
/// reads of one column panel down the k rows into few L1 cache sets (4 KiB aliasing); 64 more
/// bytes spread them (measured: 85 → 90 GFLOP/s for 128 × 128 × 512 on an AVX2 machine).
fn moving_row_stride(n: usize) -> usize {
    if n % 64 == 0 { n + 16 } else { n }
}

/// Reads `ap` as binary32, `[partitions, free]` row-major, into `out` (an element whose bytes
/// lie outside the partition reads as 0). `out`'s previous contents are overwritten, not
/// cleared first.
pub(super) fn gather_f32(m: &OnChip, ap: &AccessPattern, out: &mut Vec<f32>) {
    gather_rows_f32(m, ap, out, ap.free_elems() as usize);
}

/// [`gather_f32`] with each partition's row `ld ≥ free` elements apart in `out`; the `ld −
/// free` elements after each row are zeros.
fn gather_rows_f32(m: &OnChip, ap: &AccessPattern, out: &mut Vec<f32>, ld: usize) {
    let f = ap.free_elems() as usize;
    let ld = ld.max(f);
    let parts = usize::from(ap.partitions);
    // Rows are appended, a contiguous row straight from its bytes (no zero fill first).
    out.clear();
    out.reserve(parts * ld);
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let contiguous = ap.is_contiguous();
    for pi in 0..parts {
        let part = m.partition(usize::from(ap.start_partition) + pi);
        let start = out.len();
        if contiguous {
            let off = ap.offset as usize;
            if let Some(src) = part.get(off..off + f * es) {
                out.resize(start + f, 0.0);
                decode_run(dt, src, &mut out[start..]);
            }
            out.resize(start + ld, 0.0);
        } else {
            out.resize(start + ld, 0.0);
            if let Some(row) = out.get_mut(start..start + f) {
                ap.for_each_run(|i, o, n, step| {
                    let Some(dst) = row.get_mut(i..i + n) else {
                        return;
                    };
                    if step == es as isize {
                        if let Some(src) = part.get(o..o + n * es) {
                            decode_run(dt, src, dst);
                        }
                        return;
                    }
                    // A strided run: element by element, each read bounds-checked.
                    for (j, d) in dst.iter_mut().enumerate() {
                        let at = o as isize + j as isize * step;
                        if let Some(src) = usize::try_from(at)
                            .ok()
                            .and_then(|at| part.get(at..at + es))
                        {
                            *d = load_f32(dt, src);
                        }
                    }
                });
            }
        }
    }
}

/// `dst[i] = load_f32(dt, src[i·size ..])` for every element of `dst` (`src` holds
/// `dst.len()` elements of `dt`): fp32 and bf16 by straight-line conversions that vectorise.
fn decode_run(dt: DType, src: &[u8], dst: &mut [f32]) {
    match dt {
        DType::F32 => {
            for (d, c) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        DType::Bf16 => {
            for (d, c) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *d = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
            }
        }
        _ => {
            for (d, c) in dst.iter_mut().zip(src.chunks_exact(dt.size())) {
                *d = load_f32(dt, c);
            }
        }
    }
}

pub(super) fn gather_i32(m: &OnChip, ap: &AccessPattern, out: &mut Vec<i32>) {
    let f = ap.free_elems() as usize;
    let parts = usize::from(ap.partitions);
    out.clear();
    out.resize(parts * f, 0);
    for (pi, row) in out.chunks_exact_mut(f.max(1)).enumerate() {
        let part = m.partition(usize::from(ap.start_partition) + pi);
        ap.for_each_offset(|i, o| {
            if let (Some(dst), Some(src)) = (row.get_mut(i), part.get(o..o + 4)) {
                *dst = load_i32(src);
            }
        });
    }
}

pub(super) fn scatter_f32(m: &mut OnChip, ap: &AccessPattern, vals: &[f32]) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let (lo, hi) = ap.byte_range();
    let contiguous = ap.is_contiguous();
    for (pi, row) in vals.chunks_exact(f.max(1)).enumerate() {
        let p = usize::from(ap.start_partition) + pi;
        m.touch(p, hi.max(0) as usize);
        let part = m.partition_mut(p, lo.max(0) as usize, hi.max(0) as usize);
        if contiguous {
            let off = ap.offset as usize;
            if let Some(dst) = part.get_mut(off..off + f * es) {
                encode_run(dt, row, dst);
            }
        } else {
            ap.for_each_run(|i, o, n, step| {
                let Some(vals) = row.get(i..i + n) else {
                    return;
                };
                if step == es as isize {
                    if let Some(dst) = part.get_mut(o..o + n * es) {
                        encode_run(dt, vals, dst);
                    }
                    return;
                }
                for (j, &v) in vals.iter().enumerate() {
                    let at = o as isize + j as isize * step;
                    if let Some(dst) = usize::try_from(at)
                        .ok()
                        .and_then(|at| part.get_mut(at..at + es))
                    {
                        store_f32(dt, v, dst);
                    }
                }
            });
        }
    }
}

/// `store_f32(dt, vals[i], dst[i·size ..])` for every element of `vals` (`dst` holds
/// `vals.len()` elements of `dt`); fp32 by a straight copy of the bits.
fn encode_run(dt: DType, vals: &[f32], dst: &mut [u8]) {
    if dt == DType::F32 {
        for (c, &v) in dst.chunks_exact_mut(4).zip(vals) {
            c.copy_from_slice(&v.to_bits().to_le_bytes());
        }
    } else {
        for (c, &v) in dst.chunks_exact_mut(dt.size()).zip(vals) {
            store_f32(dt, v, c);
        }
    }
}

pub(super) fn scatter_i32(m: &mut OnChip, ap: &AccessPattern, vals: &[i32]) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let (lo, hi) = ap.byte_range();
    for (pi, row) in vals.chunks_exact(f.max(1)).enumerate() {
        let p = usize::from(ap.start_partition) + pi;
        m.touch(p, hi.max(0) as usize);
        let part = m.partition_mut(p, lo.max(0) as usize, hi.max(0) as usize);
        ap.for_each_offset(|i, o| {
            if let (Some(&v), Some(dst)) = (row.get(i), part.get_mut(o..o + es)) {
                store_i32(dt, v, dst);
            }
        });
    }
}
