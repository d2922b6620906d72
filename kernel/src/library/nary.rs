//! The shared machinery of the element-wise kernels with NumPy broadcasting over HBM views of
//! any rank: [`map`] loads matching blocks of every input (and of nothing else), lets a body
//! emit the per-block instructions into an output tile, and stores it.
//!
//! # Canonical form
//!
//! Every operand is brought to `out`'s rank (leading size-1 dimensions), its broadcast
//! dimensions get stride 0, size-1 dimensions are dropped, and neighbouring dimensions that
//! step contiguously in *every* operand are merged. What remains is `[lead…, rows, cols]`:
//!
//! * **one dimension** (same-shape contiguous operands, or scalars): the `n` elements are laid
//!   out over `stream_rows(n)` partitions (`util::stream_rows`, the cost rule of the
//!   activation kernels) in column blocks of up to [`FREE`], then the remaining `n mod p` as
//!   one column;
//! * **otherwise**: the last dimension gives the columns, the one before it the rows (128 per
//!   block), each index of the dimensions before them its own blocks. When that leaves fewer
//!   than 64 rows and the columns are many, the last dimension is first split in two so the
//!   blocks fill the partitions (`[12, 16384]` as `[12, 128, 128]`).
//!
//! An input broadcast along the columns (stride 0) is loaded as one value per row, `[rows,
//! 1]`, and handed to the body as a stride-0 view of that tile (no repeated data travels);
//! an input broadcast along the rows is loaded by a DMA whose partitions all read the same
//! row; a scalar input (broadcast along everything) is loaded once, before the blocks, and
//! an input that is the same for every index of the lead dimensions (an attention mask) is
//! kept resident after the first (when it fits 32 KiB per partition).
//! Tiles come from pools of three, so loads, compute and stores of consecutive blocks
//! overlap.

use nrt_core::{Error, err};
use nrt_sim::engine::DType;

use super::util::{P, blocks, hbm, hbm_out, release, stream_rows};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::DmaCopy;
use crate::pool::TilePool;
use crate::view::{Dim, View};

/// Columns per tile.
pub(crate) const FREE: usize = 2048;

/// `v` with another dtype of the same size (the same bits read as, e.g., int32).
pub(crate) fn retype(v: &View, dt: DType) -> View {
    let mut w = v.clone();
    if dt.size() == v.dtype.size() {
        w.dtype = dt;
    }
    w
}

/// One block handed to a [`map`] body: the output tile (`[rows, cols]` of the tile dtype the
/// caller chose), the input tiles in order (`[rows, cols]`, a stride-0 view for an input
/// broadcast along the columns), and two fp32 scratch tiles of the output's shape.
pub(crate) struct Block {
    pub(crate) out: View,
    pub(crate) ins: Vec<View>,
    pub(crate) tmp: [View; 2],
}

/// How [`map`] loads and stores.
pub(crate) struct MapSpec<'a> {
    /// Kernel name for messages.
    pub(crate) name: &'a str,
    /// The dtype each input is loaded as (converted by the DMA when it differs from the
    /// view's, or the same size to keep the bits).
    pub(crate) load: Vec<DType>,
    /// The output tile's dtype.
    pub(crate) out_tile: DType,
    /// The dtype the output tile is stored as (the same size as `out_tile`: the tile's bits
    /// read as this type, then converted to `out`'s dtype by the DMA).
    pub(crate) store_as: DType,
}

/// `v` brought to `shape` (rank ≥ its own, leading size-1 dimensions, stride-0 broadcast), or
/// `None` if it does not broadcast to it.
fn expand_to(v: &View, shape: &[usize]) -> Option<Vec<Dim>> {
    let r = shape.len();
    if v.dims.len() > r {
        return None;
    }
    let mut dims = vec![Dim { size: 1, stride: 0 }; r - v.dims.len()];
    dims.extend(v.dims.iter().copied());
    for (d, &s) in dims.iter_mut().zip(shape) {
        if d.size == s {
            if s == 1 {
                d.stride = 0;
            }
        } else if d.size == 1 {
            *d = Dim { size: s, stride: 0 };
        } else {
            return None;
        }
    }
    Some(dims)
}

