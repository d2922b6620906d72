//! Program builders for common kernels. Each documents its tensors (names, shapes, layouts),
//! its SBUF/PSUM plan and its synchronisation; every cross-engine dependency goes through a
//! semaphore, so none of them trips the hazard detector. [`matmul_looped`](fn@matmul_looped) (in
//! `kernels/matmul_looped.rs`) is [`matmul`] written with loops.

mod matmul_looped;

use nrt_core::{Error, err};

use super::builder::ProgramBuilder;
pub use super::builder::{rows_to_sbuf, sbuf_to_rows};
use super::dtype::DType;
use super::isa::{
    AccessPattern, ActFunc, AluOp, Bias, DmaDescriptor, DmaEndpoint, EngineId, Instr,
};
use super::memory::{PSUM_BANK_BYTES, SBUF_PARTITION_BYTES};
use super::program::{MAX_DESCRIPTORS, Program};
pub use matmul_looped::matmul_looped;

const P: u64 = 128;
/// Moving free size of one MultiplyMoving (one PSUM bank of fp32).
const NB: u64 = 512;
/// m-tiles computed together (one PSUM bank each); two such sets double-buffer the 8 banks.
const GROUP: usize = 4;

fn float(d: DType, what: &str) -> Result<(), Error> {
    if !d.is_float() {
        return Err(err!(Invalid, "{what}: {d} is not a float type"));
    }
    Ok(())
}

fn nonzero(dims: &[(u64, &str)]) -> Result<(), Error> {
    for &(v, n) in dims {
        if v == 0 {
            return Err(err!(Invalid, "{n} must be at least 1"));
        }
        if v > 1 << 24 {
            return Err(err!(
                Invalid,
                "{n} = {v} exceeds this builder's limit of 2^24"
            ));
        }
    }
    Ok(())
}

fn check_descs(b: &ProgramBuilder) -> Result<(), Error> {
    if b.program().descriptors.len() > MAX_DESCRIPTORS {
        return Err(err!(
            Invalid,
            "the program needs more than {MAX_DESCRIPTORS} DMA descriptors"
        ));
    }
    Ok(())
}

