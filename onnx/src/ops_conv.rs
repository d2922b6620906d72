//! Per-operator analysis of convolution, transposed convolution, pooling and batch
//! normalisation (folded into a preceding convolution when it is its only reader).

use std::sync::Arc;

use nrt_kernel::library::conv::Conv2dConfig;
use nrt_kernel::library::conv_transpose::ConvTransposeConfig;
use nrt_kernel::library::conv_transpose3d::ConvTranspose3dConfig;
use nrt_kernel::library::pool::{Pool2dConfig, PoolExt, PoolKind};
use nrt_kernel::library::pool3d::Pool3dConfig;

use crate::error::Result;
use crate::graph::Node;
use crate::ir::{Ctx, Kind, Outcome, dims, step};
use crate::tensor::{Elem, HostTensor};

fn spatial(n: &Node, name: &str, k: usize, default: usize) -> Result<Vec<usize>> {
    match n.ints(name)? {
        None => Ok(vec![default; k]),
        Some(v) if v.len() == k => dims(&v, n),
        Some(v) => Err(n.invalid(format!("'{name}' has {} values, {k} expected", v.len()))),
    }
}

/// Pads from `pads` or `auto_pad` for `k` spatial dims of sizes `x` with effective kernel
/// sizes `ek` and strides `s`: `[begin.., end..]`.
fn pads_for(n: &Node, x: &[usize], ek: &[usize], s: &[usize]) -> Result<Vec<usize>> {
    let k = x.len();
    let auto = n.string("auto_pad", "NOTSET")?;
    match auto.as_str() {
        "NOTSET" | "" => match n.ints("pads")? {
            None => Ok(vec![0; 2 * k]),
            Some(p) if p.len() == 2 * k => dims(&p, n),
            Some(p) => Err(n.invalid(format!("'pads' has {} values, {} expected", p.len(), 2 * k))),
        },
        "VALID" => Ok(vec![0; 2 * k]),
        "SAME_UPPER" | "SAME_LOWER" => {
            let mut p = vec![0; 2 * k];
            for i in 0..k {
                let out = x[i].div_ceil(s[i]);
                let total = ((out - 1) * s[i] + ek[i]).saturating_sub(x[i]);
                let small = total / 2;
                let (b, e) = if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                };
                p[i] = b;
                p[i + k] = e;
            }
            Ok(p)
        }
        a => Err(n.unsupported(format!("auto_pad '{a}'"))),
    }
}

/// The optional bias `B` (input 2) of a convolution or transposed convolution with `o` output
/// channels: a constant of one value per output channel.
fn conv_bias(n: &Node, cx: &Ctx<'_>, o: usize) -> Result<Option<Arc<HostTensor>>> {
    let b = if cx.has(2) {
        Some(cx.need_const(2, "B")?)
    } else {
        None
    };
    if b.as_ref().is_some_and(|b| b.len() != o) {
        return Err(n.invalid("B must have one value per output channel"));
    }
    Ok(b)
}

pub(crate) fn conv(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let w = cx.need_const(1, "W")?;
    if x.len() != 4 && x.len() != 3 {
        return Err(n.unsupported(format!(
            "a rank-{} input (1-D and 2-D convolutions)",
            x.len()
        )));
    }
    if w.shape.len() != x.len() {
        return Err(n.invalid(format!(
            "W has shape {:?} for an input of rank {}",
            w.shape,
            x.len()
        )));
    }
    let k = x.len() - 2;
    let ks: Vec<usize> = w.shape[2..].to_vec();
    let s = spatial(n, "strides", k, 1)?;
    let d = spatial(n, "dilations", k, 1)?;
    if s.contains(&0) || d.contains(&0) {
        return Err(n.invalid("a stride or dilation of 0"));
    }
    let ek: Vec<usize> = ks
        .iter()
        .zip(&d)
        .map(|(&kk, &dd)| (kk.max(1) - 1) * dd + 1)
        .collect();
    let p = pads_for(n, &x[2..], &ek, &s)?;
    let g = n.int("group", 1)?.max(1) as usize;
    let (o, cg) = (w.shape[0], w.shape[1]);
    if cg * g != x[1] || o % g != 0 {
        return Err(n.invalid(format!(
            "W {:?} and group {g} do not fit {} input channels",
            w.shape, x[1]
        )));
    }
    let mut out = vec![x[0], o];
    for i in 0..k {
        let span = x[2 + i] + p[i] + p[i + k];
        if span < ek[i] {
            return Err(n.invalid("the kernel is larger than the padded input"));
        }
        out.push((span - ek[i]) / s[i] + 1);
    }
    let b = conv_bias(n, cx, o)?;
    let (cfg, w) = if k == 2 {
        (
            Conv2dConfig {
                stride: (s[0], s[1]),
                pads: [p[0], p[1], p[2], p[3]],
                dilation: (d[0], d[1]),
                groups: g,
            },
            w,
        )
    } else {
        let mut w2 = (*w).clone();
        w2.shape = vec![o, cg, 1, ks[0]];
        (
            Conv2dConfig {
                stride: (1, s[0]),
                pads: [0, p[0], 0, p[1]],
                dilation: (1, d[0]),
                groups: g,
            },
            Arc::new(w2),
        )
    };
    step(
        cx,
        Kind::Conv {
            cfg,
            w,
            b,
            relu: false,
            bn: false,
        },
        vec![cx.operand(0)?],
        vec![out],
    )
}

