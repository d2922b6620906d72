//! Test hooks of the executor (`cfg(test)` only): force the two-phase DMA schedule or turn
//! runs off, count runs, or couple and uncouple a core at chosen ticks. Set by
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
