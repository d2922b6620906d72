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
        self.for_each(|so, dof| {
            let (so, dof) = (so * N, dof * N);
            if let (Some(s), Some(d)) = (from.get(so..so + N), to.get_mut(dof..dof + N)) {
                d.copy_from_slice(s);
            }
        });
    }
}
