//! The access log: which agent's operation (at which position) last read or wrote which bytes,
//! per memory, and the dependencies a new access has on it.
//!
//! Footprints are the hazard detector's, taken from the engine (`Instr::accesses` with
//! `AccessPattern::region`, `DmaEndpoint::region`): an engine instruction's operand covers its
//! partition range × the byte range of its pattern (a bounding box), a DMA descriptor's end
//! its partitions (or HBM bytes) × its bytes. Two accesses conflict when their footprints overlap and one of
//! them writes. HBM is tracked per tensor (distinct tensors never share bytes).
//!
//! The log forgets what can no longer matter: a write removes the records it covers (every
//! later access that overlaps them overlaps the write, is ordered after it, and the write was
//! ordered after them), and a read removes the earlier reads of the same agent it covers.

use std::collections::BTreeMap;

use nrt_sim::engine::{AccessPattern, MemKind, Region};

use super::agent::{Agent, Clock};

/// A memory the log tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum MemKey {
    Sbuf,
    Psum,
    /// An HBM tensor, by index.
    Hbm(u32),
}

/// Partitions `[p0, p1)` × bytes `[b0, b1)` (HBM: partitions `0..1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rect {
    pub(crate) p0: u32,
    pub(crate) p1: u32,
    pub(crate) b0: u64,
    pub(crate) b1: u64,
}

impl Rect {
    /// The rectangle of an engine region (`AccessPattern::region`, `DmaEndpoint::region`):
    /// the one conversion from the engine's footprints to the log's.
    pub(crate) fn of_region(r: &Region) -> Rect {
        Rect {
            p0: r.p0,
            p1: r.p1,
            b0: r.b0,
            b1: r.b1,
        }
    }

    pub(crate) fn overlaps(&self, o: &Rect) -> bool {
        self.p0 < o.p1 && o.p0 < self.p1 && self.b0 < o.b1 && o.b0 < self.b1
    }

    pub(crate) fn contains(&self, o: &Rect) -> bool {
        self.p0 <= o.p0 && o.p1 <= self.p1 && self.b0 <= o.b0 && o.b1 <= self.b1
    }

    pub(crate) fn hull(&self, o: &Rect) -> Rect {
        Rect {
            p0: self.p0.min(o.p0),
            p1: self.p1.max(o.p1),
            b0: self.b0.min(o.b0),
            b1: self.b1.max(o.b1),
        }
    }
}

/// One read or write of an operation: a memory and the rectangles it touches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    pub(crate) mem: MemKey,
    pub(crate) write: bool,
    pub(crate) rects: Vec<Rect>,
}

impl Access {
    /// The footprint of an engine operand (`AccessPattern::region`, what the engine's hazard
    /// detector records).
    pub(crate) fn of_pattern(ap: &AccessPattern, write: bool) -> Access {
        let r = ap.region();
        Access {
            mem: match r.mem {
                MemKind::Psum => MemKey::Psum,
                MemKind::Sbuf | MemKind::Hbm => MemKey::Sbuf,
            },
            write,
            rects: vec![Rect::of_region(&r)],
        }
    }

    /// An access of `rects` (DMA descriptor footprints), normalised: sorted, adjacent
    /// partitions with the same bytes and touching byte ranges of one partition merged. The
    /// union is unchanged.
    pub(crate) fn of_rects(mem: MemKey, write: bool, mut rects: Vec<Rect>) -> Access {
        // Same partition, touching or overlapping bytes.
        rects.sort_unstable_by_key(|r| (r.p0, r.p1, r.b0, r.b1));
        let mut merged: Vec<Rect> = Vec::with_capacity(rects.len());
        for r in rects {
            match merged.last_mut() {
                Some(m) if m.p0 == r.p0 && m.p1 == r.p1 && r.b0 <= m.b1 => m.b1 = m.b1.max(r.b1),
                _ => merged.push(r),
            }
        }
        // Same bytes, consecutive partitions.
        merged.sort_unstable_by_key(|r| (r.b0, r.b1, r.p0));
        let mut out: Vec<Rect> = Vec::with_capacity(merged.len());
        for r in merged {
            match out.last_mut() {
                Some(m) if m.b0 == r.b0 && m.b1 == r.b1 && r.p0 == m.p1 => m.p1 = r.p1,
                _ => out.push(r),
            }
        }
        Access {
            mem,
            write,
            rects: out,
        }
    }

