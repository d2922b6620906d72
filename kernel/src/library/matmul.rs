//! Tiled matmul: `out[M, N] = a[M, K] · b[K, N]` for any M, K, N ≥ 1, inputs fp32, bf16 or
//! fp16 (`a` and `b` of one dtype), `out` any float dtype (fp32, or the input dtype).
//!
//! # Tiling and buffering
//!
//! TensorE contracts over the partition dimension: `nc_matmul(psum[m, n], stationary[k, m],
//! moving[k, n])` with k ≤ 128, m ≤ 128, n ≤ 512; `aᵀ` is the stationary operand, loaded by
//! `dma_transpose` (or by plain copies when `a` is given transposed,
//! [`MatmulOpts::a_transposed`]). Two schedules ([`Schedule`]):
//!
//! * **Resident** (chosen when `aᵀ`, two `b` blocks and two output blocks fit
//!   [`RESIDENT_BYTES`] per partition): `aᵀ` for all of M is loaded once into one SBUF tile
//!   `[128, K tiles, M]` (one transposing DMA per K tile); `b` is loaded once, in blocks of
//!   all K rows × up to 2048 columns through a pool of two (the next block loads while this
//!   one is multiplied); for each block and each 128 rows of `out`, each 512 columns are
//!   multiplied into a PSUM tile (the first K tile overwrites, later ones accumulate) and
//!   evacuated (VectorE and ScalarE in turn) into one output tile as wide as the block,
//!   stored by one DMA. Every input byte moves once, in few large transfers (the DMA
//!   engines' fixed costs per transfer and per descriptor dominate small ones).
//! * **Streamed** (otherwise), written with explicit loops ([`Kernel::for_range`]) so that
//!   its program and build time do not grow with the shape (8192³ bf16: 7,960
//!   instructions, built in 20–45 ms): for each group of up to [`GROUP`] × 128 rows of `out`, `aᵀ` for all K into a
//!   tile `[128, K tiles, rows]`; for each 512 columns, the `b` tiles `[128, 512]` stream
//!   through two buffers (a loop over pairs of K tiles), each multiplied into the group's
//!   row tiles (one PSUM tile each) as it arrives; then each row tile is evacuated (VectorE
//!   and ScalarE in turn) and stored. `b` is read once per group of rows.
//!
//! PSUM and output tiles are double-buffered in both, so the DMA queues, TensorE and the
//! evacuating engines work on consecutive blocks at once.
//!
//! # Numerics (bit-reproducible)
//!
//! Each output element is `Σ_t S_t` over the K tiles `t` in order, where `S_t` is the sum over
//! the tile's k in increasing order, from +0, of the products, one fused multiply-add per step
//! (one rounding each: the ISA's matmul rule); the tile sums are added in order in PSUM
//! (`S_0 + S_1`, then `+ S_2`, …, one rounding each); the result is rounded once to `out`'s
//! dtype. A reference that computes exactly that agrees bit for bit.
//!
//! # Limits
//!
//! The streamed schedule's `aᵀ` tile needs `⌈K/128⌉ · rows · size(dtype)` bytes per
//! partition for a group of `rows` (512, or 256 or 128 when that does not fit
//! [`STREAMED_BYTES`]): K up to about 80 000 in bf16; beyond that the allocation fails with
//! `NRT_RESOURCE`.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, EngineId, Program};

use super::util::{P, blocks, build_with, float, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{ActBias, DmaCopy, DmaTranspose, NcMatmul, TensorCopy};
use crate::view::View;

/// Columns of `out` per PSUM tile (one 2 KiB bank of fp32).
pub const N_TILE: usize = 512;

/// SBUF bytes per partition the resident schedule may use for `aᵀ`, two `b` blocks and two
/// output blocks.
pub const RESIDENT_BYTES: usize = 96 * 1024;

/// Options of [`matmul`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MatmulOpts {
    /// `a` is given as `aᵀ`, `[K, M]` (NKI's `lhsT` layout): loaded by plain copies instead of
    /// transposing DMAs.
    pub a_transposed: bool,
    /// `b` is given as `bᵀ`, `[N, K]` (ONNX `Gemm`'s `transB`, a PyTorch `Linear` weight):
    /// loaded by transposing DMAs instead of plain copies.
    pub b_transposed: bool,
    /// Which schedule (see the module documentation).
    pub schedule: Schedule,
}