/// Tiled matmul `out[M, N] = lhs[M, K] · rhs[K, N]`.
///
/// Tensors: input `lhs_t` `[K, M]` (the left operand **transposed**, as TensorE wants the
/// contraction dimension on partitions), input `rhs` `[K, N]`, both `in_dtype`; output
/// `out` `[M, N]` of `out_dtype`.
///
/// Plan: M in tiles of 128 (up to four per group, one PSUM bank each), N in blocks of 512, K
/// in tiles of 128 accumulated in PSUM (first tile overwrites, the rest accumulate). For each
/// (group, N-block) the Sync engine streams K-tiles of `lhs_t` and `rhs` into two SBUF slots
/// (double-buffered DMA over 16 engines); TensorE runs LoadStationary + MultiplyMoving per
/// M-tile; VectorE evacuates the bank set (two sets, double-buffered) to SBUF converting to
/// `out_dtype`, and triggers the stores.
///
/// Numerics: element `(i, j)` is `Σ_kt (Σ_{k in tile kt} lhs[i,k]·rhs[k,j])`, each inner sum in
/// increasing k from +0.0 in fp32, the tile sums added to PSUM in increasing kt, then rounded
/// once to `out_dtype`.
pub fn matmul(m: u64, k: u64, n: u64, in_dtype: DType, out_dtype: DType) -> Result<Program, Error> {
    float(in_dtype, "matmul input")?;
    float(out_dtype, "matmul output")?;
    nonzero(&[(m, "M"), (k, "K"), (n, "N")])?;
    let mut b = ProgramBuilder::new("matmul");
    let lhs = b.input("lhs_t", in_dtype, &[k, m]);
    let rhs = b.input("rhs", in_dtype, &[k, n]);
    let out = b.output("out", out_dtype, &[m, n]);
    let es = in_dtype.size() as u64;
    let oes = out_dtype.size() as u64;
    let loaded = [b.sem()?, b.sem()?];
    let freed = [b.sem()?, b.sem()?];
    let full = [b.sem()?, b.sem()?];
    let bank_free = [b.sem()?, b.sem()?];
    let stored = [b.sem()?, b.sem()?];
    // SBUF plan (bytes per partition): two load slots of [lhs 512 | rhs 512] elements, then
    // two staging slots of GROUP tiles × 512 outputs.
    let slot_bytes = 2 * NB * 4;
    let stage_base = 2 * slot_bytes;
    let stage_bytes = GROUP as u64 * NB * 4;
    let m_tiles: Vec<(u64, u64)> = (0..m.div_ceil(P))
        .map(|t| (t * P, P.min(m - t * P)))
        .collect();
    let mut load_idx = 0usize;
    let mut slot_uses = [0u32; 2];
    let mut slot_trig = [0u32; 2];
    let mut bank_uses = [0u32; 2];
    let mut stage_trig = [0u32; 2];
    let mut step = 0usize;
    for group in m_tiles.chunks(GROUP) {
        let g0 = group.first().map_or(0, |t| t.0);
        let gw: u64 = group.iter().map(|t| t.1).sum();
        for nb in 0..n.div_ceil(NB) {
            let n0 = nb * NB;
            let nbw = NB.min(n - n0);
            let bs = step % 2;
            b.wait(EngineId::Tensor, bank_free[bs], bank_uses[bs]);
            for kt in 0..k.div_ceil(P) {
                let k0 = kt * P;
                let kh = P.min(k - k0);
                let s = load_idx % 2;
                let slot = s as u64 * slot_bytes;
                b.wait(EngineId::Sync, freed[s], slot_uses[s]);
                let mut descs = rows_to_sbuf(lhs, in_dtype, m, k0, g0, kh, gw, 0, slot as u32);
                descs.extend(rows_to_sbuf(
                    rhs,
                    in_dtype,
                    n,
                    k0,
                    n0,
                    kh,
                    nbw,
                    0,
                    (slot + NB * 4) as u32,
                ));
                slot_trig[s] += b.dma_spread(EngineId::Sync, &descs, 0, loaded[s], 16);
                slot_uses[s] += 1;
                b.wait(EngineId::Tensor, loaded[s], slot_trig[s]);
                for (i, &(mi0, mw)) in group.iter().enumerate() {
                    let bank = (bs * GROUP + i) as u64;
                    b.push(
                        EngineId::Tensor,
                        Instr::LoadStationary {
                            src: AccessPattern::sbuf(
                                in_dtype,
                                0,
                                kh as u8,
                                (slot + (mi0 - g0) * es) as u32,
                                mw as u16,
                            ),
                        },
                    );
                    b.push(
                        EngineId::Tensor,
                        Instr::MultiplyMoving {
                            moving: AccessPattern::sbuf(
                                in_dtype,
                                0,
                                kh as u8,
                                (slot + NB * 4) as u32,
                                nbw as u16,
                            ),
                            dst: AccessPattern::psum(
                                DType::F32,
                                0,
                                mw as u8,
                                (bank * PSUM_BANK_BYTES as u64) as u32,
                                nbw as u16,
                            ),
                            accumulate: kt > 0,
                        },
                    );
                }
                b.signal(EngineId::Tensor, freed[s], 1);
                load_idx += 1;
            }
            b.signal(EngineId::Tensor, full[bs], 1);
            bank_uses[bs] += 1;
            // VectorE: evacuate the bank set into staging slot `o`, then store.
            let o = step % 2;
            b.wait(EngineId::Vector, full[bs], bank_uses[bs]);
            b.wait(EngineId::Vector, stored[o], stage_trig[o]);
            let mut sd = Vec::new();
            for (i, &(mi0, mw)) in group.iter().enumerate() {
                let bank = (bs * GROUP + i) as u64;
                let st = stage_base + o as u64 * stage_bytes + i as u64 * NB * 4;
                b.push(
                    EngineId::Vector,
                    Instr::TensorCopy {
                        src: AccessPattern::psum(
                            DType::F32,
                            0,
                            mw as u8,
                            (bank * PSUM_BANK_BYTES as u64) as u32,
                            nbw as u16,
                        ),
                        out: AccessPattern::sbuf(out_dtype, 0, mw as u8, st as u32, nbw as u16),
                    },
                );
                sd.extend(sbuf_to_rows(
                    out, out_dtype, n, mi0, n0, mw, nbw, 0, st as u32,
                ));
            }
            let _ = oes;
            b.signal(EngineId::Vector, bank_free[bs], 1);
            stage_trig[o] += b.dma_spread(EngineId::Vector, &sd, 1, stored[o], 16);
            step += 1;
            check_descs(&b)?;
        }
    }
    b.build()
}

