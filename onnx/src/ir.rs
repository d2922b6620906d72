//! The analysis's intermediate representation: values, operands, the device steps'
//! kinds with their resolved attributes, the per-node context, and the shape helpers the
//! per-operator analyses share.
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use nrt_kernel::library::conv::Conv2dConfig;
use nrt_kernel::library::conv_transpose::ConvTransposeConfig;
use nrt_kernel::library::conv_transpose3d::ConvTranspose3dConfig;
use nrt_kernel::library::data::PadMode;
use nrt_kernel::library::lrn::LrnOpts;
use nrt_kernel::library::pool::{Pool2dConfig, PoolExt};
use nrt_kernel::library::pool3d::Pool3dConfig;
use nrt_kernel::library::reduce::ReduceOp;
use nrt_kernel::{ActFn, AluOp};

use crate::error::Result;
use crate::fold::axis;
use crate::graph::Node;
use crate::tensor::{Elem, HostTensor, MAX_ELEMS, numel};

/// A value of the graph during analysis.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    /// Known on the host.
    Const(Arc<HostTensor>),
    /// Computed on the device: an index into [`Analysis::values`].
    Dyn(usize),
}

/// An operand of a step.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// A device value.
    Dyn(usize),
    /// A host constant (baked into the NEFF when a step reads it).
    Const(Arc<HostTensor>),
}

/// A device value.
#[derive(Clone, Debug)]
pub(crate) struct DynVal {
    /// ONNX name.
    pub(crate) name: String,
    /// Shape.
    pub(crate) shape: Vec<usize>,
    /// ONNX element type (float types only on the device).
    pub(crate) elem: Elem,
    /// The value whose buffer this one is a reshaped view of.
    pub(crate) alias_of: Option<usize>,
    /// The graph input it is (index into the model's inputs).
    pub(crate) input: Option<usize>,
}

/// A slicing of one dimension: `start, step, len` (step ≥ 1).
pub(crate) type DimSlice = (usize, usize, usize);

/// What a step computes; operands are the step's `ins`, in the documented order.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// `ins = [x]`; weights and bias constant, already folded with a following
    /// BatchNormalization; rank-3 (1-D) convolutions as 2-D with `H = 1`.
    Conv {
        cfg: Conv2dConfig,
        w: Arc<HostTensor>,
        b: Option<Arc<HostTensor>>,
        relu: bool,
        bn: bool,
    },
    /// `ins = [x]`.
    Pool(Pool2dConfig, PoolExt),
    /// `ins = [x]`: rank-5 (3-D) pooling.
    Pool3d(Pool3dConfig),
    /// `ins = [x]`; weights `[C, O/groups, KH, KW]` and bias constant.
    ConvTranspose {
        cfg: ConvTransposeConfig,
        w: Arc<HostTensor>,
        b: Option<Arc<HostTensor>>,
    },
    /// `ins = [x]`; weights `[C, O/groups, KD, KH, KW]` and bias constant.
    ConvTranspose3d {
        cfg: ConvTranspose3dConfig,
        w: Arc<HostTensor>,
        b: Option<Arc<HostTensor>>,
    },
    /// `ins = [x]`.
    Lrn(LrnOpts),
    /// `ins = [cond, a, b]`.
    Where,
    /// `ins = [x]`: mean or max over all dimensions after the second.
    GlobalPool(ReduceOp),
    /// `ins = [a, b]` (batched, broadcasting); `bias` added after (Gemm's C, or a fused
    /// `Add`), then `act` applied (a fused activation).
    MatMul {
        a_t: bool,
        bias: Option<Operand>,
        act: Option<ActFn>,
    },
    /// `ins = [a, b]`, or more: folded left to right (Sum, Max, Min).
    Binary(AluOp),
    /// `ins` (two or more): their sum, divided by their count (Mean).
    Mean,
    /// `ins = [x]`: `f(x·scale + bias)`.
    Act {
        f: ActFn,
        scale: f32,
        bias: f32,
    },
    /// `ins = [x, slope]`: `max(x, 0) + slope·min(x, 0)` (LeakyRelu, PRelu).
    PRelu,
    /// `ins = [x]`: `gamma·(max(x, 0) + alpha·(exp(min(x, 0)) − 1))` (Elu, Selu).
    Elu {
        alpha: f32,
        gamma: f32,
    },
    /// `ins = [x]`: `min(max(x·scale + bias, lo), hi)` (Clip, HardSigmoid).
    Clip {
        lo: Option<f32>,
        hi: Option<f32>,
        scale: f32,
        bias: f32,
    },
    /// `ins = [x]`: `(x > 0) − (x < 0)`.
    Sign,
    /// `ins = [x]`: `x − bias` where `x > lambd`, `x + bias` where `x < −lambd`, else 0.
    Shrink {
        lambd: f32,
        bias: f32,
    },
    /// `ins = [x]`, along `axis` (before opset 13: `x` viewed as `[rows, cols]`, axis 1).
    Softmax {
        log: bool,
        axis: usize,
        cols: usize,
    },
    /// `ins = [x, gamma?, beta?]`, viewed as `[rows, cols]`.
    LayerNorm {
        eps: f32,
        cols: usize,
    },
    /// `ins = [x, scale, bias]`: per-channel, over the spatial dimensions.
    InstanceNorm {
        eps: f32,
    },
    /// `ins = [x]`: `x·scale[c] + shift[c]`.
    BatchNorm {
        scale: Arc<HostTensor>,
        shift: Arc<HostTensor>,
    },
    /// `ins = [x]`: over `axes` (sorted), keeping dimensions when `keepdims`.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        keepdims: bool,
    },
    /// `ins = [x]`: `out = x` permuted.
    /// Rounds to a narrower float type (a Cast to float16 / bfloat16): through a device
    /// tensor of that type and back to the compute dtype.
    Round(Elem),
    Transpose(Vec<usize>),
    /// `ins = [x]`: `out = x` sliced.
    Slice(Vec<DimSlice>),
    /// `ins = [x]`: sliced with `(first index, signed step)` per dimension (negative steps).
    SliceSigned(Vec<(usize, isize)>),
    /// `ins = [x]`: broadcast to the output's shape (Expand).
    Expand,
    /// `ins = [x]`: repeated.
    Tile(Vec<usize>),
    /// `ins = inputs`: concatenated along `axis`.
    Concat(usize),
    /// `ins = [x]`: `outs[i] = x[.., offsets[i]..offsets[i] + size_i, ..]` along `axis`.
    Split {
        axis: usize,
        offsets: Vec<usize>,
    },
    /// `ins = [x]`: `x` gathered at constant indices along `axis`.
    Gather {
        axis: usize,
        idx: Vec<usize>,
    },
    /// `ins = [x]`: constant padding.
    Pad {
        pads: Vec<(usize, usize)>,
        value: f32,
    },
    /// `ins = [x]`: padding in any mode, negative pads cropping.
    PadMode {
        pads: Vec<(isize, isize)>,
        mode: PadMode,
    },
}

