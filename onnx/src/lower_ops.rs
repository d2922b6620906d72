//! Each step's kernel-library calls.

use nrt_kernel::library::activation::{self, ActOpts};
use nrt_kernel::library::elementwise::binary;
use nrt_kernel::library::matmul::{Epilogue, MatmulOpts, matmul, matmul_fused};
use nrt_kernel::library::reduce::{ReduceOp, reduce_axes};
use nrt_kernel::library::{
    conv, conv_transpose, conv_transpose3d, data, lrn, norm, pointwise, pool, pool3d, softmax,
};
use nrt_kernel::{ActFn, AluOp, DType, View};

use crate::error::{Error, Result};
use crate::fold;
use std::sync::Arc;

use crate::ir::{Kind, Operand, Step};
use crate::lower_ctx::{Lower, kerr, kshape};
use crate::tensor::HostTensor;

fn act(lw: &mut Lower<'_>, out: &View, x: &View, f: ActFn, scale: f32, bias: f32) -> Result<()> {
    if scale == 1.0 && bias == 0.0 {
        activation::activation(&mut lw.k, out, x, f).map_err(kerr)
    } else {
        activation::activation_with(&mut lw.k, out, x, f, &ActOpts { scale, bias }).map_err(kerr)
    }
}

fn bin(lw: &mut Lower<'_>, out: &View, a: &View, b: &View, op: AluOp) -> Result<()> {
    binary(&mut lw.k, out, a, b, op).map_err(kerr)
}

fn copy(lw: &mut Lower<'_>, out: &View, x: &View) -> Result<()> {
    activation::copy(&mut lw.k, out, x).map_err(kerr)
}

/// `v` reshaped.
fn rs(v: &View, shape: &[usize]) -> Result<View> {
    v.reshape(&kshape(shape)).map_err(kerr)
}

/// Input `i` of a step (the importer checked the node's input count; a step without it is an
/// internal error, never a panic).
fn inp(s: &Step, i: usize) -> Result<&Operand> {
    s.ins
        .get(i)
        .ok_or_else(|| Error::Kernel(format!("a step without its input {i}")))
}