    fn bbox(&self) -> Option<Rect> {
        let mut it = self.rects.iter();
        let first = *it.next()?;
        Some(it.fold(first, |a, r| a.hull(r)))
    }

    /// Whether this access (whose bounding box is `own`) overlaps a record's `rects` (with
    /// bounding box `bbox`).
    fn overlaps(&self, own: &Rect, rects: &[Rect], bbox: &Rect) -> bool {
        own.overlaps(bbox)
            && self
                .rects
                .iter()
                .any(|a| a.overlaps(bbox) && rects.iter().any(|r| a.overlaps(r)))
    }

    /// Whether every rectangle of `rects` lies inside one of this access's.
    fn covers(&self, rects: &[Rect]) -> bool {
        rects
            .iter()
            .all(|r| self.rects.iter().any(|a| a.contains(r)))
    }
}

/// One logged access.
#[derive(Clone, Debug)]
struct Rec {
    agent: Agent,
    pos: u32,
    write: bool,
    rects: Vec<Rect>,
    bbox: Rect,
}

/// Bytes per bucket of the index, as a shift: on-chip memories (per-partition offsets), HBM
/// tensors.
const ONCHIP_SHIFT: u32 = 9;
const HBM_SHIFT: u32 = 16;
/// Buckets of one index at most; bytes past the last bucket's start all fall in it.
const MAX_BUCKETS: u64 = 1 << 16;

/// The logged accesses of one kind (writes or reads) of one memory, indexed by byte range: a
/// record is filed under every bucket its bounding box's bytes touch, so a search for the
/// records that overlap (or lie inside) a rectangle visits only the buckets of that
/// rectangle's bytes. Each record is visited once per search, in the first bucket the
/// search shares with it. Removal happens only in a search ([`Index::remove_if`]) whose
/// buckets include all of the removed record's, so no bucket keeps a removed record's slot.
#[derive(Clone, Debug)]
struct Index {
    shift: u32,
    slots: Vec<Option<Rec>>,
    free: Vec<u32>,
    buckets: Vec<Vec<u32>>,
    /// Records spanning more than [`WIDE_BUCKETS`] buckets (a loop body's boxes over all
    /// its iterations), kept apart and visited by every search instead of being filed in
    /// every bucket they touch.
    wide: Vec<u32>,
}

/// Buckets a record may span and still be filed in each.
const WIDE_BUCKETS: usize = 64;

impl Index {
    fn new(shift: u32) -> Index {
        Index {
            shift,
            slots: Vec::new(),
            free: Vec::new(),
            buckets: Vec::new(),
            wide: Vec::new(),
        }
    }

    fn bucket(shift: u32, b: u64) -> usize {
        // At most MAX_BUCKETS - 1, which fits any usize this crate builds for.
        (b >> shift).min(MAX_BUCKETS - 1) as usize
    }

    /// The first and last bucket a record with bounding box `r` is filed under.
    fn home(shift: u32, r: &Rect) -> (usize, usize) {
        let last = r.b1.saturating_sub(1).max(r.b0);
        (Index::bucket(shift, r.b0), Index::bucket(shift, last))
    }

    /// The buckets holding every record that overlaps `r` or lies inside it (the byte ranges
    /// are half-open; the last bucket is `r.b1`'s so that an empty record at `r.b1` is
    /// found), clipped to the buckets that exist; `None` when there are none.
    fn reach(&self, r: &Rect) -> Option<(usize, usize)> {
        let lo = Index::bucket(self.shift, r.b0);
        let hi = Index::bucket(self.shift, r.b1.max(r.b0)).min(self.buckets.len().checked_sub(1)?);
        (lo <= hi).then_some((lo, hi))
    }

