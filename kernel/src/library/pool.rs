//! 2-D (and 1-D) max and average pooling as ONNX `MaxPool` / `AveragePool` compute them
//! (NCHW): `y [N, C, OH, OW]` with `OH = (H + pad_top + pad_bottom − KH) / stride_h + 1`
//! (likewise `OW`); dilations and `ceil_mode` through [`pool2d_ext`] and [`PoolExt`] (the
//! kernel extent is then `dil·(K − 1) + 1`). [`pool2d`] emits it into a kernel;
//! [`build_pool2d`] builds a kernel of it. [`global_pool`] is `GlobalAveragePool` /
//! `GlobalMaxPool` (a reduction over the spatial elements).
//!
//! * **Max** pooling ignores the padding (as if it were −∞); every window holds at least one
//!   input element because each pad is smaller than the kernel (checked). The result is
//!   exact: a maximum of the inputs. The engines' maximum is IEEE maximumNumber, so a NaN
//!   input is skipped (the window's maximum of its other elements; NaN only when all are
//!   NaN), where ONNX runtimes usually propagate it.
//! * **Average** pooling divides the window's sum by the number of *input* elements in it
//!   when `count_include_pad` is false — ONNX's default (`count_include_pad = 0`) and
//!   [`PoolKind::AVERAGE`] — or by `KH·KW` when it is true (with `ceil_mode`, a window
//!   reaching past the explicit padding counts only its input and padding elements, as
//!   onnxruntime does).
//!
//! # Algorithm
//!
//! The `N·C` planes are taken 128 at a time, one plane per partition. Each chunk is loaded
//! (converting to fp32) into a padded SBUF tile `[planes, H + pads, W + pads]` filled with −∞
//! (max) or 0 (average); then one VectorE operation per kernel tap folds the tap's strided
//! window (rows `kh + r·stride_h`, columns `kw + c·stride_w`, an access pattern of the tile)
//! into an fp32 `[planes, OH, OW]` accumulator with maximum or add. An average divides by
//! the counts (an exact division, rounded once): `KH·KW`, or, excluding the padding, a
//! `[128, OH, OW]` tile of per-position counts computed once per kernel by the same
//! sum-pooling of a tile that is 1 inside the input and 0 in the padding. The last operation
//! rounds to the output dtype.
//!
//! With 32 or 64 planes (a ResNet stem's 64 channels), most partitions would idle: the
//! output rows are cut into bands (2 or 4, dividing `OH`), band `b`'s planes on partitions
//! `b·planes ..`, each band loaded with its own rows of padding and input, so every
//! instruction covers 128 partitions (max pooling, and average pooling with a constant
//! divisor; the same taps in the same order per output element).
//!
//! Limits: one chunk's padded planes and the fp32 output planes must fit in SBUF (about
//! 190 KiB per partition; ResNet-size planes do); an allocation failure says so.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType, Program};

use super::conv::load_padded_planes;
use crate::kernel::Kernel;
use crate::tiles::Tile;
use crate::view::View;

const OP: &str = "pool2d";

/// Max or average pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// The maximum of each window (padding ignored).
    Max,
    /// The mean of each window.
    Average {
        /// Divide by `KH·KW` (padding counted as zeros) rather than by the number of input
        /// elements in the window (ONNX's default: false).
        count_include_pad: bool,
    },
}

impl PoolKind {
    /// Average pooling as ONNX's default (`count_include_pad = 0`).
    pub const AVERAGE: PoolKind = PoolKind::Average {
        count_include_pad: false,
    };
}

/// Options of a pooling (ONNX `MaxPool` / `AveragePool` attributes, `ceil_mode = 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dConfig {
    /// Max or average.
    pub kind: PoolKind,
    /// `(KH, KW)`, each ≥ 1.
    pub kernel: (usize, usize),
    /// `(stride_h, stride_w)`, each ≥ 1.
    pub stride: (usize, usize),
    /// `[top, left, bottom, right]` padding (ONNX `pads` order), each smaller than the
    /// kernel along its axis.
    pub pads: [usize; 4],
}

