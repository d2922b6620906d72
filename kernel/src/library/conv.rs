//! 2-D convolution as ONNX `Conv` computes it: input `x [N, C, H, W]` (NCHW), weights
//! `w [O, C/groups, KH, KW]` (OIHW), optional bias `b [O]`, output
//! `y [N, O, OH, OW]` with `OH = (H + pad_top + pad_bottom − dil_h·(KH − 1) − 1) / stride_h + 1`
//! (likewise `OW`), zero padding, `groups` dividing `C` and `O` (output channel `o` sees
//! input channels `(o / (O/groups))·(C/groups) ..` of its group). [`conv2d`] emits it into a
//! kernel; [`build_conv2d`] builds a kernel of it.
//!
//! # Algorithm: shifted-window accumulation in PSUM
//!
//! No im2col buffer is materialised. Each image's channels of a group (128 at a time) are
//! loaded once into a zero-padded SBUF tile `[C, H + pads, W + pads]`, channels on
//! partitions (by one contiguous DMA run per channel into a staging tile, then a GpSimdE copy
//! into place — a DMA straight into the padded interior would cost a descriptor per row),
//! double-buffered when SBUF allows so the next image loads during the current one's work.
//! The output is computed in blocks of `R` rows × `Cw` columns (`R·Cw ≤ 512`, one PSUM bank
//! of fp32) for up to 128 output channels: for every input-channel chunk and every kernel tap
//! `(kh, kw)`, one `nc_matmul` takes as stationary the tap's weights `[C, O]` and as moving
//! the strided window of the padded tile that the tap sees for the block (rows
//! `kh·dil_h + r·stride_h`, columns `kw·dil_w + c·stride_w`: a two-dimensional access
//! pattern of the tile, so the im2col is in the access pattern, not in memory), all of them
//! accumulating in one fp32 PSUM tile. The accumulators and output blocks are
//! double-buffered; each block is evacuated (alternately by VectorE and ScalarE) with the
//! bias added (one value per output-channel partition) and rounded to the output dtype,
//! then stored.
//!
//! The weights are loaded once, before the images: each `[O, C/g·KH·KW]` row block
//! contiguously, and each tap's `[O, C]` (a strided view of it) transposed to `[C, O]` on
//! TensorE (a matmul by the identity, exact) and copied out of PSUM by ScalarE, in the input
//! dtype. [`conv2d_cio`] takes them already input-channel major (`[C, KH, KW, O/groups]`, as
//! a compiler lays constant weights out ahead of time): one load per input-channel chunk and
//! no transposes, with the same results bit for bit (`conv_weights.rs` has the three
//! layouts).
//!
//! **Depthwise** convolutions (one input channel per group, `C/groups = 1`, any channel
//! multiplier `O/C`) do not use TensorE — a 1-deep contraction would waste it — but VectorE:
//! channels on partitions, each tap one fused `(window · w[c, tap]) + acc` over the whole
//! output plane (`scalar_tensor_tensor` with the weight as a per-partition scalar), in fp32;
//! ScalarE adds the bias and rounds to the output dtype.
//!
//! Grouped convolutions run one set of matmuls per group, contracting over the group's
//! `C/groups` channels (TensorE's 128 rows are used that deep; packing several groups into
//! one block-diagonal stationary would use them better and is not done).
//!
//! Arithmetic: operands in the input dtype (fp32 or bf16), every accumulation fp32 (PSUM, or
//! the fp32 accumulator tile of the depthwise path), one rounding to the output dtype.
//! Limits: one image's padded channel chunk (`(H + pads)·(W + pads)` elements per partition)
//! and, for the depthwise path, the fp32 output plane must fit in SBUF (ResNet-size planes
//! do); an allocation failure says so.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, EngineId, Program};

use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{NcMatmul, TensorCopy};
use crate::pool::TilePool;
use crate::view::View;

const OP: &str = "conv2d";

/// Options of a convolution (ONNX `Conv`'s attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    /// `(stride_h, stride_w)`, each ≥ 1.
    pub stride: (usize, usize),
    /// `[top, left, bottom, right]` zero padding (ONNX `pads` order).
    pub pads: [usize; 4],
    /// `(dil_h, dil_w)`, each ≥ 1.
    pub dilation: (usize, usize),
    /// Groups, dividing the input and the output channels.
    pub groups: usize,
}