    fn push(&mut self, rec: Rec) {
        let (lo, hi) = Index::home(self.shift, &rec.bbox);
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = Some(rec);
                id
            }
            None => {
                self.slots.push(Some(rec));
                // Slots are fewer than the log's records, far below u32::MAX.
                (self.slots.len() - 1) as u32
            }
        };
        if hi - lo > WIDE_BUCKETS {
            self.wide.push(id);
            return;
        }
        if self.buckets.len() <= hi {
            self.buckets.resize_with(hi + 1, Vec::new);
        }
        for b in &mut self.buckets[lo..=hi] {
            b.push(id);
        }
    }

    /// Calls `f` once on every record that may overlap `r` or lie inside it (a superset:
    /// the records sharing a bucket with it), newest first within a bucket.
    fn visit(&self, r: &Rect, mut f: impl FnMut(&Rec)) {
        for &id in self.wide.iter().rev() {
            if let Some(Some(rec)) = self.slots.get(id as usize) {
                f(rec);
            }
        }
        let Some((lo, hi)) = self.reach(r) else {
            return;
        };
        for (k, bucket) in self.buckets[lo..=hi].iter().enumerate() {
            let k = lo + k;
            for &id in bucket.iter().rev() {
                if let Some(rec) = &self.slots[id as usize] {
                    if Index::home(self.shift, &rec.bbox).0.max(lo) == k {
                        f(rec);
                    }
                }
            }
        }
    }

    /// Removes the records inside `r`'s buckets for which `useless` holds; the caller's
    /// predicate holds only for records whose bounding box lies inside `r`.
    fn remove_if(&mut self, r: &Rect, useless: impl Fn(&Rec) -> bool) {
        let Index {
            slots, free, wide, ..
        } = self;
        wide.retain(|&id| {
            let Some(slot) = slots.get_mut(id as usize) else {
                return false;
            };
            match slot {
                Some(rec) if useless(rec) => {
                    *slot = None;
                    free.push(id);
                    false
                }
                Some(_) => true,
                None => false,
            }
        });
        let Some((lo, hi)) = self.reach(r) else {
            return;
        };
        let shift = self.shift;
        let Index {
            slots,
            free,
            buckets,
            ..
        } = self;
        for (k, bucket) in buckets[lo..=hi].iter_mut().enumerate() {
            let k = lo + k;
            bucket.retain(|&id| {
                let slot = &mut slots[id as usize];
                // Removed earlier in this pass, from a lower bucket.
                let Some(rec) = slot else { return false };
                if Index::home(shift, &rec.bbox).0.max(lo) == k && useless(rec) {
                    *slot = None;
                    free.push(id);
                    false
                } else {
                    true
                }
            });
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

/// The logged accesses of one memory, writes and reads apart: a read conflicts only with
/// writes, so it searches only those (a kernel's inputs collect many reads and no writes).
#[derive(Clone, Debug)]
struct Recs {
    writes: Index,
    reads: Index,
}

impl Recs {
    fn new(mem: MemKey) -> Recs {
        let shift = match mem {
            MemKey::Sbuf | MemKey::Psum => ONCHIP_SHIFT,
            MemKey::Hbm(_) => HBM_SHIFT,
        };
        Recs {
            writes: Index::new(shift),
            reads: Index::new(shift),
        }
    }
}

/// Every access that may still order a future one, per memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct Log {
    mems: BTreeMap<MemKey, Recs>,
}

impl Log {
    /// Raises `needs[a]` to the latest position of agent `a` (other than `own`) whose logged
    /// access conflicts with one of `accesses`.
    pub(crate) fn needs(&self, accesses: &[Access], own: Agent, needs: &mut Clock) {
        self.needs_except(accesses, Some(own), needs);
    }

    /// [`Log::needs`] over every agent's accesses, `own`'s included.
    pub(crate) fn needs_all(&self, accesses: &[Access], needs: &mut Clock) {
        self.needs_except(accesses, None, needs);
    }

    fn needs_except(&self, accesses: &[Access], own: Option<Agent>, needs: &mut Clock) {
        for acc in accesses {
            let Some(recs) = self.mems.get(&acc.mem) else {
                continue;
            };
            // An access without bytes conflicts with nothing.
            let Some(own_box) = acc.bbox() else {
                continue;
            };
            // Newest first within a bucket: a found conflict raises the slot, so older
            // records of that agent fail the cheap position test before the rectangle test.
            let mut check = |r: &Rec| {
                if Some(r.agent) == own {
                    return;
                }
                let slot = &mut needs[r.agent.index()];
                if r.pos > *slot && acc.overlaps(&own_box, &r.rects, &r.bbox) {
                    *slot = r.pos;
                }
            };
            recs.writes.visit(&own_box, &mut check);
            if acc.write {
                recs.reads.visit(&own_box, &mut check);
            }
        }
    }

    /// Logs `accesses` as operation `pos` of `agent`, dropping records they make useless.
    pub(crate) fn record(&mut self, accesses: &[Access], agent: Agent, pos: u32) {
        for acc in accesses {
            let Some(bbox) = acc.bbox() else { continue };
            let recs = self
                .mems
                .entry(acc.mem)
                .or_insert_with(|| Recs::new(acc.mem));
            let useless = |r: &Rec| {
                (acc.write || (!r.write && r.agent == agent))
                    && bbox.contains(&r.bbox)
                    && acc.covers(&r.rects)
            };
            // A read makes no write useless (only its own agent's reads it covers).
            if acc.write {
                recs.writes.remove_if(&bbox, useless);
            }
            recs.reads.remove_if(&bbox, useless);
            let rec = Rec {
                agent,
                pos,
                write: acc.write,
                rects: acc.rects.clone(),
                bbox,
            };
            if acc.write {
                recs.writes.push(rec);
            } else {
                recs.reads.push(rec);
            }
        }
    }

    /// Moves every record's position to `f(agent, pos)` (a loop's template records become
    /// its last iteration's: `loops.rs`). Positions do not file records, so nothing moves.
    pub(crate) fn move_positions(&mut self, f: impl Fn(Agent, u32) -> u32) {
        for recs in self.mems.values_mut() {
            for idx in [&mut recs.writes, &mut recs.reads] {
                for rec in idx.slots.iter_mut().flatten() {
                    rec.pos = f(rec.agent, rec.pos);
                }
            }
        }
    }

    /// Records held (for tests of the pruning).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.mems
            .values()
            .map(|r| r.writes.len() + r.reads.len())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::super::agent::AGENTS;
    use super::*;
    use nrt_sim::engine::EngineId;

    fn rect(p0: u32, p1: u32, b0: u64, b1: u64) -> Rect {
        Rect { p0, p1, b0, b1 }
    }

    #[test]
    fn rects_merge_exactly() {
        let rs = (0..4).map(|p| rect(p, p + 1, 0, 64)).collect();
        let a = Access::of_rects(MemKey::Sbuf, true, rs);
        assert_eq!(a.rects, vec![rect(0, 4, 0, 64)]);
        let rs = vec![rect(0, 1, 64, 128), rect(0, 1, 0, 64), rect(0, 1, 256, 320)];
        let a = Access::of_rects(MemKey::Hbm(0), false, rs);
        assert_eq!(a.rects, vec![rect(0, 1, 0, 128), rect(0, 1, 256, 320)]);
    }

    #[test]
    fn conflicts_and_pruning() {
        let v = Agent::engine(EngineId::Vector);
        let s = Agent::engine(EngineId::Scalar);
        let mut log = Log::default();
        let w = |b0, b1| Access::of_rects(MemKey::Sbuf, true, vec![rect(0, 128, b0, b1)]);
        let r = |b0, b1| Access::of_rects(MemKey::Sbuf, false, vec![rect(0, 128, b0, b1)]);
        log.record(&[w(0, 64)], v, 1);
        log.record(&[r(0, 64)], s, 1);
        let mut n = [0u32; AGENTS];
        log.needs(&[r(32, 40)], Agent::engine(EngineId::GpSimd), &mut n);
        assert_eq!((n[v.index()], n[s.index()]), (1, 0)); // RAW only
        let mut n = [0u32; AGENTS];
        log.needs(&[w(32, 40)], Agent::engine(EngineId::GpSimd), &mut n);
        assert_eq!((n[v.index()], n[s.index()]), (1, 1)); // WAW + WAR
        let mut n = [0u32; AGENTS];
        log.needs(&[w(64, 128)], Agent::engine(EngineId::GpSimd), &mut n);
        assert_eq!(n, [0u32; AGENTS]);
        // A covering write replaces both records.
        log.record(&[w(0, 128)], Agent::engine(EngineId::GpSimd), 1);
        assert_eq!(log.len(), 1);
    }

    /// The plain linear log the index replaced: every record in one list, each search and
    /// pruning a scan of all of them.
    #[derive(Default)]
    struct Linear(Vec<(MemKey, Rec)>);

    impl Linear {
        fn needs(&self, accesses: &[Access], own: Option<Agent>, needs: &mut Clock) {
            for acc in accesses {
                let Some(own_box) = acc.bbox() else { continue };
                for (m, r) in &self.0 {
                    if *m == acc.mem
                        && (acc.write || r.write)
                        && Some(r.agent) != own
                        && acc.overlaps(&own_box, &r.rects, &r.bbox)
                    {
                        let slot = &mut needs[r.agent.index()];
                        *slot = (*slot).max(r.pos);
                    }
                }
            }
        }

        fn record(&mut self, accesses: &[Access], agent: Agent, pos: u32) {
            for acc in accesses {
                let Some(bbox) = acc.bbox() else { continue };
                self.0.retain(|(m, r)| {
                    !(*m == acc.mem
                        && (acc.write || (!r.write && r.agent == agent))
                        && bbox.contains(&r.bbox)
                        && acc.covers(&r.rects))
                });
                let rec = Rec {
                    agent,
                    pos,
                    write: acc.write,
                    rects: acc.rects.clone(),
                    bbox,
                };
                self.0.push((acc.mem, rec));
            }
        }
    }

    /// The indexed log against the linear one on random access sequences: the same needs
    /// for every search and the same number of records after every pruning.
    #[test]
    fn index_matches_linear_search() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let engines = [
            EngineId::Sync,
            EngineId::Tensor,
            EngineId::Vector,
            EngineId::Scalar,
            EngineId::GpSimd,
        ];
        for round in 0..40 {
            let mut log = Log::default();
            let mut lin = Linear::default();
            // Small rounds crowd a few buckets; large ones spread over many (and past the
            // bucket cap for HBM).
            let span = if round % 2 == 0 { 4096 } else { 1 << 40 };
            let mut pos = [0u32; AGENTS];
            for _ in 0..300 {
                let e = engines[next(5) as usize];
                let agent = if next(4) == 0 {
                    Agent::queue(next(2) as u8, e)
                } else {
                    Agent::engine(e)
                };
                let mut accs = Vec::new();
                for _ in 0..1 + next(3) {
                    let mem = match next(3) {
                        0 => MemKey::Sbuf,
                        1 => MemKey::Psum,
                        _ => MemKey::Hbm(next(2) as u32),
                    };
                    let rects = (0..next(4))
                        .map(|_| {
                            let p0 = next(128) as u32;
                            let p1 = p0 + next(129 - u64::from(p0)) as u32;
                            let b0 = next(span);
                            let len = if next(3) == 0 { span } else { 2048 };
                            let b1 = b0 + next(len);
                            rect(p0, p1, b0, b1)
                        })
                        .collect();
                    accs.push(Access::of_rects(mem, next(2) == 0, rects));
                }
                let own = (next(3) != 0).then_some(agent);
                let (mut a, mut b) = ([0u32; AGENTS], [0u32; AGENTS]);
                log.needs_except(&accs, own, &mut a);
                lin.needs(&accs, own, &mut b);
                assert_eq!(a, b);
                pos[agent.index()] += 1;
                log.record(&accs, agent, pos[agent.index()]);
                lin.record(&accs, agent, pos[agent.index()]);
                assert_eq!(log.len(), lin.0.len());
            }
        }
    }
}
