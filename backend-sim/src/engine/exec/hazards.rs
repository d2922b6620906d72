//! Hazard detection: every access is checked against the records of earlier accesses it is not
//! ordered after (by vector clocks), then recorded; records every future access is ordered
//! after are pruned. Accesses are compared by their exact footprints (`isa::Footprint`:
//! interleaved accesses that share no byte do not conflict); reports show their bounding
//! boxes. The index itself is `shadow`.

use nrt_core::{NrtStatus, err};

use super::report::{Access, Actor, Hazard};
use super::{Executor, VClock};
use crate::engine::isa::Footprint;

impl Executor<'_, '_> {
    pub(super) fn check_and_record(
        &mut self,
        fp: Footprint,
        write: bool,
        agent: usize,
        clock: &VClock,
        actor: Actor,
    ) {
        let t = self.t;
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
        self.prune_at = (self.shadow.len() * 2).max(4096);
    }
}
