//! Engine streams as the kernel records them — instructions, symbolic waits ("operation `n`
//! of agent `A`"), operation ends (where a signal may go), DMA triggers and loop bounds — and
//! their assembly into a [`Program`]: semaphores are assigned, waits get their counts (affine
//! in the iteration registers inside loops: dynamic terms), signals are placed, `Halt` ends
//! every stream, and the program is validated.

use std::collections::BTreeSet;

use nrt_core::{Error, err};
use nrt_sim::engine::{
    DmaDescriptor, DynTerm, EngineId, Instr, Program, SEMAPHORES, SemCmp, TensorDecl, TermSlot,
};

use crate::sync::{AGENTS, Agent, SignalTable, Sync, Wait};

/// A dynamic term of a recorded instruction: `slot += step × register reg`.
pub(crate) type Term = (TermSlot, u8, i64);

/// One entry of an engine stream under construction.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// A data-path instruction.
    Instr(Instr),
    /// A data-path instruction inside a loop, with its dynamic terms.
    Looped(Instr, Vec<Term>),
    /// `LoopBegin { reg, count }` (dropped with its `LoopEnd` when nothing is between).
    LoopBegin { reg: u8, count: u32 },
    /// `LoopEnd { reg }`.
    LoopEnd { reg: u8 },
    /// Wait until operation `pos` of `agent` is complete.
    Wait(Wait),
    /// The end of this engine's operation `pos`: its signal goes here when someone waits.
    OpEnd(u32),
    /// Enqueue descriptors `[first, first + count)` on `queue` (a DMA queue agent).
    Trigger {
        queue: Agent,
        first: u32,
        count: u32,
        /// Per iteration register, the source and destination offset steps (`DmaSrc`,
        /// `DmaDst` terms).
        shifts: Vec<(u8, i64, i64)>,
    },
}

/// Semaphore of each agent that needs one (`None`: no semaphore).
struct Sems {
    of: [Option<u8>; AGENTS],
}

impl Sems {
    /// One semaphore per agent that is waited for, and per DMA queue used (a queue's
    /// transfers always count on their own semaphore, so no two agents share one).
    fn assign(streams: &[Vec<Item>; 5]) -> Result<Self, Error> {
        let mut used = [false; AGENTS];
        for s in streams {
            for it in s {
                match it {
                    Item::Wait(w) => used[w.agent.index()] = true,
                    Item::Trigger { queue, .. } => used[queue.index()] = true,
                    Item::Instr(_)
                    | Item::Looped(..)
                    | Item::LoopBegin { .. }
                    | Item::LoopEnd { .. }
                    | Item::OpEnd(_) => {}
                }
            }
        }
        let need = used.iter().filter(|&&u| u).count();
        if need > SEMAPHORES {
            return Err(err!(
                Resource,
                "the kernel needs {need} semaphores; a core has {SEMAPHORES}"
            ));
        }
        let mut of = [None; AGENTS];
        let mut next = 0u8;
        for (slot, u) in of.iter_mut().zip(used) {
            if u {
                *slot = Some(next);
                next = next.wrapping_add(1);
            }
        }
        Ok(Self { of })
    }

    fn get(&self, a: Agent) -> Result<u8, Error> {
        self.of
            .get(a.index())
            .copied()
            .flatten()
            .ok_or_else(|| err!(Invalid, "internal: agent {a:?} has no semaphore"))
    }
}

