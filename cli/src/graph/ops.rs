//! The graph's operations: their names, attributes ([`Op::parse`]), number of inputs and
//! output shape ([`Op::infer`]).

use nrt_kernel::library::conv::Conv2dConfig;
use nrt_kernel::library::pool::{Pool2dConfig, PoolKind};
use nrt_kernel::library::reduce::{ReduceOp, reduced_shape};
use nrt_kernel::{ActFn, AluOp};

use super::attrs::Attrs;
use crate::error::{Result, bail};
use crate::tensors::shape_str;

/// One operation with its attributes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Op {
    /// `a·b` of 2-D operands, either transposed first.
    Matmul { ta: bool, tb: bool },
    /// Element-wise `a op b` with NumPy broadcasting.
    Binary(AluOp),
    /// `x + b`, `b` one value per element of `x`'s last axis.
    BiasAdd,
    /// An activation function, element-wise.
    Act(ActFn),
    /// Softmax over the last axis.
    Softmax,
    /// `(x − mean)/√(var + eps)·gamma + beta` over the last axis.
    LayerNorm { eps: f32 },
    /// `x/√(mean(x²) + eps)·gamma` over the last axis.
    RmsNorm { eps: f32 },
    /// A reduction over one axis (negative: from the end).
    Reduce {
        op: ReduceOp,
        axis: i64,
        keepdims: bool,
    },
    /// The transpose of a 2-D tensor.
    Transpose,
    /// Scaled-dot-product attention of `[S, heads·d]` operands.
    Attention {
        heads: usize,
        causal: bool,
        scale: Option<f32>,
    },
    /// 2-D convolution, NCHW / OIHW.
    Conv2d(Conv2dConfig),
    /// 2-D max or average pooling, NCHW.
    Pool(Pool2dConfig),
    /// Average over each whole `H × W` plane: `[N, C, H, W] → [N, C, 1, 1]`.
    GlobalAvgPool,
    /// A new shape for the same elements (one dimension may be −1).
    Reshape(Vec<i64>),
    /// `[d0, …, dn] → [d0·…·d(axis−1), d(axis)·…·dn]`.
    Flatten { axis: usize },
}

/// The activation functions by name.
pub(crate) const ACTIVATIONS: [(&str, ActFn); 15] = [
    ("identity", ActFn::Identity),
    ("relu", ActFn::Relu),
    ("gelu", ActFn::GeluErf),
    ("gelu_tanh", ActFn::Gelu),
    ("silu", ActFn::Silu),
    ("sigmoid", ActFn::Sigmoid),
    ("tanh", ActFn::Tanh),
    ("exp", ActFn::Exp),
    ("log", ActFn::Log),
    ("sqrt", ActFn::Sqrt),
    ("rsqrt", ActFn::Rsqrt),
    ("reciprocal", ActFn::Reciprocal),
    ("square", ActFn::Square),
    ("abs", ActFn::Abs),
    ("softplus", ActFn::Softplus),
];

const BINARY: [(&str, AluOp); 6] = [
    ("add", AluOp::Add),
    ("sub", AluOp::Sub),
    ("mul", AluOp::Mul),
    ("div", AluOp::Divide),
    ("max", AluOp::Max),
    ("min", AluOp::Min),
];

/// Every op name, for the unknown-op message.
pub(crate) fn names() -> String {
    let mut v: Vec<&str> = vec!["matmul"];
    v.extend(BINARY.iter().map(|(n, _)| *n));
    v.push("bias_add");
    v.extend(ACTIVATIONS.iter().map(|(n, _)| *n));
    v.extend([
        "softmax",
        "layernorm",
        "rmsnorm",
        "reduce_sum",
        "reduce_mean",
        "reduce_max",
        "reduce_min",
        "transpose",
        "attention",
        "conv2d",
        "maxpool",
        "avgpool",
        "global_avgpool",
        "reshape",
        "flatten",
    ]);
    v.join(", ")
}

/// Softmax and the reductions work on the last axis only.
fn last_axis(a: &mut Attrs<'_>) -> Result<()> {
    match a.int("axis", -1)? {
        -1 => Ok(()),
        n => Err(crate::error::CliError::new(format!(
            "axis {n} is not supported (only the last axis, -1)"
        ))),
    }
}