/// The loop schedule of [`matmul`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// Resident when it fits [`RESIDENT_BYTES`], streamed otherwise.
    #[default]
    Auto,
    /// `aᵀ` loaded once and kept; `b` loaded once, a block of up to 2048 columns at a time
    /// (forced on a shape that does not fit, the allocation fails with `NRT_RESOURCE`).
    Resident,
    /// `aᵀ` per block of 128 rows; `b` streamed per K tile, once per block of rows.
    Streamed,
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
    matmul_with(k, out, a, b, opts, None, None)
}

/// [`matmul`] with an epilogue: `bias` an SBUF fp32 tile `[min(M, 128), N]` (the bias row on
/// every partition), `act` a function applied last.
fn matmul_with(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    bias: Option<View>,
    act: Option<ActFn>,
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
    let (bk, n) = if opts.b_transposed {
        (sb[1], sb[0])
    } else {
        (sb[0], sb[1])
    };
    if bk != kd || so != [m, n] {
        return Err(err!(
            Invalid,
            "{f}: shapes do not chain: a {} ({}), b {}, out {} (want b {}, out [{m}, N])",
            a.describe(),
            if opts.a_transposed {
                "[K, M]"
            } else {
                "[M, K]"
            },
            b.describe(),
            out.describe(),
            if opts.b_transposed {
                format!("[N, {kd}]")
            } else {
                format!("[{kd}, N]")
            },
        ));
    }
    let kt = kd.div_ceil(P);
    let (ds, nt) = (a.dtype().size(), N_TILE.min(n));
    // The widest block of b (columns) the resident schedule can double-buffer.
    let ods = out.dtype().size();
    let fits = |w: usize| kt * m * ds + 2 * kt * w * ds + 2 * w * ods <= RESIDENT_BYTES;
    let bw = [4 * N_TILE, 2 * N_TILE, N_TILE]
        .into_iter()
        .map(|w| w.min(n))
        .find(|&w| fits(w));
    let resident = match opts.schedule {
        Schedule::Auto => bw.is_some(),
        Schedule::Resident => true,
        Schedule::Streamed => false,
    };
    let g = Geometry {
        m,
        kd,
        n,
        kt,
        nt,
        bw: bw.unwrap_or(nt),
        bias,
        act,
    };
    run(k, out, a, b, opts, g, resident)
}

fn run(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    g: Geometry,
    resident: bool,
) -> Result<(), Error> {
    if resident {
        k.scope(|k| resident_a(k, out, a, b, opts, &g))
    } else {
        streamed(k, out, a, b, opts, &g)
    }
}

/// What [`matmul_fused`] applies to each output tile as it leaves PSUM.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// `[N]` (any float dtype), added to every row.
    pub bias: Option<&'a View>,
    /// Applied last (ScalarE).
    pub act: Option<ActFn>,
}

/// Most columns whose bias row is kept on every partition (fp32, 16 KiB per partition).
pub const FUSED_BIAS_COLS: usize = 4096;

/// Emits `out = act(a · b + bias)` — a `Linear` layer, ONNX's `MatMul` + `Add` (+ an
/// activation) — with the bias and the activation applied as each tile is evacuated from
/// PSUM (no extra pass over `out`): VectorE `fl(acc + bias)` into `out`'s dtype, then
/// ScalarE `act` in place (with no bias, ScalarE applies `act` to the fp32 sum directly).
/// With an fp32 `out` the result equals [`matmul`] followed by the broadcasting add and the
/// [`activation`](super::activation::activation), bit for bit. Beyond
/// [`FUSED_BIAS_COLS`] columns the bias and activation are applied by those separate passes.
pub fn matmul_fused(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    epi: &Epilogue<'_>,
) -> Result<(), Error> {
    let f = "matmul";
    let n = out.shape().get(1).copied().unwrap_or(0);
    if let Some(bias) = epi.bias {
        hbm(k, bias, f, "bias")?;
        float(bias, f, "bias")?;
        if bias.shape() != [n] {
            return Err(err!(
                Invalid,
                "{f}: bias {} must be [{n}] (out {}'s columns)",
                bias.describe(),
                out.describe()
            ));
        }
    }
    if epi.bias.is_none() && epi.act.is_none() {
        return matmul(k, out, a, b, opts);
    }
    if n > FUSED_BIAS_COLS {
        matmul(k, out, a, b, opts)?;
        if let Some(bias) = epi.bias {
            super::pointwise::binary_any(k, out, out, bias, AluOp::Add)?;
        }
        if let Some(act) = epi.act {
            super::activation::activation(k, out, out, act)?;
        }
        return Ok(());
    }
    // The plain matmul's checks and schedule, with the epilogue added.
    k.scope(|k| {
        let mp = P.min(out.shape().first().copied().unwrap_or(1).max(1));
        let bias = match epi.bias {
            Some(bv) => {
                let t = k.sbuf_tile("mm_bias", DType::F32, &[mp, n.max(1)])?;
                k.emit(DmaCopy::new(&t, &bv.reshape(&[1, n])?.broadcast(0, mp)?))?;
                Some(t.view().clone())
            }
            None => None,
        };
        matmul_with(k, out, a, b, opts, bias, epi.act)
    })
}

