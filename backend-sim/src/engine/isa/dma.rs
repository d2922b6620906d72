//! DMA descriptors: one contiguous copy between two endpoints (HBM tensor bytes, or one SBUF
//! or PSUM partition), and the region an endpoint covers.

use super::pattern::{MemKind, Region};

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
}

impl DmaEndpoint {
    /// Short name of the memory.
    pub const fn mem_name(&self) -> &'static str {
        match self {
            DmaEndpoint::Hbm { .. } => "HBM",
            DmaEndpoint::Sbuf { .. } => "SBUF",
            DmaEndpoint::Psum { .. } => "PSUM",
        }
    }

    /// The footprint of `len` bytes at this endpoint, given the HBM base address of each
    /// program tensor (an HBM tensor missing from `bases` counts from 0).
    #[inline]
    pub(crate) fn region(&self, bases: &[u64], len: u32) -> Region {
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
        }
    }
}

/// One contiguous copy of `len` bytes from `src` to `dst` (the shape of a udma descriptor).
/// Allowed directions: HBM→SBUF, SBUF→HBM, SBUF→SBUF, PSUM→SBUF.
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
        matches!(self.src, DmaEndpoint::Hbm { .. }) || matches!(self.dst, DmaEndpoint::Hbm { .. })
    }
}
