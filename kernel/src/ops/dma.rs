//! DMA operations: `dma_copy` — any view to any view of the same shape (size-1 dimensions
//! aside) along the directions the DMA engines have (HBM→SBUF, SBUF→HBM, SBUF→SBUF,
//! PSUM→SBUF): contiguous byte descriptors for equal dtypes, format-1.1 block descriptors that
//! convert (through fp32, as NKI's DMA casts) when the dtypes differ — and `dma_transpose`, a
//! 2-D transpose into SBUF through transposing block descriptors. Descriptors are spread over
//! DMA engines (16 by default) and triggered by the engine the synchronisation chooses or by
//! `engine`.

use nrt_core::{Error, err};
use nrt_sim::engine::{DMA_ENGINES, DmaDescriptor, EngineId, MemKind, TensorKind};

use super::Op;
use crate::blocks::{cast_descriptors, transpose_descriptors};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::layout::copy_descriptors;
use crate::view::View;

/// `dst = src` by DMA (`nki.isa.dma_copy`).
#[derive(Clone, Copy, Debug)]
pub struct DmaCopy<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Source.
    pub src: &'a View,
    /// The sequencer that triggers the transfers (any engine; by default the engine whose
    /// latest operation the copy depends on when that needs no wait, else SyncE).
    pub engine: Option<EngineId>,
    /// Most DMA engines the descriptors are spread over (1..=16; 16 by default).
    pub dma_engines: usize,
}

impl<'a> DmaCopy<'a> {
    /// A copy with the default engine choice and spread.
    pub fn new(dst: &'a View, src: &'a View) -> Self {
        Self {
            dst,
            src,
            engine: None,
            dma_engines: DMA_ENGINES,
        }
    }
}

impl Op for DmaCopy<'_> {
    fn name(&self) -> &'static str {
        "dma_copy"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let (dst, src) = (self.dst, self.src);
        k.check(dst, n, "dst")?;
        k.check(src, n, "src")?;
        let (dm, sm) = (dst.base.mem, src.base.mem);
        let ok = matches!(
            (sm, dm),
            (Memory::Hbm, Memory::Sbuf)
                | (Memory::Sbuf, Memory::Hbm)
                | (Memory::Sbuf, Memory::Sbuf)
                | (Memory::Psum, Memory::Sbuf)
        );
        if !ok {
            return Err(err!(
                Invalid,
                "{n}: {sm} -> {dm} is not supported (the DMA engines copy HBM -> SBUF, SBUF -> \
                 HBM, SBUF -> SBUF and PSUM -> SBUF)"
            ));
        }
        writable(k, n, dst)?;
        if dst.has_repeats() {
            return Err(err!(
                Invalid,
                "{n}: dst {} writes some elements more than once",
                dst.describe()
            ));
        }
        let descs = if dst.dtype == src.dtype {
            copy_descriptors(dst, src)
        } else {
            cast_descriptors(dst, src, self.dma_engines)
        }
        .map_err(|e| err!(Invalid, "{n}: {}", e.message()))?;
        if dm == sm && overlapping(&descs) {
            return Err(err!(
                Invalid,
                "{n}: dst {} and src {} overlap",
                dst.describe(),
                src.describe()
            ));
        }
        k.emit_dma(n, self.engine, &descs, self.dma_engines)
    }
}

/// Refuses a destination that is an HBM input or constant.
fn writable(k: &Kernel, n: &str, dst: &View) -> Result<(), Error> {
    if dst.base.mem == Memory::Hbm {
        let kind = k.tensor_kind(dst.base.id);
        if let Some(kind @ (TensorKind::Input | TensorKind::Const)) = kind {
            return Err(err!(
                Invalid,
                "{n}: dst {} is {} tensor; kernels write only output and scratch tensors",
                dst.base,
                if kind == TensorKind::Input {
                    "an input"
                } else {
                    "a constant"
                }
            ));
        }
    }
    Ok(())
}

/// `(partition, first byte, end)` of each partition an on-chip end of `d` covers (a block
/// covers its rows' partitions).
fn spans(d: &DmaDescriptor, dst: bool) -> impl Iterator<Item = (u32, u64, u64)> {
    let ep = if dst { d.dst } else { d.src };
    let r = ep.region(&[], d.len);
    let on_chip = !matches!(ep.mem(), MemKind::Hbm);
    let parts = if on_chip { r.p0..r.p1 } else { 0..0 };
    parts.map(move |p| (p, r.b0, r.b1))
}

