//! Simulator timing against published hardware figures: the four versions of the AWS NKI
//! matmul tutorial (`[4096, 8192] @ [8192, 8192]`, BF16, trn1.32xlarge), written with the
//! published tile sizes and loop structure, run on a simulated trn1 NeuronCore-v2 with random
//! data, their outputs checked bit for bit against a host model of the ISA's arithmetic, and
//! their simulated time set beside the published P99 latency. See `docs/FIDELITY.md`.
//!
//! ```text
//! cargo run --release -p nrt-kernel --example fidelity -- [OPTION...] [NAME...]
//! ```
//!
//! `NAME` selects versions (`original`, `opt1`, `opt2`, `opt3`; all by default). Options,
//! each a sensitivity check of one way of expressing the kernels (docs/FIDELITY.md):
//!
//! * `--single-buffered`: one buffer per tile (default: two where SBUF has room).
//! * `--looped`, `--outer`, `--unrolled`: every loop a `for_range` program loop; the outermost
//!   one a `for_range` loop and the others Rust loops (recorded unrolled, rerolled by
//!   `Kernel::build`); every loop a Rust loop. Default: unrolled for Optimizations 2 and 3,
//!   outer for the first two (unrolled, they exceed the program's 2^22 descriptors).
//! * `--default-triggers`: loads triggered by the kernel API's default engine (default: SyncE).
//! * `--rows=R`: compute only the first `R` rows of the result (a multiple of 256; no
//!   comparison with the published figures): a cheap way to compare the loop forms.
//! * `--trigger-latency-ns=N`: a DMA trigger-to-start latency of `N` ns (not modelled by
//!   default: `docs/FIDELITY.md`, "Sensitivity").
//! * `--overlapped-dma-ns=N`: a study of another v2 DMA shape (not the model:
//!   `docs/FIDELITY.md`, "Problems noticed"): engines at 17 B/ns, 9 ticks per transfer and 1
//!   per descriptor on the engine, and consecutive transfers on a queue starting at least
//!   `N` ns apart (`CoreSpec::dma_queue_interval_ticks`).
//!
//! What the published source leaves to NKI's compiler is chosen here as follows. Buffers:
//! every tile declared inside a loop gets two (alternate iterations use alternate buffers,
//! written as a loop over pairs of iterations) where SBUF has room, one where it does not
//! (Optimization 2's `lhsT_tiles` and `rhs_tiles`, Optimization 3's `result_tiles`). Loads
//! are triggered from SyncE, stores by the engine that produced the data. `nl.copy` runs on
//! VectorE, `nl.zeros` in SBUF is a GpSimdE memset, and a PSUM tile is zeroed by its first
//! matmul overwriting it.

#[path = "fidelity_common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{K, KT, M, N, TILE_K, TILE_M, TILE_N, Xorshift, block, matmul, samples};
use nrt_core::{Error, err};
use nrt_kernel::{AluOp, DType, DmaCopy, Kernel, Program, Tensor, Tile, View};
use nrt_sim::Instance;
use nrt_sim::engine::{
    Device, EngineId, ExecOptions, ExecReport, TIMING_MODEL, decode_f32, round_through,
};

/// Published P99 latencies (ms), `general/nki/tutorials/matrix_multiplication.rst` of
/// aws-neuron/aws-neuron-sdk at 8a38e733 (trn1.32xlarge, `nki.benchmark(warmup=5,
/// iters=10)`), and the published HFU (%).
const PUBLISHED: [(&str, &str, f64, f64); 4] = [
    ("original", "Original tiled", 51.80, 10.98),
    ("opt1", "Optimization 1 (hoisted loads)", 42.96, 13.24),
    ("opt2", "Optimization 2 (blocked M, N)", 22.07, 26.51),
    ("opt3", "Optimization 3 (blocked M, N, K)", 6.97, 85.24),
];

/// TensorE peak of one NeuronCore-v2, BF16 (architecture guide: 92 TFLOPS).
const PEAK_FLOPS: f64 = 92e12;

/// Output elements checked against the host model.
const SAMPLES: usize = 1024;

