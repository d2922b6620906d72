//! Calibration against published figures, and the qualitative behaviour of the timing model
//! (port conflicts, the TensorE → VectorE pipeline and its hazard, timeouts).
//!
//! Every expected value in the first part is a figure AWS published, cited at the test, never
//! a value computed from the simulator's constants. Where a figure was used to *fit* one of
//! the model's constants, the test says so: it checks that the fit holds, and it does not
//! count as validation. Sources (aws-neuron/aws-neuron-sdk):
//!
//! * DO: `nki/get-started/about/nki-dma-overview.rst` (@ 81ce03ae), the two profiled DMA
//!   examples (trn2) and the throughput curve against bytes per partition;
//! * PG: `nki/deep-dives/nki_perf_guide.rst` (@ 81ce03ae), profiles of DMA transfers on
//!   NeuronCore-v2;
//! * DB: `nki/deep-dives/nki-dma-bandwidth-guide.rst` (@ 81ce03ae), per-engine bandwidth;
//! * A2 / A3: `nki/guides/architecture/trainium_inferentia2_arch.rst` and
//!   `trainium2_arch.rst` (@ 81ce03ae), clocks, peak rates, cost rules;
//! * KO: `nki/guides/tutorials/kernel-optimization.rst` (@ 81ce03ae), the trn2 matmul profile.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, AluOp, Bias, DType, Device, DmaDescriptor, DmaEndpoint, EngineId,
    EventKind, ExecOptions, ExecReport, Instr, Program, ProgramBuilder, Space, TIMING_MODEL, Track,
};

const TICK_NS: f64 = 1.0 / 1.4;

fn within(got: f64, want: f64, what: &str) {
    let r = got / want;
    assert!(
        (0.9..=1.1).contains(&r),
        "{what}: got {got:.1}, expected {want:.1} (ratio {r:.3})"
    );
}

fn exec_on(instance: Instance, p: Program, inputs: &[(&str, &[u8])]) -> ExecReport {
    let dev = Device::new(instance);
    let lp = dev.load(0, p).unwrap();
    for (n, b) in inputs {
        dev.write_tensor(&lp, n, b).unwrap();
    }
    dev.execute(&lp, &ExecOptions::default()).unwrap()
}

fn exec(p: Program, inputs: &[(&str, &[u8])]) -> ExecReport {
    exec_on(Instance::Trn1, p, inputs)
}

fn slices<'a>(
    r: &'a ExecReport,
    e: EngineId,
    op: &'a str,
) -> impl Iterator<Item = (u64, u64)> + 'a {
    r.events.iter().filter_map(move |ev| match ev.kind {
        EventKind::Instr { op: o, .. } if ev.track == Track::Engine(e) && o == op => {
            Some((ev.start, ev.dur))
        }
        _ => None,
    })
}

/// One transfer on DMA engine 0 from SyncE: `rows` descriptors of `row_bytes` each, from an
/// HBM tensor into partitions 0.. of SBUF (a `[rows, row_bytes]` load, as in the DMA
/// overview's examples). Returns the transfer's duration on its engine, ns.
fn one_engine_load(instance: Instance, rows: u32, row_bytes: u32) -> f64 {
    let mut b = ProgramBuilder::new("load");
    let t = b.input("x", DType::Bf16, &[u64::from(rows * row_bytes / 2)]);
    let s = b.sem().unwrap();
    let descs = row_loads(t, rows, row_bytes);
    b.dma_on(EngineId::Sync, 0, 0, &descs, s, 1);
    b.wait(EngineId::Sync, s, 1);
    let r = exec_on(instance, b.build().unwrap(), &[]);
    r.result().unwrap();
    assert_eq!(r.timing_model, TIMING_MODEL);
    assert!(!r.validated_against_hw);
    check_counters(&r);
    let transfer = r
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Transfer { .. }))
        .unwrap();
    transfer.dur as f64 * TICK_NS
}

/// Validation. DO, example 1 (trn2): "the first DMA engine takes 1416 ns to load 32 KiB"
/// (a `[4, 4096]` bf16 load: four 8 KiB rows on one engine). The model's rate is DB's
/// table figure for TRN2 (23 B/ns per engine), not this measurement; the fixed cost was
/// fitted to example 2 (below).
#[test]
fn trn2_dma_32kib_on_one_engine_matches_the_published_1416ns() {
    within(
        one_engine_load(Instance::Trn2, 4, 8192),
        1416.0,
        "32 KiB on one trn2 DMA engine (ns)",
    );
}

/// Fit, not validation. DO, example 2 (trn2): a `[128, 128]` bf16 load spread over 16
/// engines shows engine 64 busy for "Duration: 97ns" (eight 256-byte rows, 2 KiB). The
/// NeuronCore-v3 fixed DMA cost on the engine was fitted to it.
#[test]
fn trn2_dma_2kib_as_eight_rows_reproduces_its_fit() {
    within(
        one_engine_load(Instance::Trn2, 8, 256),
        97.0,
        "2 KiB as eight rows on one trn2 DMA engine (ns)",
    );
}