/// The canonical views (see the module documentation) of `out` then each input: one list of
/// dimensions shared by all, at least one.
pub(crate) fn canonical(f: &str, out: &View, ins: &[&View]) -> Result<Vec<View>, Error> {
    let shape = out.shape();
    let mut all: Vec<Vec<Dim>> = Vec::with_capacity(ins.len() + 1);
    all.push(expand_to(out, &shape).unwrap_or_default());
    for (i, v) in ins.iter().enumerate() {
        match expand_to(v, &shape) {
            Some(d) => all.push(d),
            None => {
                return Err(err!(
                    Invalid,
                    "{f}: input {i} {} does not broadcast to out {}",
                    v.describe(),
                    out.describe()
                ));
            }
        }
    }
    // Drop size-1 dimensions, then merge neighbours contiguous in every operand.
    let keep: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let mut merged: Vec<Vec<Dim>> = vec![Vec::new(); all.len()];
    for &d in &keep {
        let can_merge = merged[0].last().is_some()
            && all.iter().zip(&merged).all(|(dims, m)| {
                m.last()
                    .is_some_and(|prev| prev.stride == dims[d].stride * dims[d].size)
            });
        for (dims, m) in all.iter().zip(merged.iter_mut()) {
            match (can_merge, m.last_mut()) {
                (true, Some(prev)) => {
                    prev.size *= dims[d].size;
                    prev.stride = dims[d].stride;
                }
                _ => m.push(dims[d]),
            }
        }
    }
    let src: Vec<&View> = std::iter::once(out).chain(ins.iter().copied()).collect();
    Ok(merged
        .into_iter()
        .zip(src)
        .map(|(mut dims, v)| {
            if dims.is_empty() {
                dims.push(Dim { size: 1, stride: 0 });
            }
            View {
                base: v.base.clone(),
                dtype: v.dtype,
                offset: v.offset,
                dims,
            }
        })
        .collect())
}

/// Canonical views of two or more dimensions whose rows would leave most partitions idle
/// (fewer than 64) while the columns are many: the last dimension split into
/// `[c₁ ≤ 128, cols / c₁]`, `c₁` the largest divisor that leaves at least 16 columns, so
/// the blocks fill the partitions (`[12, 16384]` becomes `[12, 128, 128]`).
fn fill_partitions(mut views: Vec<View>) -> Vec<View> {
    let d = views[0].dims.len();
    if d < 2 || views[0].dims[d - 2].size >= 64 {
        return views;
    }
    let cols = views[0].dims[d - 1].size;
    let Some(c1) = (2..=P.min(cols / 16)).rev().find(|c| cols % c == 0) else {
        return views;
    };
    for v in &mut views {
        let s = v.dims[d - 1].stride;
        v.dims[d - 1] = Dim {
            size: c1,
            stride: s * (cols / c1),
        };
        v.dims.push(Dim {
            size: cols / c1,
            stride: s,
        });
    }
    views
}

