//! ONNX `MatMul` (NumPy `matmul`: batched, broadcasting batch dimensions, 1-D operands) and
//! `Gemm` (`alpha·A'·B' + beta·C`, `transA`, `transB`, `C` broadcasting) on the tiled
//! [`matmul`](super::matmul).
//!
//! # MatMul
//!
//! A 1-D `a` `[K]` is taken as `[1, K]` and a 1-D `b` `[K]` as `[K, 1]`, the added dimension
//! dropped from the result (as NumPy does). The batch dimensions (all but the last two)
//! broadcast; each batch index is one 2-D [`matmul`] on views of `a`,
//! `b` and `out` (nothing is copied to make the broadcast). So every output element has the
//! matmul's order of operations (fused multiply-adds within a K tile, K tiles summed in order
//! in fp32, one rounding to `out`'s dtype), bit for bit.
//!
//! # Gemm
//!
//! `Y = alpha·(A'·B') + beta·C` with `A' = transA ? Aᵀ : A`, `B' = transB ? Bᵀ : B` (the
//! transposes are loads: `transA` reads `a` as the matmul's stationary layout directly,
//! `transB` loads `b` by transposing DMAs). With `alpha = 1` and no `C` (or `beta = 0`) it
//! is the matmul alone; with `alpha = beta = 1` and a bias row `C` (`[N]` or `[1, N]`, up to
//! [`FUSED_BIAS_COLS`] columns) the row is added as the tiles leave PSUM
//! ([`matmul_fused`], the same `fl(p + c)` with `p` in fp32 — for a non-fp32 `out` one
//! rounding fewer than the general path). Otherwise the product goes to `out` (or, for a non-fp32 `out`, an
//! fp32 scratch tensor, so it is rounded once) and one element-wise pass computes
//! `fl(fl(alpha·p) + fl(beta·c))` (the multiplications skipped when the factor is 1), `C`
//! broadcasting to `[M, N]` (NumPy rules), rounded once to `out`'s dtype.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType};

use super::matmul::{Epilogue, FUSED_BIAS_COLS, MatmulOpts, matmul, matmul_fused};
use super::nary::{Block, MapSpec, map};
use super::util::{P, hbm, hbm_out};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{DmaCopy, DmaTranspose, NcMatmul, TensorCopy};
use crate::ops::{ScalarTensorTensor, TensorScalarChain, TensorTensor};
use crate::view::{Dim, View};
use nrt_sim::engine::EngineId;

/// `v` with a size-1 dimension inserted at `at`.
fn unsqueeze(v: &View, at: usize) -> View {
    let mut w = v.clone();
    w.dims
        .insert(at.min(w.dims.len()), Dim { size: 1, stride: 1 });
    w
}

