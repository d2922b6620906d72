//! Test hooks of the executor (`cfg(test)` only): force the two-phase DMA schedule or turn
//! runs off, count runs, or couple and uncouple a core at chosen ticks; a group's member
//! threads inherit the first two. Set by
//! `engine::whole_tests` and `engine::run_tests`, read by the run loop.

use std::cell::Cell;

thread_local! {
    /// Set: every descriptor runs as an overhead phase then a data phase (the schedule before
    /// `Phase::Whole`).
    pub(crate) static SPLIT_PHASES: Cell<bool> = const { Cell::new(false) };
    /// Set: no transfer's descriptors run back to back as one event (`dma_run.rs`).
    pub(crate) static NO_RUNS: Cell<bool> = const { Cell::new(false) };
    /// Runs planned, and runs cut short by a transfer queued on another queue of the engine,
    /// since the counters were last reset.
    pub(crate) static RUNS: Cell<u64> = const { Cell::new(0) };
    pub(crate) static CUTS: Cell<u64> = const { Cell::new(0) };
    /// Extra events every this many ticks (0: none): the schedule must not depend on them.
    pub(crate) static EXTRA_EVENTS: Cell<u64> = const { Cell::new(0) };
    /// `(next, every, others, coupled)`: at tick `next` (an event), then every `every` ticks
    /// (0: never), the core couples (other cores' `others` engines share
    /// HBM: the whole descriptors split into their exact phases) or uncouples, in turn.
    pub(crate) static COUPLING: Cell<(u64, u64, u64, bool)> = const { Cell::new((0, 0, 0, false)) };
    /// Times a coupled core found room beside the other cores' demand (`hbm_room`) and kept
    /// its HBM descriptors whole, since the counter was last reset.
    pub(crate) static ROOMY: Cell<u64> = const { Cell::new(0) };
}

/// The hooks that shape a schedule (`SPLIT_PHASES`, `NO_RUNS`) as set on this thread: the
/// member threads of a group take them from the thread that starts the group.
#[derive(Clone, Copy)]
pub(crate) struct Inherited {
    split: bool,
    no_runs: bool,
}

impl Inherited {
    pub(crate) fn take() -> Self {
        Self {
            split: SPLIT_PHASES.with(Cell::get),
            no_runs: NO_RUNS.with(Cell::get),
        }
    }

    pub(crate) fn apply(self) {
        SPLIT_PHASES.with(|c| c.set(self.split));
        NO_RUNS.with(|c| c.set(self.no_runs));
    }
}

/// The other cores' demand from tick `t` on when the core couples or uncouples there (see
/// `COUPLING`).
pub(crate) fn coupling_due(t: u64) -> Option<u64> {
    COUPLING.with(|c| {
        let (next, every, others, coupled) = c.get();
        if every == 0 || t < next {
            return None;
        }
        c.set((next + every, every, others, !coupled));
        Some(if coupled { 0 } else { others })
    })
}

/// The tick of the next coupling change (`u64::MAX`: none): an event of the executor.
pub(crate) fn next_coupling_change() -> u64 {
    COUPLING.with(|c| {
        let (next, every, _, _) = c.get();
        if every == 0 { u64::MAX } else { next }
    })
}
