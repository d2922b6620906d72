//! Reductions along one axis of an HBM tensor: sum, maximum, minimum, mean.
//!
//! # Shapes and `keepdims`
//!
//! `x` has rank 1 to 4 (contiguous); `axis < rank`. With `keepdims` `out` has `x`'s shape
//! with `shape[axis] = 1` (NumPy's `keepdims=True`); without, `x`'s shape with `axis`
//! removed, and a rank-1 `x` reduces to shape `[1]` (a rank-0 tensor is stored as one
//! element). Both layouts hold the same elements in the same order.
//!
//! # Tiling
//!
//! `x` is viewed as `[A, L, B]` (`A` the product of the dimensions before `axis`, `L` the
//! reduced one, `B` those after) and `out` as `[A, B]`. Two layouts:
//!
//! * **Rows** (the default): rows of `A` on the partitions in blocks of 128; each DMA loads
//!   `[rows, l-chunk, b-chunk]` (`B`'s elements are contiguous in HBM; `b-chunk` up to
//!   [`CHUNK`]`/4`, `l-chunk` up to [`CHUNK`]`/b-chunk`), and VectorE's `tensor_reduce` folds
//!   the `l` axis of the permuted tile `[rows, b, l]`.
//! * **Transposed** (when `B > 1` and `min(B, 128) > 2·min(A, 128)`, e.g. reducing the
//!   first axis of a matrix, where rows of `A` would leave most partitions idle): for each
//!   row of `A`, columns of `B` on the partitions in blocks of 128; chunks of up to
//!   [`CHUNK`] elements of `L` are loaded by transposing DMAs (`dma_transpose`) into
//!   `[columns, l-chunk]` and reduced along the free axis.
//!
//! When `L` spans several chunks the chunk results are folded with `tensor_tensor`. Tiles
//! come from pools of two, so the next chunk loads while this one is reduced.
//!
//! # Numerics (bit-reproducible)
//!
//! fp32 accumulation (int32, wrapping, when `x` and `out` are int32): within a chunk the fold
//! runs left to right from the first element (`tensor_reduce`'s order); chunk results are
//! folded left to right; the mean is that sum divided by `L` (one correctly rounded division,
//! truncating for int32); one rounding to `out`'s dtype. Maximum and minimum are IEEE
//! maximumNumber / minimumNumber (NaNs are skipped unless all are NaN; −0 < +0).

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType, Program};

use super::util::{P, blocks, build_with, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{
    DmaCopy, DmaTranspose, Scalar, TensorCopy, TensorReduce, TensorScalarChain, TensorTensor,
};
use crate::pool::TilePool;
use crate::view::View;

/// Most elements per partition in one loaded chunk.
pub const CHUNK: usize = 8192;

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Σ.
    Sum,
    /// Maximum (maximumNumber).
    Max,
    /// Minimum (minimumNumber).
    Min,
    /// Σ / n.
    Mean,
}

impl ReduceOp {
    /// The ALU operation that folds.
    pub fn alu(self) -> AluOp {
        match self {
            ReduceOp::Sum | ReduceOp::Mean => AluOp::Add,
            ReduceOp::Max => AluOp::Max,
            ReduceOp::Min => AluOp::Min,
        }
    }
}

/// `x`'s shape reduced along `axis` (see the module documentation).
pub fn reduced_shape(shape: &[usize], axis: usize, keepdims: bool) -> Vec<usize> {
    let mut s = shape.to_vec();
    if keepdims {
        if let Some(d) = s.get_mut(axis) {
            *d = 1;
        }
    } else if axis < s.len() {
        s.remove(axis);
        if s.is_empty() {
            s.push(1);
        }
    }
    s
}

/// Emits `out = op(x, axis)` (see the module documentation).
pub fn reduce(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axis: usize,
    op: ReduceOp,
    keepdims: bool,
) -> Result<(), Error> {
    let f = "reduce";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    let shape = x.shape();
    if shape.is_empty() || shape.len() > 4 || axis >= shape.len() {
        return Err(err!(
            Invalid,
            "{f}: x {} must have rank 1 to 4 and axis {axis} must be one of its dimensions",
            x.describe()
        ));
    }
    let want = reduced_shape(&shape, axis, keepdims);
    if out.shape() != want {
        return Err(err!(
            Invalid,
            "{f}: out {} must have shape {want:?} (x {} reduced along axis {axis}, keepdims \
             {keepdims})",
            out.describe(),
            x.describe()
        ));
    }
    let a: usize = shape[..axis].iter().product();
    let l = shape[axis];
    let b: usize = shape[axis + 1..].iter().product();
    let x3 = x
        .reshape(&[a, l, b])
        .map_err(|e| err!(Invalid, "{f}: x must be contiguous: {}", e.message()))?;
    let o2 = out
        .reshape(&[a, b])
        .map_err(|e| err!(Invalid, "{f}: out must be contiguous: {}", e.message()))?;
    let acc_dt = if x.dtype() == DType::I32 && out.dtype() == DType::I32 {
        DType::I32
    } else {
        DType::F32
    };
    let g = Geometry {
        a,
        l,
        b,
        acc_dt,
        op,
    };
    if b > 1 && P.min(b) > 2 * P.min(a) {
        transposed(k, &o2, &x3, &g)
    } else {
        rows(k, &o2, &x3, &g)
    }
}

