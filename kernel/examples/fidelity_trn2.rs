//! Simulator timing against a published trn2 hardware profile: the matmul of AWS's "NKI
//! kernel optimization" tutorial (`[4096, 8192] @ [8192, 8192]`, FP32 inputs and result, one
//! NeuronCore-v3), in the published versions that fit a v3 SBUF, written with the published
//! tile sizes and loop structure, run on a simulated trn2 core with random data, checked
//! against a host reference, and set beside the published latency and engine activity. See
//! `docs/FIDELITY.md`.
//!
//! ```text
//! cargo run --release -p nrt-kernel --example fidelity_trn2 -- [--rows=R] [NAME...]
//! ```
//!
//! `NAME` selects versions (`v2`, `v3`, `v5`; all by default). `--rows=R` computes only the
//! first `R` rows (a multiple of 2048), without the comparison. `--bufs=B` gives version 2's
//! lhsT and rhs tiles `B` buffers (1, 2, 4 or 8; default 2). `--trigger-latency-ns=N` adds a
//! DMA trigger-to-start latency of `N` ns (not modelled by default). Every loop is a Rust loop
//! (recorded unrolled, rerolled by `Kernel::build`); versions 2 and 3 run as programs of
//! 1024 and 2048 rows one after the other ([`chunk_rows`]).
//!
//! Source: `nki/guides/tutorials/kernel-optimization.rst` in aws-neuron/aws-neuron-sdk
//! (@ 81ce03ae); its kernels are inline in the page. What the page leaves to NKI's compiler is
//! chosen as in `fidelity.rs` (trn1): two buffers per tile declared in a loop where SBUF has
//! room, loads triggered from SyncE, stores by the producing engine, a PSUM tile zeroed by its
//! first matmul. Version 4 keeps 2 × 64 rhs tiles `[128, 512]` fp32 live, 256 KiB per
//! partition, more than a v3 partition's 224 KiB: it cannot be written as published.
//! Version 5's SBUF accumulators (128 KiB), lhsT block (64 KiB) and rhs block (32 KiB) fill a
//! partition exactly: they get one buffer each, and the packed `[128, 1024]` result tile of
//! the page (which NKI's compiler places in space the dead blocks free) is replaced by two
//! stores of `[128, 512]` straight from the accumulators.

#[path = "fidelity_common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::time::Instant;

use common::{K, KT, M, N, TILE_K, TILE_M, TILE_N, Xorshift, block, matmul, samples};
use nrt_core::{Error, err};
use nrt_kernel::{AluOp, DType, DmaCopy, Kernel, Program, Tensor, Tile, View};
use nrt_sim::Instance;
use nrt_sim::engine::{Device, EngineId, ExecOptions, ExecReport, decode_f32};

/// The published profile, read from the page's text and its profile screenshots
/// (`nki/img/how-to/v{2..5}-*.png`): version, total (ms), DMA active %, TensorE active %,
/// VectorE active % (version 5 only; `NaN` where not published).
const PUBLISHED: [(&str, f64, f64, f64, f64); 3] = [
    ("v2", 39.89, 99.93, 87.28, f64::NAN),
    ("v3", 28.20, 99.73, 99.85, f64::NAN),
    ("v5", 28.30, 21.54, 99.50, 10.55),
];

/// `body(k, i, b)` for `i` in `range` with `b = i % bufs`, as a Rust loop (recorded
/// unrolled; `Kernel::build` rerolls it into program loops).
fn each(
    k: &mut Kernel,
    range: std::ops::Range<usize>,
    bufs: usize,
    mut body: impl FnMut(&mut Kernel, usize, usize) -> Result<(), Error>,
) -> Result<(), Error> {
    range.into_iter().try_for_each(|i| body(k, i, i % bufs))
}

fn tiles(k: &mut Kernel, name: &str, shape: &[usize], count: usize) -> Result<Vec<Tile>, Error> {
    (0..count)
        .map(|i| k.sbuf_tile(&format!("{name}{i}"), DType::F32, shape))
        .collect()
}

fn psums(k: &mut Kernel, count: usize) -> Result<Vec<Tile>, Error> {
    (0..count)
        .map(|i| k.psum_tile(&format!("result_tile{i}"), DType::F32, &[TILE_M, TILE_N]))
        .collect()
}

/// `nisa.dma_copy` of an input block, triggered from SyncE.
fn load(k: &mut Kernel, dst: &View, src: &View) -> Result<(), Error> {
    k.emit(DmaCopy {
        engine: Some(EngineId::Sync),
        ..DmaCopy::new(dst, src)
    })
}