/// Fit, not validation. The NeuronCore-v2 fixed DMA costs were fitted so that DO's
/// 32 KiB example (measured on trn2) takes 1,416 ns at 27.2 GB/s per engine; this keeps the
/// fit visible. PG's NeuronCore-v2 profile checks the fit (next test).
#[test]
fn trn1_dma_32kib_on_one_engine_reproduces_its_fit() {
    within(
        one_engine_load(Instance::Trn1, 1, 32768),
        1416.0,
        "32 KiB on one trn1 DMA engine (ns)",
    );
}

/// Four `[128, row_bytes]` loads in a row on `instance`, each spread over the 16 DMA engines
/// (eight rows per engine) from SyncE: bytes per ns.
fn loads_per_ns(instance: Instance, row_bytes: u32) -> f64 {
    let mut b = ProgramBuilder::new("loads");
    let t = b.input("x", DType::Bf16, &[128, u64::from(row_bytes / 2)]);
    let s = b.sem().unwrap();
    let descs = row_loads(t, 128, row_bytes);
    let mut total = 0;
    for _ in 0..4 {
        total += b.dma_spread(EngineId::Sync, &descs, 0, s, 16);
    }
    b.wait(EngineId::Sync, s, total);
    let r = exec_on(instance, b.build().unwrap(), &[]);
    r.result().unwrap();
    check_counters(&r);
    (4 * 128 * u64::from(row_bytes)) as f64 / r.nanoseconds()
}

/// Validation on NeuronCore-v2. PG (`nki/deep-dives/nki_perf_guide.rst`, "Opt #9", figure
/// `nki/img/nki_perf_guide/fig30.png`, added 2024-09-16, before trn2 was public): a profile
/// "with sufficiently large DMA transfers" shows 32 KiB transfers back to back on each of the
/// 16 engines, one of them "duration: 1810 ns", and "~68% DMA throughput utilization". A bar
/// leaves out the transfer's fixed costs (PG's `fig29.png`: 4 bytes in 7 ns), but fig30's bars
/// follow one another without gaps, so 1,810 ns is also the period of one engine's transfers,
/// which is what the model's transfer duration on an idle engine is. The transfer's rows are
/// not shown; they are taken as eight 4 KiB rows, one engine's share of a
/// 128-partition tile with 4 KiB per partition (PG's own example of such a load). Neither figure
/// was used to set a constant: the v2 rate is A2's and DO's text's, the fixed costs were fitted
/// to DO's v3 example (below). The profiler's utilisation is a share of 410 GB/s: PG's
/// `fig27.png` (the same section, "Busy DMA engines with relatively idle compute engines")
/// shows its DMA throughput track at "rate: 130.46 GB/s, throughput: 31.82%" (130.46 / 0.3182
/// = 410.0 GB/s, half the device's 820 GB/s), so "~68%" is about 279 GB/s, 17.4 B/ns per engine.
#[test]
fn trn1_dma_32kib_transfers_match_the_published_v2_profile() {
    within(
        one_engine_load(Instance::Trn1, 8, 4096),
        1810.0,
        "32 KiB as eight 4 KiB rows on one trn1 DMA engine (ns)",
    );
    within(
        loads_per_ns(Instance::Trn1, 4096) / 410.0,
        0.68,
        "utilisation (of the profiler's 410 GB/s) of 16 trn1 engines moving 32 KiB transfers back to back",
    );
}

/// DO's throughput curve ("DMA Throughput varying Bytes per Partition for p_dim = 128",
/// `nki/img/overviews/nki-dma-intro-1.jpg` @ 81ce03ae, 1200 × 900 pixels): the y pixel of each
/// point's centre for 32 B .. 32 KiB per partition, and of the x axis. The axis has no values
/// and the page names no generation (its measured examples are trn2's); its text says 4 KiB
/// "nearly saturate[s]" the bandwidth.
const DO_CURVE: [(u32, u32); 11] = [
    (32, 694),
    (64, 689),
    (128, 679),
    (256, 657),
    (512, 614),
    (1024, 523),
    (2048, 361),
    (4096, 297),
    (8192, 290),
    (16384, 287),
    (32768, 283),
];
const DO_CURVE_AXIS_Y: u32 = 700;

