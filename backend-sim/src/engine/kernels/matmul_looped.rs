//! [`matmul_looped`]: the tiled matmul of [`matmul`](super::matmul) written with loops
//! (format 1.1), so its instructions and descriptors are those of a few loop bodies, whatever
//! the problem size.

use nrt_core::{Error, err};

use super::{GROUP, NB, P, float, nonzero};
use crate::engine::builder::{DmaStep, LoopId, ProgramBuilder, rows_to_sbuf, sbuf_to_rows};
use crate::engine::dtype::DType;
use crate::engine::isa::{AccessPattern, EngineId, Instr};
use crate::engine::memory::PSUM_BANK_BYTES;
use crate::engine::program::Program;

/// The engines the loops run on.
const ENGINES: [EngineId; 3] = [EngineId::Sync, EngineId::Tensor, EngineId::Vector];

/// A tile coordinate: `base` plus `step ×` the iteration of each loop.
#[derive(Clone, Debug)]
struct Coord {
    base: u64,
    steps: Vec<(LoopId, u64)>,
}

impl Coord {
    fn fixed(base: u64) -> Self {
        Self {
            base,
            steps: Vec::new(),
        }
    }

    fn stepped(base: u64, lp: Option<LoopId>, step: u64) -> Self {
        Self {
            base,
            steps: lp.map(|l| (l, step)).into_iter().collect(),
        }
    }
}

/// DMA steps moving the source (`src: true`) or destination offsets by `scale ×` each loop
/// step of `c`.
fn dma_steps(out: &mut Vec<DmaStep>, c: &Coord, scale: u64, src: bool) -> Result<(), Error> {
    for &(lp, s) in &c.steps {
        let bytes = i64::try_from(s.saturating_mul(scale))
            .map_err(|_| err!(Invalid, "matmul_looped: offset step overflows"))?;
        out.push(DmaStep {
            lp,
            src: if src { bytes } else { 0 },
            dst: if src { 0 } else { bytes },
        });
    }
    Ok(())
}

/// Runs `body` `count` times: not at all, once without a loop, or in a loop on [`ENGINES`].
fn repeat(
    b: &mut ProgramBuilder,
    count: u64,
    mut body: impl FnMut(&mut ProgramBuilder, Option<LoopId>) -> Result<(), Error>,
) -> Result<(), Error> {
    match count {
        0 => Ok(()),
        1 => body(b, None),
        c => {
            let c = u32::try_from(c).map_err(|_| err!(Invalid, "loop count {c} above 2^32"))?;
            let lp = b.loop_begin(&ENGINES, c)?;
            body(b, Some(lp))?;
            b.loop_end(lp)
        }
    }
}

/// The problem and the program's fixed resources.
struct Ctx {
    m: u64,
    k: u64,
    n: u64,
    in_dtype: DType,
    out_dtype: DType,
    lhs: u32,
    rhs: u32,
    out: u32,
    loaded: [u8; 2],
    freed: [u8; 2],
    full: [u8; 2],
    bank_free: [u8; 2],
    stored: [u8; 2],
}

/// SBUF plan (bytes per partition), as `matmul`'s: two load slots of [lhs 512 | rhs 512]
/// elements, then two staging slots of GROUP tiles × 512 outputs.
const SLOT_BYTES: u64 = 2 * NB * 4;
const STAGE_BASE: u64 = 2 * SLOT_BYTES;
const STAGE_BYTES: u64 = GROUP as u64 * NB * 4;

/// One step `(group, n-block)` of the computation.
struct Step<'a> {
    /// The group's M-tiles: (row offset inside the group, rows).
    tiles: &'a [(u64, u64)],
    g0: &'a Coord,
    n0: Coord,
    nbw: u64,
    /// Bank set and staging slot.
    bs: usize,
}

