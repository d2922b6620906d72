//! `nc_matmul` on TensorE: `dst[M, N] (+)= stationaryᵀ · moving`, stationary `[K, M]` and
//! moving `[K, N]` in SBUF (K on partitions, K ≤ 128, M ≤ 128, N ≤ 512, one float dtype),
//! dst fp32 `[M, N]` contiguous in one PSUM bank. Lowered to `LoadStationary` +
//! `MultiplyMoving`.
//!
//! `accumulate: None` infers the flag as NKI does: the first matmul into a PSUM region
//! overwrites, later ones into the same region accumulate (any other write to the region, or
//! a new tile there, starts afresh); a destination that partly overlaps an earlier one is
//! ambiguous and must say what it wants.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, EngineId, Instr, PSUM_BANK_BYTES};

use super::{Op, on_chip, psum_rect, require, require_float};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::view::View;

/// `dst = stationaryᵀ · moving`, overwriting or accumulating (`nki.isa.nc_matmul`).
#[derive(Clone, Copy, Debug)]
pub struct NcMatmul<'a> {
    /// PSUM fp32 `[M, N]`.
    pub dst: &'a View,
    /// SBUF `[K, M]`.
    pub stationary: &'a View,
    /// SBUF `[K, N]`.
    pub moving: &'a View,
    /// `Some(false)` overwrites, `Some(true)` accumulates, `None` infers.
    pub accumulate: Option<bool>,
}

impl Op for NcMatmul<'_> {
    fn name(&self) -> &'static str {
        "nc_matmul"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let (st, mv, d) = (self.stationary, self.moving, self.dst);
        let sap = on_chip(k, st, n, "stationary")?;
        let map = on_chip(k, mv, n, "moving")?;
        let dap = on_chip(k, d, n, "dst")?;
        require(st, Memory::Sbuf, n, "stationary")?;
        require(mv, Memory::Sbuf, n, "moving")?;
        require(d, Memory::Psum, n, "dst")?;
        require_float(st, n, "stationary")?;
        require_float(mv, n, "moving")?;
        if st.dtype != mv.dtype {
            return Err(err!(
                Invalid,
                "{n}: stationary {} and moving {} must have the same dtype",
                st.describe(),
                mv.describe()
            ));
        }
        if d.dtype != DType::F32 {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be fp32 (PSUM accumulates in fp32)",
                d.describe()
            ));
        }
        if sap.partitions != map.partitions {
            return Err(err!(
                Invalid,
                "{n}: stationary {} has K = {} partitions, moving {} has {}; both contract over \
                 their partition dimension",
                st.describe(),
                sap.partitions,
                mv.describe(),
                map.partitions
            ));
        }
        let (m, cols) = (sap.free_elems(), map.free_elems());
        if m > 128 {
            return Err(err!(
                Invalid,
                "{n}: stationary {} has M = {m} columns; at most 128",
                st.describe()
            ));
        }
        if cols > 512 {
            return Err(err!(
                Invalid,
                "{n}: moving {} has N = {cols} columns; at most 512 (one 2 KiB PSUM bank of fp32)",
                mv.describe()
            ));
        }
        if u64::from(dap.partitions) != m || dap.free_elems() != cols {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be [M, N] = [{m}, {cols}]",
                d.describe()
            ));
        }
        let (lo, hi) = dap.byte_range();
        if hi - lo != cols as i64 * 4 || d.has_repeats() {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be contiguous in each partition",
                d.describe()
            ));
        }
        let bank = PSUM_BANK_BYTES as i64;
        if lo / bank != (hi - 1) / bank {
            return Err(err!(
                Invalid,
                "{n}: dst {} covers bytes [{lo}, {hi}) of each partition, across a 2 KiB PSUM \
                 bank boundary (a matmul output must lie in one bank)",
                d.describe()
            ));
        }
        let rect = psum_rect(&dap)
            .ok_or_else(|| err!(Invalid, "{n}: dst {} is not in PSUM", d.describe()))?;
        let accumulate = match self.accumulate {
            Some(a) => a,
            None => {
                if k.mm_started.iter().any(|s| s.contains(&rect)) {
                    true
                } else if k.mm_started.iter().any(|s| s.overlaps(&rect)) {
                    return Err(err!(
                        Invalid,
                        "{n}: cannot infer accumulate for dst {}: it partly overlaps an earlier \
                         matmul output; pass accumulate explicitly",
                        d.describe()
                    ));
                } else {
                    false
                }
            }
        };
        let instrs = [
            Instr::LoadStationary { src: sap },
            Instr::MultiplyMoving {
                moving: map,
                dst: dap,
                accumulate,
            },
        ];
        k.record(n, EngineId::Tensor, &instrs)?;
        if !accumulate {
            k.mm_started.retain(|s| !s.overlaps(&rect));
            k.mm_started.push(rect);
        }
        Ok(())
    }
}

impl Kernel {
    /// `dst = stationaryᵀ · moving` on TensorE, the first matmul into a PSUM region
    /// overwriting and later ones accumulating (`nki.isa.nc_matmul` with `accumulate=None`).
    pub fn nc_matmul(&mut self, dst: &View, stationary: &View, moving: &View) -> Result<(), Error> {
        self.emit(NcMatmul {
            dst,
            stationary,
            moving,
            accumulate: None,
        })
    }
}
