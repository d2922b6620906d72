//! Element-wise activation functions and copies of HBM tensors of any rank and size:
//! `out = f(x · scale + bias)` for every [`ActFn`] on ScalarE ([`activation`],
//! [`activation_with`]), and `out = src` through SBUF ([`copy`]), either converting the
//! element type when `out`'s differs.
//!
//! # Tiling
//!
//! `x` (or `src`) and `out` have one shape; their `n` elements are cut into matching blocks
//! of at most 128 rows × [`FREE`] columns:
//!
//! * **contiguous** operands (both): the elements as one flat vector laid out over `p`
//!   partitions, `[p, ⌊n/p⌋]` in column blocks of up to [`FREE`], then the remaining
//!   `n mod p` elements as one column on fewer partitions. `p` comes from the published cost
//!   rules: a block's two transfers pay about `8·p` ticks of descriptor overhead and its
//!   instruction about `n/p`, least at `√(n/8)` — that, rounded up and at most 128, or a
//!   divisor of `n` within a factor of 2 of it (the nearest, the smaller on a tie; no
//!   remainder block then). Tensors of more than 129,032 elements use all 128 partitions;
//! * **otherwise** (a strided, permuted or broadcast view): the last dimension gives the
//!   columns and the second-to-last the rows (one row at rank 1), 128 rows and [`FREE`]
//!   columns at a time, every index of the dimensions before them separately.
//!
//! Per block: one load (HBM → SBUF), one `activation` (none for a copy), one store
//! (SBUF → HBM), through pools of three tiles so the loads, ScalarE and the stores of
//! consecutive blocks overlap. An empty tensor records nothing.
//!
//! # Numerics
//!
//! Exactly the ISA's `activation` (docs/SIM_ISA.md): `t = x·scale + bias` in fp32 (the
//! product and the sum each rounded once; with the defaults `scale = 1`, `bias = +0`, so a
//! −0 input becomes +0 before the function), then the function, then one rounding to
//! `out`'s dtype; every NaN result is the canonical NaN. `x` is read in its own dtype (int32
//! converts to fp32, nearest even). The functions the ISA documents as correctly rounded
//! (identity, relu, sqrt, reciprocal, square, abs) give the correctly rounded result of
//! `t`; the others are within 1 ULP of fp32 of the exact value.
//!
//! Format 1.0's functions (identity, relu, exp, tanh, gelu) record format 1.0's `Activation`,
//! which takes float tiles only; when `x` or `out` is int32 they record format 1.1's
//! `Activate` instead, with the scale read from a `[128, 1]` fp32 tile set once by a
//! `memset` (the same arithmetic, any dtypes).
//!
//! A copy does no arithmetic: equal dtypes copy every bit (NaN payloads too); different
//! dtypes convert on the store, through fp32 as the DMA engines' casts do (nearest even;
//! to int32 saturating with NaN → 0; a NaN stays NaN with the quiet bit set).

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, DType, Program};

use super::util::{block_extent, build_with, hbm, hbm_out, paired_blocks, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{ActBias, Activation, DmaCopy, Scalar};
use crate::view::View;

/// Columns per tile.
pub const FREE: usize = 2048;

/// The affine argument of an activation: `f(x · scale + bias)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActOpts {
    /// Multiplies every element before the bias is added (default 1).
    pub scale: f32,
    /// Added to every scaled element before the function (default +0).
    pub bias: f32,
}

impl Default for ActOpts {
    fn default() -> Self {
        Self {
            scale: 1.0,
            bias: 0.0,
        }
    }
}

/// Requires `a` and `out` to have one shape and `out` to address each element once, for `f`
/// (`ra` the role of `a`).
fn operands(f: &str, a: &View, ra: &str, out: &View) -> Result<(), Error> {
    if a.shape() == out.shape() {
        if out.has_repeats() {
            return Err(err!(
                Invalid,
                "{f}: out {} addresses some elements more than once (a broadcast view)",
                out.describe()
            ));
        }
        return Ok(());
    }
    let ranks = if a.rank() == out.rank() {
        String::new()
    } else {
        format!(" (rank {} vs {})", a.rank(), out.rank())
    };
    Err(err!(
        Invalid,
        "{f}: {ra} {} and out {} differ in shape{ranks}",
        a.describe(),
        out.describe()
    ))
}

/// Emits `out = f(x)` element-wise on ScalarE: [`activation_with`] with scale 1 and bias +0.
pub fn activation(k: &mut Kernel, out: &View, x: &View, f: ActFn) -> Result<(), Error> {
    activation_with(k, out, x, f, &ActOpts::default())
}

