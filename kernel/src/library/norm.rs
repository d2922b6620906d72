//! Layer normalisation and RMS normalisation over the last axis of an HBM tensor of any rank
//! ≥ 1 (its leading dimensions are rows), with optional `gamma` / `beta` of shape `[C]`, any
//! float dtypes.
//!
//! # layernorm, per block of 128 rows
//!
//! `y = (x − mean) · rsqrt(var + eps) · gamma + beta`:
//! 1. DMA `x` into an fp32 tile (converting);
//! 2. VectorE: `bn_stats` over chunks of 512 elements, `bn_aggr` → mean and (population)
//!    variance per row;
//! 3. ScalarE: `rstd = rsqrt(var·1 + eps)` (`activation` rsqrt with an immediate bias);
//! 4. VectorE: `(x − mean) · rstd` (`tensor_scalar` with two per-row operands), `· gamma`,
//!    `+ beta` (`tensor_tensor` with `gamma` and `beta` loaded once, broadcast over the
//!    partitions); the last step writes `out`'s dtype;
//! 5. DMA to `out`.
//!
//! # rmsnorm, per block of 128 rows
//!
//! `y = x · rsqrt(mean(x²) + eps) · gamma`:
//! 1. DMA `x` into an fp32 tile;
//! 2. ScalarE: `x²` with the row sums `ss` accumulated (`activation_reduce` square, add);
//! 3. ScalarE: `rstd = rsqrt(ss·fl(1/C) + eps)` (`activation` rsqrt, scale and bias);
//! 4. VectorE: `(x · rstd) · gamma` in one `scalar_tensor_tensor` (or `x · rstd`);
//! 5. DMA to `out`.
//!
//! # Numerics
//!
//! Every step is one fp32 instruction with the ISA's documented order: `bn_stats` sums from
//! +0 in order (even and odd elements of each 512-chunk separately, two-pass variance),
//! `bn_aggr` folds the chunks with Chan's update, each arithmetic step rounds once, `rsqrt`
//! is within 1 ULP. So the results are bit-reproducible, and within a few ULPs of `C` times
//! fp32's unit roundoff (relative to `|gamma|·(|x̂| + 1) + |beta|`) of the exact values for
//! data whose mean is not much larger than its standard deviation.
//!
//! # Limits
//!
//! At most [`MAX_COLS`] elements per row.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, Program};

use super::util::{P, as_rows, blocks, build_with, float, hbm, hbm_out, release, same_shape_io};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{
    ActBias, Activation, BnAggr, BnStats, DmaCopy, ScalarTensorTensor, TensorScalarChain,
    TensorTensor,
};
use crate::tiles::Tile;
use crate::view::View;

/// Most elements per row.
pub const MAX_COLS: usize = 8192;

/// SBUF bytes per partition up to which the row tiles are double-buffered (single-buffered
/// above).
pub const DOUBLE_BUFFER_BYTES: usize = 96 * 1024;

/// `bn_stats`' largest input per partition.
const BN_CHUNK: usize = 512;

/// Which normalisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Layer,
    Rms,
}

/// Emits `out = layernorm(x) · gamma + beta` over the last axis (see the module
/// documentation); `gamma` and `beta` are `[C]` HBM views or absent (1 and 0).
pub fn layernorm(
    k: &mut Kernel,
    out: &View,
    x: &View,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
) -> Result<(), Error> {
    norm(k, Kind::Layer, out, x, gamma, beta, eps, [None, None])
}

/// [`layernorm`] that also stores each row's mean and `rsqrt(var + eps)` (ONNX
/// `LayerNormalization`'s optional `Mean` and `InvStdDev` outputs): `stats` views of `rows`
/// elements each (any shape, contiguous; any float dtype), written from the fp32 values the
/// normalisation uses.
#[allow(clippy::too_many_arguments)]
pub fn layernorm_stats(
    k: &mut Kernel,
    out: &View,
    x: &View,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
    mean: Option<&View>,
    inv_std: Option<&View>,
) -> Result<(), Error> {
    norm(k, Kind::Layer, out, x, gamma, beta, eps, [mean, inv_std])
}

/// Emits `out = x · rsqrt(mean(x²) + eps) · gamma` over the last axis (see the module
/// documentation); `gamma` a `[C]` HBM view or absent (1).
pub fn rmsnorm(
    k: &mut Kernel,
    out: &View,
    x: &View,
    gamma: Option<&View>,
    eps: f32,
) -> Result<(), Error> {
    norm(k, Kind::Rms, out, x, gamma, None, eps, [None, None])
}

