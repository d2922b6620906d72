//! DMA descriptors: one contiguous copy between two endpoints (HBM tensor bytes, or one SBUF
//! or PSUM partition), or — format 1.1 — an element-wise copy between two 2-D element blocks
//! ([`DmaBlock`]) that may convert the element type and transpose; and the region an endpoint
//! covers.

use super::pattern::{MemKind, Region};
use crate::engine::dtype::DType;

/// One end of a DMA descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaEndpoint {
    /// Bytes of a program tensor in HBM.
    Hbm {
        /// Index of the tensor in the program's tensor table.
        tensor: u32,
        /// Byte offset inside the tensor.
        offset: u64,
    },
    /// Bytes of one SBUF partition.
    Sbuf {
        /// Partition.
        partition: u8,
        /// Byte offset in the partition.
        offset: u32,
    },
    /// Bytes of one PSUM partition.
    Psum {
        /// Partition.
        partition: u8,
        /// Byte offset in the partition.
        offset: u32,
    },
    /// (Format 1.1) A 2-D block of elements. A descriptor with block endpoints copies
    /// element by element (both endpoints must then be blocks).
    Block(DmaBlock),
}

/// A 2-D block of `rows × cols` elements of `dtype`, one endpoint of a block descriptor.
///
/// The descriptor moves a logical `[R, C]` matrix: a block holds it as `rows = R`,
/// `cols = C`, or — `transposed` — as `rows = C`, `cols = R` with element `(r, c)` of the
/// matrix at row `c`, column `r` of the block. Elements convert from the source's dtype to
/// the destination's through binary32 (RNE; to int32 saturating, NaN → 0), bit-exact when the
/// dtypes are equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DmaBlock {
    /// The memory: HBM (a program tensor), SBUF or PSUM.
    pub mem: MemKind,
    /// HBM: the tensor's index in the program; SBUF/PSUM: the first partition.
    pub index: u32,
    /// Byte offset: inside the tensor (HBM) or inside each partition (SBUF/PSUM).
    pub offset: u64,
    /// Element type.
    pub dtype: DType,
    /// Rows: consecutive partitions on chip; `pitch` elements apart in HBM.
    pub rows: u32,
    /// Contiguous elements per row.
    pub cols: u32,
    /// HBM: elements from one row's start to the next (≥ `cols`); ignored on chip.
    pub pitch: u32,
    /// The block holds the transfer's matrix transposed.
    pub transposed: bool,
}

impl DmaBlock {
    /// Bytes of one row.
    pub const fn row_bytes(&self) -> u64 {
        self.cols as u64 * self.dtype.size() as u64
    }

    /// Bytes of the elements (`rows · cols · element size`; saturating).
    pub const fn bytes(&self) -> u64 {
        (self.rows as u64).saturating_mul(self.row_bytes())
    }

    /// The logical `[R, C]` shape of the transfer this block holds.
    pub const fn logical_shape(&self) -> (u32, u32) {
        if self.transposed {
            (self.cols, self.rows)
        } else {
            (self.rows, self.cols)
        }
    }

    /// HBM: bytes from the first element to one past the last (`None` on overflow).
    pub fn hbm_span(&self) -> Option<u64> {
        let es = self.dtype.size() as u64;
        u64::from(self.rows.saturating_sub(1))
            .checked_mul(u64::from(self.pitch))?
            .checked_add(u64::from(self.cols))?
            .checked_mul(es)
    }

    /// The byte offset of element `(row, col)` (HBM: from the tensor's start; on chip: inside
    /// the row's partition).
    #[inline]
    pub(crate) fn elem_offset(&self, row: u32, col: u32) -> u64 {
        let es = self.dtype.size() as u64;
        match self.mem {
            MemKind::Hbm => {
                self.offset + (u64::from(row) * u64::from(self.pitch) + u64::from(col)) * es
            }
            MemKind::Sbuf | MemKind::Psum => self.offset + u64::from(col) * es,
        }
    }
}