pub(crate) fn pool(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    if !(3..=5).contains(&x.len()) {
        return Err(n.unsupported(format!(
            "a rank-{} input (1-D, 2-D and 3-D pooling)",
            x.len()
        )));
    }
    let k = x.len() - 2;
    let ks = n
        .ints("kernel_shape")?
        .ok_or_else(|| n.invalid("no kernel_shape"))?;
    let ks = dims(&ks, n)?;
    if ks.len() != k || ks.contains(&0) {
        return Err(n.invalid(format!("kernel_shape must have {k} positive values")));
    }
    let s = spatial(n, "strides", k, 1)?;
    let d = spatial(n, "dilations", k, 1)?;
    if s.contains(&0) || d.contains(&0) {
        return Err(n.invalid("a stride or dilation of 0"));
    }
    let ceil = n.int("ceil_mode", 0)? != 0;
    if n.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(n.unsupported("the Indices output"));
    }
    let ek: Vec<usize> = ks
        .iter()
        .zip(&d)
        .map(|(&kk, &dd)| (kk - 1) * dd + 1)
        .collect();
    let p = pads_for(n, &x[2..], &ek, &s)?;
    let kind = if n.op == "MaxPool" {
        if n.int("storage_order", 0)? != 0 {
            return Err(n.unsupported("storage_order = 1"));
        }
        PoolKind::Max
    } else {
        PoolKind::Average {
            count_include_pad: n.int("count_include_pad", 0)? != 0,
        }
    };
    if k == 3 {
        let cfg = Pool3dConfig {
            kind,
            kernel: [ks[0], ks[1], ks[2]],
            stride: [s[0], s[1], s[2]],
            dilation: [d[0], d[1], d[2]],
            pads: [p[0], p[1], p[2], p[3], p[4], p[5]],
            ceil_mode: ceil,
        };
        let o = cfg
            .output_size([x[2], x[3], x[4]])
            .map_err(|e| n.invalid(e.message()))?;
        let out = vec![x[0], x[1], o[0], o[1], o[2]];
        return step(cx, Kind::Pool3d(cfg), vec![cx.operand(0)?], vec![out]);
    }
    // 1-D pooling as 2-D with H = 1.
    let (ks2, s2, d2, p4, hw) = if k == 2 {
        (
            (ks[0], ks[1]),
            (s[0], s[1]),
            (d[0], d[1]),
            [p[0], p[1], p[2], p[3]],
            (x[2], x[3]),
        )
    } else {
        (
            (1, ks[0]),
            (1, s[0]),
            (1, d[0]),
            [0, p[0], 0, p[1]],
            (1, x[2]),
        )
    };
    let cfg = Pool2dConfig {
        kind,
        kernel: ks2,
        stride: s2,
        pads: p4,
    };
    let ext = PoolExt {
        dilation: d2,
        ceil_mode: ceil,
    };
    let (oh, ow) = cfg
        .output_size_ext(hw, &ext)
        .map_err(|e| n.invalid(e.message()))?;
    let out = if k == 2 {
        vec![x[0], x[1], oh, ow]
    } else {
        vec![x[0], x[1], ow]
    };
    step(cx, Kind::Pool(cfg, ext), vec![cx.operand(0)?], vec![out])
}

/// A transposed convolution's output size along one axis before the pads: `s·(n − 1) + op +
/// d·(k − 1) + 1` (`n`, `k` ≥ 1; saturating).
fn full_size(n: usize, k: usize, s: usize, d: usize, op: usize) -> usize {
    s.saturating_mul(n - 1)
        .saturating_add(op)
        .saturating_add(d.saturating_mul(k - 1))
        .saturating_add(1)
}