/// Emits one step.
pub(crate) fn step(lw: &mut Lower<'_>, s: &Step) -> Result<()> {
    let Some(&first_out) = s.outs.first() else {
        return Err(Error::Kernel("a step without outputs".into()));
    };
    let out = lw.val(first_out)?;
    let oshape = out.shape();
    let x = match s.ins.first() {
        Some(o) => lw.operand(o)?,
        None => return Err(Error::Kernel("a step without inputs".into())),
    };
    let xs = x.shape();
    match &s.kind {
        Kind::Conv {
            cfg, w, b, relu, ..
        } => {
            let (wv, cio) = conv_weights(lw, w, cfg.groups)?;
            let bv = match b {
                Some(b) => Some(lw.konst(b, DType::F32)?),
                None => None,
            };
            let (x4, y4) = if xs.len() == 3 {
                (
                    rs(&x, &[xs[0], xs[1], 1, xs[2]])?,
                    rs(&out, &[oshape[0], oshape[1], 1, oshape[2]])?,
                )
            } else {
                (x.clone(), out.clone())
            };
            conv_banded(lw, &y4, &x4, (&wv, cio), bv.as_ref(), cfg)?;
            if *relu {
                act(lw, &out, &out, ActFn::Relu, 1.0, 0.0)?;
            }
        }
        Kind::Pool(cfg, ext) => pool::pool2d_ext(&mut lw.k, &out, &x, cfg, ext).map_err(kerr)?,
        Kind::Pool3d(cfg) => pool3d::pool3d(&mut lw.k, &out, &x, cfg).map_err(kerr)?,
        Kind::GlobalPool(op) => {
            pool::global_pool(&mut lw.k, &out, &x, *op == ReduceOp::Max).map_err(kerr)?
        }
        Kind::ConvTranspose { cfg, w, b } => {
            let wv = lw.konst(w, lw.dt)?;
            let bv = match b {
                Some(b) => Some(lw.konst(b, DType::F32)?),
                None => None,
            };
            conv_transpose::conv_transpose2d(&mut lw.k, &out, &x, &wv, bv.as_ref(), cfg)
                .map_err(kerr)?;
        }
        Kind::ConvTranspose3d { cfg, w, b } => {
            let wv = lw.konst(w, lw.dt)?;
            let bv = match b {
                Some(b) => Some(lw.konst(b, DType::F32)?),
                None => None,
            };
            conv_transpose3d::conv_transpose3d(&mut lw.k, &out, &x, &wv, bv.as_ref(), cfg)
                .map_err(kerr)?;
        }
        Kind::Lrn(opts) => lrn::lrn(&mut lw.k, &out, &x, opts).map_err(kerr)?,
        Kind::Where => {
            let a = lw.operand(inp(s, 1)?)?;
            let b = lw.operand(inp(s, 2)?)?;
            pointwise::where_(&mut lw.k, &out, &x, &a, &b).map_err(kerr)?;
        }
        Kind::MatMul { a_t, bias, act: f } => {
            let b = lw.operand(inp(s, 1)?)?;
            let bv = match bias {
                Some(bias) => Some(lw.operand(bias)?),
                None => None,
            };
            mm(lw, &out, &x, &b, *a_t, bv.as_ref(), *f)?;
        }
        Kind::Binary(op) => {
            variadic(lw, s, &out, &x, *op)?;
        }
        Kind::Mean => {
            // The sum left to right, then one division by the count.
            if variadic(lw, s, &out, &x, AluOp::Add)? {
                let n = lw.scalar(s.ins.len() as f32)?;
                bin(lw, &out, &out, &n, AluOp::Divide)?;
            }
        }
        Kind::Act { f, scale, bias } => act(lw, &out, &x, *f, *scale, *bias)?,
        Kind::PRelu => {
            let slope = lw.operand(inp(s, 1)?)?;
            let zero = lw.scalar(0.0)?;
            let t = lw.temp(0, &oshape)?;
            bin(lw, &t, &x, &zero, AluOp::Min)?;
            bin(lw, &t, &t, &slope, AluOp::Mul)?;
            act(lw, &out, &x, ActFn::Relu, 1.0, 0.0)?;
            bin(lw, &out, &out, &t, AluOp::Add)?;
        }
        Kind::Elu { alpha, gamma } => {
            let zero = lw.scalar(0.0)?;
            let t = lw.temp(0, &oshape)?;
            bin(lw, &t, &x, &zero, AluOp::Min)?;
            act(lw, &t, &t, ActFn::Exp, 1.0, 0.0)?;
            let ga = gamma * alpha;
            act(lw, &t, &t, ActFn::Identity, ga, -ga)?;
            act(lw, &out, &x, ActFn::Relu, 1.0, 0.0)?;
            if *gamma != 1.0 {
                act(lw, &out, &out, ActFn::Identity, *gamma, 0.0)?;
            }
            bin(lw, &out, &out, &t, AluOp::Add)?;
        }
        Kind::Clip {
            lo,
            hi,
            scale,
            bias,
        } => {
            let mut src = x.clone();
            if *scale != 1.0 || *bias != 0.0 {
                act(lw, &out, &x, ActFn::Identity, *scale, *bias)?;
                src = out.clone();
            }
            if let Some(l) = lo {
                let c = lw.scalar(*l)?;
                bin(lw, &out, &src, &c, AluOp::Max)?;
                src = out.clone();
            }
            if let Some(h) = hi {
                let c = lw.scalar(*h)?;
                bin(lw, &out, &src, &c, AluOp::Min)?;
                src = out.clone();
            }
            if lo.is_none() && hi.is_none() && *scale == 1.0 && *bias == 0.0 {
                copy(lw, &out, &src)?;
            }
        }
        Kind::Sign => {
            let zero = lw.scalar(0.0)?;
            let t = lw.temp(0, &oshape)?;
            bin(lw, &out, &x, &zero, AluOp::Greater)?;
            bin(lw, &t, &x, &zero, AluOp::Less)?;
            bin(lw, &out, &out, &t, AluOp::Sub)?;
        }
        Kind::Shrink { lambd, bias } => {
            let (a, b) = (lw.temp(0, &oshape)?, lw.temp(1, &oshape)?);
            let hi = lw.scalar(*lambd)?;
            let lo = lw.scalar(-*lambd)?;
            bin(lw, &a, &x, &hi, AluOp::Greater)?;
            act(lw, &b, &x, ActFn::Identity, 1.0, -*bias)?;
            bin(lw, &a, &a, &b, AluOp::Mul)?;
            bin(lw, &b, &x, &lo, AluOp::Less)?;
            act(lw, &out, &x, ActFn::Identity, 1.0, *bias)?;
            bin(lw, &out, &out, &b, AluOp::Mul)?;
            bin(lw, &out, &out, &a, AluOp::Add)?;
        }
        Kind::Softmax { log, axis, cols } => {
            if *axis == usize::MAX {
                let rows = x.elems() / cols.max(&1);
                let xv = rs(&x, &[rows, *cols])?;
                let ov = rs(&out, &[rows, *cols])?;
                softmax::softmax_axis(&mut lw.k, &ov, &xv, 1, *log).map_err(kerr)?;
            } else {
                softmax::softmax_axis(&mut lw.k, &out, &x, *axis, *log).map_err(kerr)?;
            }
        }
        Kind::LayerNorm { eps, cols } => {
            let rows = x.elems() / cols.max(&1);
            let xv = rs(&x, &[rows, *cols])?;
            let ov = rs(&out, &[rows, *cols])?;
            let g = match s.ins.get(1) {
                Some(o) => Some(lw.operand(o)?),
                None => None,
            };
            let b = match s.ins.get(2) {
                Some(o) => Some(lw.operand(o)?),
                None => None,
            };
            let stat = |lw: &Lower<'_>, i: usize| -> Result<Option<View>> {
                match s.outs.get(i) {
                    Some(&o) => Ok(Some(rs(&lw.val(o)?, &[rows])?)),
                    None => Ok(None),
                }
            };
            let (mean, inv_std) = (stat(lw, 1)?, stat(lw, 2)?);
            norm::layernorm_stats(
                &mut lw.k,
                &ov,
                &xv,
                g.as_ref(),
                b.as_ref(),
                *eps,
                mean.as_ref(),
                inv_std.as_ref(),
            )
            .map_err(kerr)?;
        }
        Kind::InstanceNorm { eps } => {
            let (n, c) = (xs[0], xs[1]);
            let hw: usize = xs[2..].iter().product();
            let xv = rs(&x, &[n * c, hw])?;
            let ov = rs(&out, &[n * c, hw])?;
            norm::layernorm(&mut lw.k, &ov, &xv, None, None, *eps).map_err(kerr)?;
            let o3 = rs(&out, &[n, c, hw])?;
            let sc = lw.operand(inp(s, 1)?)?;
            let bi = lw.operand(inp(s, 2)?)?;
            let (sc, bi) = (rs(&sc, &[c, 1])?, rs(&bi, &[c, 1])?);
            bin(lw, &o3, &o3, &sc, AluOp::Mul)?;
            bin(lw, &o3, &o3, &bi, AluOp::Add)?;
        }
        Kind::BatchNorm { scale, shift } => {
            let (n, c) = (xs[0], xs[1]);
            let rest: usize = xs[2..].iter().product();
            let x3 = rs(&x, &[n, c, rest])?;
            let o3 = rs(&out, &[n, c, rest])?;
            let sc = lw.konst(scale, lw.dt)?;
            let sh = lw.konst(shift, lw.dt)?;
            let (sc, sh) = (rs(&sc, &[c, 1])?, rs(&sh, &[c, 1])?);
            bin(lw, &o3, &x3, &sc, AluOp::Mul)?;
            bin(lw, &o3, &o3, &sh, AluOp::Add)?;
        }
        Kind::Reduce { op, axes, keepdims } => {
            reduce_axes(&mut lw.k, &out, &x, axes, *op, *keepdims).map_err(kerr)?;
        }
        Kind::Transpose(perm) => {
            data::permute(&mut lw.k, &out, &x, perm).map_err(kerr)?;
        }
        Kind::Slice(sl) => {
            let mut v = x.clone();
            for (d, &(start, st, len)) in sl.iter().enumerate() {
                if (start, st, len) != (0, 1, xs[d]) {
                    let end = if len == 0 {
                        start
                    } else {
                        start + (len - 1) * st + 1
                    };
                    v = v.slice_step(d, start..end, st).map_err(kerr)?;
                }
            }
            copy(lw, &out, &v)?;
        }
        Kind::Round(to) => {
            let to = crate::lower_ctx::round_dtype(*to);
            if to == DType::F16 || (to == DType::Bf16 && lw.dt != DType::Bf16) {
                let n = xs.iter().product::<usize>().max(1);
                let name = format!("round{}", lw.n_consts);
                lw.n_consts += 1;
                let t = lw.k.scratch(&name, to, &[n]).map_err(kerr)?;
                let narrow = rs(t.view(), &xs)?;
                copy(lw, &narrow, &x)?;
                copy(lw, &out, &narrow)?;
            } else {
                copy(lw, &out, &x)?;
            }
        }
        Kind::Expand => {
            let src = expand(&x, &oshape)?;
            copy(lw, &out, &src)?;
        }
        Kind::Tile(reps) => {
            let mut ins = Vec::new();
            let mut outs = Vec::new();
            for (&d, &r) in xs.iter().zip(reps) {
                ins.extend([1, d]);
                outs.extend([r, d]);
            }
            let mut src = rs(&x, &ins)?;
            for (d, &r) in reps.iter().enumerate() {
                if r > 1 {
                    src = src.broadcast(2 * d, r).map_err(kerr)?;
                }
            }
            copy(lw, &rs(&out, &outs)?, &src)?;
        }
        Kind::Concat(axis) => {
            let mut off = 0;
            for o in &s.ins {
                let v = lw.operand(o)?;
                let n = v.shape()[*axis];
                if n > 0 {
                    let dst = out.slice(*axis, off..off + n).map_err(kerr)?;
                    copy(lw, &dst, &v)?;
                }
                off += n;
            }
        }
        Kind::Split { axis, offsets } => {
            for (i, &o) in s.outs.iter().enumerate() {
                // Outputs with no elements have no buffer.
                if lw.an.values[o].shape.contains(&0) {
                    continue;
                }
                let dst = lw.val(o)?;
                let n = dst.shape()[*axis];
                if n > 0 {
                    let src = x.slice(*axis, offsets[i]..offsets[i] + n).map_err(kerr)?;
                    copy(lw, &dst, &src)?;
                }
            }
        }
        Kind::Gather { axis, idx } => {
            let mut os = xs[..*axis].to_vec();
            os.push(idx.len());
            os.extend_from_slice(&xs[axis + 1..]);
            let ov = rs(&out, &os)?;
            // Runs of consecutive indices copy as one slice.
            let mut j = 0;
            while j < idx.len() {
                let mut e = j + 1;
                while e < idx.len() && idx[e] == idx[e - 1] + 1 {
                    e += 1;
                }
                let dst = ov.slice(*axis, j..e).map_err(kerr)?;
                let src = x.slice(*axis, idx[j]..idx[j] + (e - j)).map_err(kerr)?;
                copy(lw, &dst, &src)?;
                j = e;
            }
        }
        Kind::SliceSigned(spec) => data::slice(&mut lw.k, &out, &x, spec).map_err(kerr)?,
        Kind::PadMode { pads, mode } => {
            data::pad(&mut lw.k, &out, &x, pads, *mode).map_err(kerr)?;
        }
        Kind::Pad { pads, value } => {
            let c = lw.scalar(*value)?;
            let fill = expand(&c, &oshape)?;
            copy(lw, &out, &fill)?;
            let mut dst = out.clone();
            for (d, &(b, _)) in pads.iter().enumerate() {
                dst = dst.slice(d, b..b + xs[d]).map_err(kerr)?;
            }
            if x.elems() > 0 {
                copy(lw, &dst, &x)?;
            }
        }
    }
    Ok(())
}