/// Validation on NeuronCore-v3, taking DO's curve as trn2's. Normalised to its 32 KiB point,
/// the model's throughput of back-to-back 128-partition loads follows the curve to within
/// 0.11 at every point and 0.05 RMS. Nothing was fitted to the curve: its shape comes from the
/// DGE's 600 ns per 128-descriptor trigger (A3, DGE guide) against the data at 23 B/ns (DB),
/// a floor per load that gives throughput ∝ bytes up to about 1.7 KiB per partition. (The v2
/// model, with no DGE and fixed costs per descriptor instead, bends more gently: 0.11 RMS,
/// 0.56 against 0.81 at 2 KiB; docs/FIDELITY.md.)
#[test]
fn trn2_dma_throughput_follows_the_published_curve() {
    let top = f64::from(DO_CURVE_AXIS_Y - DO_CURVE[10].1);
    let peak = loads_per_ns(Instance::Trn2, 32768);
    let mut squares = 0.0;
    for (bytes, y) in DO_CURVE {
        let published = f64::from(DO_CURVE_AXIS_Y - y) / top;
        let model = loads_per_ns(Instance::Trn2, bytes) / peak;
        let d = model - published;
        assert!(
            d.abs() <= 0.11,
            "{bytes} B per partition: model {model:.3}, curve {published:.3}"
        );
        squares += d * d;
    }
    let rms = (squares / DO_CURVE.len() as f64).sqrt();
    assert!(rms <= 0.05, "RMS {rms:.3}");
}

/// `count` back-to-back matmuls of `[128, 128]` stationary by `[128, 512]` moving in `dt`,
/// each after its own LoadStationary, on `instance`: TensorE's busy time per matmul, ns.
fn matmul_stream_ns(instance: Instance, dt: DType, count: u32) -> f64 {
    let mut b = ProgramBuilder::new("mm");
    for i in 0..count {
        b.push(
            EngineId::Tensor,
            Instr::LoadStationary {
                src: AccessPattern::sbuf(dt, 0, 128, 0, 128),
            },
        );
        b.push(
            EngineId::Tensor,
            Instr::MultiplyMoving {
                moving: AccessPattern::sbuf(dt, 0, 128, 4096, 512),
                dst: AccessPattern::psum(DType::F32, 0, 128, (i % 8) * 2048, 512),
                accumulate: false,
            },
        );
    }
    let r = exec_on(instance, b.build().unwrap(), &[]);
    r.result().unwrap();
    r.engine(EngineId::Tensor).active as f64 * TICK_NS / f64::from(count)
}

/// Validation. KO (trn2, fp32 `[4096, 8192] @ [8192, 8192]` in 128 × 128 × 512 tiles):
/// version 5's profile shows TensorE active 28.16 ms (99.50 % of 28.30 ms) for its 32,768
/// tile matmuls, 859 ns each.
#[test]
fn trn2_fp32_matmul_tile_matches_the_published_profile() {
    within(
        matmul_stream_ns(Instance::Trn2, DType::F32, 64),
        28.16e6 / 32768.0,
        "fp32 [128,128] x [128,512] matmul on trn2 (ns)",
    );
}

/// Validation. A2: TensorE delivers "92 TFLOPS" for BF16 (and A3: "79" on NeuronCore-v3);
/// one `[128,128] x [128,512]` matmul is 2·128·128·512 = 16.8 MFLOP, so back-to-back
/// matmuls at peak take 182 ns (trn1) and 212 ns (trn2).
#[test]
fn bf16_matmul_stream_runs_at_the_published_peak() {
    let flops = 2.0 * 128.0 * 128.0 * 512.0;
    within(
        matmul_stream_ns(Instance::Trn1, DType::Bf16, 64),
        flops / 92e12 * 1e9,
        "bf16 matmul on trn1 (ns)",
    );
    within(
        matmul_stream_ns(Instance::Trn2, DType::Bf16, 64),
        flops / 79e12 * 1e9,
        "bf16 matmul on trn2 (ns)",
    );
}

/// Validation of the rule A2 states for fp32: "the instruction cost is roughly 4x higher"
/// (and A2's 23 TFLOPS for FP32 against 92 for BF16).
#[test]
fn fp32_matmul_costs_four_times_bf16() {
    let bf = matmul_stream_ns(Instance::Trn1, DType::Bf16, 16);
    let fp = matmul_stream_ns(Instance::Trn1, DType::F32, 16);
    within(fp / bf, 92.0 / 23.0, "fp32 / bf16 matmul time on trn1");
}

fn exp_on(src: AccessPattern) -> Instr {
    Instr::Activation {
        func: ActFunc::Exp,
        src,
        out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
        scale: 1.0,
        bias: Bias::Imm(0.0),
    }
}

