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
        let (rows, cols) = src.logical_shape();
        let (ses, des) = (src.dtype.size(), dst.dtype.size());
        let mut to = vec![0u8; dst.bytes() as usize];
        let same = src.dtype == dst.dtype;
        for r in 0..rows as usize {
            for c in 0..cols as usize {
                let (sr, sc) = if src.transposed { (c, r) } else { (r, c) };
                let (dr, dc) = if dst.transposed { (c, r) } else { (r, c) };
                let so = (sr * src.cols as usize + sc) * ses;
                let dof = (dr * dst.cols as usize + dc) * des;
                let (Some(s), Some(d)) = (from.get(so..so + ses), to.get_mut(dof..dof + des))
                else {
                    continue;
                };
                if same {
                    d.copy_from_slice(s);
                } else {
                    store_f32(dst.dtype, load_f32(src.dtype, s), d);
                }
            }
        }
        self.write_block(dst, &to);
        self.scratch = from;
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
