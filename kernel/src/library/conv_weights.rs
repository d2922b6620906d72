//! A convolution's stationary operands on TensorE: for every group, output-channel chunk and
//! input-channel chunk, the `[cn, taps, on]` weights (a tap's stationary is `[cn, on]`),
//! and the bias per output-channel chunk. Three weight layouts arrive here:
//!
//! * ONNX's `[O, C/g, KH, KW]` (a convolution): each output chunk's rows are loaded
//!   contiguously and every tap transposed to `[C, O]` on TensorE (a matmul by the identity,
//!   exact), copied out of PSUM by ScalarE;
//! * a transposed convolution's `[C, O/g, KH, KW]`: rows are already input channels, so each
//!   tap is a strided view copied (flipped) into place;
//! * input-channel major `[C, KH, KW, O/g]` ([`super::conv::conv2d_cio`], a compiler's
//!   layout): one load per input-channel chunk, every stationary a slice of it.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, EngineId};

use super::attention::identity;
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{NcMatmul, TensorCopy};
use crate::tiles::Tile;
use crate::view::View;

const OP: &str = "conv2d";

/// What the loading needs of a convolution's geometry.
pub(super) struct WeightShape {
    /// Input channels.
    pub(super) c: usize,
    /// Output channels.
    pub(super) o: usize,
    /// Input channels per group.
    pub(super) cig: usize,
    /// Output channels per group.
    pub(super) cog: usize,
    /// Kernel taps, `KH·KW`.
    pub(super) taps: usize,
    /// Groups.
    pub(super) groups: usize,
    /// A transposed convolution's `[C, O/g, KH, KW]`, applied flipped.
    pub(super) flip: bool,
    /// Input-channel major `[C, KH, KW, O/g]`.
    pub(super) cio: bool,
}

/// The loaded stationaries.
pub(super) struct Stationaries {
    /// `views[g][co chunk][ci chunk]`: `[cn, taps, on]`.
    pub(super) views: Vec<Vec<Vec<View>>>,
    /// The tiles the views lie in (kept until the convolution's scope ends).
    pub(super) held: Vec<Tile>,
    /// `bias[g][co chunk]`: `[on, 1]` fp32, when there is a bias.
    pub(super) bias: Vec<Vec<Option<Tile>>>,
}

