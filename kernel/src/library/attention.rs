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
//!    `Qᵀ`, moving `Kᵀ` in blocks of up to 512 keys) into PSUM, evacuated to an fp32 SBUF
//!    row block — without a mask by VectorE's `range_select` (with bounds that keep
//!    everything), which also gives each block's row maxima in the same pass, the scale
//!    being applied later inside the exponential; with a mask by ScalarE, scaled;
//! 2. with a causal mask, `affine_select` (GpSimdE) sets the scores of keys after the query
//!    (`key > query`) to −∞; keys no query of the tile may see are not computed at all;
//! 3. the numerically stable softmax: each row's maximum, negated (`tensor_reduce` on
//!    VectorE, over the block maxima without a mask — the scale being positive, the maximum
//!    of the scaled scores is the scaled maximum), then `exp(scale·s − max)` with the row sum
//!    accumulated by the same `activation_reduce` (ScalarE), the probabilities stored in the
//!    input dtype;
//! 4. `P·V`: each block of up to 128 keys of `P` is transposed on TensorE (a matmul by the
//!    identity, exact), copied to SBUF (shared between VectorE and ScalarE), and multiplied
//!    by the `V` chunk, the chunks accumulating in one fp32 PSUM tile;
//! 5. the PSUM result divided by the row sum (VectorE; one correctly rounded division per
//!    output element rather than a multiply per probability), rounded to the output dtype
//!    and stored.
//!
//! Every tile lives in a pool of two buffers (four for the transposed `P` blocks), the
//! scores and softmax of query tile `i + 1` are emitted before the `P·V` of tile `i`
//! (software pipelining), the transposes of `P` run two blocks ahead of their products, `Kᵀ`
//! is loaded in blocks of 512 keys and `V` after the first scores are issued — so the
//! engines' in-order streams overlap consecutive tiles and heads.
//!
//! Matmul operands are in the input dtype (fp32 or bf16); every accumulation (scores, row
//! sums, `P·V`) is fp32.
//!
//! Limits: head dimension ≤ 128; any sequence lengths (causal needs `Sq = Sk`, the mask being
//! `key ≤ query`); a positive scale. Two buffers of the scores and probabilities of a query
//! tile and of `Kᵀ` and `V` stay in SBUF (at head dim 128, about `32·Sk` bytes per partition
//! in fp32, `20·Sk` in bf16), which bounds `Sk` to about 6 K keys in fp32 and 9 K in bf16;
//! running out is an allocation error naming the tile (`NRT_RESOURCE`, or `NRT_INVALID` for
//! a tile larger than a partition).

use std::collections::VecDeque;

use nrt_core::{Error, err};
use nrt_sim::engine::{ActFn, AluOp, DType, EngineId, Program};

use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{ActBias, AffineSelect, NcMatmul, RangeSelect, TensorCopy, TensorReduce};
use crate::pool::TilePool;
use crate::tiles::Tile;
use crate::view::View;

/// Options of an attention.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct AttentionConfig {
    /// Mask keys after the query (`key > query` gets probability 0); needs `Sq = Sk`.
    pub causal: bool,
    /// Factor of the scores (finite, positive); `None` is `1/√d`. (The default: no mask,
    /// `1/√d`.)
    pub scale: Option<f32>,
}

const OP: &str = "attention";
/// Chunks of `P` transposed ahead of their product with `V`.
const LOOKAHEAD: usize = 2;
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

/// The validated problem of one head.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Shape {
    sq: usize,
    sk: usize,
    d: usize,
    dt: DType,
    out_dt: DType,
    scale: f32,
    causal: bool,
}