impl Pool2dConfig {
    /// A square `kernel`, `stride`, the same padding `pad` on every side.
    pub fn new(kind: PoolKind, kernel: usize, stride: usize, pad: usize) -> Self {
        Self {
            kind,
            kernel: (kernel, kernel),
            stride: (stride, stride),
            pads: [pad; 4],
        }
    }

    /// The output size `(OH, OW)` for an input `(H, W)`, or an error for a zero kernel or
    /// stride, a pad not smaller than the kernel, or a kernel larger than the padded input.
    pub fn output_size(&self, hw: (usize, usize)) -> Result<(usize, usize), Error> {
        let [pt, pl, pb, pr] = self.pads;
        let one = |n: usize, k: usize, p0: usize, p1: usize, s: usize, axis: &str| {
            if k == 0 || s == 0 {
                return Err(err!(
                    Invalid,
                    "{OP}: kernel and stride must be ≥ 1 (axis {axis}: kernel {k}, stride {s})"
                ));
            }
            if p0 >= k || p1 >= k {
                return Err(err!(
                    Invalid,
                    "{OP}: pads {p0}, {p1} along {axis} must be smaller than the kernel {k} (a \
                     window would hold only padding)"
                ));
            }
            if n + p0 + p1 < k {
                return Err(err!(
                    Invalid,
                    "{OP}: the kernel ({k}) is larger than the padded input ({}) along {axis}",
                    n + p0 + p1
                ));
            }
            Ok((n + p0 + p1 - k) / s + 1)
        };
        Ok((
            one(hw.0, self.kernel.0, pt, pb, self.stride.0, "H")?,
            one(hw.1, self.kernel.1, pl, pr, self.stride.1, "W")?,
        ))
    }
}

/// ONNX pooling attributes beyond [`Pool2dConfig`]: `dilations` and `ceil_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolExt {
    /// `(dil_h, dil_w)`, each ≥ 1 (default 1): tap `i` of a window reads row `i·dil_h`.
    pub dilation: (usize, usize),
    /// Output sizes rounded up (`ceil_mode = 1`): `⌈(n + pads − span)/s⌉ + 1`, less one when
    /// the last window would start past the input and its left padding (ONNX runtimes' and
    /// PyTorch's rule); windows reaching past the padding read nothing there.
    pub ceil_mode: bool,
}

impl Default for PoolExt {
    fn default() -> Self {
        Self {
            dilation: (1, 1),
            ceil_mode: false,
        }
    }
}

impl Pool2dConfig {
    /// [`Pool2dConfig::output_size`] with dilation and `ceil_mode`: the output size
    /// `(OH, OW)` for an input `(H, W)`, or an error for a zero parameter, a pad not smaller
    /// than the (dilated) kernel, or a kernel larger than the padded input.
    pub fn output_size_ext(
        &self,
        hw: (usize, usize),
        ext: &PoolExt,
    ) -> Result<(usize, usize), Error> {
        let [pt, pl, pb, pr] = self.pads;
        let (dh, dw) = ext.dilation;
        let c = ext.ceil_mode;
        Ok((
            axis_size(
                OP,
                "H",
                hw.0,
                [self.kernel.0, dh, self.stride.0],
                (pt, pb),
                c,
            )?,
            axis_size(
                OP,
                "W",
                hw.1,
                [self.kernel.1, dw, self.stride.1],
                (pl, pr),
                c,
            )?,
        ))
    }
}