impl Default for Conv2dConfig {
    /// Stride 1, no padding, no dilation, one group.
    fn default() -> Self {
        Self {
            stride: (1, 1),
            pads: [0; 4],
            dilation: (1, 1),
            groups: 1,
        }
    }
}

impl Conv2dConfig {
    /// Stride `s`, padding `p` on every side, dilation 1, `groups`.
    pub fn new(s: usize, p: usize, groups: usize) -> Self {
        Self {
            stride: (s, s),
            pads: [p; 4],
            dilation: (1, 1),
            groups,
        }
    }

    /// The output size `(OH, OW)` for an input `(H, W)` and a kernel `(KH, KW)`, or an error
    /// when the (dilated) kernel is larger than the padded input or a parameter is 0.
    pub fn output_size(
        &self,
        hw: (usize, usize),
        khw: (usize, usize),
    ) -> Result<(usize, usize), Error> {
        let [pt, pl, pb, pr] = self.pads;
        let one = |n: usize, k: usize, p: usize, s: usize, d: usize, axis: &str| {
            if s == 0 || d == 0 || k == 0 {
                return Err(err!(
                    Invalid,
                    "{OP}: stride, dilation and kernel size must be ≥ 1 (axis {axis}: stride {s}, \
                     dilation {d}, kernel {k})"
                ));
            }
            let span = d * (k - 1) + 1;
            if n + p < span {
                return Err(err!(
                    Invalid,
                    "{OP}: the dilated kernel ({span}) is larger than the padded input ({}) along \
                     {axis}",
                    n + p
                ));
            }
            Ok((n + p - span) / s + 1)
        };
        Ok((
            one(hw.0, khw.0, pt + pb, self.stride.0, self.dilation.0, "H")?,
            one(hw.1, khw.1, pl + pr, self.stride.1, self.dilation.1, "W")?,
        ))
    }
}

fn dims4(v: &View, role: &str, layout: &str) -> Result<[usize; 4], Error> {
    match v.shape()[..] {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(err!(
            Invalid,
            "{OP}: {role} {} must be 4-D {layout}",
            v.describe()
        )),
    }
}

/// The validated problem.
pub(crate) struct Geometry {
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) o: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) cig: usize,
    pub(crate) cog: usize,
    pub(crate) cfg: Conv2dConfig,
    /// Input rows and columns land `up` apart in the padded tile (zeros between: a
    /// transposed convolution's stride); `(1, 1)` for a convolution.
    pub(crate) up: (usize, usize),
    /// Weights as a transposed convolution stores them, `[C, O/groups, KH, KW]`, applied
    /// flipped (tap `t` reads tap `KH·KW − 1 − t`).
    pub(crate) flip: bool,
    /// Weights laid out input-channel major, `[C, KH, KW, O/groups]` ([`conv2d_cio`]): each
    /// tap's stationary `[C, O]` is a slice of them, loaded by one DMA per tile.
    pub(crate) cio: bool,
}

impl Geometry {
    fn taps(&self) -> usize {
        self.kh * self.kw
    }

    /// Rows and columns of the zero-padded input tile that the output needs.
    fn padded(&self) -> (usize, usize) {
        let (sh, sw) = self.cfg.stride;
        let (dh, dw) = self.cfg.dilation;
        (
            (self.oh - 1) * sh + (self.kh - 1) * dh + 1,
            (self.ow - 1) * sw + (self.kw - 1) * dw + 1,
        )
    }

    /// The window of padded tile `xp` that tap `(i, j)` reads for output rows `r0 .. r0 + rn`
    /// and columns `c0 .. c0 + cn`.
    fn window(
        &self,
        xp: &View,
        tap: (usize, usize),
        rows: (usize, usize),
        cols: (usize, usize),
    ) -> Result<View, Error> {
        let (sh, sw) = self.cfg.stride;
        let (dh, dw) = self.cfg.dilation;
        let y0 = tap.0 * dh + rows.0 * sh;
        let x0 = tap.1 * dw + cols.0 * sw;
        xp.slice_step(1, y0..y0 + (rows.1 - 1) * sh + 1, sh)?
            .slice_step(2, x0..x0 + (cols.1 - 1) * sw + 1, sw)
    }
}

