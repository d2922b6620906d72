//! Row-wise routines for the graph ops the kernel library does not provide on this branch
//! (tiled matmul, broadcasting element-wise ops, activations, softmax, layer/RMS norm,
//! last-axis reductions, transpose, copies), written on the tile API.
//!
//! A tensor is handled as row blocks: its last axis is the free dimension, up to 128 rows of
//! the rest go on the partitions ([`blocks`]). Loads convert to fp32 working tiles where the
//! op computes statistics; the store converts to the output's type. Softmax is the stable
//! form (`exp(x − max)`, sum accumulated by the same ScalarE activation, times the sum's
//! reciprocal); layer norm subtracts the mean first, then scales by `rsqrt(mean(x²) + eps)`.

use nrt_core::{Error, err};
use nrt_kernel::{ActBias, ActFn, AluOp, DType, Kernel, NcMatmul, TensorReduce, View};

use super::ops::Reduce;

/// Partitions.
const P: usize = 128;
/// Columns per block of the element-wise ops.
const COLS: usize = 2048;
/// The longest row the row-statistics ops (softmax, norms, reductions) take.
const MAX_ROW: usize = 4096;
/// fp32 columns of one PSUM bank (a matmul's output block).
const BANK: usize = 512;

/// `v` (contiguous) as `[rows, last axis]`.
fn flat2(v: &View) -> Result<View, Error> {
    let s = v.shape();
    let c = s.last().copied().unwrap_or(1);
    v.reshape(&[v.elems() / c.max(1), c])
}

/// The 2-D row blocks `[n ≤ 128, C]` of a view of rank ≥ 2: for every index of the leading
/// dimensions, 128 rows of the second-to-last at a time.
fn blocks(v: &View) -> Result<Vec<View>, Error> {
    let s = v.shape();
    let r = s.len();
    if r < 2 {
        return Err(err!(Invalid, "internal: row blocks of a rank-{r} view"));
    }
    let lead = &s[..r - 2];
    let rows = s[r - 2];
    let mut out = Vec::new();
    for idx in 0..lead.iter().product::<usize>() {
        let mut ids = vec![0; lead.len()];
        let mut rem = idx;
        for (i, d) in lead.iter().enumerate().rev() {
            ids[i] = rem % d;
            rem /= d;
        }
        let mut w = v.clone();
        for &i in &ids {
            w = w.select(0, i)?;
        }
        for r0 in (0..rows).step_by(P) {
            out.push(w.slice(0, r0..(r0 + P).min(rows))?);
        }
    }
    Ok(out)
}

/// `(rows, columns)` of a 2-D block.
fn nc(v: &View) -> (usize, usize) {
    let s = v.shape();
    (
        s.first().copied().unwrap_or(1),
        s.get(1).copied().unwrap_or(1),
    )
}

/// Column ranges of at most [`COLS`].
fn col_chunks(c: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..c).step_by(COLS).map(move |c0| c0..(c0 + COLS).min(c))
}

fn row_limit(x: &View) -> Result<usize, Error> {
    let c = x.shape().last().copied().unwrap_or(1);
    if c > MAX_ROW {
        return Err(err!(
            Invalid,
            "rows of {} elements are longer than the {MAX_ROW} this op keeps on chip",
            c
        ));
    }
    Ok(c)
}

/// `out = src` through SBUF (HBM to HBM), same shape.
pub(crate) fn copy(k: &mut Kernel, out: &View, src: &View) -> Result<(), Error> {
    let (o, s) = (flat2(out)?, flat2(src)?);
    for (ob, sb) in blocks(&o)?.iter().zip(blocks(&s)?) {
        let (n, c) = nc(ob);
        for cols in col_chunks(c) {
            k.scope(|k| {
                let t = k.sbuf_tile("g_copy", src.dtype(), &[n, cols.len()])?;
                k.dma_copy(&t, &sb.slice(1, cols.clone())?)?;
                k.dma_copy(&ob.slice(1, cols.clone())?, &t)
            })?;
        }
    }
    Ok(())
}

