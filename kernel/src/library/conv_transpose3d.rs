//! 3-D transposed convolution as ONNX `ConvTranspose` computes it on rank-5 inputs:
//! `x [N, C, D, H, W]`, `w [C, O/groups, KD, KH, KW]`, optional `bias [O]`,
//! `y [N, O, OD, OH, OW]`, each output size `s·(n − 1) + output_padding + dil·(K − 1) + 1 −
//! pad_begin − pad_end` as in [`conv_transpose`](super::conv_transpose) (the same limits per
//! axis). [`conv_transpose3d`] emits it into a kernel.
//!
//! # Algorithm: one 2-D transposed convolution per output depth
//!
//! Output depth `od` receives input depth `id` through depth tap `kd` when
//! `od + pad_d = id·s_d + kd·dil_d`. For each `od`, those `m` pairs (at most `KD`; `j`
//! numbering them by increasing `id`, whose values are evenly spaced) are gathered into
//! scratch tensors through SBUF ([`activation::copy`](super::activation::copy): one copy of
//! the input planes, one per weight tap) — the input planes as `x' [N, C·m, H, W]` (channel
//! `c·m + j` holding `x[·, c, id_j]`) and the weights as `w' [C·m, O/groups, KH, KW]` (row
//! `c·m + j` holding `w[c, ·, kd_j]`) — and one
//! [`conv_transpose2d`](super::conv_transpose::conv_transpose2d) over `(H, W)` with `groups`
//! computes `y[·, ·, od]`: the depth contraction becomes part of the channel contraction, so
//! every output accumulates all its products in one fp32 PSUM sum, rounded once. Only the
//! pairs that exist are multiplied (no zero taps along the depth; along `(H, W)` the 2-D
//! kernel's zero-stuffing applies). A depth with no pair (output padding, or a stride larger
//! than the dilated kernel) is the bias (or 0), written from a tile.
//!
//! Cost: the 2-D kernel's, once per output depth, over `C·m` channels (about `KD / s_d` times
//! the input's channels): the products of a direct scatter, plus per output depth the
//! gathers (`N·C·m·H·W` input and `C·m·(O/groups)·KH·KW` weight elements, each through SBUF
//! and back) and the weights' load. The scratch tensors are reused from one depth to the next (the kernel
//! orders the reuse).
//!
//! Numerics: those of `conv_transpose2d` (operands in the input dtype, fp32 accumulation in
//! PSUM in its order — channel `c·m + j` in increasing partition order within each chunk
//! of 128 — one rounding to the output dtype).

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType};

use super::activation::copy;
use super::conv_transpose::{ConvTransposeConfig, axis_size, conv_transpose2d};
use crate::kernel::Kernel;
use crate::view::View;

const OP: &str = "conv_transpose3d";

/// Options of a 3-D transposed convolution (ONNX `ConvTranspose`'s attributes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose3dConfig {
    /// `[s_d, s_h, s_w]`, each ≥ 1.
    pub stride: [usize; 3],
    /// `[d_begin, h_begin, w_begin, d_end, h_end, w_end]` (ONNX `pads` order), each at most
    /// `dil·(K − 1)` along its axis.
    pub pads: [usize; 6],
    /// `[dil_d, dil_h, dil_w]`, each ≥ 1.
    pub dilation: [usize; 3],
    /// Groups, dividing the input and the output channels.
    pub groups: usize,
    /// Extra elements at the end of each output axis, each below the axis's stride or
    /// dilation.
    pub output_padding: [usize; 3],
}

impl Default for ConvTranspose3dConfig {
    fn default() -> Self {
        Self {
            stride: [1; 3],
            pads: [0; 6],
            dilation: [1; 3],
            groups: 1,
            output_padding: [0; 3],
        }
    }
}

impl ConvTranspose3dConfig {
    /// The output size `[OD, OH, OW]` for an input `[D, H, W]` and a kernel `[KD, KH, KW]`, or
    /// an error for a parameter out of range.
    pub fn output_size(&self, dhw: [usize; 3], k: [usize; 3]) -> Result<[usize; 3], Error> {
        let mut o = [0; 3];
        for i in 0..3 {
            o[i] = axis_size(
                OP,
                dhw[i],
                [k[i], self.stride[i], self.dilation[i]],
                (self.pads[i], self.pads[i + 3]),
                self.output_padding[i],
            )?;
        }
        Ok(o)
    }

    /// The `(id, kd)` pairs feeding output depth `od`, `id` increasing (`kd` decreasing):
    /// the `kd` solving `kd·dil ≡ od + pad (mod s)` step by `s / gcd(s, dil)`, so the `id`s
    /// step evenly by `dil / gcd(s, dil)`.
    fn pairs(&self, od: usize, d: usize, kd: usize) -> Vec<(usize, usize)> {
        let (s, dil) = (self.stride[0], self.dilation[0]);
        let at = od + self.pads[0];
        (0..kd)
            .rev()
            .filter_map(|t| {
                let r = at.checked_sub(t * dil)?;
                (r % s == 0 && r / s < d).then_some((r / s, t))
            })
            .collect()
    }
}

fn dims5(v: &View, role: &str, layout: &str) -> Result<[usize; 5], Error> {
    match v.shape()[..] {
        [a, b, c, d, e] => Ok([a, b, c, d, e]),
        _ => Err(err!(
            Invalid,
            "{OP}: {role} {} must be 5-D {layout}",
            v.describe()
        )),
    }
}