/// A 3-D view `[A, B, L]` of a 1-D convolution's operand as the 4-D `[A, B, 1, L]` the 2-D
/// kernels take (`H = 1`).
pub(super) fn as_2d(v: &View) -> View {
    let mut u = v.clone();
    u.dims.insert(2, crate::view::Dim { size: 1, stride: 1 });
    u
}

/// The checks a convolution and a transposed convolution share (`op` names the kernel in the
/// messages): `y` is `want` (`[N, O, OH, OW]`), `x` and `w` have one float dtype, `y` a float
/// one, and `bias`, if any, is a float `[O]`.
pub(super) fn check_output(
    op: &str,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
    want: [usize; 4],
) -> Result<(), Error> {
    let [n, o, oh, ow] = want;
    if y.shape() != want {
        return Err(err!(
            Invalid,
            "{op}: y {} must be [{n}, {o}, {oh}, {ow}] for x {} and w {}",
            y.describe(),
            x.describe(),
            w.describe()
        ));
    }
    if !x.dtype().is_float() || w.dtype() != x.dtype() || !y.dtype().is_float() {
        return Err(err!(
            Invalid,
            "{op}: x {} and w {} must have one float dtype, y {} a float dtype",
            x.describe(),
            w.describe(),
            y.describe()
        ));
    }
    if let Some(b) = bias {
        if b.shape() != [o] || !b.dtype().is_float() {
            return Err(err!(
                Invalid,
                "{op}: bias {} must be a float [{o}]",
                b.describe()
            ));
        }
    }
    Ok(())
}

/// Emits `y = conv2d(x, w) (+ b)` into `k` (see the module documentation): HBM views
/// `x [N, C, H, W]`, `w [O, C/groups, KH, KW]` (the same float dtype), `bias [O]` (any float
/// dtype), `y [N, O, OH, OW]` (any float dtype); `w` and `bias` contiguous (they are
/// reshaped), the others any views. 1-D convolutions take 3-D `x [N, C, L]`,
/// `w [O, C/groups, K]`, `y [N, O, OL]`, computed as `H = 1` (so `cfg` has stride and
/// dilation 1 and no padding along H; the W entries are the 1-D ones).
pub fn conv2d(
    k: &mut Kernel,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
    cfg: &Conv2dConfig,
) -> Result<(), Error> {
    if x.rank() == 3 && w.rank() == 3 && y.rank() == 3 {
        // 1-D: as H = 1 (`cfg` then has stride, dilation 1 and no padding along H).
        return conv2d(k, &as_2d(y), &as_2d(x), &as_2d(w), bias, cfg);
    }
    let [n, c, h, wd] = dims4(x, "x", "[N, C, H, W]")?;
    let [o, cig, kh, kw] = dims4(w, "w", "[O, C/groups, KH, KW]")?;
    let g = cfg.groups;
    if g == 0 || c % g != 0 || o % g != 0 || cig * g != c {
        return Err(err!(
            Invalid,
            "{OP}: groups {g} must divide the input channels {c} and the output channels {o}, \
             and w {} must have C/groups = {} input channels",
            w.describe(),
            c.checked_div(g).unwrap_or(0)
        ));
    }
    let (oh, ow) = cfg.output_size((h, wd), (kh, kw))?;
    check_output(OP, y, x, w, bias, [n, o, oh, ow])?;
    let geo = Geometry {
        n,
        c,
        o,
        kh,
        kw,
        oh,
        ow,
        cig,
        cog: o / g,
        cfg: *cfg,
        up: (1, 1),
        flip: false,
        cio: false,
    };
    run(k, &geo, y, x, w, bias)
}

