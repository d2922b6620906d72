//! ONNX `LRN` (local response normalisation across channels): for `x [N, C, spatial…]`,
//! `s[c] = Σ x[i]²` over `i ∈ [c − ⌊(size−1)/2⌋, c + ⌈(size−1)/2⌉] ∩ [0, C)`, and
//! `y = x / (bias + (alpha/size)·s)^beta`.
//!
//! # Algorithm
//!
//! Channels on partitions. The window sum across partitions is a matmul: `s = Bᵀ·x²` with
//! the 0/1 band matrix `B[k, m] = (m − ⌊(size−1)/2⌋ ≤ k ≤ m + ⌈(size−1)/2⌉)`, built once per
//! pair of 128-channel blocks that the band touches (GpSimdE `iota` of `k − m`, two
//! comparisons and a product on VectorE). Per image and per 512 spatial elements: the channel
//! blocks are loaded (fp32), squared on ScalarE, and each output block accumulates its band
//! blocks' matmuls in PSUM (TensorE, fp32); then VectorE `t = s·fl(alpha/size) + bias`,
//! GpSimdE `p = t^beta` (the ISA's power), VectorE `y = x / p`, rounded once to `out`'s dtype.
//!
//! # Numerics
//!
//! `x²` correctly rounded; the window sum in fp32, in channel order (products by 1 and 0 are
//! exact, the zeros add nothing) — block by block when the window crosses a 128-channel
//! boundary; then one rounding per step above (power: `pow` in binary64 rounded once). This
//! is ONNX's reference order with fp32 arithmetic; the tests check it bit for bit.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType};

use super::util::{P, blocks, float, hbm, hbm_out};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{Activation, NcMatmul, TensorScalarChain, TensorTensor};
use crate::view::View;

/// Spatial elements per PSUM tile.
const L_TILE: usize = 512;

/// ONNX `LRN` attributes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrnOpts {
    /// Channels in the window (≥ 1).
    pub size: usize,
    /// Default 1e-4.
    pub alpha: f32,
    /// Default 0.75.
    pub beta: f32,
    /// Default 1.
    pub bias: f32,
}