impl DmaEndpoint {
    /// Short name of the memory.
    pub const fn mem_name(&self) -> &'static str {
        match self {
            DmaEndpoint::Hbm { .. }
            | DmaEndpoint::Block(DmaBlock {
                mem: MemKind::Hbm, ..
            }) => "HBM",
            DmaEndpoint::Sbuf { .. }
            | DmaEndpoint::Block(DmaBlock {
                mem: MemKind::Sbuf, ..
            }) => "SBUF",
            DmaEndpoint::Psum { .. }
            | DmaEndpoint::Block(DmaBlock {
                mem: MemKind::Psum, ..
            }) => "PSUM",
        }
    }

    /// The memory of the endpoint.
    pub const fn mem(&self) -> MemKind {
        match self {
            DmaEndpoint::Hbm { .. } => MemKind::Hbm,
            DmaEndpoint::Sbuf { .. } => MemKind::Sbuf,
            DmaEndpoint::Psum { .. } => MemKind::Psum,
            DmaEndpoint::Block(b) => b.mem,
        }
    }

    /// The footprint of `len` bytes at this endpoint (of the whole block for a block: its
    /// partition range × the bytes of one row on chip, first to last element in HBM), given
    /// the HBM base address of each program tensor (an HBM tensor missing from `bases` counts
    /// from 0, so `&[]` gives offsets inside the tensor). This is the region the executor
    /// moves and the hazard detector records for a descriptor's end.
    #[inline]
    pub fn region(&self, bases: &[u64], len: u32) -> Region {
        match *self {
            DmaEndpoint::Hbm { tensor, offset } => {
                let base = bases.get(tensor as usize).copied().unwrap_or(0);
                Region {
                    mem: MemKind::Hbm,
                    p0: 0,
                    p1: 1,
                    b0: base + offset,
                    b1: base + offset + u64::from(len),
                }
            }
            DmaEndpoint::Sbuf { partition, offset } | DmaEndpoint::Psum { partition, offset } => {
                Region {
                    mem: if matches!(self, DmaEndpoint::Sbuf { .. }) {
                        MemKind::Sbuf
                    } else {
                        MemKind::Psum
                    },
                    p0: u32::from(partition),
                    p1: u32::from(partition) + 1,
                    b0: u64::from(offset),
                    b1: u64::from(offset) + u64::from(len),
                }
            }
            DmaEndpoint::Block(b) => match b.mem {
                MemKind::Hbm => {
                    let base = bases.get(b.index as usize).copied().unwrap_or(0) + b.offset;
                    Region {
                        mem: MemKind::Hbm,
                        p0: 0,
                        p1: 1,
                        b0: base,
                        b1: base.saturating_add(b.hbm_span().unwrap_or(0)),
                    }
                }
                MemKind::Sbuf | MemKind::Psum => Region {
                    mem: b.mem,
                    p0: b.index,
                    p1: b.index.saturating_add(b.rows),
                    b0: b.offset,
                    b1: b.offset.saturating_add(b.row_bytes()),
                },
            },
        }
    }
}

/// One contiguous copy of `len` bytes from `src` to `dst` (the shape of a udma descriptor),
/// or, with [`DmaEndpoint::Block`] endpoints (format 1.1), an element-wise block copy that
/// reads `len` bytes (the source block's). Allowed directions: HBM→SBUF, SBUF→HBM,
/// SBUF→SBUF, PSUM→SBUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DmaDescriptor {
    /// Source.
    pub src: DmaEndpoint,
    /// Destination.
    pub dst: DmaEndpoint,
    /// Bytes (≥ 1).
    pub len: u32,
}

impl DmaDescriptor {
    /// Whether either end is HBM (the transfer consumes HBM bandwidth).
    pub const fn touches_hbm(&self) -> bool {
        matches!(self.src.mem(), MemKind::Hbm) || matches!(self.dst.mem(), MemKind::Hbm)
    }

    /// Whether this is a (format-1.1) block descriptor.
    pub const fn is_block(&self) -> bool {
        matches!(self.src, DmaEndpoint::Block(_)) || matches!(self.dst, DmaEndpoint::Block(_))
    }
}
