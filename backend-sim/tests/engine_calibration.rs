//! Calibration against figures derived from the published cost rules (±10 %), port conflicts,
//! the TensorE → VectorE pipeline and its hazard, timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, AluOp, Bias, DType, Device, DmaDescriptor, DmaEndpoint, EngineId,
    EventKind, ExecOptions, ExecReport, Instr, Program, ProgramBuilder, Space, TIMING_MODEL, Track,
    timing,
};

const TICK_NS: f64 = 1.0 / 1.4;

fn within(got: f64, want: f64, what: &str) {
    let r = got / want;
    assert!(
        (0.9..=1.1).contains(&r),
        "{what}: got {got:.1}, expected {want:.1} (ratio {r:.3})"
    );
}

fn exec(p: Program, inputs: &[(&str, &[u8])]) -> ExecReport {
    let mut dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (n, b) in inputs {
        dev.write_tensor(&lp, n, b).unwrap();
    }
    dev.execute(&lp, &ExecOptions::default()).unwrap()
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

#[test]
fn dma_32k_single_engine_is_1416ns() {
    let mut b = ProgramBuilder::new("dma32k");
    let t = b.input("x", DType::Bf16, &[16384]);
    let s = b.sem().unwrap();
    let d = DmaDescriptor {
        src: DmaEndpoint::Hbm {
            tensor: t,
            offset: 0,
        },
        dst: DmaEndpoint::Sbuf {
            partition: 0,
            offset: 0,
        },
        len: 32768,
    };
    b.dma_on(EngineId::Sync, 0, 0, &[d], s, 1);
    b.wait(EngineId::Sync, s, 1);
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    let transfer = r
        .events
        .iter()
        .find(|e| matches!(e.kind, EventKind::Transfer { .. }))
        .unwrap();
    // Published example: 32 KiB on one engine takes 1,416 ns.
    within(
        transfer.dur as f64 * TICK_NS,
        1416.0,
        "32 KiB single-engine transfer (ns)",
    );
    assert_eq!(r.timing_model, TIMING_MODEL);
    assert!(!r.validated_against_hw);
    check_counters(&r);
}

#[test]
fn dma_1mib_over_16_engines() {
    // 128 x 4096 bf16 (1 MiB): one 8 KiB descriptor per partition, 8 per engine.
    let mut b = ProgramBuilder::new("dma1m");
    let t = b.input("x", DType::Bf16, &[128, 4096]);
    let s = b.sem().unwrap();
    let descs: Vec<DmaDescriptor> = (0..128u32)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: t,
                offset: u64::from(p) * 8192,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p as u8,
                offset: 0,
            },
            len: 8192,
        })
        .collect();
    let n = b.dma_spread(EngineId::Sync, &descs, 0, s, 16);
    assert_eq!(n, 16);
    b.wait(EngineId::Sync, s, n);
    let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
    let mut dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, b.build().unwrap()).unwrap();
    dev.write_tensor(&lp, "x", &data).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    check_counters(&r);
    // Derived: 16 engines x 27.2 GB/s = 435 GB/s exceeds the core's share of HBM (820 / 2 =
    // 410 GB/s), so each engine moves 410/16 GB/s; per engine: transfer latency + 8 x
    // (descriptor overhead + 8 KiB at that rate).
    let per_engine_bps = (27.2e9f64).min(410e9 / 16.0);
    let data_ns = 8192.0 / per_engine_bps * 1e9;
    let want_ns = (timing::DMA_TRANSFER_LATENCY_TICKS as f64
        + 8.0 * timing::DMA_DESCRIPTOR_OVERHEAD_TICKS as f64)
        * TICK_NS
        + 8.0 * data_ns;
    within(r.nanoseconds(), want_ns, "1 MiB over 16 engines (ns)");
    // And against the bare bandwidth figure: 1 MiB / 410 GB/s = 2.56 us of data movement.
    assert!(r.nanoseconds() > 2557.0);
    let bw: u64 = r.dma_engines.iter().map(|c| c.stall_bandwidth).sum();
    assert!(bw > 0, "HBM share should throttle 16 engines");
    let bytes: u64 = r.dma_engines.iter().map(|c| c.bytes).sum();
    assert_eq!(bytes, 1 << 20);
    // The data arrived: partition p holds bytes [p*8192, (p+1)*8192) of the tensor.
    let sbuf = dev.sbuf(0).unwrap();
    for p in [0usize, 1, 77, 127] {
        assert_eq!(sbuf.read(p, 0, 8192), &data[p * 8192..(p + 1) * 8192]);
    }
    println!(
        "1 MiB / 16 engines: {:.0} ns (derived {want_ns:.0} ns)",
        r.nanoseconds()
    );
}