/// Loads every stationary of the convolution `geo` from `w` (its layout in `geo`).
pub(super) fn load(
    k: &mut Kernel,
    geo: &WeightShape,
    w: &View,
    bias: Option<&View>,
    ci_chunks: &[(usize, usize)],
    co_chunks: &[(usize, usize)],
) -> Result<Stationaries, Error> {
    let dt = w.dtype();
    let t = geo.taps;
    let groups = geo.groups;
    // Weights: wts[g][co chunk][ci chunk] = [cin, taps, con] (a tap's stationary:
    // [cin, con]); biases: bts[g][co chunk] = [con, 1] fp32.
    // Each stationary as a view: of its own tile, or (input-channel-major weights) of the
    // tile holding a whole input-channel chunk's `[cn, taps, O/g]`.
    let mut wts: Vec<Vec<Vec<View>>> = Vec::new();
    let mut held: Vec<Tile> = Vec::new();
    let mut bts: Vec<Vec<Option<Tile>>> = Vec::new();
    // The TensorE transposes' identity and PSUM staging (not needed when the weights come
    // input-channel major).
    let mut tr = if geo.cio {
        None
    } else {
        let ident = identity(k, dt, "conv_identity")?;
        let pool = k.tile_pool("conv_w_psum", Memory::Psum, DType::F32, &[128, 128], 2)?;
        Some((ident, pool))
    };
    for g in 0..groups {
        let (mut per_co, mut per_co_b) = (Vec::new(), Vec::new());
        if geo.cio {
            // [C, taps, O/g] as stored: an input-channel chunk's rows are contiguous per
            // partition, one load each; a tap's [cn, on] stationary is a slice of it.
            let w3 = w.reshape(&[geo.c, t, geo.cog])?;
            let mut full = Vec::new();
            for &(c0, cn) in ci_chunks {
                let wt = k.sbuf_tile("conv_w", dt, &[cn, t, geo.cog])?;
                let rows = g * geo.cig + c0;
                k.dma_copy(&wt, &w3.slice(0, rows..rows + cn)?)?;
                full.push(wt);
            }
            for &(o0, on) in co_chunks {
                let views = full
                    .iter()
                    .map(|wt| wt.slice(2, o0..o0 + on))
                    .collect::<Result<Vec<_>, _>>()?;
                per_co.push(views);
                per_co_b.push(load_bias(k, bias, g * geo.cog + o0, on)?);
            }
            held.extend(full);
            wts.push(per_co);
            bts.push(per_co_b);
            continue;
        }
        for &(o0, on) in co_chunks {
            let ob = g * geo.cog + o0;
            let mut tiles = Vec::new();
            for &(_, cn) in ci_chunks {
                tiles.push(k.sbuf_tile("conv_w", dt, &[cn, t, on])?);
            }
            let Some((ident, tr_pool)) = tr.as_mut() else {
                return Err(err!(Failure, "{OP}: transpose staging missing"));
            };
            if geo.flip {
                // [C, O/g, taps] as stored: rows are input channels, so each tap's [cn, on]
                // is a strided view of a contiguous load, copied (flipped) into place.
                let wt2 = w.reshape(&[geo.c, geo.cog * t])?;
                for (wt, &(c0, cn)) in tiles.iter().zip(ci_chunks) {
                    k.scope(|k| {
                        let raw = k.sbuf_tile("conv_w_raw", dt, &[cn, on, t])?;
                        let rows = g * geo.cig + c0;
                        k.dma_copy(
                            &raw.reshape(&[cn, on * t])?,
                            &wt2.slice(0, rows..rows + cn)?
                                .slice(1, o0 * t..(o0 + on) * t)?,
                        )?;
                        for tap in 0..t {
                            k.emit(TensorCopy {
                                dst: &wt.select(1, tap)?,
                                src: &raw.select(2, t - 1 - tap)?,
                                engine: Some(EngineId::Scalar),
                            })?;
                        }
                        Ok(())
                    })?;
                }
            } else {
                k.scope(|k| {
                    // [on, cig, taps] as stored; a tap's [on, cn] is a strided view of it,
                    // transposed on TensorE (a matmul by the identity, exact) and copied out of
                    // PSUM by ScalarE.
                    let raw = k.sbuf_tile("conv_w_raw", dt, &[on, geo.cig, t])?;
                    k.dma_copy(
                        &raw.reshape(&[on, geo.cig * t])?,
                        &w.reshape(&[geo.o, geo.cig * t])?.slice(0, ob..ob + on)?,
                    )?;
                    let id = ident.slice(0, 0..on)?.slice(1, 0..on)?;
                    for (wt, &(c0, cn)) in tiles.iter().zip(ci_chunks) {
                        for tap in 0..t {
                            let ps = tr_pool.next(k)?.slice(0, 0..cn)?.slice(1, 0..on)?;
                            k.emit(NcMatmul {
                                dst: &ps,
                                stationary: &raw.select(2, tap)?.slice(1, c0..c0 + cn)?,
                                moving: &id,
                                accumulate: Some(false),
                            })?;
                            k.emit(TensorCopy {
                                dst: &wt.select(1, tap)?,
                                src: &ps,
                                engine: Some(EngineId::Scalar),
                            })?;
                        }
                    }
                    Ok(())
                })?;
            }
            per_co.push(tiles.iter().map(|t| t.view().clone()).collect());
            held.extend(tiles);
            per_co_b.push(load_bias(k, bias, ob, on)?);
        }
        wts.push(per_co);
        bts.push(per_co_b);
    }
    if let Some((ident, tr_pool)) = tr {
        tr_pool.free(k)?;
        k.free(&ident)?;
    }
    Ok(Stationaries {
        views: wts,
        held,
        bias: bts,
    })
}

/// Loads `bias[o0 .. o0 + n]` as an fp32 `[n, 1]` tile (or `None`).
pub(super) fn load_bias(
    k: &mut Kernel,
    bias: Option<&View>,
    o0: usize,
    n: usize,
) -> Result<Option<Tile>, Error> {
    let Some(b) = bias else { return Ok(None) };
    let t = k.sbuf_tile("conv_bias", DType::F32, &[n, 1])?;
    k.dma_copy(&t, &b.slice(0, o0..o0 + n)?.reshape(&[n, 1])?)?;
    Ok(Some(t))
}
