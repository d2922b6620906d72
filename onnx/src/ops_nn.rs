//! Per-operator analysis of the neural-network operators: convolution, pooling,
//! normalisation, matmul, activations, softmax, reductions, padding.

use std::sync::Arc;

use nrt_kernel::ActFn;
use nrt_kernel::library::data::PadMode;
use nrt_kernel::library::lrn::LrnOpts;
use nrt_kernel::library::reduce::ReduceOp;

use crate::error::Result;
use crate::fold::{self, axis, broadcast};
use crate::ir::{Ctx, Kind, Operand, Outcome, axes_of, elems, norm_axes, step};
use crate::ops_conv::{batchnorm, conv, conv_transpose, pool};
use crate::tensor::{Data, Elem, HostTensor};

/// Analyses the operators not handled in `ops.rs`.
pub(crate) fn eval(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let op = n.op.as_str();
    if let Some(f) = unary_fn(op) {
        return unary(cx, f);
    }
    match op {
        "Conv" => conv(cx),
        "MaxPool" | "AveragePool" => pool(cx),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let x = cx.shape(0)?;
            if x.len() < 3 {
                return Err(n.invalid("needs rank ≥ 3"));
            }
            let mut out = x.clone();
            out[2..].iter_mut().for_each(|d| *d = 1);
            let r = if op == "GlobalMaxPool" {
                ReduceOp::Max
            } else {
                ReduceOp::Mean
            };
            step(cx, Kind::GlobalPool(r), vec![cx.operand(0)?], vec![out])
        }
        "BatchNormalization" => batchnorm(cx),
        "InstanceNormalization" => {
            let x = cx.shape(0)?;
            if x.len() < 3 {
                return Err(n.invalid("needs rank ≥ 3"));
            }
            let eps = n.float("epsilon", 1e-5)?;
            let ins = vec![cx.operand(0)?, cx.operand(1)?, cx.operand(2)?];
            step(cx, Kind::InstanceNorm { eps }, ins, vec![x])
        }
        "LayerNormalization" => {
            let x = cx.shape(0)?;
            let a =
                axis(n.int("axis", -1)?, x.len()).ok_or_else(|| n.invalid("axis out of range"))?;
            let cols: usize = x[a..].iter().product();
            let eps = n.float("epsilon", 1e-5)?;
            // Mean and InvStdDev (when asked for): one value per normalised row, the
            // normalised axes kept as 1.
            let stats = n.outputs.iter().skip(1).any(|o| !o.is_empty());
            let stat: Vec<usize> = x
                .iter()
                .enumerate()
                .map(|(i, &d)| if i < a { d } else { 1 })
                .collect();
            let mut ins = vec![cx.operand(0)?];
            for i in [1, 2] {
                if cx.has(i) {
                    let c = cx.need_const(i, if i == 1 { "scale" } else { "B" })?;
                    if c.len() != cols {
                        return Err(n.unsupported(format!(
                            "a {} of shape {:?} (only one value per normalised element)",
                            if i == 1 { "scale" } else { "bias" },
                            c.shape
                        )));
                    }
                    let mut c = (*c).clone();
                    c.shape = vec![cols];
                    ins.push(Operand::Const(Arc::new(c)));
                }
            }
            if ins.len() == 2 && cx.has(2) {
                return Err(n.unsupported("a bias without a scale"));
            }
            let outs = if stats {
                vec![x, stat.clone(), stat]
            } else {
                vec![x]
            };
            step(cx, Kind::LayerNorm { eps, cols }, ins, outs)
        }
        "Gemm" => gemm(cx),
        "MatMul" => {
            let (a, b) = (cx.shape(0)?, cx.shape(1)?);
            let out = matmul_shape(&a, &b)
                .ok_or_else(|| n.invalid(format!("shapes {a:?} and {b:?} do not multiply")))?;
            elems(&out, n)?;
            let ins = vec![cx.operand(0)?, cx.operand(1)?];
            step(
                cx,
                Kind::MatMul {
                    a_t: false,
                    bias: None,
                    act: None,
                },
                ins,
                vec![out],
            )
        }
        "Softmax" | "LogSoftmax" => {
            let x = cx.shape(0)?;
            let r = x.len();
            let log = op == "LogSoftmax";
            let default = if cx.opset < 13 { 1 } else { -1 };
            let a = axis(n.int("axis", default)?, r.max(1))
                .ok_or_else(|| n.invalid("axis out of range"))?;
            // Before opset 13: the input flattened to 2-D at `axis`; from 13: along `axis`.
            let (axis_k, cols) = if cx.opset < 13 {
                (usize::MAX, x[a..].iter().product())
            } else {
                (a, x[a])
            };
            let kind = Kind::Softmax {
                log,
                axis: axis_k,
                cols,
            };
            step(cx, kind, vec![cx.operand(0)?], vec![x])
        }
        "LRN" => {
            let x = cx.shape(0)?;
            let size = n.int("size", 0)?;
            if size < 1 {
                return Err(n.invalid("size must be ≥ 1"));
            }
            let opts = LrnOpts {
                size: size as usize,
                alpha: n.float("alpha", 1e-4)?,
                beta: n.float("beta", 0.75)?,
                bias: n.float("bias", 1.0)?,
            };
            step(cx, Kind::Lrn(opts), vec![cx.operand(0)?], vec![x])
        }
        "ConvTranspose" => conv_transpose(cx),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" => reduce(cx),
        "Gelu" => {
            let f = match n.string("approximate", "none")?.as_str() {
                "none" => (ActFn::GeluErf, gelu as fn(f64) -> f64),
                "tanh" => (ActFn::Gelu, gelu_tanh as fn(f64) -> f64),
                a => return Err(n.unsupported(format!("approximate = '{a}'"))),
            };
            unary(cx, f)
        }
        "Relu" | "LeakyRelu" | "PRelu" | "Elu" | "Selu" | "Clip" | "Sign" | "Shrink"
        | "HardSigmoid" | "Neg" => activation(cx),
        _ => Err(n.unsupported("this operator is not supported")),
    }
}