#[test]
fn matmul_tile_after_load_stationary_is_256_ticks() {
    let mut b = ProgramBuilder::new("mm");
    b.push(
        EngineId::Tensor,
        Instr::LoadStationary {
            src: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 128),
        },
    );
    b.push(
        EngineId::Tensor,
        Instr::MultiplyMoving {
            moving: AccessPattern::sbuf(DType::Bf16, 0, 128, 1024, 512),
            dst: AccessPattern::psum(DType::F32, 0, 128, 0, 512),
            accumulate: false,
        },
    );
    let r = exec(b.build().unwrap(), &[]);
    r.result().unwrap();
    let (_, mm) = slices(&r, EngineId::Tensor, "MultiplyMoving")
        .next()
        .unwrap();
    // max(512, 64) PE cycles at 2.8 GHz = 256 ticks.
    within(mm as f64, 256.0, "MultiplyMoving ticks");
    let (_, ls) = slices(&r, EngineId::Tensor, "LoadStationary")
        .next()
        .unwrap();
    assert!(ls < mm / 4 + 2, "fast LoadStationary: {ls}");
    // fp32 costs four times as much.
    let mut b = ProgramBuilder::new("mm32");
    b.push(
        EngineId::Tensor,
        Instr::LoadStationary {
            src: AccessPattern::sbuf(DType::F32, 0, 128, 0, 128),
        },
    );
    b.push(
        EngineId::Tensor,
        Instr::MultiplyMoving {
            moving: AccessPattern::sbuf(DType::F32, 0, 128, 1024, 512),
            dst: AccessPattern::psum(DType::F32, 0, 128, 0, 512),
            accumulate: false,
        },
    );
    let r = exec(b.build().unwrap(), &[]);
    let (_, mm32) = slices(&r, EngineId::Tensor, "MultiplyMoving")
        .next()
        .unwrap();
    assert_eq!(mm32, 4 * mm);
}

fn exp_on(engine: EngineId, src: AccessPattern) -> Instr {
    let _ = engine;
    Instr::Activation {
        func: ActFunc::Exp,
        src,
        out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
        scale: 1.0,
        bias: Bias::Imm(0.0),
    }
}

#[test]
fn exp_on_scalar_engine_is_n_plus_60_cycles() {
    let mut b = ProgramBuilder::new("exp");
    b.push(
        EngineId::Scalar,
        exp_on(
            EngineId::Scalar,
            AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
        ),
    );
    let r = exec(b.build().unwrap(), &[]);
    let (_, d) = slices(&r, EngineId::Scalar, "Activation").next().unwrap();
    // ScalarE runs at 1.4 GHz: 512 + 60 cycles = 572 ticks.
    within(d as f64, 572.0, "exp [128,512] on ScalarE (ticks)");
    // The same instruction on VectorE (1.12 GHz) takes 1.25x the ticks.
    let mut b = ProgramBuilder::new("exp_v");
    b.push(
        EngineId::Vector,
        exp_on(
            EngineId::Vector,
            AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
        ),
    );
    let r = exec(b.build().unwrap(), &[]);
    let (_, dv) = slices(&r, EngineId::Vector, "Activation").next().unwrap();
    within(dv as f64, 572.0 * 1.25, "exp [128,512] on VectorE (ticks)");
}

#[test]
fn psum_port_conflict_serialises_vector_and_scalar() {
    // ScalarE exp reading PSUM and VectorE copying out of another PSUM bank: they cannot
    // access PSUM in parallel, so one waits for the other.
    let mut b = ProgramBuilder::new("psum_conflict");
    b.push(
        EngineId::Scalar,
        exp_on(
            EngineId::Scalar,
            AccessPattern::psum(DType::F32, 0, 128, 0, 512),
        ),
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
        exp_on(
            EngineId::Scalar,
            AccessPattern::psum(DType::F32, 0, 128, 0, 512),
        ),
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
    let mut dev = Device::new(Instance::Trn1);
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
    let mut dev = Device::new(Instance::Trn1);
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