/// An elementwise binary operation of [`elementwise`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elementwise {
    /// a + b
    Add,
    /// a × b
    Mul,
}

/// Elementwise `out = a op b` on VectorE. Tensors: inputs `a`, `b` and output `out`, all
/// `[rows, cols]` of `dtype`. Rows go to partitions (tiles of 128), columns in chunks of up to
/// 4096; loads and stores are double-buffered. Each element is one fp32 operation (int32:
/// wrapping) rounded once to `dtype`.
pub fn elementwise(op: Elementwise, rows: u64, cols: u64, dtype: DType) -> Result<Program, Error> {
    nonzero(&[(rows, "rows"), (cols, "cols")])?;
    const C: u64 = 4096;
    let mut b = ProgramBuilder::new(match op {
        Elementwise::Add => "add",
        Elementwise::Mul => "mul",
    });
    let ta = b.input("a", dtype, &[rows, cols]);
    let tb = b.input("b", dtype, &[rows, cols]);
    let tout = b.output("out", dtype, &[rows, cols]);
    let es = dtype.size() as u64;
    let loaded = [b.sem()?, b.sem()?];
    let freed = [b.sem()?, b.sem()?];
    let stored = [b.sem()?, b.sem()?];
    let buf = C * es;
    let (mut uses, mut trig, mut strig) = ([0u32; 2], [0u32; 2], [0u32; 2]);
    let mut step = 0usize;
    for r0 in (0..rows).step_by(P as usize) {
        let rh = P.min(rows - r0);
        for c0 in (0..cols).step_by(C as usize) {
            let cw = C.min(cols - c0);
            let s = step % 2;
            let a_off = (s as u64 * 3) * buf;
            let b_off = a_off + buf;
            let o_off = a_off + 2 * buf;
            b.wait(EngineId::Sync, freed[s], uses[s]);
            let mut d = rows_to_sbuf(ta, dtype, cols, r0, c0, rh, cw, 0, a_off as u32);
            d.extend(rows_to_sbuf(
                tb,
                dtype,
                cols,
                r0,
                c0,
                rh,
                cw,
                0,
                b_off as u32,
            ));
            trig[s] += b.dma_spread(EngineId::Sync, &d, 0, loaded[s], 16);
            uses[s] += 1;
            b.wait(EngineId::Vector, loaded[s], trig[s]);
            b.wait(EngineId::Vector, stored[s], strig[s]);
            let ap = |off: u64| AccessPattern::sbuf(dtype, 0, rh as u8, off as u32, cw as u16);
            b.push(
                EngineId::Vector,
                Instr::TensorTensor {
                    op: match op {
                        Elementwise::Add => AluOp::Add,
                        Elementwise::Mul => AluOp::Mul,
                    },
                    a: ap(a_off),
                    b: ap(b_off),
                    out: ap(o_off),
                },
            );
            b.signal(EngineId::Vector, freed[s], 1);
            let sd = sbuf_to_rows(tout, dtype, cols, r0, c0, rh, cw, 0, o_off as u32);
            strig[s] += b.dma_spread(EngineId::Vector, &sd, 1, stored[s], 16);
            step += 1;
            check_descs(&b)?;
        }
    }
    b.build()
}

