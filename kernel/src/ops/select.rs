//! Selections: `affine_select` on GpSimdE (a predicate from an affine expression of the
//! partition and the free indices; a causal mask) and `range_select` on VectorE (the free
//! index against per-partition bounds), as in NKI.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, EngineId, Instr, MAX_DIMS};

use super::operand::per_partition;
use super::{Op, on_chip, same_size};
use crate::kernel::Kernel;
use crate::layout::access_pattern_shaped;
use crate::view::View;

/// `dst[p, i] = cmp_op(v, 0) ? on_true[p, i] : on_false_value` with
/// `v = offset + p·channel_multiplier + Σ_d i_d·step_d` in int32 (wrapping), on GpSimdE
/// (`nki.isa.affine_select`): `pattern` is NKI's `[[step, num], …]` (here `(step, num)`
/// pairs, outermost first, at most 4) whose `num`s multiply to `dst`'s elements per
/// partition, `i_d` the index in dimension `d` of `dst`'s elements taken in order; `p` counts
/// from `dst`'s first partition. `on_true` and `dst` are SBUF views of the same size; equal
/// dtypes copy bits, others convert through fp32. A causal mask over `[q, k]` scores:
/// `pattern [(-1, k)]`, `channel_multiplier 1`, `cmp_op greater_equal` (keeps `k ≤ q`).
#[derive(Clone, Copy, Debug)]
pub struct AffineSelect<'a> {
    /// Destination (SBUF).
    pub dst: &'a View,
    /// `(step, num)` per dimension, outermost first.
    pub pattern: &'a [(i32, usize)],
    /// Step per partition.
    pub channel_multiplier: i32,
    /// Values where the predicate holds (SBUF).
    pub on_true: &'a View,
    /// Value elsewhere (fp32, converted to `dst`'s dtype).
    pub on_false_value: f32,
    /// Comparison of the affine value against 0 (NKI's default: `equal`).
    pub cmp_op: AluOp,
    /// Constant term.
    pub offset: i32,
}

impl Op for AffineSelect<'_> {
    fn name(&self) -> &'static str {
        "affine_select"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let on_true = on_chip(k, self.on_true, n, "on_true")?;
        on_chip(k, self.dst, n, "dst")?;
        if self.pattern.is_empty() || self.pattern.len() > MAX_DIMS {
            return Err(err!(
                Invalid,
                "{n}: pattern has {} dimensions; 1 to {MAX_DIMS}",
                self.pattern.len()
            ));
        }
        let sizes: Vec<usize> = self.pattern.iter().map(|&(_, num)| num).collect();
        let total = sizes.iter().try_fold(1usize, |a, &s| a.checked_mul(s));
        if total != Some(self.dst.free_elems()) {
            return Err(err!(
                Invalid,
                "{n}: pattern sizes {sizes:?} do not multiply to the {} elements per partition \
                 of dst {}",
                self.dst.free_elems(),
                self.dst.describe()
            ));
        }
        let Some((out, kept)) = access_pattern_shaped(self.dst, &sizes)
            .map_err(|e| err!(Invalid, "{n}: dst: {}", e.message()))?
        else {
            return Err(err!(
                Invalid,
                "{n}: dst {} cannot be addressed as the pattern's dimensions {sizes:?} (its \
                 layout splits its elements differently)",
                self.dst.describe()
            ));
        };
        same_size(n, "on_true", self.on_true, &on_true, self.dst, &out)?;
        let mut steps = [0i32; MAX_DIMS];
        for (slot, i) in steps.iter_mut().zip(&kept) {
            *slot = self.pattern.get(*i).map_or(0, |&(step, _)| step);
        }
        let ins = Instr::AffineSelect {
            on_true,
            out,
            on_false: self.on_false_value,
            cmp: self.cmp_op,
            offset: self.offset,
            channel_multiplier: self.channel_multiplier,
            steps,
        };
        k.record(n, EngineId::GpSimd, &[ins])
    }
}

