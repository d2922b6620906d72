//! Loops in [`ProgramBuilder`] (format 1.1): opening and closing loops on a set of engines,
//! dynamic terms on the instruction just pushed, DMA triggers whose offsets move per
//! iteration, and waits for every increment of a semaphore pushed so far, counted through
//! the loops.

use nrt_core::{Error, err};

use super::ProgramBuilder;
use super::state::{LoopState, OpenLoop, PendingWait};
use crate::engine::isa::{DmaDescriptor, DynTerm, EngineId, Instr, SemCmp, TermSlot};
use crate::engine::memory::{DMA_ENGINES, SEMAPHORES};

/// A loop opened by [`ProgramBuilder::loop_begin`], valid until its
/// [`loop_end`](ProgramBuilder::loop_end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopId {
    serial: u32,
}

/// How a looped DMA trigger's offsets move per iteration of loop `lp`: every descriptor's
/// source offset by `src` bytes, its destination offset by `dst` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaStep {
    /// The loop.
    pub lp: LoopId,
    /// Bytes added to each source offset per iteration.
    pub src: i64,
    /// Bytes added to each destination offset per iteration.
    pub dst: i64,
}

impl LoopState {
    /// The open loop `lp` and its depth (1 = outermost).
    fn find(&self, lp: LoopId) -> Result<(usize, &OpenLoop), Error> {
        self.open
            .iter()
            .enumerate()
            .find(|(_, l)| l.serial == lp.serial)
            .map(|(i, l)| (i + 1, l))
            .ok_or_else(|| err!(Invalid, "the loop is not open"))
    }
}

impl ProgramBuilder {
    /// Opens a loop of `count` iterations on each engine of `engines` (each pushes a
    /// `LoopBegin`; the depth-`d` loop uses iteration register `d − 1`). Every engine of a loop
    /// runs every enclosing loop; instructions pushed until [`loop_end`](Self::loop_end) must
    /// be on its engines. At most [`LOOP_REGS`](crate::engine::LOOP_REGS) loops nest; `count`
    /// is in `1..=`[`MAX_LOOP_COUNT`](crate::engine::MAX_LOOP_COUNT).
    pub fn loop_begin(&mut self, engines: &[EngineId], count: u32) -> Result<LoopId, Error> {
        let depth = self.loops.open.len();
        if depth >= LoopState::MAX_DEPTH {
            return Err(err!(
                Invalid,
                "loops nest at most {} deep (one iteration register each)",
                LoopState::MAX_DEPTH
            ));
        }
        if engines.is_empty() {
            return Err(err!(Invalid, "a loop needs at least one engine"));
        }
        if count == 0 || count > crate::engine::MAX_LOOP_COUNT {
            return Err(err!(
                Invalid,
                "loop trip count {count} is outside 1..={}",
                crate::engine::MAX_LOOP_COUNT
            ));
        }
        let mut begin = [usize::MAX; 5];
        for (k, &e) in engines.iter().enumerate() {
            if engines.get(..k).is_some_and(|before| before.contains(&e)) {
                return Err(err!(Invalid, "{e} is listed twice"));
            }
            if let Some(outer) = self.loops.open.last() {
                if !outer.engines.contains(&e) {
                    return Err(err!(
                        Invalid,
                        "{e} does not run the enclosing loop, so it cannot run an inner one"
                    ));
                }
            }
            if let Some(b) = begin.get_mut(e.index()) {
                *b = self.program.stream(e).len();
            }
            self.push_raw(
                e,
                Instr::LoopBegin {
                    reg: depth as u8,
                    count,
                },
            );
        }
        let serial = self.loops.next_serial;
        self.loops.next_serial += 1;
        self.loops.open.push(OpenLoop {
            serial,
            engines: engines.to_vec(),
            count,
            begin,
        });
        self.loops.acc.push(vec![0; SEMAPHORES]);
        Ok(LoopId { serial })
    }

    /// Closes loop `lp`, the innermost open loop (each of its engines pushes a `LoopEnd`);
    /// the [`wait_all`](Self::wait_all)s inside it get their terms.
    pub fn loop_end(&mut self, lp: LoopId) -> Result<(), Error> {
        let (depth, l) = self.loops.find(lp)?;
        if depth != self.loops.open.len() {
            return Err(err!(
                Invalid,
                "the loop is not the innermost open one (close the inner loops first)"
            ));
        }
        let engines = l.engines.clone();
        self.loops.close()?;
        for e in engines {
            self.push_raw(
                e,
                Instr::LoopEnd {
                    reg: (depth - 1) as u8,
                },
            );
        }
        Ok(())
    }