/// The output size along one axis of `n` elements for `[kernel, dilation, stride]`, pads
/// `(begin, end)` and `ceil` mode (see [`PoolExt::ceil_mode`]), or an error naming `op` and
/// `axis` for a zero parameter, a pad not smaller than the dilated kernel, or a kernel larger
/// than the padded input.
pub(super) fn axis_size(
    op: &str,
    axis: &str,
    n: usize,
    [k, d, s]: [usize; 3],
    (p0, p1): (usize, usize),
    ceil: bool,
) -> Result<usize, Error> {
    if k == 0 || s == 0 || d == 0 {
        return Err(err!(
            Invalid,
            "{op}: kernel, stride and dilation must be ≥ 1 (axis {axis}: kernel {k}, stride {s}, \
             dilation {d})"
        ));
    }
    let span = d.saturating_mul(k - 1).saturating_add(1);
    if p0 >= span || p1 >= span {
        return Err(err!(
            Invalid,
            "{op}: pads {p0}, {p1} along {axis} must be smaller than the kernel {span} (a window \
             would hold only padding)"
        ));
    }
    let padded = n.saturating_add(p0).saturating_add(p1);
    if padded < span {
        return Err(err!(
            Invalid,
            "{op}: the kernel ({span}) is larger than the padded input ({padded}) along {axis}"
        ));
    }
    let room = padded - span;
    let mut o = if ceil {
        room.div_ceil(s) + 1
    } else {
        room / s + 1
    };
    if ceil && (o - 1) * s >= n + p0 {
        o -= 1;
    }
    Ok(o)
}

/// The validated problem.
pub(super) struct Geometry {
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    pub(super) cfg: Pool2dConfig,
    pub(super) dil: (usize, usize),
}

impl Geometry {
    /// Rows and columns of the padded tile the output reads.
    pub(super) fn padded(&self) -> (usize, usize) {
        (
            (self.oh - 1) * self.cfg.stride.0 + self.dil.0 * (self.cfg.kernel.0 - 1) + 1,
            (self.ow - 1) * self.cfg.stride.1 + self.dil.1 * (self.cfg.kernel.1 - 1) + 1,
        )
    }

    /// Whether some window reaches past the explicit padding (`ceil_mode`).
    pub(super) fn overhang(&self) -> bool {
        let (hp, wp) = self.padded();
        let [pt, pl, pb, pr] = self.cfg.pads;
        hp > pt + self.h + pb || wp > pl + self.w + pr
    }

    /// Rows and columns of the input inside the padded tile.
    fn covered(&self) -> (usize, usize) {
        let (hp, wp) = self.padded();
        let [pt, pl, _, _] = self.cfg.pads;
        (self.h.min(hp - pt), self.w.min(wp - pl))
    }

    /// Folds every tap's window of `src` into `acc` with `op` (the first tap copies).
    pub(super) fn fold(
        &self,
        k: &mut Kernel,
        acc: &View,
        src: &View,
        op: AluOp,
    ) -> Result<(), Error> {
        let (kh, kw) = self.cfg.kernel;
        let (sh, sw) = self.cfg.stride;
        let (dh, dw) = self.dil;
        for i in 0..kh {
            for j in 0..kw {
                let (y0, x0) = (i * dh, j * dw);
                let win = src
                    .slice_step(1, y0..y0 + (self.oh - 1) * sh + 1, sh)?
                    .slice_step(2, x0..x0 + (self.ow - 1) * sw + 1, sw)?;
                if i == 0 && j == 0 {
                    k.tensor_copy(acc, &win)?;
                } else {
                    k.tensor_tensor(acc, acc, &win, op)?;
                }
            }
        }
        Ok(())
    }
}

/// Emits `y = pool(x)` into `k` (see the module documentation): HBM views `x [N, C, H, W]`
/// and `y [N, C, OH, OW]`, float dtypes (they may differ; the arithmetic is fp32), both
/// contiguous (the `N·C` planes are flattened).
pub fn pool2d(k: &mut Kernel, y: &View, x: &View, cfg: &Pool2dConfig) -> Result<(), Error> {
    pool2d_ext(k, y, x, cfg, &PoolExt::default())
}