/// `out = f(x)` element-wise on ScalarE.
pub(crate) fn activation(k: &mut Kernel, out: &View, x: &View, f: ActFn) -> Result<(), Error> {
    let (o, xi) = (flat2(out)?, flat2(x)?);
    for (ob, xb) in blocks(&o)?.iter().zip(blocks(&xi)?) {
        let (n, c) = nc(ob);
        for cols in col_chunks(c) {
            k.scope(|k| {
                let t = k.sbuf_tile("g_act_in", x.dtype(), &[n, cols.len()])?;
                k.dma_copy(&t, &xb.slice(1, cols.clone())?)?;
                let y = k.sbuf_tile("g_act_out", out.dtype(), &[n, cols.len()])?;
                k.activation(&y, f, &t, ActBias::None, 1.0)?;
                k.dma_copy(&ob.slice(1, cols.clone())?, &y)
            })?;
        }
    }
    Ok(())
}

/// `out = a op b` element-wise on VectorE, with NumPy broadcasting (`out` has the broadcast
/// shape): operands of the output's shape are handled as row blocks of the flattened
/// tensor; otherwise each operand is viewed at the output's rank with its size-1 dimensions
/// repeated (stride 0), so the DMA loads the repeated values.
pub(crate) fn binary(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    op: AluOp,
) -> Result<(), Error> {
    let os = out.shape();
    let (o, a, b) = if a.shape() == os && b.shape() == os {
        (flat2(out)?, flat2(a)?, flat2(b)?)
    } else {
        let r = os.len().max(2);
        let mut full = vec![1; r - os.len()];
        full.extend(&os);
        let spread = |v: &View| -> Result<View, Error> {
            let s = v.shape();
            let mut padded = vec![1; r - s.len()];
            padded.extend(&s);
            let mut w = v.reshape(&padded)?;
            for (i, (&p, &f)) in padded.iter().zip(&full).enumerate() {
                if p == 1 && f != 1 {
                    w = w.broadcast(i, f)?;
                }
            }
            Ok(w)
        };
        (out.reshape(&full)?, spread(a)?, spread(b)?)
    };
    let (ab, bb) = (blocks(&a)?, blocks(&b)?);
    for ((ob, xa), xb) in blocks(&o)?.iter().zip(&ab).zip(&bb) {
        let (n, c) = nc(ob);
        for cols in col_chunks(c) {
            k.scope(|k| {
                let w = cols.len();
                let ta = k.sbuf_tile("g_bin_a", a.dtype(), &[n, w])?;
                k.dma_copy(&ta, &xa.slice(1, cols.clone())?)?;
                let tb = k.sbuf_tile("g_bin_b", b.dtype(), &[n, w])?;
                k.dma_copy(&tb, &xb.slice(1, cols.clone())?)?;
                let y = k.sbuf_tile("g_bin_out", out.dtype(), &[n, w])?;
                k.tensor_tensor(&y, &ta, &tb, op)?;
                k.dma_copy(&ob.slice(1, cols.clone())?, &y)
            })?;
        }
    }
    Ok(())
}