    /// Adds `step ×` the iteration of loop `lp` to `slot` of the instruction just pushed on
    /// `engine` (which runs `lp`; the instruction must be inside it). Terms of one slot and
    /// loop add up.
    pub fn term(
        &mut self,
        engine: EngineId,
        slot: TermSlot,
        lp: LoopId,
        step: i64,
    ) -> Result<(), Error> {
        let (depth, l) = self.loops.find(lp)?;
        let begin = l.begin.get(engine.index()).copied().unwrap_or(usize::MAX);
        if begin == usize::MAX {
            return Err(err!(Invalid, "{engine} does not run the loop"));
        }
        let stream = self.program.stream(engine);
        let pc = stream.len().saturating_sub(1);
        let Some(ins) = stream.get(pc).filter(|_| pc > begin) else {
            return Err(err!(
                Invalid,
                "{engine} has no instruction inside the loop to add a term to"
            ));
        };
        if !slot.applies_to(ins) {
            return Err(err!(Invalid, "{} has no {slot}", ins.name()));
        }
        if let (Instr::SemInc { sem, .. }, TermSlot::Value) = (ins, slot) {
            // Its increment varies: wait_all can no longer count the semaphore.
            if let Some(u) = self.loops.untracked.get_mut(usize::from(*sem)) {
                *u = true;
            }
        }
        self.loops.terms.push(DynTerm {
            engine,
            pc: pc as u32,
            slot,
            reg: (depth - 1) as u8,
            step,
        });
        Ok(())
    }

    /// Waits on `engine` until semaphore `sem` has received every increment pushed before
    /// this point (`SemInc`s and DMA triggers, on any engine, in program order), counted
    /// through the loops: inside loops the `SemWait` gets one term per enclosing loop (outside
    /// loops a wait for 0 is omitted). `NRT_INVALID` when a `SemSet` or a varying increment
    /// made the count unknown.
    pub fn wait_all(&mut self, engine: EngineId, sem: u8) -> Result<(), Error> {
        if self
            .loops
            .untracked
            .get(usize::from(sem))
            .copied()
            .unwrap_or(true)
        {
            return Err(err!(
                Invalid,
                "wait_all on semaphore {sem}, which a SemSet or a varying increment made \
                 uncountable"
            ));
        }
        let value = u32::try_from(self.loops.total(sem)).map_err(|_| {
            err!(
                Invalid,
                "semaphore {sem} receives more than 2^32 increments"
            )
        })?;
        let depth = self.loops.open.len();
        if depth == 0 {
            self.wait(engine, sem, value);
            return Ok(());
        }
        self.push(
            engine,
            Instr::SemWait {
                sem,
                cmp: SemCmp::Ge,
                value,
            },
        );
        let pc = self.program.stream(engine).len().saturating_sub(1) as u32;
        for d in 1..=depth {
            self.loops.pending.push(PendingWait {
                engine,
                pc,
                sem,
                depth: d,
            });
        }
        Ok(())
    }

    /// The increments of `sem` pushed so far, as counted at the current point in the first
    /// iteration of every open loop.
    pub fn sem_count(&self, sem: u8) -> u64 {
        self.loops.total(sem)
    }

    /// [`dma_on`](Self::dma_on) with per-iteration offsets: one transfer of `descs` whose
    /// every descriptor moves by each [`DmaStep`] per iteration of its loop.
    #[allow(clippy::too_many_arguments)]
    pub fn dma_looped(
        &mut self,
        engine: EngineId,
        dma: u8,
        queue: u8,
        descs: &[DmaDescriptor],
        sem: u8,
        inc: u32,
        steps: &[DmaStep],
    ) -> Result<(), Error> {
        if descs.is_empty() {
            return Ok(());
        }
        self.dma_on(engine, dma, queue, descs, sem, inc);
        for st in steps {
            if st.src != 0 {
                self.term(engine, TermSlot::DmaSrc, st.lp, st.src)?;
            }
            if st.dst != 0 {
                self.term(engine, TermSlot::DmaDst, st.lp, st.dst)?;
            }
        }
        Ok(())
    }

    /// [`dma_spread`](Self::dma_spread) with per-iteration offsets (each transfer as
    /// [`dma_looped`](Self::dma_looped)). Returns the number of transfers.
    pub fn dma_spread_looped(
        &mut self,
        engine: EngineId,
        descs: &[DmaDescriptor],
        queue: u8,
        sem: u8,
        max_engines: usize,
        steps: &[DmaStep],
    ) -> Result<u32, Error> {
        if descs.is_empty() {
            return Ok(0);
        }
        let engines = max_engines.clamp(1, DMA_ENGINES).min(descs.len());
        let per = descs.len().div_ceil(engines);
        let mut n = 0;
        for chunk in descs.chunks(per) {
            let dma = (self.next_dma % DMA_ENGINES) as u8;
            self.next_dma += 1;
            self.dma_looped(engine, dma, queue, chunk, sem, 1, steps)?;
            n += 1;
        }
        Ok(n)
    }
}
