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

use super::util::{P, as_rows, blocks, build_with, float, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{ActBias, Activation, DmaCopy, Reciprocal, TensorReduce, TensorScalarChain};
use crate::view::View;

/// Most elements per row.
pub const MAX_COLS: usize = 16384;

/// SBUF bytes per partition up to which the row tiles are double-buffered (single-buffered
/// above: long rows load, then compute).
pub const DOUBLE_BUFFER_BYTES: usize = 96 * 1024;

/// Emits `out = softmax(x)` along the last axis (`x` and `out` HBM views of one shape).
pub fn softmax(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    let f = "softmax";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    float(x, f, "x")?;
    float(out, f, "out")?;
    if out.shape() != x.shape() {
        return Err(err!(
            Invalid,
            "{f}: out {} must have x {}'s shape",
            out.describe(),
            x.describe()
        ));
    }
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
            let st = ss.next(k)?;
            let nmax = st.slice(0, 0..rn)?.slice(1, 0..1)?;
            let sum = st.slice(0, 0..rn)?.slice(1, 1..2)?;
            k.emit(TensorReduce {
                dst: &nmax,
                op: AluOp::Max,
                data: &xv,
                axis: &[1],
                negate: true,
                keepdims: true,
            })?;
            k.emit(Activation {
                bias: ActBias::Tile(&nmax),
                reduce: Some((AluOp::Add, &sum)),
                ..Activation::new(&xv, ActFn::Exp, &xv)
            })?;
            k.emit(Reciprocal {
                dst: &sum,
                data: &sum,
            })?;
            let ot = os.next(k)?;
            let ov = ot.slice(0, 0..rn)?;
            k.emit(TensorScalarChain::new(&ov, &xv, AluOp::Mul, &sum))?;
            k.emit(DmaCopy::new(&or.slice(0, r0..r0 + rn)?, &ov))?;
        }
        Ok(())
    })();
    release(k, [xs, os, ss], res)
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
