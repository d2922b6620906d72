//! Per-channel normalisations of NCHW-style tensors (`x [N, C, spatial…]`, any number of
//! spatial dimensions, contiguous) as ONNX computes them in inference, and ONNX
//! `LayerNormalization` over any trailing axes:
//!
//! * [`batchnorm`] — `BatchNormalization` (inference): `y = x·s[c] + b[c]` with
//!   `s = scale / √(var + eps)` and `b = bias − mean·s`, computed once per channel on chip;
//! * [`instancenorm`] — `InstanceNormalization`: each `(n, c)` plane normalised by its own
//!   mean and variance, then `·scale[c] + bias[c]`;
//! * [`layernorm_axis`] — `LayerNormalization` with `axis` (negative from the end): the
//!   trailing dimensions from `axis` flattened into one row,
//!   [`norm::layernorm`](super::norm::layernorm).
//!
//! # Tiling
//!
//! Channels on partitions (128 at a time), the spatial elements along the free dimension:
//! `batchnorm` loads `[channels, images, spatial]` blocks of up to [`FREE`] elements per
//! partition (all images of a channel block at once when the plane is small) and applies
//! the affine map in one instruction per block, ScalarE (`activation` identity with
//! per-partition scale and bias) and VectorE (`tensor_scalar` multiply-add) in turn.
//! A 2-D `x [N, C]` (no spatial dimensions) goes through the broadcasting tiler instead
//! (`s` and `b` staged in two `[C]` scratch tensors, rows of `x` on partitions).
//! `instancenorm` takes one image's channel block `[channels, plane]`: `bn_stats` over
//! chunks of 512, `bn_aggr`, then the affine map; planes over [`FREE`] elements are read
//! twice (statistics, then the map).
//!
//! # Numerics
//!
//! Per channel, fp32: `t = var + eps`, `√t` (correctly rounded), `s = scale / √t`,
//! `b = bias − mean·s` (the product rounded, then the difference); per element
//! `fl(fl(x·s) + b)`, one rounding to `out`'s dtype. This differs from ONNX's reference
//! `(x − mean)/√(var + eps)·scale + bias` by a few fp32 ULPs of the terms (bound in the
//! tests). `instancenorm`: mean and population variance from `bn_stats` / `bn_aggr` (the
//! ISA's documented order), then the same per-channel steps with the plane's statistics.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType};

use super::nary::{Block, MapSpec, map};
use super::util::{P, blocks, float, hbm, hbm_out, same_shape_io};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{ActBias, Activation, BnAggr, BnStats, ScalarTensorTensor, TensorScalarChain};
use crate::tiles::Tile;
use crate::view::View;

/// Elements per partition of one block.
pub const FREE: usize = 4096;

const BN_CHUNK: usize = 512;

/// `x` as `[N, C, L]` (L the product of the spatial dimensions, 1 when there are none).
fn ncl(f: &str, x: &View) -> Result<(usize, usize, usize, View), Error> {
    let s = x.shape();
    if s.len() < 2 {
        return Err(err!(Invalid, "{f}: x {} must be [N, C, …]", x.describe()));
    }
    let l: usize = s[2..].iter().product();
    let v = x
        .reshape(&[s[0], s[1], l])
        .map_err(|e| err!(Invalid, "{f}: x must be contiguous: {}", e.message()))?;
    Ok((s[0], s[1], l, v))
}

fn per_channel(k: &Kernel, f: &str, v: &View, role: &str, c: usize) -> Result<(), Error> {
    hbm(k, v, f, role)?;
    float(v, f, role)?;
    if v.shape() != [c] {
        return Err(err!(
            Invalid,
            "{f}: {role} {} must have shape [{c}]",
            v.describe()
        ));
    }
    Ok(())
}

/// Loads `v[c0 .. c0 + cn]` as an fp32 `[cn, 1]` tile.
fn col(k: &mut Kernel, name: &str, v: &View, c0: usize, cn: usize) -> Result<Tile, Error> {
    let t = k.sbuf_tile(name, DType::F32, &[cn, 1])?;
    k.dma_copy(&t, &v.slice(0, c0..c0 + cn)?.reshape(&[cn, 1])?)?;
    Ok(t)
}

