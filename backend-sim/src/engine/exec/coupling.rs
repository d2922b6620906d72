//! Coupling with the device's other executing cores (`engine::share`): at quantum boundaries
//! a core publishes its HBM demand and learns theirs, which re-rates its HBM transfers and
//! decides whether its HBM descriptors may run whole (`Phase::Whole`) until the next boundary.

use super::{Executor, Phase};
use crate::engine::memory::DMA_ENGINES;
use crate::engine::share::QUANTUM_TICKS;

impl Executor<'_, '_> {
    /// At a quantum boundary, while other cores of the device execute: publishes this core's
    /// HBM demand and learns theirs (`engine::share`); their change re-rates this core's HBM
    /// transfers, and decides whether its HBM descriptors may run whole (`set_coupled`).
    pub(super) fn meet_others(&mut self) {
        let Some(link) = self.env.link else {
            return;
        };
        if !link.coupled() {
            if self.next_meet != u64::MAX {
                // Uncoupling: the board gets this core's demand as it is now (a core that
                // starts executing reads it until this one couples again).
                self.next_meet = u64::MAX;
                self.publish_movers();
            }
            if self.others != 0 {
                self.others = 0;
                self.rates_dirty = true;
            }
            self.set_coupled(false);
            return;
        }
        if self.next_meet == u64::MAX {
            // Coupling: the others read this core's demand from now on.
            self.next_meet = (self.t / QUANTUM_TICKS + 1) * QUANTUM_TICKS;
            self.publish_movers();
        }
        while self.t >= self.next_meet {
            let movers = self.hbm_movers();
            let others = u64::from(link.meet(self.next_meet / QUANTUM_TICKS, movers as u32));
            self.published = movers;
            self.next_meet += QUANTUM_TICKS;
            if others != self.others {
                self.others = others;
                self.rates_dirty = true;
                let peak = &mut self.report.peak_peer_hbm_engines;
                *peak = (*peak).max(others as u32);
            }
        }
        self.set_coupled(true);
    }

    /// Whether the device's bandwidth covers all of this core's engines at their peaks beside
    /// the other cores' `others` (as of the last boundary): then no engine of this core can
    /// be slowed before the next boundary, whatever its own engines do.
    fn hbm_room(&self) -> bool {
        let spec = self.env.spec;
        self.hbm_covers_engines
            && spec.hbm_rate() / (DMA_ENGINES as u64).saturating_add(self.others)
                >= spec.engine_rate()
    }

    /// Whether this core's HBM descriptors run whole (`Phase::Whole`). Uncoupled: where the
    /// device's bandwidth covers every engine of the core. Coupled: also only while the
    /// other cores' demand leaves room for all of them (`hbm_room`), which can change only at
    /// a boundary; without room, the ones scheduled whole become the phases they are in at
    /// this tick, and new ones run as two phases. Either way every engine runs at the rate
    /// `update_rates` would give it: the schedule is the two-phase one.
    pub(super) fn set_coupled(&mut self, coupled: bool) {
        let whole = if coupled {
            self.hbm_room()
        } else {
            self.hbm_covers_engines
        };
        if whole {
            #[cfg(test)]
            if coupled {
                super::test_hooks::ROOMY.with(|c| c.set(c.get() + 1));
            }
            self.whole_hbm = true;
        } else if self.whole_hbm {
            self.whole_hbm = false;
            self.split_whole_hbm();
        }
    }

    /// The engines moving HBM data at this tick: the data phases `n_hbm` counts, and the HBM
    /// descriptors scheduled whole whose data phase has begun (a run is first brought up to
    /// this tick, its members that ended finished as at a cut: `settle_run`). What `n_hbm`
    /// would be had every descriptor run as two phases.
    pub(super) fn hbm_movers(&mut self) -> u64 {
        let t = self.t;
        let mut n = self.n_hbm;
        for e in 0..DMA_ENGINES {
            if matches!(self.dma[e].phase, Phase::Whole { more: 1.., .. }) {
                self.settle_run(e, t, u64::MAX);
            }
            if let Phase::Whole {
                data_from,
                hbm: true,
                ..
            } = self.dma[e].phase
            {
                n += u64::from(data_from <= t);
            }
        }
        n
    }

    /// Publishes this core's demand now (`hbm_movers`) on the device's board.
    pub(super) fn publish_movers(&mut self) {
        if let Some(link) = self.env.link {
            let n = self.hbm_movers();
            self.published = n;
            link.board.publish(link.core, n as u32);
        }
    }
}