fn io(name: &str) -> Result<(Kernel, Tensor, Tensor, Tensor), Error> {
    let mut k = Kernel::for_core(name, Instance::Trn2.core_spec());
    let lhs_t = k.input("lhsT", DType::F32, &[K, M])?;
    let rhs = k.input("rhs", DType::F32, &[K, N])?;
    let out = k.output("result", DType::F32, &[M, N])?;
    Ok((k, lhs_t, rhs, out))
}

/// Copies output tile `(m, n)` from PSUM to SBUF (VectorE) and stores it (triggered there).
fn copy_out(
    k: &mut Kernel,
    out: &View,
    ps: &Tile,
    sb: &Tile,
    m: usize,
    n: usize,
) -> Result<(), Error> {
    k.tensor_copy(sb.view(), ps.view())?;
    let dst = block(out, m * TILE_M, TILE_M, n * TILE_N, TILE_N)?;
    k.dma_copy(&dst, sb.view())
}

/// Version 2 ("tiled"): for m, n: for k: load a `[128, 128]` lhsT tile and a `[128, 512]`
/// rhs tile, matmul into PSUM; copy PSUM to SBUF; store.
fn v2(rows: std::ops::Range<usize>, bufs: usize) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("kernel_optimization_v2")?;
    let mut lts = Vec::new();
    let mut rts = Vec::new();
    for c in 0..bufs {
        lts.push(k.sbuf_tile(&format!("lhsT_tile{c}"), DType::F32, &[TILE_K, TILE_M])?);
        rts.push(k.sbuf_tile(&format!("rhs_tile{c}"), DType::F32, &[TILE_K, TILE_N])?);
    }
    let ps = psums(&mut k, 2)?;
    let sb = tiles(&mut k, "result_tmp", &[TILE_M, TILE_N], 2)?;
    each(
        &mut k,
        rows.start / TILE_M..rows.end / TILE_M,
        1,
        |k, m, _| {
            each(k, 0..N / TILE_N, 2, |k, n, b| {
                each(k, 0..KT, bufs, |k, kk, c| {
                    let (lt, rt) = (lts[c].view(), rts[c].view());
                    let (r0, m0, n0) = (kk * TILE_K, m * TILE_M, n * TILE_N);
                    load(k, lt, &block(&lhs_t, r0, TILE_K, m0, TILE_M)?)?;
                    load(k, rt, &block(&rhs, r0, TILE_K, n0, TILE_N)?)?;
                    matmul(k, ps[b].view(), lt, rt, kk == 0)
                })?;
                copy_out(k, &out, &ps[b], &sb[b], m, n)
            })
        },
    )?;
    k.build()
}

/// Version 3 ("hoisted loads"): for m: load the 64 lhsT tiles; for n: load the 64 rhs tiles,
/// 64 matmuls into PSUM, copy, store. The rhs tiles take 128 KiB of a partition: one buffer
/// of them, two of the lhsT tiles (32 KiB each).
fn v3(rows: std::ops::Range<usize>) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("kernel_optimization_v3")?;
    let rt = k.sbuf_tile("rhs_tiles", DType::F32, &[TILE_K, KT, TILE_N])?;
    let lts = tiles(&mut k, "lhsT_tiles", &[TILE_K, KT, TILE_M], 2)?;
    let ps = psums(&mut k, 2)?;
    let sb = tiles(&mut k, "result_tmp", &[TILE_M, TILE_N], 2)?;
    each(
        &mut k,
        rows.start / TILE_M..rows.end / TILE_M,
        2,
        |k, m, a| {
            let lt = &lts[a];
            each(k, 0..KT, 1, |k, kk, _| {
                let src = block(&lhs_t, kk * TILE_K, TILE_K, m * TILE_M, TILE_M)?;
                load(k, &lt.select(1, kk)?, &src)
            })?;
            each(k, 0..N / TILE_N, 2, |k, n, b| {
                each(k, 0..KT, 1, |k, kk, _| {
                    let src = block(&rhs, kk * TILE_K, TILE_K, n * TILE_N, TILE_N)?;
                    load(k, &rt.select(1, kk)?, &src)
                })?;
                each(k, 0..KT, 1, |k, kk, _| {
                    let (st, mv) = (lt.select(1, kk)?, rt.select(1, kk)?);
                    matmul(k, ps[b].view(), &st, &mv, kk == 0)
                })?;
                copy_out(k, &out, &ps[b], &sb[b], m, n)
            })
        },
    )?;
    k.build()
}

const BM: usize = 16;
const BN: usize = 2;
const BK: usize = 8;
const BLOCK_M: usize = BM * TILE_M;
const BLOCK_N: usize = BN * TILE_N;
const BLOCK_K: usize = BK * TILE_K;