/// ConvTranspose's pads `[begin.., end..]` and the extra output elements at the end of each
/// axis (an `output_shape` beyond the full output), for `k` spatial dims of sizes `x`, kernel
/// sizes `ks`, strides `s`, dilations `d`, output paddings `op`.
///
/// With `output_shape` (its last `k` values) or `auto_pad` SAME_UPPER / SAME_LOWER (output
/// `x·s` unless `output_shape` is given), the pads follow the spec's equations: `total =
/// s·(x − 1) + op + d·(K − 1) + 1 − output`, SAME_UPPER `[total/2, total − total/2]`, otherwise
/// `[total − total/2, total/2]`; an output larger than the full one (a negative total) is
/// zeros-plus-bias elements at the end, as the backend tests and onnxruntime have it.
/// Otherwise `pads` (VALID: none).
fn transpose_pads(
    n: &Node,
    x: &[usize],
    ks: &[usize],
    [s, d, op]: [&[usize]; 3],
) -> Result<(Vec<usize>, Vec<usize>)> {
    let k = x.len();
    let auto = n.string("auto_pad", "NOTSET")?;
    let shape = match n.ints("output_shape")? {
        None => None,
        Some(v) if v.len() == k || v.len() == k + 2 => Some(dims(&v[v.len() - k..], n)?),
        Some(v) => {
            return Err(n.invalid(format!(
                "'output_shape' has {} values, {k} expected",
                v.len()
            )));
        }
    };
    let same = matches!(auto.as_str(), "SAME_UPPER" | "SAME_LOWER");
    if shape.is_none() && !same {
        let p = match auto.as_str() {
            "NOTSET" | "" => match n.ints("pads")? {
                None => vec![0; 2 * k],
                Some(v) if v.len() == 2 * k => dims(&v, n)?,
                Some(_) => return Err(n.invalid("pads has the wrong length")),
            },
            "VALID" => vec![0; 2 * k],
            a => return Err(n.unsupported(format!("auto_pad '{a}'"))),
        };
        return Ok((p, vec![0; k]));
    }
    let (mut p, mut extra) = (vec![0; 2 * k], vec![0; k]);
    for i in 0..k {
        let want = shape.as_ref().map_or(x[i].saturating_mul(s[i]), |v| v[i]);
        let full = full_size(x[i], ks[i], s[i], d[i], op[i]);
        if want <= full {
            let total = full - want;
            let (b, e) = if auto == "SAME_UPPER" {
                (total / 2, total - total / 2)
            } else {
                (total - total / 2, total / 2)
            };
            p[i] = b;
            p[i + k] = e;
        } else {
            extra[i] = want - full;
        }
    }
    Ok((p, extra))
}

