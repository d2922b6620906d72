//! 2-D (and 1-D) transposed convolution as ONNX `ConvTranspose` computes it: `x [N, C, H, W]`,
//! `w [C, O/groups, KH, KW]`, optional `bias [O]`, `y [N, O, OH, OW]` with
//! `OH = stride_h·(H − 1) + output_padding_h + dil_h·(KH − 1) + 1 − pad_top − pad_bottom`
//! (likewise `OW`; an `output_shape` attribute is turned into pads by the caller, as ONNX
//! specifies).
//!
//! # Algorithm
//!
//! A transposed convolution is the convolution of the input *upsampled* by the stride (zeros
//! between the samples) with the kernel flipped in both axes and its two channel axes
//! swapped, stride 1, dilation kept, and padding `dil·(K − 1) − pad` on each side (plus
//! `output_padding` at the bottom and right). [`conv2d`](super::conv::conv2d)'s
//! shifted-window engine runs exactly that: the input planes are placed `stride` apart in
//! the zero-filled padded tile (one strided on-chip copy, no zero-stuffed tensor in HBM), and
//! the weights are loaded in their stored `[C, O/groups, taps]` layout — input channels on
//! partitions, so each tap's stationary is a strided view copied into place (flipped), no
//! TensorE transposes. Depthwise transposed convolutions (`C/groups = 1`) take the VectorE
//! path with flipped taps.
//!
//! Cost: TensorE multiplies the zeros too (`stride_h·stride_w` times the useful work);
//! the SBUF tile holds the upsampled plane.
//!
//! Numerics: those of `conv2d` (operands in the input dtype, fp32 accumulation in PSUM —
//! the added zero products are exact — one rounding to the output dtype).
//!
//! Limits: each pad at most `dil·(K − 1)` (a larger pad crops the output; not supported),
//! `output_padding` smaller than the stride or the dilation (ONNX's rule).

use nrt_core::{Error, err};

use super::conv::{Conv2dConfig, Geometry, as_2d, check_output, run};
use crate::kernel::Kernel;
use crate::view::View;

const OP: &str = "conv_transpose2d";

/// Options of a transposed convolution (ONNX `ConvTranspose`'s attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeConfig {
    /// `(stride_h, stride_w)`, each ≥ 1.
    pub stride: (usize, usize),
    /// `[top, left, bottom, right]` (ONNX `pads` order), each ≤ `dil·(K − 1)`.
    pub pads: [usize; 4],
    /// `(dil_h, dil_w)`, each ≥ 1.
    pub dilation: (usize, usize),
    /// Groups, dividing the input and the output channels.
    pub groups: usize,
    /// Extra rows / columns at the bottom / right of the output.
    pub output_padding: (usize, usize),
}

impl Default for ConvTransposeConfig {
    fn default() -> Self {
        Self {
            stride: (1, 1),
            pads: [0; 4],
            dilation: (1, 1),
            groups: 1,
            output_padding: (0, 0),
        }
    }
}

impl ConvTransposeConfig {
    /// The output size `(OH, OW)` for an input `(H, W)` and a kernel `(KH, KW)`, or an error
    /// for a parameter out of range.
    pub fn output_size(
        &self,
        hw: (usize, usize),
        khw: (usize, usize),
    ) -> Result<(usize, usize), Error> {
        let [pt, pl, pb, pr] = self.pads;
        let (s, d, op) = (self.stride, self.dilation, self.output_padding);
        Ok((
            axis_size(OP, hw.0, [khw.0, s.0, d.0], (pt, pb), op.0)?,
            axis_size(OP, hw.1, [khw.1, s.1, d.1], (pl, pr), op.1)?,
        ))
    }
}

/// The output size along one axis of `n` elements for `[kernel, stride, dilation]`, pads
/// `(begin, end)` and `output_padding` `op`, or an error naming `kernel` for a parameter out
/// of range (each pad at most `dil·(K − 1)`, `op` below the stride or the dilation) or no
/// output.
pub(super) fn axis_size(
    kernel: &str,
    n: usize,
    [k, s, d]: [usize; 3],
    (p0, p1): (usize, usize),
    op: usize,
) -> Result<usize, Error> {
    let span = d.saturating_mul(k.saturating_sub(1));
    if n == 0 || k == 0 || s == 0 || d == 0 || p0 > span || p1 > span || op >= s.max(d) {
        return Err(err!(
            Invalid,
            "{kernel}: input {n}, kernel {k}, stride {s}, dilation {d}, pads {p0}/{p1}, \
             output_padding {op}: each must be ≥ 1 (output_padding ≥ 0 and below the stride or \
             dilation), each pad at most dil·(K − 1) = {span}"
        ));
    }
    let full = s
        .saturating_mul(n - 1)
        .saturating_add(op)
        .saturating_add(span)
        .saturating_add(1);
    full.checked_sub(p0 + p1).filter(|&o| o > 0).ok_or_else(|| {
        err!(
            Invalid,
            "{kernel}: the pads {p0} + {p1} leave no output ({full})"
        )
    })
}

fn dims4(v: &View, role: &str, layout: &str) -> Result<[usize; 4], Error> {
    match v.shape()[..] {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(err!(
            Invalid,
            "{OP}: {role} {} must be 4-D {layout} (or 3-D for 1-D)",
            v.describe()
        )),
    }
}

/// Emits `y = ConvTranspose(x, w) (+ bias)` (see the module documentation): HBM views `x
/// [N, C, H, W]` and `w [C, O/groups, KH, KW]` of one float dtype (`w` contiguous), `bias
/// [O]` float, `y [N, O, OH, OW]` float; 3-D `x`, `w`, `y` for 1-D (as `H = 1`).
pub fn conv_transpose2d(
    k: &mut Kernel,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
    cfg: &ConvTransposeConfig,
) -> Result<(), Error> {
    if x.rank() == 3 && w.rank() == 3 && y.rank() == 3 {
        return conv_transpose2d(k, &as_2d(y), &as_2d(x), &as_2d(w), bias, cfg);
    }
    let [n, c, h, wd] = dims4(x, "x", "[N, C, H, W]")?;
    let [wc, cog, kh, kw] = dims4(w, "w", "[C, O/groups, KH, KW]")?;
    let g = cfg.groups;
    if g == 0 || wc != c || c % g != 0 {
        return Err(err!(
            Invalid,
            "{OP}: w {} must have x {}'s {c} channels first, and groups {g} must divide them",
            w.describe(),
            x.describe()
        ));
    }
    let o = cog * g;
    let (oh, ow) = cfg.output_size((h, wd), (kh, kw))?;
    check_output(OP, y, x, w, bias, [n, o, oh, ow])?;
    let (dh, dw) = cfg.dilation;
    let [pt, pl, pb, pr] = cfg.pads;
    let (sh, sw) = (dh * (kh - 1), dw * (kw - 1));
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
        cfg: Conv2dConfig {
            stride: (1, 1),
            pads: [
                sh - pt,
                sw - pl,
                sh - pb + cfg.output_padding.0,
                sw - pr + cfg.output_padding.1,
            ],
            dilation: cfg.dilation,
            groups: g,
        },
        up: cfg.stride,
        flip: true,
        cio: false,
    };
    run(k, &geo, y, x, w, bias)
}