/// `out [M, N] = op(a) · op(b)` (op: transpose when the flag is set) on TensorE: blocks of
/// 128 output rows × 512 columns accumulate over 128-deep slices of the contraction in one
/// fp32 PSUM bank. The stationary `aᵀ` block comes from a transposing DMA (or a plain load
/// of a transposed `a`), the moving `b` block likewise.
pub(crate) fn matmul(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    ta: bool,
    tb: bool,
) -> Result<(), Error> {
    let (m, n) = nc(out);
    let depth = if ta { nc(a).0 } else { nc(a).1 };
    let dt = a.dtype();
    for m0 in (0..m).step_by(P) {
        let mr = m0..(m0 + P).min(m);
        for n0 in (0..n).step_by(BANK) {
            let nr = n0..(n0 + BANK).min(n);
            k.scope(|k| {
                let ps = k.psum_tile("g_mm_acc", DType::F32, &[mr.len(), nr.len()])?;
                for (i, k0) in (0..depth).step_by(P).enumerate() {
                    let kr = k0..(k0 + P).min(depth);
                    k.scope(|k| {
                        let st = k.sbuf_tile("g_mm_lhsT", dt, &[kr.len(), mr.len()])?;
                        if ta {
                            k.dma_copy(&st, &a.slice(0, kr.clone())?.slice(1, mr.clone())?)?;
                        } else {
                            k.dma_transpose(&st, &a.slice(0, mr.clone())?.slice(1, kr.clone())?)?;
                        }
                        let mv = k.sbuf_tile("g_mm_rhs", dt, &[kr.len(), nr.len()])?;
                        if tb {
                            k.dma_transpose(&mv, &b.slice(0, nr.clone())?.slice(1, kr.clone())?)?;
                        } else {
                            k.dma_copy(&mv, &b.slice(0, kr.clone())?.slice(1, nr.clone())?)?;
                        }
                        k.emit(NcMatmul {
                            dst: &ps,
                            stationary: &st,
                            moving: &mv,
                            accumulate: Some(i > 0),
                        })
                    })?;
                }
                let y = k.sbuf_tile("g_mm_out", out.dtype(), &[mr.len(), nr.len()])?;
                k.tensor_copy(&y, &ps)?;
                k.dma_copy(&out.slice(0, mr.clone())?.slice(1, nr.clone())?, &y)
            })?;
        }
    }
    Ok(())
}

/// Loads a row block as an fp32 working tile.
fn load_f32(k: &mut Kernel, name: &str, src: &View) -> Result<nrt_kernel::Tile, Error> {
    let (n, c) = nc(src);
    let t = k.sbuf_tile(name, DType::F32, &[n, c])?;
    k.dma_copy(&t, src)?;
    Ok(t)
}

/// Reduces each partition of `data` over its free axis into `dst [n, 1]`.
fn reduce_rows(
    k: &mut Kernel,
    dst: &View,
    data: &View,
    op: AluOp,
    negate: bool,
) -> Result<(), Error> {
    k.emit(TensorReduce {
        dst,
        op,
        data,
        axis: &[1],
        negate,
        keepdims: true,
    })
}

/// `out = softmax(x)` over the last axis.
pub(crate) fn softmax(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    row_limit(x)?;
    let (o, xi) = (flat2(out)?, flat2(x)?);
    for (ob, xb) in blocks(&o)?.iter().zip(blocks(&xi)?) {
        let (n, c) = nc(ob);
        k.scope(|k| {
            let t = load_f32(k, "g_sm_x", &xb)?;
            let negmax = k.sbuf_tile("g_sm_negmax", DType::F32, &[n, 1])?;
            reduce_rows(k, &negmax, &t, AluOp::Max, true)?;
            let e = k.sbuf_tile("g_sm_exp", DType::F32, &[n, c])?;
            let sum = k.sbuf_tile("g_sm_sum", DType::F32, &[n, 1])?;
            k.activation_reduce(&e, ActFn::Exp, &t, AluOp::Add, &sum, &negmax, 1.0)?;
            let rs = k.sbuf_tile("g_sm_rsum", DType::F32, &[n, 1])?;
            k.reciprocal(&rs, &sum)?;
            k.tensor_scalar(&t, &e, AluOp::Mul, &rs)?;
            k.dma_copy(ob, &t)
        })?;
    }
    Ok(())
}