/// [`conv2d`] with the weights already in the layout the TensorE path consumes, as a compiler
/// would store them ahead of time: `w_cio [C, KH, KW, O/groups]` (row `g·C/groups + c` holds
/// input channel `c` of group `g`; `w_cio[g·C/g + c][i][j][o] = w[g·O/g + o][c][i][j]`), so
/// the weights are loaded by one DMA per tile instead of being transposed per tap on TensorE.
/// Same operands, checks and results as [`conv2d`] otherwise (1-D: `w_cio [C, K, O/groups]`).
/// Depthwise convolutions (`C/groups = 1`, which run on VectorE with the `[O, 1, KH, KW]`
/// layout) are refused: use [`conv2d`] for them.
pub fn conv2d_cio(
    k: &mut Kernel,
    y: &View,
    x: &View,
    w_cio: &View,
    bias: Option<&View>,
    cfg: &Conv2dConfig,
) -> Result<(), Error> {
    if x.rank() == 3 && w_cio.rank() == 3 && y.rank() == 3 {
        let mut w4 = w_cio.clone();
        w4.dims.insert(1, crate::view::Dim { size: 1, stride: 1 });
        return conv2d_cio(k, &as_2d(y), &as_2d(x), &w4, bias, cfg);
    }
    let [n, c, h, wd] = dims4(x, "x", "[N, C, H, W]")?;
    let [wc, kh, kw, cog] = dims4(w_cio, "w", "[C, KH, KW, O/groups]")?;
    let g = cfg.groups;
    if g == 0 || c % g != 0 || wc != c || c / g < 2 {
        return Err(err!(
            Invalid,
            "{OP}: groups {g} must divide the input channels {c}, w {} must have C = {c} rows, \
             and C/groups must be at least 2 (depthwise convolutions take conv2d's layout)",
            w_cio.describe()
        ));
    }
    let o = cog * g;
    let (oh, ow) = cfg.output_size((h, wd), (kh, kw))?;
    check_output(OP, y, x, w_cio, bias, [n, o, oh, ow])?;
    let geo = Geometry {
        n,
        c,
        o,
        kh,
        kw,
        oh,
        ow,
        cig: c / g,
        cog,
        cfg: *cfg,
        up: (1, 1),
        flip: false,
        cio: true,
    };
    run(k, &geo, y, x, w_cio, bias)
}

/// Runs a validated convolution (see [`Geometry`]).
pub(crate) fn run(
    k: &mut Kernel,
    geo: &Geometry,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
) -> Result<(), Error> {
    let cig = geo.cig;
    k.scope(|k| {
        if cig == 1 {
            depthwise(k, geo, y, x, w, bias)
        } else {
            matmul_conv(k, geo, y, x, w, bias)
        }
    })
}

/// A kernel named `conv2d` with inputs `x` (`[N, C, H, W]`), `w` (`[O, C/groups, KH, KW]`),
/// optionally `b` (`[O]`), all `dtype`, and output `y` (`dtype`), computed by [`conv2d`].
pub fn build_conv2d(
    input: [usize; 4],
    weight: [usize; 4],
    cfg: &Conv2dConfig,
    dtype: DType,
    with_bias: bool,
) -> Result<Program, Error> {
    let mut k = Kernel::new("conv2d");
    let x = k.input("x", dtype, &input)?;
    let w = k.input("w", dtype, &weight)?;
    let b = if with_bias {
        Some(k.input("b", dtype, &[weight[0]])?)
    } else {
        None
    };
    let (oh, ow) = cfg.output_size((input[2], input[3]), (weight[2], weight[3]))?;
    let y = k.output("y", dtype, &[input[0], weight[0], oh, ow])?;
    conv2d(&mut k, &y, &x, &w, b.as_deref(), cfg)?;
    k.build()
}

/// Loads channels `c0 .. c0 + cn` of image `img` into the next zero-padded tile of `pool`
/// (`[128, HP, WP]`, narrowed to `cn` partitions; see [`load_padded_planes`]).
#[allow(clippy::too_many_arguments)]
fn load_padded(
    k: &mut Kernel,
    pool: &mut TilePool,
    geo: &Geometry,
    x: &View,
    img: usize,
    c0: usize,
    cn: usize,
) -> Result<View, Error> {
    let [pt, pl, _, _] = geo.cfg.pads;
    let xp = pool.next(k)?.slice(0, 0..cn)?;
    let src = x.select(0, img)?.slice(0, c0..c0 + cn)?;
    load_padded_planes(k, &xp, &src, (pt, pl), geo.up, 0.0)?;
    Ok(xp)
}

