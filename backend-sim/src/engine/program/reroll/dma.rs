//! Descriptors for the rerolling pass: the canonical descriptor set of each trigger (triggers
//! whose descriptors are the same up to one source and one destination offset delta share
//! one), and the compaction of the table once rerolled triggers reference fewer descriptors.

use super::hash::FastMap;

use crate::engine::isa::{
    DmaBlock, DmaDescriptor, DmaEndpoint, DynTerm, EngineId, Instr, TermSlot,
};

/// `e` with offset 0, and its offset (`None` when it does not fit an `i64`).
fn split(e: DmaEndpoint) -> Option<(DmaEndpoint, i64)> {
    Some(match e {
        DmaEndpoint::Hbm { tensor, offset } => (
            DmaEndpoint::Hbm { tensor, offset: 0 },
            i64::try_from(offset).ok()?,
        ),
        DmaEndpoint::Sbuf { partition, offset } => (
            DmaEndpoint::Sbuf {
                partition,
                offset: 0,
            },
            i64::from(offset),
        ),
        DmaEndpoint::Psum { partition, offset } => (
            DmaEndpoint::Psum {
                partition,
                offset: 0,
            },
            i64::from(offset),
        ),
        DmaEndpoint::Block(b) => (
            DmaEndpoint::Block(DmaBlock { offset: 0, ..b }),
            i64::try_from(b.offset).ok()?,
        ),
    })
}

type DescKey = Vec<(DmaEndpoint, i64, DmaEndpoint, i64, u32)>;

/// Canonical descriptor sets.
#[derive(Default)]
pub(super) struct Canon {
    /// Key (descriptors relative to their first's offsets) → (id, first's src, dst offsets).
    sets: FastMap<DescKey, (u32, i64, i64)>,
}

impl Canon {
    /// `(canon id, src shift, dst shift)` of the transfer of `descs`: its descriptors are
    /// those of the set's first transfer with every source offset moved by the src shift and
    /// every destination offset by the dst shift. `None` when an offset does not fit.
    pub(super) fn of(&mut self, descs: &[DmaDescriptor]) -> Option<(u32, i64, i64)> {
        let first = descs.first()?;
        let (_, s0) = split(first.src)?;
        let (_, d0) = split(first.dst)?;
        let mut key = Vec::with_capacity(descs.len());
        for d in descs {
            let (se, so) = split(d.src)?;
            let (de, dof) = split(d.dst)?;
            key.push((se, so.checked_sub(s0)?, de, dof.checked_sub(d0)?, d.len));
        }
        let next = self.sets.len() as u32;
        let &mut (id, rs, rd) = self.sets.entry(key).or_insert((next, s0, d0));
        Some((id, s0.checked_sub(rs)?, d0.checked_sub(rd)?))
    }
}

/// Drops the descriptors no trigger can reference and renumbers the rest, rewriting the
/// triggers' first descriptors. A trigger with `DmaFirst` terms keeps the whole span its
/// instances can reach, so its steps stay valid. Streams and terms must be well formed (loops
/// nested, terms sorted); anything else leaves the table as it is.
pub(super) fn compact(
    streams: &mut [Vec<Instr>; 5],
    terms: &[DynTerm],
    descriptors: &mut Vec<DmaDescriptor>,
) {
    let n = descriptors.len();
    // +1 at a span's start, -1 past its end.
    let mut marks = vec![0i64; n + 1];
    let mut k = 0usize;
    for engine in EngineId::ALL {
        let Some(stream) = streams.get(engine.index()) else {
            continue;
        };
        let mut stack: Vec<(u8, u32)> = Vec::new();
        for (pc, ins) in stream.iter().enumerate() {
            let start = k;
            while terms
                .get(k)
                .is_some_and(|t| t.engine == engine && t.pc as usize == pc)
            {
                k += 1;
            }
            let mine = terms.get(start..k).unwrap_or(&[]);
            match *ins {
                Instr::LoopBegin { reg, count } => stack.push((reg, count)),
                Instr::LoopEnd { .. } => {
                    stack.pop();
                }
                Instr::DmaTrigger { first, count, .. } => {
                    let (mut lo, mut hi) = (i128::from(first), i128::from(first));
                    for t in mine.iter().filter(|t| t.slot == TermSlot::DmaFirst) {
                        let Some(&(_, c)) = stack.iter().find(|s| s.0 == t.reg) else {
                            return;
                        };
                        let reach = i128::from(t.step) * i128::from(c.saturating_sub(1));
                        lo += reach.min(0);
                        hi += reach.max(0);
                    }
                    let end = hi + i128::from(count);
                    if lo < 0 || end > n as i128 {
                        return;
                    }
                    if let Some(a) = marks.get_mut(lo as usize) {
                        *a += 1;
                    }
                    if let Some(b) = marks.get_mut(end as usize) {
                        *b -= 1;
                    }
                }
                _ => {}
            }
        }
    }
    let mut remap = vec![0u32; n];
    let mut kept = Vec::with_capacity(n);
    let mut depth = 0i64;
    for (i, d) in descriptors.iter().enumerate() {
        depth += marks.get(i).copied().unwrap_or(0);
        if let Some(r) = remap.get_mut(i) {
            *r = kept.len() as u32;
        }
        if depth > 0 {
            kept.push(*d);
        }
    }
    if kept.len() == n {
        return;
    }
    for stream in streams.iter_mut() {
        for ins in stream.iter_mut() {
            if let Instr::DmaTrigger { first, .. } = ins {
                if let Some(&r) = remap.get(*first as usize) {
                    *first = r;
                }
            }
        }
    }
    *descriptors = kept;
}