#[allow(clippy::too_many_arguments)]
fn norm(
    k: &mut Kernel,
    kind: Kind,
    out: &View,
    x: &View,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
    stats: [Option<&View>; 2],
) -> Result<(), Error> {
    let f = match kind {
        Kind::Layer => "layernorm",
        Kind::Rms => "rmsnorm",
    };
    same_shape_io(k, out, x, f, "out")?;
    let (xr, or) = (as_rows(x, f, "x")?, as_rows(out, f, "out")?);
    let (r, c) = (xr.shape()[0], xr.shape()[1]);
    let mut stat_rows: [Option<View>; 2] = [None, None];
    for (i, (v, role)) in stats.iter().zip(["mean", "inv_std"]).enumerate() {
        if let Some(v) = v {
            hbm_out(k, v, f, role)?;
            float(v, f, role)?;
            let rows = v.reshape(&[r, 1]).map_err(|e| {
                err!(
                    Invalid,
                    "{f}: {role} {} must hold one element per row ({r}): {}",
                    v.describe(),
                    e.message()
                )
            })?;
            stat_rows[i] = Some(rows);
        }
    }
    for (v, role) in [(gamma, "gamma"), (beta, "beta")] {
        if let Some(v) = v {
            hbm(k, v, f, role)?;
            float(v, f, role)?;
            if v.shape() != [c] {
                return Err(err!(
                    Invalid,
                    "{f}: {role} {} must have shape [{c}] (x's last dimension)",
                    v.describe()
                ));
            }
        }
    }
    if c > MAX_COLS {
        return Err(err!(
            Invalid,
            "{f}: rows of {c} elements; at most {MAX_COLS} (x {})",
            x.describe()
        ));
    }
    if r == 0 || c == 0 {
        return Ok(());
    }
    k.scope(|k| {
        let rp = P.min(r);
        // gamma and beta, broadcast over the partitions, fp32.
        let load = |k: &mut Kernel, v: Option<&View>, name: &str| -> Result<Option<Tile>, Error> {
            let Some(v) = v else { return Ok(None) };
            let t = k.sbuf_tile(name, DType::F32, &[rp, c])?;
            k.emit(DmaCopy::new(&t, &v.reshape(&[1, c])?.broadcast(0, rp)?))?;
            Ok(Some(t))
        };
        let g = load(k, gamma, "norm_gamma")?;
        let b = load(k, beta, "norm_beta")?;
        let chunks = c.div_ceil(BN_CHUNK);
        let per_buf = c * (4 + out.dtype().size());
        let fixed = 4 * c * (usize::from(g.is_some()) + usize::from(b.is_some()));
        let bufs = if fixed + 2 * per_buf <= DOUBLE_BUFFER_BYTES {
            2
        } else {
            1
        };
        let mut xs = k.tile_pool("norm_x", Memory::Sbuf, DType::F32, &[rp, c], bufs)?;
        let mut os = match k.tile_pool("norm_out", Memory::Sbuf, out.dtype(), &[rp, c], bufs) {
            Ok(p) => p,
            Err(e) => return release(k, [xs], Err(e)),
        };
        let mut ss = match k.tile_pool(
            "norm_stats",
            Memory::Sbuf,
            DType::F32,
            &[rp, 6 * chunks + 3],
            2,
        ) {
            Ok(p) => p,
            Err(e) => return release(k, [xs, os], Err(e)),
        };
        let res = (|| -> Result<(), Error> {
            for (r0, rn) in blocks(r, P) {
                let xt = xs.next(k)?;
                let xv = xt.slice(0, 0..rn)?;
                k.emit(DmaCopy::new(&xv, &xr.slice(0, r0..r0 + rn)?))?;
                let st = ss.next(k)?;
                let col = |i: usize| st.slice(0, 0..rn)?.slice(1, i..i + 1);
                let rstd = col(6 * chunks + 2)?;
                let ot = os.next(k)?;
                let ov = ot.slice(0, 0..rn)?;
                let rows = |t: &Option<Tile>| -> Result<Option<View>, Error> {
                    t.as_ref().map(|t| t.slice(0, 0..rn)).transpose()
                };
                let (gv, bv) = (rows(&g)?, rows(&b)?);
                match kind {
                    Kind::Layer => {
                        for (i, (c0, cn)) in blocks(c, BN_CHUNK).enumerate() {
                            let dst = st.slice(0, 0..rn)?.slice(1, 6 * i..6 * i + 6)?;
                            k.emit(BnStats {
                                dst: &dst,
                                data: &xv.slice(1, c0..c0 + cn)?,
                            })?;
                        }
                        let mv = st.slice(0, 0..rn)?.slice(1, 6 * chunks..6 * chunks + 2)?;
                        k.emit(BnAggr {
                            dst: &mv,
                            data: &st.slice(0, 0..rn)?.slice(1, 0..6 * chunks)?,
                        })?;
                        let (mean, var) = (col(6 * chunks)?, col(6 * chunks + 1)?);
                        k.emit(Activation {
                            bias: ActBias::Scalar(eps),
                            ..Activation::new(&rstd, ActFn::Rsqrt, &var)
                        })?;
                        for (dst, v) in stat_rows.iter().zip([&mean, &rstd]) {
                            if let Some(dst) = dst {
                                k.emit(DmaCopy::new(&dst.slice(0, r0..r0 + rn)?, v))?;
                            }
                        }
                        // The last step writes out's tile.
                        let last = |i: usize| if i == 0 { &ov } else { &xv };
                        let steps = usize::from(gv.is_some()) + usize::from(bv.is_some());
                        k.emit(
                            TensorScalarChain::new(last(steps), &xv, AluOp::Sub, &mean)
                                .then(AluOp::Mul, &rstd),
                        )?;
                        let mut left = steps;
                        for (t, op) in [(&gv, AluOp::Mul), (&bv, AluOp::Add)] {
                            if let Some(t) = t {
                                left -= 1;
                                k.emit(TensorTensor {
                                    dst: last(left),
                                    data1: &xv,
                                    data2: t,
                                    op,
                                    engine: None,
                                })?;
                            }
                        }
                    }
                    Kind::Rms => {
                        let sum = col(6 * chunks + 1)?;
                        k.emit(Activation {
                            reduce: Some((AluOp::Add, &sum)),
                            ..Activation::new(&ov, ActFn::Square, &xv)
                        })?;
                        k.emit(Activation {
                            bias: ActBias::Scalar(eps),
                            scale: (1.0 / c as f32).into(),
                            ..Activation::new(&rstd, ActFn::Rsqrt, &sum)
                        })?;
                        match &gv {
                            Some(gv) => k.emit(ScalarTensorTensor {
                                dst: &ov,
                                data: &xv,
                                op0: AluOp::Mul,
                                operand0: (&rstd).into(),
                                reverse0: false,
                                op1: AluOp::Mul,
                                operand1: gv,
                                reverse1: false,
                            })?,
                            None => k.emit(TensorScalarChain::new(&ov, &xv, AluOp::Mul, &rstd))?,
                        }
                    }
                }
                k.emit(DmaCopy::new(&or.slice(0, r0..r0 + rn)?, &ov))?;
            }
            Ok(())
        })();
        release(k, [xs, os, ss], res)
    })
}

