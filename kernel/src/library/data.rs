//! Data movement over HBM views of any rank — ONNX's `Transpose`, `Concat`, `Split`,
//! `Slice` (any steps, negative too), `Pad` (constant, edge, reflect; negative pads crop),
//! `Tile`, `Expand`, `Gather` (constant indices) — all through SBUF (the DMA engines do not
//! copy HBM to HBM), bits unchanged unless stated.
//!
//! # Costs
//!
//! * A copy between views whose last dimensions are both contiguous moves
//!   `[rows ≤ 128, cols ≤ 2048]` blocks: one load and one store per block
//!   ([`activation::copy`](super::activation::copy)), descriptors per contiguous run.
//! * [`permute`] moving the last axis is cut into 2-D planes `[x's last axis, out's last
//!   axis]`, each one transposing DMA (`dma_transpose`, block descriptors) into SBUF and one
//!   contiguous store: no per-element descriptors.
//! * [`expand`] and [`tile`] read the input once per output block; an input repeated along
//!   the last axis is loaded as one value per row and widened on chip (a VectorE copy with a
//!   stride-0 operand; the copy keeps every value, NaN payloads aside, which become the
//!   canonical NaN).
//! * [`slice()`] with negative steps copies one index of each reversed axis at a time (the
//!   views of this crate have non-negative strides): `Π |reversed sizes|` copies. `Pad` in
//!   reflect mode copies one row (hyper-plane) per padded index.

use super::activation::copy;
use super::nary::{Block, MapSpec, map};
use super::util::{P, blocks, hbm, hbm_out, release, row_blocks};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{DmaCopy, DmaTranspose};
use crate::view::{Dim, View};
use nrt_core::{Error, err};

/// Columns of a transposed plane per block.
const COLS: usize = 2048;

fn same_dtype(f: &str, a: &View, ra: &str, out: &View) -> Result<(), Error> {
    if a.dtype() != out.dtype() {
        return Err(err!(
            Invalid,
            "{f}: {ra} {} and out {} differ in dtype (convert with activation::copy)",
            a.describe(),
            out.describe()
        ));
    }
    Ok(())
}

/// Emits `out = transpose(x, perm)` (ONNX `Transpose`: `out.shape[i] = x.shape[perm[i]]`),
/// any rank, any dtype.
pub fn permute(k: &mut Kernel, out: &View, x: &View, perm: &[usize]) -> Result<(), Error> {
    let f = "permute";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    same_dtype(f, x, "x", out)?;
    let src = x
        .permute(perm)
        .map_err(|e| err!(Invalid, "{f}: {}", e.message()))?;
    if src.shape() != out.shape() {
        return Err(err!(
            Invalid,
            "{f}: out {} must be x {} permuted by {perm:?} ({:?})",
            out.describe(),
            x.describe(),
            src.shape()
        ));
    }
    let r = out.rank();
    // The position in out of x's innermost non-trivial axis.
    let inner = (0..r)
        .filter(|&i| src.dims[i].size > 1)
        .min_by_key(|&i| src.dims[i].stride);
    let last = (0..r).rev().find(|&i| out.dims[i].size > 1);
    match (inner, last) {
        (Some(j), Some(l)) if j != l && src.dims[j].stride == 1 => planes(k, out, &src, j, l),
        _ => copy(k, out, &src),
    }
}

