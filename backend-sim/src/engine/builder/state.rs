//! The builder's loop bookkeeping: the open loops, and the count of every semaphore's
//! increments as an affine function of the open loops' iterations — what
//! [`ProgramBuilder::wait_all`](super::ProgramBuilder::wait_all) waits for.
//!
//! Counting: for each loop depth `d` (0: outside every loop) and semaphore, `acc[d]` holds the
//! increments pushed since the current iteration of the depth-`d` loop began (at depth 0, since
//! the program began), a closed inner loop adding `count ×` its body's increments. At a point
//! at depth `D` inside loops of iterations `i_1 … i_D`, the increments pushed before it, in
//! program order, number `Σ_{d ≤ D} acc[d] + Σ_{d ≥ 1} i_d · δ_d`, where `δ_d` is what one
//! iteration of the depth-`d` loop adds: known when that loop closes, when the waits inside it
//! get their dynamic terms (`step = δ_d` on the loop's register).

use nrt_core::{Error, err};

use crate::engine::isa::{DynTerm, EngineId, Instr, LOOP_REGS, TermSlot};
use crate::engine::memory::SEMAPHORES;

/// An open loop.
#[derive(Clone, Debug)]
pub(super) struct OpenLoop {
    /// Identifies the loop ([`LoopId`](super::LoopId)).
    pub(super) serial: u32,
    /// The engines that run it.
    pub(super) engines: Vec<EngineId>,
    /// Its iterations.
    pub(super) count: u32,
    /// Per engine, the pc of its `LoopBegin` (`usize::MAX` for engines not in the loop).
    pub(super) begin: [usize; 5],
}

/// A `SemWait` inside loops whose per-iteration terms are known when the loops close.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingWait {
    pub(super) engine: EngineId,
    pub(super) pc: u32,
    pub(super) sem: u8,
    /// The depth of the loop whose register the term uses (1 = outermost).
    pub(super) depth: usize,
}

/// Loops, terms and semaphore counts of a builder.
#[derive(Clone, Debug)]
pub(super) struct LoopState {
    /// Open loops, outermost first; the depth-`d` loop uses iteration register `d − 1`.
    pub(super) open: Vec<OpenLoop>,
    pub(super) next_serial: u32,
    /// `acc[d][sem]` (see the module documentation).
    pub(super) acc: Vec<Vec<u64>>,
    /// Semaphores `SemSet` or a term on a `SemInc` value made uncountable.
    pub(super) untracked: Vec<bool>,
    pub(super) pending: Vec<PendingWait>,
    /// The terms so far (sorted and merged when the program is built).
    pub(super) terms: Vec<DynTerm>,
    /// The first misuse of `push` (reported by `build`).
    pub(super) error: Option<Error>,
}

impl LoopState {
    pub(super) fn new() -> Self {
        Self {
            open: Vec::new(),
            next_serial: 0,
            acc: vec![vec![0; SEMAPHORES]],
            untracked: vec![false; SEMAPHORES],
            pending: Vec::new(),
            terms: Vec::new(),
            error: None,
        }
    }

    /// Records `ins`, about to be pushed on `engine`: refuses loop instructions (they come from
    /// `loop_begin`/`loop_end`) and instructions of an engine the innermost loop does not run,
    /// and counts semaphore increments.
    pub(super) fn on_push(&mut self, engine: EngineId, ins: &Instr) {
        if ins.is_loop() {
            self.fail(err!(
                Invalid,
                "{engine}: push {} through loop_begin / loop_end",
                ins.name()
            ));
            return;
        }
        if let Some(l) = self.open.last() {
            if !l.engines.contains(&engine) {
                self.fail(err!(
                    Invalid,
                    "{} pushed on {engine} inside a loop {engine} does not run",
                    ins.name()
                ));
            }
        }
        match *ins {
            Instr::SemInc { sem, value } => self.count(sem, u64::from(value)),
            Instr::DmaTrigger { sem, inc, .. } => self.count(sem, u64::from(inc)),
            Instr::SemSet { sem, .. } => {
                if let Some(u) = self.untracked.get_mut(usize::from(sem)) {
                    *u = true;
                }
            }
            _ => {}
        }
    }

    fn count(&mut self, sem: u8, amount: u64) {
        if let Some(c) = self
            .acc
            .last_mut()
            .and_then(|f| f.get_mut(usize::from(sem)))
        {
            *c = c.saturating_add(amount);
        }
    }

    pub(super) fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// The increments of `sem` pushed so far, at the current iteration-0 point.
    pub(super) fn total(&self, sem: u8) -> u64 {
        self.acc
            .iter()
            .filter_map(|f| f.get(usize::from(sem)))
            .fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// Closes the innermost loop: the waits inside it get their terms on its register, and its
    /// whole execution counts in the enclosing depth.
    pub(super) fn close(&mut self) -> Result<(), Error> {
        let depth = self.open.len();
        let (Some(l), Some(frame)) = (self.open.pop(), self.acc.pop()) else {
            return Err(err!(Invalid, "no open loop"));
        };
        let reg = (depth - 1) as u8;
        let mut keep = Vec::with_capacity(self.pending.len());
        for w in std::mem::take(&mut self.pending) {
            if w.depth != depth {
                keep.push(w);
                continue;
            }
            if self
                .untracked
                .get(usize::from(w.sem))
                .copied()
                .unwrap_or(true)
            {
                return Err(err!(
                    Invalid,
                    "{} pc {}: wait_all on semaphore {}, which a SemSet or a varying increment \
                     made uncountable",
                    w.engine,
                    w.pc,
                    w.sem
                ));
            }
            let delta = frame.get(usize::from(w.sem)).copied().unwrap_or(0);
            if delta != 0 {
                let step = i64::try_from(delta)
                    .map_err(|_| err!(Invalid, "semaphore {} counts overflow", w.sem))?;
                self.terms.push(DynTerm {
                    engine: w.engine,
                    pc: w.pc,
                    slot: TermSlot::Value,
                    reg,
                    step,
                });
            }
        }
        self.pending = keep;
        if let Some(parent) = self.acc.last_mut() {
            for (p, &d) in parent.iter_mut().zip(&frame) {
                *p = p.saturating_add(d.saturating_mul(u64::from(l.count)));
            }
        }
        Ok(())
    }

    /// The most loops that nest.
    pub(super) const MAX_DEPTH: usize = LOOP_REGS;
}
