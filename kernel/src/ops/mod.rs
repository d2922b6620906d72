//! Operations, named and behaving like `nki.isa`. Each is a struct implementing [`Op`] (its
//! operands as views, its options such as an `engine` override) with a convenience method on
//! [`Kernel`] taking the NKI arguments in NKI's order, destination first.
//!
//! Lowering an operation validates everything first (views of this kernel, live tiles,
//! spaces, shapes, dtypes, the ISA's size rules) and only then records it, so a failed
//! operation leaves the kernel unchanged. Recording goes through two calls:
//! `Kernel::emit_engine(engine, instructions, accesses)` for engine work and
//! `Kernel::emit_dma(..)` for DMA; synchronisation follows from the accesses.
//!
//! Adding an instruction the ISA gains is local: a struct, its `lower` (operand checks with
//! the helpers below, the `Instr`, its reads and writes), a convenience method.
//!
//! * `dma.rs` — `dma_copy`;
//! * `elementwise.rs` — `tensor_tensor`, `tensor_scalar`, `tensor_copy`, `activation`;
//! * `fill.rs` — `memset`, `iota`;
//! * `matmul.rs` — `nc_matmul`.

mod dma;
mod elementwise;
mod fill;
mod matmul;

pub use dma::DmaCopy;
pub use elementwise::{ActBias, Activation, TensorCopy, TensorScalar, TensorTensor};
pub use fill::{Iota, Memset};
pub use matmul::NcMatmul;

use nrt_core::{Error, err};
use nrt_sim::engine::{AccessPattern, EngineId, Space};

use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::layout::access_pattern;
use crate::sync::Rect;
use crate::view::View;

/// An operation that can be recorded on a [`Kernel`].
pub trait Op {
    /// The `nki.isa` name, used in messages.
    fn name(&self) -> &'static str;
    /// Validates the operands and records the operation (nothing is recorded on error).
    fn lower(&self, k: &mut Kernel) -> Result<(), Error>;
}

impl Kernel {
    /// Records `op` (use this for options the convenience methods do not take, such as an
    /// engine override).
    pub fn emit(&mut self, op: impl Op) -> Result<(), Error> {
        op.lower(self)
    }
}

/// The access pattern of an on-chip operand `role` of `op`.
pub(crate) fn on_chip(k: &Kernel, v: &View, op: &str, role: &str) -> Result<AccessPattern, Error> {
    k.check(v, op, role)?;
    if !v.base.mem.is_on_chip() {
        return Err(err!(
            Invalid,
            "{op}: {role} must be an SBUF or PSUM tile, not {}",
            v.base
        ));
    }
    access_pattern(v).map_err(|e| err!(Invalid, "{op}: {role}: {}", e.message()))
}

/// Requires operand `role` of `op` to be in `mem`.
pub(crate) fn require(v: &View, mem: Memory, op: &str, role: &str) -> Result<(), Error> {
    if v.base.mem != mem {
        return Err(err!(
            Invalid,
            "{op}: {role} must be in {mem}, not {}",
            v.base
        ));
    }
    Ok(())
}

/// Requires a float dtype.
pub(crate) fn require_float(v: &View, op: &str, role: &str) -> Result<(), Error> {
    if !v.dtype.is_float() {
        return Err(err!(
            Invalid,
            "{op}: {role} {} is not a float type",
            v.describe()
        ));
    }
    Ok(())
}

/// The engine of an operation: the requested one if the ISA runs the instruction there
/// (`allowed`), else `default`.
pub(crate) fn engine_for(
    op: &str,
    requested: Option<EngineId>,
    default: EngineId,
    allowed: &[EngineId],
) -> Result<EngineId, Error> {
    let e = requested.unwrap_or(default);
    if !allowed.contains(&e) {
        let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
        return Err(err!(
            Invalid,
            "{op}: cannot run on {e} (this ISA runs it on {})",
            names.join(" or ")
        ));
    }
    Ok(e)
}

/// GpSimdE reaches SBUF only.
pub(crate) fn gpsimd_reach(e: EngineId, v: &View, op: &str, role: &str) -> Result<(), Error> {
    if e == EngineId::GpSimd && v.base.mem == Memory::Psum {
        return Err(err!(
            Invalid,
            "{op}: GpSimdE cannot access PSUM ({role} {})",
            v.base
        ));
    }
    Ok(())
}

/// Requires operand `role` to have `dst`'s partition count and elements per partition.
pub(crate) fn same_size(
    op: &str,
    role: &str,
    v: &View,
    ap: &AccessPattern,
    dst: &View,
    dap: &AccessPattern,
) -> Result<(), Error> {
    if ap.partitions != dap.partitions || ap.free_elems() != dap.free_elems() {
        return Err(err!(
            Invalid,
            "{op}: {role} {} does not match dst {} ({} partitions x {} elements vs {} x {})",
            v.describe(),
            dst.describe(),
            ap.partitions,
            ap.free_elems(),
            dap.partitions,
            dap.free_elems()
        ));
    }
    Ok(())
}

/// The PSUM rectangle of a pattern.
pub(crate) fn psum_rect(ap: &AccessPattern) -> Option<Rect> {
    (ap.space == Space::Psum).then(|| {
        let r = ap.region();
        Rect {
            p0: r.p0,
            p1: r.p1,
            b0: r.b0,
            b1: r.b1,
        }
    })
}

/// A write to PSUM by something other than a matmul: accumulation there starts afresh.
pub(crate) fn psum_written(k: &mut Kernel, ap: &AccessPattern) {
    if let Some(r) = psum_rect(ap) {
        k.mm_started.retain(|m| !m.overlaps(&r));
    }
}