/// Checks one head's operands.
fn validate(
    out: &View,
    q: &View,
    key: &View,
    v: &View,
    cfg: &AttentionConfig,
) -> Result<Shape, Error> {
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
    if !(scale.is_finite() && scale > 0.0) {
        return Err(err!(
            Invalid,
            "{OP}: scale {scale} must be finite and positive"
        ));
    }
    Ok(Shape {
        sq,
        sk,
        d,
        dt,
        out_dt: out.dtype(),
        scale,
        causal: cfg.causal,
    })
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
    let shape = validate(out, q, key, v, cfg)?;
    let mut bufs = Bufs::new(k, &shape)?;
    let r = bufs.head(k, &shape, out, q, key, v);
    bufs.free(k)?;
    r
}

/// Emits attention for every head: `q`, `key`, `v`, `out` are `[H, S, d]` HBM views, head
/// `h` computed as [`attention`] computes it on `select(0, h)` of each; the heads share one
/// set of double-buffered tiles, so the loads of a head overlap the previous head's work.
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
    let heads: Vec<[View; 4]> = (0..h)
        .map(|i| {
            Ok([
                out.select(0, i)?,
                q.select(0, i)?,
                key.select(0, i)?,
                v.select(0, i)?,
            ])
        })
        .collect::<Result<_, Error>>()?;
    let Some([o0, q0, k0, v0]) = heads.first() else {
        return Ok(());
    };
    let shape = validate(o0, q0, k0, v0, cfg)?;
    let mut bufs = Bufs::new(k, &shape)?;
    let r = heads
        .iter()
        .try_for_each(|[o, qh, kh, vh]| bufs.head(k, &shape, o, qh, kh, vh));
    bufs.free(k)?;
    r
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

/// A `[128, 128]` identity matrix in `dt` (ones where partition = column), a tile named
/// `name` (for transposes on TensorE: `nc_matmul` of `x` by it is `xᵀ`, exactly).
pub(crate) fn identity(k: &mut Kernel, dt: DType, name: &str) -> Result<Tile, Error> {
    let ident = k.sbuf_tile(name, dt, &[128, 128])?;
    k.scope(|k| {
        let ones = k.sbuf_tile("attn_ones", dt, &[128, 128])?;
        k.memset(&ones, 1.0)?;
        k.emit(AffineSelect {
            dst: &ident,
            pattern: &[(-1, 128)],
            channel_multiplier: 1,
            on_true: &ones,
            on_false_value: 0.0,
            cmp_op: AluOp::Equal,
            offset: 0,
        })
    })?;
    Ok(ident)
}

/// The tiles of an attention: the identity, and double-buffered pools for everything
/// per head (`Kᵀ`, `V`), per query tile and per key block, so that consecutive iterations
/// overlap on the engines.
struct Bufs {
    ident: Tile,
    /// `[128, 2]` fp32: +max and 0, bounds of a `range_select` that keeps everything.
    bounds: Tile,
    pools: Vec<TilePool>,
}

/// A query tile's scores.
struct Scored {
    q0: usize,
    qn: usize,
    nk: usize,
    /// `[qn, nk]` fp32: unscaled without a mask, scaled and masked with one.
    s: View,
    /// Without a mask: each block's row maxima, `[qn, blocks]`.
    block_max: Option<View>,
}

/// A query tile between its softmax and its `P·V`.
struct Softmaxed {
    q0: usize,
    qn: usize,
    nk: usize,
    /// `exp(s − max)`, `[qn, nk]`.
    p: View,
    /// `Σ exp(s − max)`, `[qn, 1]`.
    sum: View,
}

/// Pool indices.
const KT: usize = 0;
const V: usize = 1;
const QT: usize = 2;
const S: usize = 3;
const P: usize = 4;
const NEG: usize = 5;
const SUM: usize = 6;
const ACC: usize = 7;
const O: usize = 8;
const SPS: usize = 9;
const PTPS: usize = 10;
const PT: usize = 11;
const BMAX: usize = 12;

