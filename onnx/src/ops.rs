//! Per-operator analysis: output shapes, attribute defaults across opsets, host folding of
//! constant inputs, and the [`Kind`] a device node becomes. Neural-network operators are in
//! `ops_nn.rs`, the element-wise binary ones in `ops_binary.rs`.

use std::sync::Arc;

use crate::error::Result;
use crate::fold::{self, axis, broadcast};
use crate::ir::{Ctx, Kind, Outcome, axes_of, dims, elems, norm_axes, step};
use crate::tensor::{Data, Elem, HostTensor};
use crate::{ops_binary, ops_nn};

/// Analyses one node.
pub(crate) fn eval(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    if !(n.domain.is_empty() || n.domain == "ai.onnx") {
        return Err(n.unsupported(format!("the operator domain '{}'", n.domain)));
    }
    let op = n.op.as_str();
    match op {
        "Constant" => constant(cx),
        "Identity" => pass(cx),
        "Dropout" => dropout(cx),
        "Shape" => {
            let s = cx.shape(0)?;
            let r = s.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let start = clamp(n.int("start", 0)?);
            let end = clamp(n.int("end", r)?);
            let v: Vec<i64> = s[start..end.max(start)].iter().map(|&d| d as i64).collect();
            Ok(Outcome::Folded(vec![HostTensor::ints(
                Elem::I64,
                vec![v.len()],
                v,
            )]))
        }
        "Size" => {
            let s = cx.shape(0)?;
            let v = s.iter().product::<usize>() as i64;
            Ok(Outcome::Folded(vec![HostTensor::ints(
                Elem::I64,
                vec![],
                vec![v],
            )]))
        }
        "ConstantOfShape" => {
            let s = cx.need_const(0, "shape")?;
            let shape = dims(&s.as_i64(), n)?;
            let count = elems(&shape, n)?;
            let value = match n.attr("value") {
                Some(crate::graph::Attr::Tensor(t)) => t.clone(),
                _ => HostTensor::floats(Elem::F32, vec![1], vec![0.0]),
            };
            Ok(Outcome::Folded(vec![match value.data {
                Data::F(v) => HostTensor::floats(
                    value.elem,
                    shape,
                    vec![v.first().copied().unwrap_or(0.0); count],
                ),
                Data::I(v) => HostTensor::ints(
                    value.elem,
                    shape,
                    vec![v.first().copied().unwrap_or(0); count],
                ),
            }]))
        }
        "Range" => {
            let (s, l, d) = (
                cx.need_const(0, "start")?,
                cx.need_const(1, "limit")?,
                cx.need_const(2, "delta")?,
            );
            let (a, b, c) = (s.as_f64()[0], l.as_f64()[0], d.as_f64()[0]);
            if c == 0.0 {
                return Err(n.invalid("delta is 0"));
            }
            let count = ((b - a) / c).ceil().max(0.0) as usize;
            elems(&[count], n)?;
            let v: Vec<f64> = (0..count).map(|i| a + i as f64 * c).collect();
            let t = HostTensor::floats(Elem::F64, vec![count], v);
            Ok(Outcome::Folded(vec![fold::cast(&t, s.elem)]))
        }
        "Cast" => {
            let to = n.int("to", 1)?;
            let Some(to) = Elem::from_code(to as i32) else {
                return Err(n.unsupported(format!("cast to type {to}")));
            };
            if let Some(t) = cx.konst(0) {
                return Ok(Outcome::Folded(vec![fold::cast(&t, to)]));
            }
            if !to.is_float() {
                return Err(n.unsupported(format!(
                    "a cast of a computed tensor to {} (device tensors are float)",
                    to.name()
                )));
            }
            // To float16 / bfloat16: rounded on the device (a no-op when the compute dtype is
            // that type). Other float casts: the device computes in one precision, the value
            // is unchanged (float64 is held in the compute dtype).
            if matches!(to, Elem::F16 | Elem::Bf16) {
                let x = cx.shape(0)?;
                return step(cx, Kind::Round(to), vec![cx.operand(0)?], vec![x]);
            }
            Ok(Outcome::Alias(cx.shape(0)?, Some(to)))
        }
        "Reshape" => {
            let x = cx.shape(0)?;
            let spec = match cx.konst(1) {
                Some(s) => s.as_i64(),
                None if cx.opset < 5 => n.ints("shape")?.unwrap_or_default(),
                None => return Err(n.unsupported("a shape computed at run time")),
            };
            let allowzero = n.int("allowzero", 0)? != 0;
            let shape = reshape(&x, &spec, allowzero)
                .ok_or_else(|| n.invalid(format!("cannot reshape {x:?} to {spec:?}")))?;
            view(cx, shape)
        }
        "Flatten" => {
            let x = cx.shape(0)?;
            let a = n.int("axis", 1)?;
            let r = x.len() as i64;
            let a = if a < 0 { a + r } else { a };
            if !(0..=r).contains(&a) {
                return Err(n.invalid(format!("axis {a} out of range for rank {r}")));
            }
            let a = a as usize;
            view(cx, vec![x[..a].iter().product(), x[a..].iter().product()])
        }
        "Squeeze" => {
            let x = cx.shape(0)?;
            let axes = axes_of(cx, 1, "axes")?;
            let shape = match axes {
                None => x.iter().copied().filter(|&d| d != 1).collect(),
                Some(ax) => {
                    let ax = norm_axes(&ax, x.len(), n)?;
                    if ax.iter().any(|&a| x[a] != 1) {
                        return Err(n.invalid(format!(
                            "squeezes a dimension that is not 1 ({x:?}, axes {ax:?})"
                        )));
                    }
                    x.iter()
                        .enumerate()
                        .filter(|(i, _)| !ax.contains(i))
                        .map(|(_, &d)| d)
                        .collect()
                }
            };
            view(cx, shape)
        }
        "Unsqueeze" => {
            let x = cx.shape(0)?;
            let ax = axes_of(cx, 1, "axes")?.ok_or_else(|| n.invalid("no axes"))?;
            let r = x.len() + ax.len();
            let ax = norm_axes(&ax, r, n)?;
            let mut it = x.iter();
            let shape = (0..r)
                .map(|i| {
                    if ax.contains(&i) {
                        1
                    } else {
                        it.next().copied().unwrap_or(1)
                    }
                })
                .collect();
            view(cx, shape)
        }
        "Transpose" => {
            let x = cx.shape(0)?;
            let perm: Vec<usize> = match n.ints("perm")? {
                Some(p) => norm_axes(&p, x.len(), n)?,
                None => (0..x.len()).rev().collect(),
            };
            let mut seen = perm.clone();
            seen.sort_unstable();
            if seen != (0..x.len()).collect::<Vec<_>>() {
                return Err(n.invalid(format!(
                    "perm {perm:?} is not a permutation of rank {}",
                    x.len()
                )));
            }
            if let Some(t) = cx.konst(0) {
                let (shape, order) = fold::permute_order(&t.shape, &perm);
                return Ok(Outcome::Folded(vec![fold::take(&t, shape, &order)]));
            }
            let out = perm.iter().map(|&p| x[p]).collect();
            step(cx, Kind::Transpose(perm), vec![cx.operand(0)?], vec![out])
        }
        "Concat" => concat(cx),
        "Split" => split(cx),
        "Slice" => slice(cx),
        "Gather" => gather(cx),
        "Expand" => {
            let x = cx.shape(0)?;
            let s = cx.need_const(1, "shape")?.as_i64();
            let s = dims(&s, n)?;
            let out = broadcast(&x, &s)
                .ok_or_else(|| n.invalid(format!("cannot expand {x:?} to {s:?}")))?;
            elems(&out, n)?;
            if let Some(t) = cx.konst(0) {
                let order = fold::broadcast_index(&t.shape, &out);
                return Ok(Outcome::Folded(vec![fold::take(&t, out, &order)]));
            }
            step(cx, Kind::Expand, vec![cx.operand(0)?], vec![out])
        }
        "Tile" => {
            let x = cx.shape(0)?;
            let r = cx.need_const(1, "repeats")?.as_i64();
            if r.len() != x.len() {
                return Err(n.invalid("repeats must have one entry per dimension"));
            }
            let r = dims(&r, n)?;
            let out: Vec<usize> = x.iter().zip(&r).map(|(a, b)| a * b).collect();
            elems(&out, n)?;
            step(cx, Kind::Tile(r), vec![cx.operand(0)?], vec![out])
        }
        "Pad" => ops_nn::pad(cx),
        "Where" => {
            if cx.all_const() {
                let (c, a, b) = (
                    cx.need_const(0, "condition")?,
                    cx.need_const(1, "X")?,
                    cx.need_const(2, "Y")?,
                );
                let ab = fold::binary(&a, &b, |x, _| x, |x, _| x)
                    .ok_or_else(|| n.invalid("shapes do not broadcast"))?;
                let shape = broadcast(&c.shape, &ab.shape)
                    .ok_or_else(|| n.invalid("shapes do not broadcast"))?;
                let (ic, ia, ib) = (
                    fold::broadcast_index(&c.shape, &shape),
                    fold::broadcast_index(&a.shape, &shape),
                    fold::broadcast_index(&b.shape, &shape),
                );
                let (cv, av, bv) = (c.as_i64(), a.as_f64(), b.as_f64());
                let v: Vec<f64> = (0..ic.len())
                    .map(|i| if cv[ic[i]] != 0 { av[ia[i]] } else { bv[ib[i]] })
                    .collect();
                let t = HostTensor::floats(Elem::F64, shape, v);
                return Ok(Outcome::Folded(vec![fold::cast(&t, a.elem)]));
            }
            let mut shape = cx.shape(0)?;
            for i in [1, 2] {
                let s = cx.shape(i)?;
                shape = broadcast(&shape, &s).ok_or_else(|| {
                    n.invalid(format!("shapes {shape:?} and {s:?} do not broadcast"))
                })?;
            }
            elems(&shape, n)?;
            let ins = vec![cx.operand(0)?, cx.operand(1)?, cx.operand(2)?];
            step(cx, Kind::Where, ins, vec![shape])
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Sum" | "Mean" | "Equal"
        | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => ops_binary::binary(cx),
        _ => ops_nn::eval(cx),
    }
}

/// An output that is its input (Identity, Dropout, float casts).
fn pass(cx: &mut Ctx<'_>) -> Result<Outcome> {
    if let Some(t) = cx.konst(0) {
        return Ok(Outcome::Folded(vec![(*t).clone()]));
    }
    let s = cx.shape(0)?;
    Ok(Outcome::Alias(s, None))
}

/// `Dropout` at inference (no training mode, or training mode with a ratio of 0, which
/// drops nothing): the output is the input, the mask (when asked for) all true.
fn dropout(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let training = cx.opset >= 12
        && cx.has(2)
        && cx
            .need_const(2, "a training_mode computed at run time")?
            .as_i64()
            .iter()
            .any(|&v| v != 0);
    if training {
        let ratio = if cx.has(1) {
            cx.need_scalar(1, "a ratio computed at run time (training mode)")?
        } else {
            0.5
        };
        if ratio != 0.0 {
            return Err(n.unsupported(format!(
                "training mode with ratio {ratio} (random; inference, or a ratio of 0, only)"
            )));
        }
    }
    if n.outputs.get(1).is_none_or(|o| o.is_empty()) {
        return pass(cx);
    }
    let s = cx.shape(0)?;
    let count = s.iter().product();
    let mask = HostTensor::ints(Elem::Bool, s.clone(), vec![1; count]);
    if let Some(t) = cx.konst(0) {
        return Ok(Outcome::Folded(vec![(*t).clone(), mask]));
    }
    Ok(Outcome::AliasWith(s, vec![mask]))
}

/// A reshaped view: folded for constants, an alias otherwise.
fn view(cx: &mut Ctx<'_>, shape: Vec<usize>) -> Result<Outcome> {
    if let Some(t) = cx.konst(0) {
        let mut t = (*t).clone();
        t.shape = shape;
        return Ok(Outcome::Folded(vec![t]));
    }
    Ok(Outcome::Alias(shape, None))
}

/// ONNX Reshape's shape rule.
pub(crate) fn reshape(x: &[usize], spec: &[i64], allowzero: bool) -> Option<Vec<usize>> {
    let total: usize = x.iter().product();
    let mut out = Vec::with_capacity(spec.len());
    let mut infer = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => out.push(*x.get(i)?),
            s if s >= 0 => out.push(s as usize),
            _ => return None,
        }
    }
    let known: usize = out.iter().product();
    if let Some(i) = infer {
        if known == 0 || total % known != 0 {
            return None;
        }
        out[i] = total / known;
    }
    (out.iter().product::<usize>() == total).then_some(out)
}

