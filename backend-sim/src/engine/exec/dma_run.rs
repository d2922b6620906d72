//! Runs: the descriptors of one transfer moved back to back by its engine as one event.
//!
//! An engine that starts a descriptor scheduled whole (`Phase::Whole`) while the transfer's
//! queue is the only non-empty one of the engine picks the same queue again at every
//! descriptor boundary (its round-robin has nothing else to choose), so the next descriptors'
//! starts and ends are known from their lengths alone: each starts when the one before ends,
//! after the per-descriptor overhead. The engine then schedules one event at the end of the
//! last of them (`more` descriptors after the first) and finishes them all there, in order,
//! each with its own start and end tick. Anything that could change the schedule ends the
//! run with the descriptor in flight, exact to the tick: a transfer queued on another queue
//! of the engine (`cut_run`), the other cores' demand leaving no room for this core's engines
//! (`split_whole_hbm`), the end of the execution (`settle_runs`). A coupled core also brings
//! its runs up to each quantum boundary to count its demand (`hbm_movers`); they go on.
//!
//! Copies of a run's descriptors happen at the run's end rather than at each descriptor's:
//! no agent can observe the difference except through a race, and runs happen only in an
//! execution that skips the hazard check because an earlier one at the same addresses proved
//! the program free of races (`ExecOptions::recheck_hazards`). They do not happen while
//! descriptor events are recorded (those are logged in time order) — so a run changes no
//! tick, counter, event, semaphore or byte of the result (`engine::run_tests`).

use super::cost::dma_units;
use super::{Executor, Phase};
use crate::engine::isa::{DmaDescriptor, shift_descriptor};
use crate::engine::memory::DMA_ENGINES;

/// Most descriptors after the first in one run: bounds the work of planning a run (a cut
/// transfer plans its remainder again when it next runs alone).
const MAX_RUN: u32 = 256;

impl Executor<'_, '_> {
    /// The descriptor `k` places after the next one of `queue`'s front transfer, shifted by
    /// its trigger's offsets (`None` past the transfer's end).
    fn run_descriptor(&self, queue: usize, k: u32) -> Option<DmaDescriptor> {
        let tr = self.queues[queue].front()?;
        let next = tr.next.checked_add(k)?;
        if next >= tr.count {
            return None;
        }
        let idx = tr.first.checked_add(next)?;
        let d = self.env.program.descriptors.get(idx as usize)?;
        shift_descriptor(d, tr.shift)
    }

    /// Ticks from a run member's start to its end: the per-descriptor overhead (never the
    /// transfer's fixed cost: a member is never a transfer's first descriptor), then its data
    /// at the engine's peak.
    fn member_ticks(&self, e: usize, d: &DmaDescriptor) -> u64 {
        let overhead = self.env.spec.dma_descriptor_ticks.max(1);
        overhead.saturating_add(self.data_ticks(e, dma_units(d)))
    }

    /// Whether a member of a run may run whole: not HBM, or HBM while nothing can slow it.
    fn member_whole(&self, d: &DmaDescriptor) -> bool {
        !d.touches_hbm() || self.whole_hbm
    }

    /// Plans the run of engine `e` starting with `queue`'s next descriptor, which ends at
    /// `end`: how many of the transfer's descriptors after it follow in the same run, and
    /// the end of the last.
    pub(super) fn plan_run(&self, e: usize, queue: usize, mut end: u64) -> (u32, u64) {
        let mut more = 0;
        while more < MAX_RUN {
            let Some(d) = self.run_descriptor(queue, more + 1) else {
                break;
            };
            if !self.member_whole(&d) {
                break;
            }
            end = end.saturating_add(self.member_ticks(e, &d));
            more += 1;
        }
        #[cfg(test)]
        if more > 0 {
            super::test_hooks::RUNS.with(|c| c.set(c.get() + 1));
        }
        (more, end)
    }

    /// Brings engine `e`'s run up to date: finishes every member that ends by `until`, in
    /// order, at its own end tick, and drops from the run every member that would start at
    /// or after `cut_from` (they start afresh when the engine next chooses a queue). The
    /// engine is left with the member in flight, or idle when none is.
    pub(super) fn settle_run(&mut self, e: usize, until: u64, cut_from: u64) {
        let Phase::Whole {
            mut data_from,
            mut units,
            queue,
            mut hbm,
            mut start,
            mut more,
        } = self.dma[e].phase
        else {
            return;
        };
        let overhead = self.env.spec.dma_descriptor_ticks.max(1);
        let mut end = data_from.saturating_add(self.data_ticks(e, units));
        while end <= until {
            self.retire(e, queue, start, end);
            let next = if more > 0 && end < cut_from {
                self.run_descriptor(queue, 0)
            } else {
                None
            };
            let Some(d) = next else {
                self.set_idle(e);
                return;
            };
            more -= 1;
            start = end;
            data_from = end.saturating_add(overhead);
            units = dma_units(&d);
            hbm = d.touches_hbm();
            end = start.saturating_add(self.member_ticks(e, &d));
        }
        // `start` is in flight: keep the members after it that start before `cut_from`.
        let mut kept = 0;
        while kept < more && end < cut_from {
            let Some(d) = self.run_descriptor(queue, kept + 1) else {
                break;
            };
            end = end.saturating_add(self.member_ticks(e, &d));
            kept += 1;
        }
        #[cfg(test)]
        if kept < more && cut_from <= until {
            super::test_hooks::CUTS.with(|c| c.set(c.get() + 1));
        }
        self.dma[e].phase = Phase::Whole {
            data_from,
            units,
            queue,
            hbm,
            start,
            more: kept,
        };
        self.dma_next[e] = end;
    }

    /// A transfer was queued on `queue` at this tick: a run of its engine on another queue
    /// ends with the member in flight (one that ended at this tick finishes now, as it would
    /// have before this tick's issue pass), since the engine's next choice may differ.
    pub(super) fn cut_run(&mut self, e: usize, queue: usize) {
        if let Some(Phase::Whole {
            queue: q,
            more: 1..,
            ..
        }) = self.dma.get(e).map(|d| d.phase)
        {
            if q != queue {
                let t = self.t;
                self.settle_run(e, t, t);
            }
        }
    }

    /// At the end of an execution: the members of runs in flight that ended by now.
    pub(super) fn settle_runs(&mut self) {
        let t = self.t;
        for e in 0..DMA_ENGINES {
            if matches!(self.dma[e].phase, Phase::Whole { more: 1.., .. }) {
                self.settle_run(e, t, u64::MAX);
            }
        }
    }
}