/// Bytes per partition of one padded input plane above which a convolution runs in bands of
/// output rows (the library keeps a whole padded plane per channel chunk in SBUF).
const BAND_BYTES: usize = 64 << 10;

/// The convolution weights `w [O, C/groups, KH, KW]` as a kernel constant: laid out
/// input-channel major (`[C, KH, KW, O/groups]`, transposed here on the host, as a compiler
/// stores them ahead of time, so the program loads each stationary tile with one DMA instead
/// of transposing every tap on TensorE) when the convolution runs on TensorE
/// (`C/groups ≥ 2`); as they are for a depthwise one. The flag says which.
fn conv_weights(lw: &mut Lower<'_>, w: &Arc<HostTensor>, groups: usize) -> Result<(View, bool)> {
    let (o, cig, kh, kw) = match w.shape[..] {
        [o, c, kh, kw] => (o, c, kh, kw),
        _ => return Ok((lw.konst(w, lw.dt)?, false)),
    };
    let crate::tensor::Data::F(v) = &w.data else {
        return Ok((lw.konst(w, lw.dt)?, false));
    };
    let taps = kh * kw;
    if cig < 2 || groups == 0 || o % groups != 0 || v.len() != o * cig * taps {
        return Ok((lw.konst(w, lw.dt)?, false));
    }
    let cog = o / groups;
    let mut t = vec![0f64; v.len()];
    for (i, &x) in v.iter().enumerate() {
        // i = ((g·cog + oc)·cig + ci)·taps + tap
        let (tap, rest) = (i % taps, i / taps);
        let (ci, oo) = (rest % cig, rest / cig);
        let (g, oc) = (oo / cog, oo % cog);
        t[((g * cig + ci) * taps + tap) * cog + oc] = x;
    }
    let ht = Arc::new(HostTensor::floats(
        w.elem,
        vec![cig * groups, kh, kw, cog],
        t,
    ));
    let view = lw.konst(&ht, lw.dt)?;
    // Kept alive: the constant cache is keyed by address.
    lw.keep.push(ht);
    Ok((view, true))
}