impl Bufs {
    fn new(k: &mut Kernel, sh: &Shape) -> Result<Bufs, Error> {
        let (sk, d, dt) = (sh.sk, sh.d, sh.dt);
        let (sb, ps, f32) = (Memory::Sbuf, Memory::Psum, DType::F32);
        let specs: [(&str, Memory, DType, Vec<usize>); BMAX + 1] = [
            ("attn_kT", sb, dt, vec![d, sk]),
            ("attn_v", sb, dt, vec![128, sk.div_ceil(128), d]),
            ("attn_qT", sb, dt, vec![d, 128]),
            ("attn_scores", sb, f32, vec![128, sk]),
            ("attn_probs", sb, dt, vec![128, sk]),
            ("attn_negmax", sb, f32, vec![128, 1]),
            ("attn_rowsum", sb, f32, vec![128, 1]),
            ("attn_out_psum", ps, f32, vec![128, d]),
            ("attn_out", sb, sh.out_dt, vec![128, d]),
            ("attn_scores_psum", ps, f32, vec![128, KEY_BLOCK.min(sk)]),
            ("attn_pT_psum", ps, f32, vec![128, 128]),
            ("attn_pT", sb, dt, vec![128, 128]),
            ("attn_block_max", sb, f32, vec![128, sk.div_ceil(KEY_BLOCK)]),
        ];
        let ident = identity(k, dt, "attn_identity")?;
        let bounds = match k.sbuf_tile("attn_bounds", f32, &[128, 2]) {
            Ok(t) => t,
            Err(e) => {
                let _ = k.free(&ident);
                return Err(e);
            }
        };
        let mut bufs = Bufs {
            ident,
            bounds,
            pools: Vec::new(),
        };
        let fill = |k: &mut Kernel, b: &Bufs| -> Result<(), Error> {
            k.memset(&b.bounds.slice(1, 0..1)?, f64::from(f32::MAX))?;
            k.memset(&b.bounds.slice(1, 1..2)?, 0.0)
        };
        if let Err(e) = fill(k, &bufs) {
            let _ = bufs.free(k);
            return Err(e);
        }
        for (name, mem, t, shape) in specs {
            let n = if matches!(name, "attn_pT_psum" | "attn_pT") {
                LOOKAHEAD + 2
            } else {
                2
            };
            match k.tile_pool(name, mem, t, &shape, n) {
                Ok(p) => bufs.pools.push(p),
                Err(e) => {
                    let _ = bufs.free(k);
                    return Err(e);
                }
            }
        }
        Ok(bufs)
    }

    fn free(self, k: &mut Kernel) -> Result<(), Error> {
        for p in self.pools {
            p.free(k)?;
        }
        for t in [&self.ident, &self.bounds] {
            if k.is_live(t) {
                k.free(t)?;
            }
        }
        Ok(())
    }

    /// The next tile of pool `i`, narrowed to `[rows, cols]` (2-D pools).
    fn take(&mut self, k: &mut Kernel, i: usize, rows: usize, cols: usize) -> Result<View, Error> {
        let p = self
            .pools
            .get_mut(i)
            .ok_or_else(|| err!(Invalid, "{OP}: no tile pool {i}"))?;
        p.next(k)?.slice(0, 0..rows)?.slice(1, 0..cols)
    }