/// Like [`matmul`](super::matmul) — same tensors, tiling, SBUF/PSUM plan, semaphores and
/// numerics (bit-identical results) — but written with loops (format 1.1): the groups of
/// four M-tiles, pairs of N-blocks (the two bank sets and staging slots) and pairs of K-tiles
/// (the two load slots) are loops whose DMA offsets and semaphore waits are dynamic terms;
/// the first K-tile (it overwrites PSUM), an odd last K-tile or N-block and the partial
/// tiles of sizes that are not multiples of the tiles are emitted apart. Its instruction and
/// descriptor counts therefore depend on which edge cases the shape has, not on its size: an
/// 8192 × 8192 × 8192 program has a few hundred instructions and about 3,000 descriptors.
///
/// Differences from the unrolled kernel, all in timing: each loop costs a `LoopBegin` and
/// one `LoopEnd` per iteration (one tick of its sequencer each), a wait whose count is 0 in
/// the first iteration is still an instruction, bank sets and staging slots alternate with
/// the N-block inside each group and load slots with the K-tile inside each step (`matmul`
/// alternates both over the whole run; they differ only when a group has an odd number of
/// N-blocks or a step an odd number of K-tiles), and the K-tile loads of the lhs and rhs are
/// spread over 8 DMA engines each (`matmul` spreads both over 16 together: the same
/// assignment for full K-tiles).
pub fn matmul_looped(
    m: u64,
    k: u64,
    n: u64,
    in_dtype: DType,
    out_dtype: DType,
) -> Result<Program, Error> {
    float(in_dtype, "matmul input")?;
    float(out_dtype, "matmul output")?;
    nonzero(&[(m, "M"), (k, "K"), (n, "N")])?;
    let mut b = ProgramBuilder::new("matmul_looped");
    let ctx = Ctx {
        m,
        k,
        n,
        in_dtype,
        out_dtype,
        lhs: b.input("lhs_t", in_dtype, &[k, m]),
        rhs: b.input("rhs", in_dtype, &[k, n]),
        out: b.output("out", out_dtype, &[m, n]),
        loaded: [b.sem()?, b.sem()?],
        freed: [b.sem()?, b.sem()?],
        full: [b.sem()?, b.sem()?],
        bank_free: [b.sem()?, b.sem()?],
        stored: [b.sem()?, b.sem()?],
    };
    let group_rows = GROUP as u64 * P;
    let full_group: Vec<(u64, u64)> = (0..GROUP as u64).map(|t| (t * P, P)).collect();
    let full_groups = m / group_rows;
    repeat(&mut b, full_groups, |b, gl| {
        group(b, &ctx, &full_group, &Coord::stepped(0, gl, group_rows))
    })?;
    let m_rem = m % group_rows;
    if m_rem > 0 {
        let tiles: Vec<(u64, u64)> = (0..m_rem.div_ceil(P))
            .map(|t| (t * P, P.min(m_rem - t * P)))
            .collect();
        group(
            &mut b,
            &ctx,
            &tiles,
            &Coord::fixed(full_groups * group_rows),
        )?;
    }
    b.build()
}

/// Every N-block of one group: pairs of full blocks in a loop (bank sets 0 and 1), then an
/// odd full block, then the partial block.
fn group(b: &mut ProgramBuilder, ctx: &Ctx, tiles: &[(u64, u64)], g0: &Coord) -> Result<(), Error> {
    let full = ctx.n / NB;
    repeat(b, full / 2, |b, ql| {
        for bs in 0..2 {
            let n0 = Coord::stepped(bs as u64 * NB, ql, 2 * NB);
            step(
                b,
                ctx,
                &Step {
                    tiles,
                    g0,
                    n0,
                    nbw: NB,
                    bs,
                },
            )?;
        }
        Ok(())
    })?;
    if full % 2 == 1 {
        let n0 = Coord::fixed((full - 1) * NB);
        step(
            b,
            ctx,
            &Step {
                tiles,
                g0,
                n0,
                nbw: NB,
                bs: 0,
            },
        )?;
    }
    let n_rem = ctx.n % NB;
    if n_rem > 0 {
        let n0 = Coord::fixed(full * NB);
        let bs = (full % 2) as usize;
        step(
            b,
            ctx,
            &Step {
                tiles,
                g0,
                n0,
                nbw: n_rem,
                bs,
            },
        )?;
    }
    Ok(())
}

