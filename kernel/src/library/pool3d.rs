//! 3-D max and average pooling as ONNX `MaxPool` / `AveragePool` compute them on rank-5
//! inputs: `x [N, C, D, H, W]`, `y [N, C, OD, OH, OW]`, each output size as in
//! [`pool`](super::pool) (`pads`, `strides`, `dilations`, `ceil_mode`, `count_include_pad`
//! with the same meaning and the same checks, per axis). [`pool3d`] emits it into a kernel.
//!
//! # Algorithm: separable, in two passes
//!
//! A window is a box, so it is pooled plane by plane and then across the depth:
//!
//! 1. every input depth plane `x[n, c, d]` is pooled over `(H, W)` (maximum, or the fp32 sum)
//!    exactly as [`pool2d_ext`](super::pool::pool2d_ext) folds its taps — the `N·C·D` planes
//!    128 at a time, one per partition, each loaded into a padded tile (−∞ or 0 outside the
//!    input), one VectorE operation per `(kh, kw)` tap — into an fp32 scratch tensor
//!    `z [N·C, D, OH·OW]`;
//! 2. each output depth `od` folds the `KD` planes `z[·, od·s_d − pad_d + kd·dil_d]` (−∞ or 0
//!    for a plane outside the input) in increasing `kd`: partitions hold `(od, n·c)` pairs
//!    (as many whole depths as fit 128 partitions), each loaded by one DMA of its `KD` rows
//!    per output depth, one VectorE operation per `kd` over `OH·OW` (in column chunks when a
//!    partition cannot hold `(KD + 3)·OH·OW` fp32). An average then divides by the window's
//!    count, rounded once: `KD·KH·KW` when no window reaches past the explicit padding and
//!    `count_include_pad` holds or there is no padding, else the product of the depth count (a constant of `OD`
//!    values: the input planes — or input and padding planes — in the window) and the
//!    `(OH, OW)` count tile of [`pool`](super::pool) (the same sum-pooling of ones).
//!
//! Numerics: max is exact (IEEE maximumNumber: a NaN is skipped as in 2-D pooling). An
//! average is, per output, `((Σ_kh,kw x)_{kd=0} + (Σ_kh,kw x)_{kd=1} + …) / count` — each
//! plane's sum over its taps in row-major order from its first tap (padding as `0.0`), then
//! those sums in increasing `kd` (a plane outside the input as `0.0`), one fp32 rounding per
//! addition, then one division.
//!
//! Cost: pass 1 is the 2-D pooling of all `N·C·D` planes (`KH·KW` VectorE operations per 128
//! planes, over `OH·OW`), pass 2 `KD` operations per 128 `(od, n·c)` pairs over `OH·OW`, so
//! `KH·KW + KD` operations per output element rather than `KD·KH·KW`, plus the scratch
//! round trip (`N·C·D·OH·OW` fp32 written once and read about `KD / s_d` times).
//!
//! Limits: `x` contiguous (the planes are flattened); one padded `(H, W)` plane per partition
//! in SBUF, as in 2-D pooling; in pass 2 the `(OH, OW)` count tile (averages with padding)
//! must fit too — an allocation failure says so.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType};

use super::conv::load_padded_planes;
use super::pool::{Geometry, Pool2dConfig, PoolKind, axis_size, counts};
use crate::kernel::Kernel;
use crate::view::View;

const OP: &str = "pool3d";

/// Options of a 3-D pooling (ONNX `MaxPool` / `AveragePool` attributes on a rank-5 input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool3dConfig {
    /// Max or average (with `count_include_pad`).
    pub kind: PoolKind,
    /// `[KD, KH, KW]`, each ≥ 1.
    pub kernel: [usize; 3],
    /// `[s_d, s_h, s_w]`, each ≥ 1.
    pub stride: [usize; 3],
    /// `[dil_d, dil_h, dil_w]`, each ≥ 1.
    pub dilation: [usize; 3],
    /// `[d_begin, h_begin, w_begin, d_end, h_end, w_end]` (ONNX `pads` order), each smaller
    /// than the dilated kernel along its axis.
    pub pads: [usize; 6],
    /// Output sizes rounded up (see [`PoolExt::ceil_mode`](super::pool::PoolExt)).
    pub ceil_mode: bool,
}

