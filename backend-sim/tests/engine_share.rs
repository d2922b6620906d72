//! The cores of one device executing at the same time and sharing its HBM bandwidth
//! (`nrt_sim::engine::share`): a core alone runs at its DMA engines' peak; two cores in lock
//! step (the subgraphs of one model) are held to the device's bandwidth, deterministically;
//! executions from different host threads on different cores run concurrently and correctly.
//!
//! Expected figures come from the v2 architecture guide (A2,
//! `nki/guides/architecture/trainium_inferentia2_arch.rst` @ 81ce03ae: 820 GB/s of HBM per
//! two-core inf2/trn1 device) and the DMA overview (DO, `nki-dma-overview.rst`: 27.2 GB/s per
//! DMA engine), never from the simulator's constants.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{check_counters, row_loads};
use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{DType, Device, EngineId, ExecOptions, Program, ProgramBuilder};

/// 1 MiB (128 × 4096 bf16) from HBM into SBUF: one 8 KiB descriptor per partition, spread
/// over all 16 DMA engines, `rounds` times.
fn load_1mib(rounds: u32) -> Program {
    let mut b = ProgramBuilder::new("dma1m");
    let t = b.input("x", DType::Bf16, &[128, 4096]);
    let s = b.sem().unwrap();
    let descs = row_loads(t, 128, 8192);
    let mut total = 0;
    for _ in 0..rounds {
        let n = b.dma_spread(EngineId::Sync, &descs, 0, s, 16);
        assert_eq!(n, 16);
        total += n;
    }
    b.wait(EngineId::Sync, s, total);
    b.build().unwrap()
}

fn pattern(seed: u32) -> Vec<u8> {
    (0..(1u32 << 20))
        .map(|i| (i.wrapping_mul(seed) % 251) as u8)
        .collect()
}

/// Alone on its device, a trn1 core's 16 engines are held by their own peak (16 × 27.2 =
/// 435.2 GB/s, below the device's 820): 1 MiB takes at least 2,409 ns, with no bandwidth stall,
/// and every byte arrives where its descriptor says.
#[test]
fn a_core_alone_runs_its_engines_at_peak() {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, load_1mib(1)).unwrap();
    let data = pattern(7);
    dev.write_tensor(&lp, "x", &data).unwrap();
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    check_counters(&r);
    let floor = (1u64 << 20) as f64 / 435.2;
    assert!(r.nanoseconds() > floor, "{} ns", r.nanoseconds());
    assert!(r.nanoseconds() < floor * 1.25, "{} ns", r.nanoseconds());
    assert_eq!(r.bandwidth_stall(), 0);
    assert_eq!(r.peak_peer_hbm_engines, 0);
    assert_eq!(r.dma_engines.iter().map(|c| c.bytes).sum::<u64>(), 1 << 20);
    let sbuf = dev.sbuf(0).unwrap();
    for p in [0usize, 1, 77, 127] {
        assert_eq!(sbuf.read(p, 0, 8192), &data[p * 8192..(p + 1) * 8192]);
    }
}

/// Both cores of a trn1 device loading at once ask for 2 × 435.2 GB/s of its 820: in lock step
/// each is held to half (410 GB/s, so 4 MiB takes at least 10,230 ns), reports the bandwidth
/// stall and the other core's 16 engines, and the figures are identical run after run.
#[test]
fn two_cores_in_lock_step_share_the_device_bandwidth_deterministically() {
    let dev = Device::new(Instance::Trn1);
    let a = dev.load(0, load_1mib(4)).unwrap();
    let b = dev.load(1, load_1mib(4)).unwrap();
    let (da, db) = (pattern(7), pattern(13));
    dev.write_tensor(&a, "x", &da).unwrap();
    dev.write_tensor(&b, "x", &db).unwrap();
    let alone = dev.execute(&a, &ExecOptions::default()).unwrap();
    let run = || {
        dev.execute_group(&[(&a, &[]), (&b, &[])], &ExecOptions::default())
            .unwrap()
    };
    let first = run();
    assert_eq!(first.len(), 2);
    let floor = (4u64 << 20) as f64 / 410.0;
    for r in &first {
        r.result().unwrap();
        check_counters(r);
        assert!(r.nanoseconds() > floor, "{} ns", r.nanoseconds());
        assert!(
            r.ticks > alone.ticks,
            "{} vs alone {}",
            r.ticks,
            alone.ticks
        );
        assert!(r.bandwidth_stall() > 0);
        assert_eq!(r.peak_peer_hbm_engines, 16);
    }
    for _ in 0..3 {
        let again = run();
        for (x, y) in first.iter().zip(&again) {
            assert_eq!(x.ticks, y.ticks);
            assert_eq!(x.dma_engines, y.dma_engines);
            assert_eq!(x.engines, y.engines);
        }
    }
    for (core, data) in [(0, &da), (1, &db)] {
        let sbuf = dev.sbuf(core).unwrap();
        for p in [0usize, 64, 127] {
            assert_eq!(sbuf.read(p, 0, 8192), &data[p * 8192..(p + 1) * 8192]);
        }
    }
}

/// A group whose members differ in length: the shorter one leaves, and the longer runs on
/// at its engines' peak (it is slower than alone only while both load).
#[test]
fn a_member_that_finishes_stops_holding_the_other() {
    let dev = Device::new(Instance::Trn1);
    let long = dev.load(0, load_1mib(8)).unwrap();
    let short = dev.load(1, load_1mib(1)).unwrap();
    let alone = dev.execute(&long, &ExecOptions::default()).unwrap();
    let rs = dev
        .execute_group(&[(&long, &[]), (&short, &[])], &ExecOptions::default())
        .unwrap();
    let shared = (rs[0].ticks - alone.ticks) as f64 / alone.ticks as f64;
    assert!(rs[0].ticks > alone.ticks);
    assert!(shared < 0.1, "the long member lost {:.1} %", shared * 100.0);
}

