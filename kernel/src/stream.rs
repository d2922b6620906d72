//! Engine streams as the kernel records them — instructions, symbolic waits ("operation `n`
//! of agent `A`"), operation ends (where a signal may go) and DMA triggers — and their
//! assembly into a [`Program`]: semaphores are assigned, waits get their counts, signals are
//! placed, `Halt` ends every stream, and the program is validated.

use nrt_core::{Error, err};
use nrt_sim::engine::{DmaDescriptor, EngineId, Instr, Program, SEMAPHORES, SemCmp, TensorDecl};

use crate::sync::{AGENTS, Agent, Sync, Wait};

/// One entry of an engine stream under construction.
#[derive(Clone, Debug)]
pub(crate) enum Item {
    /// A data-path instruction.
    Instr(Instr),
    /// Wait until operation `pos` of `agent` is complete.
    Wait(Wait),
    /// The end of this engine's operation `pos`: its signal goes here when someone waits.
    OpEnd(u32),
    /// Enqueue descriptors `[first, first + count)` on `queue` (a DMA queue agent).
    Trigger {
        queue: Agent,
        first: u32,
        count: u32,
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
                    Item::Instr(_) | Item::OpEnd(_) => {}
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
    let signal_lists: Vec<Vec<u32>> = EngineId::ALL
        .iter()
        .map(|&e| sync.signals(e).iter().copied().collect())
        .collect();
    let ordinal = |w: &Wait| -> Result<u32, Error> {
        match w.agent.as_engine() {
            // The signal after operation `pos` is the engine's k-th.
            Some(e) => signal_lists
                .get(e.index())
                .and_then(|l| l.binary_search(&w.pos).ok())
                .map(|k| k as u32 + 1)
                .ok_or_else(|| err!(Invalid, "internal: no signal after {e} op {}", w.pos)),
            // Every transfer of a queue counts.
            None => Ok(w.pos),
        }
    };
    let mut program = Program {
        name: name.to_owned(),
        tensors,
        descriptors,
        ..Program::default()
    };
    for (e, items) in EngineId::ALL.iter().zip(streams) {
        let signals = signal_lists.get(e.index()).map_or(&[][..], Vec::as_slice);
        let mut out = Vec::with_capacity(items.len() + 1);
        for it in items {
            match it {
                Item::Instr(i) => out.push(*i),
                Item::Wait(w) => out.push(Instr::SemWait {
                    sem: sems.get(w.agent)?,
                    cmp: SemCmp::Ge,
                    value: ordinal(w)?,
                }),
                Item::OpEnd(pos) => {
                    if signals.binary_search(pos).is_ok() {
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
                } => {
                    let (dma, q) = queue
                        .as_queue()
                        .ok_or_else(|| err!(Invalid, "internal: {queue:?} is not a DMA queue"))?;
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
    program.validate()?;
    Ok(program)
}
