//! The TensorE stationary/moving pairing: every `MultiplyMoving` uses the stationary of the
//! last `LoadStationary` its stream executed before it (a TensorE `Transpose` replaces the
//! stationary), with the same K and dtype and an M-partition destination. Streams have no
//! branches but loops, so this is static: a loop-free stream is checked in order; a stream
//! with loops is walked through its loops — a body once from the state before the loop, and
//! when it runs more than once again from the state its first iteration leaves (a body maps
//! every entry state to one fixed state or leaves it unchanged, so the later iterations see
//! that same state); a zero-count body is skipped.

use nrt_core::{Error, err};

use crate::engine::dtype::DType;
use crate::engine::isa::{EngineId, Instr};

/// The stationary state of a TensorE stream at one point.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Pairing {
    /// K partitions, M free elements, dtype of the loaded stationary.
    stationary: Option<(u8, u64, DType)>,
    /// A TensorE transpose replaced the stationary (for the message).
    transposed: bool,
}

impl Pairing {
    /// Applies instruction `pc` of `engine`'s stream, checking a `MultiplyMoving`.
    pub(super) fn step(&mut self, engine: EngineId, pc: usize, ins: &Instr) -> Result<(), Error> {
        match *ins {
            Instr::LoadStationary { src } => {
                self.stationary = Some((src.partitions, src.free_elems(), src.dtype));
            }
            Instr::Transpose { .. } if engine == EngineId::Tensor => {
                // The transpose loads its input as the stationary.
                self.stationary = None;
                self.transposed = true;
            }
            Instr::MultiplyMoving { moving, dst, .. } => {
                let Some((k, m, dt)) = self.stationary else {
                    return Err(if self.transposed {
                        err!(
                            Invalid,
                            "{engine} pc {pc}: MultiplyMoving after a Transpose needs a \
                             LoadStationary (the transpose replaced the stationary)"
                        )
                    } else {
                        err!(
                            Invalid,
                            "{engine} pc {pc}: MultiplyMoving before any LoadStationary"
                        )
                    });
                };
                if moving.partitions != k || moving.dtype != dt {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: moving [{} partitions, {}] does not match the \
                         stationary [{k} partitions, {dt}]",
                        moving.partitions,
                        moving.dtype
                    ));
                }
                if u64::from(dst.partitions) != m {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: destination has {} partitions, the stationary \
                         free size is {m}",
                        dst.partitions
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Checks the pairing of a stream with loops (`partners`: the matching loop instruction of
/// each loop instruction's pc, the structure already validated).
pub(super) fn check_looped(
    engine: EngineId,
    stream: &[Instr],
    partners: &[(u32, u32)],
) -> Result<(), Error> {
    let mut st = Pairing::default();
    walk(engine, stream, partners, 0, stream.len(), &mut st)
}

fn partner(partners: &[(u32, u32)], pc: usize) -> Option<usize> {
    partners
        .binary_search_by_key(&(pc as u32), |&(p, _)| p)
        .ok()
        .and_then(|i| partners.get(i))
        .map(|&(_, q)| q as usize)
}

fn walk(
    engine: EngineId,
    stream: &[Instr],
    partners: &[(u32, u32)],
    start: usize,
    end: usize,
    st: &mut Pairing,
) -> Result<(), Error> {
    let mut pc = start;
    while pc < end {
        let Some(ins) = stream.get(pc) else { break };
        if let Instr::LoopBegin { count, .. } = *ins {
            let close = partner(partners, pc).unwrap_or(end).min(end);
            if count > 0 {
                let entry = *st;
                walk(engine, stream, partners, pc + 1, close, st)?;
                if count > 1 && *st != entry {
                    walk(engine, stream, partners, pc + 1, close, st)?;
                }
            }
            pc = close + 1;
            continue;
        }
        st.step(engine, pc, ins)?;
        pc += 1;
    }
    Ok(())
}