/// How the loops are written: all as `for_range` program loops; the outermost one as a
/// `for_range` loop and the others as Rust loops (recorded unrolled, rerolled by `build`);
/// or all as Rust loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Loops {
    Looped,
    Outer,
    Unrolled,
}

impl Loops {
    fn name(self) -> &'static str {
        match self {
            Loops::Looped => "for_range",
            Loops::Outer => "outer for_range, inner unrolled",
            Loops::Unrolled => "unrolled",
        }
    }
}

/// How a version is written: rows computed, buffers per tile declared in a loop (1 or 2),
/// loops, and whether loads are triggered from SyncE.
#[derive(Clone, Copy, Debug)]
struct Style {
    /// Rows of the result computed (`M`, or fewer for a reduced check).
    rows: usize,
    bufs: usize,
    loops: Loops,
    /// Set by [`Style::outer`] and [`Style::inner`]: this loop level is a Rust loop.
    unrolled: bool,
    sync_triggers: bool,
}

impl Style {
    /// The style of the outermost loop.
    fn outer(self) -> Style {
        Style {
            unrolled: self.loops == Loops::Unrolled,
            ..self
        }
    }

    /// The style of the inner loops.
    fn inner(self) -> Style {
        Style {
            unrolled: self.loops != Loops::Looped,
            ..self
        }
    }
}