/// A pool of padded input tiles `[128, HP, WP]` of `dt`: `2·per` buffers (so the loads of
/// the next image overlap the current one's work) or, when SBUF cannot hold that many,
/// `per`.
fn input_pool(k: &mut Kernel, geo: &Geometry, dt: DType, per: usize) -> Result<TilePool, Error> {
    let (hp, wp) = geo.padded();
    let parts = geo.c.min(128);
    match k.tile_pool("conv_input", Memory::Sbuf, dt, &[parts, hp, wp], 2 * per) {
        Ok(p) => Ok(p),
        Err(_) => k.tile_pool("conv_input", Memory::Sbuf, dt, &[parts, hp, wp], per),
    }
}

/// Fills `dst` (an SBUF view `[P, HP, WP]`) with `fill` where the input does not land, and
/// puts `src` (an HBM view `[P, H, W]`) at rows `pt ..`, columns `pl ..` (the part that fits:
/// a stride may leave the last rows or columns unread). The planes travel by DMA contiguously
/// into a staging tile of `src`'s dtype (one run per partition, rather than one descriptor
/// per row), then GpSimdE moves them into place, converting to `dst`'s dtype.
pub(crate) fn load_padded_planes(
    k: &mut Kernel,
    dst: &View,
    src: &View,
    (pt, pl): (usize, usize),
    (uh, uw): (usize, usize),
    fill: f64,
) -> Result<(), Error> {
    let (parts, hp, wp) = match dst.shape()[..] {
        [p, a, b] => (p, a, b),
        _ => {
            return Err(err!(
                Invalid,
                "padded load: dst {} is not 3-D",
                dst.describe()
            ));
        }
    };
    let (h, w) = match src.shape()[..] {
        [_, a, b] => (a, b),
        _ => {
            return Err(err!(
                Invalid,
                "padded load: src {} is not 3-D",
                src.describe()
            ));
        }
    };
    let (uh, uw) = (uh.max(1), uw.max(1));
    let hn = h.min(hp.saturating_sub(pt).div_ceil(uh));
    let wn = w.min(wp.saturating_sub(pl).div_ceil(uw));
    if uh > 1 || uw > 1 || hn == 0 || wn == 0 {
        k.memset(dst, fill)?;
    } else if hn < hp || wn < wp {
        // Only the border (top, bottom, left, right strips) when that is cheaper than the
        // whole tile under the cost rule (`N + 60`, `+ 100` for back-to-back `N ≤ 128`).
        let (ph, pw) = (hp - pt - hn, wp - pl - wn);
        let strips = [
            (0..pt, 0..wp),
            (pt + hn..hp, 0..wp),
            (pt..pt + hn, 0..pl),
            (pt..pt + hn, pl + wn..wp),
        ];
        let cost = |n: usize| n + 60 + if n <= 128 { 100 } else { 0 };
        let border: usize = [pt * wp, ph * wp, hn * pl, hn * pw]
            .iter()
            .filter(|&&n| n > 0)
            .map(|&n| cost(n))
            .sum();
        if border < cost(hp * wp) {
            for (rows, cols) in strips {
                if !rows.is_empty() && !cols.is_empty() {
                    k.memset(&dst.slice(1, rows)?.slice(2, cols)?, fill)?;
                }
            }
        } else {
            k.memset(dst, fill)?;
        }
    }
    if hn == 0 || wn == 0 {
        return Ok(());
    }
    k.scope(|k| {
        let stage = k.sbuf_tile("padded_load_stage", src.dtype(), &[parts, h, w])?;
        k.dma_copy(&stage, src)?;
        k.emit(TensorCopy {
            dst: &dst
                .slice_step(1, pt..pt + (hn - 1) * uh + 1, uh)?
                .slice_step(2, pl..pl + (wn - 1) * uw + 1, uw)?,
            src: &stage.slice(1, 0..hn)?.slice(2, 0..wn)?,
            engine: Some(EngineId::GpSimd),
        })
    })
}