impl Pool3dConfig {
    /// A cubic `kernel`, `stride`, the same padding `pad` on every side, no dilation, floor
    /// mode.
    pub fn new(kind: PoolKind, kernel: usize, stride: usize, pad: usize) -> Self {
        Self {
            kind,
            kernel: [kernel; 3],
            stride: [stride; 3],
            dilation: [1; 3],
            pads: [pad; 6],
            ceil_mode: false,
        }
    }

    /// The output size `[OD, OH, OW]` for an input `[D, H, W]`, or an error for a zero
    /// parameter, a pad not smaller than the dilated kernel, or a kernel larger than the
    /// padded input.
    pub fn output_size(&self, dhw: [usize; 3]) -> Result<[usize; 3], Error> {
        let mut o = [0; 3];
        for (i, axis) in ["D", "H", "W"].into_iter().enumerate() {
            o[i] = axis_size(
                OP,
                axis,
                dhw[i],
                [self.kernel[i], self.dilation[i], self.stride[i]],
                (self.pads[i], self.pads[i + 3]),
                self.ceil_mode,
            )?;
        }
        Ok(o)
    }

    /// The depth axis: the valid `kd` range `lo..hi` of output depth `od` (its planes inside
    /// `0..limit` after the begin pad; `limit` is `D`, or `D` + both pads to count padding).
    fn taps(&self, od: usize, begin: usize, limit: usize) -> (usize, usize) {
        let [kd, _, _] = self.kernel;
        let (s, dil) = (self.stride[0], self.dilation[0]);
        let inside = |t: usize| {
            let at = od * s + t * dil;
            at >= begin && at - begin < limit
        };
        let lo = (0..kd).find(|&t| inside(t)).unwrap_or(kd);
        let hi = (lo..kd).find(|&t| !inside(t)).unwrap_or(kd);
        (lo, hi)
    }
}