/// `out = src` where `src`'s dimension `j` is contiguous and `out`'s dimension `l` is: 2-D
/// planes over `(j, l)`, each transposed by DMA into `[j, l]` tiles and stored.
fn planes(k: &mut Kernel, out: &View, src: &View, j: usize, l: usize) -> Result<(), Error> {
    let r = out.rank();
    let lead: Vec<usize> = (0..r).filter(|&i| i != j && i != l).collect();
    let sizes: Vec<usize> = lead.iter().map(|&i| out.dims[i].size).collect();
    let (nj, nl) = (out.dims[j].size, out.dims[l].size);
    let cols = COLS.min(nl);
    let mut pool = k.tile_pool("permute", Memory::Sbuf, out.dtype(), &[P.min(nj), cols], 3)?;
    let res = (|| -> Result<(), Error> {
        for idx in 0..sizes.iter().product::<usize>() {
            let (mut o, mut s) = (out.clone(), src.clone());
            let mut rest = idx;
            let mut at = vec![0; lead.len()];
            for (p, &n) in sizes.iter().enumerate().rev() {
                at[p] = rest % n;
                rest /= n;
            }
            // Select the lead dimensions from the highest index down, keeping j and l.
            for (p, &d) in lead.iter().enumerate().rev() {
                o = o.select(d, at[p])?;
                s = s.select(d, at[p])?;
            }
            let (o2, s2) = if j < l {
                (o, s.permute(&[1, 0])?)
            } else {
                (o.permute(&[1, 0])?, s)
            };
            // o2: [nj, nl] (l contiguous in out); s2: [nl, nj] (j contiguous in x).
            for (j0, jn) in blocks(nj, P) {
                for (l0, ln) in blocks(nl, cols) {
                    let t = pool.next(k)?.slice(0, 0..jn)?.slice(1, 0..ln)?;
                    let sv = s2.slice(0, l0..l0 + ln)?.slice(1, j0..j0 + jn)?;
                    k.emit(DmaTranspose::new(&t, &sv))?;
                    k.emit(DmaCopy::new(
                        &o2.slice(0, j0..j0 + jn)?.slice(1, l0..l0 + ln)?,
                        &t,
                    ))?;
                }
            }
        }
        Ok(())
    })();
    release(k, [pool], res)
}

fn axis_ok(f: &str, v: &View, axis: usize) -> Result<(), Error> {
    if axis >= v.rank() {
        return Err(err!(
            Invalid,
            "{f}: axis {axis} is out of range for {}",
            v.describe()
        ));
    }
    Ok(())
}

/// Emits `out = concat(ins, axis)` (ONNX `Concat`): the inputs agree with `out` but along
/// `axis`, where their sizes add up to `out`'s.
pub fn concat(k: &mut Kernel, out: &View, ins: &[&View], axis: usize) -> Result<(), Error> {
    let f = "concat";
    hbm_out(k, out, f, "out")?;
    axis_ok(f, out, axis)?;
    let mut off = 0usize;
    let mut parts = Vec::new();
    for (i, v) in ins.iter().enumerate() {
        hbm(k, v, f, "input")?;
        same_dtype(f, v, "input", out)?;
        let (mut a, mut b) = (v.shape(), out.shape());
        if a.len() != b.len() {
            return Err(err!(
                Invalid,
                "{f}: input {i} {} must have out {}'s rank",
                v.describe(),
                out.describe()
            ));
        }
        let n = a[axis];
        a[axis] = 0;
        b[axis] = 0;
        if a != b {
            return Err(err!(
                Invalid,
                "{f}: input {i} {} must match out {} but along axis {axis}",
                v.describe(),
                out.describe()
            ));
        }
        if n > 0 {
            parts.push((off, n, *v));
        }
        off += n;
    }
    if off != out.shape()[axis] {
        return Err(err!(
            Invalid,
            "{f}: the inputs' sizes along axis {axis} add up to {off}, out {} has {}",
            out.describe(),
            out.shape()[axis]
        ));
    }
    for (o, n, v) in parts {
        copy(k, &out.slice(axis, o..o + n)?, v)?;
    }
    Ok(())
}

/// Emits `outs[i] = x[…, offᵢ .. offᵢ + sizeᵢ, …]` along `axis` (ONNX `Split`): the outputs'
/// sizes along `axis` add up to `x`'s.
pub fn split(k: &mut Kernel, outs: &[&View], x: &View, axis: usize) -> Result<(), Error> {
    let f = "split";
    hbm(k, x, f, "x")?;
    axis_ok(f, x, axis)?;
    let total: usize = outs
        .iter()
        .map(|o| o.shape().get(axis).copied().unwrap_or(0))
        .sum();
    if total != x.shape()[axis] {
        return Err(err!(
            Invalid,
            "{f}: the outputs' sizes along axis {axis} add up to {total}, x {} has {}",
            x.describe(),
            x.shape()[axis]
        ));
    }
    let mut off = 0;
    for o in outs {
        let n = o.shape()[axis];
        if n > 0 {
            let src = x.slice(axis, off..off + n)?;
            same_dtype(f, x, "x", o)?;
            copy(k, o, &src)?;
        }
        off += n;
    }
    Ok(())
}