/// `conv2d` (or `conv2d_cio` when `w.1`: weights `[C, KH, KW, O/groups]`), in bands of output
/// rows when the padded input plane is large: each band reads the input rows it needs (a
/// slice of `x`) with the padding that falls inside it.
fn conv_banded(
    lw: &mut Lower<'_>,
    y: &View,
    x: &View,
    (w, cio): (&View, bool),
    b: Option<&View>,
    cfg: &conv::Conv2dConfig,
) -> Result<()> {
    let (xs, ys, ws) = (x.shape(), y.shape(), w.shape());
    let (h, wd, oh) = (xs[2], xs[3], ys[2]);
    let [pt, pl, _, pr] = cfg.pads;
    let (s, d) = (cfg.stride.0, cfg.dilation.0);
    let ek = (ws[if cio { 1 } else { 2 }].max(1) - 1) * d + 1;
    let conv = if cio { conv::conv2d_cio } else { conv::conv2d };
    let row = (wd + pl + pr) * x.dtype().size();
    let rows_in = |r: usize| (r.max(1) - 1) * s + ek;
    if rows_in(oh) * row <= BAND_BYTES || oh <= 1 {
        return conv(&mut lw.k, y, x, w, b, cfg).map_err(kerr);
    }
    let mut band = oh;
    while band > 1 && rows_in(band) * row > BAND_BYTES {
        band = band.div_ceil(2);
    }
    let mut r0 = 0;
    while r0 < oh {
        let r1 = (r0 + band).min(oh);
        let a = (r0 * s) as i64 - pt as i64;
        let e = ((r1 - 1) * s + ek) as i64 - pt as i64;
        let (lo, hi) = (a.max(0) as usize, (e.min(h as i64)).max(0) as usize);
        let top = (-a).max(0) as usize;
        let bottom = (e - h as i64).max(0) as usize;
        let mut c = *cfg;
        c.pads = [top, pl, bottom, pr];
        let xb = x.slice(2, lo..hi.max(lo)).map_err(kerr)?;
        let yb = y.slice(2, r0..r1).map_err(kerr)?;
        conv(&mut lw.k, &yb, &xb, w, b, &c).map_err(kerr)?;
        r0 = r1;
    }
    Ok(())
}

