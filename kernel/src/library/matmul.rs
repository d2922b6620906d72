//! Tiled matmul: `out[M, N] = a[M, K] · b[K, N]` for any M, K, N ≥ 1, inputs fp32, bf16 or
//! fp16 (`a` and `b` of one dtype), `out` any float dtype (fp32, or the input dtype).
//!
//! # Tiling and buffering
//!
//! TensorE contracts over the partition dimension: `nc_matmul(psum[m, n], stationary[k, m],
//! moving[k, n])` with k ≤ 128, m ≤ 128, n ≤ 512. For each block of 128 rows of `out` the
//! kernel loads `aᵀ` for every K tile into one SBUF tile `[128, K tiles, 128]` (by
//! `dma_transpose`, or a plain copy when `a` is given transposed, [`MatmulOpts::a_transposed`]);
//! then for each block of 512 columns it streams the `b` tiles `[128, 512]` through a pool
//! of three buffers, multiplies each into a PSUM tile (the first K tile overwrites, later ones
//! accumulate), evacuates the PSUM tile to SBUF in `out`'s dtype (VectorE and ScalarE in
//! turn) and stores it. The `aᵀ` tiles, PSUM tiles and output tiles are double-buffered, so
//! the DMA queues load the next tiles while TensorE multiplies and VectorE/ScalarE evacuate
//! the previous block: the engines overlap.
//!
//! # Numerics (bit-reproducible)
//!
//! Each output element is `Σ_t S_t` over the K tiles `t` in order, where `S_t` is the sum over
//! the tile's k in increasing order, from +0, of the fp32 products (each product rounded,
//! each addition rounded: the ISA's matmul rule); the tile sums are added in order in PSUM
//! (`S_0 + S_1`, then `+ S_2`, …, one rounding each); the result is rounded once to `out`'s
//! dtype. A reference that computes exactly that agrees bit for bit.
//!
//! # Limits
//!
//! The `aᵀ` tiles need `2 · ⌈K/128⌉ · 128 · size(dtype)` bytes per partition (K up to about
//! 90 000 in bf16); beyond that the allocation fails with `NRT_RESOURCE`.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, EngineId, Program};

use super::util::{P, blocks, build_with, float, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{DmaCopy, DmaTranspose, NcMatmul, TensorCopy};
use crate::view::View;

/// Columns of `out` per PSUM tile (one 2 KiB bank of fp32).
pub const N_TILE: usize = 512;

/// Options of [`matmul`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MatmulOpts {
    /// `a` is given as `aᵀ`, `[K, M]` (NKI's `lhsT` layout): loaded by plain copies instead of
    /// transposing DMAs.
    pub a_transposed: bool,
}

