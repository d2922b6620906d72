//! Scaled-dot-product attention, `out = softmax(scale · Q·Kᵀ [+ causal mask]) · V`, one head
//! ([`attention`]) or several ([`multi_head_attention`]), with a convenience builder
//! ([`build_attention`]).
//!
//! # Algorithm
//!
//! Per head, `Kᵀ` (`[d, Sk]`, head dimension on partitions) is loaded once by
//! `dma_transpose`, `V` once in chunks of 128 keys (keys on partitions). Then per tile of up
//! to 128 queries:
//!
//! 1. `Qᵀ` for the tile by `dma_transpose`; the scores `Q·Kᵀ` by `nc_matmul` (stationary
//!    `Qᵀ`, moving `Kᵀ` in blocks of up to 512 keys) into PSUM, evacuated to an fp32 SBUF row
//!    block with the scale applied (VectorE);
//! 2. with a causal mask, `affine_select` (GpSimdE) sets the scores of keys after the query
//!    (`key > query`) to −∞; keys no query of the tile may see are not computed at all;
//! 3. the numerically stable softmax: each row's maximum (`tensor_reduce`), then
//!    `exp(s − max)` with the row sum accumulated by the same `activation_reduce` (ScalarE),
//!    the probabilities stored in the input dtype, and the row sum's `reciprocal`;
//! 4. `P·V`: each block of up to 128 keys of `P` is transposed on TensorE (a matmul by the
//!    identity, exact), copied to SBUF, and multiplied by the `V` chunk, the chunks
//!    accumulating in one fp32 PSUM tile;
//! 5. the PSUM result times the reciprocal row sum (VectorE), rounded to the output dtype and
//!    stored.
//!
//! Matmul operands are in the input dtype (fp32 or bf16); every accumulation (scores, row
//! sums, `P·V`) is fp32. The normalisation comes after `P·V` (one multiply per output
//! element rather than per probability).
//!
//! Limits: head dimension ≤ 128; any sequence lengths (causal needs `Sq = Sk`, the mask being
//! `key ≤ query`); the scores of one query tile (`4·Sk` bytes per partition) and `Kᵀ`, `V` of
//! a head stay in SBUF, which bounds `Sk` to about 12 K keys in fp32.

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, Program};

use crate::kernel::Kernel;
use crate::ops::{AffineSelect, NcMatmul};
use crate::tiles::Tile;
use crate::view::View;

/// Options of an attention.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionConfig {
    /// Mask keys after the query (`key > query` gets probability 0); needs `Sq = Sk`.
    pub causal: bool,
    /// Factor of the scores; `None` is `1/√d`. (The default: no mask, `1/√d`.)
    pub scale: Option<f32>,
}

const OP: &str = "attention";
/// Keys per score block (one PSUM bank of fp32).
const KEY_BLOCK: usize = 512;

/// Checks a 2-D HBM operand and returns its shape.
fn dims2(v: &View, role: &str) -> Result<(usize, usize), Error> {
    match v.shape()[..] {
        [a, b] => Ok((a, b)),
        _ => Err(err!(
            Invalid,
            "{OP}: {role} {} must be 2-D [sequence, head dim]",
            v.describe()
        )),
    }
}

