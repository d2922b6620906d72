//! Device memories: per-core SBUF and PSUM, and sparse per-device HBM with capacity accounting.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::HashMap;

use nrt_core::{Error, err};

/// SBUF partitions per core.
pub const SBUF_PARTITIONS: usize = 128;
/// SBUF bytes per partition on NeuronCore-v2 (192 KiB; 24 MiB per core): the size the
/// project's kernels and lowerings plan for, so their programs run on every generation
/// (NeuronCore-v3 has 224 KiB: [`CoreSpec::sbuf_partition_bytes`](super::CoreSpec)).
pub const SBUF_PARTITION_BYTES: usize = 192 * 1024;
/// PSUM partitions per core.
pub const PSUM_PARTITIONS: usize = 128;
/// PSUM bytes per partition (16 KiB; 2 MiB per core).
pub const PSUM_PARTITION_BYTES: usize = 16 * 1024;
/// Bytes of one PSUM bank in one partition (512 fp32).
pub const PSUM_BANK_BYTES: usize = 2 * 1024;
/// PSUM banks per partition.
pub const PSUM_BANKS: usize = PSUM_PARTITION_BYTES / PSUM_BANK_BYTES;
/// Semaphores per core.
pub const SEMAPHORES: usize = 256;
/// DMA engines per core.
pub const DMA_ENGINES: usize = 16;
/// DMA queues per DMA engine.
pub const DMA_QUEUES: usize = 16;
/// Padding between the partitions of an [`OnChip`] memory in host memory (not addressable).
const PARTITION_PAD: usize = 1024 + 64;
/// HBM page size: the granularity at which HBM materialises and allocations are rounded.
pub const HBM_PAGE_BYTES: u64 = 4096;

/// A partitioned on-chip memory (SBUF or PSUM) of one core: `partitions` rows of
/// `partition_bytes` each, zero at creation and after [`OnChip::clear`].
#[derive(Clone)]
pub struct OnChip {
    bytes: Vec<u8>,
    partition_bytes: usize,
    /// Distance between partitions in `bytes`: the partition size plus a little padding, so
    /// the same offset of consecutive partitions does not map to the same cache sets (192 KiB
    /// and 16 KiB are multiples of every cache's set period).
    stride: usize,
    /// Per partition, one past the highest byte written since the last clear.
    high_water: Vec<usize>,
    /// The last write's number (see [`OnChip::generation`]).
    generation: u64,
    /// Per partition, per [`GEN_CHUNK`] bytes: the number of the last write that touched them.
    chunk_gen: Vec<u64>,
}

/// Granularity (bytes) of the per-region write numbers of [`OnChip::generation`].
const GEN_CHUNK: usize = 1024;

impl core::fmt::Debug for OnChip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OnChip")
            .field("partitions", &self.partitions())
            .field("partition_bytes", &self.partition_bytes)
            .finish()
    }
}

impl OnChip {
    /// A zeroed memory.
    pub fn new(partitions: usize, partition_bytes: usize) -> Self {
        let stride = partition_bytes + PARTITION_PAD;
        Self {
            bytes: vec![0; partitions * stride],
            partition_bytes,
            stride,
            high_water: vec![0; partitions],
            generation: 0,
            chunk_gen: vec![0; partitions * partition_bytes.div_ceil(GEN_CHUNK)],
        }
    }

    /// The number of the last write that may have changed `bytes` `[lo, hi)` of partitions
    /// `[p0, p1)`; every `clear`, `write`, `copy_within` and `partition_mut` is numbered,
    /// increasing. While it is unchanged the region holds the same bytes, so a value derived
    /// from reading it can be reused. (Kept per partition per 1 KiB, so writes elsewhere, such
    /// as the next tile's DMA, do not count.)
    pub(crate) fn generation(&self, p0: usize, p1: usize, lo: usize, hi: usize) -> u64 {
        let per = self.partition_bytes.div_ceil(GEN_CHUNK);
        let (c0, c1) = (lo / GEN_CHUNK, hi.div_ceil(GEN_CHUNK).min(per));
        let mut g = 0;
        for p in p0..p1.min(self.partitions()) {
            if let Some(cs) = self.chunk_gen.get(p * per + c0..p * per + c1.max(c0)) {
                g = cs.iter().fold(g, |g, &c| g.max(c));
            }
        }
        g
    }