/// `out = func(x + bias)` on ScalarE over a feature-major tensor. Tensors: input `x`
/// `[features, n]`, input `bias` `[features]`, output `out` `[features, n]`, all `dtype`
/// (float). Features go to partitions, so the bias is one value per partition
/// (`Activation`'s per-partition bias); columns in chunks of up to 4096, double-buffered.
pub fn bias_activation(
    func: ActFunc,
    features: u64,
    n: u64,
    dtype: DType,
) -> Result<Program, Error> {
    float(dtype, "bias_activation")?;
    nonzero(&[(features, "features"), (n, "n")])?;
    const C: u64 = 4096;
    let mut b = ProgramBuilder::new("bias_activation");
    let tx = b.input("x", dtype, &[features, n]);
    let tbias = b.input("bias", dtype, &[features]);
    let tout = b.output("out", dtype, &[features, n]);
    let es = dtype.size() as u64;
    let ft_n = features.div_ceil(P);
    let bias_off = 0u64;
    let base = (ft_n * es).next_multiple_of(64);
    if base + 4 * C * es > SBUF_PARTITION_BYTES as u64 {
        return Err(err!(
            Invalid,
            "bias_activation: {features} features do not fit in SBUF"
        ));
    }
    let bias_sem = b.sem()?;
    let loaded = [b.sem()?, b.sem()?];
    let freed = [b.sem()?, b.sem()?];
    let stored = [b.sem()?, b.sem()?];
    let bias_descs: Vec<DmaDescriptor> = (0..features)
        .map(|f| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: tbias,
                offset: f * es,
            },
            dst: DmaEndpoint::Sbuf {
                partition: (f % P) as u8,
                offset: (bias_off + (f / P) * es) as u32,
            },
            len: es as u32,
        })
        .collect();
    let bias_trig = b.dma_spread(EngineId::Sync, &bias_descs, 2, bias_sem, 16);
    b.wait(EngineId::Scalar, bias_sem, bias_trig);
    let buf = C * es;
    let (mut uses, mut trig, mut strig) = ([0u32; 2], [0u32; 2], [0u32; 2]);
    let mut step = 0usize;
    for ft in 0..ft_n {
        let f0 = ft * P;
        let fh = P.min(features - f0);
        for c0 in (0..n).step_by(C as usize) {
            let cw = C.min(n - c0);
            let s = step % 2;
            let x_off = base + s as u64 * 2 * buf;
            let o_off = x_off + buf;
            b.wait(EngineId::Sync, freed[s], uses[s]);
            let d = rows_to_sbuf(tx, dtype, n, f0, c0, fh, cw, 0, x_off as u32);
            trig[s] += b.dma_spread(EngineId::Sync, &d, 0, loaded[s], 16);
            uses[s] += 1;
            b.wait(EngineId::Scalar, loaded[s], trig[s]);
            b.wait(EngineId::Scalar, stored[s], strig[s]);
            b.push(
                EngineId::Scalar,
                Instr::Activation {
                    func,
                    src: AccessPattern::sbuf(dtype, 0, fh as u8, x_off as u32, cw as u16),
                    out: AccessPattern::sbuf(dtype, 0, fh as u8, o_off as u32, cw as u16),
                    scale: 1.0,
                    bias: Bias::PerPartition(AccessPattern::sbuf(
                        dtype,
                        0,
                        fh as u8,
                        (bias_off + ft * es) as u32,
                        1,
                    )),
                },
            );
            b.signal(EngineId::Scalar, freed[s], 1);
            let sd = sbuf_to_rows(tout, dtype, n, f0, c0, fh, cw, 0, o_off as u32);
            strig[s] += b.dma_spread(EngineId::Scalar, &sd, 1, stored[s], 16);
            step += 1;
            check_descs(&b)?;
        }
    }
    b.build()
}