/// The published rule, with the published clocks. A2: an instruction with one input tile
/// takes "roughly N cycles", plus the ~60-cycle tensor-access overhead; ScalarE runs at
/// 1.4 GHz on NeuronCore-v2 and 1.2 GHz on v3 (A3), VectorE at 1.12 and 0.96 GHz. For
/// N = 512: 572 cycles, 409 ns on trn1 ScalarE, 511 ns on VectorE, 477 ns and 596 ns on trn2.
#[test]
fn exp_takes_n_plus_60_cycles_at_each_engines_clock() {
    for (instance, engine, ghz) in [
        (Instance::Trn1, EngineId::Scalar, 1.4),
        (Instance::Trn1, EngineId::Vector, 1.12),
        (Instance::Trn2, EngineId::Scalar, 1.2),
        (Instance::Trn2, EngineId::Vector, 0.96),
    ] {
        let mut b = ProgramBuilder::new("exp");
        b.push(
            engine,
            exp_on(AccessPattern::sbuf(DType::F32, 0, 128, 0, 512)),
        );
        let r = exec_on(instance, b.build().unwrap(), &[]);
        let (_, d) = slices(&r, engine, "Activation").next().unwrap();
        within(
            d as f64 * TICK_NS,
            (512.0 + 60.0) / ghz,
            &format!("exp [128,512] on {engine} of {} (ns)", instance.name()),
        );
    }
}

/// The durations, in ScalarE cycles (1.4 GHz on trn1: one tick each), of `count` exp
/// activations on ScalarE issued one after another, each over `n` elements, each reading the
/// previous one's output when `chained`.
fn exp_chain(n: u16, count: u32, chained: bool) -> Vec<u64> {
    let mut b = ProgramBuilder::new("exp_chain");
    for i in 0..count {
        // Alternating between two SBUF regions: a chain reads what the previous one wrote;
        // otherwise every instruction reads region 0 and writes its own.
        let (src, dst) = if chained {
            ((i % 2) * 8192, ((i + 1) % 2) * 8192)
        } else {
            (0, 16384 + i * 4096)
        };
        b.push(
            EngineId::Scalar,
            Instr::Activation {
                func: ActFunc::Exp,
                src: AccessPattern::sbuf(DType::F32, 0, 128, src, n),
                out: AccessPattern::sbuf(DType::F32, 0, 128, dst, n),
                scale: 1.0,
                bias: Bias::Imm(0.0),
            },
        );
    }
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    slices(&r, EngineId::Scalar, "Activation")
        .map(|(_, d)| d)
        .collect()
}

/// A2's static overheads ("Vector Engine": "In the rare cases where VectorE is running many
/// back-to-back instructions either with N << 128 or with every instruction depending on the
/// output tile of the previous instruction, we need to add a static instruction overhead of 100
/// engine cycles"; "Tensor access overhead": about 60 cycles, which "compute engines can
/// typically hide some of … through instruction level parallelism"), on ScalarE's rule of N
/// cycles per element:
/// * an instruction after an idle engine pays the 60 cycles and no more, small or not;
/// * back-to-back small or dependent instructions pay 60 + 100;
/// * back-to-back independent large instructions hide the 60 behind the previous one.
#[test]
fn static_overheads_apply_where_the_guide_says() {
    // One small instruction alone: N + 60.
    assert_eq!(exp_chain(16, 1, false), [16 + 60]);
    // Many small ones back to back: N + 60 + 100 after the first.
    assert_eq!(exp_chain(16, 4, false), [76, 176, 176, 176]);
    // A dependent chain of large ones: N + 60 + 100 after the first.
    assert_eq!(exp_chain(512, 4, true), [572, 672, 672, 672]);
    // Independent large ones: the access overhead hidden after the first.
    assert_eq!(exp_chain(512, 4, false), [572, 512, 512, 512]);
}

/// Qualitative: a DMA trigger-to-start latency (`ExecOptions::dma_trigger_latency_ticks`; 0 by
/// default, see docs/SIM_ISA.md) delays a transfer's start by exactly that much without
/// occupying its engine: the transfer takes as long, the engine idles meanwhile.
#[test]
fn a_trigger_latency_delays_the_start_not_the_transfer() {
    let run = |latency: Option<u64>| {
        let mut b = ProgramBuilder::new("load");
        let t = b.input("x", DType::Bf16, &[4 * 4096]);
        let s = b.sem().unwrap();
        let descs = row_loads(t, 4, 8192);
        b.dma_on(EngineId::Sync, 0, 0, &descs, s, 1);
        b.wait(EngineId::Sync, s, 1);
        let dev = Device::new(Instance::Trn1);
        let lp = dev.load(0, b.build().unwrap()).unwrap();
        let opts = ExecOptions {
            dma_trigger_latency_ticks: latency,
            ..ExecOptions::default()
        };
        let r = dev.execute(&lp, &opts).unwrap();
        r.result().unwrap();
        check_counters(&r);
        let tr = r
            .events
            .iter()
            .find(|e| matches!(e.kind, EventKind::Transfer { .. }))
            .map(|e| (e.start, e.dur))
            .unwrap();
        (r.ticks, tr, r.dma_engines[0].idle)
    };
    let (t0, (s0, d0), idle0) = run(None);
    let (t1, (s1, d1), idle1) = run(Some(1820));
    assert_eq!(run(Some(0)).0, t0, "the default is no latency");
    assert_eq!(t1, t0 + 1820);
    assert_eq!(s1, s0 + 1820);
    assert_eq!(d1, d0);
    assert_eq!(idle1, idle0 + 1820);
}