/// The single-instruction activations, with their host function.
/// An activation with its host function.
type Unary = (ActFn, fn(f64) -> f64);

fn unary_fn(op: &str) -> Option<Unary> {
    Some(match op {
        "Sqrt" => (ActFn::Sqrt, f64::sqrt),
        "Exp" => (ActFn::Exp, f64::exp),
        "Log" => (ActFn::Log, f64::ln),
        "Abs" => (ActFn::Abs, f64::abs),
        "Reciprocal" => (ActFn::Reciprocal, |x| 1.0 / x),
        "Sigmoid" => (ActFn::Sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
        "Tanh" => (ActFn::Tanh, f64::tanh),
        "Softplus" => (ActFn::Softplus, |x| x.exp().ln_1p()),
        "Erf" => (ActFn::Erf, erf),
        _ => return None,
    })
}

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2))
}

fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044_715 * x * x * x)).tanh())
}

/// Coefficients of erfc's polynomial in `t` below, highest power first.
const ERFC_POLY: [f64; 9] = [
    0.170_872_77,
    -0.822_152_23,
    1.488_515_87,
    -1.135_203_98,
    0.278_868_07,
    -0.186_288_06,
    0.096_784_18,
    0.374_091_96,
    1.000_023_68,
];

fn erf(x: f64) -> f64 {
    // Abramowitz–Stegun 7.1.26 is too coarse for folding; use the series / continued form.
    // Horner's scheme as a fold (the same operations in the same order as the nested form;
    // rustfmt takes a minute over the nested form).
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = ERFC_POLY.iter().fold(0.0, |p, c| c + t * p);
    let y = 1.0 - t * (-x * x - 1.265_512_23 + t * poly).exp();
    if x >= 0.0 { y } else { -y }
}

fn unary(cx: &mut Ctx<'_>, (f, host): Unary) -> Result<Outcome> {
    if let Some(t) = cx.konst(0) {
        let v: Vec<f64> = t.as_f64().into_iter().map(host).collect();
        let r = HostTensor::floats(t.elem, t.shape.clone(), v);
        return Ok(Outcome::Folded(vec![fold::cast(&r, t.elem)]));
    }
    let x = cx.shape(0)?;
    let ins = vec![cx.operand(0)?];
    step(
        cx,
        Kind::Act {
            f,
            scale: 1.0,
            bias: 0.0,
        },
        ins,
        vec![x],
    )
}