/// Emits `out[i₀, i₁, …] = x[start₀ + i₀·step₀, start₁ + i₁·step₁, …]` (ONNX `Slice` with its
/// starts clamped and normalised, one `(start, step)` per dimension of `x`, `step ≠ 0`,
/// negative steps walking backwards; `out`'s shape gives the counts). Every index read must
/// be inside `x`.
pub fn slice(k: &mut Kernel, out: &View, x: &View, spec: &[(usize, isize)]) -> Result<(), Error> {
    let f = "slice";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    same_dtype(f, x, "x", out)?;
    let (xs, os) = (x.shape(), out.shape());
    if spec.len() != xs.len() || os.len() != xs.len() {
        return Err(err!(
            Invalid,
            "{f}: x {}, out {} and the {} (start, step) pairs must have one rank",
            x.describe(),
            out.describe(),
            spec.len()
        ));
    }
    for (d, (&(s, st), (&n, &m))) in spec.iter().zip(xs.iter().zip(&os)).enumerate() {
        let last = m
            .checked_sub(1)
            .map(|c| s as isize + c as isize * st)
            .unwrap_or(s as isize);
        if st == 0 || (m > 0 && (s >= n || last < 0 || last >= n as isize)) {
            return Err(err!(
                Invalid,
                "{f}: dimension {d}: start {s}, step {st}, {m} elements reach outside x {} \
                 (size {n})",
                x.describe()
            ));
        }
    }
    if out.elems() == 0 {
        return Ok(());
    }
    // Positive steps are views; reversed dimensions are walked one index at a time.
    let mut src = x.clone();
    for (d, &(s, st)) in spec.iter().enumerate() {
        if st > 0 {
            src = src.slice_step(d, s..s + (os[d] - 1) * st as usize + 1, st as usize)?;
        }
    }
    let rev: Vec<usize> = (0..spec.len()).filter(|&d| spec[d].1 < 0).collect();
    reversed(k, out, &src, spec, &rev)
}

fn reversed(
    k: &mut Kernel,
    out: &View,
    src: &View,
    spec: &[(usize, isize)],
    rev: &[usize],
) -> Result<(), Error> {
    let Some((&d, rest)) = rev.split_first() else {
        return copy(k, out, src);
    };
    let (s, st) = spec[d];
    for i in 0..out.shape()[d] {
        let at = (s as isize + i as isize * st) as usize;
        let o = out.slice(d, i..=i)?;
        let x = src.slice(d, at..=at)?;
        reversed(k, &o, &x, spec, rest)?;
    }
    Ok(())
}

/// How [`pad`] fills.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    /// A constant (rounded to `out`'s dtype; an integer for int32).
    Constant(f64),
    /// The nearest edge value repeated.
    Edge,
    /// Mirrored without repeating the edge (`[a b c]` padded by 2: `c b a b c b a`).
    Reflect,
}

/// Fills `v` (an HBM view) with `value`: one memset tile stored over its blocks.
fn fill(k: &mut Kernel, v: &View, value: f64) -> Result<(), Error> {
    if v.elems() == 0 {
        return Ok(());
    }
    let parts = row_blocks(v, COLS)?;
    let (rows, cols) = parts.iter().fold((1, 1), |(r, c), b| {
        (r.max(b.partitions()), c.max(b.free_elems()))
    });
    k.scope(|k| {
        let t = k.sbuf_tile("pad_fill", v.dtype(), &[rows, cols])?;
        k.memset(&t, value)?;
        for b in &parts {
            let (rn, cn) = (b.partitions(), b.free_elems());
            let mut tv = t.slice(0, 0..rn)?.slice(1, 0..cn)?;
            if b.rank() < 2 {
                tv = tv.reshape(&[rn, cn])?;
            }
            k.emit(DmaCopy::new(b, &tv))?;
        }
        Ok(())
    })
}