/// Emits `out = matmul(a, b)` with NumPy semantics (see the module documentation): `a` and
/// `b` HBM views of one float dtype, rank ≥ 1; `out` a float HBM view of the broadcast
/// shape.
pub fn matmul_nd(k: &mut Kernel, out: &View, a: &View, b: &View) -> Result<(), Error> {
    let f = "matmul_nd";
    hbm(k, a, f, "a")?;
    hbm(k, b, f, "b")?;
    hbm_out(k, out, f, "out")?;
    if a.rank() == 0 || b.rank() == 0 {
        return Err(err!(Invalid, "{f}: a and b must have rank ≥ 1"));
    }
    let a2 = if a.rank() == 1 {
        unsqueeze(a, 0)
    } else {
        a.clone()
    };
    let b2 = if b.rank() == 1 {
        unsqueeze(b, 1)
    } else {
        b.clone()
    };
    let (ra, rb) = (a2.rank(), b2.rank());
    let (sa, sb) = (a2.shape(), b2.shape());
    let (m, kd, kb, n) = (sa[ra - 2], sa[ra - 1], sb[rb - 2], sb[rb - 1]);
    let batch = super::elementwise::broadcast_shape(&sa[..ra - 2], &sb[..rb - 2]);
    let mut want = batch.clone().unwrap_or_default();
    if a.rank() > 1 {
        want.push(m);
    }
    if b.rank() > 1 {
        want.push(n);
    }
    if kd != kb || batch.is_none() || out.shape() != want {
        return Err(err!(
            Invalid,
            "{f}: a {} and b {} do not multiply into out {} (NumPy matmul{})",
            a.describe(),
            b.describe(),
            out.describe(),
            if kd == kb && batch.is_some() {
                format!(": want {want:?}")
            } else {
                String::new()
            }
        ));
    }
    let batch = batch.unwrap_or_default();
    // out as [batch…, M, N].
    let mut o2 = out.clone();
    if a.rank() == 1 {
        o2 = unsqueeze(&o2, o2.rank() - usize::from(b.rank() > 1));
    }
    if b.rank() == 1 {
        o2 = unsqueeze(&o2, o2.rank());
    }
    let nb = batch.len();
    // `b` the same for every batch index and `a`'s rows contiguous: one matmul of all the
    // rows (`[batch·M, K] · [K, N]`; each output element is the same sum).
    let bsize: usize = batch.iter().product();
    if bsize > 1 && sb[..rb - 2].iter().all(|&d| d == 1) && a.rank() > 1 {
        if let (Ok(af), Ok(of)) = (a2.reshape(&[bsize * m, kd]), o2.reshape(&[bsize * m, n])) {
            let bf = b2.reshape(&[kb, n]).unwrap_or_else(|_| {
                let mut v = b2.clone();
                v.dims.drain(..rb - 2);
                v
            });
            if sa[..ra - 2].iter().product::<usize>() == bsize {
                return matmul(k, &of, &af, &bf, &MatmulOpts::default());
            }
        }
    }
    let mut jobs = Vec::with_capacity(bsize);
    for idx in 0..bsize {
        let mut rest = idx;
        let mut at = vec![0; nb];
        for d in (0..nb).rev() {
            at[d] = rest % batch[d];
            rest /= batch[d];
        }
        let pick = |v: &View| -> Result<View, Error> {
            let lead = v.rank() - 2;
            let mut w = v.clone();
            for d in 0..lead {
                let i = at[nb - lead + d];
                w = w.select(0, if v.dims[d].size == 1 { 0 } else { i })?;
            }
            Ok(w)
        };
        let mut ov = o2.clone();
        for &i in &at {
            ov = ov.select(0, i)?;
        }
        jobs.push((ov, pick(&a2)?, pick(&b2)?));
    }
    if m <= P && kd <= P && n <= 512 && jobs.len() > 1 && a.dtype() == b.dtype() {
        return small_batches(k, &jobs);
    }
    for (ov, av, bv) in &jobs {
        matmul(k, ov, av, bv, &MatmulOpts::default())?;
    }
    Ok(())
}

/// Batches of one tile each (`M, K ≤ 128`, `N ≤ 512`: attention's per-head products) in one
/// pipeline: per batch a transposing load of `a`, a load of `b`, one matmul into PSUM, the
/// evacuation (VectorE and ScalarE in turn) and a store, through pools of three so the
/// batches overlap. The same sums as [`matmul`] (one K tile: from +0 in order).
fn small_batches(k: &mut Kernel, jobs: &[(View, View, View)]) -> Result<(), Error> {
    let f = "matmul_nd";
    let (o0, a0, b0) = &jobs[0];
    for (v, role) in [(a0, "a"), (b0, "b"), (o0, "out")] {
        super::util::float(v, f, role)?;
    }
    let (m, kd) = (a0.shape()[0], a0.shape()[1]);
    let n = b0.shape()[1];
    let dt = a0.dtype();
    k.scope(|k| {
        let mut at = k.tile_pool("mmb_aT", Memory::Sbuf, dt, &[kd, m], 3)?;
        let mut bt = k.tile_pool("mmb_b", Memory::Sbuf, dt, &[kd, n], 3)?;
        let mut ps = k.tile_pool("mmb_psum", Memory::Psum, DType::F32, &[m, n], 2)?;
        let mut ot = k.tile_pool("mmb_out", Memory::Sbuf, o0.dtype(), &[m, n], 3)?;
        for (i, (ov, av, bv)) in jobs.iter().enumerate() {
            let a_t = at.next(k)?;
            k.emit(DmaTranspose::new(&a_t, av))?;
            let b_t = bt.next(k)?;
            k.emit(DmaCopy::new(&b_t, bv))?;
            let acc = ps.next(k)?;
            k.emit(NcMatmul {
                dst: &acc,
                stationary: &a_t,
                moving: &b_t,
                accumulate: Some(false),
            })?;
            let o = ot.next(k)?;
            k.emit(TensorCopy {
                dst: &o,
                src: &acc,
                engine: Some(if i % 2 == 0 {
                    EngineId::Vector
                } else {
                    EngineId::Scalar
                }),
            })?;
            k.emit(DmaCopy::new(ov, &o))?;
        }
        for p in [at, bt, ps, ot] {
            p.free(k)?;
        }
        Ok(())
    })
}