fn activation(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    if let Some(t) = cx.konst(0) {
        return fold_activation(cx, &t);
    }
    let xo = cx.operand(0)?;
    let konst = |v: f32| {
        Operand::Const(Arc::new(HostTensor::floats(
            Elem::F32,
            vec![],
            vec![f64::from(v)],
        )))
    };
    match n.op.as_str() {
        "Relu" => step(
            cx,
            Kind::Act {
                f: ActFn::Relu,
                scale: 1.0,
                bias: 0.0,
            },
            vec![xo],
            vec![x],
        ),
        "Neg" => step(
            cx,
            Kind::Act {
                f: ActFn::Identity,
                scale: -1.0,
                bias: 0.0,
            },
            vec![xo],
            vec![x],
        ),
        "LeakyRelu" => {
            let a = n.float("alpha", 0.01)?;
            step(cx, Kind::PRelu, vec![xo, konst(a)], vec![x])
        }
        "PRelu" => {
            let s = cx.shape(1)?;
            // Before opset 7 the slope broadcast "unidirectionally" with a legacy rule for
            // [C]-shaped slopes on NCHW inputs: a [C] slope is per channel.
            let slope = if cx.opset < 7 && s.len() == 1 && x.len() >= 2 && s[0] == x[1] && s[0] != 1
            {
                let mut t = (*cx.need_const(1, "slope")?).clone();
                t.shape = std::iter::once(s[0])
                    .chain(std::iter::repeat_n(1, x.len() - 2))
                    .collect();
                Operand::Const(Arc::new(t))
            } else {
                cx.operand(1)?
            };
            let shape_ok = match &slope {
                Operand::Const(t) => broadcast(&t.shape, &x).as_deref() == Some(&x[..]),
                Operand::Dyn(_) => broadcast(&s, &x).as_deref() == Some(&x[..]),
            };
            if !shape_ok {
                return Err(n.invalid(format!("slope of shape {s:?} does not broadcast to {x:?}")));
            }
            step(cx, Kind::PRelu, vec![xo, slope], vec![x])
        }
        "Elu" => {
            let alpha = n.float("alpha", 1.0)?;
            step(cx, Kind::Elu { alpha, gamma: 1.0 }, vec![xo], vec![x])
        }
        "Selu" => {
            let alpha = n.float("alpha", 1.673_263_2)?;
            let gamma = n.float("gamma", 1.050_701)?;
            step(cx, Kind::Elu { alpha, gamma }, vec![xo], vec![x])
        }
        "Clip" => {
            let (lo, hi) = if cx.opset < 11 {
                (
                    Some(n.float("min", f32::NEG_INFINITY)?),
                    Some(n.float("max", f32::INFINITY)?),
                )
            } else {
                let get = |i: usize| -> Result<Option<f32>> {
                    if !cx.has(i) {
                        return Ok(None);
                    }
                    cx.need_scalar(i, "bounds computed at run time").map(Some)
                };
                (get(1)?, get(2)?)
            };
            let lo = lo.filter(|v| *v != f32::NEG_INFINITY);
            let hi = hi.filter(|v| *v != f32::INFINITY);
            step(
                cx,
                Kind::Clip {
                    lo,
                    hi,
                    scale: 1.0,
                    bias: 0.0,
                },
                vec![xo],
                vec![x],
            )
        }
        "Sign" => step(cx, Kind::Sign, vec![xo], vec![x]),
        "Shrink" => {
            let lambd = n.float("lambd", 0.5)?;
            let bias = n.float("bias", 0.0)?;
            if lambd < 0.0 {
                return Err(n.unsupported("a negative lambd"));
            }
            step(cx, Kind::Shrink { lambd, bias }, vec![xo], vec![x])
        }
        _ => {
            // HardSigmoid: max(0, min(1, alpha·x + beta)).
            let alpha = n.float("alpha", 0.2)?;
            let beta = n.float("beta", 0.5)?;
            step(
                cx,
                Kind::Clip {
                    lo: Some(0.0),
                    hi: Some(1.0),
                    scale: alpha,
                    bias: beta,
                },
                vec![xo],
                vec![x],
            )
        }
    }
}