/// A kernel `layernorm` with input `x` `[rows, cols]` of `dtype`, `gamma` and `beta` `[cols]`
/// fp32 (when `affine`), output `out` `[rows, cols]` of `out_dtype`.
pub fn build_layernorm(
    rows: usize,
    cols: usize,
    dtype: DType,
    out_dtype: DType,
    affine: bool,
    eps: f32,
) -> Result<Program, Error> {
    let (xs, cs) = ([rows, cols], [cols]);
    let mut ins: Vec<(&str, DType, &[usize])> = vec![("x", dtype, &xs)];
    if affine {
        ins.push(("gamma", DType::F32, &cs));
        ins.push(("beta", DType::F32, &cs));
    }
    build_with(
        "layernorm",
        &ins,
        ("out", out_dtype, &[rows, cols]),
        |k, o, ins| {
            layernorm(
                k,
                o,
                &ins[0],
                ins.get(1).map(|t| &**t),
                ins.get(2).map(|t| &**t),
                eps,
            )
        },
    )
}

/// A kernel `rmsnorm` with input `x` `[rows, cols]` of `dtype`, `gamma` `[cols]` fp32 (when
/// `affine`), output `out` `[rows, cols]` of `out_dtype`.
pub fn build_rmsnorm(
    rows: usize,
    cols: usize,
    dtype: DType,
    out_dtype: DType,
    affine: bool,
    eps: f32,
) -> Result<Program, Error> {
    let (xs, cs) = ([rows, cols], [cols]);
    let mut ins: Vec<(&str, DType, &[usize])> = vec![("x", dtype, &xs)];
    if affine {
        ins.push(("gamma", DType::F32, &cs));
    }
    build_with(
        "rmsnorm",
        &ins,
        ("out", out_dtype, &[rows, cols]),
        |k, o, ins| rmsnorm(k, o, &ins[0], ins.get(1).map(|t| &**t), eps),
    )
}
