//! Operations, named and behaving like `nki.isa`. Each is a struct implementing [`Op`] (its
//! operands as views, its options such as an `engine` override) with a convenience method on
//! [`Kernel`] taking the NKI arguments in NKI's order, destination first.
//!
//! Lowering an operation validates everything first (views of this kernel, live tiles,
//! spaces, shapes, dtypes, the ISA's rules) and only then records it, so a failed operation
//! leaves the kernel unchanged. Recording goes through two calls: `Kernel::record(op,
//! engine, instructions)` for engine work — it checks each instruction against the ISA
//! (`Instr::validate_operands`, and `Instr::check_engine` in the kernel's format) and takes
//! the footprints from the instructions themselves (`Instr::accesses`) — and
//! `Kernel::emit_dma(..)` for DMA, whose footprints are the descriptors' regions;
//! synchronisation follows from the footprints.
//!
//! Adding an instruction the ISA gains is local: a struct, its `lower` (operand checks with
//! the helpers below, the `Instr`), a convenience method.
//!
//! * `operand.rs` — [`Scalar`] operands (an immediate or a `[P, 1]` view);
//! * `dma.rs` — `dma_copy` (with casts), `dma_transpose`;
//! * `elementwise.rs` — `tensor_tensor`, `tensor_copy`, `scalar_tensor_tensor`,
//!   `reciprocal`;
//! * `scalar.rs` — `tensor_scalar` (one or two operations);
//! * `activation.rs` — `activation`, `activation_reduce`;
//! * `reduce.rs` — `tensor_reduce`, `bn_stats`, `bn_aggr`, `max8`, `nc_find_index8`,
//!   `tensor_tensor_scan`;
//! * `select.rs` — `affine_select`, `range_select`;
//! * `transpose.rs` — `nc_transpose`;
//! * `fill.rs` — `memset`, `iota`;
//! * `matmul.rs` — `nc_matmul`.

mod activation;
mod dma;
mod elementwise;
mod fill;
mod matmul;
mod operand;
mod reduce;
mod scalar;
mod select;
mod transpose;

pub use activation::{ActBias, Activation};
pub use dma::{DmaCopy, DmaTranspose};
pub use elementwise::{Reciprocal, ScalarTensorTensor, TensorCopy, TensorTensor};
pub use fill::{Iota, Memset};
pub use matmul::NcMatmul;
pub use operand::Scalar;
pub use reduce::{BnAggr, BnStats, FindIndex8, Max8, TensorReduce, TensorTensorScan};
pub use scalar::{TensorScalar, TensorScalarChain};
pub use select::{AffineSelect, RangeSelect};
pub use transpose::NcTranspose;

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

/// The engine of an operation: the requested one (or `default`) if the ISA runs the
/// operation there in some format (`allowed`). The exact rules of the instruction (which
/// operations, which memories, which format) are checked when it is recorded.
pub(crate) fn engine_for(
    op: &str,
    requested: Option<EngineId>,
    default: EngineId,
    allowed: &[EngineId],
) -> Result<EngineId, Error> {
    let e = requested.unwrap_or(default);
    if !allowed.contains(&e) {
        let names: Vec<&str> = allowed.iter().map(|a| a.name()).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        return Err(err!(
            Invalid,
            "{op}: cannot run on {e} (this ISA runs it on {list})"
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
    (ap.space == Space::Psum).then(|| Rect::of_region(&ap.region()))
}
