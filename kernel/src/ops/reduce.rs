//! Reductions, statistics and scans on VectorE, as in NKI: `tensor_reduce`, `bn_stats`,
//! `bn_aggr`, `max8`, `nc_find_index8`, `tensor_tensor_scan`. Each folds in a fixed order
//! (left to right in the view's element order), so results are bit-reproducible.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, BN_STATS_FMAX, EngineId, Instr, TOP8_FREE_RANGE};

use super::operand::Scalar;
use super::{Op, on_chip, same_size};
use crate::kernel::Kernel;
use crate::layout::access_pattern_split;
use crate::view::{View, shape_str};

/// `dst = op`-fold of `data` over its last free dimensions `axis` (`nki.isa.tensor_reduce`):
/// the axes must be a run of dimensions ending at the last one (dimension 0, the partitions,
/// cannot be reduced); `dst` has `data`'s partitions and shape without the reduced axes
/// (`keepdims`: with them, as size 1; `[P, 1]` when every free axis is reduced). `op` is one
/// of NKI's reduction operators (add, subtract, multiply, maximum, minimum, the logical and
/// the bitwise and/or/xor; bitwise on int32 tiles); `negate` multiplies the result by −1
/// (arithmetic operators). The fold starts from the first element: `subtract` gives
/// `x₀ − x₁ − …`.
///
/// NKI has no mean reduction: reduce with `add`, then scale by `1/n` (a `tensor_scalar`
/// multiply, or the `scale` of an `activation`).
#[derive(Clone, Copy, Debug)]
pub struct TensorReduce<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Reduction operator.
    pub op: AluOp,
    /// Input.
    pub data: &'a View,
    /// Dimensions of `data` to reduce: the last ones, ascending (e.g. `&[2, 3]` of a
    /// `[P, a, b, c]` view).
    pub axis: &'a [usize],
    /// Multiply the result by −1.
    pub negate: bool,
    /// `dst` keeps the reduced dimensions as size 1.
    pub keepdims: bool,
}

impl Op for TensorReduce<'_> {
    fn name(&self) -> &'static str {
        "tensor_reduce"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let (data, dst) = (self.data, self.dst);
        let out = on_chip(k, dst, n, "dst")?;
        on_chip(k, data, n, "data")?;
        let rank = data.rank();
        let first = self.axis.first().copied().unwrap_or(0);
        let run = self.axis.iter().copied().eq(first..rank);
        if first == 0 || !run {
            return Err(err!(
                Invalid,
                "{n}: axis {:?} must be the last free dimensions of data {} (a run ending at \
                 dimension {}; dimension 0 holds the partitions)",
                self.axis,
                data.describe(),
                rank.saturating_sub(1)
            ));
        }
        let shape = data.shape();
        let mut want: Vec<usize> = shape.iter().take(first).copied().collect();
        if self.keepdims {
            want.extend(std::iter::repeat_n(1, rank - first));
        } else if want.len() == 1 {
            want.push(1);
        }
        if dst.shape() != want {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be {} (data {} reduced over axis {:?}{})",
                dst.describe(),
                shape_str(&want),
                data.describe(),
                self.axis,
                if self.keepdims { ", keepdims" } else { "" }
            ));
        }
        let (src, axes) = access_pattern_split(data, first)
            .map_err(|e| err!(Invalid, "{n}: data: {}", e.message()))?;
        let ins = Instr::TensorReduce {
            op: self.op,
            src,
            out,
            axes,
            negate: self.negate,
        };
        k.record(n, EngineId::Vector, &[ins])
    }
}

/// A VectorE instruction `dst = f(src)` whose output has a fixed number of elements per
/// partition: `bn_stats` (6), `bn_aggr` (2), `max8` (8).
fn fixed(
    k: &mut Kernel,
    n: &str,
    dst: &View,
    data: &View,
    per: u64,
    make: fn(nrt_sim::engine::AccessPattern, nrt_sim::engine::AccessPattern) -> Instr,
) -> Result<(), Error> {
    let out = on_chip(k, dst, n, "dst")?;
    let src = on_chip(k, data, n, "data")?;
    if out.partitions != src.partitions || out.free_elems() != per {
        return Err(err!(
            Invalid,
            "{n}: dst {} must be [{}, {per}] for data {}",
            dst.describe(),
            src.partitions,
            data.describe()
        ));
    }
    k.record(n, EngineId::Vector, &[make(src, out)])
}