/// `body(k, i, b)` for every `i` in `0..n`, `b` the buffer (`i % 2` with two buffers and `n`
/// even, else 0): one `for_range` loop (over pairs of iterations with two buffers), or a Rust
/// loop when `s.unrolled`.
fn each(
    k: &mut Kernel,
    s: Style,
    n: usize,
    bufs: usize,
    mut body: impl FnMut(&mut Kernel, usize, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    let two = bufs >= 2 && n % 2 == 0;
    if s.unrolled {
        (0..n).try_for_each(|i| body(k, i, if two { i % 2 } else { 0 }))
    } else if two {
        k.for_range(n / 2, |k, j| {
            body(k, 2 * j, 0)?;
            body(k, 2 * j + 1, 1)
        })
    } else {
        k.for_range(n, |k, i| body(k, i, 0))
    }
}

/// An SBUF (or PSUM) tile.
fn tile(k: &mut Kernel, psum: bool, name: &str, dt: DType, shape: &[usize]) -> Result<Tile, Error> {
    if psum {
        k.psum_tile(name, dt, shape)
    } else {
        k.sbuf_tile(name, dt, shape)
    }
}

/// A bf16 SBUF tile.
fn sbuf(k: &mut Kernel, name: &str, shape: &[usize]) -> Result<Tile, Error> {
    k.sbuf_tile(name, DType::Bf16, shape)
}

/// `count` bf16 SBUF tiles named `name0`, `name1`, ...
fn sbufs(k: &mut Kernel, name: &str, shape: &[usize], count: usize) -> Result<Vec<Tile>, Error> {
    tiles(k, false, name, DType::Bf16, shape, count)
}

/// `count` fp32 PSUM tiles `[128, 512]` (one bank each) named `name0`, `name1`, ...
fn psum(k: &mut Kernel, name: &str, count: usize) -> Result<Vec<Tile>, Error> {
    tiles(k, true, name, DType::F32, &[TILE_M, TILE_N], count)
}

/// `count` tiles `name0`, `name1`, ...
fn tiles(
    k: &mut Kernel,
    psum: bool,
    name: &str,
    dt: DType,
    shape: &[usize],
    count: usize,
) -> Result<Vec<Tile>, Error> {
    (0..count)
        .map(|i| tile(k, psum, &format!("{name}{i}"), dt, shape))
        .collect()
}

/// A load `dst = src` by DMA, triggered from SyncE (so that it is issued as soon as its
/// buffer is free, ahead of the compute engines), or by the kernel API's default choice.
fn load(k: &mut Kernel, s: Style, dst: &View, src: &View) -> Result<(), Error> {
    k.emit(DmaCopy {
        engine: s.sync_triggers.then_some(EngineId::Sync),
        ..DmaCopy::new(dst, src)
    })
}

/// A store `dst = src` by DMA, triggered by the kernel API's default choice: the engine that
/// produced `src`, right after it (a SyncE trigger would hold up the loads behind it).
fn store(k: &mut Kernel, dst: &View, src: &View) -> Result<(), Error> {
    k.dma_copy(dst, src)
}

/// The kernel's HBM tensors: `lhsT [K, M]`, `rhs [K, N]` (bf16 inputs), `result [M, N]` bf16.
fn io(name: &str) -> Result<(Kernel, Tensor, Tensor, Tensor), Error> {
    let mut k = Kernel::new(name);
    let lhs_t = k.input("lhsT", DType::Bf16, &[K, M])?;
    let rhs = k.input("rhs", DType::Bf16, &[K, N])?;
    let out = k.output("result", DType::Bf16, &[M, N])?;
    Ok((k, lhs_t, rhs, out))
}

// Tile placement. Inside a `for_range` loop the kernel API synchronises each operation on one
// bounding box per memory and direction, so a matmul's two SBUF reads (stationary and moving)
// count as one read of everything between them. The tiles are placed so that such a box
// covers no tile a concurrent DMA refills: each (stationary, moving) buffer pair adjacent
// where that is possible (see docs/FIDELITY.md, "Problems noticed").

/// `nki_matmul_tiled_`: for m, n: PSUM tile; for k: load a `[128, 128]` lhsT tile and a
/// `[128, 512]` rhs tile, matmul into PSUM; copy PSUM to SBUF as bf16; store.
fn original(s: Style) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("nki_matmul_tiled")?;
    // Placed lhsT0, rhs0, lhsT1, rhs1: each buffer pair adjacent.
    let mut lts = Vec::new();
    let mut rts = Vec::new();
    for c in 0..s.bufs {
        lts.push(sbuf(&mut k, &format!("lhsT_tile{c}"), &[TILE_K, TILE_M])?);
        rts.push(sbuf(&mut k, &format!("rhs_tile{c}"), &[TILE_K, TILE_N])?);
    }
    let ps = psum(&mut k, "res_psum", s.bufs)?;
    let sb = sbufs(&mut k, "res_sb", &[TILE_M, TILE_N], s.bufs)?;
    let (so, s) = (s.outer(), s.inner());
    each(&mut k, so, s.rows / TILE_M, 1, |k, m, _| {
        each(k, s, N / TILE_N, s.bufs, |k, n, b| {
            each(k, s, KT, s.bufs, |k, kk, c| {
                let (lt, rt) = (lts[c].view(), rts[c].view());
                let (r0, m0, n0) = (kk * TILE_K, m * TILE_M, n * TILE_N);
                load(k, s, lt, &block(&lhs_t, r0, TILE_K, m0, TILE_M)?)?;
                load(k, s, rt, &block(&rhs, r0, TILE_K, n0, TILE_N)?)?;
                matmul(k, ps[b].view(), lt, rt, kk == 0)
            })?;
            k.tensor_copy(sb[b].view(), ps[b].view())?;
            let dst = block(&out, m * TILE_M, TILE_M, n * TILE_N, TILE_N)?;
            store(k, &dst, sb[b].view())
        })
    })?;
    k.build()
}

/// `nki_matmul_hoist_load_`: for m: load the 64 lhsT tiles of the column; for n: load the 64
/// rhs tiles; 64 matmuls into PSUM; copy; store.
fn opt1(s: Style) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("nki_matmul_hoist_load")?;
    // Placed rhs0, lhsT0, lhsT1, rhs1: a box (lhsT a, rhs b) never covers the other rhs.
    let mut rts = vec![sbuf(&mut k, "rhs_tiles0", &[TILE_K, KT, TILE_N])?];
    let lts = sbufs(&mut k, "lhsT_tiles", &[TILE_K, KT, TILE_M], s.bufs)?;
    if s.bufs > 1 {
        rts.push(sbuf(&mut k, "rhs_tiles1", &[TILE_K, KT, TILE_N])?);
    }
    let ps = psum(&mut k, "res_psum", s.bufs)?;
    let sb = sbufs(&mut k, "res_sb", &[TILE_M, TILE_N], s.bufs)?;
    let (so, s) = (s.outer(), s.inner());
    each(&mut k, so, s.rows / TILE_M, s.bufs, |k, m, a| {
        let lt = &lts[a];
        each(k, s, KT, 1, |k, kk, _| {
            let src = block(&lhs_t, kk * TILE_K, TILE_K, m * TILE_M, TILE_M)?;
            load(k, s, &lt.select(1, kk)?, &src)
        })?;
        each(k, s, N / TILE_N, s.bufs, |k, n, b| {
            let rt = &rts[b];
            each(k, s, KT, 1, |k, kk, _| {
                let src = block(&rhs, kk * TILE_K, TILE_K, n * TILE_N, TILE_N)?;
                load(k, s, &rt.select(1, kk)?, &src)
            })?;
            each(k, s, KT, 1, |k, kk, _| {
                let (st, mv) = (lt.select(1, kk)?, rt.select(1, kk)?);
                matmul(k, ps[b].view(), &st, &mv, kk == 0)
            })?;
            k.tensor_copy(sb[b].view(), ps[b].view())?;
            let dst = block(&out, m * TILE_M, TILE_M, n * TILE_N, TILE_N)?;
            store(k, &dst, sb[b].view())
        })
    })?;
    k.build()
}