/// [`pool2d`] with ONNX's `dilations` and `ceil_mode` ([`PoolExt`]); a 3-D `x [N, C, L]`
/// and `y [N, C, OL]` pool 1-D (as `H = 1`: `cfg` then has kernel, stride and dilation 1
/// and no padding along H).
pub fn pool2d_ext(
    k: &mut Kernel,
    y: &View,
    x: &View,
    cfg: &Pool2dConfig,
    ext: &PoolExt,
) -> Result<(), Error> {
    if x.rank() == 3 && y.rank() == 3 {
        let up = |v: &View| {
            let mut w = v.clone();
            w.dims.insert(2, crate::view::Dim { size: 1, stride: 1 });
            w
        };
        return pool2d_ext(k, &up(y), &up(x), cfg, ext);
    }
    let [n, c, h, w] = match x.shape()[..] {
        [a, b, c, d] => [a, b, c, d],
        _ => {
            return Err(err!(
                Invalid,
                "{OP}: x {} must be 4-D [N, C, H, W] (or 3-D [N, C, L])",
                x.describe()
            ));
        }
    };
    let (oh, ow) = cfg.output_size_ext((h, w), ext)?;
    if y.shape() != [n, c, oh, ow] {
        return Err(err!(
            Invalid,
            "{OP}: y {} must be [{n}, {c}, {oh}, {ow}] for x {}",
            y.describe(),
            x.describe()
        ));
    }
    if !x.dtype().is_float() || !y.dtype().is_float() {
        return Err(err!(
            Invalid,
            "{OP}: x {} and y {} must have float dtypes",
            x.describe(),
            y.describe()
        ));
    }
    let geo = Geometry {
        h,
        w,
        oh,
        ow,
        cfg: *cfg,
        dil: ext.dilation,
    };
    let planes = n * c;
    let xs = x.reshape(&[planes, h, w])?;
    let ys = y.reshape(&[planes, oh, ow])?;
    k.scope(|k| {
        let counts = match cfg.kind {
            PoolKind::Average { count_include_pad } if !count_include_pad || geo.overhang() => {
                Some(counts(k, &geo, planes.min(128), count_include_pad)?)
            }
            _ => None,
        };
        // 32 or 64 planes leave partitions idle: cut the output rows into bands, each band's
        // planes on their own partitions (the same taps per output element).
        let constant = match cfg.kind {
            PoolKind::Max => true,
            PoolKind::Average { count_include_pad } => count_include_pad && !geo.overhang(),
        };
        if constant && (planes == 32 || planes == 64) {
            let g = (2..=128 / planes).rev().find(|g| oh % g == 0).unwrap_or(1);
            if g > 1 {
                return k.scope(|k| bands(k, &geo, &ys, &xs, g));
            }
        }
        for p0 in (0..planes).step_by(128) {
            let pn = 128.min(planes - p0);
            k.scope(|k| {
                chunk(
                    k,
                    &geo,
                    &ys.slice(0, p0..p0 + pn)?,
                    &xs.slice(0, p0..p0 + pn)?,
                    counts.as_ref(),
                )
            })?;
        }
        Ok(())
    })
}

/// A kernel named `pool2d` with input `x` (`dtype`, `input`) and output `y` (`dtype`),
/// computed by [`pool2d`].
pub fn build_pool2d(input: [usize; 4], cfg: &Pool2dConfig, dtype: DType) -> Result<Program, Error> {
    let mut k = Kernel::new("pool2d");
    let x = k.input("x", dtype, &input)?;
    let (oh, ow) = cfg.output_size((input[2], input[3]))?;
    let y = k.output("y", dtype, &[input[0], input[1], oh, ow])?;
    pool2d(&mut k, &y, &x, cfg)?;
    k.build()
}