/// Per-partition statistics of up to 512 elements (`nki.isa.bn_stats`): `dst` `[P, 6]` =
/// count, mean and count·variance of the even-indexed elements, then of the odd-indexed
/// ones (fp32, two passes).
#[derive(Clone, Copy, Debug)]
pub struct BnStats<'a> {
    /// Destination `[P, 6]`.
    pub dst: &'a View,
    /// Input (at most 512 elements per partition).
    pub data: &'a View,
}

impl Op for BnStats<'_> {
    fn name(&self) -> &'static str {
        "bn_stats"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        if self.data.free_elems() as u64 > BN_STATS_FMAX {
            return Err(err!(
                Invalid,
                "{n}: data {} has {} elements per partition; at most {BN_STATS_FMAX} \
                 (aggregate several bn_stats with bn_aggr)",
                self.data.describe(),
                self.data.free_elems()
            ));
        }
        fixed(k, n, self.dst, self.data, 6, |src, out| Instr::BnStats {
            src,
            out,
        })
    }
}

/// Mean and variance from `bn_stats` triples (`nki.isa.bn_aggr`): `data` `[P, 3k]` (one or
/// more `bn_stats` outputs side by side), `dst` `[P, 2]` = mean, population variance.
#[derive(Clone, Copy, Debug)]
pub struct BnAggr<'a> {
    /// Destination `[P, 2]`.
    pub dst: &'a View,
    /// `(count, mean, count·variance)` triples.
    pub data: &'a View,
}

impl Op for BnAggr<'_> {
    fn name(&self) -> &'static str {
        "bn_aggr"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        if self.data.free_elems() % 3 != 0 {
            return Err(err!(
                Invalid,
                "{n}: data {} must hold (count, mean, count·variance) triples: its elements \
                 per partition, {}, are not a multiple of 3",
                self.data.describe(),
                self.data.free_elems()
            ));
        }
        fixed(k, n, self.dst, self.data, 2, |src, out| Instr::BnAggr {
            src,
            out,
        })
    }
}

/// The 8 largest values of each partition, descending (`nki.isa.max8`): `src` 8..=16384
/// elements per partition, `dst` `[P, 8]`; NaN ranks above +∞, −0 below +0, duplicates kept.
#[derive(Clone, Copy, Debug)]
pub struct Max8<'a> {
    /// Destination `[P, 8]`.
    pub dst: &'a View,
    /// Input.
    pub src: &'a View,
}

fn top8_size(n: &str, role: &str, v: &View) -> Result<(), Error> {
    let (lo, hi) = TOP8_FREE_RANGE;
    if !(lo..=hi).contains(&(v.free_elems() as u64)) {
        return Err(err!(
            Invalid,
            "{n}: {role} {} has {} elements per partition; {lo}..={hi} are needed",
            v.describe(),
            v.free_elems()
        ));
    }
    Ok(())
}

impl Op for Max8<'_> {
    fn name(&self) -> &'static str {
        "max8"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        top8_size(n, "src", self.src)?;
        fixed(k, n, self.dst, self.src, 8, |src, out| Instr::Max8 {
            src,
            out,
        })
    }
}

/// For each of the 8 values of `vals[p]`, the index of its first occurrence in `data[p]` not
/// already claimed by an earlier value (duplicates pair with ascending positions), or −1
/// (all ones, NKI's sentinel) (`nki.isa.nc_find_index8`): `data` 8..=16384 elements per
/// partition, `vals` and `dst` `[P, 8]`, `dst` int32.
#[derive(Clone, Copy, Debug)]
pub struct FindIndex8<'a> {
    /// Destination `[P, 8]` int32.
    pub dst: &'a View,
    /// Data searched.
    pub data: &'a View,
    /// `[P, 8]` values looked for.
    pub vals: &'a View,
}

impl Op for FindIndex8<'_> {
    fn name(&self) -> &'static str {
        "nc_find_index8"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        top8_size(n, "data", self.data)?;
        let out = on_chip(k, self.dst, n, "dst")?;
        let data = on_chip(k, self.data, n, "data")?;
        let vals = on_chip(k, self.vals, n, "vals")?;
        for (v, ap, role) in [(self.dst, out, "dst"), (self.vals, vals, "vals")] {
            if ap.partitions != data.partitions || ap.free_elems() != 8 {
                return Err(err!(
                    Invalid,
                    "{n}: {role} {} must be [{}, 8] for data {}",
                    v.describe(),
                    data.partitions,
                    self.data.describe()
                ));
            }
        }
        if self.dst.dtype() != nrt_sim::engine::DType::I32 {
            return Err(err!(
                Invalid,
                "{n}: dst {} must be int32 (indices)",
                self.dst.describe()
            ));
        }
        k.record(
            n,
            EngineId::Vector,
            &[Instr::FindIndex8 { data, vals, out }],
        )
    }
}

