//! Shared checks and tiling helpers of the library kernels.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, Program, TensorKind};

use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::pool::TilePool;
use crate::tensors::Tensor;
use crate::view::{Dim, View};

/// Partitions of an on-chip tile.
pub(crate) const P: usize = 128;

/// Requires `v` to be a view of an HBM tensor of `k`.
pub(crate) fn hbm(k: &Kernel, v: &View, f: &str, role: &str) -> Result<(), Error> {
    k.check(v, f, role)?;
    if v.base.mem != Memory::Hbm {
        return Err(err!(
            Invalid,
            "{f}: {role} must be a view of an HBM tensor, not {}",
            v.base
        ));
    }
    Ok(())
}

/// Requires `v` to be a view of an HBM output or scratch tensor of `k`.
pub(crate) fn hbm_out(k: &Kernel, v: &View, f: &str, role: &str) -> Result<(), Error> {
    hbm(k, v, f, role)?;
    match k.tensor_kind(v.base.id) {
        Some(TensorKind::Output | TensorKind::Scratch) => Ok(()),
        _ => Err(err!(
            Invalid,
            "{f}: {role} {} must be an output or scratch tensor",
            v.base
        )),
    }
}

/// Requires a float dtype.
pub(crate) fn float(v: &View, f: &str, role: &str) -> Result<(), Error> {
    if !v.dtype.is_float() {
        return Err(err!(
            Invalid,
            "{f}: {role} {} must have a float dtype",
            v.describe()
        ));
    }
    Ok(())
}

/// The checks of a kernel whose output has its input's shape: `x` a float HBM view, `out` a
/// writable float HBM view of `x`'s shape (`out_role` names it in the messages: "out", "y").
pub(crate) fn same_shape_io(
    k: &Kernel,
    out: &View,
    x: &View,
    f: &str,
    out_role: &str,
) -> Result<(), Error> {
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, out_role)?;
    float(x, f, "x")?;
    float(out, f, out_role)?;
    if out.shape() != x.shape() {
        return Err(err!(
            Invalid,
            "{f}: {out_role} {} must have x {}'s shape",
            out.describe(),
            x.describe()
        ));
    }
    Ok(())
}

/// `v` (rank ≥ 1, contiguous) as `[rows, last dimension]`.
pub(crate) fn as_rows(v: &View, f: &str, role: &str) -> Result<View, Error> {
    let shape = v.shape();
    let Some((&c, lead)) = shape.split_last() else {
        return Err(err!(Invalid, "{f}: {role} {} has rank 0", v.describe()));
    };
    let r: usize = lead.iter().product();
    v.reshape(&[r, c]).map_err(|e| {
        err!(
            Invalid,
            "{f}: {role} {} must be contiguous (its rows are read as [{r}, {c}]): {}",
            v.describe(),
            e.message()
        )
    })
}

/// `(start, len)` of the blocks of at most `step` covering `0..n`.
pub(crate) fn blocks(n: usize, step: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(step.max(1))
        .map(move |s| (s, step.min(n - s)))
}

/// A kernel `name` with inputs `(name, dtype, shape)` and one output `out`, filled by `f`
/// (given the output tensor and the inputs in order), built.
pub(crate) fn build_with(
    name: &str,
    inputs: &[(&str, DType, &[usize])],
    out: (&str, DType, &[usize]),
    f: impl FnOnce(&mut Kernel, &Tensor, &[Tensor]) -> Result<(), Error>,
) -> Result<Program, Error> {
    let mut k = Kernel::new(name);
    let ins = inputs
        .iter()
        .map(|(n, d, s)| k.input(n, *d, s))
        .collect::<Result<Vec<_>, _>>()?;
    let o = k.output(out.0, out.1, out.2)?;
    f(&mut k, &o, &ins)?;
    k.build()
}

/// Frees `pools` (allocated outside any scope) and returns `r`, or the first error freeing.
pub(crate) fn release<T, const N: usize>(
    k: &mut Kernel,
    pools: [TilePool; N],
    r: Result<T, Error>,
) -> Result<T, Error> {
    let mut freed = Ok(());
    for p in pools {
        let f = p.free(k);
        if freed.is_ok() {
            freed = f;
        }
    }
    let v = r?;
    freed.map(|()| v)
}