/// A reduction over `axis` (default −1, the last).
fn reduce(a: &mut Attrs<'_>, op: ReduceOp) -> Result<Op> {
    Ok(Op::Reduce {
        op,
        axis: a.int("axis", -1)?,
        keepdims: a.bool("keepdims", false)?,
    })
}

/// `axis` (negative: from the end) as an index below `rank`.
pub(crate) fn axis_index(axis: i64, rank: usize) -> Option<usize> {
    let r = i64::try_from(rank).ok()?;
    let a = if axis < 0 { axis + r } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank)
}

impl Op {
    /// The op named `name` with its attributes read from `a`; `None` for an unknown name.
    pub(crate) fn parse(name: &str, a: &mut Attrs<'_>) -> Result<Option<Op>> {
        if let Some((_, f)) = ACTIVATIONS.iter().find(|(n, _)| *n == name) {
            return Ok(Some(Op::Act(*f)));
        }
        if let Some((_, op)) = BINARY.iter().find(|(n, _)| *n == name) {
            return Ok(Some(Op::Binary(*op)));
        }
        Ok(Some(match name {
            "matmul" => Op::Matmul {
                ta: a.bool("transpose_a", false)?,
                tb: a.bool("transpose_b", false)?,
            },
            "bias_add" => Op::BiasAdd,
            "softmax" => {
                last_axis(a)?;
                Op::Softmax
            }
            "layernorm" => Op::LayerNorm {
                eps: a.float("eps")?.unwrap_or(1e-5),
            },
            "rmsnorm" => Op::RmsNorm {
                eps: a.float("eps")?.unwrap_or(1e-6),
            },
            "reduce_sum" => reduce(a, ReduceOp::Sum)?,
            "reduce_mean" => reduce(a, ReduceOp::Mean)?,
            "reduce_max" => reduce(a, ReduceOp::Max)?,
            "reduce_min" => reduce(a, ReduceOp::Min)?,
            "transpose" => Op::Transpose,
            "attention" => Op::Attention {
                heads: a.count("heads", 1, 1)?,
                causal: a.bool("causal", false)?,
                scale: a.float("scale")?,
            },
            "conv2d" => Op::Conv2d(Conv2dConfig {
                stride: a.pair("stride", (1, 1), 1)?,
                pads: a.pads("padding")?,
                dilation: a.pair("dilation", (1, 1), 1)?,
                groups: a.count("groups", 1, 1)?,
            }),
            "maxpool" | "avgpool" => {
                let kernel = a.pair("kernel_size", (0, 0), 1)?;
                if kernel == (0, 0) {
                    bail!("attribute 'kernel_size' is required");
                }
                let kind = if name == "maxpool" {
                    PoolKind::Max
                } else {
                    PoolKind::Average {
                        count_include_pad: a.bool("count_include_pad", false)?,
                    }
                };
                Op::Pool(Pool2dConfig {
                    kind,
                    kernel,
                    stride: a.pair("stride", kernel, 1)?,
                    pads: a.pads("padding")?,
                })
            }
            "global_avgpool" => Op::GlobalAvgPool,
            "reshape" => match a.shape("shape")? {
                Some(s) => Op::Reshape(s),
                None => bail!("attribute 'shape' is required"),
            },
            "flatten" => Op::Flatten {
                axis: a.count("axis", 1, 0)?,
            },
            _ => return Ok(None),
        }))
    }

    /// How many inputs the op takes: `(min, max)`.
    pub(crate) fn arity(&self) -> (usize, usize) {
        match self {
            Op::Matmul { .. } | Op::Binary(_) | Op::BiasAdd => (2, 2),
            Op::LayerNorm { .. } => (1, 3),
            Op::RmsNorm { .. } => (1, 2),
            Op::Attention { .. } => (3, 3),
            Op::Conv2d(_) => (2, 3),
            _ => (1, 1),
        }
    }

