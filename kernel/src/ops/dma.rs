//! `dma_copy`: any view to any view of the same dtype and shape (size-1 dimensions aside)
//! along the directions the DMA engines have — HBM→SBUF, SBUF→HBM, SBUF→SBUF, PSUM→SBUF —
//! as contiguous descriptors spread over DMA engines (16 by default), triggered by the engine
//! the synchronisation chooses or by `engine`.

use nrt_core::{Error, err};
use nrt_sim::engine::{DMA_ENGINES, DmaDescriptor, DmaEndpoint, EngineId, MemKind, TensorKind};

use super::Op;
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
        if dst.dtype != src.dtype {
            return Err(err!(
                Invalid,
                "{n}: dst {} and src {} differ in dtype; the DMA of this ISA does not cast \
                 (copy, then convert with tensor_copy)",
                dst.describe(),
                src.describe()
            ));
        }
        if dm == Memory::Hbm {
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
        if dst.has_repeats() {
            return Err(err!(
                Invalid,
                "{n}: dst {} writes some elements more than once",
                dst.describe()
            ));
        }
        let descs =
            copy_descriptors(dst, src).map_err(|e| err!(Invalid, "{n}: {}", e.message()))?;
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

/// `(partition, first byte, end)` of an on-chip endpoint.
fn span(ep: &DmaEndpoint, len: u32) -> Option<(u8, u64, u64)> {
    match *ep {
        DmaEndpoint::Sbuf { partition, offset } | DmaEndpoint::Psum { partition, offset } => {
            Some((
                partition,
                u64::from(offset),
                u64::from(offset) + u64::from(len),
            ))
        }
        DmaEndpoint::Block(b) => match b.mem {
            MemKind::Sbuf | MemKind::Psum => Some((
                u8::try_from(b.index).unwrap_or(u8::MAX),
                b.offset,
                b.offset.saturating_add(b.row_bytes()),
            )),
            MemKind::Hbm => None,
        },
        DmaEndpoint::Hbm { .. } => None,
    }
}

/// Whether some descriptor's destination overlaps some descriptor's source (same memory).
fn overlapping(descs: &[DmaDescriptor]) -> bool {
    let mut srcs: Vec<(u8, u64, u64)> = descs.iter().filter_map(|d| span(&d.src, d.len)).collect();
    srcs.sort_unstable();
    // Disjoint, sorted union per partition: interval ends then grow with the starts.
    let mut union: Vec<(u8, u64, u64)> = Vec::with_capacity(srcs.len());
    for s in srcs {
        match union.last_mut() {
            Some(u) if u.0 == s.0 && s.1 <= u.2 => u.2 = u.2.max(s.2),
            _ => union.push(s),
        }
    }
    descs
        .iter()
        .filter_map(|d| span(&d.dst, d.len))
        .any(|(p, b0, b1)| {
            // The first source interval of partition p that ends after b0.
            let i = union.partition_point(|&(sp, _, se)| (sp, se) <= (p, b0));
            union.get(i).is_some_and(|&(sp, s0, _)| sp == p && s0 < b1)
        })
}

impl Kernel {
    /// `dst = src` by DMA (`nki.isa.dma_copy`): HBM→SBUF, SBUF→HBM, SBUF→SBUF or PSUM→SBUF,
    /// same dtype, same shape without size-1 dimensions.
    pub fn dma_copy(&mut self, dst: &View, src: &View) -> Result<(), Error> {
        self.emit(DmaCopy::new(dst, src))
    }
}