/// Two programs on one core cannot run as a group; a group of one runs as alone.
#[test]
fn a_group_takes_each_core_once() {
    let dev = Device::new(Instance::Trn1);
    let a = dev.load(0, load_1mib(1)).unwrap();
    let b = dev.load(0, load_1mib(1)).unwrap();
    let e = dev
        .execute_group(&[(&a, &[]), (&b, &[])], &ExecOptions::default())
        .unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    let one = dev
        .execute_group(&[(&a, &[])], &ExecOptions::default())
        .unwrap();
    let alone = dev.execute(&a, &ExecOptions::default()).unwrap();
    assert_eq!(one[0].ticks, alone.ticks);
    assert!(
        dev.execute_group(&[], &ExecOptions::default())
            .unwrap()
            .is_empty()
    );
}

/// Executions started from two host threads on the two cores of a device run at the same time
/// (no device lock is held for an execution) and each moves its own bytes.
#[test]
fn executions_from_two_threads_on_two_cores_are_correct() {
    let dev = Device::new(Instance::Trn1);
    let progs = [
        dev.load(0, load_1mib(2)).unwrap(),
        dev.load(1, load_1mib(2)).unwrap(),
    ];
    let datas = [pattern(3), pattern(5)];
    for (lp, d) in progs.iter().zip(&datas) {
        dev.write_tensor(lp, "x", d).unwrap();
    }
    std::thread::scope(|s| {
        for (core, (lp, data)) in progs.iter().zip(&datas).enumerate() {
            let dev = &dev;
            s.spawn(move || {
                for _ in 0..20 {
                    let r = dev.execute(lp, &ExecOptions::default()).unwrap();
                    r.result().unwrap();
                    let sbuf = dev.sbuf(core as u32).unwrap();
                    for p in [0usize, 100] {
                        assert_eq!(sbuf.read(p, 0, 8192), &data[p * 8192..(p + 1) * 8192]);
                    }
                }
            });
        }
    });
}

/// A trn2 device's 3 TB/s (A3) covers all its 8 × 16 engines at 23 B/ns (DB: 2.94 TB/s): its
/// eight cores loading together are never held below their engines' peak, and run as alone.
/// The same device given 1 TB/s for a study (`Device::with_hbm_mbps`; not a published figure)
/// holds each of them to an eighth of it, 125 GB/s, once they have met: 2 MiB take at least
/// 16,777 ns less the first quantum.
#[test]
fn trn2_cores_never_hold_each_other_back() {
    for (hbm, binds) in [(None, false), (Some(1_000_000), true)] {
        let dev = match hbm {
            None => Device::new(Instance::Trn2),
            Some(mbps) => Device::with_hbm_mbps(Instance::Trn2, mbps).unwrap(),
        };
        let lps: Vec<_> = (0..8).map(|c| dev.load(c, load_1mib(2)).unwrap()).collect();
        let alone = dev.execute(&lps[0], &ExecOptions::default()).unwrap();
        let group: Vec<_> = lps.iter().map(|lp| (lp, &[][..])).collect();
        let rs = dev.execute_group(&group, &ExecOptions::default()).unwrap();
        assert_eq!(rs.len(), 8);
        for r in &rs {
            r.result().unwrap();
            check_counters(r);
            if binds {
                // Less the first quantum (1,024 ticks = 731 ns), before the cores first meet.
                assert!(r.nanoseconds() > (2u64 << 20) as f64 / 125.0 - 731.5);
                assert!(r.bandwidth_stall() > 0);
                assert_eq!(r.peak_peer_hbm_engines, 7 * 16);
            } else {
                assert_eq!(r.ticks, alone.ticks);
                assert_eq!(r.bandwidth_stall(), 0);
                assert_eq!(r.peak_peer_hbm_engines, 0);
            }
        }
    }
}

/// A study's figures must keep the arithmetic exact and finite: rates in whole 200 MB/s steps
/// from 200 MB/s to 100 TB/s, clocks 1–100,000 MHz, an SBUF partition no larger than the
/// largest generation's, costs up to 10^9 ticks; anything else is refused with `NRT_INVALID`.
#[test]
fn a_study_bandwidth_is_checked() {
    use nrt_sim::engine::NEURONCORE_V2;
    let bad_specs = [
        nrt_sim::engine::CoreSpec {
            dma_engine_mbps: 17_100,
            ..NEURONCORE_V2
        },
        nrt_sim::engine::CoreSpec {
            vector_mhz: 0,
            ..NEURONCORE_V2
        },
        nrt_sim::engine::CoreSpec {
            sbuf_partition_bytes: 256 * 1024,
            ..NEURONCORE_V2
        },
        nrt_sim::engine::CoreSpec {
            dma_queue_interval_ticks: u64::MAX,
            ..NEURONCORE_V2
        },
    ];
    for spec in bad_specs {
        let e = Device::with_core_spec(Instance::Trn1, spec).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid, "{spec:?}");
    }
    for bad in [0, 100, 400_100, 100_000_200, u64::MAX] {
        let e = Device::with_hbm_mbps(Instance::Trn1, bad).unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid, "{bad}");
        assert!(e.to_string().contains("HBM bandwidth"), "{e}");
    }
    let dev = Device::with_hbm_mbps(Instance::Trn2, 200).unwrap();
    assert_eq!(dev.core_spec().hbm_mbps_per_device, 200);
    assert_eq!(dev.core_spec().dma_engine_mbps, 23_000);
    assert_eq!(
        Device::new(Instance::Trn1).core_spec().hbm_mbps_per_device,
        820_000
    );
}