/// A node that runs on the device.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// Index of the ONNX node (for timing and messages).
    pub(crate) node: usize,
    /// What it computes.
    pub(crate) kind: Kind,
    /// Operands.
    pub(crate) ins: Vec<Operand>,
    /// Output values.
    pub(crate) outs: Vec<usize>,
    /// What the step holds when fusions merged other nodes into it (`fuse.rs`), for the
    /// per-node table; `None`: the node's own operator.
    pub(crate) label: Option<String>,
}

/// The analysis of a model.
#[derive(Debug)]
pub(crate) struct Analysis {
    /// Device values.
    pub(crate) values: Vec<DynVal>,
    /// Steps, in order.
    pub(crate) steps: Vec<Step>,
    /// Graph outputs, in order: their values.
    pub(crate) outputs: Vec<(String, Val)>,
    /// Graph inputs with their resolved shapes.
    pub(crate) inputs: Vec<(String, Elem, Vec<usize>)>,
    /// Nodes folded on the host.
    pub(crate) folded: usize,
    /// Batch normalisations folded into convolutions.
    pub(crate) fused: usize,
    /// Nodes merged into another node's step by `fuse.rs`.
    pub(crate) merged: usize,
    /// How many times each value name is read (by nodes and as a graph output).
    pub(crate) uses: HashMap<String, usize>,
    /// The device value the failing node needed as a constant (set with the error, so that
    /// a graph input given at build time can be bound and the analysis rerun).
    pub(crate) wanted: Cell<Option<usize>>,
}

/// The context of one node's analysis.
pub(crate) struct Ctx<'a> {
    pub(crate) node: &'a Node,
    pub(crate) opset: i64,
    pub(crate) ins: Vec<Option<Val>>,
    pub(crate) an: &'a mut Analysis,
}

/// What a node turned into.
pub(crate) enum Outcome {
    /// Host values for its outputs.
    Folded(Vec<HostTensor>),
    /// A device step producing outputs of these shapes (element type: the first input's).
    Step(Kind, Vec<Operand>, Vec<Vec<usize>>),
    /// Its output is a view of input 0 with this shape (and this element type, when it
    /// changes it: a float-to-float Cast, whose values the compute dtype holds).
    Alias(Vec<usize>, Option<Elem>),
    /// Output 0 is a view of input 0 with this shape (its element type), the other outputs
    /// are these host values (`Dropout`'s mask at inference).
    AliasWith(Vec<usize>, Vec<HostTensor>),
}

