//! The hazard detector's shadow memory: every live access record, indexed by location *and* by
//! agent, so a check only visits records that are both nearby and concurrent with the checker.
//!
//! Memories are split into cells. SBUF and PSUM have two grids: a record of one partition
//! (every DMA endpoint) is filed in the *narrow* cells `(partition, 16 KiB chunk)` it touches,
//! a record of several partitions in the *wide* cells `(32-partition quadrant, 2 KiB chunk)`;
//! a check visits the cells of both grids its footprint touches. HBM cells are 64 KiB. In a
//! cell, records are grouped by agent (a sequencer or a DMA queue), writes and reads apart. An
//! agent's records carry non-decreasing epochs, so in each group the records a checker's
//! vector clock does *not* cover form a suffix: a check walks each group from the back and
//! stops at the first record the checker is ordered after (and passes over a group whose
//! newest record it is ordered after without touching the records). Records every possible
//! future accessor is ordered after can never be part of a hazard; [`Shadow::retire`] drops
//! them (each group's prefix at or below the frontier). HBM reads of bytes no descriptor of
//! the program can write can never be part of a hazard either, and are not recorded.
//!
//! Records are filed, and checks visit cells, by their footprints' bounding boxes; two records
//! conflict when their exact footprints ([`Footprint`]) share a byte: the boxes first (most
//! pairs are told apart there, and two dense footprints — every contiguous access — overlap
//! exactly when their boxes do), then the exact test. A record keeps its exact shape only when
//! it is not dense (shared by the cells it is filed in).
//!
//! The hazard reported is the one the reference search would find first — a bucket per SBUF /
//! PSUM partition (or per 64 KiB of HBM) in increasing order, writes before reads, then
//! insertion order, with every footprint filed in, and visiting, the buckets of its bounding
//! box and the exact overlap test inside a bucket — so reports do not depend on this index's
//! layout.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use super::exec::report::Actor;
use super::isa::{Footprint, MemKind, Region};
use super::memory::{PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITIONS};
use super::spec::MAX_SBUF_PARTITION_BYTES;

/// One access record.
#[derive(Clone)]
pub(crate) struct Rec {
    /// The footprint's bounding box.
    pub(crate) region: Region,
    /// The exact footprint when it is not the whole box.
    shape: Option<Rc<Footprint>>,
    pub(crate) write: bool,
    pub(crate) epoch: u32,
    pub(crate) actor: Actor,
    pub(crate) tick: u64,
    /// Insertion order (the reference search's tie-break).
    seq: u64,
}

struct Group {
    agent: usize,
    /// Epoch of the newest write / read filed (0: none), so a check can pass over a group
    /// whose records it is all ordered after without looking at them.
    last_write: u32,
    last_read: u32,
    writes: VecDeque<Rec>,
    reads: VecDeque<Rec>,
}

#[derive(Default)]
struct Cell {
    groups: Vec<Group>,
    /// In [`Shadow::live`]: the cell held a record at the last retirement or since.
    listed: bool,
}

/// Width of a wide cell in SBUF / PSUM, log2 bytes.
const WIDE_SHIFT: u32 = 11;
/// Width of a narrow cell in SBUF / PSUM, log2 bytes: one-partition accesses are DMA
/// descriptors, typically a few KiB each.
const NARROW_SHIFT: u32 = 14;
/// Height of a wide cell in SBUF / PSUM, log2 partitions: the published partition-range
/// quadrants, so an access of up to 32 partitions files in one row of wide cells and a
/// full-width one in four.
const ONCHIP_BLOCK_SHIFT: u32 = 5;
/// Cell width in HBM, log2 bytes; also the reference search's HBM bucket. (Measured: 4 KiB
/// and 16 KiB cells scan fewer records per check but file a row in more cells, and were
/// slower on ResNet-50 and no faster on the BERT layer.)
const HBM_CELL_SHIFT: u32 = 16;
/// Direct-mapped cache of HBM cell lookups.
const HBM_CACHE: usize = 64;

/// The cell grid of one on-chip memory. A record of one partition (every DMA endpoint) is
/// filed in the narrow cells `(partition, 16 KiB chunk)`; a record of several partitions in
/// the wide cells `(quadrant, 2 KiB chunk)`. A check visits both kinds.
struct Grid {
    parts: usize,
    bytes: usize,
    /// Per `(partition, chunk)`: index + 1 into `Shadow::cells`, 0 when none yet.
    narrow: Vec<u32>,
    /// Per `(quadrant, chunk)`: the same.
    wide: Vec<u32>,
}