/// Sizes of one matmul.
struct Geometry {
    m: usize,
    kd: usize,
    n: usize,
    kt: usize,
    nt: usize,
    /// Columns of `b` per resident block (a multiple of [`N_TILE`], or N).
    bw: usize,
    /// The epilogue's bias row on every partition (fp32 `[min(M, 128), N]`).
    bias: Option<View>,
    /// The epilogue's activation.
    act: Option<ActFn>,
}

/// Loads `aᵀ[k0..k0 + kn, m0..m0 + mn]` into `dst` `[kn, mn]`.
#[allow(clippy::too_many_arguments)]
fn load_a_t(
    k: &mut Kernel,
    dst: &View,
    a: &View,
    opts: &MatmulOpts,
    m0: usize,
    mn: usize,
    k0: usize,
    kn: usize,
) -> Result<(), Error> {
    if opts.a_transposed {
        let src = a.slice(0, k0..k0 + kn)?.slice(1, m0..m0 + mn)?;
        k.emit(DmaCopy::new(dst, &src))
    } else {
        let src = a.slice(0, m0..m0 + mn)?.slice(1, k0..k0 + kn)?;
        k.emit(DmaTranspose::new(dst, &src))
    }
}

/// Loads `b[k0..k0 + kn, n0..n0 + nn]` into `dst` `[kn, nn]` (from `bᵀ` by a transposing
/// DMA when `b` is given transposed).
#[allow(clippy::too_many_arguments)]
fn load_b(
    k: &mut Kernel,
    dst: &View,
    b: &View,
    opts: &MatmulOpts,
    k0: usize,
    kn: usize,
    n0: usize,
    nn: usize,
) -> Result<(), Error> {
    if opts.b_transposed {
        let src = b.slice(0, n0..n0 + nn)?.slice(1, k0..k0 + kn)?;
        k.emit(DmaTranspose::new(dst, &src))
    } else {
        let src = b.slice(0, k0..k0 + kn)?.slice(1, n0..n0 + nn)?;
        k.emit(DmaCopy::new(dst, &src))
    }
}

/// Copies the PSUM tile `acc` to `dst` (an SBUF view in `out`'s dtype), VectorE and ScalarE
/// in turn.
fn copy_out(
    k: &mut Kernel,
    turn: &mut usize,
    dst: &View,
    acc: &View,
    g: &Geometry,
    col0: usize,
) -> Result<(), Error> {
    let engine = if *turn % 2 == 0 {
        EngineId::Vector
    } else {
        EngineId::Scalar
    };
    *turn += 1;
    match (&g.bias, g.act) {
        (None, None) => k.emit(TensorCopy {
            dst,
            src: acc,
            engine: Some(engine),
        }),
        (None, Some(act)) => k.activation(dst, act, acc, ActBias::None, 1.0),
        (Some(bias), act) => {
            let (mn, nn) = (dst.partitions(), dst.free_elems());
            let bv = bias.slice(0, 0..mn)?.slice(1, col0..col0 + nn)?;
            k.tensor_tensor(dst, acc, &bv, AluOp::Add)?;
            match act {
                Some(act) => k.activation(dst, act, dst, ActBias::None, 1.0),
                None => Ok(()),
            }
        }
    }
}