/// Optimization 2's blocking: 2 M tiles × 2 N tiles.
const O2_BM: usize = 2;
const O2_BN: usize = 2;

/// `nki_matmul_block_free_dimension_`: for each block of 2 M tiles: load their 2 × 64 lhsT
/// tiles; for each block of 2 N tiles: load their 2 × 64 rhs tiles; for bm, bn: 64 matmuls
/// into PSUM, copy, store. The rhs tiles take 128 KiB of each partition's 192: one buffer of
/// each input.
fn opt2(s: Style) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("nki_matmul_block_free_dimension")?;
    let lt = k.sbuf_tile("lhsT_tiles", DType::Bf16, &[TILE_K, O2_BM, KT, TILE_M])?;
    let rt = k.sbuf_tile("rhs_tiles", DType::Bf16, &[TILE_K, O2_BN, KT, TILE_N])?;
    let ps = psum(&mut k, "res_psum", s.bufs)?;
    let sb = sbufs(&mut k, "res_sb", &[TILE_M, TILE_N], s.bufs)?;
    let (so, s) = (s.outer(), s.inner());
    each(&mut k, so, s.rows / (O2_BM * TILE_M), 1, |k, m, _| {
        for bm in 0..O2_BM {
            each(k, s, KT, 1, |k, kk, _| {
                let col = (m * O2_BM + bm) * TILE_M;
                let src = block(&lhs_t, kk * TILE_K, TILE_K, col, TILE_M)?;
                load(k, s, &lt.select(1, bm)?.select(1, kk)?, &src)
            })?;
        }
        each(k, s, N / (O2_BN * TILE_N), 1, |k, n, _| {
            for bn in 0..O2_BN {
                each(k, s, KT, 1, |k, kk, _| {
                    let col = (n * O2_BN + bn) * TILE_N;
                    let src = block(&rhs, kk * TILE_K, TILE_K, col, TILE_N)?;
                    load(k, s, &rt.select(1, bn)?.select(1, kk)?, &src)
                })?;
            }
            for bm in 0..O2_BM {
                for bn in 0..O2_BN {
                    let b = bn % s.bufs;
                    each(k, s, KT, 1, |k, kk, _| {
                        let st = lt.select(1, bm)?.select(1, kk)?;
                        let mv = rt.select(1, bn)?.select(1, kk)?;
                        matmul(k, ps[b].view(), &st, &mv, kk == 0)
                    })?;
                    k.tensor_copy(sb[b].view(), ps[b].view())?;
                    let (r0, c0) = ((m * O2_BM + bm) * TILE_M, (n * O2_BN + bn) * TILE_N);
                    store(k, &block(&out, r0, TILE_M, c0, TILE_N)?, sb[b].view())?;
                }
            }
            Ok(())
        })
    })?;
    k.build()
}

/// Optimization 3's blocking: 16 M tiles × 2 N tiles × 8 K tiles.
const O3_BM: usize = 16;
const O3_BN: usize = 2;
const O3_BK: usize = 8;
const BLOCK_M: usize = O3_BM * TILE_M;
const BLOCK_N: usize = O3_BN * TILE_N;
const BLOCK_K: usize = O3_BK * TILE_K;