/// A trigger latency beyond any horizon (`ExecOptions::dma_trigger_latency_ticks` takes any
/// u64) leaves the transfer unstarted: the execution times out as a program waiting forever
/// does. (Before 2026-12-07 a trigger after tick 0 overflowed the tick arithmetic, and a start
/// near the end of the tick range overflowed the transfer's: panics in debug builds.)
#[test]
fn an_endless_latency_ends_the_execution_cleanly() {
    let mut b = ProgramBuilder::new("load");
    let t = b.input("x", DType::Bf16, &[4 * 4096]);
    let s = b.sem().unwrap();
    let descs = row_loads(t, 4, 8192);
    // Two triggers on one queue: the second issues at tick 1, past which the latency leads.
    b.dma_on(EngineId::Sync, 0, 0, &descs, s, 1);
    b.dma_on(EngineId::Sync, 0, 0, &descs, s, 1);
    b.wait(EngineId::Sync, s, 2);
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    let opts = ExecOptions {
        dma_trigger_latency_ticks: Some(u64::MAX),
        max_ticks: 1 << 20,
        ..ExecOptions::default()
    };
    let r = dev.execute(&lp, &opts).unwrap();
    assert_eq!(r.status, NrtStatus::Timeout);
    assert_eq!(r.dma_engines.iter().map(|c| c.bytes).sum::<u64>(), 0);
    // A latency that lands a start just short of the end of time, with no tick limit: the
    // transfer never starts (past 2^63 ticks), rather than overflowing the arithmetic after it.
    let near_end = ExecOptions {
        dma_trigger_latency_ticks: Some(u64::MAX - 100),
        max_ticks: u64::MAX,
        ..ExecOptions::default()
    };
    let r = dev.execute(&lp, &near_end).unwrap();
    assert_eq!((r.status, r.ticks), (NrtStatus::Timeout, u64::MAX));
    assert_eq!(r.dma_engines.iter().map(|c| c.bytes).sum::<u64>(), 0);
}

/// Transfers of `rows` rows of `row_bytes` on DMA engine 0, on the queues `queues` in that
/// order, triggered from SyncE, on a trn1 whose `dma_queue_interval_ticks` is `interval`: the
/// report's ticks and each transfer's (queue, start, duration), in start order.
fn queued_transfers(
    interval: u64,
    queues: &[u8],
    rows: u32,
    row_bytes: u32,
) -> (u64, Vec<(u8, u64, u64)>) {
    let mut b = ProgramBuilder::new("queued");
    let t = b.input("x", DType::Bf16, &[u64::from(rows * row_bytes / 2)]);
    let s = b.sem().unwrap();
    for &q in queues {
        // Each queue writes its own SBUF bytes (two queues are not ordered with each other).
        let descs: Vec<_> = row_loads(t, rows, row_bytes)
            .into_iter()
            .map(|mut d| {
                if let DmaEndpoint::Sbuf { offset, .. } = &mut d.dst {
                    *offset = u32::from(q) * row_bytes;
                }
                d
            })
            .collect();
        b.dma_on(EngineId::Sync, 0, q, &descs, s, 1);
    }
    b.wait(EngineId::Sync, s, queues.len() as u32);
    let spec = nrt_sim::engine::CoreSpec {
        dma_queue_interval_ticks: interval,
        ..nrt_sim::engine::NEURONCORE_V2
    };
    let dev = Device::with_core_spec(Instance::Trn1, spec).unwrap();
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    check_counters(&r);
    let mut trs: Vec<_> = r
        .events
        .iter()
        .filter_map(|e| match (e.kind, e.track) {
            (EventKind::Transfer { .. }, Track::DmaQueue(0, q)) => Some((q, e.start, e.dur)),
            _ => None,
        })
        .collect();
    trs.sort_by_key(|&(_, start, _)| start);
    (r.ticks, trs)
}

