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

    fn hull(&self, o: &Rect) -> Rect {
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

/// The logged accesses of one memory, writes and reads apart: a read conflicts only with
/// writes, so it scans only those (a kernel's inputs collect many reads and no writes).
#[derive(Clone, Debug, Default)]
struct Recs {
    writes: Vec<Rec>,
    reads: Vec<Rec>,
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
            let reads: &[Rec] = if acc.write { &recs.reads } else { &[] };
            // Newest first: a found conflict raises the slot, so older records of that agent
            // fail the cheap position test before the rectangle test.
            for r in recs.writes.iter().rev().chain(reads.iter().rev()) {
                if Some(r.agent) == own {
                    continue;
                }
                let slot = &mut needs[r.agent.index()];
                if r.pos > *slot && acc.overlaps(&own_box, &r.rects, &r.bbox) {
                    *slot = r.pos;
                }
            }
        }
    }

    /// Logs `accesses` as operation `pos` of `agent`, dropping records they make useless.
    pub(crate) fn record(&mut self, accesses: &[Access], agent: Agent, pos: u32) {
        for acc in accesses {
            let Some(bbox) = acc.bbox() else { continue };
            let recs = self.mems.entry(acc.mem).or_default();
            let useless = |r: &Rec| {
                (acc.write || (!r.write && r.agent == agent))
                    && bbox.contains(&r.bbox)
                    && acc.covers(&r.rects)
            };
            // A read makes no write useless (only its own agent's reads it covers).
            if acc.write {
                recs.writes.retain(|r| !useless(r));
            }
            recs.reads.retain(|r| !useless(r));
            let list = if acc.write {
                &mut recs.writes
            } else {
                &mut recs.reads
            };
            list.push(Rec {
                agent,
                pos,
                write: acc.write,
                rects: acc.rects.clone(),
                bbox,
            });
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
}