/// Partitions `[p0, p1)` and chunks `[c0, c1]` (of `per` chunks of `1 << shift` bytes) of a
/// region.
#[derive(Clone, Copy)]
struct Span {
    p0: usize,
    p1: usize,
    c0: usize,
    c1: usize,
    per: usize,
}

impl Grid {
    fn new(parts: usize, bytes: usize) -> Self {
        Self {
            parts,
            bytes,
            narrow: vec![0; parts * Self::per(bytes, NARROW_SHIFT)],
            wide: vec![0; (parts >> ONCHIP_BLOCK_SHIFT).max(1) * Self::per(bytes, WIDE_SHIFT)],
        }
    }

    fn per(bytes: usize, shift: u32) -> usize {
        (bytes >> shift).max(1)
    }

    /// The partitions and chunks a region touches at chunk width `1 << shift`; `None` when it
    /// touches no partition of the memory. Byte ranges are clamped to the partition, a
    /// monotone mapping, so overlapping footprints always share a chunk.
    fn span(&self, region: &Region, shift: u32) -> Option<Span> {
        let p0 = region.p0 as usize;
        let p1 = (region.p1 as usize).min(self.parts);
        if p0 >= p1 || region.b1 <= region.b0 {
            return None;
        }
        let per = Self::per(self.bytes, shift);
        let last = (per - 1) as u64;
        let c0 = (region.b0 >> shift).min(last) as usize;
        let c1 = ((region.b1 - 1) >> shift).min(last) as usize;
        Some(Span {
            p0,
            p1,
            c0,
            c1,
            per,
        })
    }
}

pub(crate) struct Shadow {
    cells: Vec<Cell>,
    sbuf: Grid,
    psum: Grid,
    /// HBM cell key (address >> 16) → index + 1 into `cells`.
    hbm: BTreeMap<u64, u32>,
    /// `(key, index + 1)`; a cell, once created, is never removed, so entries stay valid.
    hbm_cache: [(u64, u32); HBM_CACHE],
    /// Every HBM byte range the program can write (its descriptors' HBM destinations),
    /// sorted and merged. An HBM read outside them can never be part of a hazard (it could
    /// only conflict with a write), so it is neither checked nor recorded.
    hbm_written: Vec<(u64, u64)>,
    /// Records filed, counting each cell once.
    entries: usize,
    /// The cells (index + 1) that may hold records: [`Shadow::retire`] visits only these.
    live: Vec<u32>,
    seq: u64,
}

impl Shadow {
    /// A shadow for a program whose HBM writes all fall in the byte ranges `w`.
    pub(crate) fn new(mut w: Vec<(u64, u64)>) -> Self {
        w.retain(|&(b0, b1)| b1 > b0);
        w.sort_unstable();
        let mut hbm_written: Vec<(u64, u64)> = Vec::with_capacity(w.len());
        for (b0, b1) in w {
            match hbm_written.last_mut() {
                Some(last) if b0 <= last.1 => last.1 = last.1.max(b1),
                _ => hbm_written.push((b0, b1)),
            }
        }
        Self {
            hbm_written,
            cells: Vec::new(),
            sbuf: Grid::new(SBUF_PARTITIONS, MAX_SBUF_PARTITION_BYTES),
            psum: Grid::new(PSUM_PARTITIONS, PSUM_PARTITION_BYTES),
            hbm: BTreeMap::new(),
            hbm_cache: [(u64::MAX, 0); HBM_CACHE],
            entries: 0,
            live: Vec::new(),
            seq: 0,
        }
    }

    /// Whether an access of `region` can be part of a hazard at all: everything but an HBM
    /// read of bytes the program never writes.
    pub(crate) fn relevant(&self, region: &Region, write: bool) -> bool {
        if write || region.mem != MemKind::Hbm {
            return true;
        }
        let i = self.hbm_written.partition_point(|&(b0, _)| b0 < region.b1);
        i.checked_sub(1)
            .and_then(|i| self.hbm_written.get(i))
            .is_some_and(|&(_, b1)| b1 > region.b0)
    }

    /// Records filed (a record counts once per cell it touches).
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    fn cell(&self, i: u32) -> Option<&Cell> {
        (i as usize).checked_sub(1).and_then(|i| self.cells.get(i))
    }