/// Output blocks: `(rows, columns)` per PSUM tile, `rows·columns ≤ 512`.
fn block(geo: &Geometry) -> (usize, usize) {
    if geo.ow <= 512 {
        (geo.oh.min(512 / geo.ow), geo.ow)
    } else {
        (1, 512)
    }
}

/// `(start, len)` chunks of `0..n`, `step` long.
pub(super) fn chunks(n: usize, step: usize) -> Vec<(usize, usize)> {
    (0..n).step_by(step).map(|s| (s, step.min(n - s))).collect()
}

/// The TensorE path: weights transposed per tap, shifted windows accumulated in PSUM.
fn matmul_conv(
    k: &mut Kernel,
    geo: &Geometry,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
) -> Result<(), Error> {
    let dt = x.dtype();
    let t = geo.taps();
    let groups = geo.cfg.groups;
    let ci_chunks = chunks(geo.cig, 128);
    let co_chunks = chunks(geo.cog, 128);
    let super::conv_weights::Stationaries {
        views: wts,
        held: _held,
        bias: bts,
    } = super::conv_weights::load(
        k,
        &super::conv_weights::WeightShape {
            c: geo.c,
            o: geo.o,
            cig: geo.cig,
            cog: geo.cog,
            taps: t,
            groups,
            flip: geo.flip,
            cio: geo.cio,
        },
        w,
        bias,
        &ci_chunks,
        &co_chunks,
    )?;
    let (rb, cb) = block(geo);
    // Double-buffered accumulators and output blocks: TensorE fills one while the other is
    // evacuated (alternately by VectorE and ScalarE) and stored.
    let mut ps_pool = k.tile_pool("conv_psum", Memory::Psum, DType::F32, &[128, 512], 2)?;
    let mut out_pool = k.tile_pool("conv_out", Memory::Sbuf, y.dtype(), &[128, rb * cb], 2)?;
    let mut blocks = 0usize;
    let mut in_pool = input_pool(k, geo, dt, ci_chunks.len())?;
    for img in 0..geo.n {
        for g in 0..groups {
            k.scope(|k| {
                let mut xps = Vec::new();
                for &(c0, cn) in &ci_chunks {
                    xps.push(load_padded(
                        k,
                        &mut in_pool,
                        geo,
                        x,
                        img,
                        g * geo.cig + c0,
                        cn,
                    )?);
                }
                for (coi, &(o0, on)) in co_chunks.iter().enumerate() {
                    let ob = g * geo.cog + o0;
                    for (r0, rn) in chunks(geo.oh, rb) {
                        for (c0, cn) in chunks(geo.ow, cb) {
                            let ps = ps_pool
                                .next(k)?
                                .slice(0, 0..on)?
                                .slice(1, 0..rn * cn)?
                                .reshape(&[on, rn, cn])?;
                            let mut first = true;
                            for (xp, wt) in xps.iter().zip(&wts[g][coi]) {
                                for tap in 0..t {
                                    let win = geo.window(
                                        xp,
                                        (tap / geo.kw, tap % geo.kw),
                                        (r0, rn),
                                        (c0, cn),
                                    )?;
                                    k.emit(NcMatmul {
                                        dst: &ps,
                                        stationary: &wt.select(1, tap)?,
                                        moving: &win,
                                        accumulate: Some(!first),
                                    })?;
                                    first = false;
                                }
                            }
                            let ot = out_pool
                                .next(k)?
                                .slice(0, 0..on)?
                                .slice(1, 0..rn * cn)?
                                .reshape(&[on, rn, cn])?;
                            evacuate(k, &ot, &ps, bts[g][coi].as_deref(), blocks % 2 == 1)?;
                            blocks += 1;
                            let dst = y
                                .select(0, img)?
                                .slice(0, ob..ob + on)?
                                .slice(1, r0..r0 + rn)?
                                .slice(2, c0..c0 + cn)?;
                            k.dma_copy(&dst, &ot)?;
                        }
                    }
                }
                Ok(())
            })?;
        }
    }
    in_pool.free(k)?;
    ps_pool.free(k)?;
    out_pool.free(k)
}

