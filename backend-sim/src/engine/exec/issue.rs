//! Instruction issue: each sequencer's next instruction, when its unit (and, for VectorE,
//! ScalarE and GpSimdE, the shared SBUF/PSUM port) is free. Control instructions (semaphores,
//! DMA triggers, `Notify`, `Halt`) take effect at issue; data-path instructions are checked for
//! hazards, costed, and occupy their unit until their effects apply (`effects.rs`).

use super::cost::{IssueCtx, clock, op_cycles, timing};
use super::report::{Actor, Event, EventKind, Notification, Track};
use super::{Executor, PORT_PSUM_VS, PORT_SBUF_VG, Pending, Transfer, Wait, join};
use crate::engine::isa::{DmaShift, EngineId, Instr, SemCmp, Space};
use crate::engine::memory::DMA_QUEUES;

/// The latest tick a DMA transfer may start at (2^63, about 209 years at 1.4 GHz): a trigger
/// latency that puts a start later means the transfer never starts.
const NEVER_AFTER: u64 = 1 << 63;

impl Executor<'_, '_> {
    pub(super) fn try_issue(&mut self, i: usize) -> bool {
        let t = self.t;
        let (engine, pc) = {
            let s = &self.seqs[i];
            if s.halted {
                return false;
            }
            if let Some((sem, v)) = s.sem_block {
                if self.sems[usize::from(sem)] == v {
                    return false;
                }
            }
            (s.engine, s.pc)
        };
        let program = self.env.program;
        let Some(mut ins) = program.stream(engine).get(pc).copied() else {
            self.seqs[i].halted = true;
            return false;
        };
        // Loop instructions run in the sequencer, whatever its data path does.
        let plan = self.env.plan;
        if let Some(plan) = plan {
            if ins.is_loop() {
                return self.issue_loop(i, pc, ins, plan);
            }
        }
        // Unit availability.
        {
            let s = &self.seqs[i];
            let ok = match ins {
                Instr::LoadStationary { .. } => s.ls_until <= t && s.ls_op.is_none(),
                Instr::SemInc { .. } | Instr::SemSet { .. } | Instr::SemWait { .. }
                    if Self::behind_matmul(s, t) =>
                {
                    true
                }
                _ => {
                    s.main_until <= t && s.ls_until <= t && s.main_op.is_none() && s.ls_op.is_none()
                }
            };
            if !ok {
                return false;
            }
        }
        // The instance of an instruction with dynamic terms.
        let mut shift = DmaShift::default();
        if let Some(plan) = plan {
            let terms = plan.terms(program, engine, pc);
            if !terms.is_empty() {
                let Some((inst, s)) = self.instance_at(i, pc, &ins, terms, plan) else {
                    return false;
                };
                ins = inst;
                shift = s;
            }
        }
        match ins {
            Instr::SemWait { sem, cmp, value } => {
                let v = self.sems[usize::from(sem)];
                let pass = match cmp {
                    SemCmp::Ge => v >= value,
                    SemCmp::Eq => v == value,
                };
                if !pass {
                    if self.seqs[i].wait == Wait::None {
                        // Behind a matmul in flight, the wait starts when the matmul ends.
                        let since = t.max(self.seqs[i].main_until);
                        self.seqs[i].wait = Wait::Sem { since, sem };
                    }
                    self.seqs[i].sem_block = Some((sem, v));
                    return false;
                }
                self.seqs[i].sem_block = None;
                join(&mut self.seqs[i].clock, &self.sem_clocks[usize::from(sem)]);
                self.end_wait(i, pc);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::SemInc { sem, value } if Self::behind_matmul(&self.seqs[i], t) => {
                self.post_signal(i, pc, sem, value, false, ins.name());
                true
            }
            Instr::SemSet { sem, value } if Self::behind_matmul(&self.seqs[i], t) => {
                self.post_signal(i, pc, sem, value, true, ins.name());
                true
            }
            Instr::SemInc { sem, value } => {
                let s = usize::from(sem);
                self.sems[s] = self.sems[s].wrapping_add(value);
                self.release(i, s);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::SemSet { sem, value } => {
                let s = usize::from(sem);
                self.sems[s] = value;
                self.release(i, s);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::DmaTrigger {
                dma,
                queue,
                first,
                count,
                sem,
                inc,
            } => {
                let q = usize::from(dma) * DMA_QUEUES + usize::from(queue);
                if self.queues[q].len() >= timing::DMA_QUEUE_DEPTH {
                    if self.seqs[i].wait == Wait::None {
                        self.seqs[i].wait = Wait::Queue { since: t };
                    }
                    return false;
                }
                self.end_wait(i, pc);
                let agent = usize::from(self.queue_agent[q]);
                self.queue_epoch[q] += 1;
                let epoch = self.queue_epoch[q];
                let mut clock = self.seqs[i].clock.clone();
                join(&mut clock, &self.queue_clock[q]);
                clock[agent] = epoch;
                self.queue_clock[q].clone_from(&clock);
                let own = self.seqs[i].engine.index();
                self.seqs[i].clock[own] += 1;
                let bytes = program
                    .descriptors
                    .get(first as usize..(first as usize + count as usize))
                    .map(|d| d.iter().map(|x| u64::from(x.len)).sum())
                    .unwrap_or(0);
                self.sem_pending_dma[usize::from(sem)] += 1;
                self.queue_mask[usize::from(dma)] |= 1 << queue;
                self.start_pending = true;
                // A study's latency may be any u64. A start it puts past `NEVER_AFTER` is never
                // reached (the transfer waits out the execution's limit), so every start leaves
                // the tick arithmetic of the transfer that follows in range.
                let latency = self
                    .opts
                    .dma_trigger_latency_ticks
                    .unwrap_or(self.env.spec.dma_trigger_latency_ticks);
                let ready = t
                    .checked_add(latency)
                    .filter(|&r| r <= NEVER_AFTER)
                    .unwrap_or(u64::MAX)
                    .max(self.queue_interval_floor(q));
                self.queues[q].push_back(Transfer {
                    first,
                    count,
                    next: 0,
                    sem,
                    inc,
                    agent,
                    clock,
                    start: None,
                    bytes,
                    shift,
                    ready,
                });
                // The engine's round-robin now has a second queue to choose from at each
                // descriptor boundary: a run on another queue ends with its descriptor in
                // flight.
                self.cut_run(usize::from(dma), q);
                // NeuronCore-v3 generates a trigger's descriptors in hardware (DGE), which
                // holds the issuing sequencer; v2 triggers pre-built descriptors.
                let dge = self.env.spec.dge_ticks(count);
                self.retire_control_for(i, pc, ins.name(), dge.max(timing::CONTROL_TICKS));
                true
            }
            Instr::Notify { payload } => {
                self.report.notifications.push(Notification {
                    tick: t,
                    engine,
                    payload,
                });
                self.push_event(Event {
                    start: t,
                    dur: 0,
                    track: Track::Engine(engine),
                    kind: EventKind::Notify { payload },
                });
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::Halt => {
                self.retire_control(i, pc, ins.name());
                self.seqs[i].halted = true;
                true
            }
            _ => self.issue_data(i, pc, ins),
        }
    }

    pub(super) fn end_wait(&mut self, i: usize, pc: usize) {
        let t = self.t;
        let w = self.seqs[i].wait;
        let engine = self.seqs[i].engine;
        let kind = match w {
            Wait::None => return,
            Wait::Sem { since, sem } => (since, EventKind::SemWait { pc: pc as u32, sem }),
            Wait::Port { since } => (since, EventKind::PortWait { pc: pc as u32 }),
            Wait::Queue { since } => (since, EventKind::QueueWait { pc: pc as u32 }),
        };
        self.seqs[i].wait = Wait::None;
        if t > kind.0 {
            self.push_event(Event {
                start: kind.0,
                dur: t - kind.0,
                track: Track::Engine(engine),
                kind: kind.1,
            });
        }
    }

    /// A `MultiplyMoving` is in flight on sequencer `s` and nothing is in its LoadStationary
    /// slot: a semaphore update issued now takes effect when the matmul completes.
    fn behind_matmul(s: &super::Seq, t: u64) -> bool {
        s.main_until > t
            && s.ls_op.is_none()
            && s.ls_until <= t
            && matches!(
                s.main_op,
                Some(Pending {
                    ins: Instr::MultiplyMoving { .. },
                    ..
                })
            )
    }

    /// Issues a semaphore update behind the matmul in flight (see `PostSignal`): the
    /// sequencer's clock is taken now, as `release` takes it, and the update applies at the
    /// matmul's completion; the sequencer goes on issuing in this tick.
    fn post_signal(
        &mut self,
        i: usize,
        pc: usize,
        sem: u8,
        value: u32,
        set: bool,
        name: &'static str,
    ) {
        let t = self.t;
        let own = self.seqs[i].engine.index();
        let s = &mut self.seqs[i];
        let clock = s.clock.clone();
        s.clock[own] += 1;
        s.post.push(super::PostSignal {
            sem,
            value,
            set,
            clock,
        });
        s.pc += 1;
        let engine = s.engine;
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur: 0,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: name,
            },
        });
        self.again = true;
    }

    fn release(&mut self, i: usize, sem: usize) {
        let own = self.seqs[i].engine.index();
        join(&mut self.sem_clocks[sem], &self.seqs[i].clock);
        self.seqs[i].clock[own] += 1;
    }

    fn retire_control(&mut self, i: usize, pc: usize, name: &'static str) {
        self.retire_control_for(i, pc, name, timing::CONTROL_TICKS);
    }

    /// Retires a control instruction that holds its sequencer for `dur` ticks (a `SemWait`
    /// passed behind a matmul in flight holds nothing: the matmul keeps the unit, and the
    /// sequencer goes on issuing in this tick).
    fn retire_control_for(&mut self, i: usize, pc: usize, name: &'static str, dur: u64) {
        let t = self.t;
        let s = &mut self.seqs[i];
        s.pc += 1;
        let behind = s.main_until > t;
        if !behind {
            s.main_until = t + dur;
        }
        let engine = s.engine;
        let dur = if behind {
            self.again = true;
            0
        } else {
            dur
        };
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: name,
            },
        });
    }

    fn ports_needed(shared: bool, engine: EngineId, ins: &Instr) -> [bool; 2] {
        if !shared {
            return [false; 2];
        }
        let (acc, n) = ins.accesses();
        let mut sbuf = false;
        let mut psum = false;
        for (ap, _) in acc.iter().take(n).flatten() {
            match ap.space {
                Space::Sbuf => sbuf = true,
                Space::Psum => psum = true,
            }
        }
        let mut need = [false; 2];
        match engine {
            EngineId::Vector => {
                need[PORT_SBUF_VG] = sbuf;
                need[PORT_PSUM_VS] = psum;
            }
            EngineId::GpSimd => need[PORT_SBUF_VG] = sbuf,
            EngineId::Scalar => need[PORT_PSUM_VS] = psum,
            _ => {}
        }
        need
    }

    fn issue_data(&mut self, i: usize, pc: usize, ins: Instr) -> bool {
        let t = self.t;
        let engine = self.seqs[i].engine;
        let need = Self::ports_needed(self.env.spec.shared_ports, engine, &ins);
        let blocked = need
            .iter()
            .zip(self.ports.iter())
            .any(|(&n, p)| n && p.until > t);
        if blocked {
            if self.seqs[i].wait == Wait::None {
                self.seqs[i].wait = Wait::Port { since: t };
            }
            return false;
        }
        self.end_wait(i, pc);
        // Hazard check and access records.
        let (acc, n) = ins.accesses();
        let actor = Actor::Engine {
            engine,
            pc: pc as u32,
            op: ins.name(),
        };
        let mut dependent = false;
        for (ap, w) in acc.iter().take(n).flatten() {
            let fp = ap.footprint();
            let region = fp.region();
            if !*w {
                if let Some(lw) = &self.seqs[i].last_write {
                    dependent |= lw.overlaps(&region);
                }
            }
            let clock = std::mem::take(&mut self.seqs[i].clock);
            self.check_and_record(fp, *w, engine.index(), &clock, actor, self.t);
            self.seqs[i].clock = clock;
        }
        let s = &self.seqs[i];
        let ctx = IssueCtx {
            dependent,
            // The previous instruction (data path or control) ends now: no idle tick between.
            back_to_back: pc > 0 && s.main_until == t,
            prev_cycles: s.last_cycles,
        };
        let cycles = op_cycles(&ins, engine, ctx, self.env.spec);
        let s = &mut self.seqs[i];
        let (num, den) = clock(self.env.spec, engine);
        let is_ls = matches!(ins, Instr::LoadStationary { .. });
        let frac = if is_ls { &mut s.ls_frac } else { &mut s.frac };
        let total = *frac + cycles * den;
        let ticks = (total / num).max(1);
        *frac = total % num;
        let end = t + ticks;
        let pending = Pending {
            ins,
            stationary: if matches!(ins, Instr::MultiplyMoving { .. }) {
                self.stationary.clone()
            } else {
                None
            },
        };
        if is_ls {
            s.ls_until = end;
            s.ls_op = Some(pending);
        } else {
            s.main_until = end;
            s.main_op = Some(pending);
        }
        s.pc += 1;
        if !is_ls {
            s.last_cycles = cycles;
        }
        s.last_write = acc
            .iter()
            .take(n)
            .flatten()
            .find(|(_, w)| *w)
            .map(|(ap, _)| ap.region());
        for (k, &nd) in need.iter().enumerate() {
            if nd {
                self.ports[k].until = end;
            }
        }
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur: ticks,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: ins.name(),
            },
        });
        // The next stationary loads in the background of this matmul (the architecture
        // guide: "several LS&MM instruction pairs in-flight"): the sequencer may go on
        // issuing in this tick, the semaphore instructions between them behind the matmul.
        if matches!(ins, Instr::MultiplyMoving { .. }) {
            self.again = true;
        }
        true
    }
}