/// Qualitative: a queue interval (`CoreSpec::dma_queue_interval_ticks`, 0 on every generation:
/// a study's figure) spaces the starts of consecutive transfers on one queue by at least that
/// much, without changing how long each takes on its engine; transfers that take longer than
/// the interval run back to back as without it; another queue of the engine is not held by it.
#[test]
fn a_queue_interval_spaces_transfer_starts_on_one_queue() {
    // Small transfers (eight 256-byte rows: 849 ticks each) on one queue.
    let (t0, base) = queued_transfers(0, &[0, 0, 0, 0], 8, 256);
    let (t1, spaced) = queued_transfers(2000, &[0, 0, 0, 0], 8, 256);
    assert_eq!(base.len(), 4);
    assert_eq!(spaced.len(), 4);
    for w in base.windows(2) {
        assert_eq!(w[1].1, w[0].1 + w[0].2, "back to back without an interval");
    }
    for (i, (b, s)) in base.iter().zip(&spaced).enumerate() {
        assert_eq!(s.1, base[0].1 + 2000 * i as u64, "transfer {i} starts");
        assert_eq!(s.2, b.2, "transfer {i} takes as long");
    }
    assert_eq!(t1, t0 + 3 * 2000 - 3 * base[0].2);
    // Large transfers (eight 8 KiB rows, more than 2,000 ticks each): no change at all.
    assert_eq!(
        queued_transfers(2000, &[0, 0, 0], 8, 8192),
        queued_transfers(0, &[0, 0, 0], 8, 8192)
    );
    // Two queues (the engine alternates between them descriptor by descriptor): each spaces
    // its own transfers only; the first on each starts as without an interval.
    let starts = |trs: &[(u8, u64, u64)], q: u8| -> Vec<u64> {
        trs.iter()
            .filter(|&&(qq, _, _)| qq == q)
            .map(|&(_, s, _)| s)
            .collect()
    };
    let (_, two) = queued_transfers(2000, &[0, 1, 0, 1], 8, 256);
    let (_, free) = queued_transfers(0, &[0, 1, 0, 1], 8, 256);
    for q in [0, 1] {
        let (spaced, unspaced) = (starts(&two, q), starts(&free, q));
        assert_eq!(spaced[0], unspaced[0], "queue {q}'s first transfer");
        assert!(unspaced[1] - unspaced[0] < 2000);
        assert_eq!(spaced[1] - spaced[0], 2000, "queue {q}");
    }
}

#[test]
fn psum_port_conflict_serialises_vector_and_scalar() {
    // ScalarE exp reading PSUM and VectorE copying out of another PSUM bank: they cannot
    // access PSUM in parallel, so one waits for the other.
    let mut b = ProgramBuilder::new("psum_conflict");
    b.push(
        EngineId::Scalar,
        exp_on(AccessPattern::psum(DType::F32, 0, 128, 0, 512)),
    );
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::psum(DType::F32, 0, 128, 2048, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 8192, 512),
        },
    );
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    check_counters(&r);
    // Fixed arbitration order (VectorE before ScalarE): ScalarE waits for the port.
    let sc = r.engine(EngineId::Scalar);
    assert!(
        sc.stall_port >= 700,
        "ScalarE should wait for the PSUM port: {sc:?}"
    );
    assert_eq!(r.engine(EngineId::Vector).stall_port, 0);
    assert!(r.ticks >= 572 + 715, "serialised: {}", r.ticks);
    // Without the conflict (VectorE reads SBUF instead) they overlap.
    let mut b = ProgramBuilder::new("no_conflict");
    b.push(
        EngineId::Scalar,
        exp_on(AccessPattern::psum(DType::F32, 0, 128, 0, 512)),
    );
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::sbuf(DType::F32, 0, 128, 16384, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 8192, 512),
        },
    );
    let r = exec(b.build().unwrap(), &[]);
    assert_eq!(r.engine(EngineId::Scalar).stall_port, 0);
    assert!(r.ticks < 800, "{}", r.ticks);
}

#[test]
fn sbuf_port_conflict_serialises_vector_and_gpsimd() {
    let mut b = ProgramBuilder::new("sbuf_conflict");
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::sbuf(DType::F32, 0, 128, 0, 1024),
            bits: 0,
        },
    );
    b.push(
        EngineId::Vector,
        Instr::TensorScalar {
            op: AluOp::Add,
            src: AccessPattern::sbuf(DType::F32, 0, 128, 8192, 1024),
            scalar: 1.0,
            out: AccessPattern::sbuf(DType::F32, 0, 128, 16384, 1024),
        },
    );
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    check_counters(&r);
    // VectorE wins the fixed arbitration order; GpSimdE waits for the whole TensorScalar.
    let g = r.engine(EngineId::GpSimd);
    assert!(g.stall_port > 1000, "{g:?}");
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e.kind, EventKind::PortWait { .. }))
    );
}

