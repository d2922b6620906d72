//! Loops in the synchronisation model (`Kernel::for_range`, `loops/`).
//!
//! A loop of `N ≥ 4` iterations is recorded as three passes: iteration 0 and iteration 1 as
//! plain operations, then one *template* for iterations `2..N` (the loop body in the program,
//! iteration register `r = i - 2`). Every footprint of iterations 1.. is the bounding box of
//! the operation's accesses over all of them, so the template's accesses are the same in
//! every iteration, and iteration 1's records stand for "the previous iteration" when the
//! template is planned. In the template:
//!
//! * **Waits are needs.** Each operation waits for the latest logged conflicting operation of
//!   every other agent — no pruning by what the waiter knows, as knowledge gathered in one
//!   iteration need not hold, shifted, in the next. A conflict with iteration 1's record of
//!   an operation of the loop stands for the previous iteration's instance, one with the
//!   template's own earlier record for this iteration's: both move by the agent's
//!   operations per iteration (`span`) with the register (`Wait::deps`). A conflict with an
//!   earlier record (before iteration 1) is the same in every iteration: iterations 1.. do
//!   not conflict, their footprints being the same boxes.
//! * **Counts are affine.** An agent's position `p` in iteration `2 + r` is `p + span · r`;
//!   a DMA queue's semaphore counts its transfers (the count is the position), an engine's
//!   counts its signals, which iterations 1 and 2.. place alike (`closed_signals`), so the
//!   count is affine too, with a step of the signals per iteration.
//! * **After the loop** the template's records are moved to the last iteration's positions,
//!   every agent's position advances by the iterations not recorded, and their knowledge is
//!   what iteration 2 knew (true later too: knowledge only grows).
//!
//! A signal is kept at a *canonical* position — the template's (iteration 2's) for an
//! operation of iterations 2..N — and counted with its multiplicity (`ordinal`).

use std::collections::BTreeSet;

use nrt_core::{Error, err};

use super::agent::{AGENTS, Agent};
use super::span::LoopInfo;
use super::{ENGINES, Sync};

impl Sync {
    /// Whether a loop template is being recorded (waits are then needs, unpruned).
    pub(crate) fn generic(&self) -> bool {
        !self.active.is_empty()
    }

    /// Whether the kernel has loops.
    pub(crate) fn has_loops(&self) -> bool {
        !self.loops.is_empty()
    }

    /// Starts a loop, before its iteration 1: returns its id.
    pub(crate) fn loop_begin(&mut self) -> Result<usize, Error> {
        if self.loops.len() >= usize::from(u16::MAX) {
            return Err(err!(
                Invalid,
                "for_range: more than 65535 loops in one kernel"
            ));
        }
        self.loops.push(LoopInfo {
            start1: self.pos,
            start2: self.pos,
            span: [0; AGENTS],
            iters: 0,
            closed: false,
        });
        Ok(self.loops.len() - 1)
    }

    /// Starts loop `id`'s template: `iters` iterations on register `reg`.
    pub(crate) fn loop_template(&mut self, id: usize, reg: u8, iters: u32) {
        if let Some(l) = self.loops.get_mut(id) {
            l.start2 = self.pos;
            l.iters = iters;
        }
        self.active.push((reg, id));
    }

    /// Ends loop `id`'s template: the records and positions move to its last iteration.
    pub(crate) fn loop_end(&mut self, id: usize) -> Result<(), Error> {
        self.active.pop();
        let l = self
            .loops
            .get_mut(id)
            .ok_or_else(|| err!(Invalid, "internal: no loop {id}"))?;
        let mut span = [0u32; AGENTS];
        for (a, s) in span.iter_mut().enumerate() {
            *s = self.pos[a] - l.start2[a];
            if *s != l.start2[a] - l.start1[a] {
                return Err(err!(
                    Invalid,
                    "internal: for_range: iterations 1 and 2 record different operations"
                ));
            }
        }
        l.span = span;
        l.closed = true;
        let (start2, more) = (l.start2, l.iters.saturating_sub(1));
        let mut moved = [0u32; AGENTS];
        for a in 0..AGENTS {
            let d = u64::from(span[a]) * u64::from(more);
            let end = u64::from(self.pos[a]) + d;
            if end > u64::from(u32::MAX) {
                return Err(err!(
                    Invalid,
                    "for_range: the kernel would run more than 2^32 operations on one engine \
                     or DMA queue"
                ));
            }
            moved[a] = d as u32;
            let last = self.snaps[a].last().cloned();
            if let Some(s) = last {
                self.snaps[a].extend(std::iter::repeat_n(s, d as usize));
            }
            self.pos[a] = end as u32;
        }
        self.log.move_positions(|ag, p| {
            let a = ag.index();
            if p > start2[a] { p + moved[a] } else { p }
        });
        Ok(())
    }