/// The per-position count of input elements (`pad`: of input and explicit padding
/// elements) in each window: `[parts, OH, OW]` fp32.
pub(super) fn counts(
    k: &mut Kernel,
    geo: &Geometry,
    parts: usize,
    pad: bool,
) -> Result<Tile, Error> {
    let (hp, wp) = geo.padded();
    let (hn, wn) = geo.covered();
    let [pt, pl, pb, pr] = geo.cfg.pads;
    let (pt, pl, hn, wn) = if pad {
        (0, 0, hp.min(pt + geo.h + pb), wp.min(pl + geo.w + pr))
    } else {
        (pt, pl, hn, wn)
    };
    let cnt = k.sbuf_tile("pool_counts", DType::F32, &[parts, geo.oh, geo.ow])?;
    k.scope(|k| {
        let ones = k.sbuf_tile("pool_ones", DType::F32, &[parts, hp, wp])?;
        k.memset(&ones, 0.0)?;
        k.memset(&ones.slice(1, pt..pt + hn)?.slice(2, pl..pl + wn)?, 1.0)?;
        geo.fold(k, &cnt, &ones, AluOp::Add)
    })?;
    Ok(cnt)
}

/// One chunk of up to 128 planes.
fn chunk(
    k: &mut Kernel,
    geo: &Geometry,
    y: &View,
    x: &View,
    counts: Option<&Tile>,
) -> Result<(), Error> {
    let pn = x.shape().first().copied().unwrap_or(0);
    let (hp, wp) = geo.padded();
    let [pt, pl, _, _] = geo.cfg.pads;
    let (fill, op) = match geo.cfg.kind {
        PoolKind::Max => (f64::NEG_INFINITY, AluOp::Max),
        PoolKind::Average { .. } => (0.0, AluOp::Add),
    };
    let xp = k.sbuf_tile("pool_input", DType::F32, &[pn, hp, wp])?;
    load_padded_planes(k, &xp, x, (pt, pl), (1, 1), fill)?;
    let acc = k.sbuf_tile("pool_acc", DType::F32, &[pn, geo.oh, geo.ow])?;
    geo.fold(k, &acc, &xp, op)?;
    let out = k.sbuf_tile("pool_out", y.dtype(), &[pn, geo.oh, geo.ow])?;
    match (geo.cfg.kind, counts) {
        (PoolKind::Max, _) => k.tensor_copy(&out, &acc)?,
        (PoolKind::Average { .. }, Some(cnt)) => {
            k.tensor_tensor(&out, &acc, &cnt.slice(0, 0..pn)?, AluOp::Divide)?;
        }
        (PoolKind::Average { .. }, None) => {
            let (kh, kw) = geo.cfg.kernel;
            k.tensor_scalar(&out, &acc, AluOp::Divide, (kh * kw) as f32)?;
        }
    }
    k.dma_copy(y, &out)
}

