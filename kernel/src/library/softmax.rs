//! Numerically stable softmax along the last axis: `out[r, :] = exp(x[r, :] − max_r) /
//! Σ exp(x[r, :] − max_r)`, for an HBM `x` of any rank ≥ 1 (its leading dimensions are
//! rows), any float dtypes in and out.
//!
//! # Per block of 128 rows
//!
//! 1. DMA `x` into an fp32 tile `[rows, C]` (converting when `x` is not fp32);
//! 2. VectorE: `−max` of each row (`tensor_reduce` maximum with `negate`);
//! 3. ScalarE: `e = exp(x + (−max))` in place, with the row sums accumulated by the same
//!    instruction (`activation_reduce` add);
//! 4. VectorE: `1/sum` (`reciprocal`), then `e · (1/sum)` into a tile of `out`'s dtype
//!    (`tensor_scalar` with the per-row operand);
//! 5. DMA to `out`.
//!
//! [`log_softmax`] (ONNX `LogSoftmax`) keeps `x`: step 3 writes `e` into the output tile
//! (only its fp32 row sums `s` are used), then ScalarE `ln s`, then VectorE
//! `(x + (−max)) − ln s` (two roundings) into the output tile.
//!
//! [`softmax_axis`] takes any axis (ONNX opset ≥ 13): the last one is the above; otherwise,
//! with `x` as `[A, L, B]` (`L` the axis), each `[L, B]` plane is loaded by transposing DMAs
//! into `[B-block of 128, L]` tiles, the same steps run along the free dimension, and the
//! result goes back through an SBUF-to-SBUF transposing DMA per 128 rows of `L` and a
//! contiguous store: two transposing passes of DMA over the data, no extra HBM traffic.
//! (Opset < 13's `axis` flattens the trailing dimensions into the row: the last-axis form on
//! a reshaped view.)
//!
//! Tiles come from pools of two, so block `i + 1` loads while block `i` computes (one when
//! two would exceed [`DOUBLE_BUFFER_BYTES`] per partition).
//!
//! # Numerics
//!
//! fp32 throughout: `m` = the row's maximum (maximumNumber: NaNs are skipped unless the row
//! is all NaN), `t = x − m` (one rounding; `x·1 + (−m)`), `e = exp(t)` (the ISA's exp: within
//! 1 ULP of the exact value), `s` = the fold of the `e`s from +0 left to right, `r = 1/s`
//! (correctly rounded), `y = e·r` (one rounding, then one to `out`'s dtype). A row of `−∞`s
//! (or with `+∞`) gives NaN, as `x − m` is then NaN.
//!
//! # Limits
//!
//! At most [`MAX_COLS`] elements per row (the row lives in one partition).

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, Program};

use super::util::{P, as_rows, blocks, build_with, float, hbm, hbm_out, release, same_shape_io};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{
    ActBias, Activation, DmaCopy, DmaTranspose, Reciprocal, TensorReduce, TensorScalarChain,
};
use crate::view::View;

/// Most elements per row.
pub const MAX_COLS: usize = 16384;

/// SBUF bytes per partition up to which the row tiles are double-buffered (single-buffered
/// above: long rows load, then compute).
pub const DOUBLE_BUFFER_BYTES: usize = 96 * 1024;

/// Emits `out = softmax(x)` along the last axis (`x` and `out` HBM views of one shape).
pub fn softmax(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    rows(k, out, x, false)
}

/// Emits `out = log_softmax(x)` along the last axis (ONNX `LogSoftmax`; see the module
/// documentation).
pub fn log_softmax(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    rows(k, out, x, true)
}

fn rows(k: &mut Kernel, out: &View, x: &View, log: bool) -> Result<(), Error> {
    let f = if log { "log_softmax" } else { "softmax" };
    same_shape_io(k, out, x, f, "out")?;
    let (xr, or) = (as_rows(x, f, "x")?, as_rows(out, f, "out")?);
    let (r, c) = (xr.shape()[0], xr.shape()[1]);
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
    let rp = P.min(r);
    let bufs = if 2 * c * (4 + out.dtype().size()) <= DOUBLE_BUFFER_BYTES {
        2
    } else {
        1
    };
    let mut xs = k.tile_pool("softmax_x", Memory::Sbuf, DType::F32, &[rp, c], bufs)?;
    let mut os = match k.tile_pool("softmax_out", Memory::Sbuf, out.dtype(), &[rp, c], bufs) {
        Ok(p) => p,
        Err(e) => return release(k, [xs], Err(e)),
    };
    let mut ss = match k.tile_pool("softmax_stats", Memory::Sbuf, DType::F32, &[rp, 2], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [xs, os], Err(e)),
    };
    let res = (|| -> Result<(), Error> {
        for (r0, rn) in blocks(r, P) {
            let xt = xs.next(k)?;
            let xv = xt.slice(0, 0..rn)?;
            k.emit(DmaCopy::new(&xv, &xr.slice(0, r0..r0 + rn)?))?;
            let st = ss.next(k)?.slice(0, 0..rn)?;
            let ot = os.next(k)?;
            let ov = ot.slice(0, 0..rn)?;
            core(k, &xv, &ov, &st, log)?;
            k.emit(DmaCopy::new(&or.slice(0, r0..r0 + rn)?, &ov))?;
        }
        Ok(())
    })();
    release(k, [xs, os, ss], res)
}