/// `nki_matmul_fully_optimized_`: for each block of 1024 columns: zero the bf16 SBUF result
/// tiles; for each block of 8 K tiles (in order): load 8 rhs tiles `[128, 1024]`; for each
/// block of 2048 rows: load 8 lhsT tiles `[128, 2048]`; for bn, bm: 8 matmuls into PSUM, then
/// add PSUM into the SBUF result tile (VectorE); then, for each 128 rows, copy the 2 result
/// tiles into one `[128, 1024]` tile and store it.
fn opt3(s: Style) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("nki_matmul_fully_optimized")?;
    let nbm = s.rows / BLOCK_M;
    let bf = DType::Bf16;
    let res = k.sbuf_tile("result_tiles", bf, &[TILE_M, nbm, O3_BM, O3_BN, TILE_N])?;
    // With two buffers: one lhsT tile per M block (the M loop has 2 iterations, unrolled),
    // placed lhsT0, rhs0, rhs1, lhsT1 (four pairs cannot all be adjacent; with `for_range`
    // loops this placement leaves the least false ordering).
    let (ls, rs) = ([TILE_K, O3_BK, BLOCK_M], [TILE_K, O3_BK, BLOCK_N]);
    let mut lts = vec![tile(&mut k, false, "lhsT_tiles0", bf, &ls)?];
    let rts = sbufs(&mut k, "rhs_tiles", &rs, s.bufs)?;
    if s.bufs > 1 {
        lts.push(tile(&mut k, false, "lhsT_tiles1", bf, &ls)?);
    }
    let ps = psum(&mut k, "res_tile", s.bufs)?;
    let packed = sbufs(&mut k, "result_packed", &[TILE_M, BLOCK_N], s.bufs)?;
    let (so, s) = (s.outer(), s.inner());
    each(&mut k, so, N / BLOCK_N, 1, |k, n, _| {
        k.memset(&res, 0.0)?;
        each(k, s, K / BLOCK_K, s.bufs, |k, kb, c| {
            let rt = &rts[c];
            each(k, s, O3_BK, 1, |k, bk, _| {
                let row = (kb * O3_BK + bk) * TILE_K;
                let src = block(&rhs, row, TILE_K, n * BLOCK_N, BLOCK_N)?;
                load(k, s, &rt.select(1, bk)?, &src)
            })?;
            for m in 0..nbm {
                let lt = &lts[m % lts.len()];
                each(k, s, O3_BK, 1, |k, bk, _| {
                    let row = (kb * O3_BK + bk) * TILE_K;
                    let src = block(&lhs_t, row, TILE_K, m * BLOCK_M, BLOCK_M)?;
                    load(k, s, &lt.select(1, bk)?, &src)
                })?;
                for bn in 0..O3_BN {
                    each(k, s, O3_BM, s.bufs, |k, bm, p| {
                        let acc = ps[p].view();
                        each(k, s, O3_BK, 1, |k, bk, _| {
                            let st = lt.select(1, bk)?.slice(1, bm * TILE_M..(bm + 1) * TILE_M)?;
                            let mv = rt.select(1, bk)?.slice(1, bn * TILE_N..(bn + 1) * TILE_N)?;
                            matmul(k, acc, &st, &mv, bk == 0)
                        })?;
                        let r = res.select(1, m)?.select(1, bm)?.select(1, bn)?;
                        k.tensor_tensor(&r, &r, acc, AluOp::Add)
                    })?;
                }
            }
            Ok(())
        })?;
        for m in 0..nbm {
            each(k, s, O3_BM, s.bufs, |k, bm, p| {
                let pk = &packed[p];
                for bn in 0..O3_BN {
                    let r = res.select(1, m)?.select(1, bm)?.select(1, bn)?;
                    k.tensor_copy(&pk.slice(1, bn * TILE_N..(bn + 1) * TILE_N)?, &r)?;
                }
                let dst = block(
                    &out,
                    (m * O3_BM + bm) * TILE_M,
                    TILE_M,
                    n * BLOCK_N,
                    BLOCK_N,
                )?;
                store(k, &dst, pk)
            })?;
        }
        Ok(())
    })?;
    k.build()
}