    /// The output shape for input shapes `ins` (as many as [`Op::arity`] allows).
    pub(crate) fn infer(&self, ins: &[Vec<usize>], names: &[String]) -> Result<Vec<usize>> {
        let s = |i: usize| ins.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let n = |i: usize| names.get(i).map_or("?", String::as_str);
        let shown = |i: usize| format!("'{}' {}", n(i), shape_str(&u64s(s(i))));
        let last = |i: usize| s(i).last().copied();
        match self {
            Op::Matmul { ta, tb } => {
                let (Some(a), Some(b)) = (dims2(s(0)), dims2(s(1))) else {
                    bail!("operands {} and {} must be 2-D", shown(0), shown(1));
                };
                let (m, k) = if *ta { (a.1, a.0) } else { a };
                let (k2, nn) = if *tb { (b.1, b.0) } else { b };
                if k != k2 {
                    bail!(
                        "the contraction dimensions differ: {} gives K = {k}, {} gives K = {k2}",
                        shown(0),
                        shown(1)
                    );
                }
                Ok(vec![m, nn])
            }
            Op::Binary(_) | Op::BiasAdd if s(0).len().max(s(1).len()) > 4 => {
                bail!(
                    "{} and {}: element-wise operands have rank 1 to 4",
                    shown(0),
                    shown(1)
                )
            }
            Op::Binary(_) => broadcast(s(0), s(1)).ok_or_else(|| {
                crate::error::CliError::new(format!(
                    "{} and {} do not broadcast together",
                    shown(0),
                    shown(1)
                ))
            }),
            Op::BiasAdd => {
                if s(1).len() != 1 || last(0) != last(1) {
                    bail!(
                        "bias {} must be 1-D with one value per element of the last axis of {}",
                        shown(1),
                        shown(0)
                    );
                }
                Ok(s(0).to_vec())
            }
            Op::LayerNorm { .. } | Op::RmsNorm { .. } => {
                let c = last(0).unwrap_or(0);
                for i in 1..ins.len() {
                    if s(i) != [c] {
                        bail!("{} must be [{c}] (the last axis of {})", shown(i), shown(0));
                    }
                }
                if s(0).is_empty() {
                    bail!("input {} needs at least one dimension", shown(0));
                }
                Ok(s(0).to_vec())
            }
            Op::Act(_) | Op::Softmax => {
                if s(0).is_empty() {
                    bail!("input {} needs at least one dimension", shown(0));
                }
                Ok(s(0).to_vec())
            }
            Op::Reduce { axis, keepdims, .. } => {
                if s(0).is_empty() || s(0).len() > 4 {
                    bail!("input {} must have rank 1 to 4", shown(0));
                }
                match axis_index(*axis, s(0).len()) {
                    Some(a) => Ok(reduced_shape(s(0), a, *keepdims)),
                    None => bail!("axis {axis} is not a dimension of {}", shown(0)),
                }
            }
            Op::Transpose => match dims2(s(0)) {
                Some((r, c)) => Ok(vec![c, r]),
                None => bail!("input {} must be 2-D", shown(0)),
            },
            Op::Attention { heads, causal, .. } => {
                let dims: Vec<_> = (0..3).map(|i| dims2(s(i))).collect();
                let (Some(q), Some(k), Some(v)) = (dims[0], dims[1], dims[2]) else {
                    bail!("q, k and v must be 2-D [sequence, heads·head_dim]");
                };
                if q.1 != k.1 || k != v {
                    bail!(
                        "q {}, k {} and v {} must be [Sq, D], [Sk, D], [Sk, D]",
                        shown(0),
                        shown(1),
                        shown(2)
                    );
                }
                if q.1 % heads != 0 || q.1 / heads > 128 {
                    bail!(
                        "the width {} of q must be heads ({heads}) × a head dimension ≤ 128",
                        q.1
                    );
                }
                if *causal && q.0 != k.0 {
                    bail!("a causal mask needs as many queries as keys");
                }
                Ok(vec![q.0, q.1])
            }
            Op::Conv2d(cfg) => {
                let (Some(x), Some(w)) = (dims4(s(0)), dims4(s(1))) else {
                    bail!("x {} and w {} must be 4-D (NCHW, OIHW)", shown(0), shown(1));
                };
                let g = cfg.groups;
                if x[1] % g != 0 || w[0] % g != 0 || w[1] * g != x[1] {
                    bail!(
                        "w {} must be [O, C/groups, KH, KW] for x {} and groups {g}",
                        shown(1),
                        shown(0)
                    );
                }
                if ins.len() == 3 && s(2) != [w[0]] {
                    bail!("bias {} must be [{}]", shown(2), w[0]);
                }
                let (oh, ow) = cfg
                    .output_size((x[2], x[3]), (w[2], w[3]))
                    .map_err(|e| crate::error::CliError::new(e.message().to_owned()))?;
                Ok(vec![x[0], w[0], oh, ow])
            }
            Op::Pool(cfg) => {
                let Some(x) = dims4(s(0)) else {
                    bail!("x {} must be 4-D (NCHW)", shown(0));
                };
                let (oh, ow) = cfg
                    .output_size((x[2], x[3]))
                    .map_err(|e| crate::error::CliError::new(e.message().to_owned()))?;
                Ok(vec![x[0], x[1], oh, ow])
            }
            Op::GlobalAvgPool => match dims4(s(0)) {
                Some(x) => Ok(vec![x[0], x[1], 1, 1]),
                None => bail!("x {} must be 4-D (NCHW)", shown(0)),
            },
            Op::Reshape(want) => reshape(s(0), want).ok_or_else(|| {
                crate::error::CliError::new(format!(
                    "cannot reshape {} to {want:?} (the element counts must agree; at most one -1)",
                    shown(0)
                ))
            }),
            Op::Flatten { axis } => {
                if *axis > s(0).len() {
                    bail!("axis {axis} is past the rank of {}", shown(0));
                }
                let (a, b) = s(0).split_at(*axis);
                Ok(vec![a.iter().product(), b.iter().product()])
            }
        }
    }
}