/// Emits `out = softmax(x)` (`log`: `log_softmax`) along `axis` (see the module
/// documentation): `x` and `out` contiguous float HBM views of one shape.
pub fn softmax_axis(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axis: usize,
    log: bool,
) -> Result<(), Error> {
    let f = if log { "log_softmax" } else { "softmax" };
    let s = x.shape();
    if axis >= s.len() || out.shape() != s {
        return Err(err!(
            Invalid,
            "{f}: axis {axis} must be a dimension of x {}, and out {} of its shape",
            x.describe(),
            out.describe()
        ));
    }
    let a: usize = s[..axis].iter().product();
    let l = s[axis];
    let b: usize = s[axis + 1..].iter().product();
    let flat = |v: &View, shape: &[usize]| {
        v.reshape(shape).map_err(|e| {
            err!(
                Invalid,
                "{f}: {} must be contiguous: {}",
                v.describe(),
                e.message()
            )
        })
    };
    if b == 1 {
        return rows(k, &flat(out, &[a, l])?, &flat(x, &[a, l])?, log);
    }
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    float(x, f, "x")?;
    float(out, f, "out")?;
    if l > MAX_COLS {
        return Err(err!(
            Invalid,
            "{f}: axis of {l} elements; at most {MAX_COLS} (x {})",
            x.describe()
        ));
    }
    let (x3, o3) = (flat(x, &[a, l, b])?, flat(out, &[a, l, b])?);
    if x.elems() == 0 {
        return Ok(());
    }
    let (bp, lp) = (P.min(b), P.min(l));
    k.scope(|k| {
        let mut ins = k.tile_pool("softmax_in", Memory::Sbuf, x.dtype(), &[bp, l], 2)?;
        let mut xs = k.tile_pool("softmax_x", Memory::Sbuf, DType::F32, &[bp, l], 2)?;
        let mut os = k.tile_pool("softmax_out", Memory::Sbuf, out.dtype(), &[bp, l], 2)?;
        let mut back = k.tile_pool("softmax_back", Memory::Sbuf, out.dtype(), &[lp, bp], 2)?;
        let mut ss = k.tile_pool("softmax_stats", Memory::Sbuf, DType::F32, &[bp, 2], 2)?;
        for ai in 0..a {
            let (xa, oa) = (x3.select(0, ai)?, o3.select(0, ai)?);
            for (b0, bn) in blocks(b, P) {
                let tin = ins.next(k)?.slice(0, 0..bn)?;
                k.emit(DmaTranspose::new(&tin, &xa.slice(1, b0..b0 + bn)?))?;
                let xv = if x.dtype() == DType::F32 {
                    tin
                } else {
                    let t = xs.next(k)?.slice(0, 0..bn)?;
                    k.tensor_copy(&t, &tin)?;
                    t
                };
                let st = ss.next(k)?.slice(0, 0..bn)?;
                let ov = os.next(k)?.slice(0, 0..bn)?;
                core(k, &xv, &ov, &st, log)?;
                for (l0, ln) in blocks(l, P) {
                    let bt = back.next(k)?.slice(0, 0..ln)?.slice(1, 0..bn)?;
                    k.emit(DmaTranspose::new(&bt, &ov.slice(1, l0..l0 + ln)?))?;
                    let dst = oa.slice(0, l0..l0 + ln)?.slice(1, b0..b0 + bn)?;
                    k.emit(DmaCopy::new(&dst, &bt))?;
                }
            }
        }
        for p in [ins, xs, os, back, ss] {
            p.free(k)?;
        }
        Ok(())
    })
}

/// Steps 2–4 on one block: `xv` fp32 `[rows, C]` (clobbered by softmax), `ov` the result
/// tile, `st` `[rows, 2]` fp32 statistics.
pub(crate) fn core(
    k: &mut Kernel,
    xv: &View,
    ov: &View,
    st: &View,
    log: bool,
) -> Result<(), Error> {
    let nmax = st.slice(1, 0..1)?;
    let sum = st.slice(1, 1..2)?;
    k.emit(TensorReduce {
        dst: &nmax,
        op: AluOp::Max,
        data: xv,
        axis: &[1],
        negate: true,
        keepdims: true,
    })?;
    // softmax: e in place of x; log-softmax: e in the output tile, x kept.
    let e = if log { ov } else { xv };
    k.emit(Activation {
        bias: ActBias::Tile(&nmax),
        reduce: Some((AluOp::Add, &sum)),
        ..Activation::new(e, ActFn::Exp, xv)
    })?;
    if log {
        k.emit(Activation::new(&sum, ActFn::Log, &sum))?;
        k.emit(TensorScalarChain::new(ov, xv, AluOp::Add, &nmax).then(AluOp::Sub, &sum))
    } else {
        k.emit(Reciprocal {
            dst: &sum,
            data: &sum,
        })?;
        k.emit(TensorScalarChain::new(ov, xv, AluOp::Mul, &sum))
    }
}

/// A kernel `softmax` with input `x` and output `out`, both `[rows, cols]`.
pub fn build(rows: usize, cols: usize, dtype: DType, out_dtype: DType) -> Result<Program, Error> {
    build_with(
        "softmax",
        &[("x", dtype, &[rows, cols])],
        ("out", out_dtype, &[rows, cols]),
        |k, o, ins| softmax(k, o, &ins[0]),
    )
}