/// An element-wise function on the host: on floats, on integers.
type HostFns = (Box<dyn Fn(f64) -> f64>, Box<dyn Fn(i64) -> i64>);

/// An activation of a constant, on the host: in f64 rounded to the element type (floats)
/// or in i64 (integers; Neg wraps).
fn fold_activation(cx: &Ctx<'_>, t: &HostTensor) -> Result<Outcome> {
    let n = cx.node;
    let (f, g): HostFns = match n.op.as_str() {
        "Neg" => (Box::new(|x| -x), Box::new(i64::wrapping_neg)),
        "Relu" => (
            Box::new(|x| if x < 0.0 { 0.0 } else { x }),
            Box::new(|x| x.max(0)),
        ),
        "Sign" => (
            Box::new(|x| {
                if x == 0.0 || x.is_nan() {
                    x
                } else {
                    x.signum()
                }
            }),
            Box::new(i64::signum),
        ),
        "LeakyRelu" => {
            let a = f64::from(n.float("alpha", 0.01)?);
            (
                Box::new(move |x| if x < 0.0 { a * x } else { x }),
                Box::new(|x| x),
            )
        }
        "Clip" => {
            let (lo, hi) = if cx.opset < 11 {
                (
                    Some(HostTensor::floats(
                        Elem::F32,
                        vec![],
                        vec![f64::from(n.float("min", f32::NEG_INFINITY)?)],
                    )),
                    Some(HostTensor::floats(
                        Elem::F32,
                        vec![],
                        vec![f64::from(n.float("max", f32::INFINITY)?)],
                    )),
                )
            } else {
                let get = |i: usize| -> Result<Option<HostTensor>> {
                    if !cx.has(i) {
                        return Ok(None);
                    }
                    let c = cx.need_const(i, if i == 1 { "min" } else { "max" })?;
                    if c.len() != 1 {
                        return Err(n.invalid("min and max must be scalars"));
                    }
                    Ok(Some((*c).clone()))
                };
                (get(1)?, get(2)?)
            };
            let fl = |b: &Option<HostTensor>, d: f64| b.as_ref().map_or(d, |b| b.as_f64()[0]);
            let il = |b: &Option<HostTensor>, d: i64| b.as_ref().map_or(d, |b| b.as_i64()[0]);
            let (flo, fhi) = (fl(&lo, f64::NEG_INFINITY), fl(&hi, f64::INFINITY));
            let (ilo, ihi) = (il(&lo, i64::MIN), il(&hi, i64::MAX));
            (
                Box::new(move |x| if x.is_nan() { x } else { x.max(flo).min(fhi) }),
                Box::new(move |x| x.max(ilo).min(ihi)),
            )
        }
        "HardSigmoid" => {
            let a = f64::from(n.float("alpha", 0.2)?);
            let b = f64::from(n.float("beta", 0.5)?);
            (
                Box::new(move |x| (a * x + b).clamp(0.0, 1.0)),
                Box::new(|x| x),
            )
        }
        _ => return Err(n.unsupported("a constant input (fold it before export)")),
    };
    let r = match &t.data {
        Data::I(v) if n.op != "HardSigmoid" && n.op != "LeakyRelu" => {
            HostTensor::ints(t.elem, t.shape.clone(), v.iter().map(|&x| g(x)).collect())
        }
        Data::I(_) => return Err(n.invalid("needs a float input")),
        Data::F(v) => fold::cast(
            &HostTensor::floats(t.elem, t.shape.clone(), v.iter().map(|&x| f(x)).collect()),
            t.elem,
        ),
    };
    Ok(Outcome::Folded(vec![r]))
}