impl Ctx<'_> {
    /// Input `i`, required.
    pub(crate) fn val(&self, i: usize) -> Result<&Val> {
        self.ins
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.node.invalid(format!("input {i} is missing")))
    }

    /// The shape of input `i`.
    pub(crate) fn shape(&self, i: usize) -> Result<Vec<usize>> {
        Ok(match self.val(i)? {
            Val::Const(t) => t.shape.clone(),
            Val::Dyn(d) => self.an.values[*d].shape.clone(),
        })
    }

    /// The element type of input `i`.
    pub(crate) fn elem(&self, i: usize) -> Result<Elem> {
        Ok(match self.val(i)? {
            Val::Const(t) => t.elem,
            Val::Dyn(d) => self.an.values[*d].elem,
        })
    }

    /// Input `i` as a constant, when it is one (`None` when absent or computed).
    pub(crate) fn konst(&self, i: usize) -> Option<Arc<HostTensor>> {
        match self.ins.get(i) {
            Some(Some(Val::Const(t))) => Some(t.clone()),
            _ => None,
        }
    }

    /// Input `i` as a constant, required to be one (`what` says what it is).
    pub(crate) fn need_const(&self, i: usize, what: &str) -> Result<Arc<HostTensor>> {
        match self.ins.get(i) {
            Some(Some(Val::Const(t))) => Ok(t.clone()),
            Some(Some(Val::Dyn(d))) => {
                self.an.wanted.set(Some(*d));
                Err(self.node.unsupported(format!(
                    "{what} (input {i}) computed at run time; only constants"
                )))
            }
            _ => Err(self.node.invalid(format!("input {i} ({what}) is missing"))),
        }
    }

    /// Whether input `i` is present.
    /// A one-element constant input as f32, or the error `what` (recording the value
    /// wanted constant, like [`Ctx::need_const`]).
    pub(crate) fn need_scalar(&self, i: usize, what: &str) -> Result<f32> {
        if let Some(d) = self.dyn_id(i) {
            self.an.wanted.set(Some(d));
        }
        scalar(self.ins.get(i).and_then(Option::as_ref)).ok_or_else(|| self.node.unsupported(what))
    }

    pub(crate) fn has(&self, i: usize) -> bool {
        matches!(self.ins.get(i), Some(Some(_)))
    }

    /// Whether every present input is constant.
    pub(crate) fn all_const(&self) -> bool {
        self.ins
            .iter()
            .flatten()
            .all(|v| matches!(v, Val::Const(_)))
    }

    /// Input `i` as an operand.
    pub(crate) fn operand(&self, i: usize) -> Result<Operand> {
        Ok(match self.val(i)? {
            Val::Const(t) => Operand::Const(t.clone()),
            Val::Dyn(d) => Operand::Dyn(*d),
        })
    }

    /// The device value of input `i`, if computed.
    pub(crate) fn dyn_id(&self, i: usize) -> Option<usize> {
        match self.ins.get(i) {
            Some(Some(Val::Dyn(d))) => Some(*d),
            _ => None,
        }
    }
}

/// A device step.
pub(crate) fn step(
    _cx: &mut Ctx<'_>,
    kind: Kind,
    ins: Vec<Operand>,
    outs: Vec<Vec<usize>>,
) -> Result<Outcome> {
    Ok(Outcome::Step(kind, ins, outs))
}

/// Non-negative dimensions from an int list.
pub(crate) fn dims(v: &[i64], n: &crate::graph::Node) -> Result<Vec<usize>> {
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| n.invalid(format!("negative dimension {d}"))))
        .collect()
}

/// Checks an element count.
pub(crate) fn elems(shape: &[usize], n: &crate::graph::Node) -> Result<usize> {
    match numel(shape) {
        Some(c) if c <= MAX_ELEMS => Ok(c),
        _ => Err(n.invalid(format!("shape {shape:?} is too large"))),
    }
}

/// Normalised, deduplicated axes.
pub(crate) fn norm_axes(ax: &[i64], rank: usize, n: &crate::graph::Node) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for &a in ax {
        let a2 = axis(a, rank)
            .ok_or_else(|| n.invalid(format!("axis {a} out of range for rank {rank}")))?;
        if !out.contains(&a2) {
            out.push(a2);
        }
    }
    Ok(out)
}

/// Axes given as the attribute `name` (older opsets) or as input `i` (newer ones).
pub(crate) fn axes_of(cx: &Ctx<'_>, i: usize, name: &str) -> Result<Option<Vec<i64>>> {
    if cx.has(i) {
        return Ok(Some(cx.need_const(i, name)?.as_i64()));
    }
    cx.node.ints(name)
}

/// Whether `v` is a constant scalar (one element).
pub(crate) fn scalar(v: Option<&Val>) -> Option<f32> {
    match v {
        Some(Val::Const(t)) if t.len() == 1 => Some(t.as_f64()[0] as f32),
        _ => None,
    }
}