    /// Calls `f` on every existing cell that may hold a record overlapping `region`.
    fn for_cells<'s>(&'s self, region: &Region, mut f: impl FnMut(&'s Cell)) {
        if region.b1 <= region.b0 {
            return; // an empty footprint overlaps nothing
        }
        match region.mem {
            MemKind::Sbuf | MemKind::Psum => {
                let g = if region.mem == MemKind::Sbuf {
                    &self.sbuf
                } else {
                    &self.psum
                };
                let mut visit = |idx: &[u32], row: usize, s: Span| {
                    if let Some(ids) = idx.get(row * s.per + s.c0..=row * s.per + s.c1) {
                        for &i in ids {
                            if let Some(c) = self.cell(i) {
                                f(c);
                            }
                        }
                    }
                };
                if let Some(s) = g.span(region, WIDE_SHIFT) {
                    for k in (s.p0 >> ONCHIP_BLOCK_SHIFT)..=((s.p1 - 1) >> ONCHIP_BLOCK_SHIFT) {
                        visit(&g.wide, k, s);
                    }
                }
                if let Some(s) = g.span(region, NARROW_SHIFT) {
                    for p in s.p0..s.p1 {
                        visit(&g.narrow, p, s);
                    }
                }
            }
            MemKind::Hbm => {
                let lo = region.b0 >> HBM_CELL_SHIFT;
                let hi = (region.b1 - 1) >> HBM_CELL_SHIFT;
                if lo == hi {
                    let (k, i) = self.hbm_cache[(lo as usize) % HBM_CACHE];
                    let i = if k == lo {
                        Some(i)
                    } else {
                        self.hbm.get(&lo).copied()
                    };
                    if let Some(c) = i.and_then(|i| self.cell(i)) {
                        f(c);
                    }
                    return;
                }
                for (_, &i) in self.hbm.range(lo..=hi) {
                    if let Some(c) = self.cell(i) {
                        f(c);
                    }
                }
            }
        }
    }

    /// The index + 1 of HBM cell `key`, created if needed.
    fn hbm_cell(&mut self, key: u64) -> u32 {
        let slot = (key as usize) % HBM_CACHE;
        let (k, i) = self.hbm_cache[slot];
        if k == key {
            return i;
        }
        let i = match self.hbm.get(&key) {
            Some(&i) => i,
            None => {
                self.cells.push(Cell::default());
                let i = self.cells.len() as u32;
                self.hbm.insert(key, i);
                i
            }
        };
        self.hbm_cache[slot] = (key, i);
        i
    }