/// One `(group, n-block)`: every K-tile accumulated into bank set `bs`, then VectorE
/// evacuates it to staging slot `bs` and stores it.
fn step(b: &mut ProgramBuilder, ctx: &Ctx, st: &Step<'_>) -> Result<(), Error> {
    let bs = st.bs;
    b.wait_all(EngineId::Tensor, ctx.bank_free[bs])?;
    let (kf, k_rem) = (ctx.k / P, ctx.k % P);
    // K-tile 0 overwrites the banks; the others accumulate. K-tile kt uses load slot kt % 2.
    let kh0 = if kf > 0 { P } else { k_rem };
    ktile(b, ctx, st, &Coord::fixed(0), kh0, 0, false)?;
    if kf >= 1 {
        let rest = kf - 1;
        repeat(b, rest / 2, |b, pl| {
            ktile(b, ctx, st, &Coord::stepped(P, pl, 2 * P), P, 1, true)?;
            ktile(b, ctx, st, &Coord::stepped(2 * P, pl, 2 * P), P, 0, true)
        })?;
        if rest % 2 == 1 {
            ktile(b, ctx, st, &Coord::fixed((kf - 1) * P), P, 1, true)?;
        }
        if k_rem > 0 {
            ktile(
                b,
                ctx,
                st,
                &Coord::fixed(kf * P),
                k_rem,
                (kf % 2) as usize,
                true,
            )?;
        }
    }
    b.signal(EngineId::Tensor, ctx.full[bs], 1);
    // VectorE: evacuate the bank set into staging slot `bs`, then store.
    b.wait_all(EngineId::Vector, ctx.full[bs])?;
    b.wait_all(EngineId::Vector, ctx.stored[bs])?;
    let mut sd = Vec::new();
    for (i, &(mo, mw)) in st.tiles.iter().enumerate() {
        let bank = (bs * GROUP + i) as u64;
        let stage = STAGE_BASE + bs as u64 * STAGE_BYTES + i as u64 * NB * 4;
        b.push(
            EngineId::Vector,
            Instr::TensorCopy {
                src: AccessPattern::psum(
                    DType::F32,
                    0,
                    mw as u8,
                    (bank * PSUM_BANK_BYTES as u64) as u32,
                    st.nbw as u16,
                ),
                out: AccessPattern::sbuf(ctx.out_dtype, 0, mw as u8, stage as u32, st.nbw as u16),
            },
        );
        sd.extend(sbuf_to_rows(
            ctx.out,
            ctx.out_dtype,
            ctx.n,
            st.g0.base + mo,
            st.n0.base,
            mw,
            st.nbw,
            0,
            stage as u32,
        ));
    }
    b.signal(EngineId::Vector, ctx.bank_free[bs], 1);
    let oes = ctx.out_dtype.size() as u64;
    let mut steps = Vec::new();
    dma_steps(&mut steps, st.g0, ctx.n * oes, false)?;
    dma_steps(&mut steps, &st.n0, oes, false)?;
    b.dma_spread_looped(EngineId::Vector, &sd, 1, ctx.stored[bs], 16, &steps)?;
    Ok(())
}

/// One K-tile of rows `k0 .. k0 + kh` through load slot `slot`: SyncE loads the lhs and rhs
/// tiles, TensorE multiplies each M-tile of the group into its bank.
fn ktile(
    b: &mut ProgramBuilder,
    ctx: &Ctx,
    st: &Step<'_>,
    k0: &Coord,
    kh: u64,
    slot: usize,
    accumulate: bool,
) -> Result<(), Error> {
    let es = ctx.in_dtype.size() as u64;
    let slot_off = slot as u64 * SLOT_BYTES;
    let gw: u64 = st.tiles.iter().map(|t| t.1).sum();
    b.wait_all(EngineId::Sync, ctx.freed[slot])?;
    let lhs = rows_to_sbuf(
        ctx.lhs,
        ctx.in_dtype,
        ctx.m,
        k0.base,
        st.g0.base,
        kh,
        gw,
        0,
        slot_off as u32,
    );
    let mut steps = Vec::new();
    dma_steps(&mut steps, st.g0, es, true)?;
    dma_steps(&mut steps, k0, ctx.m * es, true)?;
    b.dma_spread_looped(EngineId::Sync, &lhs, 0, ctx.loaded[slot], 8, &steps)?;
    let rhs = rows_to_sbuf(
        ctx.rhs,
        ctx.in_dtype,
        ctx.n,
        k0.base,
        st.n0.base,
        kh,
        st.nbw,
        0,
        (slot_off + NB * 4) as u32,
    );
    let mut steps = Vec::new();
    dma_steps(&mut steps, &st.n0, es, true)?;
    dma_steps(&mut steps, k0, ctx.n * es, true)?;
    b.dma_spread_looped(EngineId::Sync, &rhs, 0, ctx.loaded[slot], 8, &steps)?;
    b.wait_all(EngineId::Tensor, ctx.loaded[slot])?;
    for (i, &(mo, mw)) in st.tiles.iter().enumerate() {
        let bank = (st.bs * GROUP + i) as u64;
        b.push(
            EngineId::Tensor,
            Instr::LoadStationary {
                src: AccessPattern::sbuf(
                    ctx.in_dtype,
                    0,
                    kh as u8,
                    (slot_off + mo * es) as u32,
                    mw as u16,
                ),
            },
        );
        b.push(
            EngineId::Tensor,
            Instr::MultiplyMoving {
                moving: AccessPattern::sbuf(
                    ctx.in_dtype,
                    0,
                    kh as u8,
                    (slot_off + NB * 4) as u32,
                    st.nbw as u16,
                ),
                dst: AccessPattern::psum(
                    DType::F32,
                    0,
                    mw as u8,
                    (bank * PSUM_BANK_BYTES as u64) as u32,
                    st.nbw as u16,
                ),
                accumulate,
            },
        );
    }
    b.signal(EngineId::Tensor, ctx.freed[slot], 1);
    Ok(())
}