    /// One head.
    fn head(
        &mut self,
        k: &mut Kernel,
        sh: &Shape,
        out: &View,
        q: &View,
        key: &View,
        v: &View,
    ) -> Result<(), Error> {
        let (sk, d) = (sh.sk, sh.d);
        // Kᵀ in blocks of keys, so the first scores wait only for the first block; V is
        // loaded after the first query tile's scores are issued (it is needed only by P·V).
        let kt = self.take(k, KT, d, sk)?;
        for b0 in (0..sk).step_by(KEY_BLOCK) {
            let bw = KEY_BLOCK.min(sk - b0);
            k.dma_transpose(&kt.slice(1, b0..b0 + bw)?, &key.slice(0, b0..b0 + bw)?)?;
        }
        let vt = self
            .pools
            .get_mut(V)
            .ok_or_else(|| err!(Invalid, "{OP}: no tile pool {V}"))?
            .next(k)?;
        let mut v_loaded = false;
        let mut load_v = |k: &mut Kernel| -> Result<(), Error> {
            if v_loaded {
                return Ok(());
            }
            v_loaded = true;
            for c in 0..sk.div_ceil(128) {
                let rows = c * 128..sk.min((c + 1) * 128);
                let n = rows.len();
                k.dma_copy(
                    &vt.slice(0, 0..n)?.select(1, c)?.reshape(&[n, d])?,
                    &v.slice(0, rows)?,
                )?;
            }
            Ok(())
        };
        // Software-pipelined: the scores and softmax of query tile i + 1 are emitted before
        // the P·V of tile i, so that each engine's in-order stream alternates work of two
        // tiles.
        let mut pending: Option<Softmaxed> = None;
        for q0 in (0..sh.sq).step_by(128) {
            let qn = 128.min(sh.sq - q0);
            let nk = if sh.causal { sk.min(q0 + qn) } else { sk };
            let scores = self.scores(k, sh, (q0, qn, nk), q, &kt)?;
            load_v(k)?;
            let next = self.softmax(k, sh, scores)?;
            if let Some(prev) = pending.replace(next) {
                self.weighted_sum(k, sh, &prev, out, &vt)?;
            }
        }
        if let Some(last) = pending {
            self.weighted_sum(k, sh, &last, out, &vt)?;
        }
        Ok(())
    }

