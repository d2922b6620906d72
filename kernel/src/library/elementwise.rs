//! Element-wise binary operations with NumPy broadcasting over HBM tensors of rank ≤ 4 (any
//! rank, and `power`, through [`pointwise::binary_any`](super::pointwise::binary_any)):
//! `out = a op b` for any [`AluOp`] the ISA's `tensor_tensor` takes.
//!
//! # Broadcasting
//!
//! NumPy's rule: the shapes are aligned at their last dimension; each dimension of `a` and
//! `b` is either `out`'s size or 1 (or missing: a leading 1). `out`'s shape must be the
//! broadcast shape (nothing is broadcast into `out`).
//!
//! # Tiling
//!
//! * **Same shapes** (`a`, `b` and `out` of one shape, each contiguous): the elements are
//!   taken as one flat vector laid out over 128 partitions in blocks of up to
//!   [`FREE`] columns (the remainder as one column on fewer partitions); per block two loads,
//!   one `tensor_tensor`, one store, through pools of three tiles so loads, compute and
//!   stores of consecutive blocks overlap.
//! * **Broadcasting**: shapes padded to rank 4 `[s0, s1, s2, s3]`; for each `(i0, i1)` the
//!   `[s2, s3]` plane is tiled 128 rows × [`FREE`] columns. An operand broadcast along the
//!   rows is read with a stride-0 partition pattern (each partition loads the same row); an
//!   operand broadcast along the last dimension is loaded as one value per row `[rows, 1]`
//!   and applied with `tensor_scalar` and a per-partition operand (`reverse0` when it is `a`),
//!   which reads no repeated data.
//!
//! # Numerics
//!
//! Exactly `tensor_tensor`'s (or `tensor_scalar`'s, which computes the same): fp32 unless
//! every operand is int32 (then int32, wrapping), one rounding per operation, the canonical
//! NaN, then one rounding to `out`'s dtype. Operands are read in their own dtypes (no
//! conversion on the way in). Bit-exact against `alu(op, a, b)` rounded to `out`'s dtype.
//! `power` runs on GpSimdE (the ISA's only engine for it), everything else on VectorE.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType, Program};

use super::util::{P, blocks, build_with, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{DmaCopy, TensorScalarChain, TensorTensor};
use crate::view::{Dim, View};

/// Columns per tile.
pub const FREE: usize = 2048;

/// The NumPy broadcast shape of `a` and `b`, if they broadcast.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        let pad = r - s.len();
        if i < pad { 1 } else { s[i - pad] }
    };
    (0..r)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// `v` with size-1 dimensions in front up to rank 4, then broadcast to `shape` (rank 4).
fn expand(v: &View, shape: &[usize; 4]) -> Result<View, Error> {
    let mut w = v.clone();
    while w.dims.len() < 4 {
        w.dims.insert(0, Dim { size: 1, stride: 1 });
    }
    for (d, &s) in shape.iter().enumerate() {
        if w.dims[d].size != s {
            w = w.broadcast(d, s)?;
        }
    }
    Ok(w)
}

/// Emits `out = a op b` with broadcasting (see the module documentation).
pub fn binary(k: &mut Kernel, out: &View, a: &View, b: &View, op: AluOp) -> Result<(), Error> {
    let f = "binary";
    hbm(k, a, f, "a")?;
    hbm(k, b, f, "b")?;
    hbm_out(k, out, f, "out")?;
    if op == AluOp::Power || [a, b, out].iter().any(|v| v.rank() > 4) {
        // GpSimdE's power has no per-partition scalar form, and ranks above 4 need the
        // general canonical tiling: both through `pointwise::binary_any`.
        if broadcast_shape(&a.shape(), &b.shape()).as_deref() == Some(&out.shape()[..]) {
            return super::pointwise::binary_any(k, out, a, b, op);
        }
    }
    for (v, role) in [(a, "a"), (b, "b"), (out, "out")] {
        if v.rank() == 0 || v.rank() > 4 {
            return Err(err!(
                Invalid,
                "{f}: {role} {} must have rank 1 to 4",
                v.describe()
            ));
        }
    }
    let want = broadcast_shape(&a.shape(), &b.shape());
    if want.as_deref() != Some(&out.shape()[..]) {
        return Err(err!(
            Invalid,
            "{f}: a {} and b {} do not broadcast to out {}{}",
            a.describe(),
            b.describe(),
            out.describe(),
            match want {
                Some(s) => format!(" (their broadcast shape is {s:?})"),
                None => String::new(),
            }
        ));
    }
    let n = out.elems();
    let flat = |v: &View| v.reshape(&[n]).ok();
    if a.shape() == out.shape() && b.shape() == out.shape() {
        if let (Some(fa), Some(fb), Some(fo)) = (flat(a), flat(b), flat(out)) {
            return same_shape(k, &fo, &fa, &fb, op);
        }
    }
    let mut s = [1usize; 4];
    let os = out.shape();
    s[4 - os.len()..].copy_from_slice(&os);
    let (a4, b4, o4) = (expand(a, &s)?, expand(b, &s)?, expand(out, &s)?);
    let col_a = a4.dims[3].stride == 0 && s[3] > 1;
    let col_b = b4.dims[3].stride == 0 && s[3] > 1;
    let cols = FREE.min(s[3]);
    let rows = P.min(s[2]);
    let pool = |k: &mut Kernel, name: &str, v: &View, c: usize| {
        k.tile_pool(name, Memory::Sbuf, v.dtype(), &[rows, c], 3)
    };
    let mut pa = pool(k, "binary_a", a, if col_a { 1 } else { cols })?;
    let mut pb = match pool(k, "binary_b", b, if col_b { 1 } else { cols }) {
        Ok(p) => p,
        Err(e) => return release(k, [pa], Err(e)),
    };
    let mut po = match pool(k, "binary_out", out, cols) {
        Ok(p) => p,
        Err(e) => return release(k, [pa, pb], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        for i0 in 0..s[0] {
            for i1 in 0..s[1] {
                let plane = |v: &View| v.select(0, i0)?.select(0, i1);
                let (ap, bp, op_) = (plane(&a4)?, plane(&b4)?, plane(&o4)?);
                for (r0, rn) in blocks(s[2], P) {
                    for (c0, cn) in blocks(s[3], FREE) {
                        let block = |v: &View, bcast: bool| {
                            let c = if bcast { 0..1 } else { c0..c0 + cn };
                            v.slice(0, r0..r0 + rn)?.slice(1, c)
                        };
                        let load = |k: &mut Kernel, pool: &mut crate::TilePool, v: &View, bcast| {
                            let t = pool.next(k)?;
                            let tv = t.slice(0, 0..rn)?.slice(1, 0..if bcast { 1 } else { cn })?;
                            k.emit(DmaCopy::new(&tv, &block(v, bcast)?))?;
                            Ok::<View, Error>(tv)
                        };
                        let at = load(k, &mut pa, &ap, col_a)?;
                        let bt = load(k, &mut pb, &bp, col_b)?;
                        let ot = po.next(k)?;
                        let ov = ot.slice(0, 0..rn)?.slice(1, 0..cn)?;
                        if col_a {
                            k.emit(TensorScalarChain {
                                reverse0: true,
                                ..TensorScalarChain::new(&ov, &bt, op, &at)
                            })?;
                        } else if col_b {
                            k.emit(TensorScalarChain::new(&ov, &at, op, &bt))?;
                        } else {
                            emit_tt(k, &ov, &at, &bt, op)?;
                        }
                        k.emit(DmaCopy::new(&block(&op_, false)?, &ov))?;
                    }
                }
            }
        }
        Ok(())
    })();
    release(k, [pa, pb, po], r)
}

