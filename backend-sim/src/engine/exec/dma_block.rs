//! The copy of a format-1.1 block descriptor: the source block is read row by row, each
//! element of the logical `[R, C]` transfer is placed (transposed where a block says so) and
//! converted (through binary32 when the element types differ, bit-exact otherwise), and the
//! destination block is written row by row.

use super::Executor;
use crate::engine::dtype::{load_f32, store_f32};
use crate::engine::isa::{DmaBlock, MemKind};

impl Executor<'_, '_> {
    /// Performs one block descriptor (validated at load: both blocks in bounds, the same
    /// logical shape).
    pub(super) fn copy_block(&mut self, src: &DmaBlock, dst: &DmaBlock) {
        let mut from = std::mem::take(&mut self.scratch);
        self.read_block(src, &mut from);
        let same = src.dtype == dst.dtype;
        if same && src.transposed == dst.transposed && (src.rows, src.cols) == (dst.rows, dst.cols)
        {
            // The same layout on both sides: the bytes as read.
            self.write_block(dst, &from);
            self.scratch = from;
            return;
        }
        let mut to = std::mem::take(&mut self.block_out);
        to.clear();
        to.resize(dst.bytes() as usize, 0);
        let shape = Placement {
            logical: src.logical_shape(),
            src_cols: src.cols as usize,
            dst_cols: dst.cols as usize,
            src_t: src.transposed,
            dst_t: dst.transposed,
        };
        match (same, src.dtype.size()) {
            (true, 2) => shape.place::<2>(&from, &mut to),
            (true, 4) => shape.place::<4>(&from, &mut to),
            (true, 1) => shape.place::<1>(&from, &mut to),
            _ => {
                let (ses, des) = (src.dtype.size(), dst.dtype.size());
                shape.for_each(|so, dof| {
                    let (so, dof) = (so * ses, dof * des);
                    if let (Some(s), Some(d)) = (from.get(so..so + ses), to.get_mut(dof..dof + des))
                    {
                        if same {
                            d.copy_from_slice(s);
                        } else {
                            store_f32(dst.dtype, load_f32(src.dtype, s), d);
                        }
                    }
                });
            }
        }
        self.write_block(dst, &to);
        self.scratch = from;
        self.block_out = to;
    }

    /// The block's bytes, row after row (rows out of range read as zeros).
    fn read_block(&self, b: &DmaBlock, out: &mut Vec<u8>) {
        let rb = b.row_bytes() as usize;
        out.clear();
        out.resize(b.bytes() as usize, 0);
        for (r, row) in out.chunks_exact_mut(rb.max(1)).enumerate() {
            let off = b.elem_offset(r as u32, 0);
            match b.mem {
                MemKind::Hbm => {
                    if let Some(&base) = self.env.bases.get(b.index as usize) {
                        self.env.hbm.read_unchecked(base + off, row);
                    }
                }
                MemKind::Sbuf | MemKind::Psum => {
                    let m = if b.mem == MemKind::Sbuf {
                        &*self.env.sbuf
                    } else {
                        &*self.env.psum
                    };
                    let data = m.read(b.index as usize + r, off as usize, rb);
                    if data.len() == rb {
                        row.copy_from_slice(data);
                    }
                }
            }
        }
    }

    /// Writes the block's bytes, row after row (rows out of range are not written).
    fn write_block(&mut self, b: &DmaBlock, data: &[u8]) {
        let rb = b.row_bytes() as usize;
        for (r, row) in data.chunks_exact(rb.max(1)).enumerate() {
            let off = b.elem_offset(r as u32, 0);
            match b.mem {
                MemKind::Hbm => {
                    if let Some(&base) = self.env.bases.get(b.index as usize) {
                        self.env.hbm.write_unchecked(base + off, row);
                    }
                }
                MemKind::Sbuf | MemKind::Psum => {
                    let m = if b.mem == MemKind::Sbuf {
                        &mut *self.env.sbuf
                    } else {
                        &mut *self.env.psum
                    };
                    let out = m.write(b.index as usize + r, off as usize, rb);
                    if out.len() == rb {
                        out.copy_from_slice(row);
                    }
                }
            }
        }
    }
}

/// Where each element of a block transfer goes: the logical `[R, C]` shape, each side's row
/// length (elements) and whether it holds the matrix transposed.
struct Placement {
    logical: (u32, u32),
    src_cols: usize,
    dst_cols: usize,
    src_t: bool,
    dst_t: bool,
}

