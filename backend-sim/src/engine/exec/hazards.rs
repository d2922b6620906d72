//! Hazard detection: every access is checked against the records of earlier accesses it is not
//! ordered after (by vector clocks), then recorded; records every future access is ordered
//! after are pruned. Accesses are compared by their exact footprints (`isa::Footprint`:
//! interleaved accesses that share no byte do not conflict); reports show their bounding
//! boxes. The index itself is `shadow`.

use nrt_core::{NrtStatus, err};

use super::report::{Access, Actor, Hazard};
use super::{Executor, PRUNE_MIN, VClock};
use crate::engine::isa::{DmaEndpoint, Footprint, MemKind};
use crate::engine::program::{LoopPlan, Program};

/// Every HBM byte range a program's descriptors can write (their HBM destinations, widened
/// by the reach of dynamic terms), per tensor and relative to the tensor's base, sorted and
/// merged: computed once when the program is loaded, placed at each execution's tensor
/// addresses by [`HbmWrites::absolute`]. Relative offsets are signed (a dynamic term may reach
/// before a destination's start); placement clamps to the address space as the executor's
/// arithmetic does.
#[derive(Clone, Debug, Default)]
pub(crate) struct HbmWrites(Vec<(u32, i128, i128)>);

impl HbmWrites {
    /// The write ranges of `program` (with its loop plan's dynamic destinations).
    pub(crate) fn of(program: &Program, plan: Option<&LoopPlan>) -> Self {
        let tensor = |e: &DmaEndpoint| match *e {
            DmaEndpoint::Hbm { tensor, .. } => tensor,
            DmaEndpoint::Block(b) => b.index,
            _ => 0,
        };
        let mut w: Vec<(u32, i128, i128)> = Vec::new();
        let mut add = |descs: &[crate::engine::isa::DmaDescriptor], lo: i64, hi: i64| {
            for d in descs.iter().filter(|d| d.dst.mem() == MemKind::Hbm) {
                let r = d.dst.region(&[], d.len);
                let (b0, b1) = (
                    i128::from(r.b0) + i128::from(lo),
                    i128::from(r.b1) + i128::from(hi),
                );
                if b1 > b0 {
                    w.push((tensor(&d.dst), b0, b1));
                }
            }
        };
        add(&program.descriptors, 0, 0);
        if let Some(plan) = plan {
            // Destinations dynamic terms move: every place they can reach.
            for &(first, end, lo, hi) in &plan.dst_spans {
                let descs = program
                    .descriptors
                    .get(first as usize..end as usize)
                    .unwrap_or(&[]);
                add(descs, lo, hi);
            }
        }
        w.sort_unstable();
        let mut merged: Vec<(u32, i128, i128)> = Vec::with_capacity(w.len());
        for (t, b0, b1) in w {
            match merged.last_mut() {
                Some(last) if last.0 == t && b0 <= last.2 => last.2 = last.2.max(b1),
                _ => merged.push((t, b0, b1)),
            }
        }
        Self(merged)
    }

    /// The ranges at the tensors' HBM addresses `bases` (a tensor missing from `bases`
    /// counts from 0), clamped to `[0, u64::MAX]`; empty ones dropped. Unsorted.
    pub(crate) fn absolute(&self, bases: &[u64]) -> Vec<(u64, u64)> {
        let clamp = |v: i128| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
        self.0
            .iter()
            .filter_map(|&(t, b0, b1)| {
                let base = i128::from(bases.get(t as usize).copied().unwrap_or(0));
                let (a0, a1) = (clamp(base + b0), clamp(base + b1));
                (a1 > a0).then_some((a0, a1))
            })
            .collect()
    }
}

impl Executor<'_, '_> {
    /// Checks an access by `agent` (vector clock `clock`) made at tick `t` against the records
    /// of earlier ones, reports the first conflict, and records it.
    pub(super) fn check_and_record(
        &mut self,
        fp: Footprint,
        write: bool,
        agent: usize,
        clock: &VClock,
        actor: Actor,
        t: u64,
    ) {
        if !self.env.check_hazards {
            return;
        }
        let region = fp.region();
        if !self.shadow.relevant(&region, write) {
            return;
        }
        if let Some(r) = self.shadow.find_conflict(&fp, write, agent, clock) {
            let h = Hazard {
                first: Access {
                    actor: r.actor,
                    region: r.region,
                    write: r.write,
                    tick: r.tick,
                },
                second: Access {
                    actor,
                    region,
                    write,
                    tick: t,
                },
            };
            if self.report.error.is_none() {
                self.report.status = NrtStatus::ExecCompletedWithErr;
                self.report.error = Some(err!(ExecCompletedWithErr, "{h}"));
            }
            if self.report.hazards.len() < self.opts.max_hazards {
                self.report.hazards.push(h);
            }
        }
        let epoch = clock.get(agent).copied().unwrap_or(0);
        self.shadow.insert(&fp, write, agent, epoch, actor, t);
        if self.shadow.len() >= self.prune_at {
            self.prune(clock);
        }
    }

    /// Drops records that every future access is ordered after: a future access comes from a
    /// running sequencer (whose clock only grows), from a queued transfer, or from a transfer
    /// a running sequencer has yet to trigger (whose clock covers the sequencer's), so the
    /// frontier is the element-wise minimum of those clocks. `current` is the clock of the
    /// access being recorded, whose owner (a sequencer or a queued transfer) has lent it out
    /// and holds an empty clock meanwhile.
    fn prune(&mut self, current: &VClock) {
        let mut frontier = vec![u32::MAX; self.n_agents];
        let observers = self
            .seqs
            .iter()
            .filter(|s| !s.halted)
            .map(|s| &s.clock)
            .chain(
                self.queues
                    .iter()
                    .flat_map(|q| q.iter().map(|tr| &tr.clock)),
            )
            .filter(|c| !c.is_empty())
            .chain(std::iter::once(current));
        for c in observers {
            for (f, &x) in frontier.iter_mut().zip(c.iter()) {
                *f = (*f).min(x);
            }
        }
        self.shadow.retire(&frontier);
        self.prune_at = (self.shadow.len() * 2).max(PRUNE_MIN);
    }
}