/// For channels `c0..c0 + cn`: loads the four `[C]` parameters and computes their scale and
/// shift ([`affine`]) into two new `[cn, 1]` fp32 tiles.
fn block_affine(
    k: &mut Kernel,
    (scale, bias, mean, var): (&View, &View, &View, &View),
    eps: f32,
    c0: usize,
    cn: usize,
) -> Result<(Tile, Tile), Error> {
    let ld = |k: &mut Kernel, v: &View, nm: &str| col(k, nm, v, c0, cn);
    let (sc, bi) = (ld(k, scale, "bn_scale")?, ld(k, bias, "bn_bias")?);
    let (me, va) = (ld(k, mean, "bn_mean")?, ld(k, var, "bn_var")?);
    let s = k.sbuf_tile("bn_s", DType::F32, &[cn, 1])?;
    let b = k.sbuf_tile("bn_b", DType::F32, &[cn, 1])?;
    affine(k, (&s, &b), (&sc, &bi, &me, &va), eps)?;
    Ok((s, b))
}

/// `s = scale / √(var + eps)` into `s`, `b = bias − mean·s` into `b` (all `[cn, 1]` fp32).
fn affine(
    k: &mut Kernel,
    (s, b): (&View, &View),
    (scale, bias, mean, var): (&View, &View, &View, &View),
    eps: f32,
) -> Result<(), Error> {
    k.tensor_scalar(s, var, AluOp::Add, eps)?;
    k.emit(Activation::new(s, ActFn::Sqrt, s))?;
    k.tensor_tensor(s, scale, s, AluOp::Divide)?;
    k.emit(ScalarTensorTensor {
        dst: b,
        data: mean,
        op0: AluOp::Mul,
        operand0: s.into(),
        reverse0: false,
        op1: AluOp::Sub,
        operand1: bias,
        reverse1: true,
    })
}

/// `dst = src·s + b` (per-partition `s`, `b`), on ScalarE or (`vector`) VectorE.
fn apply(
    k: &mut Kernel,
    dst: &View,
    src: &View,
    s: &View,
    b: &View,
    vector: bool,
) -> Result<(), Error> {
    if vector {
        k.emit(TensorScalarChain::new(dst, src, AluOp::Mul, s).then(AluOp::Add, b))
    } else {
        k.emit(Activation {
            bias: ActBias::Tile(b),
            scale: s.into(),
            ..Activation::new(dst, ActFn::Identity, src)
        })
    }
}

/// Emits `y = BatchNormalization(x, scale, bias, mean, var)` in inference (see the module
/// documentation): `x` and `y` `[N, C, …]` float HBM views of one shape, the others `[C]`.
#[allow(clippy::too_many_arguments)]
pub fn batchnorm(
    k: &mut Kernel,
    y: &View,
    x: &View,
    scale: &View,
    bias: &View,
    mean: &View,
    var: &View,
    eps: f32,
) -> Result<(), Error> {
    let f = "batchnorm";
    same_shape_io(k, y, x, f, "y")?;
    let (n, c, l, x3) = ncl(f, x)?;
    let (_, _, _, y3) = ncl(f, y)?;
    for (v, role) in [
        (scale, "scale"),
        (bias, "bias"),
        (mean, "mean"),
        (var, "var"),
    ] {
        per_channel(k, f, v, role, c)?;
    }
    if x.elems() == 0 {
        return Ok(());
    }
    let params = (scale, bias, mean, var);
    if l == 1 {
        return batchnorm_rows(k, y, x, params, eps, c);
    }
    // Images per block: all of them when the planes are small.
    let nb = (FREE / l).clamp(1, n);
    let lc = l.min(FREE);
    k.scope(|k| {
        let mut xs = k.tile_pool("bn_x", Memory::Sbuf, x.dtype(), &[P.min(c), nb, lc], 3)?;
        let mut os = k.tile_pool("bn_y", Memory::Sbuf, y.dtype(), &[P.min(c), nb, lc], 3)?;
        let mut turn = 0usize;
        for (c0, cn) in blocks(c, P) {
            k.scope(|k| {
                let (s, b) = block_affine(k, params, eps, c0, cn)?;
                for (n0, nn) in blocks(n, nb) {
                    for (l0, ln) in blocks(l, lc) {
                        let sel = |v: &View| -> Result<View, Error> {
                            v.permute(&[1, 0, 2])?
                                .slice(0, c0..c0 + cn)?
                                .slice(1, n0..n0 + nn)?
                                .slice(2, l0..l0 + ln)
                        };
                        let cut = |t: Tile| -> Result<View, Error> {
                            t.slice(0, 0..cn)?.slice(1, 0..nn)?.slice(2, 0..ln)
                        };
                        let xt = cut(xs.next(k)?)?;
                        let ot = cut(os.next(k)?)?;
                        k.dma_copy(&xt, &sel(&x3)?)?;
                        apply(k, &ot, &xt, &s, &b, turn % 2 == 1)?;
                        turn += 1;
                        k.dma_copy(&sel(&y3)?, &ot)?;
                    }
                }
                Ok(())
            })?;
        }
        xs.free(k)?;
        os.free(k)
    })
}