/// `aᵀ` resident for all of M, loaded once; `b` in blocks of all K rows × 512 columns, each
/// loaded once (double-buffered): every input byte moves once.
fn resident_a(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    g: &Geometry,
) -> Result<(), Error> {
    let dt = a.dtype();
    let (kp, mp) = (P.min(g.kd), P.min(g.m));
    let a_t = k.sbuf_tile("mm_aT", dt, &[kp, g.kt, g.m])?;
    let stationary = |i: usize, kn: usize, m0: usize, mn: usize| -> Result<View, Error> {
        a_t.slice(0, 0..kn)?.select(1, i)?.slice(1, m0..m0 + mn)
    };
    // One load per K tile, all of M at once (fewer, larger transfers).
    for (i, (k0, kn)) in blocks(g.kd, P).enumerate() {
        load_a_t(k, &stationary(i, kn, 0, g.m)?, a, opts, 0, g.m, k0, kn)?;
    }
    let mut bb = k.tile_pool("mm_b", Memory::Sbuf, dt, &[kp, g.kt, g.bw], 2)?;
    let mut ps = match k.tile_pool("mm_psum", Memory::Psum, DType::F32, &[mp, g.nt], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [bb], Err(e)),
    };
    let mut ot = match k.tile_pool("mm_out", Memory::Sbuf, out.dtype(), &[mp, g.bw], 2) {
        Ok(p) => p,
        Err(e) => return release(k, [bb, ps], Err(e)),
    };
    let r = (|| -> Result<(), Error> {
        let mut turn = 0;
        for (w0, wn) in blocks(g.n, g.bw) {
            let b_t = bb.next(k)?;
            let moving = |i: usize, kn: usize, c0: usize, cn: usize| {
                b_t.slice(0, 0..kn)?.select(1, i)?.slice(1, c0..c0 + cn)
            };
            for (i, (k0, kn)) in blocks(g.kd, P).enumerate() {
                load_b(k, &moving(i, kn, 0, wn)?, b, opts, k0, kn, w0, wn)?;
            }
            for (m0, mn) in blocks(g.m, P) {
                // Evacuate each PSUM tile into one output tile as wide as the block: one
                // store per block of rows, with long contiguous rows.
                let o = ot.next(k)?;
                for (c0, nn) in blocks(wn, N_TILE) {
                    let acc_t = ps.next(k)?;
                    let acc = acc_t.slice(0, 0..mn)?.slice(1, 0..nn)?;
                    for (i, (_, kn)) in blocks(g.kd, P).enumerate() {
                        k.emit(NcMatmul {
                            dst: &acc,
                            stationary: &stationary(i, kn, m0, mn)?,
                            moving: &moving(i, kn, c0, nn)?,
                            accumulate: Some(i > 0),
                        })?;
                    }
                    let ov = o.slice(0, 0..mn)?.slice(1, c0..c0 + nn)?;
                    copy_out(k, &mut turn, &ov, &acc, g, w0 + c0)?;
                }
                let ov = o.slice(0, 0..mn)?.slice(1, 0..wn)?;
                let dst = out.slice(0, m0..m0 + mn)?.slice(1, w0..w0 + wn)?;
                k.emit(DmaCopy::new(&dst, &ov))?;
            }
        }
        Ok(())
    })();
    release(k, [bb, ps, ot], r)
}

