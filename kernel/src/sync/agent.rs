//! Agents — the units whose work is ordered on its own: the five engine sequencers and the
//! DMA queues — and knowledge clocks: per agent, how many of its operations are known to be
//! complete.
//!
//! Each DMA queue the kernel uses is triggered by one sequencer only (queue number = the
//! triggering engine's index), so the order of its transfers is that engine's program order
//! and a count of completed transfers names exactly which ones completed.

use nrt_sim::engine::{DMA_ENGINES, EngineId};

/// Engines (sequencers).
pub(crate) const ENGINES: usize = 5;
/// Agents: the engines, then per DMA engine one queue per triggering engine.
pub(crate) const AGENTS: usize = ENGINES + DMA_ENGINES * ENGINES;

/// Per agent, a count of its operations (positions start at 1; 0 = none).
pub(crate) type Clock = [u32; AGENTS];

/// An engine sequencer or a DMA queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Agent(u16);

impl Agent {
    /// The sequencer of `e`.
    pub(crate) const fn engine(e: EngineId) -> Self {
        Agent(e.index() as u16)
    }

    /// Queue `trigger.index()` of DMA engine `dma`, triggered by `trigger` only.
    pub(crate) const fn queue(dma: u8, trigger: EngineId) -> Self {
        Agent((ENGINES + dma as usize * ENGINES + trigger.index()) as u16)
    }

    /// Index into a [`Clock`].
    pub(crate) const fn index(self) -> usize {
        self.0 as usize
    }

    /// The agent of a clock index.
    pub(crate) const fn from_index(i: usize) -> Self {
        Agent(i as u16)
    }

    /// The engine, for a sequencer.
    pub(crate) fn as_engine(self) -> Option<EngineId> {
        EngineId::ALL.get(self.index()).copied()
    }

    /// `(DMA engine, queue)`, for a DMA queue.
    pub(crate) fn as_queue(self) -> Option<(u8, u8)> {
        let i = self.index().checked_sub(ENGINES)?;
        Some(((i / ENGINES) as u8, (i % ENGINES) as u8))
    }
}

/// `a = max(a, b)` element-wise.
pub(crate) fn join(a: &mut Clock, b: &Clock) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = (*x).max(*y);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn agents_round_trip() {
        assert_eq!(
            Agent::engine(EngineId::Scalar).as_engine(),
            Some(EngineId::Scalar)
        );
        let q = Agent::queue(15, EngineId::GpSimd);
        assert_eq!(q.index(), AGENTS - 1);
        assert_eq!(q.as_queue(), Some((15, 4)));
        assert_eq!(q.as_engine(), None);
        assert_eq!(Agent::engine(EngineId::Sync).as_queue(), None);
    }
}