/// The reduction `[A, L, B] → [A, B]` and its accumulator type.
struct Geometry {
    a: usize,
    l: usize,
    b: usize,
    acc_dt: DType,
    op: ReduceOp,
}

/// Folds chunk `i` (`data` reduced along `axis`) into `acc` (through `part` after the first).
fn fold_chunk(
    k: &mut Kernel,
    g: &Geometry,
    i: usize,
    acc: &View,
    part: &View,
    data: &View,
    axis: &[usize],
) -> Result<(), Error> {
    let alu = g.op.alu();
    k.emit(TensorReduce {
        dst: if i == 0 { acc } else { part },
        op: alu,
        data,
        axis,
        negate: false,
        keepdims: false,
    })?;
    if i > 0 {
        k.emit(TensorTensor {
            dst: acc,
            data1: acc,
            data2: part,
            op: alu,
            engine: None,
        })?;
    }
    Ok(())
}

/// Writes `acc` (divided by L for a mean) in `dst`'s dtype to a tile and stores it at `dst`.
fn finish(
    k: &mut Kernel,
    g: &Geometry,
    os: &mut TilePool,
    acc: &View,
    dst: &View,
) -> Result<(), Error> {
    let ot = os.next(k)?;
    let ov = ot
        .slice(0, 0..acc.partitions())?
        .slice(1, 0..acc.free_elems())?;
    if g.op == ReduceOp::Mean {
        let n = if g.acc_dt == DType::I32 {
            Scalar::I32(i32::try_from(g.l).unwrap_or(i32::MAX))
        } else {
            Scalar::F32(g.l as f32)
        };
        k.emit(TensorScalarChain::new(&ov, acc, AluOp::Divide, n))?;
    } else {
        k.emit(TensorCopy {
            dst: &ov,
            src: acc,
            engine: None,
        })?;
    }
    k.emit(DmaCopy::new(dst, &ov))
}

/// Rows of A on the partitions; tiles `[rows, l-chunk, b-chunk]` loaded by plain copies.
fn rows(k: &mut Kernel, o2: &View, x3: &View, g: &Geometry) -> Result<(), Error> {
    let (a, l, b) = (g.a, g.l, g.b);
    let bc = b.clamp(1, CHUNK / 4);
    let lc = l.min((CHUNK / bc).max(1));
    let rows = P.min(a);
    let mut xs = k.tile_pool("reduce_x", Memory::Sbuf, x3.dtype(), &[rows, lc, bc], 2)?;
    let mut accs = match k.tile_pool("reduce_acc", Memory::Sbuf, g.acc_dt, &[rows, 2, bc], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [xs], Err(e)),
    };
    let mut os = match k.tile_pool("reduce_out", Memory::Sbuf, o2.dtype(), &[rows, bc], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [xs, accs], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        for (a0, an) in blocks(a, P) {
            for (b0, bn) in blocks(b, bc) {
                let acc_t = accs.next(k)?;
                let slot = |i: usize| acc_t.slice(0, 0..an)?.select(1, i)?.slice(1, 0..bn);
                let (acc, part) = (slot(0)?, slot(1)?);
                for (i, (l0, ln)) in blocks(l, lc).enumerate() {
                    let xt = xs.next(k)?;
                    let xv = xt.slice(0, 0..an)?.slice(1, 0..ln)?.slice(2, 0..bn)?;
                    let src = x3.slice(0, a0..a0 + an)?.slice(1, l0..l0 + ln)?;
                    k.emit(DmaCopy::new(&xv, &src.slice(2, b0..b0 + bn)?))?;
                    fold_chunk(k, g, i, &acc, &part, &xv.permute(&[0, 2, 1])?, &[2])?;
                }
                let dst = o2.slice(0, a0..a0 + an)?.slice(1, b0..b0 + bn)?;
                finish(k, g, &mut os, &acc, &dst)?;
            }
        }
        Ok(())
    })();
    release(k, [xs, accs, os], r)
}