/// TensorE produces tiles into two PSUM banks; VectorE consumes them. `omit` drops VectorE's
/// wait for one tile.
fn pipeline(tiles: u32, omit: Option<u32>) -> Program {
    let mut b = ProgramBuilder::new("pipeline");
    let ready = b.sem().unwrap();
    let full = [b.sem().unwrap(), b.sem().unwrap()];
    let free = [b.sem().unwrap(), b.sem().unwrap()];
    b.push(
        EngineId::GpSimd,
        Instr::Iota {
            out: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 128),
            base: 0,
            partition_step: 1,
            free_step: 1,
        },
    );
    b.push(
        EngineId::GpSimd,
        Instr::Iota {
            out: AccessPattern::sbuf(DType::Bf16, 0, 128, 1024, 512),
            base: -100,
            partition_step: 1,
            free_step: -1,
        },
    );
    b.signal(EngineId::GpSimd, ready, 1);
    b.wait(EngineId::Tensor, ready, 1);
    b.push(
        EngineId::Tensor,
        Instr::LoadStationary {
            src: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 128),
        },
    );
    for t in 0..tiles {
        let bank = (t % 2) as usize;
        b.wait(EngineId::Tensor, free[bank], t / 2);
        b.push(
            EngineId::Tensor,
            Instr::MultiplyMoving {
                moving: AccessPattern::sbuf(DType::Bf16, 0, 128, 1024, 512),
                dst: AccessPattern::psum(DType::F32, 0, 128, bank as u32 * 2048, 512),
                accumulate: false,
            },
        );
        b.signal(EngineId::Tensor, full[bank], 1);
        if omit != Some(t) {
            b.wait(EngineId::Vector, full[bank], t / 2 + 1);
        }
        b.push(
            EngineId::Vector,
            Instr::TensorScalar {
                op: AluOp::Mul,
                src: AccessPattern::psum(DType::F32, 0, 128, bank as u32 * 2048, 512),
                scalar: 0.5,
                out: AccessPattern::sbuf(DType::F32, 0, 128, 8192 + t * 2048, 512),
            },
        );
        b.signal(EngineId::Vector, free[bank], 1);
    }
    b.build().unwrap()
}

#[test]
fn tensor_to_vector_pipeline_overlaps() {
    let r = exec(pipeline(6, None), &[]);
    r.result().unwrap();
    check_counters(&r);
    let mm: Vec<(u64, u64)> = slices(&r, EngineId::Tensor, "MultiplyMoving").collect();
    let vs: Vec<(u64, u64)> = slices(&r, EngineId::Vector, "TensorScalar").collect();
    assert_eq!((mm.len(), vs.len()), (6, 6));
    // TensorE computes tile t+1 while VectorE consumes tile t.
    for t in 0..5 {
        let (ms, md) = mm[t + 1];
        let (vs0, vd) = vs[t];
        assert!(
            ms < vs0 + vd && vs0 < ms + md,
            "tile {t}: MM {:?} vs VectorE {:?}",
            mm[t + 1],
            vs[t]
        );
    }
    let serial: u64 = mm.iter().chain(&vs).map(|s| s.1).sum();
    assert!(r.ticks < serial, "{} ticks, serial {serial}", r.ticks);
    assert!(r.engine(EngineId::Tensor).stall_semaphore > 0);
}

#[test]
fn pipeline_without_a_semwait_reports_the_hazard() {
    let r = exec(pipeline(6, Some(3)), &[]);
    assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
    let e = r.result().unwrap_err();
    assert_eq!(e.status(), NrtStatus::ExecCompletedWithErr);
    let msg = e.message();
    assert!(
        msg.contains("VectorE") && msg.contains("TensorE") && msg.contains("PSUM"),
        "{msg}"
    );
    assert!(msg.contains("0x800"), "names the bank address: {msg}");
    assert!(!r.hazards.is_empty());
    // Device::run surfaces it as the error.
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, pipeline(6, Some(3))).unwrap();
    let err = dev.run(&lp, &[], &ExecOptions::default()).unwrap_err();
    assert_eq!(err.status(), NrtStatus::ExecCompletedWithErr);
}

#[test]
fn dma_overwriting_a_buffer_in_use_is_a_hazard() {
    // VectorE reads SBUF while a DMA (triggered by Sync with no edge to VectorE) writes it.
    let mut b = ProgramBuilder::new("war");
    let t = b.input("x", DType::F32, &[128, 512]);
    let s = b.sem().unwrap();
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
        },
    );
    let descs: Vec<DmaDescriptor> = (0..128u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: t,
                offset: u64::from(p) * 2048,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p,
                offset: 0,
            },
            len: 2048,
        })
        .collect();
    let n = b.dma_spread(EngineId::Sync, &descs, 0, s, 16);
    b.wait(EngineId::Sync, s, n);
    let r = exec(b.build().unwrap(), &[]);
    let e = r.result().unwrap_err();
    assert_eq!(e.status(), NrtStatus::ExecCompletedWithErr);
    assert!(
        e.message().contains("DMA engine") && e.message().contains("VectorE"),
        "{e}"
    );
}

