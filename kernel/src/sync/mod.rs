//! Automatic synchronisation: which semaphore waits an operation needs, where the signals go,
//! and which engine triggers a DMA.
//!
//! The model (see `exec/` of the engine): a sequencer runs its stream in order and starts an
//! instruction only when the previous one has completed (a `LoadStationary` may overlap the
//! `MultiplyMoving` before it, which reads and writes nothing it writes, and the semaphore
//! waits and signals between them issue behind the matmul, a signal counting from the
//! matmul's completion); a DMA queue runs its
//! transfers one after the other; a `DmaTrigger` enqueues a transfer once every earlier
//! instruction of its sequencer has completed. So an agent (a sequencer or a DMA queue) is
//! ordered with itself for free, and ordering between agents goes through semaphores.
//!
//! Every agent that others wait for owns one semaphore, a monotone counter: a sequencer adds 1
//! (`SemInc`) right after each of its operations some other agent must wait for; a DMA queue
//! adds 1 when each of its transfers completes (the trigger's own increment, free). "Operation
//! `n` of agent `A` is complete" is then "semaphore(A) ≥ the ordinal of the signal that follows
//! it", a `SemWait … Ge`. Semaphores count up and never reset, so a wait's value is a plain
//! count — affine in a loop index once the program format has loops.
//!
//! Knowledge: each sequencer carries a clock — per agent, how many of its operations are known
//! complete. A wait on `(A, n)` teaches the waiter everything `A` knew right after operation
//! `n` (stored per operation); a transfer knows what its trigger knew and what its queue's
//! earlier transfers knew. An operation's needs are, per agent, the latest conflicting access
//! in the log (RAW, WAR, WAW); the waits emitted are the needs the waiter does not know yet,
//! minus those implied by another emitted wait. Signals exist only where someone waits.

mod agent;
mod log;
mod loops;
mod span;

use std::collections::BTreeSet;
use std::rc::Rc;

use nrt_sim::engine::EngineId;

pub(crate) use agent::{AGENTS, Agent, Clock, ENGINES};
pub(crate) use log::{Access, MemKey, Rect};
pub(crate) use loops::SignalTable;

use agent::join;
use log::Log;
use span::LoopInfo;

/// A wait for operation `pos` of `agent`; inside loops, `deps[r]` names the loop (of
/// iteration register `r`) whose iterations move the operation waited for (see `loops.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Wait {
    pub(crate) agent: Agent,
    pub(crate) pos: u32,
    pub(crate) deps: [Option<u16>; nrt_sim::engine::LOOP_REGS],
}

impl Wait {
    /// A wait outside loops.
    #[cfg(test)]
    pub(crate) fn plain(agent: Agent, pos: u32) -> Wait {
        Wait {
            agent,
            pos,
            deps: [None; nrt_sim::engine::LOOP_REGS],
        }
    }
}

/// The transfers of one DMA operation on one DMA engine, and what they access.
#[derive(Clone, Debug)]
pub(crate) struct DmaChunk {
    pub(crate) dma: u8,
    pub(crate) accesses: Vec<Access>,
}

/// What [`Sync::dma_op`] decided.
#[derive(Clone, Debug)]
pub(crate) struct DmaPlan {
    /// The sequencer that triggers the transfers.
    pub(crate) trigger: EngineId,
    /// Waits to place on it before the triggers.
    pub(crate) waits: Vec<Wait>,
}

/// The synchronisation state of a kernel being built.
#[derive(Clone, Debug)]
pub(crate) struct Sync {
    /// Operations issued per agent.
    pos: Clock,
    /// Per sequencer, the operations of other agents it knows complete (its own entry is
    /// not maintained: a sequencer knows its own operations).
    know: [Rc<Clock>; ENGINES],
    /// Per agent and operation (index `pos - 1`), what the agent knew once that operation was
    /// done (its own entry is implied by the position).
    snaps: Vec<Vec<Rc<Clock>>>,
    /// Per sequencer, the operations after which it signals its semaphore.
    signals: [BTreeSet<u32>; ENGINES],
    log: Log,
    /// Every loop recorded so far (`loops.rs`).
    loops: Vec<LoopInfo>,
    /// The loops whose template is being recorded: (iteration register, loop).
    active: Vec<(u8, usize)>,
}

impl Default for Sync {
    fn default() -> Self {
        let zero = Rc::new([0u32; AGENTS]);
        Self {
            pos: [0; AGENTS],
            know: core::array::from_fn(|_| zero.clone()),
            snaps: vec![Vec::new(); AGENTS],
            signals: Default::default(),
            log: Log::default(),
            loops: Vec::new(),
            active: Vec::new(),
        }
    }
}

impl Sync {
    /// Operations issued so far by `agent`.
    pub(crate) fn position(&self, agent: Agent) -> u32 {
        self.pos[agent.index()]
    }

    /// Sequencer `e`'s positions followed by a signal, ascending.
    #[cfg(test)]
    pub(crate) fn signals(&self, e: EngineId) -> &BTreeSet<u32> {
        &self.signals[e.index()]
    }