/// `x` broadcast (NumPy rule) to `shape`.
fn expand(x: &View, shape: &[usize]) -> Result<View> {
    let xs = x.shape();
    let mut full = vec![1; shape.len().saturating_sub(xs.len())];
    full.extend_from_slice(&xs);
    let mut v = x.reshape(&full).map_err(kerr)?;
    for (d, (&have, &want)) in full.iter().zip(shape).enumerate() {
        if have == 1 && want != 1 {
            v = v.broadcast(d, want).map_err(kerr)?;
        }
    }
    Ok(v)
}

/// `out = x op ins[1] op ins[2] …`, left to right; a variadic op of one input (Sum, Max,
/// Min, Mean) is that input, copied. Whether there was more than one input.
fn variadic(lw: &mut Lower<'_>, s: &Step, out: &View, x: &View, op: AluOp) -> Result<bool> {
    let Some(first) = s.ins.get(1) else {
        copy(lw, out, x)?;
        return Ok(false);
    };
    let b = lw.operand(first)?;
    bin(lw, out, x, &b, op)?;
    for o in s.ins.iter().skip(2) {
        let c = lw.operand(o)?;
        bin(lw, out, out, &c, op)?;
    }
    Ok(true)
}

/// `out = act(a · b + bias)`, NumPy matmul semantics (batched, broadcasting; `a_t`: `a`
/// given as `[K, M]`, 2-D only; `bias` broadcasting to `out`). A bias of one value per
/// column and the activation go into the matmul's epilogue when the product is one matmul
/// (the batch dimensions of `a` fold into its rows); otherwise they are passes over `out`.
fn mm(
    lw: &mut Lower<'_>,
    out: &View,
    a: &View,
    b: &View,
    a_t: bool,
    bias: Option<&View>,
    f: Option<ActFn>,
) -> Result<()> {
    let nn = out.shape().last().copied().unwrap_or(1);
    let row_bias = match bias {
        Some(bv)
            if bv.shape().iter().product::<usize>() == nn && bv.shape().last() == Some(&nn) =>
        {
            Some(rs(bv, &[nn])?)
        }
        _ => None,
    };
    // No epilogue when the bias is not one value per column: then both are passes.
    let epi = (bias.is_none() || row_bias.is_some()).then_some(Epilogue {
        bias: row_bias.as_ref(),
        act: f,
    });
    if mm_with(lw, out, a, b, a_t, epi.as_ref())? {
        return Ok(());
    }
    if let Some(bv) = bias {
        bin(lw, out, out, bv, AluOp::Add)?;
    }
    if let Some(f) = f {
        act(lw, out, out, f, 1.0, 0.0)?;
    }
    Ok(())
}