/// `x [N, C]`: `s`, `b` staged in scratch `[C]` tensors, then the broadcasting tiler.
fn batchnorm_rows(
    k: &mut Kernel,
    y: &View,
    x: &View,
    (scale, bias, mean, var): (&View, &View, &View, &View),
    eps: f32,
    c: usize,
) -> Result<(), Error> {
    let tag = k.tensors.len();
    let ss = (*k.scratch(&format!("{}.bn_s{tag}", y.name()), DType::F32, &[c])?).clone();
    let bs = (*k.scratch(&format!("{}.bn_b{tag}", y.name()), DType::F32, &[c])?).clone();
    for (c0, cn) in blocks(c, P) {
        k.scope(|k| {
            let (s, b) = block_affine(k, (scale, bias, mean, var), eps, c0, cn)?;
            k.dma_copy(&ss.slice(0, c0..c0 + cn)?.reshape(&[cn, 1])?, &s)?;
            k.dma_copy(&bs.slice(0, c0..c0 + cn)?.reshape(&[cn, 1])?, &b)
        })?;
    }
    let x2 = x.reshape(&[x.shape()[0], c])?;
    let y2 = y.reshape(&[x.shape()[0], c])?;
    let spec = MapSpec {
        name: "batchnorm",
        load: vec![DType::F32; 3],
        out_tile: DType::F32,
        store_as: DType::F32,
    };
    map(k, &spec, &y2, &[&x2, &ss, &bs], &mut |k, blk: &Block| {
        k.tensor_tensor(&blk.tmp[0], &blk.ins[0], &blk.ins[1], AluOp::Mul)?;
        k.tensor_tensor(&blk.out, &blk.tmp[0], &blk.ins[2], AluOp::Add)
    })
}