pub(crate) fn u64s(s: &[usize]) -> Vec<u64> {
    s.iter().map(|&d| d as u64).collect()
}

fn dims2(s: &[usize]) -> Option<(usize, usize)> {
    match s {
        [a, b] => Some((*a, *b)),
        _ => None,
    }
}

fn dims4(s: &[usize]) -> Option<[usize; 4]> {
    <[usize; 4]>::try_from(s).ok()
}

/// NumPy broadcasting of two shapes.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        let pad = r - s.len();
        if i < pad {
            1
        } else {
            s.get(i - pad).copied().unwrap_or(1)
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// A reshape's result, with one −1 inferred; `None` when the counts disagree (or overflow).
fn reshape(from: &[usize], to: &[i64]) -> Option<Vec<usize>> {
    let total = from.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    let holes = to.iter().filter(|&&d| d == -1).count();
    if holes > 1 || to.iter().any(|&d| d < -1) {
        return None;
    }
    let known = to
        .iter()
        .filter(|&&d| d >= 0)
        .try_fold(1usize, |a, &d| a.checked_mul(usize::try_from(d).ok()?))?;
    let out: Vec<usize> = to
        .iter()
        .map(|&d| {
            if d == -1 {
                total.checked_div(known).unwrap_or(0)
            } else {
                usize::try_from(d).unwrap_or(usize::MAX)
            }
        })
        .collect();
    let n = out.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    (n == total).then_some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[4, 3], &[3]), Some(vec![4, 3]));
        assert_eq!(broadcast(&[2, 1, 5], &[3, 1]), Some(vec![2, 3, 5]));
        assert_eq!(broadcast(&[4, 3], &[4]), None);
    }

    #[test]
    fn reshape_infers_one_dimension_and_refuses_the_rest() {
        assert_eq!(reshape(&[6, 40], &[-1, 10]), Some(vec![24, 10]));
        assert_eq!(reshape(&[6, 40], &[7, -1]), None);
        assert_eq!(reshape(&[6, 40], &[-1, -1]), None);
        assert_eq!(reshape(&[6, 40], &[1 << 62, 1 << 62]), None);
        assert_eq!(reshape(&[6, 40], &[0, -1]), None);
    }

    #[test]
    fn axes_count_from_the_end_when_negative() {
        assert_eq!(axis_index(-1, 3), Some(2));
        assert_eq!(axis_index(-3, 3), Some(0));
        assert_eq!(axis_index(-4, 3), None);
        assert_eq!(axis_index(3, 3), None);
        assert_eq!(axis_index(i64::MIN, 3), None);
    }
}