/// Calls `body(k, start, len)` for each block of `size` of `0..n`: the full blocks as one
/// loop ([`Kernel::for_range`]), the partial last block after it.
fn blocks_looped(
    k: &mut Kernel,
    n: usize,
    size: usize,
    mut body: impl FnMut(&mut Kernel, usize, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    let full = n / size;
    k.for_range(full, |k, i| body(k, i * size, size))?;
    if n % size > 0 {
        body(k, full * size, n % size)?;
    }
    Ok(())
}

/// Row tiles of `out` per group of the streamed schedule: each `b` tile loaded serves this
/// many matmuls (one per row tile), so `b` is read once per `GROUP · 128` rows.
pub const GROUP: usize = 4;

/// SBUF bytes per partition the streamed schedule's tiles may use (a group narrower than
/// [`GROUP`] row tiles is used when `aᵀ` for the group would not fit).
pub const STREAMED_BYTES: usize = 160 * 1024;

/// `aᵀ` per group of up to [`GROUP`] × 128 rows of `out`, `b` streamed per K tile through two
/// buffers, for shapes whose `aᵀ` does not fit [`RESIDENT_BYTES`]. Written with loops
/// ([`Kernel::for_range`]): the groups of rows, the blocks of N and the pairs of K tiles (one
/// per `b` buffer) are loops, so the program and its build time do not grow with the size.
fn streamed(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    opts: &MatmulOpts,
    g: &Geometry,
) -> Result<(), Error> {
    let dt = a.dtype();
    let (mp, kp, nt, kt) = (P.min(g.m), P.min(g.kd), g.nt, g.kt);
    // The widest group whose aᵀ fits beside the b and output tiles.
    let (ds, ods) = (dt.size(), out.dtype().size());
    let gw = [GROUP, 2, 1]
        .into_iter()
        .map(|t| g.m.min(t * P))
        .find(|&w| kt * w * ds + 2 * nt * ds + w.div_ceil(P) * nt * ods <= STREAMED_BYTES)
        .unwrap_or(mp);
    let tiles = gw.div_ceil(P);
    k.scope(|k| {
        let a_t = k.sbuf_tile("mm_aT", dt, &[kp, kt, gw])?;
        let b_t = [
            k.sbuf_tile("mm_b0", dt, &[kp, nt])?,
            k.sbuf_tile("mm_b1", dt, &[kp, nt])?,
        ];
        let mut acc_t = Vec::with_capacity(tiles);
        let mut o_t = Vec::with_capacity(tiles);
        for _ in 0..tiles {
            acc_t.push(k.psum_tile("mm_psum", DType::F32, &[mp, nt])?);
            o_t.push(k.sbuf_tile("mm_out", out.dtype(), &[mp, nt])?);
        }
        let (kf, k_rem) = (g.kd / P, g.kd % P);
        // One group: rows m0 .. m0 + rows, in row tiles of 128.
        let group = |k: &mut Kernel, m0: usize, rows: usize| -> Result<(), Error> {
            let row_tiles: Vec<(usize, usize)> = blocks(rows, P).collect();
            let stationary = |i: usize, kn: usize, mo: usize, mn: usize| -> Result<View, Error> {
                a_t.slice(0, 0..kn)?.select(1, i)?.slice(1, mo..mo + mn)
            };
            blocks_looped(k, g.kd, P, |k, k0, kn| {
                load_a_t(
                    k,
                    &stationary(k0 / P, kn, 0, rows)?,
                    a,
                    opts,
                    m0,
                    rows,
                    k0,
                    kn,
                )
            })?;
            blocks_looped(k, g.n, N_TILE, |k, n0, nn| {
                // K tile `i` (rows k0..k0 + kn) through b buffer `buf`, into every row tile.
                let ktile = |k: &mut Kernel, i: usize, kn: usize, buf: usize| {
                    let k0 = i * P;
                    let bv = b_t[buf].slice(0, 0..kn)?.slice(1, 0..nn)?;
                    load_b(k, &bv, b, opts, k0, kn, n0, nn)?;
                    for (t, &(mo, mn)) in row_tiles.iter().enumerate() {
                        k.emit(NcMatmul {
                            dst: &acc_t[t].slice(0, 0..mn)?.slice(1, 0..nn)?,
                            stationary: &stationary(i, kn, mo, mn)?,
                            moving: &bv,
                            accumulate: Some(i > 0),
                        })?;
                    }
                    Ok(())
                };
                k.for_range(kf / 2, |k, j| {
                    ktile(k, 2 * j, P, 0)?;
                    ktile(k, 2 * j + 1, P, 1)
                })?;
                if kf % 2 == 1 {
                    ktile(k, kf - 1, P, 0)?;
                }
                if k_rem > 0 {
                    ktile(k, kf, k_rem, kf % 2)?;
                }
                // Evacuate the row tiles on VectorE and ScalarE in turn, and store them.
                for (t, &(mo, mn)) in row_tiles.iter().enumerate() {
                    let acc = acc_t[t].slice(0, 0..mn)?.slice(1, 0..nn)?;
                    let ov = o_t[t].slice(0, 0..mn)?.slice(1, 0..nn)?;
                    let mut turn = t;
                    copy_out(k, &mut turn, &ov, &acc, g, n0)?;
                    let dst = out.slice(0, m0 + mo..m0 + mo + mn)?.slice(1, n0..n0 + nn)?;
                    k.emit(DmaCopy::new(&dst, &ov))?;
                }
                Ok(())
            })
        };
        let full = g.m / gw;
        k.for_range(full, |k, i| group(k, i * gw, gw))?;
        if g.m % gw > 0 {
            group(k, full * gw, g.m % gw)?;
        }
        Ok(())
    })
}

/// A kernel `matmul` with inputs `a` `[m, kd]` (`[kd, m]` with `opts.a_transposed`) and `b`
/// `[kd, n]` (`[n, kd]` with `opts.b_transposed`) of `dtype`, and output `out` `[m, n]` of
/// `out_dtype`.
pub fn build(
    m: usize,
    kd: usize,
    n: usize,
    dtype: DType,
    out_dtype: DType,
    opts: &MatmulOpts,
) -> Result<Program, Error> {
    let a_shape = if opts.a_transposed { [kd, m] } else { [m, kd] };
    let b_shape = if opts.b_transposed { [n, kd] } else { [kd, n] };
    build_with(
        "matmul",
        &[("a", dtype, &a_shape), ("b", dtype, &b_shape)],
        ("out", out_dtype, &[m, n]),
        |k, o, ins| matmul(k, o, &ins[0], &ins[1], opts),
    )
}
