//! `ProgramBuilder`: assembles engine streams, DMA descriptors and semaphores into a
//! [`Program`]; with loops (format 1.1), dynamic terms and semaphore waits counted through
//! loops (`loops.rs`, bookkeeping in `state.rs`).

mod loops;
mod state;

use nrt_core::{Error, err};

use super::dtype::DType;
use super::isa::{DmaDescriptor, DmaEndpoint, EngineId, Instr, SemCmp};
use super::memory::{DMA_ENGINES, SEMAPHORES};
use super::program::{Program, TensorDecl, TensorKind};
pub use loops::{DmaStep, LoopId};
use state::LoopState;

/// Hands out fresh semaphore indices.
#[derive(Clone, Copy, Debug, Default)]
pub struct SemAlloc {
    next: u16,
}

impl SemAlloc {
    /// A fresh semaphore (`NRT_RESOURCE` after 256).
    pub fn alloc(&mut self) -> Result<u8, Error> {
        if usize::from(self.next) >= SEMAPHORES {
            return Err(err!(Resource, "all {SEMAPHORES} semaphores are in use"));
        }
        let s = self.next as u8;
        self.next += 1;
        Ok(s)
    }
}

/// Builds a [`Program`] instruction by instruction.
///
/// Loops (format 1.1): [`loop_begin`](Self::loop_begin) opens a loop on a set of engines (each
/// runs the same body `count` times, with the loop's iteration register), instructions pushed
/// until [`loop_end`](Self::loop_end) form the body, [`term`](Self::term) makes an operand of
/// the instruction just pushed move with the iteration, and [`dma_looped`](Self::dma_looped) /
/// [`dma_spread_looped`](Self::dma_spread_looped) trigger one descriptor group whose offsets
/// move per iteration. [`wait_all`](Self::wait_all) waits for every increment of a semaphore
/// pushed before it — counted through the loops, so a double-buffered pipeline is written
/// as if unrolled:
///
/// ```
/// use nrt_sim::engine::{DType, DmaStep, EngineId, ProgramBuilder, kernels};
/// # fn main() -> Result<(), nrt_core::Error> {
/// // Copy 64 rows of 256 fp32 from `x` to `y` through SBUF, one row per iteration.
/// let mut b = ProgramBuilder::new("copy_rows");
/// let x = b.input("x", DType::F32, &[64, 256]);
/// let y = b.output("y", DType::F32, &[64, 256]);
/// let (loaded, stored) = (b.sem()?, b.sem()?);
/// let row = 256 * 4;
/// let lp = b.loop_begin(&[EngineId::Sync], 64)?;
/// b.wait_all(EngineId::Sync, stored)?; // the previous row has left SBUF
/// let load = kernels::rows_to_sbuf(x, DType::F32, 256, 0, 0, 1, 256, 0, 0);
/// b.dma_looped(EngineId::Sync, 0, 0, &load, loaded, 1, &[DmaStep { lp, src: row, dst: 0 }])?;
/// b.wait_all(EngineId::Sync, loaded)?;
/// let store = kernels::sbuf_to_rows(y, DType::F32, 256, 0, 0, 1, 256, 0, 0);
/// b.dma_looped(EngineId::Sync, 1, 0, &store, stored, 1, &[DmaStep { lp, src: 0, dst: row }])?;
/// b.loop_end(lp)?;
/// b.wait_all(EngineId::Sync, stored)?;
/// let program = b.build()?;
/// // SyncE: LoopBegin, the 4-instruction body once (not 64 times), LoopEnd, SemWait, Halt;
/// // a Halt on each other engine.
/// assert_eq!(program.instruction_count(), 8 + 4);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    program: Program,
    sems: SemAlloc,
    next_dma: usize,
    loops: LoopState,
}

impl ProgramBuilder {
    /// An empty program called `name`.
    pub fn new(name: &str) -> Self {
        Self {
            program: Program {
                name: name.to_owned(),
                ..Program::default()
            },
            sems: SemAlloc::default(),
            next_dma: 0,
            loops: LoopState::new(),
        }
    }

    /// Declares an HBM tensor; returns its index.
    pub fn tensor(&mut self, name: &str, kind: TensorKind, dtype: DType, shape: &[u64]) -> u32 {
        self.program.tensors.push(TensorDecl {
            name: name.to_owned(),
            kind,
            dtype,
            shape: shape.to_vec(),
            data: Vec::new(),
        });
        (self.program.tensors.len() - 1) as u32
    }