/// Emits one head of attention into `k`: `out[Sq, d] = softmax(scale · q·keyᵀ) · v` for HBM
/// views `q [Sq, d]`, `key [Sk, d]`, `v [Sk, d]` (same float dtype) and `out [Sq, d]` (any
/// float dtype). See the module documentation for the algorithm and limits.
pub fn attention(
    k: &mut Kernel,
    out: &View,
    q: &View,
    key: &View,
    v: &View,
    cfg: &AttentionConfig,
) -> Result<(), Error> {
    let (sq, d) = dims2(q, "q")?;
    let (sk, dk) = dims2(key, "key")?;
    let (sv, dv) = dims2(v, "v")?;
    let (so, dout) = dims2(out, "out")?;
    if dk != d || dv != d || sv != sk || so != sq || dout != d {
        return Err(err!(
            Invalid,
            "{OP}: shapes do not agree: q {}, key {}, v {}, out {} (want [Sq, d], [Sk, d], \
             [Sk, d], [Sq, d])",
            q.describe(),
            key.describe(),
            v.describe(),
            out.describe()
        ));
    }
    if d == 0 || d > 128 {
        return Err(err!(
            Invalid,
            "{OP}: head dimension {d} of q {} must be 1..=128 (it is the contraction over \
             partitions)",
            q.describe()
        ));
    }
    let dt = q.dtype();
    if !dt.is_float() || key.dtype() != dt || v.dtype() != dt {
        return Err(err!(
            Invalid,
            "{OP}: q {}, key {} and v {} must have one float dtype",
            q.describe(),
            key.describe(),
            v.describe()
        ));
    }
    if !out.dtype().is_float() {
        return Err(err!(
            Invalid,
            "{OP}: out {} must have a float dtype",
            out.describe()
        ));
    }
    if cfg.causal && sq != sk {
        return Err(err!(
            Invalid,
            "{OP}: a causal mask needs as many queries as keys (q {}, key {})",
            q.describe(),
            key.describe()
        ));
    }
    let scale = cfg.scale.unwrap_or(1.0 / (d as f32).sqrt());
    if !scale.is_finite() {
        return Err(err!(Invalid, "{OP}: scale {scale} is not finite"));
    }
    k.scope(|k| {
        let ident = identity(k, dt)?;
        let kt = k.sbuf_tile("attn_kT", dt, &[d, sk])?;
        k.dma_transpose(&kt, key)?;
        let chunks = sk.div_ceil(128);
        let vt = k.sbuf_tile("attn_v", dt, &[128, chunks, d])?;
        for c in 0..chunks {
            let rows = c * 128..sk.min((c + 1) * 128);
            let n = rows.len();
            k.dma_copy(
                &vt.slice(0, 0..n)?.select(1, c)?.reshape(&[n, d])?,
                &v.slice(0, rows)?,
            )?;
        }
        for q0 in (0..sq).step_by(128) {
            let qn = 128.min(sq - q0);
            let tile = QueryTile {
                q0,
                qn,
                keys: if cfg.causal { sk.min(q0 + qn) } else { sk },
                d,
                dt,
                scale,
                causal: cfg.causal,
            };
            k.scope(|k| tile.emit(k, out, q, &kt, &vt, &ident))?;
        }
        Ok(())
    })
}

/// Emits attention for every head: `q`, `key`, `v`, `out` are `[H, S, d]` HBM views, head
/// `h` computed by [`attention`] on `select(0, h)` of each.
pub fn multi_head_attention(
    k: &mut Kernel,
    out: &View,
    q: &View,
    key: &View,
    v: &View,
    cfg: &AttentionConfig,
) -> Result<(), Error> {
    let heads = |x: &View, role: &str| match x.shape()[..] {
        [h, _, _] => Ok(h),
        _ => Err(err!(
            Invalid,
            "{OP}: {role} {} must be 3-D [heads, sequence, head dim]",
            x.describe()
        )),
    };
    let h = heads(q, "q")?;
    for (x, role) in [(key, "key"), (v, "v"), (out, "out")] {
        if heads(x, role)? != h {
            return Err(err!(
                Invalid,
                "{OP}: {role} {} and q {} have different head counts",
                x.describe(),
                q.describe()
            ));
        }
    }
    for i in 0..h {
        attention(
            k,
            &out.select(0, i)?,
            &q.select(0, i)?,
            &key.select(0, i)?,
            &v.select(0, i)?,
            cfg,
        )?;
    }
    Ok(())
}

/// A kernel named `attention` with inputs `q`, `k`, `v` (`dtype`, `[heads, seq, head_dim]`)
/// and output `out` (same dtype and shape), computed by [`multi_head_attention`]; `causal`
/// selects the mask, the scale is `1/√head_dim`.
pub fn build_attention(
    heads: usize,
    seq: usize,
    head_dim: usize,
    dtype: DType,
    causal: bool,
) -> Result<Program, Error> {
    let mut k = Kernel::new("attention");
    let shape = [heads, seq, head_dim];
    let q = k.input("q", dtype, &shape)?;
    let key = k.input("k", dtype, &shape)?;
    let v = k.input("v", dtype, &shape)?;
    let out = k.output("out", dtype, &shape)?;
    let cfg = AttentionConfig {
        causal,
        scale: None,
    };
    multi_head_attention(&mut k, &out, &q, &key, &v, &cfg)?;
    k.build()
}

/// A `[128, 128]` identity matrix in `dt` (ones where partition = column).
fn identity(k: &mut Kernel, dt: DType) -> Result<Tile, Error> {
    let ones = k.sbuf_tile("attn_ones", dt, &[128, 128])?;
    k.memset(&ones, 1.0)?;
    let ident = k.sbuf_tile("attn_identity", dt, &[128, 128])?;
    k.emit(AffineSelect {
        dst: &ident,
        pattern: &[(-1, 128)],
        channel_multiplier: 1,
        on_true: &ones,
        on_false_value: 0.0,
        cmp_op: AluOp::Equal,
        offset: 0,
    })?;
    k.free(&ones)?;
    Ok(ident)
}