/// The `[rows, cols ≤ free]` blocks of a flat view `v` (rank 1, contiguous) of `n` elements
/// laid out over `rows` (1..=128) partitions, in element order: the first `⌊n/rows⌋·rows`
/// elements as `[rows, ⌊n/rows⌋]` cut into column blocks of at most `free`, then the
/// remaining `n mod rows` as `[n mod rows, 1]`.
pub(crate) fn flat_blocks(v: &View, rows: usize, free: usize) -> Result<Vec<View>, Error> {
    let n = v.elems();
    let rows = rows.clamp(1, P);
    let (main, rem) = (n / rows * rows, n % rows);
    let per = main / rows;
    let mut out = Vec::new();
    if main > 0 {
        let m = v.slice(0, 0..main)?.reshape(&[rows, per])?;
        for (c0, cn) in blocks(per, free) {
            out.push(m.slice(1, c0..c0 + cn)?);
        }
    }
    if rem > 0 {
        out.push(v.slice(0, main..n)?.reshape(&[rem, 1])?);
    }
    Ok(out)
}

/// The partition count a streaming kernel (load, one ScalarE or VectorE instruction, store
/// per block) lays `n` contiguous elements over. Under the published cost rules
/// (docs/SIM_ISA.md) a block on `p` partitions costs its two transfers about `8·p` ticks of
/// descriptor overhead (64 ticks per descriptor, 16 DMA engines) and its instruction about
/// `n/p`: their sum is least at `p = √(n/8)`. Large tensors use all 128 partitions;
/// a divisor of `n` within a factor of 2 of the optimum is preferred, which spares the
/// remainder block.
pub(crate) fn stream_rows(n: usize) -> usize {
    let best = ((n as f64 / 8.0).sqrt().ceil() as usize).clamp(1, P);
    if best == P || n % best == 0 {
        return best;
    }
    (best.div_ceil(2)..=(2 * best).min(P))
        .filter(|p| n % p == 0)
        .min_by_key(|&p| p.abs_diff(best))
        .unwrap_or(best)
}

/// The `[rows ≤ 128, cols ≤ free]` blocks of any HBM view of rank ≥ 1, contiguous or not:
/// the last dimension gives the columns, the second-to-last the rows (one row at rank 1),
/// and every index of the dimensions before them its own blocks, in row-major order.
pub(crate) fn row_blocks(v: &View, free: usize) -> Result<Vec<View>, Error> {
    let mut w = v.clone();
    if w.dims.len() < 2 {
        w.dims.insert(0, Dim { size: 1, stride: 1 });
    }
    let r = w.dims.len();
    let lead: Vec<usize> = w.dims[..r - 2].iter().map(|d| d.size).collect();
    let (rows, cols) = (w.dims[r - 2].size, w.dims[r - 1].size);
    let mut out = Vec::new();
    for idx in 0..lead.iter().product::<usize>() {
        let mut plane = w.clone();
        let mut rest = idx;
        let mut at = vec![0; lead.len()];
        for (i, &d) in lead.iter().enumerate().rev() {
            at[i] = rest % d;
            rest /= d;
        }
        for &i in &at {
            plane = plane.select(0, i)?;
        }
        for (r0, rn) in blocks(rows, P) {
            let band = plane.slice(0, r0..r0 + rn)?;
            for (c0, cn) in blocks(cols, free) {
                out.push(band.slice(1, c0..c0 + cn)?);
            }
        }
    }
    Ok(out)
}

/// Matching `[rows ≤ 128, cols ≤ free]` blocks of two HBM views of one shape (the i-th block
/// of each holds the same elements): [`flat_blocks`] over [`stream_rows`] partitions when
/// both are contiguous, else [`row_blocks`].
pub(crate) fn paired_blocks(a: &View, b: &View, free: usize) -> Result<Vec<(View, View)>, Error> {
    let n = a.elems();
    let (ba, bb) = match (a.reshape(&[n]), b.reshape(&[n])) {
        (Ok(fa), Ok(fb)) => {
            let rows = stream_rows(n);
            (flat_blocks(&fa, rows, free)?, flat_blocks(&fb, rows, free)?)
        }
        _ => (row_blocks(a, free)?, row_blocks(b, free)?),
    };
    Ok(ba.into_iter().zip(bb).collect())
}

/// `(rows, cols)` of a tile that holds every block of `blocks` (2-D views).
pub(crate) fn block_extent(blocks: &[(View, View)]) -> (usize, usize) {
    blocks.iter().fold((1, 1), |(r, c), (v, _)| {
        (r.max(v.partitions()), c.max(v.free_elems()))
    })
}