impl Placement {
    /// Calls `f(source element index, destination element index)` for every element of the
    /// logical matrix, row by row.
    #[inline]
    fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let (rows, cols) = (self.logical.0 as usize, self.logical.1 as usize);
        for r in 0..rows {
            for c in 0..cols {
                let (sr, sc) = if self.src_t { (c, r) } else { (r, c) };
                let (dr, dc) = if self.dst_t { (c, r) } else { (r, c) };
                f(sr * self.src_cols + sc, dr * self.dst_cols + dc);
            }
        }
    }

    /// Places `N`-byte elements of one type, bit for bit (elements outside either buffer are
    /// skipped).
    fn place<const N: usize>(&self, from: &[u8], to: &mut [u8]) {
        let (rows, cols) = (self.logical.0 as usize, self.logical.1 as usize);
        // A transpose on one side: one side's rows are whole and contiguous, the other side's
        // elements `cols · N` bytes apart (row `r`'s column `c` ↔ column `r`'s row `c`).
        let strided = self.src_cols > 0 && self.dst_cols > 0;
        let whole = match (self.src_t, self.dst_t) {
            _ if !strided => false,
            (true, false) => (0..rows).all(|r| {
                let row = to.get_mut(r * self.dst_cols * N..(r * self.dst_cols + cols) * N);
                let (Some(row), Some(col)) = (row, from.get(r * N..)) else {
                    return false;
                };
                for (d, s) in row.chunks_exact_mut(N).zip(col.chunks(self.src_cols * N)) {
                    if let Some(s) = s.get(..N) {
                        d.copy_from_slice(s);
                    }
                }
                true
            }),
            (false, true) => (0..rows).all(|r| {
                let row = from.get(r * self.src_cols * N..(r * self.src_cols + cols) * N);
                let (Some(row), Some(col)) = (row, to.get_mut(r * N..)) else {
                    return false;
                };
                for (s, d) in row.chunks_exact(N).zip(col.chunks_mut(self.dst_cols * N)) {
                    if let Some(d) = d.get_mut(..N) {
                        d.copy_from_slice(s);
                    }
                }
                true
            }),
            _ => false,
        };
        if whole {
            return;
        }
        // The general case (and a buffer too short for a whole row: element by element, the
        // rows already placed getting the same bytes again).
        self.for_each(|so, dof| {
            let (so, dof) = (so * N, dof * N);
            if let (Some(s), Some(d)) = (from.get(so..so + N), to.get_mut(dof..dof + N)) {
                d.copy_from_slice(s);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::Placement;

    /// The placement of element `(r, c)` of a logical `[rows, cols]` matrix, written out.
    fn reference(p: &Placement, from: &[u8], n: usize, out_len: usize) -> Vec<u8> {
        let mut to = vec![0u8; out_len];
        for r in 0..p.logical.0 as usize {
            for c in 0..p.logical.1 as usize {
                let so = if p.src_t {
                    c * p.src_cols + r
                } else {
                    r * p.src_cols + c
                };
                let dof = if p.dst_t {
                    c * p.dst_cols + r
                } else {
                    r * p.dst_cols + c
                };
                for b in 0..n {
                    if let (Some(&s), Some(d)) = (from.get(so * n + b), to.get_mut(dof * n + b)) {
                        *d = s;
                    }
                }
            }
        }
        to
    }

    #[test]
    fn typed_placement_matches_the_element_rule() {
        // [3, 5] logical: every combination of transposed sides, 2- and 4-byte elements.
        for (src_t, dst_t) in [(false, false), (true, false), (false, true), (true, true)] {
            let p = Placement {
                logical: (3, 5),
                src_cols: if src_t { 3 } else { 5 },
                dst_cols: if dst_t { 3 } else { 5 },
                src_t,
                dst_t,
            };
            for n in [2usize, 4] {
                let from: Vec<u8> = (0..15 * n).map(|i| (i * 7 + 1) as u8).collect();
                let mut to = vec![0u8; 15 * n];
                if n == 2 {
                    p.place::<2>(&from, &mut to);
                } else {
                    p.place::<4>(&from, &mut to);
                }
                assert_eq!(to, reference(&p, &from, n, 15 * n), "{src_t} {dst_t} {n}");
            }
        }
        // A transpose moves element (r, c) to (c, r): [[1, 2, 3], [4, 5, 6]] → [[1, 4], [2, 5],
        // [3, 6]] (one-byte elements).
        let p = Placement {
            logical: (2, 3),
            src_cols: 3,
            dst_cols: 2,
            src_t: false,
            dst_t: true,
        };
        let mut to = [0u8; 6];
        p.place::<1>(&[1, 2, 3, 4, 5, 6], &mut to);
        assert_eq!(to, [1, 4, 2, 5, 3, 6]);
        // A short destination: elements past its end are skipped, the rest placed.
        let mut short = [0u8; 4];
        p.place::<1>(&[1, 2, 3, 4, 5, 6], &mut short);
        assert_eq!(short, [1, 4, 2, 5]);
    }
}