fn gemm(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let (ta, tb) = (n.int("transA", 0)? != 0, n.int("transB", 0)? != 0);
    let alpha = f64::from(n.float("alpha", 1.0)?);
    let beta = f64::from(n.float("beta", 1.0)?);
    let (a, b) = (cx.shape(0)?, cx.shape(1)?);
    if a.len() != 2 || b.len() != 2 {
        return Err(n.invalid("A and B must be 2-D"));
    }
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (kb, nn) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if k != kb {
        return Err(n.invalid(format!("A {a:?} and B {b:?} do not multiply")));
    }
    let bo = match (cx.konst(1), tb || alpha != 1.0) {
        (Some(t), _) => {
            let mut t2 = (*t).clone();
            if tb {
                let (s, order) = fold::permute_order(&t.shape, &[1, 0]);
                t2 = fold::take(&t, s, &order);
            }
            if alpha != 1.0 {
                t2 = fold::cast(
                    &HostTensor::floats(
                        t2.elem,
                        t2.shape.clone(),
                        t2.as_f64().iter().map(|v| v * alpha).collect(),
                    ),
                    t2.elem,
                );
            }
            Operand::Const(Arc::new(t2))
        }
        (None, false) => cx.operand(1)?,
        (None, true) => {
            if let Some(d) = cx.dyn_id(1) {
                cx.an.wanted.set(Some(d));
            }
            return Err(n.unsupported("transB or alpha ≠ 1 with B computed at run time"));
        }
    };
    let bias = if cx.has(2) && beta != 0.0 {
        let c = cx.need_const(2, "C")?;
        if broadcast(&c.shape, &[m, nn]).as_deref() != Some(&[m, nn][..]) {
            return Err(n.invalid(format!("C {:?} does not broadcast to [{m}, {nn}]", c.shape)));
        }
        let c = if beta == 1.0 {
            c
        } else {
            Arc::new(fold::cast(
                &HostTensor::floats(
                    c.elem,
                    c.shape.clone(),
                    c.as_f64().iter().map(|v| v * beta).collect(),
                ),
                c.elem,
            ))
        };
        Some(Operand::Const(c))
    } else {
        None
    };
    step(
        cx,
        Kind::MatMul {
            a_t: ta,
            bias,
            act: None,
        },
        vec![cx.operand(0)?, bo],
        vec![vec![m, nn]],
    )
}

/// NumPy matmul's shape rule.
pub(crate) fn matmul_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, nn) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return None;
    }
    let mut out = broadcast(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(nn);
    }
    Some(out)
}

fn reduce(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let keep = n.int("keepdims", 1)? != 0;
    // Axes: an attribute before opset 18 (13 for ReduceSum), an input after.
    let axes = axes_of(cx, 1, "axes")?;
    let axes = match axes {
        Some(a) if !a.is_empty() => norm_axes(&a, x.len(), n)?,
        _ if n.int("noop_with_empty_axes", 0)? != 0 => {
            return if let Some(t) = cx.konst(0) {
                Ok(Outcome::Folded(vec![(*t).clone()]))
            } else {
                Ok(Outcome::Alias(x, None))
            };
        }
        _ => (0..x.len()).collect(),
    };
    let mut axes = axes;
    axes.sort_unstable();
    let out: Vec<usize> = x
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            if axes.contains(&i) {
                keep.then_some(1)
            } else {
                Some(d)
            }
        })
        .collect();
    let op = match n.op.as_str() {
        "ReduceMean" => ReduceOp::Mean,
        "ReduceSum" => ReduceOp::Sum,
        "ReduceMax" => ReduceOp::Max,
        _ => ReduceOp::Min,
    };
    if let Some(t) = cx.konst(0) {
        return Ok(Outcome::Folded(vec![fold::reduce(&t, &axes, op, out)]));
    }
    step(
        cx,
        Kind::Reduce {
            op,
            axes,
            keepdims: keep,
        },
        vec![cx.operand(0)?],
        vec![out],
    )
}