fn constant(cx: &mut Ctx<'_>) -> Result<Outcome> {
    use crate::graph::Attr;
    let n = cx.node;
    let t = match n.attrs.first().map(|(k, v)| (k.as_str(), v)) {
        Some(("value", Attr::Tensor(t))) => t.clone(),
        Some(("value_float", Attr::Float(f))) => {
            HostTensor::floats(Elem::F32, vec![], vec![f64::from(*f)])
        }
        Some(("value_floats", Attr::Floats(f))) => HostTensor::floats(
            Elem::F32,
            vec![f.len()],
            f.iter().map(|&x| f64::from(x)).collect(),
        ),
        Some(("value_int", Attr::Int(i))) => HostTensor::ints(Elem::I64, vec![], vec![*i]),
        Some(("value_ints", Attr::Ints(i))) => {
            HostTensor::ints(Elem::I64, vec![i.len()], i.clone())
        }
        Some((k, _)) => return Err(n.unsupported(format!("the attribute '{k}'"))),
        None => return Err(n.invalid("no value")),
    };
    Ok(Outcome::Folded(vec![t]))
}

fn concat(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let first = cx.shape(0)?;
    let a = n.int("axis", if cx.opset < 4 { 1 } else { i64::MIN })?;
    if a == i64::MIN {
        return Err(n.invalid("no axis"));
    }
    let ax = axis(a, first.len()).ok_or_else(|| n.invalid(format!("axis {a} out of range")))?;
    let mut out = first.clone();
    out[ax] = 0;
    let present: Vec<usize> = (0..cx.ins.len()).filter(|&i| cx.has(i)).collect();
    for &i in &present {
        let s = cx.shape(i)?;
        if s.len() != first.len() || s.iter().enumerate().any(|(d, &v)| d != ax && v != first[d]) {
            return Err(n.invalid(format!(
                "input {i} has shape {s:?}, incompatible with {first:?} on axis {ax}"
            )));
        }
        out[ax] += s[ax];
    }
    elems(&out, n)?;
    if cx.all_const() {
        let ts: Vec<Arc<HostTensor>> = present.iter().filter_map(|&i| cx.konst(i)).collect();
        let outer: usize = first[..ax].iter().product();
        let inner: usize = first[ax + 1..].iter().product();
        let floats = ts.iter().any(|t| matches!(t.data, Data::F(_)));
        let mut fv = Vec::new();
        let mut iv = Vec::new();
        for o in 0..outer {
            for t in &ts {
                let w = t.shape[ax] * inner;
                if floats {
                    fv.extend_from_slice(&t.as_f64()[o * w..(o + 1) * w]);
                } else {
                    iv.extend_from_slice(&t.as_i64()[o * w..(o + 1) * w]);
                }
            }
        }
        let elem = ts.first().map_or(Elem::F32, |t| t.elem);
        return Ok(Outcome::Folded(vec![if floats {
            HostTensor::floats(elem, out, fv)
        } else {
            HostTensor::ints(elem, out, iv)
        }]));
    }
    // Inputs with no elements add nothing.
    let ins = present
        .iter()
        .filter(|&&i| cx.shape(i).is_ok_and(|s| !s.contains(&0)))
        .map(|&i| cx.operand(i))
        .collect::<Result<_>>()?;
    step(cx, Kind::Concat(ax), ins, vec![out])
}