/// Random bf16 values `±(1 + f/128) · 2^e`, `e` in {-1, 0}, as little-endian bytes.
fn random_bf16(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Xorshift::new(seed);
    let mut out = Vec::with_capacity(2 * len);
    for _ in 0..len {
        let s = rng.next();
        let sign = (s >> 63) as u16;
        let exp = 126 + ((s >> 62) & 1) as u16;
        let frac = ((s >> 40) & 0x7F) as u16;
        out.extend_from_slice(&((sign << 15) | (exp << 7) | frac).to_le_bytes());
    }
    out
}

/// The bf16 value at element `i` of `bytes`, as f32.
fn bf16_at(bytes: &[u8], i: usize) -> f32 {
    let lo = bytes.get(2 * i).copied().unwrap_or(0);
    let hi = bytes.get(2 * i + 1).copied().unwrap_or(0);
    f32::from_bits(u32::from(u16::from_le_bytes([lo, hi])) << 16)
}

/// The host model of `result[i, j]`: each K tile's sum from +0 by one fused multiply-add per
/// product in k order; the tile sums added in order in fp32 (PSUM), a group of `group` tiles
/// at a time; each group's sum added to a bf16 accumulator (fp32 arithmetic, rounded to
/// bf16), which starts at 0 — with `group` = 64 (one group), simply the rounded PSUM sum.
fn reference(lhs_t: &[u8], rhs: &[u8], i: usize, j: usize, group: usize) -> f32 {
    let mut acc = 0.0f32;
    let mut sum = 0.0f32;
    for t in 0..KT {
        let mut s = 0.0f32;
        for kk in t * TILE_K..(t + 1) * TILE_K {
            s = bf16_at(lhs_t, kk * M + i).mul_add(bf16_at(rhs, kk * N + j), s);
        }
        sum = if t % group == 0 { s } else { sum + s };
        if t % group == group - 1 {
            acc = round_through(DType::Bf16, acc + sum);
        }
    }
    acc
}

/// Simulated activity of one execution: time, and the busy fraction of each unit (%).
struct Activity {
    ms: f64,
    tensor: f64,
    vector: f64,
    gpsimd: f64,
    /// DMA engines moving data (at their peak or at their share of HBM bandwidth) or paying
    /// descriptor overhead, mean over the 16.
    dma: f64,
    /// Bytes the DMA engines moved.
    bytes: u64,
}

