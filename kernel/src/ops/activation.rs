//! `activation` and `activation_reduce` on ScalarE: `dst = op(data · scale + bias)`, every
//! function of [`ActFn`] (exp, log, sqrt, rsqrt, reciprocal, tanh, sigmoid, relu, gelu (erf)
//! and its tanh approximation, silu, softplus, square, abs, erf, copy), `scale` an immediate
//! or a `[P, 1]` fp32 view, `bias` none, an immediate or a `[P, 1]` view, and optionally the
//! fold of each partition's results (add or maximum) into a `[P, 1]` view.
//!
//! Format 1.0's five functions with an immediate scale and no reduction are recorded as
//! format 1.0's `Activation` (float tiles and bias, as before); everything else as format
//! 1.1's `Activate` (any dtypes: the arithmetic is fp32).

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, ActReduce, AluOp, Bias, EngineId, Instr, Operand};

use super::operand::{Scalar, per_partition};
use super::{Op, on_chip, require_float, same_size};
use crate::kernel::Kernel;
use crate::view::View;

/// The bias of an [`Activation`]: none, one value, or one value per partition (a `[P, 1]`
/// view with the input's partitions).
#[derive(Clone, Copy, Debug)]
pub enum ActBias<'a> {
    /// No bias (0).
    None,
    /// The same value for every element.
    Scalar(f32),
    /// One value per partition.
    Tile(&'a View),
}

impl From<f32> for ActBias<'_> {
    fn from(v: f32) -> Self {
        ActBias::Scalar(v)
    }
}

impl<'a> From<&'a View> for ActBias<'a> {
    fn from(v: &'a View) -> Self {
        ActBias::Tile(v)
    }
}

impl<'a> From<&'a crate::tiles::Tile> for ActBias<'a> {
    fn from(v: &'a crate::tiles::Tile) -> Self {
        ActBias::Tile(v.view())
    }
}

/// `dst = op(data · scale + bias)` on ScalarE (`nki.isa.activation`), with the optional
/// per-partition reduction of `nki.isa.activation_reduce`.
#[derive(Clone, Copy, Debug)]
pub struct Activation<'a> {
    /// Destination.
    pub dst: &'a View,
    /// Function.
    pub op: ActFn,
    /// Input.
    pub data: &'a View,
    /// Bias.
    pub bias: ActBias<'a>,
    /// Scale: an immediate, or a `[P, 1]` fp32 view.
    pub scale: Scalar<'a>,
    /// `(reduce_op, reduce_res)`: each partition's activated values folded with `reduce_op`
    /// (add from +0, or maximum from −∞; NeuronCore-v2 has add only) into `reduce_res`, a
    /// `[P, 1]` view. The fold is of the fp32 results, left to right, before they are
    /// rounded to `dst`'s dtype.
    pub reduce: Option<(AluOp, &'a View)>,
}

impl<'a> Activation<'a> {
    /// `dst = op(data)`: no bias, scale 1, no reduction.
    pub fn new(dst: &'a View, op: impl Into<ActFn>, data: &'a View) -> Self {
        Self {
            dst,
            op: op.into(),
            data,
            bias: ActBias::None,
            scale: Scalar::F32(1.0),
            reduce: None,
        }
    }
}

impl Op for Activation<'_> {
    fn name(&self) -> &'static str {
        if self.reduce.is_some() {
            "activation_reduce"
        } else {
            "activation"
        }
    }

    fn lower(&self, k: &mut Kernel) -> Result<(), Error> {
        let n = self.name();
        let out = on_chip(k, self.dst, n, "dst")?;
        let src = on_chip(k, self.data, n, "data")?;
        same_size(n, "data", self.data, &src, self.dst, &out)?;
        let legacy = match (self.op.legacy(), self.scale, self.reduce) {
            (Some(func), Scalar::F32(scale), None) => Some((func, scale)),
            _ => None,
        };
        if legacy.is_some() {
            require_float(self.data, n, "data")?;
            require_float(self.dst, n, "dst")?;
        }
        let bias = match self.bias {
            ActBias::None => Bias::Imm(0.0),
            ActBias::Scalar(v) => Bias::Imm(v),
            ActBias::Tile(b) => {
                let ap = per_partition(k, b, n, "bias", out.partitions)?;
                if legacy.is_some() {
                    require_float(b, n, "bias")?;
                }
                Bias::PerPartition(ap)
            }
        };
        let ins = match legacy {
            Some((func, scale)) => Instr::Activation {
                func,
                src,
                out,
                scale,
                bias,
            },
            None => {
                let scale = self.scale.lower(k, n, "scale", out.partitions)?;
                if let (Operand::PerPartition(ap), Scalar::Tile(v)) = (scale, self.scale) {
                    if !matches!(ap.dtype, nrt_sim::engine::DType::F32) {
                        return Err(err!(
                            Invalid,
                            "{n}: scale {} must be fp32 (NKI: the scale is float32)",
                            v.describe()
                        ));
                    }
                }
                let reduce = match self.reduce {
                    Some((op, res)) => {
                        if !matches!(op, AluOp::Add | AluOp::Max) {
                            return Err(err!(
                                Invalid,
                                "{n}: reduce_op {} is not add or maximum",
                                op.name()
                            ));
                        }
                        let out = per_partition(k, res, n, "reduce_res", out.partitions)?;
                        Some(ActReduce { op, out })
                    }
                    None => None,
                };
                Instr::Activate {
                    func: self.op,
                    src,
                    out,
                    scale,
                    bias,
                    reduce,
                }
            }
        };
        k.record(n, EngineId::Scalar, &[ins])
    }
}

impl Kernel {
    /// `dst = op(data · scale + bias)` on ScalarE (`nki.isa.activation`): `op` an
    /// [`ActFn`] (or a format-1.0 `ActFunc`), `bias` `ActBias::None`, an `f32` or a `[P, 1]`
    /// view, `scale` an `f32` or a `[P, 1]` fp32 view.
    pub fn activation<'a>(
        &mut self,
        dst: &'a View,
        op: impl Into<ActFn>,
        data: &'a View,
        bias: impl Into<ActBias<'a>>,
        scale: impl Into<Scalar<'a>>,
    ) -> Result<(), Error> {
        self.emit(Activation {
            bias: bias.into(),
            scale: scale.into(),
            ..Activation::new(dst, op, data)
        })
    }

    /// [`Kernel::activation`] that also folds each partition's activated values with
    /// `reduce_op` (add or maximum) into `reduce_res`, a `[P, 1]` view
    /// (`nki.isa.activation_reduce`; NKI's argument order).
    #[allow(clippy::too_many_arguments)]
    pub fn activation_reduce<'a>(
        &mut self,
        dst: &'a View,
        op: impl Into<ActFn>,
        data: &'a View,
        reduce_op: AluOp,
        reduce_res: &'a View,
        bias: impl Into<ActBias<'a>>,
        scale: impl Into<Scalar<'a>>,
    ) -> Result<(), Error> {
        self.emit(Activation {
            bias: bias.into(),
            scale: scale.into(),
            reduce: Some((reduce_op, reduce_res)),
            ..Activation::new(dst, op, data)
        })
    }
}
