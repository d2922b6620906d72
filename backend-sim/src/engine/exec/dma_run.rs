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
//! In an execution that skips the hazard check because an earlier one at the same addresses
//! proved the program free of races (`ExecOptions::recheck_hazards`), copies of a run's
//! descriptors happen at the run's end rather than at each descriptor's: no agent can observe
//! the difference except through a race.
//!
//! **Replayed boundaries.** In an execution that checks hazards, every descriptor's accesses
//! must be checked at its start, in the order of the schedule without runs (the order decides
//! which access a report names first), and a racy program's bytes must not depend on runs. So
//! there the boundaries inside runs are replayed at the executor's next event
//! (`replay_runs_before`): every boundary before it, by tick, and at each tick first every
//! engine's finishing member (its copy) then every engine's starting one (its check), engines
//! in order — what the executor would have done had each boundary been an event, where nothing
//! else happens. A boundary at the event's own tick is taken in its engine's place in
//! `complete_dma_phases` (the finish) and `start_dma_engines` (the check), as an event's own
//! descriptors are. What a run saves there is the executor's passes at every boundary.
//!
//! Runs do not happen while descriptor events are recorded (those are logged in time order).
//! A run changes no tick, counter, event, semaphore, hazard report or byte of the result
//! (`engine::run_tests`).

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
        let member_end = end;
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
        self.run_mid[e] = if kept > 0 { member_end } else { u64::MAX };
    }

    /// A transfer was queued on `queue` at this tick: a run of its engine on another queue
    /// ends with the member in flight (one that ended at this tick finishes now, as it would
    /// have before this tick's issue pass), since the engine's next choice may differ.
    pub(super) fn cut_run(&mut self, e: usize, queue: usize) {
        // A replayed member that starts at this tick has not started yet: the engine chooses
        // again in the start pass, as it would after finishing the member before it.
        if self.mid_started & (1 << e) != 0 {
            if let Phase::Whole { queue: q, .. } = self.dma[e].phase {
                if q != queue {
                    self.mid_started &= !(1 << e);
                    self.set_idle(e);
                }
            }
            return;
        }
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

    /// The end of engine `e`'s member in flight when more of its run follow: a boundary
    /// inside the run (`u64::MAX` when the engine is not in such a run). `run_mid` holds it:
    /// every write of a phase that starts, continues or leaves a run writes it too (the start
    /// pass, `next_member`, `settle_run`, `set_idle`; the other phase writes follow one of
    /// these, which left it `u64::MAX`).
    pub(super) fn run_boundary(&self, e: usize) -> u64 {
        let m = self.run_mid[e];
        debug_assert_eq!(
            m != u64::MAX,
            matches!(self.dma[e].phase, Phase::Whole { more: 1.., .. }),
            "run_mid of engine {e} out of step with its phase"
        );
        m
    }

    /// Replays the boundaries inside runs before tick `t` (see the module docs), and notes
    /// whether one falls at `t` itself (`mid_due`).
    pub(super) fn replay_runs_before(&mut self, t: u64) {
        loop {
            // The earliest boundary `b`, the engines at it, and the next other boundary `b2`.
            // (`run_mid` alone: `u64::MAX` for an engine in no run, so it is never chosen.)
            let (mut b, mut b2) = (u64::MAX, u64::MAX);
            let mut at: u16 = 0;
            for (e, &m) in self.run_mid.iter().enumerate() {
                if m < b {
                    b2 = b;
                    b = m;
                    at = 1 << e;
                } else if m == b {
                    at |= 1 << e;
                } else if m < b2 {
                    b2 = m;
                }
            }
            if b >= t {
                self.mid_due = b == t && b != u64::MAX;
                return;
            }
            #[cfg(debug_assertions)]
            for e in Bits(at) {
                self.run_boundary(e);
            }
            // Every member ending at `b` finishes, then every next one starts.
            self.cross_boundary(at, b);
            // One engine alone before every other boundary: its next ones need no new search.
            if at.count_ones() == 1 {
                let e = at.trailing_zeros() as usize;
                loop {
                    let m = self.run_boundary(e);
                    if m >= b2.min(t) {
                        break;
                    }
                    self.cross_boundary(1 << e, m);
                }
            }
        }
    }

    /// The members of the engines in `at` ending at `b` finish, in engine order, then the next
    /// ones start, checked, in engine order.
    fn cross_boundary(&mut self, at: u16, b: u64) {
        let mut started: u16 = 0;
        for e in Bits(at) {
            if self.next_member(e, b) {
                started |= 1 << e;
            }
        }
        for e in Bits(started) {
            if let Phase::Whole { queue, .. } = self.dma[e].phase {
                self.check_next_descriptor(e, queue, b);
            }
        }
    }

    /// Engine `e`'s run member in flight ends at `b`: it finishes (its copy, counters) and the
    /// next member becomes the one in flight, starting at `b` (not yet checked). `false` when
    /// there is no next member (the engine is then idle).
    pub(super) fn next_member(&mut self, e: usize, b: u64) -> bool {
        let Phase::Whole {
            queue, start, more, ..
        } = self.dma[e].phase
        else {
            return false;
        };
        self.retire(e, queue, start, b);
        let next = if more > 0 {
            self.run_descriptor(queue, 0)
        } else {
            None
        };
        let Some(d) = next else {
            self.set_idle(e);
            return false;
        };
        let overhead = self.env.spec.dma_descriptor_ticks.max(1);
        let end = b.saturating_add(self.member_ticks(e, &d));
        self.dma[e].phase = Phase::Whole {
            data_from: b.saturating_add(overhead),
            units: dma_units(&d),
            queue,
            hbm: d.touches_hbm(),
            start: b,
            more: more - 1,
        };
        self.run_mid[e] = if more > 1 { end } else { u64::MAX };
        true
    }
}

/// The engines of a mask, lowest first (a `u16` holds every engine: checked below, with the
/// executor's `mid_started`).
struct Bits(u16);

const _: () = assert!(DMA_ENGINES <= 16, "engine masks are u16");

impl Iterator for Bits {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let e = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(e)
    }
}