/// Emits `y = ConvTranspose(x, w) (+ bias)` (see the module documentation): HBM views `x
/// [N, C, D, H, W]` and `w [C, O/groups, KD, KH, KW]` of one float dtype, `bias [O]` float
/// (contiguous), `y [N, O, OD, OH, OW]` float.
pub fn conv_transpose3d(
    k: &mut Kernel,
    y: &View,
    x: &View,
    w: &View,
    bias: Option<&View>,
    cfg: &ConvTranspose3dConfig,
) -> Result<(), Error> {
    let [n, c, d, h, wd] = dims5(x, "x", "[N, C, D, H, W]")?;
    let [wc, cog, kd, kh, kw] = dims5(w, "w", "[C, O/groups, KD, KH, KW]")?;
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
    let [od, oh, ow] = cfg.output_size([d, h, wd], [kd, kh, kw])?;
    if y.shape() != [n, o, od, oh, ow] {
        return Err(err!(
            Invalid,
            "{OP}: y {} must be [{n}, {o}, {od}, {oh}, {ow}] for x {} and w {}",
            y.describe(),
            x.describe(),
            w.describe()
        ));
    }
    if !x.dtype().is_float() || w.dtype() != x.dtype() || !y.dtype().is_float() {
        return Err(err!(
            Invalid,
            "{OP}: x {} and w {} must have one float dtype, y {} a float dtype",
            x.describe(),
            w.describe(),
            y.describe()
        ));
    }
    if bias.is_some_and(|b| b.shape() != [o] || !b.dtype().is_float()) {
        return Err(err!(Invalid, "{OP}: bias must be a float [{o}]"));
    }
    let cfg2 = ConvTransposeConfig {
        stride: (cfg.stride[1], cfg.stride[2]),
        pads: [cfg.pads[1], cfg.pads[2], cfg.pads[4], cfg.pads[5]],
        dilation: (cfg.dilation[1], cfg.dilation[2]),
        groups: g,
        output_padding: (cfg.output_padding[1], cfg.output_padding[2]),
    };
    if n == 0 || o == 0 {
        return Ok(());
    }
    // No input channels: every output depth is the bias.
    let plans: Vec<Vec<(usize, usize)>> = (0..od)
        .map(|i| {
            if c == 0 {
                Vec::new()
            } else {
                cfg.pairs(i, d, kd)
            }
        })
        .collect();
    let mmax = plans.iter().map(Vec::len).max().unwrap_or(0);
    let (xsz, wsz) = (n * c * h * wd, c * cog * kh * kw);
    let scratch = if mmax > 0 {
        Some((
            k.scratch("convt3d_x", x.dtype(), &[mmax * xsz])?,
            k.scratch("convt3d_w", w.dtype(), &[mmax * wsz])?,
        ))
    } else {
        None
    };
    for (i, pairs) in plans.iter().enumerate() {
        let yd = y.select(2, i)?;
        let m = pairs.len();
        let Some((xs, ws)) = scratch.as_ref().filter(|_| m > 0) else {
            k.scope(|k| bias_plane(k, &yd, bias))?;
            continue;
        };
        let xv = xs.slice(0, 0..m * xsz)?.reshape(&[n, c, m, h, wd])?;
        let wv = ws.slice(0, 0..m * wsz)?.reshape(&[c, m, cog, kh, kw])?;
        // The pairs' input depths are evenly spaced (increasing with j): one copy gathers them.
        let (first, last) = (pairs[0].0, pairs[m - 1].0);
        let step = if m > 1 { (last - first) / (m - 1) } else { 1 };
        copy(k, &xv, &x.slice_step(2, first..last + 1, step)?)?;
        for (j, &(_, t)) in pairs.iter().enumerate() {
            copy(k, &wv.select(1, j)?, &w.select(2, t)?)?;
        }
        conv_transpose2d(
            k,
            &yd,
            &xv.reshape(&[n, c * m, h, wd])?,
            &wv.reshape(&[c * m, cog, kh, kw])?,
            bias,
            &cfg2,
        )?;
    }
    Ok(())
}

/// `y [N, O, OH, OW] = bias` (per output channel; 0 without a bias), 128 channels at a time.
fn bias_plane(k: &mut Kernel, y: &View, bias: Option<&View>) -> Result<(), Error> {
    let s = y.shape();
    let (n, o, oh, ow) = (s[0], s[1], s[2], s[3]);
    for o0 in (0..o).step_by(128) {
        let on = 128.min(o - o0);
        k.scope(|k| {
            let out = k.sbuf_tile("convt3d_bias_plane", y.dtype(), &[on, oh, ow])?;
            match bias {
                Some(b) => {
                    let bt = k.sbuf_tile("convt3d_bias", b.dtype(), &[on, 1, 1])?;
                    k.dma_copy(&bt, &b.slice(0, o0..o0 + on)?.reshape(&[on, 1, 1])?)?;
                    let zero = k.sbuf_tile("convt3d_zero", DType::F32, &[on, oh, ow])?;
                    k.memset(&zero, 0.0)?;
                    let bb = bt.broadcast(1, oh)?.broadcast(2, ow)?;
                    k.tensor_tensor(&out, &zero, &bb, AluOp::Add)?;
                }
                None => k.memset(&out, 0.0)?,
            }
            for img in 0..n {
                k.dma_copy(&y.select(0, img)?.slice(0, o0..o0 + on)?, &out)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}