/// `dst[p, i] = on_true[p, i]` where `comp_op0(i + range_start, bound0[p])` and
/// `comp_op1(i + range_start, bound1[p])` hold (fp32 comparisons; `i` the element's index in
/// the partition), `on_false_value` elsewhere, on VectorE (`nki.isa.range_select`): bounds
/// `[P, 1]` fp32, float tiles; `reduce_res` (`[P, 1]`) gets each partition's maximum of the
/// result. NKI lists it for NeuronCore-v3 and requires `on_false_value` = fp32 min (the
/// default here); the simulator takes any value.
#[derive(Clone, Copy, Debug)]
pub struct RangeSelect<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Values kept in range.
    pub on_true: &'a View,
    /// First comparison (equal, less, less_equal, greater, greater_equal).
    pub comp_op0: AluOp,
    /// Second comparison.
    pub comp_op1: AluOp,
    /// `[P, 1]` fp32 bound of the first comparison.
    pub bound0: &'a View,
    /// `[P, 1]` fp32 bound of the second comparison.
    pub bound1: &'a View,
    /// Optional `[P, 1]` maximum of each partition's result.
    pub reduce_res: Option<&'a View>,
    /// Index of the first element.
    pub range_start: i32,
    /// Value out of range.
    pub on_false_value: f32,
}

impl<'a> RangeSelect<'a> {
    /// No reduction, `range_start` 0, `on_false_value` fp32 min (NKI's requirement).
    pub fn new(
        dst: &'a View,
        on_true: &'a View,
        comp_op0: AluOp,
        comp_op1: AluOp,
        bound0: &'a View,
        bound1: &'a View,
    ) -> Self {
        Self {
            dst,
            on_true,
            comp_op0,
            comp_op1,
            bound0,
            bound1,
            reduce_res: None,
            range_start: 0,
            on_false_value: f32::MIN,
        }
    }
}

impl Op for RangeSelect<'_> {
    fn name(&self) -> &'static str {
        "range_select"
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let on_true = on_chip(k, self.on_true, n, "on_true")?;
        same_size(n, "on_true", self.on_true, &on_true, self.dst, &out)?;
        let bound0 = per_partition(k, self.bound0, n, "bound0", out.partitions)?;
        let bound1 = per_partition(k, self.bound1, n, "bound1", out.partitions)?;
        let reduce_max = match self.reduce_res {
            Some(r) => Some(per_partition(k, r, n, "reduce_res", out.partitions)?),
            None => None,
        };
        let ins = Instr::RangeSelect {
            on_true,
            out,
            cmp0: self.comp_op0,
            bound0,
            cmp1: self.comp_op1,
            bound1,
            range_start: self.range_start,
            on_false: self.on_false_value,
            reduce_max,
        };
        k.record(n, EngineId::Vector, &[ins])
    }
}

impl Kernel {
    /// `dst = cmp_op(affine value, 0) ? on_true : on_false_value` on GpSimdE
    /// (`nki.isa.affine_select` with `offset` 0; any offset through [`AffineSelect`]).
    #[allow(clippy::too_many_arguments)]
    pub fn affine_select(
        &mut self,
        dst: &View,
        pattern: &[(i32, usize)],
        channel_multiplier: i32,
        on_true: &View,
        on_false_value: f32,
        cmp_op: AluOp,
    ) -> Result<(), Error> {
        self.emit(AffineSelect {
            dst,
            pattern,
            channel_multiplier,
            on_true,
            on_false_value,
            cmp_op,
            offset: 0,
        })
    }

    /// `dst = on_true` where the element index is within both bounds, fp32 min elsewhere,
    /// on VectorE (`nki.isa.range_select`; the reduction, `range_start` and
    /// `on_false_value` through [`RangeSelect`]).
    #[allow(clippy::too_many_arguments)]
    pub fn range_select(
        &mut self,
        dst: &View,
        on_true: &View,
        comp_op0: AluOp,
        comp_op1: AluOp,
        bound0: &View,
        bound1: &View,
    ) -> Result<(), Error> {
        self.emit(RangeSelect::new(
            dst, on_true, comp_op0, comp_op1, bound0, bound1,
        ))
    }
}
