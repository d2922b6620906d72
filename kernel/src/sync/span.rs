//! A loop's positions in the synchronisation model (see `loops.rs`).

use super::agent::Clock;

/// One loop's positions.
#[derive(Clone, Debug)]
pub(crate) struct LoopInfo {
    /// Positions before iteration 1.
    pub(super) start1: Clock,
    /// Positions before the template (iteration 2, register 0).
    pub(super) start2: Clock,
    /// Per agent, operations per iteration (set when the loop closes).
    pub(super) span: Clock,
    /// Iterations of the template (`N - 2`).
    pub(super) iters: u32,
    pub(super) closed: bool,
}

impl LoopInfo {
    /// Whether `pos` of agent `a` is one of the template's (register-0) positions.
    pub(super) fn holds(&self, a: usize, pos: u32) -> bool {
        let (first, s) = (self.start2[a], self.span[a]);
        self.closed && s > 0 && pos > first && pos <= first + s
    }
}