    /// Steps 1 and 2 for queries `q0 .. q0 + qn` against keys `0 .. nk`: the scaled and
    /// masked scores.
    fn scores(
        &mut self,
        k: &mut Kernel,
        sh: &Shape,
        (q0, qn, nk): (usize, usize, usize),
        q: &View,
        kt: &View,
    ) -> Result<Scored, Error> {
        let d = sh.d;
        // 1. Scores. Without a mask, VectorE evacuates each block with `range_select`
        //    (bounds that always hold) and takes the block's row maxima in the same pass, the
        //    scale being applied later inside the exponential; with a mask, ScalarE evacuates
        //    them scaled, for the mask and the maximum to follow.
        let qt = self.take(k, QT, d, qn)?;
        k.dma_transpose(&qt, &q.slice(0, q0..q0 + qn)?)?;
        let s = self.take(k, S, qn, nk)?;
        let blocks = nk.div_ceil(KEY_BLOCK);
        let block_max = if sh.causal {
            None
        } else {
            Some(self.take(k, BMAX, qn, blocks)?)
        };
        let hi = self.bounds.slice(0, 0..qn)?.slice(1, 0..1)?;
        let lo = self.bounds.slice(0, 0..qn)?.slice(1, 1..2)?;
        for (b, b0) in (0..nk).step_by(KEY_BLOCK).enumerate() {
            let bw = KEY_BLOCK.min(nk - b0);
            let ps = self.take(k, SPS, qn, bw)?;
            k.emit(NcMatmul {
                dst: &ps,
                stationary: &qt,
                moving: &kt.slice(1, b0..b0 + bw)?,
                accumulate: Some(false),
            })?;
            let dst = s.slice(1, b0..b0 + bw)?;
            match &block_max {
                Some(bm) => k.emit(RangeSelect {
                    reduce_res: Some(&bm.slice(1, b..=b)?),
                    on_false_value: f32::NEG_INFINITY,
                    ..RangeSelect::new(&dst, &ps, AluOp::LessEqual, AluOp::GreaterEqual, &hi, &lo)
                })?,
                None => k.activation(&dst, ActFn::Identity, &ps, ActBias::None, sh.scale)?,
            }
        }
        // 2. Causal mask: keep key j of query q0 + p where q0 + p − j ≥ 0.
        if sh.causal {
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
        Ok(Scored {
            q0,
            qn,
            nk,
            s,
            block_max,
        })
    }

    /// Step 3: the softmax numerator and the row sums.
    fn softmax(&mut self, k: &mut Kernel, sh: &Shape, sc: Scored) -> Result<Softmaxed, Error> {
        let Scored {
            q0,
            qn,
            nk,
            s,
            block_max,
        } = sc;
        // −max of the scaled scores: from the block maxima of the unscaled ones (the scale is
        // positive), or from the scaled, masked scores.
        let neg = self.take(k, NEG, qn, 1)?;
        let (data, scale) = match &block_max {
            Some(bm) => (bm, sh.scale),
            None => (&s, 1.0),
        };
        k.emit(TensorReduce {
            dst: &neg,
            op: AluOp::Max,
            data,
            axis: &[1],
            negate: true,
            keepdims: false,
        })?;
        if block_max.is_some() {
            k.tensor_scalar(&neg, &neg, AluOp::Mul, sh.scale)?;
        }
        let p = self.take(k, P, qn, nk)?;
        let sum = self.take(k, SUM, qn, 1)?;
        k.activation_reduce(&p, ActFn::Exp, &s, AluOp::Add, &sum, &neg, scale)?;
        Ok(Softmaxed { q0, qn, nk, p, sum })
    }

    /// Steps 4 and 5: `out[q0 .. q0 + qn] = (P·V) / row sum`.
    fn weighted_sum(
        &mut self,
        k: &mut Kernel,
        sh: &Shape,
        sm: &Softmaxed,
        out: &View,
        vt: &View,
    ) -> Result<(), Error> {
        let (q0, qn, nk, d) = (sm.q0, sm.qn, sm.nk, sh.d);
        let (p, sum) = (&sm.p, &sm.sum);
        // 4. P·V, 128 keys at a time.
        let acc = self.take(k, ACC, qn, d)?;
        let id = self.ident.slice(0, 0..qn)?.slice(1, 0..qn)?;
        // The transposes run LOOKAHEAD chunks ahead of the products, so TensorE transposes
        // the next chunks while the current ones are copied out of PSUM.
        let mut ready: VecDeque<(usize, usize, View)> = VecDeque::new();
        let n_chunks = nk.div_ceil(128);
        for c in 0..n_chunks + LOOKAHEAD {
            if c < n_chunks {
                let c0 = c * 128;
                let cw = 128.min(nk - c0);
                let pt_ps = self.take(k, PTPS, cw, qn)?;
                k.emit(NcMatmul {
                    dst: &pt_ps,
                    stationary: &p.slice(1, c0..c0 + cw)?,
                    moving: &id,
                    accumulate: Some(false),
                })?;
                let pt = self.take(k, PT, cw, qn)?;
                // The PSUM evacuations are shared between VectorE and ScalarE: alternately
                // with a mask (ScalarE also scales the scores), two in three on ScalarE
                // without (VectorE also evacuates the scores).
                let on_vector = if sh.causal { c % 2 == 0 } else { c % 3 == 0 };
                let engine = Some(if on_vector {
                    EngineId::Vector
                } else {
                    EngineId::Scalar
                });
                k.emit(TensorCopy {
                    dst: &pt,
                    src: &pt_ps,
                    engine,
                })?;
                ready.push_back((c, cw, pt));
            }
            if c >= LOOKAHEAD {
                if let Some((j, cw, pt)) = ready.pop_front() {
                    k.emit(NcMatmul {
                        dst: &acc,
                        stationary: &pt,
                        moving: &vt.slice(0, 0..cw)?.select(1, j)?.reshape(&[cw, d])?,
                        accumulate: Some(j > 0),
                    })?;
                }
            }
        }
        // 5. Normalise and store.
        let o = self.take(k, O, qn, d)?;
        k.tensor_scalar(&o, &acc, AluOp::Divide, sum)?;
        k.dma_copy(&out.slice(0, q0..q0 + qn)?, &o)
    }
}