/// Emits `out = pad(x, pads, mode)` (ONNX `Pad`): `pads[d] = (before, after)` elements of
/// dimension `d` (negative: cropped), `out.shape[d] = x.shape[d] + before + after`. Edge and
/// reflect need every cropped dimension non-empty, reflect pads smaller than the size.
pub fn pad(
    k: &mut Kernel,
    out: &View,
    x: &View,
    pads: &[(isize, isize)],
    mode: PadMode,
) -> Result<(), Error> {
    let f = "pad";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    same_dtype(f, x, "x", out)?;
    let (xs, os) = (x.shape(), out.shape());
    let r = xs.len();
    let mut src = x.clone();
    let mut inner = Vec::with_capacity(r);
    for d in 0..r {
        let (b, a) = pads.get(d).copied().unwrap_or((0, 0));
        let want = xs[d] as isize + b + a;
        let (c0, c1) = ((-b).max(0) as usize, (-a).max(0) as usize);
        if pads.len() != r || os.len() != r || want != os[d] as isize || c0 + c1 > xs[d] {
            return Err(err!(
                Invalid,
                "{f}: out {} must be x {} padded by {pads:?} (one (before, after) per dimension)",
                out.describe(),
                x.describe()
            ));
        }
        let n = xs[d] - c0 - c1;
        if n < xs[d] && n > 0 {
            src = src.slice(d, c0..c0 + n)?;
        }
        let lo = b.max(0) as usize;
        inner.push((lo, n, a.max(0) as usize));
        let (hi, needs) = (a.max(0) as usize, lo.max(a.max(0) as usize));
        let bad = match mode {
            PadMode::Constant(_) => false,
            PadMode::Edge => needs > 0 && n == 0,
            PadMode::Reflect => needs > 0 && needs >= n,
        };
        if bad {
            return Err(err!(
                Invalid,
                "{f}: {mode:?} padding of dimension {d} by ({lo}, {hi}) needs {} elements of                  x {} there, it has {n}",
                if mode == PadMode::Reflect {
                    "more input than pad"
                } else {
                    "some"
                },
                x.describe()
            ));
        }
    }
    if out.elems() == 0 {
        return Ok(());
    }
    if inner.iter().all(|&(_, n, _)| n > 0) {
        let mut interior = out.clone();
        for (d, &(lo, n, _)) in inner.iter().enumerate() {
            interior = interior.slice(d, lo..lo + n)?;
        }
        copy(k, &interior, &src)?;
    }
    // The border, dimension by dimension: earlier dimensions full, later ones interior.
    for d in 0..r {
        let (lo, n, hi) = inner[d];
        if lo == 0 && hi == 0 {
            continue;
        }
        let mut slab = out.clone();
        for (e, &(l2, n2, _)) in inner.iter().enumerate() {
            if e > d && n2 > 0 {
                slab = slab.slice(e, l2..l2 + n2)?;
            }
        }
        match mode {
            PadMode::Constant(v) => {
                let empty_later = inner[d + 1..].iter().any(|&(_, n2, _)| n2 == 0);
                if empty_later {
                    continue;
                }
                if lo > 0 {
                    fill(k, &slab.slice(d, 0..lo)?, v)?;
                }
                if hi > 0 {
                    fill(k, &slab.slice(d, lo + n..lo + n + hi)?, v)?;
                }
            }
            PadMode::Edge => {
                if lo > 0 {
                    let s = slab.slice(d, lo..=lo)?.broadcast(d, lo)?;
                    copy(k, &slab.slice(d, 0..lo)?, &s)?;
                }
                if hi > 0 {
                    let e = lo + n - 1;
                    let s = slab.slice(d, e..=e)?.broadcast(d, hi)?;
                    copy(k, &slab.slice(d, lo + n..lo + n + hi)?, &s)?;
                }
            }
            PadMode::Reflect => {
                for i in 0..lo {
                    let (dst, at) = (lo - 1 - i, lo + 1 + i);
                    copy(k, &slab.slice(d, dst..=dst)?, &slab.slice(d, at..=at)?)?;
                }
                for i in 0..hi {
                    let (dst, at) = (lo + n + i, lo + n - 2 - i);
                    copy(k, &slab.slice(d, dst..=dst)?, &slab.slice(d, at..=at)?)?;
                }
            }
        }
    }
    Ok(())
}