    /// Numbers a write to `[lo, hi)` of partition `p` (all of it when `hi` is `usize::MAX`).
    fn mark(&mut self, p: usize, lo: usize, hi: usize) {
        self.generation += 1;
        let per = self.partition_bytes.div_ceil(GEN_CHUNK);
        let (c0, c1) = (lo / GEN_CHUNK, hi.div_ceil(GEN_CHUNK).min(per));
        if let Some(cs) = self.chunk_gen.get_mut(p * per + c0..p * per + c1.max(c0)) {
            cs.fill(self.generation);
        }
    }

    /// The empty memory (no partitions): what a borrowed core memory reads as when it has
    /// none.
    pub(crate) fn empty() -> &'static OnChip {
        static EMPTY: OnChip = OnChip {
            bytes: Vec::new(),
            partition_bytes: 0,
            stride: 0,
            high_water: Vec::new(),
            generation: 0,
            chunk_gen: Vec::new(),
        };
        &EMPTY
    }

    /// A zeroed NeuronCore-v2 SBUF (128 × 192 KiB).
    pub fn sbuf() -> Self {
        Self::new(SBUF_PARTITIONS, SBUF_PARTITION_BYTES)
    }

    /// A zeroed SBUF of `spec`'s generation (128 partitions of its size).
    pub fn sbuf_of(spec: &super::CoreSpec) -> Self {
        Self::new(SBUF_PARTITIONS, spec.sbuf_partition_bytes)
    }

    /// A zeroed PSUM (128 × 16 KiB).
    pub fn psum() -> Self {
        Self::new(PSUM_PARTITIONS, PSUM_PARTITION_BYTES)
    }

    /// Number of partitions.
    pub fn partitions(&self) -> usize {
        self.high_water.len()
    }

    /// Bytes per partition.
    pub fn partition_bytes(&self) -> usize {
        self.partition_bytes
    }

    /// Zeroes everything written since the last clear.
    pub fn clear(&mut self) {
        self.generation += 1;
        self.chunk_gen.fill(self.generation);
        for (p, hw) in self.high_water.iter_mut().enumerate() {
            if *hw > 0 {
                let base = p * self.stride;
                if let Some(s) = self.bytes.get_mut(base..base + *hw) {
                    s.fill(0);
                }
                *hw = 0;
            }
        }
    }

    /// `len` bytes of partition `p` from `offset` (empty when out of range).
    pub fn read(&self, p: usize, offset: usize, len: usize) -> &[u8] {
        if offset.saturating_add(len) > self.partition_bytes {
            return &[];
        }
        let base = p * self.stride + offset;
        self.bytes.get(base..base + len).unwrap_or(&[])
    }

    /// Mutable `len` bytes of partition `p` from `offset` (empty when out of range); marks them
    /// written.
    pub fn write(&mut self, p: usize, offset: usize, len: usize) -> &mut [u8] {
        if offset.saturating_add(len) > self.partition_bytes {
            return &mut [];
        }
        self.mark(p, offset, offset + len);
        if let Some(hw) = self.high_water.get_mut(p) {
            *hw = (*hw).max(offset + len);
        } else {
            return &mut [];
        }
        let base = p * self.stride + offset;
        self.bytes.get_mut(base..base + len).unwrap_or(&mut [])
    }

    /// Partitions `p0..p0 + rows`, `n` binary32 elements each from byte `offset`, read in
    /// place: a slice whose row `r` starts at element `r · ld` (`ld`, the returned stride, is
    /// the partitions' distance in elements; the slice ends after the last row's `n`). `None`
    /// when the host is not little-endian, the range leaves the memory, or the bytes are not
    /// 4-byte aligned; callers then gather a copy.
    pub(crate) fn rows_f32(
        &self,
        p0: usize,
        rows: usize,
        offset: usize,
        n: usize,
    ) -> Option<(&[f32], usize)> {
        if !cfg!(target_endian = "little") || rows == 0 || self.stride % 4 != 0 {
            return None;
        }
        if offset.checked_add(n.checked_mul(4)?)? > self.partition_bytes
            || p0.checked_add(rows)? > self.partitions()
        {
            return None;
        }
        let start = p0 * self.stride + offset;
        let end = (p0 + rows - 1) * self.stride + offset + n * 4;
        let bytes = self.bytes.get(start..end)?;
        let v: &[f32] = bytemuck::try_cast_slice(bytes).ok()?;
        Some((v, self.stride / 4))
    }

    /// [`rows_f32`](Self::rows_f32), mutable, for writing: marks the rows' bytes written as
    /// [`write`](Self::write) does. `None` (nothing marked) in the same cases.
    pub(crate) fn rows_f32_mut(
        &mut self,
        p0: usize,
        rows: usize,
        offset: usize,
        n: usize,
    ) -> Option<(&mut [f32], usize)> {
        if !cfg!(target_endian = "little") || rows == 0 || self.stride % 4 != 0 {
            return None;
        }
        let len = n.checked_mul(4)?;
        if offset.checked_add(len)? > self.partition_bytes
            || p0.checked_add(rows)? > self.partitions()
        {
            return None;
        }
        let start = p0 * self.stride + offset;
        let end = (p0 + rows - 1) * self.stride + offset + len;
        // Alignment first, so a refusal marks nothing.
        if (self.bytes.get(start..end)?.as_ptr() as usize) % 4 != 0 {
            return None;
        }
        for p in p0..p0 + rows {
            self.mark(p, offset, offset + len);
            if let Some(hw) = self.high_water.get_mut(p) {
                *hw = (*hw).max(offset + len);
            }
        }
        let stride = self.stride / 4;
        let bytes = self.bytes.get_mut(start..end)?;
        let v: &mut [f32] = bytemuck::try_cast_slice_mut(bytes).ok()?;
        Some((v, stride))
    }

    /// Copies `len` bytes from partition `sp` at `soff` to partition `dp` at `doff` as if
    /// through a buffer (overlap allowed); a source out of range copies zeros, a destination
    /// out of range copies nothing.
    pub(crate) fn copy_within(
        &mut self,
        sp: usize,
        soff: usize,
        dp: usize,
        doff: usize,
        len: usize,
    ) {
        let src_ok = soff.saturating_add(len) <= self.partition_bytes && sp < self.partitions();
        if self.write(dp, doff, len).len() != len {
            return;
        }
        let dst = dp * self.stride + doff;
        if src_ok {
            let src = sp * self.stride + soff;
            if src + len <= self.bytes.len() && dst + len <= self.bytes.len() {
                self.bytes.copy_within(src..src + len, dst);
            }
        } else if let Some(d) = self.bytes.get_mut(dst..dst + len) {
            d.fill(0);
        }
    }

    /// Marks `[lo, hi)` of partition `p` written (for callers that wrote through
    /// [`OnChip::partition_mut`]).
    pub(crate) fn touch(&mut self, p: usize, hi: usize) {
        if let Some(hw) = self.high_water.get_mut(p) {
            *hw = (*hw).max(hi.min(self.partition_bytes));
        }
    }

    /// The whole of partition `p`.
    pub(crate) fn partition(&self, p: usize) -> &[u8] {
        let base = p * self.stride;
        self.bytes
            .get(base..base + self.partition_bytes)
            .unwrap_or(&[])
    }

    /// The whole of partition `p`, mutable, for writes within bytes `[lo, hi)` (numbered
    /// as written for [`OnChip::generation`]; the caller also marks them with `touch`).
    pub(crate) fn partition_mut(&mut self, p: usize, lo: usize, hi: usize) -> &mut [u8] {
        self.mark(p, lo, hi);
        let base = p * self.stride;
        self.bytes
            .get_mut(base..base + self.partition_bytes)
            .unwrap_or(&mut [])
    }
}