/// Emits `y = InstanceNormalization(x, scale, bias)` (see the module documentation): `x`
/// and `y` `[N, C, spatial…]` float HBM views of one shape (at least one spatial
/// dimension), `scale` and `bias` `[C]`.
pub fn instancenorm(
    k: &mut Kernel,
    y: &View,
    x: &View,
    scale: &View,
    bias: &View,
    eps: f32,
) -> Result<(), Error> {
    let f = "instancenorm";
    hbm(k, x, f, "x")?;
    hbm_out(k, y, f, "y")?;
    float(x, f, "x")?;
    float(y, f, "y")?;
    if y.shape() != x.shape() || x.rank() < 3 {
        return Err(err!(
            Invalid,
            "{f}: x {} must be [N, C, spatial…] and y {} of its shape",
            x.describe(),
            y.describe()
        ));
    }
    let (n, c, l, x3) = ncl(f, x)?;
    let (_, _, _, y3) = ncl(f, y)?;
    per_channel(k, f, scale, "scale", c)?;
    per_channel(k, f, bias, "bias", c)?;
    if x.elems() == 0 {
        return Ok(());
    }
    let lc = l.min(FREE);
    let chunks = l.div_ceil(BN_CHUNK);
    let resident = l <= FREE;
    k.scope(|k| {
        let cp = P.min(c);
        let mut xs = k.tile_pool("in_x", Memory::Sbuf, DType::F32, &[cp, lc], 2)?;
        let mut os = k.tile_pool("in_y", Memory::Sbuf, y.dtype(), &[cp, lc], 2)?;
        let mut ss = k.tile_pool(
            "in_stats",
            Memory::Sbuf,
            DType::F32,
            &[cp, 6 * chunks + 4],
            2,
        )?;
        let mut turn = 0usize;
        for (c0, cn) in blocks(c, P) {
            k.scope(|k| {
                let sc = col(k, "in_scale", scale, c0, cn)?;
                let bi = col(k, "in_bias", bias, c0, cn)?;
                for img in 0..n {
                    let xi = x3.select(0, img)?.slice(0, c0..c0 + cn)?;
                    let yi = y3.select(0, img)?.slice(0, c0..c0 + cn)?;
                    let st = ss.next(k)?.slice(0, 0..cn)?;
                    let at = |i: usize| st.slice(1, i..i + 1);
                    let mut kept = None;
                    for (l0, ln) in blocks(l, lc) {
                        let xt = xs.next(k)?.slice(0, 0..cn)?.slice(1, 0..ln)?;
                        k.dma_copy(&xt, &xi.slice(1, l0..l0 + ln)?)?;
                        for (j0, jn) in blocks(ln, BN_CHUNK) {
                            let ci = (l0 + j0) / BN_CHUNK;
                            k.emit(BnStats {
                                dst: &st.slice(1, 6 * ci..6 * ci + 6)?,
                                data: &xt.slice(1, j0..j0 + jn)?,
                            })?;
                        }
                        kept = Some(xt);
                    }
                    let (mean, var) = (at(6 * chunks)?, at(6 * chunks + 1)?);
                    k.emit(BnAggr {
                        dst: &st.slice(1, 6 * chunks..6 * chunks + 2)?,
                        data: &st.slice(1, 0..6 * chunks)?,
                    })?;
                    let (s, b) = (at(6 * chunks + 2)?, at(6 * chunks + 3)?);
                    affine(k, (&s, &b), (&sc, &bi, &mean, &var), eps)?;
                    for (l0, ln) in blocks(l, lc) {
                        let xt = match (&kept, resident) {
                            (Some(t), true) => t.clone(),
                            _ => {
                                let t = xs.next(k)?.slice(0, 0..cn)?.slice(1, 0..ln)?;
                                k.dma_copy(&t, &xi.slice(1, l0..l0 + ln)?)?;
                                t
                            }
                        };
                        let ot = os.next(k)?.slice(0, 0..cn)?.slice(1, 0..ln)?;
                        apply(k, &ot, &xt, &s, &b, turn % 2 == 1)?;
                        turn += 1;
                        k.dma_copy(&yi.slice(1, l0..l0 + ln)?, &ot)?;
                    }
                }
                Ok(())
            })?;
        }
        xs.free(k)?;
        os.free(k)?;
        ss.free(k)
    })
}

/// Emits `out = LayerNormalization(x, gamma, beta)` over the dimensions `axis..` of `x`
/// (`axis` negative counts from the end, ONNX's default −1): `gamma` and `beta` absent or
/// of the normalised shape (or that shape flattened).
pub fn layernorm_axis(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axis: isize,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
) -> Result<(), Error> {
    layernorm_axis_stats(k, out, x, axis, gamma, beta, eps, None, None)
}

/// [`layernorm_axis`] with ONNX's optional `Mean` and `InvStdDev` outputs (`x`'s shape with
/// the normalised dimensions 1, or any shape of one element per row; see
/// [`norm::layernorm_stats`](super::norm::layernorm_stats)).
#[allow(clippy::too_many_arguments)]
pub fn layernorm_axis_stats(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axis: isize,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
    mean: Option<&View>,
    inv_std: Option<&View>,
) -> Result<(), Error> {
    let f = "layernorm";
    let r = x.rank() as isize;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(err!(
            Invalid,
            "{f}: axis {axis} is out of range for x {}",
            x.describe()
        ));
    }
    let s = x.shape();
    let rows: usize = s[..a as usize].iter().product();
    let cols: usize = s[a as usize..].iter().product();
    let flat = |v: &View, role: &str, shape: &[usize]| {
        v.reshape(shape)
            .map_err(|e| err!(Invalid, "{f}: {role}: {}", e.message()))
    };
    let x2 = flat(x, "x", &[rows, cols])?;
    let o2 = flat(out, "out", &[rows, cols])?;
    if out.shape() != s {
        return Err(err!(
            Invalid,
            "{f}: out {} must have x {}'s shape",
            out.describe(),
            x.describe()
        ));
    }
    let g = gamma.map(|v| flat(v, "gamma", &[cols])).transpose()?;
    let b = beta.map(|v| flat(v, "beta", &[cols])).transpose()?;
    super::norm::layernorm_stats(k, &o2, &x2, g.as_ref(), b.as_ref(), eps, mean, inv_std)
}