/// Emits `y = LRN(x)` (see the module documentation): `x`, `y` `[N, C, …]` contiguous float
/// HBM views of one shape.
pub fn lrn(k: &mut Kernel, y: &View, x: &View, opts: &LrnOpts) -> Result<(), Error> {
    let f = "lrn";
    hbm(k, x, f, "x")?;
    hbm_out(k, y, f, "y")?;
    float(x, f, "x")?;
    float(y, f, "y")?;
    let s = x.shape();
    if s.len() < 2 || y.shape() != s || opts.size == 0 {
        return Err(err!(
            Invalid,
            "{f}: x {} must be [N, C, …], y {} of its shape, size ≥ 1",
            x.describe(),
            y.describe()
        ));
    }
    let (n, c) = (s[0], s[1]);
    let l: usize = s[2..].iter().product();
    let flat = |v: &View| {
        v.reshape(&[n, c, l]).map_err(|e| {
            err!(
                Invalid,
                "{f}: {} must be contiguous: {}",
                v.describe(),
                e.message()
            )
        })
    };
    let (x3, y3) = (flat(x)?, flat(y)?);
    if x.elems() == 0 {
        return Ok(());
    }
    let lo = (opts.size - 1) / 2;
    let hi = opts.size - 1 - lo;
    let cb: Vec<(usize, usize)> = blocks(c, P).collect();
    let scale = (f64::from(opts.alpha) / opts.size as f64) as f32;
    k.scope(|k| {
        // Band blocks: bands[m][..] = (k block index, [kn, mn] 0/1 tile).
        let mut bands = Vec::new();
        for &(m0, mn) in &cb {
            let mut row = Vec::new();
            for (ki, &(k0, kn)) in cb.iter().enumerate() {
                // k − m over the block spans [k0 − m0 − mn + 1, k0 + kn − 1 − m0].
                let dmin = k0 as isize - (m0 + mn - 1) as isize;
                let dmax = (k0 + kn - 1) as isize - m0 as isize;
                if dmax < -(lo as isize) || dmin > hi as isize {
                    continue;
                }
                let d = k.sbuf_tile("lrn_band", DType::F32, &[kn, mn])?;
                let base = i32::try_from(k0 as isize - m0 as isize).unwrap_or(0);
                k.iota(&d, base, 1, -1)?;
                k.scope(|k| {
                    let t = k.sbuf_tile("lrn_band_t", DType::F32, &[kn, mn])?;
                    k.tensor_scalar(&t, &d, AluOp::GreaterEqual, -(lo as f32))?;
                    k.tensor_scalar(&d, &d, AluOp::LessEqual, hi as f32)?;
                    k.tensor_tensor(&d, &d, &t, AluOp::Mul)
                })?;
                row.push((ki, d));
            }
            bands.push(row);
        }
        let lt = L_TILE.min(l);
        let cp = P.min(c);
        let nb = cb.len();
        let beta = k.sbuf_tile("lrn_beta", DType::F32, &[cp, 1])?;
        k.memset(&beta, f64::from(opts.beta))?;
        let mut xs = k.tile_pool("lrn_x", Memory::Sbuf, DType::F32, &[cp, nb, lt], 2)?;
        let mut sq = k.tile_pool("lrn_sq", Memory::Sbuf, DType::F32, &[cp, nb, lt], 2)?;
        let mut ps = k.tile_pool("lrn_psum", Memory::Psum, DType::F32, &[cp, lt], 2)?;
        let mut ts = k.tile_pool("lrn_t", Memory::Sbuf, DType::F32, &[cp, lt], 2)?;
        let mut os = k.tile_pool("lrn_y", Memory::Sbuf, y.dtype(), &[cp, lt], 2)?;
        for img in 0..n {
            for (l0, ln) in blocks(l, lt) {
                let (xt, st) = (xs.next(k)?, sq.next(k)?);
                for (bi, &(c0, cn)) in cb.iter().enumerate() {
                    let xv = xt.slice(0, 0..cn)?.select(1, bi)?.slice(1, 0..ln)?;
                    let src = x3
                        .select(0, img)?
                        .slice(0, c0..c0 + cn)?
                        .slice(1, l0..l0 + ln)?;
                    k.dma_copy(&xv, &src)?;
                    let sv = st.slice(0, 0..cn)?.select(1, bi)?.slice(1, 0..ln)?;
                    k.emit(Activation::new(&sv, ActFn::Square, &xv))?;
                }
                for (mi, &(m0, mn)) in cb.iter().enumerate() {
                    let acc = ps.next(k)?.slice(0, 0..mn)?.slice(1, 0..ln)?;
                    for (j, (ki, band)) in bands[mi].iter().enumerate() {
                        let kn = cb[*ki].1;
                        k.emit(NcMatmul {
                            dst: &acc,
                            stationary: band,
                            moving: &st.slice(0, 0..kn)?.select(1, *ki)?.slice(1, 0..ln)?,
                            accumulate: Some(j > 0),
                        })?;
                    }
                    let t = ts.next(k)?.slice(0, 0..mn)?.slice(1, 0..ln)?;
                    k.emit(
                        TensorScalarChain::new(&t, &acc, AluOp::Mul, scale)
                            .then(AluOp::Add, opts.bias),
                    )?;
                    let bv = beta.slice(0, 0..mn)?.broadcast(1, ln)?;
                    k.emit(TensorTensor {
                        dst: &t,
                        data1: &t,
                        data2: &bv,
                        op: AluOp::Power,
                        engine: None,
                    })?;
                    let ot = os.next(k)?.slice(0, 0..mn)?.slice(1, 0..ln)?;
                    let xv = xt.slice(0, 0..mn)?.select(1, mi)?.slice(1, 0..ln)?;
                    k.tensor_tensor(&ot, &xv, &t, AluOp::Divide)?;
                    let dst = y3
                        .select(0, img)?
                        .slice(0, m0..m0 + mn)?
                        .slice(1, l0..l0 + ln)?;
                    k.dma_copy(&dst, &ot)?;
                }
            }
        }
        for p in [xs, sq, ps, ts, os] {
            p.free(k)?;
        }
        Ok(())
    })
}