/// Emits `y = pool(x)` into `k` (see the module documentation): HBM views `x [N, C, D, H, W]`
/// (contiguous) and `y [N, C, OD, OH, OW]`, float dtypes (they may differ; the arithmetic is
/// fp32).
pub fn pool3d(k: &mut Kernel, y: &View, x: &View, cfg: &Pool3dConfig) -> Result<(), Error> {
    let [n, c, d, h, w] = match x.shape()[..] {
        [a, b, c, d, e] => [a, b, c, d, e],
        _ => {
            return Err(err!(
                Invalid,
                "{OP}: x {} must be 5-D [N, C, D, H, W]",
                x.describe()
            ));
        }
    };
    let [od, oh, ow] = cfg.output_size([d, h, w])?;
    if y.shape() != [n, c, od, oh, ow] {
        return Err(err!(
            Invalid,
            "{OP}: y {} must be [{n}, {c}, {od}, {oh}, {ow}] for x {}",
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
    let [pd0, ph0, pw0, pd1, ph1, pw1] = cfg.pads;
    let geo = Geometry {
        h,
        w,
        oh,
        ow,
        cfg: Pool2dConfig {
            kind: cfg.kind,
            kernel: (cfg.kernel[1], cfg.kernel[2]),
            stride: (cfg.stride[1], cfg.stride[2]),
            pads: [ph0, pw0, ph1, pw1],
        },
        dil: (cfg.dilation[1], cfg.dilation[2]),
    };
    let nc = n * c;
    if nc == 0 {
        return Ok(());
    }
    let xs = x.reshape(&[nc * d, h, w])?;
    let yv = y.reshape(&[nc, od, oh * ow])?;
    let z = k.scratch("pool3d_planes", DType::F32, &[nc, d, oh * ow])?;
    let (fill, op) = match cfg.kind {
        PoolKind::Max => (f64::NEG_INFINITY, AluOp::Max),
        PoolKind::Average { .. } => (0.0, AluOp::Add),
    };
    // Pass 1: every depth plane pooled over (H, W).
    let zs = z.reshape(&[nc * d, oh, ow])?;
    let (hp, wp) = geo.padded();
    for p0 in (0..nc * d).step_by(128) {
        let pn = 128.min(nc * d - p0);
        k.scope(|k| {
            let xp = k.sbuf_tile("pool3d_input", DType::F32, &[pn, hp, wp])?;
            load_padded_planes(k, &xp, &xs.slice(0, p0..p0 + pn)?, (ph0, pw0), (1, 1), fill)?;
            let acc = k.sbuf_tile("pool3d_plane", DType::F32, &[pn, oh, ow])?;
            geo.fold(k, &acc, &xp, op)?;
            k.dma_copy(&zs.slice(0, p0..p0 + pn)?, &acc)
        })?;
    }
    // Pass 2: across the depth.
    let span_d = cfg.dilation[0] * (cfg.kernel[0] - 1) + 1;
    let overhang = (od - 1) * cfg.stride[0] + span_d > pd0 + d + pd1 || geo.overhang();
    let divisor = match cfg.kind {
        PoolKind::Max => Divisor::None,
        // Whole windows (padding counted, or none): every count is KD·KH·KW.
        PoolKind::Average { count_include_pad }
            if !overhang && (count_include_pad || cfg.pads == [0; 6]) =>
        {
            Divisor::Const(cfg.kernel.iter().product::<usize>() as f32)
        }
        PoolKind::Average { count_include_pad } => {
            let (begin, limit) = if count_include_pad {
                (0, pd0 + d + pd1)
            } else {
                (pd0, d)
            };
            let vals: Vec<u8> = (0..od)
                .flat_map(|o| {
                    let (lo, hi) = cfg.taps(o, begin, limit);
                    ((hi - lo) as f32).to_le_bytes()
                })
                .collect();
            Divisor::Counts(k.constant("pool3d_depth_counts", DType::F32, &[od, 1], vals)?)
        }
    };
    let m = oh * ow;
    let jn = nc.min(128);
    let on = (128 / jn).min(od);
    k.scope(|k| {
        let hw_counts = match (&divisor, cfg.kind) {
            (Divisor::Counts(_), PoolKind::Average { count_include_pad }) => {
                let t = counts(k, &geo, jn * on, count_include_pad)?;
                Some(t.reshape(&[jn * on, m])?)
            }
            _ => None,
        };
        // fp32 per partition: the slab (KD rows), the accumulator, the output and the count.
        let budget = (150 * 1024 / 4usize).saturating_sub(hw_counts.as_ref().map_or(0, |_| m));
        let mc = m.min((budget / (cfg.kernel[0] + 3)).max(1));
        let pass = Pass2 {
            cfg,
            z: &z,
            y: &yv,
            d,
            fill,
            op,
            divisor: &divisor,
            hw_counts: hw_counts.as_ref(),
        };
        for j0 in (0..nc).step_by(jn) {
            let jc = jn.min(nc - j0);
            for o0 in (0..od).step_by(on) {
                let oc = on.min(od - o0);
                for m0 in (0..m).step_by(mc) {
                    let mn = mc.min(m - m0);
                    k.scope(|k| pass.chunk(k, (j0, jc), (o0, oc), (m0, mn)))?;
                }
            }
        }
        Ok(())
    })
}

/// How an output is finished.
enum Divisor {
    /// Max pooling.
    None,
    /// Averages over whole windows: `KD·KH·KW`.
    Const(f32),
    /// Per-position counts: the depth counts (`[OD, 1]` HBM) times the `(OH, OW)` ones.
    Counts(crate::Tensor),
}

/// The depth pass (see the module documentation).
struct Pass2<'a> {
    cfg: &'a Pool3dConfig,
    /// `[N·C, D, OH·OW]` fp32 plane results.
    z: &'a View,
    /// `[N·C, OD, OH·OW]`.
    y: &'a View,
    d: usize,
    fill: f64,
    op: AluOp,
    divisor: &'a Divisor,
    /// `[parts, OH·OW]` fp32 window counts over `(H, W)` (averages with counts).
    hw_counts: Option<&'a View>,
}

impl Pass2<'_> {
    /// Output planes `j0 .. j0 + jc`, depths `o0 .. o0 + oc`, columns `m0 .. m0 + mn`:
    /// partition `(o − o0)·jc + (j − j0)`.
    fn chunk(
        &self,
        k: &mut Kernel,
        (j0, jc): (usize, usize),
        (o0, oc): (usize, usize),
        (m0, mn): (usize, usize),
    ) -> Result<(), Error> {
        let kd = self.cfg.kernel[0];
        let (s, dil, pd0) = (self.cfg.stride[0], self.cfg.dilation[0], self.cfg.pads[0]);
        let parts = jc * oc;
        let slab = k.sbuf_tile("pool3d_slab", DType::F32, &[parts, kd, mn])?;
        let ranges: Vec<(usize, usize)> = (o0..o0 + oc)
            .map(|o| self.cfg.taps(o, pd0, self.d))
            .collect();
        if ranges.iter().any(|&(lo, hi)| hi - lo < kd) {
            k.memset(&slab, self.fill)?;
        }
        for (i, &(lo, hi)) in ranges.iter().enumerate() {
            if lo == hi {
                continue;
            }
            let first = (o0 + i) * s + lo * dil - pd0;
            let src = self
                .z
                .slice(0, j0..j0 + jc)?
                .slice_step(1, first..first + (hi - lo - 1) * dil + 1, dil)?
                .slice(2, m0..m0 + mn)?;
            let dst = slab.slice(0, i * jc..(i + 1) * jc)?.slice(1, lo..hi)?;
            k.dma_copy(&dst, &src)?;
        }
        let acc = k.sbuf_tile("pool3d_acc", DType::F32, &[parts, mn])?;
        k.tensor_copy(&acc, &slab.select(1, 0)?)?;
        for t in 1..kd {
            k.tensor_tensor(&acc, &acc, &slab.select(1, t)?, self.op)?;
        }
        let out = k.sbuf_tile("pool3d_out", self.y.dtype(), &[parts, mn])?;
        match (self.divisor, self.hw_counts) {
            (Divisor::Counts(cd), Some(hw)) => {
                let cdt = k.sbuf_tile("pool3d_depth_count", DType::F32, &[parts, 1])?;
                for i in 0..oc {
                    let row = cd.slice(0, o0 + i..o0 + i + 1)?.broadcast(0, jc)?;
                    k.dma_copy(&cdt.slice(0, i * jc..(i + 1) * jc)?, &row)?;
                }
                let cnt = k.sbuf_tile("pool3d_count", DType::F32, &[parts, mn])?;
                let hw = hw.slice(0, 0..parts)?.slice(1, m0..m0 + mn)?;
                k.tensor_tensor(&cnt, &hw, &cdt.broadcast(1, mn)?, AluOp::Mul)?;
                k.tensor_tensor(&out, &acc, &cnt, AluOp::Divide)?;
            }
            (Divisor::Const(v), _) => k.tensor_scalar(&out, &acc, AluOp::Divide, *v)?,
            _ => k.tensor_copy(&out, &acc)?,
        }
        for i in 0..oc {
            let dst = self
                .y
                .slice(0, j0..j0 + jc)?
                .select(1, o0 + i)?
                .slice(1, m0..m0 + mn)?;
            k.dma_copy(&dst, &out.slice(0, i * jc..(i + 1) * jc)?)?;
        }
        Ok(())
    }
}