impl Activity {
    fn of(r: &ExecReport) -> Activity {
        let t = r.ticks.max(1) as f64;
        let pct = |e: EngineId| 100.0 * r.engine(e).active as f64 / t;
        let busy: u64 = r
            .dma_engines
            .iter()
            .map(|c| c.active + c.stall_bandwidth)
            .sum();
        let bytes: u64 = r.dma_engines.iter().map(|c| c.bytes).sum();
        let ns = r.nanoseconds();
        Activity {
            ms: ns / 1e6,
            tensor: pct(EngineId::Tensor),
            vector: pct(EngineId::Vector),
            gpsimd: pct(EngineId::GpSimd),
            dma: 100.0 * busy as f64 / r.dma_engines.len() as f64 / t,
            bytes,
        }
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("fidelity: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Builds, runs and checks the selected versions; prints the table. `Ok(false)` when an
/// output is wrong.
fn run() -> Result<bool, Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let rows = match args.iter().find_map(|a| a.strip_prefix("--rows=")) {
        Some(r) => r
            .parse::<usize>()
            .ok()
            .filter(|&r| r > 0 && r <= M && r % 256 == 0)
            .ok_or_else(|| err!(Invalid, "--rows={r}: a multiple of 256 up to {M}"))?,
        None => M,
    };
    // Loops: by default unrolled where the program's descriptor limit allows (Optimizations
    // 2 and 3), else (Original, Optimization 1) the outermost loop as a `for_range` loop and
    // the others unrolled; `--looped` writes every loop as `for_range` (over-synchronised:
    // docs/FIDELITY.md), `--outer` and `--unrolled` force the other two.
    let forced = [
        ("--looped", Loops::Looped),
        ("--outer", Loops::Outer),
        ("--unrolled", Loops::Unrolled),
    ]
    .into_iter()
    .filter(|(f, _)| flag(f))
    .map(|(_, l)| l)
    .collect::<Vec<_>>();
    if forced.len() > 1 {
        return Err(err!(
            Invalid,
            "--looped, --outer and --unrolled exclude each other"
        ));
    }
    let forced = forced.first().copied();
    let style = Style {
        rows,
        bufs: if flag("--single-buffered") { 1 } else { 2 },
        loops: forced.unwrap_or(Loops::Outer),
        unrolled: false,
        sync_triggers: !flag("--default-triggers"),
    };
    let opts = [
        "--single-buffered",
        "--looped",
        "--outer",
        "--unrolled",
        "--default-triggers",
    ];
    if let Some(bad) = args.iter().find(|a| {
        a.starts_with("--")
            && !a.starts_with("--rows=")
            && !a.starts_with("--trigger-latency-ns=")
            && !a.starts_with("--overlapped-dma-ns=")
            && !opts.contains(&a.as_str())
    }) {
        return Err(err!(Invalid, "unknown option {bad}"));
    }
    let mut names: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    if forced == Some(Loops::Unrolled) && rows == M && names.is_empty() {
        // Unrolled at full size, the first two versions exceed the program's descriptor
        // limit (2^22).
        names = vec!["opt2", "opt3"];
    }
    if rows % BLOCK_M != 0 {
        // Optimization 3 needs whole blocks of 2048 rows.
        if names.contains(&"opt3") {
            return Err(err!(Invalid, "opt3 needs --rows a multiple of {BLOCK_M}"));
        }
        if names.is_empty() {
            names = vec!["original", "opt1", "opt2"];
        }
    }
    let lhs_t = random_bf16(K * M, 1);
    let rhs = random_bf16(K * N, 2);
    let picks: Vec<(usize, usize)> = samples(SAMPLES, M)
        .into_iter()
        .map(|(i, j)| (i % rows, j))
        .collect();
    let spec = match args
        .iter()
        .find_map(|a| a.strip_prefix("--overlapped-dma-ns="))
    {
        None => *Instance::Trn1.core_spec(),
        Some(v) => {
            let ns = v
                .parse::<u64>()
                .ok()
                .filter(|&ns| ns <= 1_000_000)
                .ok_or_else(|| err!(Invalid, "--overlapped-dma-ns={v}: whole ns up to 1000000"))?;
            println!(
                "STUDY, NOT THE MODEL: v2 DMA engines at 17 B/ns, 9 ticks per transfer and 1 per \
                 descriptor on the engine, transfers on a queue starting at least {ns} ns apart"
            );
            println!();
            nrt_sim::engine::CoreSpec {
                dma_engine_mbps: 17_000,
                dma_transfer_ticks: 9,
                dma_descriptor_ticks: 1,
                dma_queue_interval_ticks: ns * 14 / 10,
                ..*Instance::Trn1.core_spec()
            }
        }
    };
    let quiet = ExecOptions {
        record_events: false,
        dma_trigger_latency_ticks: common::trigger_latency(&args)?,
        ..ExecOptions::default()
    };
    println!(
        "# NKI matmul tutorial, [4096, 8192] @ [8192, 8192] bf16: published P99 latency on \
         trn1.32xlarge vs one simulated trn1 NeuronCore-v2"
    );
    println!();
    if rows < M {
        println!(
            "REDUCED CHECK: only the first {rows} of {M} result rows are computed; no \
             comparison with the published figures"
        );
        println!();
    }
    println!(
        "timing model {TIMING_MODEL}; {} buffer(s) per tile declared in a loop (where SBUF has \
         room); loops {}; loads triggered from {}, stores by the engine that produced the data",
        style.bufs,
        match forced {
            Some(l) => l.name(),
            None => "unrolled (opt2, opt3), outer for_range and inner unrolled (original, opt1)",
        },
        if style.sync_triggers {
            "SyncE"
        } else {
            "the kernel API's default engine"
        }
    );
    println!();
    println!(
        "| version | published ms | simulated ms | error | TensorE active | VectorE active | \
         GpSimdE active | DMA active (mean of 16) | DMA GB moved | DMA GB/s simulated | DMA GB/s \
         at the published time | sim. FLOPs / 92 TFLOPS | \
         published HFU | loops | instructions | descriptors | output check | build s | run s |"
    );
    println!(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | \
         ---: | ---: | --- | ---: | ---: |"
    );
    let mut all_ok = true;
    let mut first_out: Option<Vec<u8>> = None;
    for (key, label, pub_ms, pub_hfu) in PUBLISHED {
        if !names.is_empty() && !names.contains(&key) {
            continue;
        }
        let s = Style {
            loops: match forced {
                Some(l) => l,
                None if matches!(key, "opt2" | "opt3") => Loops::Unrolled,
                None => Loops::Outer,
            },
            ..style
        };
        let t0 = Instant::now();
        let program = match key {
            "original" => original(s),
            "opt1" => opt1(s),
            "opt2" => opt2(s),
            _ => opt3(s),
        }?;
        let build_s = t0.elapsed().as_secs_f64();
        let (instrs, descs) = (program.instruction_count(), program.descriptors.len());
        let t1 = Instant::now();
        let dev = Device::with_core_spec(Instance::Trn1, spec)?;
        let lp = dev.load(0, program)?;
        let (outs, report) = dev.run(&lp, &[("lhsT", &lhs_t), ("rhs", &rhs)], &quiet)?;
        let run_s = t1.elapsed().as_secs_f64();
        if !report.hazards.is_empty() {
            return Err(err!(Invalid, "{key}: {} hazards", report.hazards.len()));
        }
        let out = outs
            .into_iter()
            .next()
            .map(|(_, b)| b)
            .ok_or_else(|| err!(Invalid, "{key}: no output"))?;
        // Opt 3 adds each group of 8 K tiles into a bf16 SBUF tile; the others sum all 64 in
        // PSUM and round once.
        let group = if key == "opt3" { O3_BK } else { KT };
        let got = decode_f32(DType::Bf16, &out);
        let bad = picks
            .iter()
            .filter(|&&(i, j)| {
                let want = reference(&lhs_t, &rhs, i, j, group);
                got.get(i * N + j).map(|g| g.to_bits()) != Some(want.to_bits())
            })
            .count();
        let mut check = if bad == 0 {
            format!("{SAMPLES}/{SAMPLES} sampled bit-exact")
        } else {
            all_ok = false;
            format!("{bad}/{SAMPLES} sampled WRONG")
        };
        if group == KT {
            match &first_out {
                None => first_out = Some(out),
                Some(f) if *f == out => check.push_str("; all bytes = first version run"),
                Some(_) => {
                    all_ok = false;
                    check.push_str("; DIFFERS from the first version run");
                }
            }
        }
        let a = Activity::of(&report);
        let flops = 2.0 * (rows * K * N) as f64;
        let gb = a.bytes as f64 / 1e9;
        let (pub_ms, err_pct, pub_gbs, pub_hfu) = if rows == M {
            (
                format!("{pub_ms:.2}"),
                format!("{:+.1} %", 100.0 * (a.ms - pub_ms) / pub_ms),
                format!("{:.0}", gb / (pub_ms * 1e-3)),
                format!("{pub_hfu:.2} %"),
            )
        } else {
            ("—".into(), "—".into(), "—".into(), "—".into())
        };
        println!(
            "| {label} | {pub_ms} | {:.3} | {err_pct} | {:.1} % | {:.1} % | {:.1} % | {:.1} % \
             | {gb:.3} | {:.0} | {pub_gbs} | {:.1} % | {pub_hfu} | {} | {instrs} | {descs} | {check} | {build_s:.2} | \
             {run_s:.1} |",
            a.ms,
            a.tensor,
            a.vector,
            a.gpsimd,
            a.dma,
            gb / (a.ms * 1e-3),
            100.0 * flops / (a.ms * 1e-3) / PEAK_FLOPS,
            s.loops.name(),
        );
    }
    println!();
    println!(
        "error = (simulated - published) / published. Active: the fraction of the simulated \
         time a unit was busy (a DMA engine: moving data, at its peak or its share of HBM \
         bandwidth, or paying descriptor overhead; mean \
         over the 16). ScalarE is idle in every version."
    );
    Ok(all_ok)
}