/// Assembles the program.
pub(crate) fn assemble(
    name: &str,
    tensors: Vec<TensorDecl>,
    streams: &[Vec<Item>; 5],
    descriptors: Vec<DmaDescriptor>,
    sync: &Sync,
) -> Result<Program, Error> {
    let sems = Sems::assign(streams)?;
    let signal_sets: Vec<BTreeSet<u32>> = sync.closed_signals();
    let signal_lists: Vec<Vec<u32>> = signal_sets
        .iter()
        .map(|s| s.iter().copied().collect())
        .collect();
    let looped = sync.has_loops();
    let tables: Vec<SignalTable> = EngineId::ALL
        .iter()
        .zip(&signal_sets)
        .map(|(e, set)| sync.signal_table(set, Agent::engine(*e)))
        .collect();
    // The count a wait waits for, and its steps per iteration register.
    let value = |w: &Wait| -> Result<(u32, Vec<(u8, i64)>), Error> {
        let base = match w.agent.as_engine() {
            // The signal after operation `pos` is the engine's k-th.
            Some(e) if !looped => signal_lists
                .get(e.index())
                .and_then(|l| l.binary_search(&w.pos).ok())
                .map(|k| k as u64 + 1)
                .ok_or_else(|| err!(Invalid, "internal: no signal after {e} op {}", w.pos))?,
            Some(e) => {
                let table = tables
                    .get(e.index())
                    .ok_or_else(|| err!(Invalid, "internal: no engine {e}"))?;
                sync.ordinal(Some(table), w.pos)
            }
            // Every transfer of a queue counts.
            None => u64::from(w.pos),
        };
        let base =
            u32::try_from(base).map_err(|_| err!(Invalid, "a semaphore count exceeds 2^32 - 1"))?;
        let mut steps = Vec::new();
        for (reg, dep) in w.deps.iter().enumerate() {
            if let Some(id) = dep {
                let table = w.agent.as_engine().and_then(|e| tables.get(e.index()));
                let step = sync.step(table, w.agent, usize::from(*id));
                if step != 0 {
                    steps.push((reg as u8, step));
                }
            }
        }
        Ok((base, steps))
    };
    let mut program = Program {
        name: name.to_owned(),
        tensors,
        descriptors,
        ..Program::default()
    };
    let mut terms: Vec<DynTerm> = Vec::new();
    for (e, items) in EngineId::ALL.iter().zip(streams) {
        let signals = signal_sets.get(e.index());
        let mut out: Vec<Instr> = Vec::with_capacity(items.len() + 1);
        let mut add = |out: &[Instr], slot: TermSlot, reg: u8, step: i64| {
            if step != 0 {
                terms.push(DynTerm {
                    engine: *e,
                    pc: out.len() as u32,
                    slot,
                    reg,
                    step,
                });
            }
        };
        for it in items {
            match it {
                Item::Instr(i) => out.push(*i),
                Item::Looped(i, ts) => {
                    for &(slot, reg, step) in ts {
                        add(&out, slot, reg, step);
                    }
                    out.push(*i);
                }
                Item::LoopBegin { reg, count } => out.push(Instr::LoopBegin {
                    reg: *reg,
                    count: *count,
                }),
                Item::LoopEnd { reg } => {
                    if matches!(out.last(), Some(Instr::LoopBegin { reg: r, .. }) if r == reg) {
                        out.pop();
                    } else {
                        out.push(Instr::LoopEnd { reg: *reg });
                    }
                }
                Item::Wait(w) => {
                    let (v, steps) = value(w)?;
                    for (reg, step) in steps {
                        add(&out, TermSlot::Value, reg, step);
                    }
                    out.push(Instr::SemWait {
                        sem: sems.get(w.agent)?,
                        cmp: SemCmp::Ge,
                        value: v,
                    });
                }
                Item::OpEnd(pos) => {
                    if signals.is_some_and(|s| s.contains(pos)) {
                        out.push(Instr::SemInc {
                            sem: sems.get(Agent::engine(*e))?,
                            value: 1,
                        });
                    }
                }
                Item::Trigger {
                    queue,
                    first,
                    count,
                    shifts,
                } => {
                    let (dma, q) = queue
                        .as_queue()
                        .ok_or_else(|| err!(Invalid, "internal: {queue:?} is not a DMA queue"))?;
                    for &(reg, src, dst) in shifts {
                        add(&out, TermSlot::DmaSrc, reg, src);
                        add(&out, TermSlot::DmaDst, reg, dst);
                    }
                    out.push(Instr::DmaTrigger {
                        dma,
                        queue: q,
                        first: *first,
                        count: *count,
                        sem: sems.get(*queue)?,
                        inc: 1,
                    });
                }
            }
        }
        out.push(Instr::Halt);
        if let Some(s) = program.streams.get_mut(e.index()) {
            *s = out;
        }
    }
    terms.sort_by_key(|t| (t.engine.index(), t.pc, t.slot, t.reg));
    program.terms = terms;
    program.validate()?;
    Ok(program)
}
