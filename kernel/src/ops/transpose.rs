//! `nc_transpose`: `dst[f, p] = data[p, f]` (the free dimensions flattened), bit-exact, on
//! TensorE (`data` in SBUF up to `[128, 128]`, `dst` in PSUM, contiguous in one bank) or
//! VectorE (up to `[32, 32]`, SBUF or PSUM), as in NKI. By default TensorE when `data` is in
//! SBUF and `dst` in PSUM (its only form), VectorE otherwise.

use nrt_core::{Error, err};
use nrt_sim::engine::{EngineId, Instr};

use super::{Op, engine_for, on_chip};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::view::View;

/// `dst = dataᵀ` (`nki.isa.nc_transpose`).
#[derive(Clone, Copy, Debug)]
pub struct NcTranspose<'a> {
    /// Destination `[F, P]`, same dtype as `data`.
    pub dst: &'a View,
    /// Input `[P, F]`.
    pub data: &'a View,
    /// Engine: TensorE or VectorE (by default as the module documentation says).
    pub engine: Option<EngineId>,
}

impl Op for NcTranspose<'_> {
    fn name(&self) -> &'static str {
        "nc_transpose"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let (dst, data) = (self.dst, self.data);
        let default = if data.memory() == Memory::Sbuf && dst.memory() == Memory::Psum {
            EngineId::Tensor
        } else {
            EngineId::Vector
        };
        let e = engine_for(
            n,
            self.engine,
            default,
            &[EngineId::Tensor, EngineId::Vector],
        )?;
        let out = on_chip(k, dst, n, "dst")?;
        let src = on_chip(k, data, n, "data")?;
        if dst.dtype() != data.dtype() {
            return Err(err!(
                Invalid,
                "{n}: dst {} must have data {}'s dtype (a transpose moves bits)",
                dst.describe(),
                data.describe()
            ));
        }
        if u64::from(out.partitions) != src.free_elems()
            || out.free_elems() != u64::from(src.partitions)
        {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be [{}, {}], the transpose of data {}",
                dst.describe(),
                src.free_elems(),
                src.partitions,
                data.describe()
            ));
        }
        k.record(n, e, &[Instr::Transpose { src, out }])
    }
}

impl Kernel {
    /// `dst = dataᵀ` on TensorE (SBUF → PSUM) or VectorE (up to `[32, 32]`)
    /// (`nki.isa.nc_transpose`; the engine choice through [`NcTranspose`]).
    pub fn nc_transpose(&mut self, dst: &View, data: &View) -> Result<(), Error> {
        self.emit(NcTranspose {
            dst,
            data,
            engine: None,
        })
    }
}
