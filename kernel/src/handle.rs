//! What a view stands on: the memories ([`Memory`]), a tile's [`Placement`], and the base of a
//! view (an HBM tensor or an on-chip tile of one kernel), with the names errors use.

use core::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nrt_sim::engine::Space;

/// A fresh kernel identity: views remember the kernel they were made by, so a view of another
/// kernel's tile is refused instead of silently addressing this kernel's memory.
pub(crate) fn next_kernel_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Where a tensor or tile lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Memory {
    /// Device memory: the kernel's HBM tensors.
    Hbm,
    /// The state buffer: 128 partitions × 192 KiB.
    Sbuf,
    /// The partial-sum buffer: 128 partitions × 8 banks of 2 KiB.
    Psum,
}

impl Memory {
    /// Display name (`"HBM"`, `"SBUF"`, `"PSUM"`).
    pub const fn name(self) -> &'static str {
        match self {
            Memory::Hbm => "HBM",
            Memory::Sbuf => "SBUF",
            Memory::Psum => "PSUM",
        }
    }

    /// The engine's on-chip space, `None` for HBM.
    pub const fn space(self) -> Option<Space> {
        match self {
            Memory::Hbm => None,
            Memory::Sbuf => Some(Space::Sbuf),
            Memory::Psum => Some(Space::Psum),
        }
    }

    /// Whether this is SBUF or PSUM.
    pub const fn is_on_chip(self) -> bool {
        !matches!(self, Memory::Hbm)
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a tile sits: its first partition and the byte offset of its first element inside
/// each of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Placement {
    /// First partition (0, 32, 64 or 96 by the published partition-start rule).
    pub start_partition: usize,
    /// Byte offset inside each partition.
    pub offset: usize,
}

/// The storage a view addresses.
#[derive(Clone, Debug)]
pub(crate) struct Base {
    /// The kernel that declared it.
    pub(crate) kernel: u64,
    pub(crate) mem: Memory,
    /// Tensor index (HBM; also the program tensor index) or tile id (SBUF / PSUM).
    pub(crate) id: u32,
    pub(crate) name: Arc<str>,
    /// Tiles: elements per partition, the partition stride of the linear element space a
    /// tile view addresses (`partition × pitch + element`). HBM: 0.
    pub(crate) pitch: usize,
    /// Tiles: where the tile is. HBM: unused.
    pub(crate) placement: Placement,
}

impl fmt::Display for Base {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.mem.is_on_chip() {
            "tile"
        } else {
            "tensor"
        };
        write!(f, "{} {what} '{}'", self.mem, self.name)
    }
}