/// Options of [`gemm`] (ONNX `Gemm`'s attributes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmOpts {
    /// Scales `A'·B'` (default 1).
    pub alpha: f32,
    /// Scales `C` (default 1).
    pub beta: f32,
    /// `a` is `[K, M]`.
    pub trans_a: bool,
    /// `b` is `[N, K]`.
    pub trans_b: bool,
}

impl Default for GemmOpts {
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        }
    }
}

/// Emits `out = alpha·A'·B' + beta·C` (see the module documentation): `a`, `b` 2-D HBM views
/// of one float dtype, `c` absent or broadcasting to `out` `[M, N]`.
pub fn gemm(
    k: &mut Kernel,
    out: &View,
    a: &View,
    b: &View,
    c: Option<&View>,
    opts: &GemmOpts,
) -> Result<(), Error> {
    let f = "gemm";
    hbm_out(k, out, f, "out")?;
    let c = c.filter(|_| opts.beta != 0.0);
    if let Some(c) = c {
        hbm(k, c, f, "c")?;
        if super::elementwise::broadcast_shape(&c.shape(), &out.shape()).as_deref()
            != Some(&out.shape()[..])
        {
            return Err(err!(
                Invalid,
                "{f}: c {} does not broadcast to out {}",
                c.describe(),
                out.describe()
            ));
        }
    }
    let mo = MatmulOpts {
        a_transposed: opts.trans_a,
        b_transposed: opts.trans_b,
        ..MatmulOpts::default()
    };
    if opts.alpha == 1.0 && c.is_none() {
        return matmul(k, out, a, b, &mo);
    }
    // A bias row (`C` of shape [N] or [1, N], alpha = beta = 1): added as the tiles leave
    // PSUM (`matmul_fused`, the same fp32 sum `fl(p + c)`), no extra pass.
    let n = out.shape().get(1).copied().unwrap_or(0);
    if let (Some(cv), 1.0, 1.0) = (c, opts.alpha, opts.beta) {
        if (cv.shape() == [n] || cv.shape() == [1, n]) && n <= FUSED_BIAS_COLS {
            if let Ok(row) = cv.reshape(&[n]) {
                let epi = Epilogue {
                    bias: Some(&row),
                    act: None,
                };
                return matmul_fused(k, out, a, b, &mo, &epi);
            }
        }
    }
    let p = if out.dtype() == DType::F32 {
        out.clone()
    } else {
        let name = format!("{}.gemm{}", out.name(), k.tensors.len());
        (*k.scratch(&name, DType::F32, &out.shape())?).clone()
    };
    matmul(k, &p, a, b, &mo)?;
    let mut ins: Vec<&View> = vec![&p];
    if let Some(c) = c {
        ins.push(c);
    }
    let spec = MapSpec {
        name: f,
        load: vec![DType::F32; ins.len()],
        out_tile: DType::F32,
        store_as: DType::F32,
    };
    let (alpha, beta) = (opts.alpha, opts.beta);
    map(k, &spec, out, &ins, &mut |k, blk: &Block| {
        let (pv, o) = (&blk.ins[0], &blk.out);
        let scaled = if alpha == 1.0 {
            pv.clone()
        } else {
            let dst = if blk.ins.len() == 1 { o } else { &blk.tmp[0] };
            k.emit(TensorScalarChain::new(dst, pv, AluOp::Mul, alpha))?;
            dst.clone()
        };
        let Some(cv) = blk.ins.get(1) else {
            return Ok(());
        };
        if beta == 1.0 {
            k.emit(TensorTensor {
                dst: o,
                data1: &scaled,
                data2: cv,
                op: AluOp::Add,
                engine: None,
            })
        } else {
            k.emit(ScalarTensorTensor {
                dst: o,
                data: cv,
                op0: AluOp::Mul,
                operand0: beta.into(),
                reverse0: false,
                op1: AluOp::Add,
                operand1: &scaled,
                reverse1: true,
            })
        }
    })
}