/// Columns of B on the partitions (when A would leave most of them idle): for each row of A
/// and 128 columns, chunks of L loaded by transposing DMAs into `[columns, l-chunk]`.
fn transposed(k: &mut Kernel, o2: &View, x3: &View, g: &Geometry) -> Result<(), Error> {
    let (l, b) = (g.l, g.b);
    let lc = l.min(CHUNK);
    let cols = P.min(b);
    let mut xs = k.tile_pool("reduce_x", Memory::Sbuf, x3.dtype(), &[cols, lc], 2)?;
    let mut accs = match k.tile_pool("reduce_acc", Memory::Sbuf, g.acc_dt, &[cols, 2], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [xs], Err(e)),
    };
    let mut os = match k.tile_pool("reduce_out", Memory::Sbuf, o2.dtype(), &[cols, 1], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [xs, accs], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        for a0 in 0..g.a {
            let (xa, oa) = (x3.select(0, a0)?, o2.select(0, a0)?);
            for (b0, bn) in blocks(b, P) {
                let acc_t = accs.next(k)?;
                let acc = acc_t.slice(0, 0..bn)?.slice(1, 0..1)?;
                let part = acc_t.slice(0, 0..bn)?.slice(1, 1..2)?;
                for (i, (l0, ln)) in blocks(l, lc).enumerate() {
                    let xt = xs.next(k)?;
                    let xv = xt.slice(0, 0..bn)?.slice(1, 0..ln)?;
                    let src = xa.slice(0, l0..l0 + ln)?.slice(1, b0..b0 + bn)?;
                    k.emit(DmaTranspose::new(&xv, &src))?;
                    fold_chunk(k, g, i, &acc, &part, &xv, &[1])?;
                }
                let dst = oa.slice(0, b0..b0 + bn)?.reshape(&[bn, 1])?;
                finish(k, g, &mut os, &acc, &dst)?;
            }
        }
        Ok(())
    })();
    release(k, [xs, accs, os], r)
}

/// A kernel `reduce` with input `x` of `shape` and `dtype` and output `out` of the reduced
/// shape and `out_dtype`.
pub fn build(
    shape: &[usize],
    dtype: DType,
    axis: usize,
    op: ReduceOp,
    keepdims: bool,
    out_dtype: DType,
) -> Result<Program, Error> {
    let out = reduced_shape(shape, axis, keepdims);
    build_with(
        "reduce",
        &[("x", dtype, shape)],
        ("out", out_dtype, &out),
        |k, o, ins| reduce(k, o, &ins[0], axis, op, keepdims),
    )
}

/// Emits `out = op(x)` over several axes at once (ONNX `ReduceSum` / `ReduceMean` /
/// `ReduceMax` / `ReduceMin` with an `axes` list; empty: every axis): `x` contiguous, any
/// rank; `out` of `x`'s shape with the reduced axes 1 (`keepdims`) or removed (a rank-0
/// result may be `[]` or `[1]`). Reduced axes that are one contiguous run of `x` are one
/// [`reduce`] over `x` viewed as `[A, L, B]`; otherwise `x` is first transposed into a
/// scratch tensor with the reduced axes last ([`data::permute`](super::data::permute), one
/// extra pass) — either way the fold runs over the reduced elements in `x`'s row-major order,
/// with [`reduce`]'s numerics.
pub fn reduce_axes(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axes: &[usize],
    op: ReduceOp,
    keepdims: bool,
) -> Result<(), Error> {
    let f = "reduce";
    let s = x.shape();
    let r = s.len();
    let mut ax: Vec<usize> = if axes.is_empty() {
        (0..r).collect()
    } else {
        axes.to_vec()
    };
    ax.sort_unstable();
    ax.dedup();
    if ax.iter().any(|&a| a >= r) {
        return Err(err!(
            Invalid,
            "{f}: axes {axes:?} out of range for x {}",
            x.describe()
        ));
    }
    let kept: Vec<usize> = (0..r).filter(|d| !ax.contains(d)).map(|d| s[d]).collect();
    let keep_shape: Vec<usize> = (0..r)
        .map(|d| if ax.contains(&d) { 1 } else { s[d] })
        .collect();
    let os = out.shape();
    let ok = if keepdims {
        os == keep_shape
    } else {
        os == kept || (kept.is_empty() && os == [1])
    };
    if !ok {
        return Err(err!(
            Invalid,
            "{f}: out {} must have shape {:?} (x {} reduced over {ax:?}, keepdims {keepdims})",
            out.describe(),
            if keepdims { &keep_shape } else { &kept },
            x.describe()
        ));
    }
    let run = ax.windows(2).all(|w| w[1] == w[0] + 1);
    let (src, first) = if run {
        (x.clone(), ax[0])
    } else {
        let perm: Vec<usize> = (0..r)
            .filter(|d| !ax.contains(d))
            .chain(ax.iter().copied())
            .collect();
        let ps: Vec<usize> = perm.iter().map(|&d| s[d]).collect();
        let name = format!("{}.reduce{}", out.name(), k.tensors.len());
        let t = (*k.scratch(&name, x.dtype(), &ps)?).clone();
        super::data::permute(k, &t, x, &perm)?;
        (t, kept.len())
    };
    let ss = src.shape();
    let a: usize = ss[..first].iter().product();
    let l: usize = ss[first..first + ax.len()].iter().product();
    let b: usize = ss[first + ax.len()..].iter().product();
    let x3 = src
        .reshape(&[a, l, b])
        .map_err(|e| err!(Invalid, "{f}: x must be contiguous: {}", e.message()))?;
    let o2 = out
        .reshape(&[a, b])
        .map_err(|e| err!(Invalid, "{f}: out must be contiguous: {}", e.message()))?;
    reduce(k, &o2, &x3, 1, op, false)
}