    /// Whether knowing `(by, by_pos)` complete implies `(of, of_pos)` complete.
    fn implies(&self, by: Agent, by_pos: u32, of: Agent, of_pos: u32) -> bool {
        if by == of {
            return by_pos >= of_pos;
        }
        if self.generic() {
            return false;
        }
        self.snap(by, by_pos)
            .is_some_and(|s| s[of.index()] >= of_pos)
    }

    fn snap(&self, a: Agent, pos: u32) -> Option<&Clock> {
        let i = usize::try_from(pos.checked_sub(1)?).ok()?;
        self.snaps.get(a.index())?.get(i).map(|c| &**c)
    }

    /// What sequencer `e` knows, its own operations included (inside a loop template only
    /// its own operations: see `loops.rs`).
    fn knowledge(&self, e: EngineId) -> Clock {
        let mut k = if self.generic() {
            [0; AGENTS]
        } else {
            *self.know[e.index()]
        };
        k[Agent::engine(e).index()] = self.pos[Agent::engine(e).index()];
        k
    }

    /// The waits that make `needs` known to an agent knowing `have`: the unknown needs, minus
    /// those another of them implies.
    fn plan(&self, needs: &Clock, have: &Clock) -> Vec<Wait> {
        let cands: Vec<Wait> = needs
            .iter()
            .zip(have.iter())
            .enumerate()
            .filter(|&(_, (n, h))| n > h)
            .map(|(i, (&n, _))| Wait {
                agent: Agent::from_index(i),
                pos: n,
                deps: self.deps(Agent::from_index(i), n),
            })
            .collect();
        let mut dropped = vec![false; cands.len()];
        for i in 0..cands.len() {
            let c = cands[i];
            let implied = cands.iter().enumerate().any(|(j, d)| {
                j != i
                    && !dropped.get(j).copied().unwrap_or(true)
                    && self.implies(d.agent, d.pos, c.agent, c.pos)
            });
            if let Some(x) = dropped.get_mut(i) {
                *x = implied;
            }
        }
        cands
            .into_iter()
            .zip(dropped)
            .filter_map(|(c, d)| (!d).then_some(c))
            .collect()
    }

    /// Makes sequencer `e` wait for `waits`: learns what they imply and asks their
    /// sequencers for signals.
    fn apply(&mut self, e: EngineId, waits: &[Wait]) {
        for w in waits {
            let mut k = *self.know[e.index()];
            if let Some(s) = self.snap(w.agent, w.pos) {
                join(&mut k, s);
            }
            let slot = &mut k[w.agent.index()];
            *slot = (*slot).max(w.pos);
            self.know[e.index()] = Rc::new(k);
            if let Some(src) = w.agent.as_engine() {
                let q = self.canonical(w.agent, w.pos);
                self.signals[src.index()].insert(q);
            }
        }
    }

    /// An operation of sequencer `e` with `accesses`: returns the waits to emit before it.
    pub(crate) fn engine_op(&mut self, e: EngineId, accesses: &[Access]) -> Vec<Wait> {
        let me = Agent::engine(e);
        let mut needs = [0u32; AGENTS];
        self.log.needs(accesses, me, &mut needs);
        let waits = self.plan(&needs, &self.knowledge(e));
        self.apply(e, &waits);
        let p = self.pos[me.index()].saturating_add(1);
        self.pos[me.index()] = p;
        let snap = self.know[e.index()].clone();
        self.snaps[me.index()].push(snap);
        self.log.record(accesses, me, p);
        waits
    }

    /// Per chunk, its conflicts with every agent (its own queue's included): what
    /// [`Sync::dma_needs`] starts from for each candidate trigger, searched once.
    fn chunk_conflicts(&self, chunks: &[DmaChunk]) -> Vec<Clock> {
        chunks
            .iter()
            .map(|c| {
                let mut n = [0u32; AGENTS];
                self.log.needs_all(&c.accesses, &mut n);
                n
            })
            .collect()
    }

    /// The needs of a DMA operation triggered by `t`: per chunk, its conflicts except with
    /// its own queue, less what the queue's earlier transfers knew. `conflicts` are the
    /// chunks' [`Sync::chunk_conflicts`].
    fn dma_needs(&self, t: EngineId, chunks: &[DmaChunk], conflicts: &[Clock]) -> Clock {
        let mut all = [0u32; AGENTS];
        for (c, found) in chunks.iter().zip(conflicts) {
            let q = Agent::queue(c.dma, t);
            let mut n = *found;
            // Transfers on one queue are ordered by it: no need on its own earlier accesses.
            n[q.index()] = 0;
            // `implies(q, prev, a, x)` for every agent, with the queue's snapshot looked up
            // once (the queue's own slot is already 0); not inside a loop template.
            if let Some(s) = self.snap(q, self.position(q)).filter(|_| !self.generic()) {
                for (x, &known) in n.iter_mut().zip(s.iter()) {
                    if known >= *x {
                        *x = 0;
                    }
                }
            }
            join(&mut all, &n);
        }
        all
    }