/// Host memory of the materialised HBM pages: `HBM_SHARDS` maps, each behind its own lock.
/// Runs of [`SHARD_RUN_PAGES`] consecutive pages share a map, so a descriptor's bytes mostly
/// take one lock; the runs are spread over the maps, so the cores of a device copying
/// different regions at the same time rarely meet on one.
const HBM_SHARDS: usize = 64;
/// Consecutive pages (64 KiB) kept in one shard.
const SHARD_RUN_PAGES: u64 = 16;

type PageMap = HashMap<u64, Box<[u8]>>;

/// A shard of the page maps, alone on its cache lines (two cores taking neighbouring shards'
/// locks do not contend for one line).
#[derive(Default)]
#[repr(align(128))]
struct Shard(RwLock<PageMap>);

/// The allocation table of an [`Hbm`].
#[derive(Debug, Default)]
struct Space {
    allocated: u64,
    /// Allocation base → rounded size.
    allocs: BTreeMap<u64, u64>,
}

/// Sparse HBM of one device: pages materialise on first write (reads of untouched pages return
/// zeros), allocations are page-aligned and counted against the device's capacity.
///
/// Shared by the device's cores: every method takes `&self`. The allocation table has one
/// lock and the pages are sharded over [`HBM_SHARDS`] locks taken one page at a time, so
/// executions on different cores copy at the same time. Concurrent writes of one byte (a
/// race in the program, as on hardware) leave one of the values, never a torn page.
pub struct Hbm {
    capacity: u64,
    space: Mutex<Space>,
    pages: Box<[Shard]>,
}