/// `[rows, cols]` blocks of the canonical views (all of one shape): the same block of each.
fn block_views(views: &[View]) -> Result<Vec<Vec<View>>, Error> {
    let d = views[0].dims.len();
    let mut out = Vec::new();
    if d == 1 {
        let n = views[0].dims[0].size;
        let p = stream_rows(n);
        let (main, rem) = (n / p * p, n % p);
        let per = main / p;
        if main > 0 {
            let split: Vec<View> = views
                .iter()
                .map(|v| {
                    let s = v.dims[0].stride;
                    let mut w = v.clone();
                    w.dims = vec![
                        Dim {
                            size: p,
                            stride: per * s,
                        },
                        Dim {
                            size: per,
                            stride: s,
                        },
                    ];
                    w
                })
                .collect();
            for (c0, cn) in blocks(per, FREE) {
                out.push(
                    split
                        .iter()
                        .map(|v| v.slice(1, c0..c0 + cn))
                        .collect::<Result<_, _>>()?,
                );
            }
        }
        if rem > 0 {
            out.push(
                views
                    .iter()
                    .map(|v| {
                        let mut w = v.slice(0, main..n)?;
                        w.dims.push(Dim { size: 1, stride: 1 });
                        Ok(w)
                    })
                    .collect::<Result<_, Error>>()?,
            );
        }
        return Ok(out);
    }
    let lead: Vec<usize> = views[0].dims[..d - 2].iter().map(|x| x.size).collect();
    let (rows, cols) = (views[0].dims[d - 2].size, views[0].dims[d - 1].size);
    for idx in 0..lead.iter().product::<usize>() {
        let mut at = vec![0; lead.len()];
        let mut rest = idx;
        for (i, &s) in lead.iter().enumerate().rev() {
            at[i] = rest % s;
            rest /= s;
        }
        let planes: Vec<View> = views
            .iter()
            .map(|v| {
                let mut w = v.clone();
                for &i in &at {
                    w = w.select(0, i)?;
                }
                Ok(w)
            })
            .collect::<Result<_, Error>>()?;
        for (r0, rn) in blocks(rows, P) {
            for (c0, cn) in blocks(cols, FREE) {
                out.push(
                    planes
                        .iter()
                        .map(|v| v.slice(0, r0..r0 + rn)?.slice(1, c0..c0 + cn))
                        .collect::<Result<_, Error>>()?,
                );
            }
        }
    }
    Ok(out)
}

/// Whether a `[rows, cols]` block view repeats along its columns (stride 0, more than one).
fn col_broadcast(v: &View) -> bool {
    v.dims.get(1).is_some_and(|d| d.stride == 0 && d.size > 1)
}