    /// Declares an input tensor.
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[u64]) -> u32 {
        self.tensor(name, TensorKind::Input, dtype, shape)
    }

    /// Declares an output tensor.
    pub fn output(&mut self, name: &str, dtype: DType, shape: &[u64]) -> u32 {
        self.tensor(name, TensorKind::Output, dtype, shape)
    }

    /// Declares a constant tensor with its bytes.
    pub fn constant(&mut self, name: &str, dtype: DType, shape: &[u64], data: Vec<u8>) -> u32 {
        let i = self.tensor(name, TensorKind::Const, dtype, shape);
        if let Some(t) = self.program.tensors.last_mut() {
            t.data = data;
        }
        i
    }

    /// A fresh semaphore.
    pub fn sem(&mut self) -> Result<u8, Error> {
        self.sems.alloc()
    }

    /// Sets a semaphore's initial value.
    pub fn sem_init(&mut self, sem: u8, value: u32) {
        self.program.sem_init.retain(|&(s, _)| s != sem);
        self.program.sem_init.push((sem, value));
    }

    /// Appends an instruction to `engine`'s stream. Inside loops, `engine` must run the
    /// innermost loop; loop instructions come from [`loop_begin`](Self::loop_begin) and
    /// [`loop_end`](Self::loop_end) (a misuse is reported by [`build`](Self::build)).
    pub fn push(&mut self, engine: EngineId, ins: Instr) {
        self.loops.on_push(engine, &ins);
        self.push_raw(engine, ins);
    }

    fn push_raw(&mut self, engine: EngineId, ins: Instr) {
        if let Some(s) = self.program.streams.get_mut(engine.index()) {
            s.push(ins);
        }
    }

    /// `SemWait sem >= value` on `engine` (nothing when `value` is 0).
    pub fn wait(&mut self, engine: EngineId, sem: u8, value: u32) {
        if value > 0 {
            self.push(
                engine,
                Instr::SemWait {
                    sem,
                    cmp: SemCmp::Ge,
                    value,
                },
            );
        }
    }

    /// `SemInc sem += value` on `engine`.
    pub fn signal(&mut self, engine: EngineId, sem: u8, value: u32) {
        self.push(engine, Instr::SemInc { sem, value });
    }

    /// Appends descriptors to the table; returns the index of the first.
    pub fn descriptors(&mut self, descs: &[DmaDescriptor]) -> u32 {
        let first = self.program.descriptors.len() as u32;
        self.program.descriptors.extend_from_slice(descs);
        first
    }

    /// One transfer of `descs` on DMA engine `dma`, queue `queue`, triggered by `engine`; on
    /// completion semaphore `sem` is incremented by `inc`.
    pub fn dma_on(
        &mut self,
        engine: EngineId,
        dma: u8,
        queue: u8,
        descs: &[DmaDescriptor],
        sem: u8,
        inc: u32,
    ) {
        if descs.is_empty() {
            return;
        }
        let first = self.descriptors(descs);
        self.push(
            engine,
            Instr::DmaTrigger {
                dma,
                queue,
                first,
                count: descs.len() as u32,
                sem,
                inc,
            },
        );
    }

    /// Spreads `descs` in contiguous chunks over up to `max_engines` DMA engines (starting
    /// where the previous spread stopped), one transfer each on `queue`, triggered by
    /// `engine`; each transfer increments `sem` by 1. Returns the number of transfers (the
    /// total increment to wait for).
    pub fn dma_spread(
        &mut self,
        engine: EngineId,
        descs: &[DmaDescriptor],
        queue: u8,
        sem: u8,
        max_engines: usize,
    ) -> u32 {
        if descs.is_empty() {
            return 0;
        }
        let engines = max_engines.clamp(1, DMA_ENGINES).min(descs.len());
        let per = descs.len().div_ceil(engines);
        let mut n = 0;
        for chunk in descs.chunks(per) {
            let dma = (self.next_dma % DMA_ENGINES) as u8;
            self.next_dma += 1;
            self.dma_on(engine, dma, queue, chunk, sem, 1);
            n += 1;
        }
        n
    }

    /// Finishes: appends `Halt` to every stream, sorts the dynamic terms (merging those of one
    /// slot and register) and validates. Open loops and misuses of `push` are errors.
    pub fn build(mut self) -> Result<Program, Error> {
        if let Some(e) = self.loops.error.take() {
            return Err(e);
        }
        if let Some(l) = self.loops.open.last() {
            return Err(err!(
                Invalid,
                "the loop of {} iterations opened at depth {} is not closed",
                l.count,
                self.loops.open.len()
            ));
        }
        for s in &mut self.program.streams {
            s.push(Instr::Halt);
        }
        let mut terms = std::mem::take(&mut self.loops.terms);
        terms.sort_by_key(|t| t.key());
        let mut merged: Vec<super::isa::DynTerm> = Vec::with_capacity(terms.len());
        for t in terms {
            match merged.last_mut() {
                Some(m) if m.key() == t.key() => m.step = m.step.wrapping_add(t.step),
                _ => merged.push(t),
            }
        }
        merged.retain(|t| t.step != 0);
        self.program.terms = merged;
        self.program.validate()?;
        Ok(self.program)
    }

    /// The program so far (without the final `Halt`s).
    pub fn program(&self) -> &Program {
        &self.program
    }
}

/// Descriptors copying rows of a row-major HBM tensor into consecutive SBUF partitions:
/// row `row0 + r`, columns `[col0, col0 + ncols)` → partition `part0 + r` at `sbuf_offset`.
#[allow(clippy::too_many_arguments)]
pub fn rows_to_sbuf(
    tensor: u32,
    dtype: DType,
    row_len: u64,
    row0: u64,
    col0: u64,
    nrows: u64,
    ncols: u64,
    part0: u8,
    sbuf_offset: u32,
) -> Vec<DmaDescriptor> {
    let es = dtype.size() as u64;
    (0..nrows)
        .map(|r| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor,
                offset: ((row0 + r) * row_len + col0) * es,
            },
            dst: DmaEndpoint::Sbuf {
                partition: part0 + r as u8,
                offset: sbuf_offset,
            },
            len: (ncols * es) as u32,
        })
        .collect()
}

/// The inverse of [`rows_to_sbuf`]: partitions → rows of an HBM tensor.
#[allow(clippy::too_many_arguments)]
pub fn sbuf_to_rows(
    tensor: u32,
    dtype: DType,
    row_len: u64,
    row0: u64,
    col0: u64,
    nrows: u64,
    ncols: u64,
    part0: u8,
    sbuf_offset: u32,
) -> Vec<DmaDescriptor> {
    rows_to_sbuf(
        tensor,
        dtype,
        row_len,
        row0,
        col0,
        nrows,
        ncols,
        part0,
        sbuf_offset,
    )
    .into_iter()
    .map(|d| DmaDescriptor {
        src: d.dst,
        dst: d.src,
        len: d.len,
    })
    .collect()
}
