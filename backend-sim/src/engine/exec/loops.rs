//! Loops in the executor (format 1.1): the loop instructions, which run in the sequencer in
//! one tick each without waiting for its data path, and the instances of instructions with
//! dynamic terms — resolved from the sequencer's iteration registers when they issue and
//! checked with every rule the load-time checks apply; an instance that fails stops the
//! execution with `NRT_EXEC_OOB`. None of this runs for a program without loops (the
//! executor has no plan then).

use nrt_core::{Error, NrtStatus, err};

use super::cost::timing;
use super::report::{Event, EventKind, Track};
use super::{Executor, Seq};
use crate::engine::isa::{DmaShift, DynTerm, Instr, LOOP_REGS, SemCmp, instance, regs_text};
use crate::engine::program::{LoopPlan, check_instance};

impl Executor<'_, '_> {
    /// Issues the loop instruction `ins` at `pc` of sequencer `i`: a `LoopBegin` starts its
    /// register at 0 (a zero count jumps past the matching `LoopEnd`); a `LoopEnd` counts an
    /// iteration and jumps back to the body while iterations remain. One tick of the
    /// sequencer; the data path keeps running (the instruction touches no data).
    pub(super) fn issue_loop(&mut self, i: usize, pc: usize, ins: Instr, plan: &LoopPlan) -> bool {
        let t = self.t;
        let engine = self.seqs[i].engine;
        let partner = plan.partner(engine, pc);
        let stream = self.env.program.stream(engine);
        let next = match ins {
            Instr::LoopBegin { reg, count } => {
                if count == 0 {
                    partner.map_or(pc + 1, |end| end + 1)
                } else {
                    if let Some(r) = self.seqs[i].regs.get_mut(usize::from(reg)) {
                        *r = 0;
                    }
                    pc + 1
                }
            }
            Instr::LoopEnd { reg } => {
                let count = match partner.and_then(|b| stream.get(b)) {
                    Some(Instr::LoopBegin { count, .. }) => *count,
                    _ => 0,
                };
                let r = self.seqs[i].regs.get_mut(usize::from(reg));
                match (r, partner) {
                    (Some(r), Some(begin)) if r.saturating_add(1) < count => {
                        *r += 1;
                        begin + 1
                    }
                    (Some(r), _) => {
                        *r = count;
                        pc + 1
                    }
                    _ => pc + 1,
                }
            }
            _ => pc + 1,
        };
        let s = &mut self.seqs[i];
        s.pc = next;
        if s.main_until <= t {
            s.main_until = t + timing::CONTROL_TICKS;
        }
        self.wake_at = t + timing::CONTROL_TICKS;
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur: timing::CONTROL_TICKS,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: ins.name(),
            },
        });
        true
    }

    /// The instance of `ins` (at `pc` of sequencer `i`, with dynamic terms `terms`) in the
    /// current iteration, checked; `None` when it fails (the execution then stops).
    pub(super) fn instance_at(
        &mut self,
        i: usize,
        pc: usize,
        ins: &Instr,
        terms: &[DynTerm],
        plan: &LoopPlan,
    ) -> Option<(Instr, DmaShift)> {
        let engine = self.seqs[i].engine;
        let regs = self.seqs[i].regs;
        let checked = instance(ins, terms, &regs).and_then(|(inst, shift)| {
            check_instance(
                &inst,
                shift,
                engine,
                plan.minor,
                &self.env.program.descriptors,
                &plan.sizes,
            )
            .map(|()| (inst, shift))
        });
        match checked {
            Ok(x) => Some(x),
            Err(e) => {
                let used = terms.iter().fold(0u8, |m, t| m | (1 << (t.reg & 7)));
                self.stop(err!(
                    ExecOob,
                    "{engine} pc {pc} ({}) in iteration {}: {}; execution stopped at tick {}",
                    ins.name(),
                    regs_text(&regs, used),
                    e.message(),
                    self.t
                ));
                None
            }
        }
    }

    /// Stops the execution with error `e` (`NRT_EXEC_OOB`), which replaces any earlier one.
    fn stop(&mut self, e: Error) {
        if !self.stopped {
            self.stopped = true;
            self.report.status = NrtStatus::ExecOob;
            self.report.error = Some(e);
        }
    }

    /// The comparison and value a sequencer blocked in `SemWait` waits for (its instance in
    /// the current iteration).
    pub(super) fn wait_target(&self, s: &Seq) -> Option<(SemCmp, u32)> {
        let ins = self.env.program.stream(s.engine).get(s.pc)?;
        let ins = match self.env.plan {
            Some(plan) => {
                let terms = plan.terms(self.env.program, s.engine, s.pc);
                instance(ins, terms, &s.regs).map(|(x, _)| x).ok()?
            }
            None => *ins,
        };
        match ins {
            Instr::SemWait { cmp, value, .. } => Some((cmp, value)),
            _ => None,
        }
    }
}

const _: () = assert!(LOOP_REGS <= 8, "register bit sets are u8");