/// Emits `out = body(inputs)` block by block (see the module documentation): `out` an HBM
/// output or scratch view, each input an HBM view broadcasting to `out`'s shape.
pub(crate) fn map(
    k: &mut Kernel,
    spec: &MapSpec<'_>,
    out: &View,
    ins: &[&View],
    body: &mut dyn FnMut(&mut Kernel, &Block) -> Result<(), Error>,
) -> Result<(), Error> {
    let f = spec.name;
    hbm_out(k, out, f, "out")?;
    for (i, v) in ins.iter().enumerate() {
        hbm(k, v, f, &format!("input {i}"))?;
    }
    if out.has_repeats() {
        return Err(err!(
            Invalid,
            "{f}: out {} addresses some elements more than once",
            out.describe()
        ));
    }
    if spec.load.len() != ins.len() || spec.out_tile.size() != spec.store_as.size() {
        return Err(err!(Invalid, "{f}: inconsistent load / store types"));
    }
    if out.elems() == 0 {
        return Ok(());
    }
    let views = fill_partitions(canonical(f, out, ins)?);
    let parts = block_views(&views)?;
    let (rows, cols) = parts.iter().fold((1, 1), |(r, c), b| {
        (r.max(b[0].partitions()), c.max(b[0].free_elems()))
    });
    let mut pools: Vec<TilePool> = Vec::new();
    let mk = |k: &mut Kernel, name: String, dt: DType, c: usize, n: usize| {
        k.tile_pool(&name, Memory::Sbuf, dt, &[rows, c], n)
    };
    let scalar: Vec<bool> = views[1..]
        .iter()
        .map(|v| v.dims.iter().all(|d| d.stride == 0))
        .collect();
    // Blocks per index of the lead dimensions (the lead dimensions are the outer loop).
    let d = views[0].dims.len();
    let per_lead = if d >= 3 {
        views[0].dims[d - 2].size.div_ceil(P) * views[0].dims[d - 1].size.div_ceil(FREE)
    } else {
        parts.len()
    };
    let mut width = Vec::with_capacity(ins.len());
    let mut resident = Vec::with_capacity(ins.len());
    let mut r = Ok(());
    for (i, dt) in spec.load.iter().enumerate() {
        let c = if parts.iter().all(|b| col_broadcast(&b[i + 1])) {
            1
        } else {
            cols
        };
        // An input the same for every lead index (an attention mask) whose blocks fit 32 KiB
        // per partition stays resident: loaded during the first lead index, then reused.
        let res = d >= 3
            && parts.len() > per_lead
            && !scalar[i]
            && views[i + 1].dims[..d - 2].iter().all(|x| x.stride == 0)
            && per_lead * c * dt.size() <= 32 * 1024;
        width.push(c);
        resident.push(res);
        // A scalar input (stride 0 everywhere) is loaded once, before the blocks.
        let (bufs, c) = match (scalar[i], res) {
            (true, _) => (1, c),
            (false, true) => (1, c * per_lead),
            _ => (3, c),
        };
        match mk(k, format!("{f}_in{i}"), *dt, c, bufs) {
            Ok(p) => pools.push(p),
            Err(e) => {
                r = Err(e);
                break;
            }
        }
    }
    if r.is_ok() {
        for (name, dt, n) in [
            ("out", spec.out_tile, 3),
            ("tmp0", DType::F32, 2),
            ("tmp1", DType::F32, 2),
        ] {
            match mk(k, format!("{f}_{name}"), dt, cols, n) {
                Ok(p) => pools.push(p),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
    }
    if r.is_ok() {
        r = (|| -> Result<(), Error> {
            let n_in = ins.len();
            let mut once: Vec<Option<View>> = vec![None; n_in];
            let mut kept: Vec<Option<View>> = vec![None; n_in];
            for i in 0..n_in {
                if scalar[i] {
                    let t = pools[i].next(k)?.slice(0, 0..rows)?.slice(1, 0..1)?;
                    k.emit(DmaCopy::new(&t, &parts[0][i + 1].slice(1, 0..1)?))?;
                    once[i] = Some(t);
                } else if resident[i] {
                    kept[i] = Some(pools[i].next(k)?.view().clone());
                }
            }
            for (bi, b) in parts.iter().enumerate() {
                let (rn, cn) = (b[0].partitions(), b[0].free_elems());
                let mut tiles = Vec::with_capacity(n_in);
                for i in 0..n_in {
                    let src = &b[i + 1];
                    if let Some(t) = &once[i] {
                        tiles.push(t.slice(0, 0..rn)?.broadcast(1, cn)?);
                        continue;
                    }
                    if let Some(t) = &kept[i] {
                        let (w, j) = (width[i], bi % per_lead);
                        let slot = t.slice(0, 0..rn)?;
                        let tv = if w == 1 {
                            slot.slice(1, j..j + 1)?
                        } else {
                            slot.slice(1, j * w..j * w + cn)?
                        };
                        if bi < per_lead {
                            let s = if w == 1 {
                                src.slice(1, 0..1)?
                            } else {
                                src.clone()
                            };
                            k.emit(DmaCopy::new(&tv, &s))?;
                        }
                        tiles.push(if w == 1 { tv.broadcast(1, cn)? } else { tv });
                        continue;
                    }
                    let t = pools[i].next(k)?;
                    if col_broadcast(src) {
                        let tv = t.slice(0, 0..rn)?.slice(1, 0..1)?;
                        k.emit(DmaCopy::new(&tv, &src.slice(1, 0..1)?))?;
                        tiles.push(tv.broadcast(1, cn)?);
                    } else {
                        let tv = t.slice(0, 0..rn)?.slice(1, 0..cn)?;
                        k.emit(DmaCopy::new(&tv, src))?;
                        tiles.push(tv);
                    }
                }
                let mut take = |i: usize| -> Result<View, Error> {
                    pools[n_in + i].next(k)?.slice(0, 0..rn)?.slice(1, 0..cn)
                };
                let (o, t0, t1) = (take(0)?, take(1)?, take(2)?);
                let blk = Block {
                    out: o,
                    ins: tiles,
                    tmp: [t0, t1],
                };
                body(k, &blk)?;
                k.emit(DmaCopy::new(&b[0], &retype(&blk.out, spec.store_as)))?;
            }
            Ok(())
        })();
    }
    let mut freed = Ok(());
    for p in pools {
        let e = p.free(k);
        if freed.is_ok() {
            freed = e;
        }
    }
    release(k, [], r.and(freed))
}
