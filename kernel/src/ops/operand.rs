//! Scalar operands — NKI's `float | NkiTensor` arguments (`operand0`, `scale`, `initial`):
//! an immediate, or one value per partition read from a `[P, 1]` tile view.

use nrt_core::{Error, err};
use nrt_sim::engine::{AccessPattern, Operand};

use super::on_chip;
use crate::kernel::Kernel;
use crate::tiles::Tile;
use crate::view::View;

/// A scalar operand: the same value for every element, or one value per partition.
///
/// Converts from `f32`, `i32` (exact for int32 data: masks, shift counts), a [`View`] or a
/// [`Tile`], so operations take `2.0`, `0xFF` or `&tile` alike.
#[derive(Clone, Copy, Debug)]
pub enum Scalar<'a> {
    /// An fp32 immediate (rounded to int32, nearest even and saturating, when the operation
    /// computes in int32).
    F32(f32),
    /// An int32 immediate (rounded to fp32, nearest even, when the operation computes in
    /// fp32).
    I32(i32),
    /// One value per partition: a `[P, 1]` SBUF or PSUM view with the destination's
    /// partition count, read as each partition's value.
    Tile(&'a View),
}

impl From<f32> for Scalar<'_> {
    fn from(v: f32) -> Self {
        Scalar::F32(v)
    }
}

impl From<i32> for Scalar<'_> {
    fn from(v: i32) -> Self {
        Scalar::I32(v)
    }
}

impl<'a> From<&'a View> for Scalar<'a> {
    fn from(v: &'a View) -> Self {
        Scalar::Tile(v)
    }
}

impl<'a> From<&'a Tile> for Scalar<'a> {
    fn from(v: &'a Tile) -> Self {
        Scalar::Tile(v.view())
    }
}

impl Scalar<'_> {
    /// The engine operand, for an output of `parts` partitions.
    pub(crate) fn lower(
        &self,
        k: &Kernel,
        op: &str,
        role: &str,
        parts: u8,
    ) -> Result<Operand, Error> {
        Ok(match *self {
            Scalar::F32(v) => Operand::Imm(v),
            Scalar::I32(v) => Operand::Int(v),
            Scalar::Tile(v) => Operand::PerPartition(per_partition(k, v, op, role, parts)?),
        })
    }
}

/// The access pattern of a `[P, 1]` operand `role` of `op`, for an output of `parts`
/// partitions.
pub(crate) fn per_partition(
    k: &Kernel,
    v: &View,
    op: &str,
    role: &str,
    parts: u8,
) -> Result<AccessPattern, Error> {
    let ap = on_chip(k, v, op, role)?;
    if ap.partitions != parts || ap.free_elems() != 1 {
        return Err(err!(
            Invalid,
            "{op}: {role} {} must be [{parts}, 1] (one value per partition of dst)",
            v.describe()
        ));
    }
    Ok(ap)
}