/// `Pad`: constant, edge, reflect and wrap modes; negative pads crop.
pub(crate) fn pad(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let r = x.len();
    let mode = n.string("mode", "constant")?;
    if !matches!(mode.as_str(), "constant" | "edge" | "reflect" | "wrap") {
        return Err(n.unsupported(format!("mode '{mode}'")));
    }
    let (p, value, axes) = if cx.opset < 11 {
        let p = n
            .ints("pads")?
            .or(n.ints("paddings")?)
            .ok_or_else(|| n.invalid("no pads"))?;
        (p, n.float("value", 0.0)?, None)
    } else {
        let p = cx.need_const(1, "pads")?.as_i64();
        let v = if cx.has(2) {
            cx.need_scalar(2, "a pad value computed at run time")?
        } else {
            0.0
        };
        let axes = if cx.has(3) {
            Some(norm_axes(&cx.need_const(3, "axes")?.as_i64(), r, n)?)
        } else {
            None
        };
        (p, v, axes)
    };
    let axes = axes.unwrap_or_else(|| (0..r).collect());
    if p.len() != 2 * axes.len() {
        return Err(n.invalid(format!("{} pads for {} axes", p.len(), axes.len())));
    }
    let k = axes.len();
    let mut spads = vec![(0isize, 0isize); r];
    for (i, &a) in axes.iter().enumerate() {
        spads[a] = (p[i] as isize, p[i + k] as isize);
    }
    let mut out = Vec::with_capacity(r);
    for (&d, &(b, e)) in x.iter().zip(&spads) {
        let v = d as isize + b + e;
        if v < 0 {
            return Err(n.invalid(format!("pads {p:?} crop more than the input {x:?}")));
        }
        out.push(v as usize);
    }
    elems(&out, n)?;
    let simple = mode == "constant" && p.iter().all(|&v| v >= 0);
    let pads: Vec<(usize, usize)> = spads
        .iter()
        .map(|&(b, e)| (b.max(0) as usize, e.max(0) as usize))
        .collect();
    if let Some(t) = cx.konst(0) {
        return Ok(Outcome::Folded(vec![pad_host(
            &t, &spads, &out, &mode, value, n,
        )?]));
    }
    if !simple {
        let pm = match mode.as_str() {
            "edge" => PadMode::Edge,
            "reflect" => PadMode::Reflect,
            "wrap" => PadMode::Wrap,
            _ => PadMode::Constant(f64::from(value)),
        };
        return step(
            cx,
            Kind::PadMode {
                pads: spads,
                mode: pm,
            },
            vec![cx.operand(0)?],
            vec![out],
        );
    }
    step(
        cx,
        Kind::Pad { pads, value },
        vec![cx.operand(0)?],
        vec![out],
    )
}

/// `Pad` of a host tensor, exactly (elements moved, not converted): `pads` (begin, end) per
/// axis, negative ones cropping; `mode` constant (`value`), edge, reflect or wrap (NumPy's
/// `np.pad` modes, repeating for pads wider than the axis).
fn pad_host(
    t: &HostTensor,
    pads: &[(isize, isize)],
    out: &[usize],
    mode: &str,
    value: f32,
    n: &crate::graph::Node,
) -> Result<HostTensor> {
    let x = &t.shape;
    let r = x.len();
    if mode != "constant" && (0..r).any(|d| x[d] == 0 && out[d] > 0) {
        return Err(n.invalid(format!("{mode} padding of an empty axis ({x:?})")));
    }
    let st = fold::strides(x);
    let total: usize = out.iter().product();
    let mut order: Vec<Option<usize>> = Vec::with_capacity(total);
    let mut idx = vec![0usize; r];
    for _ in 0..total {
        let mut off = Some(0usize);
        for d in 0..r {
            let len = x[d] as isize;
            let i = idx[d] as isize - pads[d].0;
            let i = if (0..len).contains(&i) {
                Some(i)
            } else {
                match mode {
                    "edge" => Some(i.clamp(0, len - 1)),
                    "wrap" => Some(i.rem_euclid(len)),
                    "reflect" if len == 1 => Some(0),
                    "reflect" => {
                        let p = i.rem_euclid(2 * (len - 1));
                        Some(if p < len { p } else { 2 * (len - 1) - p })
                    }
                    _ => None,
                }
            };
            off = match (off, i) {
                (Some(o), Some(i)) => Some(o + i as usize * st[d]),
                _ => None,
            };
        }
        order.push(off);
        for d in (0..r).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let shape = out.to_vec();
    Ok(match &t.data {
        Data::F(v) => {
            let fill = f64::from(value);
            let res = order.iter().map(|o| o.map_or(fill, |i| v[i])).collect();
            fold::cast(&HostTensor::floats(t.elem, shape, res), t.elem)
        }
        Data::I(v) => {
            let fill = value as i64;
            let res = order.iter().map(|o| o.map_or(fill, |i| v[i])).collect();
            HostTensor::ints(t.elem, shape, res)
        }
    })
}