    /// The loops of the template being recorded that move position `pos` of `agent`: those
    /// whose iteration 1 started before it.
    pub(crate) fn deps(&self, agent: Agent, pos: u32) -> [Option<u16>; nrt_sim::engine::LOOP_REGS] {
        let mut d = [None; nrt_sim::engine::LOOP_REGS];
        for &(reg, id) in &self.active {
            let moves = self
                .loops
                .get(id)
                .is_some_and(|l| pos > l.start1[agent.index()]);
            if let (true, Some(slot)) = (moves, d.get_mut(usize::from(reg))) {
                *slot = Some(id as u16);
            }
        }
        d
    }

    /// The canonical position of `pos` of `agent`: the template's instance of an operation of
    /// a closed loop's iterations 2..N.
    pub(crate) fn canonical(&self, agent: Agent, mut pos: u32) -> u32 {
        let a = agent.index();
        for l in &self.loops {
            let (first, s) = (l.start2[a], l.span[a]);
            if l.closed && s > 0 && pos > first + s {
                let off = pos - first - 1;
                if u64::from(off) < u64::from(s) * u64::from(l.iters) {
                    pos = first + 1 + off % s;
                }
            }
        }
        pos
    }

    /// Every engine's signals, closed so that each loop's iteration 1 signals where its
    /// template does (and the reverse): the count per iteration is then one number.
    pub(crate) fn closed_signals(&self) -> Vec<BTreeSet<u32>> {
        let mut sets: Vec<BTreeSet<u32>> = self.signals.to_vec();
        for (a, set) in sets.iter_mut().enumerate().take(ENGINES) {
            loop {
                let mut add = Vec::new();
                for l in self.loops.iter().filter(|l| l.closed) {
                    let (s1, s2, s) = (l.start1[a], l.start2[a], l.span[a]);
                    if s == 0 {
                        continue;
                    }
                    for &q in set.range(s1 + 1..=s2 + s) {
                        let other = if q > s2 { q - s } else { q + s };
                        if !set.contains(&other) {
                            add.push(other);
                        }
                    }
                }
                if add.is_empty() {
                    break;
                }
                set.extend(add);
            }
        }
        sets
    }

    /// An engine's signals (`set`, canonical), each with the loops holding it (outermost
    /// first), for [`Sync::ordinal`].
    pub(crate) fn signal_table(&self, set: &BTreeSet<u32>, agent: Agent) -> SignalTable {
        let a = agent.index();
        let rows = set
            .iter()
            .map(|&q| {
                let chain = (0..self.loops.len())
                    .filter(|&i| self.loops.get(i).is_some_and(|l| l.holds(a, q)))
                    .collect();
                (q, chain)
            })
            .collect();
        SignalTable { agent: a, rows }
    }

    /// The count of an agent's semaphore once its operation `pos` is done: a DMA queue's is
    /// `pos`; an engine's counts its signals (`table`) at positions up to `pos`, every
    /// iteration counted.
    pub(crate) fn ordinal(&self, table: Option<&SignalTable>, pos: u32) -> u64 {
        let Some(t) = table else {
            return u64::from(pos);
        };
        let end = t.rows.partition_point(|(q, _)| *q <= pos);
        t.rows
            .get(..end)
            .unwrap_or_default()
            .iter()
            .map(|(q, chain)| {
                let chain: Vec<&LoopInfo> =
                    chain.iter().filter_map(|&i| self.loops.get(i)).collect();
                instances_upto(&chain, t.agent, *q, i64::from(pos))
            })
            .sum()
    }

    /// The step per iteration of loop `id` of a wait on `agent`: its operations per
    /// iteration for a DMA queue, its signals per iteration (`table`) for an engine.
    pub(crate) fn step(&self, table: Option<&SignalTable>, agent: Agent, id: usize) -> i64 {
        let Some(l) = self.loops.get(id) else {
            return 0;
        };
        let a = agent.index();
        let (first, s) = (l.start2[a], l.span[a]);
        match table {
            Some(_) => {
                let hi = self.ordinal(table, first + s);
                let lo = self.ordinal(table, first);
                hi as i64 - lo as i64
            }
            None => i64::from(s),
        }
    }
}

/// An engine's signals with the loops holding each ([`Sync::signal_table`]).
pub(crate) struct SignalTable {
    agent: usize,
    rows: Vec<(u32, Vec<usize>)>,
}

/// How many instances of canonical position `q` (inside the loops of `chain`, outermost
/// first) are at positions `≤ pos`. Instances are ordered: an outer iteration holds every
/// instance of the inner loops.
fn instances_upto(chain: &[&LoopInfo], a: usize, q: u32, pos: i64) -> u64 {
    let q = i64::from(q);
    if pos < q {
        return 0;
    }
    let Some((l, inner)) = chain.split_first() else {
        return 1;
    };
    let s = i64::from(l.span[a]).max(1);
    let per: u64 = inner.iter().map(|l| u64::from(l.iters)).product();
    let t = (pos - q) / s;
    if t >= i64::from(l.iters) {
        return u64::from(l.iters) * per;
    }
    t as u64 * per + instances_upto(inner, a, q as u32, pos - t * s)
}