/// Emits `out = a · b` (see the module documentation): `a` `[M, K]` (or `[K, M]` with
/// [`MatmulOpts::a_transposed`]), `b` `[K, N]`, `out` `[M, N]`, all HBM views.
pub fn matmul(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
) -> Result<(), Error> {
    let f = "matmul";
    hbm(k, a, f, "a")?;
    hbm(k, b, f, "b")?;
    hbm_out(k, out, f, "out")?;
    for (v, role) in [(a, "a"), (b, "b"), (out, "out")] {
        float(v, f, role)?;
        if v.rank() != 2 {
            return Err(err!(Invalid, "{f}: {role} {} must be 2-D", v.describe()));
        }
    }
    if a.dtype() != b.dtype() {
        return Err(err!(
            Invalid,
            "{f}: a {} and b {} must have the same dtype",
            a.describe(),
            b.describe()
        ));
    }
    let (sa, sb, so) = (a.shape(), b.shape(), out.shape());
    let (m, kd) = if opts.a_transposed {
        (sa[1], sa[0])
    } else {
        (sa[0], sa[1])
    };
    if sb[0] != kd || so != [m, sb[1]] {
        return Err(err!(
            Invalid,
            "{f}: shapes do not chain: a {} ({}), b {}, out {} (want b [{kd}, N], out [{m}, N])",
            a.describe(),
            if opts.a_transposed {
                "[K, M]"
            } else {
                "[M, K]"
            },
            b.describe(),
            out.describe()
        ));
    }
    let n = sb[1];
    let dt = a.dtype();
    let kt = kd.div_ceil(P);
    let (mp, kp, nt) = (P.min(m), P.min(kd), N_TILE.min(n));
    let mut at = k.tile_pool("mm_aT", Memory::Sbuf, dt, &[kp, kt, mp], 2)?;
    let mut bt = match k.tile_pool("mm_b", Memory::Sbuf, dt, &[kp, nt], 3) {
        Ok(p) => p,
        Err(e) => return release(k, [at], Err(e)),
    };
    let mut ps = match k.tile_pool("mm_psum", Memory::Psum, DType::F32, &[mp, nt], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [at, bt], Err(e)),
    };
    let mut ot = match k.tile_pool("mm_out", Memory::Sbuf, out.dtype(), &[mp, nt], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [at, bt, ps], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        let mut evac = 0usize;
        for (m0, mn) in blocks(m, P) {
            let a_t = at.next(k)?;
            let stationary = |i: usize, kn: usize| -> Result<View, Error> {
                a_t.slice(0, 0..kn)?.select(1, i)?.slice(1, 0..mn)
            };
            for (i, (k0, kn)) in blocks(kd, P).enumerate() {
                let dst = stationary(i, kn)?;
                if opts.a_transposed {
                    let src = a.slice(0, k0..k0 + kn)?.slice(1, m0..m0 + mn)?;
                    k.emit(DmaCopy::new(&dst, &src))?;
                } else {
                    let src = a.slice(0, m0..m0 + mn)?.slice(1, k0..k0 + kn)?;
                    k.emit(DmaTranspose::new(&dst, &src))?;
                }
            }
            for (n0, nn) in blocks(n, N_TILE) {
                let acc = ps.next(k)?;
                let accv = acc.slice(0, 0..mn)?.slice(1, 0..nn)?;
                for (i, (k0, kn)) in blocks(kd, P).enumerate() {
                    let b_t = bt.next(k)?;
                    let bv = b_t.slice(0, 0..kn)?.slice(1, 0..nn)?;
                    k.emit(DmaCopy::new(
                        &bv,
                        &b.slice(0, k0..k0 + kn)?.slice(1, n0..n0 + nn)?,
                    ))?;
                    k.emit(NcMatmul {
                        dst: &accv,
                        stationary: &stationary(i, kn)?,
                        moving: &bv,
                        accumulate: Some(i > 0),
                    })?;
                }
                let o = ot.next(k)?;
                let ov = o.slice(0, 0..mn)?.slice(1, 0..nn)?;
                let engine = if evac % 2 == 0 {
                    EngineId::Vector
                } else {
                    EngineId::Scalar
                };
                evac += 1;
                k.emit(TensorCopy {
                    dst: &ov,
                    src: &accv,
                    engine: Some(engine),
                })?;
                let dst = out.slice(0, m0..m0 + mn)?.slice(1, n0..n0 + nn)?;
                k.emit(DmaCopy::new(&dst, &ov))?;
            }
        }
        Ok(())
    })();
    release(k, [at, bt, ps, ot], r)
}

/// A kernel `matmul` with inputs `a` `[m, kd]` (`[kd, m]` with `opts.a_transposed`) and `b`
/// `[kd, n]` of `dtype`, and output `out` `[m, n]` of `out_dtype`.
pub fn build(
    m: usize,
    kd: usize,
    n: usize,
    dtype: DType,
    out_dtype: DType,
    opts: &MatmulOpts,
) -> Result<Program, Error> {
    let a_shape = if opts.a_transposed { [kd, m] } else { [m, kd] };
    build_with(
        "matmul",
        &[("a", dtype, &a_shape), ("b", dtype, &[kd, n])],
        ("out", out_dtype, &[m, n]),
        |k, o, ins| matmul(k, o, &ins[0], &ins[1], opts),
    )
}
