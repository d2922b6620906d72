//! Fills: `memset` (a constant; GpSimdE by default, or VectorE, as NKI allows) and `iota`
//! (an affine ramp, GpSimdE). GpSimdE reaches SBUF only, as in NKI.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, EngineId, Instr};

use super::{Op, engine_for, gpsimd_reach, on_chip};
use crate::kernel::Kernel;
use crate::view::View;

/// Fills `dst` with `value` (`nki.isa.memset`).
#[derive(Clone, Copy, Debug)]
pub struct Memset<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Value: an integer for int32 destinations, rounded to the destination type otherwise.
    pub value: f64,
    /// Engine: GpSimdE by default, or VectorE (NKI's two; VectorE makes the kernel format
    /// 1.1, and reaches PSUM).
    pub engine: Option<EngineId>,
}

impl Op for Memset<'_> {
    fn name(&self) -> &'static str {
        "memset"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let e = engine_for(
            n,
            self.engine,
            EngineId::GpSimd,
            &[EngineId::GpSimd, EngineId::Vector],
        )?;
        let out = on_chip(k, self.dst, n, "dst")?;
        gpsimd_reach(e, self.dst, n, "dst")?;
        let bits = if self.dst.dtype == DType::I32 {
            let v = self.value;
            if v.fract() != 0.0 || !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&v) {
                return Err(err!(
                    Invalid,
                    "{n}: value {v} is not an int32 (dst {})",
                    self.dst.describe()
                ));
            }
            (v as i32) as u32
        } else {
            (self.value as f32).to_bits()
        };
        k.record(n, e, &[Instr::Memset { out, bits }])
    }
}

/// `dst[p, i] = base + p·partition_step + i·free_step` in int32 (wrapping), `p` from the
/// view's first partition and `i` over its elements in order, converted to the destination
/// type (`nki.isa.iota` with a flattened pattern).
#[derive(Clone, Copy, Debug)]
pub struct Iota<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Value of the first element.
    pub base: i32,
    /// Step per partition (NKI's `channel_multiplier`).
    pub partition_step: i32,
    /// Step per element.
    pub free_step: i32,
}

impl Op for Iota<'_> {
    fn name(&self) -> &'static str {
        "iota"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        gpsimd_reach(EngineId::GpSimd, self.dst, n, "dst")?;
        let ins = Instr::Iota {
            out,
            base: self.base,
            partition_step: self.partition_step,
            free_step: self.free_step,
        };
        k.record(n, EngineId::GpSimd, &[ins])
    }
}

impl Kernel {
    /// Fills `dst` with `value` on GpSimdE (`nki.isa.memset`; VectorE through [`Memset`]).
    pub fn memset(&mut self, dst: &View, value: f64) -> Result<(), Error> {
        self.emit(Memset {
            dst,
            value,
            engine: None,
        })
    }

    /// `dst[p, i] = base + p·partition_step + i·free_step` on GpSimdE (`nki.isa.iota`).
    pub fn iota(
        &mut self,
        dst: &View,
        base: i32,
        partition_step: i32,
        free_step: i32,
    ) -> Result<(), Error> {
        self.emit(Iota {
            dst,
            base,
            partition_step,
            free_step,
        })
    }
}
