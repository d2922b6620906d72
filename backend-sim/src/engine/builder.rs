//! `ProgramBuilder`: assembles engine streams, DMA descriptors and semaphores into a
//! [`Program`].

use nrt_core::{Error, err};

use super::dtype::DType;
use super::isa::{DmaDescriptor, DmaEndpoint, EngineId, Instr, SemCmp};
use super::memory::{DMA_ENGINES, SEMAPHORES};
use super::program::{Program, TensorDecl, TensorKind};

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
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    program: Program,
    sems: SemAlloc,
    next_dma: usize,
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

    /// Appends an instruction to `engine`'s stream.
    pub fn push(&mut self, engine: EngineId, ins: Instr) {
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

    /// Finishes: appends `Halt` to every stream and validates.
    pub fn build(mut self) -> Result<Program, Error> {
        for s in &mut self.program.streams {
            s.push(Instr::Halt);
        }
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
pub(crate) fn rows_to_sbuf(
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
pub(crate) fn sbuf_to_rows(
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