/// The scan `s ← op1(op0(data0[i], s), data1[i])`, `dst[i] = s`, along each partition's
/// elements from `s = initial` (`nki.isa.tensor_tensor_scan`); fp32 state, arithmetic
/// operators; `reverse0`: `op0(s, data0[i])`, `reverse1`: `op1(data1[i], ·)`; `data0` and
/// `data1` not both in PSUM. Mamba's selective scan is `op0 = multiply, op1 = add`.
#[derive(Clone, Copy, Debug)]
pub struct TensorTensorScan<'a> {
    /// Destination.
    pub dst: &'a View,
    /// First input.
    pub data0: &'a View,
    /// Second input.
    pub data1: &'a View,
    /// The state before the first element: an immediate or a `[P, 1]` view.
    pub initial: Scalar<'a>,
    /// First operation.
    pub op0: AluOp,
    /// Second operation.
    pub op1: AluOp,
    /// `op0(s, data0[i])`.
    pub reverse0: bool,
    /// `op1(data1[i], ·)`.
    pub reverse1: bool,
}

impl Op for TensorTensorScan<'_> {
    fn name(&self) -> &'static str {
        "tensor_tensor_scan"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let data0 = on_chip(k, self.data0, n, "data0")?;
        let data1 = on_chip(k, self.data1, n, "data1")?;
        same_size(n, "data0", self.data0, &data0, self.dst, &out)?;
        same_size(n, "data1", self.data1, &data1, self.dst, &out)?;
        let initial = self.initial.lower(k, n, "initial", out.partitions)?;
        let ins = Instr::TensorTensorScan {
            data0,
            data1,
            out,
            initial,
            op0: self.op0,
            op1: self.op1,
            reverse0: self.reverse0,
            reverse1: self.reverse1,
        };
        k.record(n, EngineId::Vector, &[ins])
    }
}

impl Kernel {
    /// `dst = op`-fold of `data` over its last free dimensions `axis` on VectorE
    /// (`nki.isa.tensor_reduce`; `negate` and `keepdims` through [`TensorReduce`]).
    pub fn tensor_reduce(
        &mut self,
        dst: &View,
        op: AluOp,
        data: &View,
        axis: &[usize],
    ) -> Result<(), Error> {
        self.emit(TensorReduce {
            dst,
            op,
            data,
            axis,
            negate: false,
            keepdims: false,
        })
    }

    /// Per-partition statistics on VectorE (`nki.isa.bn_stats`).
    pub fn bn_stats(&mut self, dst: &View, data: &View) -> Result<(), Error> {
        self.emit(BnStats { dst, data })
    }

    /// Mean and variance from `bn_stats` outputs on VectorE (`nki.isa.bn_aggr`).
    pub fn bn_aggr(&mut self, dst: &View, data: &View) -> Result<(), Error> {
        self.emit(BnAggr { dst, data })
    }

    /// The 8 largest values of each partition on VectorE (`nki.isa.max8`).
    pub fn max8(&mut self, dst: &View, src: &View) -> Result<(), Error> {
        self.emit(Max8 { dst, src })
    }

    /// The positions of 8 values in each partition on VectorE (`nki.isa.nc_find_index8`).
    pub fn nc_find_index8(&mut self, dst: &View, data: &View, vals: &View) -> Result<(), Error> {
        self.emit(FindIndex8 { dst, data, vals })
    }

    /// The scan `s ← op1(op0(data0[i], s), data1[i])` on VectorE
    /// (`nki.isa.tensor_tensor_scan`; reversed operands through [`TensorTensorScan`]).
    #[allow(clippy::too_many_arguments)]
    pub fn tensor_tensor_scan<'a>(
        &mut self,
        dst: &'a View,
        data0: &'a View,
        data1: &'a View,
        initial: impl Into<Scalar<'a>>,
        op0: AluOp,
        op1: AluOp,
    ) -> Result<(), Error> {
        self.emit(TensorTensorScan {
            dst,
            data0,
            data1,
            initial: initial.into(),
            op0,
            op1,
            reverse0: false,
            reverse1: false,
        })
    }
}