#[test]
fn never_halting_program_times_out() {
    let mut b = ProgramBuilder::new("deadlock");
    let s = b.sem().unwrap();
    b.wait(EngineId::Scalar, s, 1);
    let p = b.build().unwrap();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let opts = ExecOptions {
        max_ticks: 1_000_000,
        ..ExecOptions::default()
    };
    let r = dev.execute(&lp, &opts).unwrap();
    assert_eq!(r.status, NrtStatus::Timeout);
    assert_eq!(r.ticks, 1_000_000);
    let e = r.result().unwrap_err();
    assert_eq!(e.status(), NrtStatus::Timeout);
    assert!(
        e.message()
            .contains("ScalarE pc 0 waits for semaphore 0 >= 1"),
        "{e}"
    );
    check_counters(&r);
    assert_eq!(r.engine(EngineId::Scalar).stall_semaphore, 1_000_000);
    // A long but finite program stopped by a small budget.
    let p = kernels_big();
    let lp = dev.load(1, p).unwrap();
    let r = dev
        .execute(
            &lp,
            &ExecOptions {
                max_ticks: 500,
                ..ExecOptions::default()
            },
        )
        .unwrap();
    assert_eq!(r.status, NrtStatus::Timeout);
    assert!(r.result().unwrap_err().message().contains("limit 500"));
    check_counters(&r);
}

/// Every limit in `ExecOptions` takes any value of its type: at the extremes an execution ends
/// with the status its limits give (no arithmetic overflow: the tests run with overflow
/// checks). A deadlocked program with no tick limit times out at `u64::MAX`, alone and in a
/// group of two cores (whose quantum meetings then run to the end of time); a limit of 0
/// stops a program before its first instruction; no events or hazards recorded when their
/// limits are 0, the hazard still failing the execution.
#[test]
fn extreme_limits_end_executions_cleanly() {
    let deadlock = || {
        let mut b = ProgramBuilder::new("deadlock");
        let s = b.sem().unwrap();
        b.wait(EngineId::Scalar, s, 1);
        b.build().unwrap()
    };
    let dev = Device::new(Instance::Trn1);
    let endless = ExecOptions {
        max_ticks: u64::MAX,
        dma_trigger_latency_ticks: Some(u64::MAX),
        ..ExecOptions::default()
    };
    let lp = dev.load(0, deadlock()).unwrap();
    let r = dev.execute(&lp, &endless).unwrap();
    assert_eq!((r.status, r.ticks), (NrtStatus::Timeout, u64::MAX));
    assert_eq!(r.engine(EngineId::Scalar).stall_semaphore, u64::MAX);
    check_counters(&r);
    let lp1 = dev.load(1, deadlock()).unwrap();
    let rs = dev
        .execute_group(&[(&lp, &[]), (&lp1, &[])], &endless)
        .unwrap();
    for r in &rs {
        assert_eq!((r.status, r.ticks), (NrtStatus::Timeout, u64::MAX));
        check_counters(r);
    }

    let big = dev.load(0, kernels_big()).unwrap();
    let zero = ExecOptions {
        max_ticks: 0,
        ..ExecOptions::default()
    };
    let r = dev.execute(&big, &zero).unwrap();
    assert_eq!((r.status, r.ticks), (NrtStatus::Timeout, 0));
    assert!(r.result().unwrap_err().message().contains("limit 0"));
    let unlimited = ExecOptions {
        max_ticks: u64::MAX,
        ..ExecOptions::default()
    };
    let r = dev.execute(&big, &unlimited).unwrap();
    r.result().unwrap();
    check_counters(&r);

    let silent = ExecOptions {
        max_events: 0,
        max_hazards: 0,
        recheck_hazards: true,
        ..ExecOptions::default()
    };
    let r = dev.execute(&big, &silent).unwrap();
    r.result().unwrap();
    assert!(r.events.is_empty() && r.events_truncated);
    let racy = dev.load(0, pipeline(6, Some(3))).unwrap();
    let r = dev.execute(&racy, &silent).unwrap();
    assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
    assert!(r.hazards.is_empty());
    assert_eq!(
        r.result().unwrap_err().status(),
        NrtStatus::ExecCompletedWithErr
    );
}

fn kernels_big() -> Program {
    nrt_sim::engine::kernels::elementwise(
        nrt_sim::engine::kernels::Elementwise::Add,
        256,
        256,
        DType::F32,
    )
    .unwrap()
}

#[test]
fn semaphore_equality_and_set() {
    let mut b = ProgramBuilder::new("sems");
    let s = b.sem().unwrap();
    b.sem_init(s, 5);
    b.push(EngineId::Sync, Instr::SemSet { sem: s, value: 9 });
    b.push(
        EngineId::Vector,
        Instr::SemWait {
            sem: s,
            cmp: nrt_sim::engine::SemCmp::Eq,
            value: 9,
        },
    );
    b.push(EngineId::Vector, Instr::Notify { payload: 77 });
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    assert_eq!(r.notifications.len(), 1);
    assert_eq!(r.notifications[0].payload, 77);
    assert_eq!(r.notifications[0].engine, EngineId::Vector);
    assert_eq!(r.semaphores[usize::from(s)], 9);
    let _ = Space::Sbuf;
}