    /// Plans a DMA operation: the triggering sequencer (`trigger`, or else the compute engine
    /// whose latest operation the transfers depend on when that needs no wait, or else Sync)
    /// and the waits it must emit first.
    pub(crate) fn dma_plan(&self, trigger: Option<EngineId>, chunks: &[DmaChunk]) -> DmaPlan {
        let conflicts = self.chunk_conflicts(chunks);
        let plan_for = |t: EngineId| {
            let needs = self.dma_needs(t, chunks, &conflicts);
            let waits = self.plan(&needs, &self.knowledge(t));
            (needs, waits)
        };
        if let Some(t) = trigger {
            let (_, waits) = plan_for(t);
            return DmaPlan { trigger: t, waits };
        }
        for e in [
            EngineId::Tensor,
            EngineId::Vector,
            EngineId::Scalar,
            EngineId::GpSimd,
        ] {
            let (needs, waits) = plan_for(e);
            let latest = self.position(Agent::engine(e));
            if latest > 0 && needs[Agent::engine(e).index()] == latest && waits.is_empty() {
                return DmaPlan { trigger: e, waits };
            }
        }
        let (_, waits) = plan_for(EngineId::Sync);
        DmaPlan {
            trigger: EngineId::Sync,
            waits,
        }
    }

    /// Commits a DMA operation planned by [`Sync::dma_plan`]: one transfer per chunk, each on
    /// queue `(chunk.dma, trigger)`. Returns each transfer's `(queue, position)`.
    pub(crate) fn dma_op(&mut self, plan: &DmaPlan, chunks: &[DmaChunk]) -> Vec<(Agent, u32)> {
        let t = plan.trigger;
        self.apply(t, &plan.waits);
        let base = self.knowledge(t);
        let mut out = Vec::with_capacity(chunks.len());
        for c in chunks {
            let q = Agent::queue(c.dma, t);
            let prev = self.position(q);
            let mut k = base;
            if let Some(s) = self.snap(q, prev) {
                join(&mut k, s);
            }
            let p = prev.saturating_add(1);
            self.pos[q.index()] = p;
            k[q.index()] = p;
            self.snaps[q.index()].push(Rc::new(k));
            self.log.record(&c.accesses, q, p);
            out.push((q, p));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn sb(write: bool, b0: u64, b1: u64) -> Access {
        Access::of_rects(
            MemKey::Sbuf,
            write,
            vec![Rect {
                p0: 0,
                p1: 128,
                b0,
                b1,
            }],
        )
    }

    #[test]
    fn waits_are_minimal_and_transitive() {
        let mut s = Sync::default();
        // A load (Sync-triggered) into [0, 64), then VectorE reads it: one wait on the queue.
        let chunks = vec![DmaChunk {
            dma: 0,
            accesses: vec![sb(true, 0, 64)],
        }];
        let plan = s.dma_plan(None, &chunks);
        assert_eq!(plan.trigger, EngineId::Sync);
        assert!(plan.waits.is_empty());
        let t = s.dma_op(&plan, &chunks);
        let q = Agent::queue(0, EngineId::Sync);
        assert_eq!(t, vec![(q, 1)]);
        let w = s.engine_op(EngineId::Vector, &[sb(false, 0, 64), sb(true, 64, 128)]);
        assert_eq!(w, vec![Wait::plain(q, 1)]);
        // ScalarE reads what VectorE wrote and what the DMA wrote: waiting on VectorE implies
        // the DMA.
        let w = s.engine_op(EngineId::Scalar, &[sb(false, 0, 128), sb(true, 128, 192)]);
        assert_eq!(w, vec![Wait::plain(Agent::engine(EngineId::Vector), 1)]);
        assert!(s.signals(EngineId::Vector).contains(&1));
        // VectorE again reads its own output and ScalarE's: one wait on ScalarE.
        let w = s.engine_op(EngineId::Vector, &[sb(false, 64, 192), sb(true, 192, 256)]);
        assert_eq!(w.len(), 1);
        // A store of VectorE's latest output is triggered by VectorE, with no wait.
        let chunks = vec![DmaChunk {
            dma: 1,
            accesses: vec![sb(false, 192, 256)],
        }];
        let plan = s.dma_plan(None, &chunks);
        assert_eq!(plan.trigger, EngineId::Vector);
        assert!(plan.waits.is_empty());
        s.dma_op(&plan, &chunks);
        // WAR: GpSimdE overwrites [0, 64): read by VectorE op 1 (which it learns via ScalarE?
        // no: it knows nothing yet) -> waits on VectorE 1 and ScalarE 1? ScalarE 1 read
        // [0, 128) and implies VectorE 1.
        let w = s.engine_op(EngineId::GpSimd, &[sb(true, 0, 64)]);
        assert_eq!(w, vec![Wait::plain(Agent::engine(EngineId::Scalar), 1)]);
    }
}