fn emit_tt(k: &mut Kernel, o: &View, a: &View, b: &View, op: AluOp) -> Result<(), Error> {
    k.emit(TensorTensor {
        dst: o,
        data1: a,
        data2: b,
        op,
        engine: None,
    })
}

/// Flat vectors of `n` elements: `[128, n / 128]` in column blocks, then the remainder as
/// `[n % 128, 1]`.
fn same_shape(k: &mut Kernel, o: &View, a: &View, b: &View, op: AluOp) -> Result<(), Error> {
    let n = o.elems();
    let (main, rem) = (n / P * P, n % P);
    let per = main / P;
    let cols = FREE.min(per).max(1);
    let rows = if main > 0 { P } else { rem };
    let mk = |k: &mut Kernel, name: &str, dt: DType| {
        k.tile_pool(name, Memory::Sbuf, dt, &[rows, cols], 3)
    };
    let mut pa = mk(k, "binary_a", a.dtype())?;
    let mut pb = match mk(k, "binary_b", b.dtype()) {
        Ok(p) => p,
        Err(e) => return release(k, [pa], Err(e)),
    };
    let mut po = match mk(k, "binary_out", o.dtype()) {
        Ok(p) => p,
        Err(e) => return release(k, [pa, pb], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        let mut parts: Vec<(View, View, View, usize, usize)> = Vec::new();
        if main > 0 {
            let m2 = |v: &View| v.slice(0, 0..main)?.reshape(&[P, per]);
            let (am, bm, om) = (m2(a)?, m2(b)?, m2(o)?);
            for (c0, cn) in blocks(per, cols) {
                let blk = |v: &View| v.slice(1, c0..c0 + cn);
                parts.push((blk(&am)?, blk(&bm)?, blk(&om)?, P, cn));
            }
        }
        if rem > 0 {
            let r2 = |v: &View| v.slice(0, main..n)?.reshape(&[rem, 1]);
            parts.push((r2(a)?, r2(b)?, r2(o)?, rem, 1));
        }
        for (av, bv, ov, rn, cn) in parts {
            let tile = |k: &mut Kernel, pool: &mut crate::TilePool| -> Result<View, Error> {
                pool.next(k)?.slice(0, 0..rn)?.slice(1, 0..cn)
            };
            let (at, bt, ot) = (tile(k, &mut pa)?, tile(k, &mut pb)?, tile(k, &mut po)?);
            k.emit(DmaCopy::new(&at, &av))?;
            k.emit(DmaCopy::new(&bt, &bv))?;
            emit_tt(k, &ot, &at, &bt, op)?;
            k.emit(DmaCopy::new(&ov, &ot))?;
        }
        Ok(())
    })();
    release(k, [pa, pb, po], r)
}

/// A kernel `binary` with inputs `a`, `b` and output `out` of the given shapes and dtypes
/// (`out`'s shape is the broadcast shape).
pub fn build(
    a: (&[usize], DType),
    b: (&[usize], DType),
    out_dtype: DType,
    op: AluOp,
) -> Result<Program, Error> {
    let shape = broadcast_shape(a.0, b.0).ok_or_else(|| {
        err!(
            Invalid,
            "binary: shapes {:?} and {:?} do not broadcast",
            a.0,
            b.0
        )
    })?;
    build_with(
        "binary",
        &[("a", a.1, a.0), ("b", b.1, b.0)],
        ("out", out_dtype, &shape),
        |k, o, ins| binary(k, o, &ins[0], &ins[1], op),
    )
}