/// One matmul, with the epilogue when there is one: `Ok(true)` when `epi` was applied.
fn one(
    lw: &mut Lower<'_>,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    epi: Option<&Epilogue<'_>>,
) -> Result<bool> {
    match epi {
        Some(e) => matmul_fused(&mut lw.k, out, a, b, opts, e).map_err(kerr)?,
        None => matmul(&mut lw.k, out, a, b, opts).map_err(kerr)?,
    }
    Ok(epi.is_some())
}

/// `out = a · b`, with `epi` applied when the product is one matmul: whether it was (when
/// not, the caller applies it).
fn mm_with(
    lw: &mut Lower<'_>,
    out: &View,
    a: &View,
    b: &View,
    a_t: bool,
    epi: Option<&Epilogue<'_>>,
) -> Result<bool> {
    let opts = MatmulOpts {
        a_transposed: a_t,
        ..MatmulOpts::default()
    };
    let (asz, bsz) = (a.shape(), b.shape());
    let a2 = if asz.len() == 1 {
        vec![1, asz[0]]
    } else {
        asz.clone()
    };
    let b2 = if bsz.len() == 1 {
        vec![bsz[0], 1]
    } else {
        bsz.clone()
    };
    let (m, kk) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let nn = b2[b2.len() - 1];
    let (m, kk) = if a_t { (kk, m) } else { (m, kk) };
    let ab = &a2[..a2.len() - 2];
    let bb = &b2[..b2.len() - 2];
    if bb.iter().product::<usize>() == 1 && !a_t {
        // One matmul: the batch dimensions of `a` fold into its rows.
        let rows = ab.iter().product::<usize>() * m;
        let av = rs(a, &[rows, kk])?;
        let bv = rs(b, &[kk, nn])?;
        let ov = rs(out, &[rows, nn])?;
        return one(lw, &ov, &av, &bv, &opts, epi);
    }
    if a_t {
        let ov = rs(out, &[m, nn])?;
        return one(lw, &ov, a, b, &opts, epi);
    }
    let batch = fold::broadcast(ab, bb)
        .ok_or_else(|| Error::Kernel("batch shapes do not broadcast".into()))?;
    let ia = fold::broadcast_index(ab, &batch);
    let ib = fold::broadcast_index(bb, &batch);
    let na = ab.iter().product::<usize>().max(1);
    let nb = bb.iter().product::<usize>().max(1);
    let nbatch = ia.len();
    let av = rs(a, &[na, m, kk])?;
    let bv = rs(b, &[nb, kk, nn])?;
    let ov = rs(out, &[nbatch, m, nn])?;
    for i in 0..nbatch {
        let o = ov.select(0, i).map_err(kerr)?;
        let x = av.select(0, ia[i]).map_err(kerr)?;
        let y = bv.select(0, ib[i]).map_err(kerr)?;
        matmul(&mut lw.k, &o, &x, &y, &opts).map_err(kerr)?;
    }
    Ok(false)
}