pub(crate) fn conv_transpose(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    let w = cx.need_const(1, "W")?;
    if !(3..=5).contains(&x.len()) {
        return Err(n.unsupported(format!("a rank-{} input (1-D, 2-D and 3-D)", x.len())));
    }
    if w.shape.len() != x.len() || w.shape[0] != x[1] {
        return Err(n.invalid(format!("W {:?} does not fit the input {x:?}", w.shape)));
    }
    let k = x.len() - 2;
    let ks = w.shape[2..].to_vec();
    if x[2..].contains(&0) || ks.contains(&0) {
        return Err(n.invalid("an empty spatial axis or kernel"));
    }
    if let Some(v) = n.ints("kernel_shape")? {
        if dims(&v, n)? != ks {
            return Err(n.invalid(format!("kernel_shape {v:?} differs from W's {ks:?}")));
        }
    }
    let g = n.int("group", 1)?.max(1) as usize;
    let s = spatial(n, "strides", k, 1)?;
    let d = spatial(n, "dilations", k, 1)?;
    let op = spatial(n, "output_padding", k, 0)?;
    if s.contains(&0) || d.contains(&0) {
        return Err(n.invalid("a stride or dilation of 0"));
    }
    let (p, extra) = transpose_pads(n, &x[2..], &ks, [&s, &d, &op])?;
    // The output beyond `output_padding` is output padding too (zeros plus the bias).
    let op: Vec<usize> = op.iter().zip(&extra).map(|(a, b)| a + b).collect();
    if (0..k).any(|i| op[i] >= s[i].max(d[i])) {
        return Err(n.unsupported(
            "an output_shape more than stride − 1 beyond the full output (output padding past \
             the stride or dilation)",
        ));
    }
    let o = w.shape[1] * g;
    let mut out = vec![x[0], o];
    for i in 0..k {
        let full = full_size(x[2 + i], ks[i], s[i], d[i], op[i]);
        let Some(v) = full.checked_sub(p[i] + p[i + k]).filter(|&v| v > 0) else {
            return Err(n.invalid("the pads leave no output"));
        };
        out.push(v);
    }
    let b = conv_bias(n, cx, o)?;
    let ins = vec![cx.operand(0)?];
    if k == 3 {
        let cfg = ConvTranspose3dConfig {
            stride: [s[0], s[1], s[2]],
            pads: [p[0], p[1], p[2], p[3], p[4], p[5]],
            dilation: [d[0], d[1], d[2]],
            groups: g,
            output_padding: [op[0], op[1], op[2]],
        };
        return step(cx, Kind::ConvTranspose3d { cfg, w, b }, ins, vec![out]);
    }
    let cfg = if k == 2 {
        ConvTransposeConfig {
            stride: (s[0], s[1]),
            pads: [p[0], p[1], p[2], p[3]],
            dilation: (d[0], d[1]),
            groups: g,
            output_padding: (op[0], op[1]),
        }
    } else {
        ConvTransposeConfig {
            stride: (1, s[0]),
            pads: [0, p[0], 0, p[1]],
            dilation: (1, d[0]),
            groups: g,
            output_padding: (0, op[0]),
        }
    };
    step(cx, Kind::ConvTranspose { cfg, w, b }, ins, vec![out])
}

pub(crate) fn batchnorm(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let x = cx.shape(0)?;
    if n.outputs.iter().skip(1).any(|o| !o.is_empty()) || n.int("training_mode", 0)? != 0 {
        return Err(n.unsupported("training mode (running statistics outputs)"));
    }
    if x.len() < 2 {
        return Err(n.invalid("needs rank ≥ 2"));
    }
    let eps = f64::from(n.float("epsilon", 1e-5)?);
    let c = x[1];
    let get = |i: usize, what: &str| -> Result<Vec<f64>> {
        let t = cx.need_const(i, what)?;
        if t.len() != c {
            return Err(n.invalid(format!("{what} has {} values for {c} channels", t.len())));
        }
        Ok(t.as_f64())
    };
    let (g, b, m, v) = (
        get(1, "scale")?,
        get(2, "B")?,
        get(3, "mean")?,
        get(4, "var")?,
    );
    // y = (x − mean) / sqrt(var + eps) · scale + B = x·a + (B − mean·a).
    let a: Vec<f64> = (0..c)
        .map(|i| f64::from((g[i] / (v[i] + eps).sqrt()) as f32))
        .collect();
    let sh: Vec<f64> = (0..c)
        .map(|i| f64::from((b[i] - m[i] * a[i]) as f32))
        .collect();
    // Folded into the convolution that produced x, when x has no other reader.
    if let Some(d) = cx.dyn_id(0)
        && let Some(last) = cx.an.steps.last_mut()
        && last.outs == [d]
        && cx.an.uses.get(&cx.an.values[d].name) == Some(&1)
        && let Kind::Conv {
            w,
            b: cb,
            relu: false,
            bn,
            ..
        } = &mut last.kind
    {
        let o = w.shape[0];
        let per = w.len() / o.max(1);
        let mut wv = w.as_f64();
        for (i, x) in wv.iter_mut().enumerate() {
            *x = f64::from((*x * a[i / per]) as f32);
        }
        let old_b = cb
            .as_ref()
            .map(|t| t.as_f64())
            .unwrap_or_else(|| vec![0.0; o]);
        let nb: Vec<f64> = (0..o)
            .map(|i| f64::from((old_b[i] * a[i] + sh[i]) as f32))
            .collect();
        *w = Arc::new(HostTensor::floats(w.elem, w.shape.clone(), wv));
        *cb = Some(Arc::new(HostTensor::floats(Elem::F32, vec![o], nb)));
        *bn = true;
        cx.an.fused += 1;
        return Ok(Outcome::Alias(x, None));
    }
    let mk = |v: Vec<f64>| Arc::new(HostTensor::floats(Elem::F32, vec![c], v));
    step(
        cx,
        Kind::BatchNorm {
            scale: mk(a),
            shift: mk(sh),
        },
        vec![cx.operand(0)?],
        vec![x],
    )
}