    /// The record an access of `fp` by `agent` (vector clock `clock`) conflicts with, if any:
    /// sharing a byte, not the same agent, at least one of the two a write, and not ordered
    /// before the access. Of several, the reference search's first (see the module docs).
    pub(crate) fn find_conflict<'s>(
        &'s self,
        fp: &Footprint,
        write: bool,
        agent: usize,
        clock: &[u32],
    ) -> Option<Rec> {
        let region = &fp.region();
        let dense = fp.is_dense();
        // Given overlapping boxes: whether `r`'s footprint and `fp` share a byte.
        let exact = |r: &Rec| match &r.shape {
            None => dense || fp.overlaps_within_boxes(&Footprint::from(r.region)),
            Some(shape) => shape.overlaps_within_boxes(fp),
        };
        let hbm = region.mem == MemKind::Hbm;
        let key = |r: &Rec| {
            let bucket = if hbm {
                (r.region.b0 >> HBM_CELL_SHIFT).max(region.b0 >> HBM_CELL_SHIFT)
            } else {
                u64::from(r.region.p0.max(region.p0))
            };
            (bucket, !r.write, r.seq)
        };
        let mut best: Option<((u64, bool, u64), &'s Rec)> = None;
        let mut scan = |list: &'s VecDeque<Rec>, seen: u32| {
            for r in list.iter().rev() {
                if r.epoch <= seen {
                    break; // this record and every earlier one are ordered before
                }
                if r.region.overlaps(region) {
                    let k = key(r);
                    if best.as_ref().is_none_or(|(bk, _)| k < *bk) && exact(r) {
                        best = Some((k, r));
                    }
                }
            }
        };
        self.for_cells(region, |cell| {
            for g in &cell.groups {
                if g.agent == agent {
                    continue;
                }
                let seen = clock.get(g.agent).copied().unwrap_or(0);
                if g.last_write > seen {
                    scan(&g.writes, seen);
                }
                if write && g.last_read > seen {
                    scan(&g.reads, seen);
                }
            }
        });
        best.map(|(_, r)| r.clone())
    }

    /// Files a record of `agent`.
    pub(crate) fn insert(
        &mut self,
        fp: &Footprint,
        write: bool,
        agent: usize,
        epoch: u32,
        actor: Actor,
        tick: u64,
    ) {
        if fp.is_empty() {
            return; // never overlaps anything
        }
        let region = fp.region();
        let rec = Rec {
            region,
            shape: (!fp.is_dense()).then(|| Rc::new(*fp)),
            write,
            epoch,
            actor,
            tick,
            seq: self.seq,
        };
        self.seq += 1;
        match region.mem {
            MemKind::Sbuf | MemKind::Psum => {
                let sbuf = region.mem == MemKind::Sbuf;
                let g = if sbuf { &self.sbuf } else { &self.psum };
                let narrow = region.p1.saturating_sub(region.p0) == 1;
                let Some(s) = g.span(&region, if narrow { NARROW_SHIFT } else { WIDE_SHIFT })
                else {
                    return;
                };
                let (r0, r1) = if narrow {
                    (s.p0, s.p0)
                } else {
                    (s.p0 >> ONCHIP_BLOCK_SHIFT, (s.p1 - 1) >> ONCHIP_BLOCK_SHIFT)
                };
                for row in r0..=r1 {
                    for c in s.c0..=s.c1 {
                        let g = if sbuf { &mut self.sbuf } else { &mut self.psum };
                        let slot = row * s.per + c;
                        let idx = if narrow { &mut g.narrow } else { &mut g.wide };
                        let Some(x) = idx.get_mut(slot) else { continue };
                        if *x == 0 {
                            self.cells.push(Cell::default());
                            *x = self.cells.len() as u32;
                        }
                        let i = *x;
                        self.file(i, agent, rec.clone());
                    }
                }
            }
            MemKind::Hbm => {
                let lo = region.b0 >> HBM_CELL_SHIFT;
                let hi = (region.b1 - 1) >> HBM_CELL_SHIFT;
                for key in lo..=hi {
                    let i = self.hbm_cell(key);
                    self.file(i, agent, rec.clone());
                }
            }
        }
    }

    fn file(&mut self, cell: u32, agent: usize, rec: Rec) {
        let Some(c) = (cell as usize)
            .checked_sub(1)
            .and_then(|i| self.cells.get_mut(i))
        else {
            return;
        };
        let g = match c.groups.iter().position(|g| g.agent == agent) {
            Some(k) => &mut c.groups[k],
            None => {
                c.groups.push(Group {
                    agent,
                    last_write: 0,
                    last_read: 0,
                    writes: VecDeque::new(),
                    reads: VecDeque::new(),
                });
                let k = c.groups.len() - 1;
                &mut c.groups[k]
            }
        };
        if rec.write {
            g.last_write = rec.epoch;
            g.writes.push_back(rec);
        } else {
            g.last_read = rec.epoch;
            g.reads.push_back(rec);
        }
        if !c.listed {
            c.listed = true;
            self.live.push(cell);
        }
        self.entries += 1;
    }
    /// Drops every record whose agent's epoch is at or below `frontier[agent]` (every future
    /// accessor is ordered after it, so it can never be part of a hazard).
    pub(crate) fn retire(&mut self, frontier: &[u32]) {
        let mut entries = 0;
        let cells = &mut self.cells;
        self.live.retain(|&i| {
            let Some(c) = (i as usize).checked_sub(1).and_then(|i| cells.get_mut(i)) else {
                return false;
            };
            let before = entries;
            for g in &mut c.groups {
                let f = frontier.get(g.agent).copied().unwrap_or(0);
                while g.writes.front().is_some_and(|r| r.epoch <= f) {
                    g.writes.pop_front();
                }
                while g.reads.front().is_some_and(|r| r.epoch <= f) {
                    g.reads.pop_front();
                }
                entries += g.writes.len() + g.reads.len();
            }
            // Empty groups keep their buffers for the agent's next records, unless a cell
            // collects many (they cost every check a look).
            if c.groups.len() > 8 {
                c.groups
                    .retain(|g| !(g.writes.is_empty() && g.reads.is_empty()));
            }
            // A cell left without records drops off the list until its next record.
            c.listed = entries > before;
            c.listed
        });
        self.entries = entries;
    }
}