/// Two-layer MLP, feature-major: `h = act(W1ᵀ·x + b1)`, `y = W2ᵀ·h + b2`.
///
/// Tensors (all `dtype`, float): inputs `x_t` `[d_in, batch]` (activations transposed),
/// `w1` `[d_in, hidden]`, `b1` `[hidden]`, `w2` `[hidden, d_out]`, `b2` `[d_out]`; output
/// `y_t` `[d_out, batch]`. In row-major terms `y_tᵀ = act(xᵀ·W1 + b1)·W2 + b2`.
///
/// Everything is resident in SBUF (loaded once over 16 DMA engines); `batch` ≤ 512 (one
/// moving block). TensorE accumulates K-tiles in PSUM banks used round-robin; ScalarE applies
/// bias + activation from PSUM, writing `h` (rounded to `dtype`) for layer 2 and `y` for the
/// stores.
pub fn mlp(
    batch: u64,
    d_in: u64,
    hidden: u64,
    d_out: u64,
    dtype: DType,
    act: ActFunc,
) -> Result<Program, Error> {
    float(dtype, "mlp")?;
    nonzero(&[
        (batch, "batch"),
        (d_in, "d_in"),
        (hidden, "hidden"),
        (d_out, "d_out"),
    ])?;
    if batch > NB {
        return Err(err!(Invalid, "mlp: batch {batch} exceeds 512"));
    }
    let es = dtype.size() as u64;
    let (kt1, ht, ot) = (d_in.div_ceil(P), hidden.div_ceil(P), d_out.div_ceil(P));
    let x_off = 0u64;
    let w1_off = x_off + kt1 * batch * es;
    let w2_off = w1_off + kt1 * hidden * es;
    let h_off = w2_off + ht * d_out * es;
    let y_off = h_off + ht * batch * es;
    let b1_off = y_off + ot * batch * es;
    let b2_off = b1_off + ht * es;
    let end = b2_off + ot * es;
    if end > SBUF_PARTITION_BYTES as u64 {
        return Err(err!(
            Invalid,
            "mlp: needs {end} bytes per SBUF partition (192 KiB available)"
        ));
    }
    let mut b = ProgramBuilder::new("mlp");
    let tx = b.input("x_t", dtype, &[d_in, batch]);
    let tw1 = b.input("w1", dtype, &[d_in, hidden]);
    let tb1 = b.input("b1", dtype, &[hidden]);
    let tw2 = b.input("w2", dtype, &[hidden, d_out]);
    let tb2 = b.input("b2", dtype, &[d_out]);
    let ty = b.output("y_t", dtype, &[d_out, batch]);
    let loaded = b.sem()?;
    let h_ready = b.sem()?;
    let stored = b.sem()?;
    let mut full = [0u8; 8];
    let mut free = [0u8; 8];
    for i in 0..8 {
        full[i] = b.sem()?;
        free[i] = b.sem()?;
    }
    // Loads.
    let mut d = Vec::new();
    for kt in 0..kt1 {
        let kh = P.min(d_in - kt * P);
        d.extend(rows_to_sbuf(
            tx,
            dtype,
            batch,
            kt * P,
            0,
            kh,
            batch,
            0,
            (x_off + kt * batch * es) as u32,
        ));
        d.extend(rows_to_sbuf(
            tw1,
            dtype,
            hidden,
            kt * P,
            0,
            kh,
            hidden,
            0,
            (w1_off + kt * hidden * es) as u32,
        ));
    }
    for t in 0..ht {
        let hh = P.min(hidden - t * P);
        d.extend(rows_to_sbuf(
            tw2,
            dtype,
            d_out,
            t * P,
            0,
            hh,
            d_out,
            0,
            (w2_off + t * d_out * es) as u32,
        ));
    }
    let vec_descs = |tensor: u32, len: u64, off: u64| -> Vec<DmaDescriptor> {
        (0..len)
            .map(|f| DmaDescriptor {
                src: DmaEndpoint::Hbm {
                    tensor,
                    offset: f * es,
                },
                dst: DmaEndpoint::Sbuf {
                    partition: (f % P) as u8,
                    offset: (off + (f / P) * es) as u32,
                },
                len: es as u32,
            })
            .collect()
    };
    d.extend(vec_descs(tb1, hidden, b1_off));
    d.extend(vec_descs(tb2, d_out, b2_off));
    let total = b.dma_spread(EngineId::Sync, &d, 0, loaded, 16);
    b.wait(EngineId::Tensor, loaded, total);
    b.wait(EngineId::Scalar, loaded, total);
    let mut q = 0usize;
    let mut strig = 0u32;
    // Layer l: (k tiles, k size, moving offset per tile, stationary offset fn, m size, ...)
    for layer in 0..2 {
        if layer == 1 {
            b.wait(EngineId::Tensor, h_ready, 1);
        }
        let (k_dim, m_dim, mov_off, w_off, w_row) = if layer == 0 {
            (d_in, hidden, x_off, w1_off, hidden)
        } else {
            (hidden, d_out, h_off, w2_off, d_out)
        };
        for mt in 0..m_dim.div_ceil(P) {
            let m0 = mt * P;
            let mw = P.min(m_dim - m0);
            let bank = q % 8;
            let use_no = (q / 8) as u32;
            b.wait(EngineId::Tensor, free[bank], use_no);
            let kts = k_dim.div_ceil(P);
            for kt in 0..kts {
                let kh = P.min(k_dim - kt * P);
                b.push(
                    EngineId::Tensor,
                    Instr::LoadStationary {
                        src: AccessPattern::sbuf(
                            dtype,
                            0,
                            kh as u8,
                            (w_off + (kt * w_row + m0) * es) as u32,
                            mw as u16,
                        ),
                    },
                );
                b.push(
                    EngineId::Tensor,
                    Instr::MultiplyMoving {
                        moving: AccessPattern::sbuf(
                            dtype,
                            0,
                            kh as u8,
                            (mov_off + kt * batch * es) as u32,
                            batch as u16,
                        ),
                        dst: AccessPattern::psum(
                            DType::F32,
                            0,
                            mw as u8,
                            (bank * PSUM_BANK_BYTES) as u32,
                            batch as u16,
                        ),
                        accumulate: kt > 0,
                    },
                );
            }
            b.signal(EngineId::Tensor, full[bank], 1);
            // ScalarE: bias + activation out of PSUM.
            b.wait(EngineId::Scalar, full[bank], use_no + 1);
            let (out_off, bias_off, func) = if layer == 0 {
                (h_off + mt * batch * es, b1_off + mt * es, act)
            } else {
                (y_off + mt * batch * es, b2_off + mt * es, ActFunc::Identity)
            };
            b.push(
                EngineId::Scalar,
                Instr::Activation {
                    func,
                    src: AccessPattern::psum(
                        DType::F32,
                        0,
                        mw as u8,
                        (bank * PSUM_BANK_BYTES) as u32,
                        batch as u16,
                    ),
                    out: AccessPattern::sbuf(dtype, 0, mw as u8, out_off as u32, batch as u16),
                    scale: 1.0,
                    bias: Bias::PerPartition(AccessPattern::sbuf(
                        dtype,
                        0,
                        mw as u8,
                        bias_off as u32,
                        1,
                    )),
                },
            );
            b.signal(EngineId::Scalar, free[bank], 1);
            if layer == 1 {
                let sd = sbuf_to_rows(ty, dtype, batch, m0, 0, mw, batch, 0, out_off as u32);
                strig += b.dma_spread(EngineId::Scalar, &sd, 1, stored, 16);
            }
            q += 1;
        }
        if layer == 0 {
            b.signal(EngineId::Scalar, h_ready, 1);
        }
    }
    let _ = strig;
    check_descs(&b)?;
    b.build()
}