/// Version 5 ("blocked M, N, K"): for n (8 blocks of 1024 columns): zero the fp32 SBUF
/// accumulators; for k (8 blocks of 1024, in order): load 8 rhs tiles `[128, 1024]`; for m
/// (2 blocks of 2048 rows): load 8 lhsT tiles `[128, 2048]`; for bn, bm: 8 matmuls into
/// PSUM, then add PSUM into the accumulator (VectorE); then store the accumulators.
fn v5(rows: std::ops::Range<usize>) -> Result<Program, Error> {
    let (mut k, lhs_t, rhs, out) = io("kernel_optimization_v5")?;
    let m0 = rows.start / BLOCK_M;
    let nbm = rows.len() / BLOCK_M;
    let res = k.sbuf_tile("result_tmps", DType::F32, &[TILE_M, nbm, BM, BN, TILE_N])?;
    let lt = k.sbuf_tile("lhsT_tiles", DType::F32, &[TILE_K, BK, BLOCK_M])?;
    let rt = k.sbuf_tile("rhs_tiles", DType::F32, &[TILE_K, BK, BLOCK_N])?;
    let ps = psums(&mut k, 2)?;
    for n in 0..N / BLOCK_N {
        k.memset(&res, 0.0)?;
        for kb in 0..K / BLOCK_K {
            for bk in 0..BK {
                let row = (kb * BK + bk) * TILE_K;
                let src = block(&rhs, row, TILE_K, n * BLOCK_N, BLOCK_N)?;
                load(&mut k, &rt.select(1, bk)?, &src)?;
            }
            for m in 0..nbm {
                for bk in 0..BK {
                    let row = (kb * BK + bk) * TILE_K;
                    let src = block(&lhs_t, row, TILE_K, (m0 + m) * BLOCK_M, BLOCK_M)?;
                    load(&mut k, &lt.select(1, bk)?, &src)?;
                }
                for bn in 0..BN {
                    for bm in 0..BM {
                        let acc = ps[bm % 2].view();
                        for bk in 0..BK {
                            let st = lt.select(1, bk)?.slice(1, bm * TILE_M..(bm + 1) * TILE_M)?;
                            let mv = rt.select(1, bk)?.slice(1, bn * TILE_N..(bn + 1) * TILE_N)?;
                            matmul(&mut k, acc, &st, &mv, bk == 0)?;
                        }
                        let r = res.select(1, m)?.select(1, bm)?.select(1, bn)?;
                        k.tensor_tensor(&r, &r, acc, AluOp::Add)?;
                    }
                }
            }
        }
        for m in 0..nbm {
            for bm in 0..BM {
                for bn in 0..BN {
                    let r = res.select(1, m)?.select(1, bm)?.select(1, bn)?;
                    let (r0, c0) = (((m0 + m) * BM + bm) * TILE_M, n * BLOCK_N + bn * TILE_N);
                    k.dma_copy(&block(&out, r0, TILE_M, c0, TILE_N)?, &r)?;
                }
            }
        }
    }
    k.build()
}

/// Random fp32 values in `[0, 1)` (the page's `rng.random`), as little-endian bytes.
fn random_f32(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Xorshift::new(seed);
    let mut out = Vec::with_capacity(4 * len);
    for _ in 0..len {
        let s = rng.next();
        out.extend_from_slice(&(((s >> 40) as f32) / (1u64 << 24) as f32).to_le_bytes());
    }
    out
}

