//! Row-wise routines for what the kernel library has no routine for: element-wise
//! activations (ScalarE) and HBM-to-HBM copies (through SBUF), written on the tile API.
//!
//! A tensor is handled as row blocks: its last axis is the free dimension (in chunks of
//! [`COLS`]), up to 128 rows of the rest go on the partitions ([`blocks`]).

use nrt_core::{Error, err};
use nrt_kernel::{ActBias, ActFn, Kernel, View};

/// Partitions.
const P: usize = 128;
/// Columns per block of the element-wise ops.
const COLS: usize = 2048;

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