/// One tile of up to 128 queries.
struct QueryTile {
    q0: usize,
    qn: usize,
    /// Keys computed: all, or (causal) those up to the tile's last query.
    keys: usize,
    d: usize,
    dt: DType,
    scale: f32,
    causal: bool,
}

impl QueryTile {
    fn emit(
        &self,
        k: &mut Kernel,
        out: &View,
        q: &View,
        kt: &View,
        vt: &View,
        ident: &View,
    ) -> Result<(), Error> {
        let (q0, qn, nk, d, dt) = (self.q0, self.qn, self.keys, self.d, self.dt);
        // 1. Scores.
        let qt = k.sbuf_tile("attn_qT", dt, &[d, qn])?;
        k.dma_transpose(&qt, &q.slice(0, q0..q0 + qn)?)?;
        let s = k.sbuf_tile("attn_scores", DType::F32, &[qn, nk])?;
        for b0 in (0..nk).step_by(KEY_BLOCK) {
            let bw = KEY_BLOCK.min(nk - b0);
            let ps = k.psum_tile("attn_scores_psum", DType::F32, &[qn, bw])?;
            k.emit(NcMatmul {
                dst: &ps,
                stationary: &qt,
                moving: &kt.slice(1, b0..b0 + bw)?,
                accumulate: Some(false),
            })?;
            k.tensor_scalar(&s.slice(1, b0..b0 + bw)?, &ps, AluOp::Mul, self.scale)?;
            k.free(&ps)?;
        }
        // 2. Causal mask: keep key j of query q0 + p where q0 + p − j ≥ 0.
        if self.causal {
            let offset = i32::try_from(q0)
                .map_err(|_| err!(Invalid, "{OP}: query offset {q0} exceeds int32"))?;
            k.emit(AffineSelect {
                dst: &s,
                pattern: &[(-1, nk)],
                channel_multiplier: 1,
                on_true: &s,
                on_false_value: f32::NEG_INFINITY,
                cmp_op: AluOp::GreaterEqual,
                offset,
            })?;
        }
        // 3. Softmax numerator and row sums.
        let mx = k.sbuf_tile("attn_rowmax", DType::F32, &[qn, 1])?;
        k.tensor_reduce(&mx, AluOp::Max, &s, &[1])?;
        let neg = k.sbuf_tile("attn_negmax", DType::F32, &[qn, 1])?;
        k.tensor_scalar(&neg, &mx, AluOp::Mul, -1.0)?;
        let p = k.sbuf_tile("attn_probs", dt, &[qn, nk])?;
        let sum = k.sbuf_tile("attn_rowsum", DType::F32, &[qn, 1])?;
        k.activation_reduce(&p, ActFn::Exp, &s, AluOp::Add, &sum, &neg, 1.0)?;
        let rinv = k.sbuf_tile("attn_rowsum_inv", DType::F32, &[qn, 1])?;
        k.reciprocal(&rinv, &sum)?;
        // 4. P·V, 128 keys at a time.
        let acc = k.psum_tile("attn_out_psum", DType::F32, &[qn, d])?;
        let id = ident.slice(0, 0..qn)?.slice(1, 0..qn)?;
        for (c, c0) in (0..nk).step_by(128).enumerate() {
            let cw = 128.min(nk - c0);
            let pt_ps = k.psum_tile("attn_pT_psum", DType::F32, &[cw, qn])?;
            k.emit(NcMatmul {
                dst: &pt_ps,
                stationary: &p.slice(1, c0..c0 + cw)?,
                moving: &id,
                accumulate: Some(false),
            })?;
            let pt = k.sbuf_tile("attn_pT", dt, &[cw, qn])?;
            k.tensor_copy(&pt, &pt_ps)?;
            k.emit(NcMatmul {
                dst: &acc,
                stationary: &pt,
                moving: &vt.slice(0, 0..cw)?.select(1, c)?.reshape(&[cw, d])?,
                accumulate: Some(c > 0),
            })?;
            k.free(&pt)?;
            k.free(&pt_ps)?;
        }
        // 5. Normalise and store.
        let o = k.sbuf_tile("attn_out", out.dtype(), &[qn, d])?;
        k.tensor_scalar(&o, &acc, AluOp::Mul, &rinv)?;
        k.dma_copy(&out.slice(0, q0..q0 + qn)?, &o)
    }
}