fn f32_at(bytes: &[u8], i: usize) -> f64 {
    let b = bytes.get(4 * i..4 * i + 4).unwrap_or(&[0; 4]);
    f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Busy time (ticks) of one execution: TensorE, VectorE, the DMA engines' sum and the
/// busiest DMA engine.
fn busy(r: &ExecReport) -> [u64; 4] {
    let dma: Vec<u64> = r
        .dma_engines
        .iter()
        .map(|c| c.active + c.stall_bandwidth)
        .collect();
    [
        r.engine(EngineId::Tensor).active,
        r.engine(EngineId::Vector).active,
        dma.iter().sum(),
        dma.iter().copied().max().unwrap_or(0),
    ]
}

/// Rows per program: a version's loops are recorded unrolled (inside `for_range` loops the
/// kernel API over-synchronises: docs/FIDELITY.md), and unrolled over all 4096 rows versions 2
/// and 3 would exceed a program's 2^22 DMA descriptors; they run as programs of 1024 and
/// 2048 rows, one after the other on the same core, their times added.
fn chunk_rows(name: &str) -> usize {
    match name {
        "v2" => 1024,
        "v3" => 2048,
        _ => M,
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("fidelity_trn2: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rows = match args.iter().find_map(|a| a.strip_prefix("--rows=")) {
        Some(r) => r
            .parse::<usize>()
            .ok()
            .filter(|&r| r > 0 && r <= M && r % BLOCK_M == 0)
            .ok_or_else(|| err!(Invalid, "--rows={r}: a multiple of {BLOCK_M} up to {M}"))?,
        None => M,
    };
    let names: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    for n in &names {
        if !PUBLISHED.iter().any(|p| p.0 == *n) {
            return Err(err!(Invalid, "unknown version '{n}' (v2, v3, v5)"));
        }
    }
    let bufs = match args.iter().find_map(|a| a.strip_prefix("--bufs=")) {
        Some(b) => b
            .parse::<usize>()
            .ok()
            .filter(|b| (1..=8).contains(b) && KT % b == 0)
            .ok_or_else(|| err!(Invalid, "--bufs={b}: 1, 2, 4 or 8"))?,
        None => 2,
    };
    let latency = common::trigger_latency(&args)?;
    let lhs_t = random_f32(K * M, 1);
    let rhs = random_f32(K * N, 2);
    println!("trn2 (one NeuronCore-v3), fp32 [{rows},{K}] @ [{K},{N}], simulated");
    println!(
        "| version | published (ms) | simulated (ms) | error | DMA active published / mean / busiest engine | TensorE active published / simulated | VectorE active published / simulated |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let mut ok = true;
    for &(name, ms, dma, pe, ve) in &PUBLISHED {
        if !names.is_empty() && !names.contains(&name) {
            continue;
        }
        let (mut ticks, mut acc, mut built, mut ran, mut instrs) = (0u64, [0u64; 4], 0.0, 0.0, 0);
        let dev = Device::new(Instance::Trn2);
        let chunk = chunk_rows(name).min(rows);
        let mut got = vec![0f32; rows * N];
        for r0 in (0..rows).step_by(chunk) {
            let t0 = Instant::now();
            let program = match name {
                "v2" => v2(r0..r0 + chunk, bufs)?,
                "v3" => v3(r0..r0 + chunk)?,
                _ => v5(r0..r0 + chunk)?,
            };
            built += t0.elapsed().as_secs_f64();
            instrs += program.instruction_count();
            let lp = dev.load(0, program)?;
            dev.write_tensor(&lp, "lhsT", &lhs_t)?;
            dev.write_tensor(&lp, "rhs", &rhs)?;
            let t1 = Instant::now();
            let opts = ExecOptions {
                record_events: false,
                dma_trigger_latency_ticks: latency,
                ..ExecOptions::default()
            };
            let r = dev.execute(&lp, &opts)?;
            r.result()?;
            ran += t1.elapsed().as_secs_f64();
            ticks += r.ticks;
            for (a, b) in acc.iter_mut().zip(busy(&r)) {
                *a += b;
            }
            let out = decode_f32(DType::F32, &dev.read_tensor(&lp, "result")?);
            let part = r0 * N..(r0 + chunk) * N;
            if let (Some(dst), Some(src)) = (got.get_mut(part.clone()), out.get(part)) {
                dst.copy_from_slice(src);
            }
            dev.unload(lp)?;
        }
        // Sampled elements against an f64 reference (fp32 accumulation: relative 1e-5).
        for (i, j) in samples(256, rows) {
            let want: f64 = (0..K)
                .map(|kk| f32_at(&lhs_t, kk * M + i) * f32_at(&rhs, kk * N + j))
                .sum();
            let g = f64::from(got.get(i * N + j).copied().unwrap_or(f32::NAN));
            let close = (g - want).abs() <= 1e-5 * want.abs();
            if !close {
                eprintln!("{name}: result[{i},{j}] = {g}, expected {want}");
                ok = false;
            }
        }
        let sim_ms = ticks as f64 / nrt_sim::engine::TICKS_PER_SECOND as f64 * 1e3;
        let pct = |b: u64| 100.0 * b as f64 / ticks.max(1) as f64;
        let (te, vec, dmean, dmax) = (pct(acc[0]), pct(acc[1]), pct(acc[2]) / 16.0, pct(acc[3]));
        let full = rows == M;
        let cmp = |p: f64| {
            if p.is_nan() {
                "—".to_string()
            } else {
                format!("{p:.2} %")
            }
        };
        println!(
            "| {name} | {} | {sim_ms:.2} | {} | {} / {dmean:.1} % / {dmax:.1} % | {} / {te:.1} % | {} / {vec:.1} % |",
            if full {
                format!("{ms:.2}")
            } else {
                "—".into()
            },
            if full {
                format!("{:+.1} %", (sim_ms - ms) / ms * 100.0)
            } else {
                "—".into()
            },
            cmp(dma),
            cmp(pe),
            cmp(ve),
        );
        eprintln!(
            "{name}: {} program(s) of {chunk} rows, build {built:.1} s, simulation {ran:.1} s, {instrs} instructions",
            rows / chunk
        );
    }
    Ok(ok)
}