/// `planes` (32 or 64) planes with their output rows in `g` bands, band `b` on partitions
/// `b·planes ..`: one load per band, the taps over all bands at once, one store per band.
fn bands(k: &mut Kernel, geo: &Geometry, y: &View, x: &View, g: usize) -> Result<(), Error> {
    let pn = x.shape()[0];
    let rb = geo.oh / g;
    let (sh, _) = geo.cfg.stride;
    let band = Geometry {
        h: geo.h,
        w: geo.w,
        oh: rb,
        ow: geo.ow,
        cfg: geo.cfg,
        dil: geo.dil,
    };
    let (hb, wp) = band.padded();
    let [pt, pl, _, _] = geo.cfg.pads;
    let (fill, op) = match geo.cfg.kind {
        PoolKind::Max => (f64::NEG_INFINITY, AluOp::Max),
        PoolKind::Average { .. } => (0.0, AluOp::Add),
    };
    let xp = k.sbuf_tile("pool_input", DType::F32, &[g * pn, hb, wp])?;
    for b in 0..g {
        let dst = xp.slice(0, b * pn..(b + 1) * pn)?;
        let r0 = b * rb * sh;
        let i0 = r0.saturating_sub(pt).min(geo.h);
        let i1 = (r0 + hb).saturating_sub(pt).min(geo.h);
        if i1 > i0 {
            let top = i0 + pt - r0;
            load_padded_planes(k, &dst, &x.slice(1, i0..i1)?, (top, pl), (1, 1), fill)?;
        } else {
            k.memset(&dst, fill)?;
        }
    }
    let acc = k.sbuf_tile("pool_acc", DType::F32, &[g * pn, rb, geo.ow])?;
    band.fold(k, &acc, &xp, op)?;
    let out = k.sbuf_tile("pool_out", y.dtype(), &[g * pn, rb, geo.ow])?;
    match geo.cfg.kind {
        PoolKind::Max => k.tensor_copy(&out, &acc)?,
        PoolKind::Average { .. } => {
            let (kh, kw) = geo.cfg.kernel;
            k.tensor_scalar(&out, &acc, AluOp::Divide, (kh * kw) as f32)?;
        }
    }
    for b in 0..g {
        k.dma_copy(
            &y.slice(1, b * rb..(b + 1) * rb)?,
            &out.slice(0, b * pn..(b + 1) * pn)?,
        )?;
    }
    Ok(())
}

/// Emits `y = GlobalAveragePool(x)` (`max`: `GlobalMaxPool`): `x [N, C, spatial…]`,
/// `y [N, C, 1, …]` (any shape of `N·C` elements), float dtypes — the `N·C` rows reduced
/// over their contiguous spatial elements (rows on partitions; the mean is the fp32 sum in
/// order divided by the count, rounded once): when `N·C` is a multiple of 128 and small
/// enough, all rows in one load (partition `p` holding rows `p·N·C/128 ..`), one
/// `tensor_reduce` and one store; otherwise by [`reduce`](super::reduce::reduce).
pub fn global_pool(k: &mut Kernel, y: &View, x: &View, max: bool) -> Result<(), Error> {
    let s = x.shape();
    if s.len() < 3 || y.elems() != s[0] * s[1] || !x.dtype().is_float() {
        return Err(err!(
            Invalid,
            "global_pool: x {} must be a float [N, C, spatial…] and y {} hold N·C elements",
            x.describe(),
            y.describe()
        ));
    }
    let rows = s[0] * s[1];
    let l: usize = s[2..].iter().product();
    let x2 = x.reshape(&[rows, l])?;
    let y2 = y.reshape(&[rows, 1])?;
    let per = rows / 128;
    if rows % 128 == 0 && per > 1 && per * l <= 8192 {
        // Packed: partition p holds rows p·per .. (p + 1)·per (contiguous in HBM), so one
        // load, one reduction and one store cover every row (ResNet's 2048 channels).
        return k.scope(|k| {
            let xt = k.sbuf_tile("gpool_x", x.dtype(), &[128, per, l])?;
            k.dma_copy(&xt, &x.reshape(&[128, per, l])?)?;
            let acc = k.sbuf_tile("gpool_acc", DType::F32, &[128, per])?;
            let op = if max { AluOp::Max } else { AluOp::Add };
            k.emit(crate::ops::TensorReduce {
                dst: &acc,
                op,
                data: &xt,
                axis: &[2],
                negate: false,
                keepdims: false,
            })?;
            let ot = k.sbuf_tile("gpool_y", y.dtype(), &[128, per])?;
            if max {
                k.tensor_copy(&ot, &acc)?;
            } else {
                k.tensor_scalar(&ot, &acc, AluOp::Divide, l as f32)?;
            }
            k.dma_copy(&y2.reshape(&[128, per])?, &ot)
        });
    }
    let op = if max {
        super::reduce::ReduceOp::Max
    } else {
        super::reduce::ReduceOp::Mean
    };
    super::reduce::reduce(k, &y2, &x2, 1, op, true)
}