/// Whether some descriptor's destination overlaps some descriptor's source (same memory).
fn overlapping(descs: &[DmaDescriptor]) -> bool {
    let mut srcs: Vec<(u32, u64, u64)> = descs.iter().flat_map(|d| spans(d, false)).collect();
    srcs.sort_unstable();
    // Disjoint, sorted union per partition: interval ends then grow with the starts.
    let mut union: Vec<(u32, u64, u64)> = Vec::with_capacity(srcs.len());
    for s in srcs {
        match union.last_mut() {
            Some(u) if u.0 == s.0 && s.1 <= u.2 => u.2 = u.2.max(s.2),
            _ => union.push(s),
        }
    }
    descs
        .iter()
        .flat_map(|d| spans(d, true))
        .any(|(p, b0, b1)| {
            // The first source interval of partition p that ends after b0.
            let i = union.partition_point(|&(sp, _, se)| (sp, se) <= (p, b0));
            union.get(i).is_some_and(|&(sp, s0, _)| sp == p && s0 < b1)
        })
}

/// `dst = srcᵀ` for a 2-D `src` `[R, C]` in HBM or SBUF and `dst` `[C, R]` in SBUF, same
/// dtype, by DMA (`nki.isa.dma_transpose` with axes `(1, 0)`): transposing block descriptors,
/// `src`'s rows contiguous (in HBM any pitch), `dst`'s partitions its `C` rows. Data moves
/// at 90 % of a copy's rate (the published DMA-transpose figure).
#[derive(Clone, Copy, Debug)]
pub struct DmaTranspose<'a> {
    /// Destination `[C, R]` (SBUF).
    pub dst: &'a View,
    /// Source `[R, C]` (HBM or SBUF).
    pub src: &'a View,
    /// The sequencer that triggers the transfers (as [`DmaCopy::engine`]).
    pub engine: Option<EngineId>,
    /// Most DMA engines the descriptors are spread over (1..=16; 16 by default).
    pub dma_engines: usize,
}

impl<'a> DmaTranspose<'a> {
    /// A transpose with the default engine choice and spread.
    pub fn new(dst: &'a View, src: &'a View) -> Self {
        Self {
            dst,
            src,
            engine: None,
            dma_engines: DMA_ENGINES,
        }
    }
}

impl Op for DmaTranspose<'_> {
    fn name(&self) -> &'static str {
        "dma_transpose"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let (dst, src) = (self.dst, self.src);
        k.check(dst, n, "dst")?;
        k.check(src, n, "src")?;
        if dst.base.mem != Memory::Sbuf {
            return Err(err!(
                Invalid,
                "{n}: dst must be an SBUF tile, not {}",
                dst.base
            ));
        }
        if src.base.mem == Memory::Psum {
            return Err(err!(
                Invalid,
                "{n}: src must be in HBM or SBUF, not {} (a transposing DMA reads HBM or \
                 SBUF)",
                src.base
            ));
        }
        if dst.dtype != src.dtype {
            return Err(err!(
                Invalid,
                "{n}: dst {} and src {} differ in dtype; a transposing DMA keeps the element \
                 type (transpose, then convert)",
                dst.describe(),
                src.describe()
            ));
        }
        let descs = transpose_descriptors(n, dst, src, self.dma_engines)?;
        if src.base.mem == Memory::Sbuf && overlapping(&descs) {
            return Err(err!(
                Invalid,
                "{n}: dst {} and src {} overlap",
                dst.describe(),
                src.describe()
            ));
        }
        k.emit_dma(n, self.engine, &descs, self.dma_engines)
    }
}

impl Kernel {
    /// `dst = src` by DMA (`nki.isa.dma_copy`): HBM→SBUF, SBUF→HBM, SBUF→SBUF or PSUM→SBUF,
    /// same shape without size-1 dimensions; converting the dtype (through fp32) when the two
    /// differ.
    pub fn dma_copy(&mut self, dst: &View, src: &View) -> Result<(), Error> {
        self.emit(DmaCopy::new(dst, src))
    }

    /// `dst = srcᵀ` by DMA (`nki.isa.dma_transpose`): `src` `[R, C]` in HBM or SBUF, `dst`
    /// `[C, R]` in SBUF, same dtype.
    pub fn dma_transpose(&mut self, dst: &View, src: &View) -> Result<(), Error> {
        self.emit(DmaTranspose::new(dst, src))
    }
}
