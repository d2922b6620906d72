//! The tile allocator of one on-chip memory: first fit over the four 32-partition quadrants ×
//! the bytes of a partition, with freeing and explicit placement.
//!
//! A tile of `P` partitions takes one quadrant (P ≤ 32: partitions 0, 32, 64 or 96 onward),
//! an aligned half (P ≤ 64: 0 or 64) or all four (P > 64: 0) — the published partition-start
//! rule — and the same byte range `[offset, offset + bytes)` in each. First fit is the lowest
//! offset, then the lowest quadrant. Offsets are multiples of [`ALIGN`] bytes. In PSUM a tile
//! of at most one bank (2 KiB) never crosses a bank boundary and a larger one starts at a bank
//! boundary, so every matmul output a tile can hold lies in one bank.

use nrt_sim::engine::{PSUM_BANK_BYTES, Space, partition_start_ok};

/// Alignment of allocated tiles, bytes.
pub(crate) const ALIGN: usize = 64;
const QUADRANT: usize = 32;

/// Quadrants `[q0, q1)` covered by `partitions` partitions from `start`.
fn quadrants(start: usize, partitions: usize) -> (usize, usize) {
    (start / QUADRANT, (start + partitions).div_ceil(QUADRANT))
}

/// A reserved block: bytes `[b0, b1)` of quadrants `[q0, q1)`, held by tile `tile`.
#[derive(Clone, Copy, Debug)]
struct Block {
    q0: usize,
    q1: usize,
    b0: usize,
    b1: usize,
    tile: u32,
}

/// Why a placement failed: what the largest hole for the partition shape was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shortfall {
    /// Largest placeable size (bytes per partition) for the partition count, respecting the
    /// bank rule in PSUM.
    pub(crate) largest: usize,
    /// PSUM: banks with no tile on any partition.
    pub(crate) empty_banks: usize,
}

/// First-fit allocator of one space.
#[derive(Clone, Debug)]
pub(crate) struct Allocator {
    space: Space,
    /// Bytes per partition it allocates in.
    bytes: usize,
    blocks: Vec<Block>,
}

impl Allocator {
    /// An allocator of `space` with NeuronCore-v2's partition size (every generation's).
    pub(crate) fn new(space: Space) -> Self {
        Self::with_bytes(space, space.partition_bytes())
    }

    /// An allocator of `space` in partitions of `bytes` (at most the largest generation's).
    pub(crate) fn with_bytes(space: Space, bytes: usize) -> Self {
        Self {
            space,
            bytes: bytes.min(space.max_partition_bytes()),
            blocks: Vec::new(),
        }
    }

    /// Bytes per partition it allocates in.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether `[b0, b0 + bytes)` obeys the PSUM bank rule.
    fn bank_ok(&self, b0: usize, bytes: usize) -> bool {
        if self.space != Space::Psum {
            return true;
        }
        if bytes <= PSUM_BANK_BYTES {
            b0 / PSUM_BANK_BYTES == (b0 + bytes - 1) / PSUM_BANK_BYTES
        } else {
            b0 % PSUM_BANK_BYTES == 0
        }
    }

    /// The first block overlapping quadrants `[q0, q1)` × bytes `[b0, b1)`.
    fn conflict(&self, q0: usize, q1: usize, b0: usize, b1: usize) -> Option<&Block> {
        self.blocks
            .iter()
            .find(|b| b.q0 < q1 && q0 < b.q1 && b.b0 < b1 && b0 < b.b1)
    }

    /// Start partitions a tile of `partitions` partitions may take, lowest first.
    fn starts(partitions: usize) -> impl Iterator<Item = usize> {
        (0..128)
            .step_by(QUADRANT)
            .filter(move |&s| partition_start_ok(s as u32, partitions as u32))
    }

    /// First fit for `partitions` × `bytes`: `(start partition, offset)`.
    pub(crate) fn find(&self, partitions: usize, bytes: usize) -> Option<(usize, usize)> {
        let mut cands: Vec<usize> = vec![0];
        cands.extend(self.blocks.iter().map(|b| b.b1.next_multiple_of(ALIGN)));
        if self.space == Space::Psum {
            cands.extend((0..self.bytes()).step_by(PSUM_BANK_BYTES));
        }
        cands.sort_unstable();
        cands.dedup();
        for &b0 in &cands {
            if b0 + bytes > self.bytes() || !self.bank_ok(b0, bytes) {
                continue;
            }
            for s in Self::starts(partitions) {
                let (q0, q1) = quadrants(s, partitions);
                if self.conflict(q0, q1, b0, b0 + bytes).is_none() {
                    return Some((s, b0));
                }
            }
        }
        None
    }