fn split(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let ax = axis(n.int("axis", 0)?, x.len()).ok_or_else(|| n.invalid("axis out of range"))?;
    let k = n.outputs.len().max(1);
    let sizes: Vec<usize> = match axes_of(cx, 1, "split")? {
        Some(s) => dims(&s, n)?,
        None => {
            let parts = n.int("num_outputs", k as i64)?.max(1) as usize;
            let each = x[ax].div_ceil(parts);
            (0..parts)
                .map(|i| each.min(x[ax].saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != x[ax] {
        return Err(n.invalid(format!("split sizes {sizes:?} do not add up to {}", x[ax])));
    }
    let mut offsets = Vec::new();
    let mut shapes = Vec::new();
    let mut off = 0;
    for &s in &sizes {
        offsets.push(off);
        let mut sh = x.clone();
        sh[ax] = s;
        shapes.push(sh);
        off += s;
    }
    if let Some(t) = cx.konst(0) {
        let outs = offsets
            .iter()
            .zip(&sizes)
            .map(|(&o, &s)| {
                let idx: Vec<usize> = (o..o + s).collect();
                fold::gather(&t, ax, &idx, &[s])
            })
            .collect();
        return Ok(Outcome::Folded(outs));
    }
    step(
        cx,
        Kind::Split { axis: ax, offsets },
        vec![cx.operand(0)?],
        shapes,
    )
}

fn slice(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let (starts, ends, axes, steps) = if cx.opset < 10 {
        (
            n.ints("starts")?.unwrap_or_default(),
            n.ints("ends")?.unwrap_or_default(),
            n.ints("axes")?,
            None,
        )
    } else {
        (
            cx.need_const(1, "starts")?.as_i64(),
            cx.need_const(2, "ends")?.as_i64(),
            cx.has(3)
                .then(|| cx.need_const(3, "axes").map(|t| t.as_i64()))
                .transpose()?,
            cx.has(4)
                .then(|| cx.need_const(4, "steps").map(|t| t.as_i64()))
                .transpose()?,
        )
    };
    let axes = match axes {
        Some(a) => a,
        None => (0..starts.len() as i64).collect(),
    };
    if starts.len() != ends.len() || axes.len() != starts.len() {
        return Err(n.invalid("starts, ends and axes differ in length"));
    }
    let mut sl: Vec<(usize, usize, usize)> = x.iter().map(|&d| (0, 1, d)).collect();
    let mut reversed = Vec::new();
    for (i, &a) in axes.iter().enumerate() {
        let ax = axis(a, x.len()).ok_or_else(|| n.invalid(format!("axis {a} out of range")))?;
        let d = x[ax] as i64;
        let st = steps.as_ref().and_then(|s| s.get(i).copied()).unwrap_or(1);
        if st == 0 {
            return Err(n.invalid("a step is 0"));
        }
        let clampi = |v: i64, lo: i64, hi: i64| {
            let v = if v < 0 { v.saturating_add(d) } else { v };
            v.clamp(lo, hi)
        };
        if st > 0 {
            let s = clampi(starts[i], 0, d);
            let e = clampi(ends[i], 0, d);
            let len = if e > s { (e - s + st - 1) / st } else { 0 };
            sl[ax] = (s as usize, st as usize, len as usize);
        } else {
            let s = clampi(starts[i], -1, d - 1);
            let e = clampi(ends[i], -1, d - 1);
            let len = if s > e {
                (s - e + (-st) - 1) / (-st)
            } else {
                0
            };
            // The elements s, s+st, ...: as a forward slice, reversed.
            let last = s + st * (len - 1).max(0);
            sl[ax] = (last.max(0) as usize, (-st) as usize, len as usize);
            reversed.push(ax);
        }
    }
    let out: Vec<usize> = sl.iter().map(|s| s.2).collect();
    if let Some(t) = cx.konst(0) {
        let mut order = Vec::new();
        let st = fold::strides(&x);
        let total: usize = out.iter().product();
        let mut idx = vec![0usize; out.len()];
        for _ in 0..total {
            let mut src = 0;
            for d in 0..out.len() {
                let k = if reversed.contains(&d) {
                    out[d] - 1 - idx[d]
                } else {
                    idx[d]
                };
                src += (sl[d].0 + k * sl[d].1) * st[d];
            }
            order.push(src);
            for d in (0..out.len()).rev() {
                idx[d] += 1;
                if idx[d] < out[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        return Ok(Outcome::Folded(vec![fold::take(&t, out, &order)]));
    }
    if !reversed.is_empty() {
        // Negative steps: (first index read, signed step) per dimension.
        let spec = sl
            .iter()
            .enumerate()
            .map(|(d, &(start, st, len))| {
                if reversed.contains(&d) {
                    (start + st * len.saturating_sub(1), -(st as isize))
                } else {
                    (start, st as isize)
                }
            })
            .collect();
        return step(cx, Kind::SliceSigned(spec), vec![cx.operand(0)?], vec![out]);
    }
    step(cx, Kind::Slice(sl), vec![cx.operand(0)?], vec![out])
}

fn gather(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    if x.is_empty() {
        return Err(n.invalid("gathers from a scalar"));
    }
    let ax = axis(n.int("axis", 0)?, x.len()).ok_or_else(|| n.invalid("axis out of range"))?;
    let Some(idx_t) = cx.konst(1) else {
        return Err(n.unsupported("indices computed at run time (no gather emitter yet)"));
    };
    let d = x[ax] as i64;
    let mut idx = Vec::new();
    for v in idx_t.as_i64() {
        let w = if v < 0 { v + d } else { v };
        if !(0..d).contains(&w) {
            return Err(n.invalid(format!("index {v} out of range for dimension {d}")));
        }
        idx.push(w as usize);
    }
    if let Some(t) = cx.konst(0) {
        return Ok(Outcome::Folded(vec![fold::gather(
            &t,
            ax,
            &idx,
            &idx_t.shape,
        )]));
    }
    let mut out = x[..ax].to_vec();
    out.extend_from_slice(&idx_t.shape);
    out.extend_from_slice(&x[ax + 1..]);
    if idx.len() > 4096 {
        return Err(n.unsupported(format!(
            "{} constant indices (at most 4096 without a gather emitter)",
            idx.len()
        )));
    }
    step(
        cx,
        Kind::Gather { axis: ax, idx },
        vec![cx.operand(0)?],
        vec![out],
    )
}