/// Layer norm (`rms` false: centred, then scaled, then `gamma`, `beta`) or RMS norm (`rms`
/// true: scaled, then `gamma`) over the last axis.
pub(crate) fn norm(
    k: &mut Kernel,
    out: &View,
    x: &View,
    gamma: Option<&View>,
    beta: Option<&View>,
    eps: f32,
    rms: bool,
) -> Result<(), Error> {
    let c = row_limit(x)?;
    let inv = 1.0 / c as f32;
    let (o, xi) = (flat2(out)?, flat2(x)?);
    let row = |v: &View, n: usize| v.reshape(&[1, c])?.broadcast(0, n);
    for (ob, xb) in blocks(&o)?.iter().zip(blocks(&xi)?) {
        let n = nc(ob).0;
        k.scope(|k| {
            let t = load_f32(k, "g_norm_x", &xb)?;
            if !rms {
                let m = k.sbuf_tile("g_norm_negmean", DType::F32, &[n, 1])?;
                reduce_rows(k, &m, &t, AluOp::Add, false)?;
                k.tensor_scalar(&m, &m, AluOp::Mul, -inv)?;
                k.tensor_scalar(&t, &t, AluOp::Add, &m)?;
            }
            let sq = k.sbuf_tile("g_norm_sq", DType::F32, &[n, c])?;
            let ss = k.sbuf_tile("g_norm_rstd", DType::F32, &[n, 1])?;
            k.activation_reduce(&sq, ActFn::Square, &t, AluOp::Add, &ss, ActBias::None, 1.0)?;
            k.tensor_scalar_chain(&ss, &ss, AluOp::Mul, inv, AluOp::Add, eps)?;
            k.activation(&ss, ActFn::Rsqrt, &ss, ActBias::None, 1.0)?;
            k.tensor_scalar(&t, &t, AluOp::Mul, &ss)?;
            for (v, op) in [(gamma, AluOp::Mul), (beta, AluOp::Add)] {
                if let Some(v) = v {
                    let g = load_f32(k, "g_norm_affine", &row(v, n)?)?;
                    k.tensor_tensor(&t, &t, &g, op)?;
                }
            }
            k.dma_copy(ob, &t)
        })?;
    }
    Ok(())
}

/// `out = reduce(x)` over the last axis (`out` has `x`'s elements over its last axis).
pub(crate) fn reduce(k: &mut Kernel, out: &View, x: &View, op: Reduce) -> Result<(), Error> {
    let c = row_limit(x)?;
    let xi = flat2(x)?;
    let o = out.reshape(&[nc(&xi).0, 1])?;
    let alu = match op {
        Reduce::Sum | Reduce::Mean => AluOp::Add,
        Reduce::Max => AluOp::Max,
        Reduce::Min => AluOp::Min,
    };
    for (ob, xb) in blocks(&o)?.iter().zip(blocks(&xi)?) {
        let n = nc(ob).0;
        k.scope(|k| {
            let t = load_f32(k, "g_red_x", &xb)?;
            let r = k.sbuf_tile("g_red_out", DType::F32, &[n, 1])?;
            reduce_rows(k, &r, &t, alu, false)?;
            if op == Reduce::Mean {
                k.tensor_scalar(&r, &r, AluOp::Mul, 1.0 / c as f32)?;
            }
            k.dma_copy(ob, &r)
        })?;
    }
    Ok(())
}

/// `out [C, R] = x [R, C]ᵀ` by transposing DMAs, 128 output rows at a time.
pub(crate) fn transpose(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    let (r, c) = nc(x);
    if r > MAX_ROW {
        return Err(err!(
            Invalid,
            "a transpose of {r} rows is longer than the {MAX_ROW} kept on chip"
        ));
    }
    for c0 in (0..c).step_by(P) {
        let cr = c0..(c0 + P).min(c);
        k.scope(|k| {
            let t = k.sbuf_tile("g_transpose", x.dtype(), &[cr.len(), r])?;
            k.dma_transpose(&t, &x.slice(1, cr.clone())?)?;
            k.dma_copy(&out.slice(0, cr.clone())?, &t)
        })?;
    }
    Ok(())
}