impl core::fmt::Debug for Hbm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Hbm")
            .field("capacity", &self.capacity)
            .field("allocated", &self.allocated())
            .field("resident_bytes", &self.resident_bytes())
            .finish()
    }
}

/// Locks `m`, taking over a poisoned lock (every table here is consistent between
/// statements).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_lock<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write_lock<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

impl Hbm {
    /// An empty HBM of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self {
            capacity,
            space: Mutex::default(),
            pages: (0..HBM_SHARDS).map(|_| Shard::default()).collect(),
        }
    }

    /// The shard holding page `page`.
    #[inline]
    fn shard(&self, page: u64) -> &RwLock<PageMap> {
        // `pages` has HBM_SHARDS entries, a power of two.
        &self.pages[((page / SHARD_RUN_PAGES) as usize) & (HBM_SHARDS - 1)].0
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Bytes allocated (sizes rounded up to whole pages).
    pub fn allocated(&self) -> u64 {
        lock(&self.space).allocated
    }

    /// Bytes of host memory holding materialised pages.
    pub fn resident_bytes(&self) -> u64 {
        self.pages
            .iter()
            .map(|s| read_lock(&s.0).len() as u64)
            .sum::<u64>()
            * HBM_PAGE_BYTES
    }

    /// Allocates `size` bytes (at least one page), first fit. Beyond the capacity:
    /// `NRT_RESOURCE`.
    pub fn alloc(&self, size: u64) -> Result<u64, Error> {
        let rounded = size
            .max(1)
            .checked_next_multiple_of(HBM_PAGE_BYTES)
            .ok_or_else(|| err!(Resource, "HBM allocation of {size} bytes is too large"))?;
        let mut space = lock(&self.space);
        if rounded > self.capacity - space.allocated {
            return Err(err!(
                Resource,
                "Failed to allocate {size} bytes of HBM: {} of {} bytes in use",
                space.allocated,
                self.capacity
            ));
        }
        let mut cursor = 0u64;
        for (&base, &len) in &space.allocs {
            if base - cursor >= rounded {
                break;
            }
            cursor = base + len;
        }
        if self.capacity - cursor < rounded {
            return Err(err!(
                Resource,
                "Failed to allocate {size} bytes of HBM: no free range that large (fragmented)"
            ));
        }
        space.allocs.insert(cursor, rounded);
        space.allocated += rounded;
        Ok(cursor)
    }

    /// Frees the allocation at `base`; its pages are dropped, so a later allocation reads zeros.
    pub fn free(&self, base: u64) -> Result<(), Error> {
        let mut space = lock(&self.space);
        let len = space
            .allocs
            .remove(&base)
            .ok_or_else(|| err!(Invalid, "HBM address {base:#x} is not an allocation"))?;
        space.allocated -= len;
        // Dropped while the table is locked: an allocation of the same range made after this
        // returns finds no page of the old one.
        self.drop_pages(base / HBM_PAGE_BYTES, (base + len) / HBM_PAGE_BYTES);
        Ok(())
    }

    /// Whether `[addr, addr + len)` lies inside one allocation.
    pub fn is_allocated(&self, addr: u64, len: u64) -> bool {
        match lock(&self.space).allocs.range(..=addr).next_back() {
            Some((&base, &size)) => addr.saturating_add(len) <= base + size,
            None => false,
        }
    }

    /// Copies `out.len()` bytes from `addr`. The range must be allocated (`NRT_INVALID`).
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), Error> {
        if !self.is_allocated(addr, out.len() as u64) {
            return Err(err!(
                Invalid,
                "HBM read of {} bytes at {addr:#x} is outside any allocation",
                out.len()
            ));
        }
        self.read_unchecked(addr, out);
        Ok(())
    }

    /// Copies `data` to `addr`. The range must be allocated (`NRT_INVALID`).
    pub fn write(&self, addr: u64, data: &[u8]) -> Result<(), Error> {
        if !self.is_allocated(addr, data.len() as u64) {
            return Err(err!(
                Invalid,
                "HBM write of {} bytes at {addr:#x} is outside any allocation",
                data.len()
            ));
        }
        self.write_unchecked(addr, data);
        Ok(())
    }

    /// Zeroes `[addr, addr + len)` without allocating: whole pages are dropped (sparse
    /// again), partial pages are cleared in place.
    pub(crate) fn zero_range(&self, addr: u64, len: u64) {
        let end = addr.saturating_add(len);
        let first_full = addr.div_ceil(HBM_PAGE_BYTES);
        let last_full = end / HBM_PAGE_BYTES;
        self.drop_pages(first_full, last_full);
        let mut a = addr;
        while a < end {
            let page = a / HBM_PAGE_BYTES;
            let off = (a % HBM_PAGE_BYTES) as usize;
            let n = ((HBM_PAGE_BYTES as usize - off) as u64).min(end - a) as usize;
            if let Some(p) = write_lock(self.shard(page)).get_mut(&page) {
                if let Some(s) = p.get_mut(off..off + n) {
                    s.fill(0);
                }
            }
            a += n as u64;
        }
    }

    /// Drops the materialised pages `first..last` (by key when the range holds fewer pages
    /// than the shards, else by one pass over each shard).
    fn drop_pages(&self, first: u64, last: u64) {
        if first >= last {
            return;
        }
        for (i, shard) in self.pages.iter().enumerate() {
            let mut map = write_lock(&shard.0);
            if map.is_empty() {
                continue;
            }
            // The keys of shard `i` in `first..last`: runs of SHARD_RUN_PAGES pages whose run
            // index is `i (mod HBM_SHARDS)`.
            let n = last - first;
            if n / HBM_SHARDS as u64 <= map.len() as u64 {
                let period = SHARD_RUN_PAGES * HBM_SHARDS as u64;
                let run0 = first / SHARD_RUN_PAGES;
                let lead = (i as u64).wrapping_sub(run0) % HBM_SHARDS as u64;
                let mut r = (run0 + lead) * SHARD_RUN_PAGES;
                while r < last {
                    for k in r.max(first)..(r + SHARD_RUN_PAGES).min(last) {
                        map.remove(&k);
                    }
                    r += period;
                }
            } else {
                map.retain(|&k, _| !(first..last).contains(&k));
            }
        }
    }

    /// The bytes from `addr` to the end of its run of [`SHARD_RUN_PAGES`] pages (what one
    /// lock of its shard covers).
    #[inline]
    fn run_left(addr: u64) -> u64 {
        let run = SHARD_RUN_PAGES * HBM_PAGE_BYTES;
        run - addr % run
    }

    pub(crate) fn read_unchecked(&self, addr: u64, out: &mut [u8]) {
        let mut done = 0usize;
        while done < out.len() {
            let a = addr + done as u64;
            // One lock for the part of `out` in this run of pages.
            let span = (Self::run_left(a).min((out.len() - done) as u64)) as usize;
            let end = done + span;
            let map = read_lock(self.shard(a / HBM_PAGE_BYTES));
            // Pages never written read as zeros: when no page of the run is materialised,
            // the lock is released before the fill (its release is a full fence, which would
            // otherwise wait for every store of the fill to drain).
            let first = a / HBM_PAGE_BYTES;
            let last = (addr + end as u64 - 1) / HBM_PAGE_BYTES;
            if (first..=last).all(|page| !map.contains_key(&page)) {
                drop(map);
                out[done..end].fill(0);
                done = end;
                continue;
            }
            while done < end {
                let a = addr + done as u64;
                let page = a / HBM_PAGE_BYTES;
                let off = (a % HBM_PAGE_BYTES) as usize;
                let n = (HBM_PAGE_BYTES as usize - off).min(end - done);
                let dst = &mut out[done..done + n];
                match map.get(&page) {
                    Some(p) => dst.copy_from_slice(&p[off..off + n]),
                    None => dst.fill(0),
                }
                done += n;
            }
        }
    }

    pub(crate) fn write_unchecked(&self, addr: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let a = addr + done as u64;
            let span = (Self::run_left(a).min((data.len() - done) as u64)) as usize;
            let mut map = write_lock(self.shard(a / HBM_PAGE_BYTES));
            let end = done + span;
            while done < end {
                let a = addr + done as u64;
                let page = a / HBM_PAGE_BYTES;
                let off = (a % HBM_PAGE_BYTES) as usize;
                let n = (HBM_PAGE_BYTES as usize - off).min(end - done);
                let src = &data[done..done + n];
                let p = map
                    .entry(page)
                    .or_insert_with(|| vec![0u8; HBM_PAGE_BYTES as usize].into_boxed_slice());
                p[off..off + n].copy_from_slice(src);
                done += n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use nrt_core::NrtStatus;

    /// `rows_f32` reads partitions in place: the values written, rows a stride apart, ending
    /// after the last row; refused when misaligned or out of range.
    #[test]
    fn rows_f32_reads_partitions_in_place() {
        let mut m = OnChip::new(8, 256);
        for p in 0..8 {
            for i in 0..4 {
                let v = (p * 10 + i) as f32 + 0.5;
                m.write(p, 64 + 4 * i, 4).copy_from_slice(&v.to_le_bytes());
            }
        }
        let (v, ld) = m.rows_f32(2, 3, 64, 4).unwrap();
        assert_eq!(ld * 4, m.stride);
        assert_eq!(v.len(), 2 * ld + 4);
        for r in 0..3 {
            let want: Vec<f32> = (0..4).map(|i| ((r + 2) * 10 + i) as f32 + 0.5).collect();
            assert_eq!(&v[r * ld..r * ld + 4], &want[..]);
        }
        assert!(m.rows_f32(0, 1, 2, 4).is_none(), "misaligned offset");
        assert!(m.rows_f32(0, 1, 248, 4).is_none(), "past the partition");
        assert!(m.rows_f32(6, 3, 0, 4).is_none(), "past the last partition");
        assert!(m.rows_f32(0, 0, 0, 4).is_none(), "no rows");
    }

    #[test]
    fn hbm_is_sparse_and_accounted() {
        let h = Hbm::new(1 << 30);
        let a = h.alloc(512 << 20).unwrap();
        assert_eq!(h.resident_bytes(), 0);
        let mut buf = [1u8; 16];
        h.read(a + 12345, &mut buf).unwrap();
        assert_eq!(buf, [0; 16]);
        h.write(a + 4090, &[7; 10]).unwrap(); // straddles two pages
        assert_eq!(h.resident_bytes(), 2 * HBM_PAGE_BYTES);
        h.read(a + 4088, &mut buf).unwrap();
        assert_eq!(&buf[..14], &[0, 0, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 0, 0]);
        let b = h.alloc(400 << 20).unwrap();
        let e = h.alloc(200 << 20).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Resource);
        h.free(a).unwrap();
        assert_eq!(h.resident_bytes(), 0);
        let c = h.alloc(200 << 20).unwrap();
        assert_eq!(c, 0);
        h.read(c + 4090, &mut buf).unwrap();
        assert_eq!(buf, [0; 16]);
        assert!(h.write(b + (400 << 20), &[1]).is_err());
        assert_eq!(h.free(12).unwrap_err().status(), NrtStatus::Invalid);
    }

    /// Pages spread over many shards and runs: reads and writes crossing runs, a zeroed range
    /// dropping exactly its whole pages, a free dropping every page of the allocation.
    #[test]
    fn hbm_pages_across_shards() {
        let h = Hbm::new(1 << 34);
        let a = h.alloc(8 << 30).unwrap();
        let run = SHARD_RUN_PAGES * HBM_PAGE_BYTES;
        let spots: Vec<u64> = (0..200u64).map(|i| a + 8 + i * (run * 7 + 4093)).collect();
        for (i, &s) in spots.iter().enumerate() {
            h.write(s, &[i as u8 + 1; 10]).unwrap();
        }
        for (i, &s) in spots.iter().enumerate() {
            let mut b = [0u8; 12];
            h.read(s - 1, &mut b).unwrap();
            assert_eq!(b[0], 0);
            assert!(b[1..11].iter().all(|&x| x == i as u8 + 1));
            assert_eq!(b[11], 0);
        }
        // A range straddling a run boundary, written whole then zeroed in the middle.
        let base = a + 3 * run - 3 * HBM_PAGE_BYTES;
        let data: Vec<u8> = (0..6 * HBM_PAGE_BYTES)
            .map(|i| (i % 251) as u8 + 1)
            .collect();
        h.write(base, &data).unwrap();
        h.zero_range(base + 100, 5 * HBM_PAGE_BYTES);
        let mut back = vec![0u8; data.len()];
        h.read(base, &mut back).unwrap();
        for (i, (&x, &y)) in back.iter().zip(&data).enumerate() {
            let zeroed = (100..100 + 5 * HBM_PAGE_BYTES as usize).contains(&i);
            assert_eq!(x, if zeroed { 0 } else { y }, "byte {i}");
        }
        h.free(a).unwrap();
        assert_eq!(h.resident_bytes(), 0);
    }

    /// A read over runs with no page (filled with zeros without the lock), a run with one
    /// page and a run with none again, into a buffer holding other bytes.
    #[test]
    fn hbm_read_mixes_unwritten_runs_and_pages() {
        let h = Hbm::new(1 << 30);
        let a = h.alloc(64 << 20).unwrap();
        let run = SHARD_RUN_PAGES * HBM_PAGE_BYTES;
        h.write(a + run + 5 * HBM_PAGE_BYTES + 7, &[9; 3]).unwrap();
        let mut buf = vec![0xFFu8; 3 * run as usize - 100];
        h.read(a + 50, &mut buf).unwrap();
        let at = (run + 5 * HBM_PAGE_BYTES + 7 - 50) as usize;
        for (i, &x) in buf.iter().enumerate() {
            assert_eq!(x, if (at..at + 3).contains(&i) { 9 } else { 0 }, "byte {i}");
        }
    }

    #[test]
    fn onchip_clear_zeroes_what_was_written() {
        let mut m = OnChip::new(4, 64);
        m.write(2, 10, 4).copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(m.read(2, 10, 4), &[1, 2, 3, 4]);
        assert!(m.read(2, 62, 4).is_empty());
        m.clear();
        assert_eq!(m.read(2, 10, 4), &[0, 0, 0, 0]);
    }
}
