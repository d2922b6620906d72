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
            f64_to_f32_bits(self.value)
        };
        k.record(n, e, &[Instr::Memset { out, bits }])
    }
}

/// `v` rounded to binary32 (nearest even), as bits; a NaN keeps its sign and the top 22 bits
/// of its payload and is quiet. The NaN case is done on the bits: Rust leaves the payload of
/// a NaN that a float conversion produces unspecified, and optimised builds do change it.
fn f64_to_f32_bits(v: f64) -> u32 {
    let b = v.to_bits();
    if b & 0x7FFF_FFFF_FFFF_FFFF > 0x7FF0_0000_0000_0000 {
        let sign = ((b >> 32) as u32) & 0x8000_0000;
        let payload = ((b >> 29) as u32) & 0x003F_FFFF;
        sign | 0x7FC0_0000 | payload
    } else {
        (v as f32).to_bits()
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