    /// The tile overlapping an explicit placement, if any.
    pub(crate) fn occupant(
        &self,
        start: usize,
        partitions: usize,
        offset: usize,
        bytes: usize,
    ) -> Option<u32> {
        let (q0, q1) = quadrants(start, partitions);
        self.conflict(q0, q1, offset, offset + bytes)
            .map(|b| b.tile)
    }

    /// Records tile `tile` at `(start, offset)`.
    pub(crate) fn reserve(
        &mut self,
        tile: u32,
        start: usize,
        partitions: usize,
        offset: usize,
        bytes: usize,
    ) {
        let (q0, q1) = quadrants(start, partitions);
        self.blocks.push(Block {
            q0,
            q1,
            b0: offset,
            b1: offset + bytes,
            tile,
        });
    }

    /// Gives tile `tile`'s block back.
    pub(crate) fn release(&mut self, tile: u32) {
        self.blocks.retain(|b| b.tile != tile);
    }

    /// The largest placeable size for `partitions` partitions (and, in PSUM, the empty
    /// banks), for error messages.
    pub(crate) fn shortfall(&self, partitions: usize) -> Shortfall {
        let mut largest = 0usize;
        for s in Self::starts(partitions) {
            let (q0, q1) = quadrants(s, partitions);
            let mut edges: Vec<(usize, usize)> = self
                .blocks
                .iter()
                .filter(|b| b.q0 < q1 && q0 < b.q1)
                .map(|b| (b.b0, b.b1))
                .collect();
            edges.sort_unstable();
            let mut at = 0usize;
            let mut gaps = Vec::new();
            for (b0, b1) in edges {
                if b0 > at {
                    gaps.push((at, b0));
                }
                at = at.max(b1.next_multiple_of(ALIGN));
            }
            if at < self.bytes() {
                gaps.push((at, self.bytes()));
            }
            for (g0, g1) in gaps {
                largest = largest.max(self.largest_in(g0, g1));
            }
        }
        let empty_banks = if self.space == Space::Psum {
            (0..self.bytes() / PSUM_BANK_BYTES)
                .filter(|&k| {
                    let (b0, b1) = (k * PSUM_BANK_BYTES, (k + 1) * PSUM_BANK_BYTES);
                    self.blocks.iter().all(|b| b.b1 <= b0 || b1 <= b.b0)
                })
                .count()
        } else {
            0
        };
        Shortfall {
            largest,
            empty_banks,
        }
    }

    /// The largest tile placeable inside the gap `[g0, g1)`: the gap itself, except that in
    /// PSUM a tile either fits one bank or starts at a bank boundary.
    fn largest_in(&self, g0: usize, g1: usize) -> usize {
        if self.space != Space::Psum {
            return g1 - g0;
        }
        let first_bank = g0.next_multiple_of(PSUM_BANK_BYTES);
        let whole = g1.saturating_sub(first_bank);
        let mut best = whole;
        // The part of the gap inside each bank it touches.
        let mut at = g0;
        while at < g1 {
            let bank_end = (at / PSUM_BANK_BYTES + 1) * PSUM_BANK_BYTES;
            best = best.max(bank_end.min(g1) - at);
            at = bank_end;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn first_fit_packs_quadrants_and_reuses_freed_space() {
        let mut a = Allocator::new(Space::Sbuf);
        assert_eq!(a.find(32, 100), Some((0, 0)));
        a.reserve(1, 0, 32, 0, 100);
        // A second 32-partition tile goes to the next quadrant at the same offset.
        assert_eq!(a.find(32, 100), Some((32, 0)));
        a.reserve(2, 32, 32, 0, 100);
        // A 64-partition tile cannot use partitions 0..64 at offset 0: upper half.
        assert_eq!(a.find(64, 100), Some((64, 0)));
        // A full-width tile goes after the blocks, aligned.
        assert_eq!(a.find(128, 100), Some((0, 128)));
        a.release(1);
        assert_eq!(a.find(32, 100), Some((0, 0)));
        assert_eq!(a.occupant(32, 32, 50, 10), Some(2));
        assert_eq!(a.occupant(64, 64, 0, 10), None);
    }

    #[test]
    fn psum_tiles_stay_in_a_bank() {
        let mut a = Allocator::new(Space::Psum);
        a.reserve(1, 0, 128, 0, 1200);
        // 1200 more bytes would cross into bank 1: the tile starts at bank 1.
        assert_eq!(a.find(128, 1200), Some((0, 2048)));
        assert_eq!(a.find(128, 800), Some((0, 1216)));
        // Larger than a bank: whole banks from a bank boundary.
        assert_eq!(a.find(128, 4096), Some((0, 2048)));
        for k in 1..8 {
            a.reserve(10 + k, 0, 128, k as usize * 2048, 2048);
        }
        assert_eq!(a.find(128, 2048), None);
        let s = a.shortfall(128);
        assert_eq!(s.largest, 2048 - 1216);
        assert_eq!(s.empty_banks, 0);
    }
}