/// Emits `out = f(x · opts.scale + opts.bias)` element-wise on ScalarE (see the module
/// documentation): `x` a view of an HBM tensor, `out` one of an output or scratch tensor of
/// the same shape (any rank, any size), each of any dtype.
pub fn activation_with(
    k: &mut Kernel,
    out: &View,
    x: &View,
    f: ActFn,
    opts: &ActOpts,
) -> Result<(), Error> {
    let name = "activation";
    hbm(k, x, name, "x")?;
    hbm_out(k, out, name, "out")?;
    operands(name, x, "x", out)?;
    if out.elems() == 0 {
        return Ok(());
    }
    let parts = paired_blocks(x, out, FREE)?;
    let (rows, cols) = block_extent(&parts);
    // Format 1.0's `Activation` (chosen for its functions with an immediate scale) takes
    // float tiles only: with an int32 operand, a per-partition scale selects `Activate`.
    let tile_scale = f.legacy().is_some() && !(x.dtype().is_float() && out.dtype().is_float());
    k.scope(|k| {
        let scale_tile = if tile_scale {
            let t = k.sbuf_tile("activation_scale", DType::F32, &[rows, 1])?;
            k.memset(&t, f64::from(opts.scale))?;
            Some(t)
        } else {
            None
        };
        let mut px = k.tile_pool("activation_x", Memory::Sbuf, x.dtype(), &[rows, cols], 3)?;
        let mut po = match k.tile_pool(
            "activation_out",
            Memory::Sbuf,
            out.dtype(),
            &[rows, cols],
            3,
        ) {
            Ok(p) => p,
            Err(e) => return release(k, [px], Err(e)),
        };
        let r = (|| -> Result<(), Error> {
            for (xb, ob) in &parts {
                let (rn, cn) = (xb.partitions(), xb.free_elems());
                let xt = px.next(k)?.slice(0, 0..rn)?.slice(1, 0..cn)?;
                let ot = po.next(k)?.slice(0, 0..rn)?.slice(1, 0..cn)?;
                k.emit(DmaCopy::new(&xt, xb))?;
                let sv;
                let scale = match &scale_tile {
                    Some(t) => {
                        sv = t.slice(0, 0..rn)?;
                        Scalar::Tile(&sv)
                    }
                    None => Scalar::F32(opts.scale),
                };
                k.emit(Activation {
                    bias: ActBias::Scalar(opts.bias),
                    scale,
                    ..Activation::new(&ot, f, &xt)
                })?;
                k.emit(DmaCopy::new(ob, &ot))?;
            }
            Ok(())
        })();
        release(k, [px, po], r)
    })
}

/// Emits `out = src` (HBM to HBM through SBUF; see the module documentation): `src` a view
/// of an HBM tensor, `out` one of an output or scratch tensor of the same shape (any rank,
/// any size); when the dtypes differ each element is converted as the DMA casts.
pub fn copy(k: &mut Kernel, out: &View, src: &View) -> Result<(), Error> {
    let name = "copy";
    hbm(k, src, name, "src")?;
    hbm_out(k, out, name, "out")?;
    operands(name, src, "src", out)?;
    if out.elems() == 0 {
        return Ok(());
    }
    let parts = paired_blocks(src, out, FREE)?;
    let (rows, cols) = block_extent(&parts);
    let mut pool = k.tile_pool("copy", Memory::Sbuf, src.dtype(), &[rows, cols], 3)?;
    let r = (|| -> Result<(), Error> {
        for (sb, ob) in &parts {
            let (rn, cn) = (sb.partitions(), sb.free_elems());
            let t = pool.next(k)?.slice(0, 0..rn)?.slice(1, 0..cn)?;
            k.emit(DmaCopy::new(&t, sb))?;
            k.emit(DmaCopy::new(ob, &t))?;
        }
        Ok(())
    })();
    release(k, [pool], r)
}

/// A kernel `activation` with input `x` (`shape`, `x_dtype`) and output `out` (`shape`,
/// `out_dtype`): `out = f(x · opts.scale + opts.bias)`.
pub fn build(
    shape: &[usize],
    x_dtype: DType,
    out_dtype: DType,
    f: ActFn,
    opts: &ActOpts,
) -> Result<Program, Error> {
    build_with(
        "activation",
        &[("x", x_dtype, shape)],
        ("out", out_dtype, shape),
        |k, o, ins| activation_with(k, o, &ins[0], f, opts),
    )
}

/// A kernel `copy` with input `src` (`shape`, `src_dtype`) and output `out` (`shape`,
/// `out_dtype`): `out = src`, converted when the dtypes differ.
pub fn build_copy(shape: &[usize], src_dtype: DType, out_dtype: DType) -> Result<Program, Error> {
    build_with(
        "copy",
        &[("src", src_dtype, shape)],
        ("out", out_dtype, shape),
        |k, o, ins| copy(k, o, &ins[0]),
    )
}