/// `dst = src (+ bias)`, PSUM to SBUF, on VectorE or (`scalar`) ScalarE.
fn evacuate(
    k: &mut Kernel,
    dst: &View,
    src: &View,
    bias: Option<&View>,
    scalar: bool,
) -> Result<(), Error> {
    match (bias, scalar) {
        (Some(b), false) => k.tensor_scalar(dst, src, AluOp::Add, b),
        (Some(b), true) => k.activation(dst, ActFn::Identity, src, b, 1.0),
        (None, _) => k.emit(TensorCopy {
            dst,
            src,
            engine: Some(if scalar {
                EngineId::Scalar
            } else {
                EngineId::Vector
            }),
        }),
    }
}

/// The VectorE path for one input channel per group: channels on partitions, one fused
/// multiply-add per tap over the output plane, in fp32.
fn depthwise(
    k: &mut Kernel,
    geo: &Geometry,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
) -> Result<(), Error> {
    let t = geo.taps();
    let m = geo.cog;
    let c_chunks = chunks(geo.c, 128);
    // Per channel chunk: weights [cc, m·taps] and biases [cc, m], fp32.
    let w2 = w.reshape(&[geo.c, m * t])?;
    let mut wts = Vec::new();
    for &(c0, cc) in &c_chunks {
        let wt = k.sbuf_tile("conv_dw_w", DType::F32, &[cc, m * t])?;
        k.dma_copy(&wt, &w2.slice(0, c0..c0 + cc)?)?;
        let bt = match bias {
            Some(b) => {
                let bt = k.sbuf_tile("conv_dw_bias", DType::F32, &[cc, m])?;
                k.dma_copy(&bt, &b.reshape(&[geo.c, m])?.slice(0, c0..c0 + cc)?)?;
                Some(bt)
            }
            None => None,
        };
        wts.push((wt, bt));
    }
    let mut in_pool = input_pool(k, geo, DType::F32, 1)?;
    let plane = [geo.c.min(128), geo.oh, geo.ow];
    let mut acc_pool = k.tile_pool("conv_dw_acc", Memory::Sbuf, DType::F32, &plane, 2)?;
    let mut out_pool = k.tile_pool("conv_dw_out", Memory::Sbuf, y.dtype(), &plane, 2)?;
    for img in 0..geo.n {
        for (&(c0, cc), (wt, bt)) in c_chunks.iter().zip(&wts) {
            k.scope(|k| {
                let xp = load_padded(k, &mut in_pool, geo, x, img, c0, cc)?;
                for j in 0..m {
                    let acc = acc_pool.next(k)?.slice(0, 0..cc)?;
                    for tap in 0..t {
                        let win = geo.window(
                            &xp,
                            (tap / geo.kw, tap % geo.kw),
                            (0, geo.oh),
                            (0, geo.ow),
                        )?;
                        let ft = if geo.flip { t - 1 - tap } else { tap };
                        let wv = wt.slice(1, j * t + ft..=j * t + ft)?;
                        if tap == 0 {
                            k.tensor_scalar(&acc, &win, AluOp::Mul, &wv)?;
                        } else {
                            k.scalar_tensor_tensor(&acc, &win, AluOp::Mul, &wv, AluOp::Add, &acc)?;
                        }
                    }
                    // The bias and the rounding on ScalarE: VectorE does the taps.
                    let ot = out_pool.next(k)?.slice(0, 0..cc)?;
                    let bj = bt.as_ref().map(|b| b.slice(1, j..=j)).transpose()?;
                    evacuate(k, &ot, &acc, bj.as_ref(), true)?;
                    let first = c0 * m + j;
                    let dst =
                        y.select(0, img)?
                            .slice_step(0, first..first + (cc - 1) * m + 1, m)?;
                    k.dma_copy(&dst, &ot)?;
                }
                Ok(())
            })?;
        }
    }
    in_pool.free(k)?;
    acc_pool.free(k)?;
    out_pool.free(k)
}