/// Emits `out = x` broadcast to `out`'s shape (ONNX `Expand`, NumPy rules).
pub fn expand(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    same_dtype("expand", x, "x", out)?;
    let spec = MapSpec {
        name: "expand",
        load: vec![x.dtype()],
        out_tile: out.dtype(),
        store_as: out.dtype(),
    };
    map(k, &spec, out, &[x], &mut |k, b: &Block| {
        k.tensor_copy(&b.out, &b.ins[0])
    })
}

/// Emits `out = tile(x, repeats)` (ONNX `Tile`): `out.shape[d] = x.shape[d] · repeats[d]`;
/// `out` contiguous.
pub fn tile(k: &mut Kernel, out: &View, x: &View, repeats: &[usize]) -> Result<(), Error> {
    let f = "tile";
    let (xs, os) = (x.shape(), out.shape());
    if repeats.len() != xs.len()
        || os.len() != xs.len()
        || xs
            .iter()
            .zip(repeats)
            .zip(&os)
            .any(|((a, r), o)| a.checked_mul(*r) != Some(*o))
    {
        return Err(err!(
            Invalid,
            "{f}: out {} must be x {} repeated {repeats:?} times",
            out.describe(),
            x.describe()
        ));
    }
    // out as [r₀, s₀, r₁, s₁, …] against x as [1, s₀, 1, s₁, …].
    let mut oshape = Vec::new();
    for (r, s) in repeats.iter().zip(&xs) {
        oshape.push(*r);
        oshape.push(*s);
    }
    let ov = out
        .reshape(&oshape)
        .map_err(|e| err!(Invalid, "{f}: out must be contiguous: {}", e.message()))?;
    let mut xv = x.clone();
    xv.dims = x
        .dims
        .iter()
        .flat_map(|d| [Dim { size: 1, stride: 0 }, *d])
        .collect();
    expand(k, &ov, &xv)
}

/// Emits `out = x.take(indices, axis)` for indices known when the kernel is built (ONNX
/// `Gather` with a constant index tensor, flattened; negative indices count from the end):
/// `out.shape = x.shape` with `shape[axis] = indices.len()`. Runs of consecutive indices
/// move as one copy.
pub fn gather_const(
    k: &mut Kernel,
    out: &View,
    x: &View,
    axis: usize,
    indices: &[i64],
) -> Result<(), Error> {
    let f = "gather";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    axis_ok(f, x, axis)?;
    same_dtype(f, x, "x", out)?;
    let n = x.shape()[axis] as i64;
    let mut want = x.shape();
    want[axis] = indices.len();
    if out.shape() != want {
        return Err(err!(
            Invalid,
            "{f}: out {} must have shape {want:?}",
            out.describe()
        ));
    }
    let mut idx = Vec::with_capacity(indices.len());
    for &i in indices {
        let j = if i < 0 { i + n } else { i };
        if !(0..n).contains(&j) {
            return Err(err!(
                Invalid,
                "{f}: index {i} is out of range for axis {axis} of x {}",
                x.describe()
            ));
        }
        idx.push(j as usize);
    }
    let mut o = 0;
    while o < idx.len() {
        let mut e = o + 1;
        while e < idx.len() && idx[e] == idx[e - 1] + 1 {
            e += 1;
        }
        copy(
            k,
            &out.slice(axis, o..e)?,
            &x.slice(axis, idx[o]..idx[o] + (e - o))?,
        )?;
        o = e;
    }
    Ok(())
}
