//! Runs (a transfer's descriptors moved back to back as one event, `exec/dma_run.rs`) against
//! the schedule without them: the same reports, counters, events and outputs, on DMA-bound
//! programs, kernels, transfers cut short by other queues of their engine, coupling to other
//! cores and timeouts, on both generations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::exec::test_hooks::{COUPLING, CUTS, EXTRA_EVENTS, NO_RUNS, RUNS};
use super::whole_tests::{dma_program, loaded, outputs};
use crate::Instance;
use crate::engine::isa::{DmaDescriptor, DmaEndpoint};
use crate::engine::{
    DType, Device, EngineId, ExecOptions, ExecReport, Program, ProgramBuilder, kernels,
};

/// An execution of `program` with or without runs, coupling and uncoupling with other
/// cores' `others` HBM engines every `every` ticks (0: never): a repeat (the second at the
/// same addresses: the first proved it free of hazards, so the second skips the check and
/// runs copy at their ends) or, when `first`, a first execution (hazards checked: runs replay
/// their boundaries in order). Returns its report, every output's bytes and the runs planned
/// in it.
fn execution(
    instance: Instance,
    program: &Program,
    runs: bool,
    opts: &ExecOptions,
    every: u64,
    others: u64,
    first: bool,
) -> (ExecReport, Vec<Vec<u8>>, u64) {
    let (dev, lp) = loaded(instance, program, 7, 3);
    if !first {
        let proof = dev
            .execute(
                &lp,
                &ExecOptions {
                    max_ticks: ExecOptions::default().max_ticks,
                    ..*opts
                },
            )
            .unwrap();
        assert!(
            proof.result().is_ok(),
            "{}: {:?}",
            program.name,
            proof.error
        );
        assert!(proof.hazards_checked);
    }
    NO_RUNS.with(|c| c.set(!runs));
    RUNS.with(|c| c.set(0));
    COUPLING.with(|c| c.set((every, every, others, false)));
    let report = dev.execute(&lp, opts).unwrap();
    assert_eq!(report.hazards_checked, first, "{}", program.name);
    let planned = RUNS.with(std::cell::Cell::get);
    NO_RUNS.with(|c| c.set(false));
    COUPLING.with(|c| c.set((0, 0, 0, false)));
    let outputs = outputs(&dev, &lp, program);
    (report, outputs, planned)
}

/// Events recorded (instructions, waits, whole transfers), descriptor events not: the
/// options under which runs happen and the report still shows the schedule in detail.
fn opts() -> ExecOptions {
    ExecOptions {
        record_events: true,
        record_descriptors: false,
        max_events: 1 << 22,
        ..ExecOptions::default()
    }
}

/// Asserts that `program` gives the same repeat and first execution with runs as without,
/// and that runs happened in them when `expect_runs`; coupled every `every` ticks (0: never)
/// with 24 other engines. Returns the repeat's report.
fn same_with_and_without_runs(
    instance: Instance,
    program: &Program,
    opts: &ExecOptions,
    every: u64,
    expect_runs: bool,
) -> ExecReport {
    same_beside(instance, program, opts, every, 24, expect_runs, BOTH)
}

/// A repeat, then a first execution (hazards checked).
const BOTH: &[bool] = &[false, true];

/// Asserts that `program`'s executions — for each of `firsts`, a first execution (hazards
/// checked) or a repeat — give the same report and outputs with runs as without, coupled
/// every `every` ticks (0: never) with `others` other engines; returns the report of the
/// first listed.
fn same_beside(
    instance: Instance,
    program: &Program,
    opts: &ExecOptions,
    every: u64,
    others: u64,
    expect_runs: bool,
    firsts: &[bool],
) -> ExecReport {
    let mut kept = None;
    for &first in firsts {
        let (reference, reference_out, none) =
            execution(instance, program, false, opts, every, others, first);
        let (r, out, planned) = execution(instance, program, true, opts, every, others, first);
        let name = &program.name;
        assert_eq!(none, 0, "{instance:?} {name}: runs planned with runs off");
        if expect_runs {
            assert!(planned > 0, "{instance:?} {name}: no run planned");
        }
        assert_eq!(
            r, reference,
            "{instance:?} {name} (every {every}, first {first}): reports differ"
        );
        assert_eq!(
            out, reference_out,
            "{instance:?} {name} (first {first}): outputs differ"
        );
        kept.get_or_insert(r);
    }
    kept.expect("at least one execution")
}

#[test]
fn runs_change_no_tick_counter_event_or_byte() {
    let dma = [
        dma_program(3, 1, 16),
        dma_program(4, 16, 128),
        dma_program(2, 5, 37),
    ];
    let other = [
        kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
        kernels::elementwise(kernels::Elementwise::Add, 130, 700, DType::F32).unwrap(),
        // Loops: transfers whose descriptors dynamic terms shift.
        kernels::matmul_looped(300, 700, 520, DType::Bf16, DType::F32).unwrap(),
    ];
    let quiet = ExecOptions {
        record_events: false,
        ..opts()
    };
    for instance in [Instance::Trn1, Instance::Trn2] {
        for p in &dma {
            let r = same_with_and_without_runs(instance, p, &opts(), 0, true);
            assert!(r.result().is_ok() && !r.events.is_empty());
            same_with_and_without_runs(instance, p, &quiet, 0, true);
        }
        for p in &other {
            same_with_and_without_runs(instance, p, &opts(), 0, false);
        }
    }
}

#[test]
fn no_run_while_descriptors_are_recorded() {
    let p = dma_program(2, 16, 128);
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let recorded = ExecOptions {
        record_descriptors: true,
        ..opts()
    };
    for (o, checked, runs) in [
        // The first execution checks hazards: its runs replay their boundaries.
        (opts(), true, true),
        (recorded, false, false),
        (
            ExecOptions {
                recheck_hazards: true,
                ..recorded
            },
            true,
            false,
        ),
        (
            ExecOptions {
                recheck_hazards: true,
                ..opts()
            },
            true,
            true,
        ),
        (opts(), false, true),
    ] {
        RUNS.with(|c| c.set(0));
        let r = dev.execute(&lp, &o).unwrap();
        assert!(r.result().is_ok());
        assert_eq!(r.hazards_checked, checked);
        assert_eq!(RUNS.with(std::cell::Cell::get) > 0, runs);
    }
}

/// Engine 0 moves a long transfer on queue 0 (short descriptors of uneven lengths, HBM →
/// SBUF then SBUF → HBM) while the Scalar engine queues one-descriptor transfers on the
/// engine's queues 1–3 after delays of 0–96 ticks, each waited for: every such transfer cuts
/// the run in flight at a tick that sweeps the descriptors' boundaries.
fn cut_program(triggers: u32) -> Program {
    let mut b = ProgramBuilder::new("run_cuts");
    let n = 240u32;
    let x = b.input("x", DType::Bf16, &[u64::from(n) * 256]);
    let y = b.output("y", DType::Bf16, &[u64::from(n) * 256]);
    let (s, s2, delay) = (b.sem().unwrap(), b.sem().unwrap(), b.sem().unwrap());
    let sbuf = |i: u32| DmaEndpoint::Sbuf {
        partition: (i % 128) as u8,
        offset: (i / 128) * 512,
    };
    let len = |i: u32| 64 * (1 + i % 5) + 8 * (i % 3);
    let load: Vec<DmaDescriptor> = (0..n)
        .map(|i| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: x,
                offset: u64::from(i) * 512,
            },
            dst: sbuf(i),
            len: len(i),
        })
        .collect();
    let store: Vec<DmaDescriptor> = (0..n)
        .map(|i| DmaDescriptor {
            src: sbuf(i),
            dst: DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(i) * 512,
            },
            len: len(i),
        })
        .collect();
    b.dma_on(EngineId::Sync, 0, 0, &load, s, 1);
    b.wait(EngineId::Sync, s, 1);
    b.dma_on(EngineId::Sync, 0, 0, &store, s, 1);
    b.wait(EngineId::Sync, s, 2);
    for k in 0..triggers {
        for _ in 0..(k * 13) % 97 {
            b.signal(EngineId::Scalar, delay, 1);
        }
        // SBUF → SBUF far from the long transfer's bytes: no hazard.
        let d = DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: (k % 128) as u8,
                offset: 65536,
            },
            dst: DmaEndpoint::Sbuf {
                partition: ((k + 1) % 128) as u8,
                offset: 98304,
            },
            len: 32 + 16 * (k % 4),
        };
        b.dma_on(EngineId::Scalar, 0, 1 + (k % 3) as u8, &[d], s2, 1);
        b.wait(EngineId::Scalar, s2, k + 1);
    }
    b.build().unwrap()
}

#[test]
fn a_transfer_queued_on_another_queue_cuts_the_run_exactly() {
    let p = cut_program(300);
    CUTS.with(|c| c.set(0));
    for instance in [Instance::Trn1, Instance::Trn2] {
        for latency in [None, Some(3), Some(150)] {
            let o = ExecOptions {
                dma_trigger_latency_ticks: latency,
                ..opts()
            };
            same_with_and_without_runs(instance, &p, &o, 0, true);
        }
    }
    assert!(CUTS.with(std::cell::Cell::get) > 0, "no run was cut");
}

#[test]
fn coupling_mid_run_ends_it_exactly() {
    // While coupled, other cores' 24 engines share HBM: HBM descriptors run as two phases
    // and a run with HBM members ends with the one in flight; uncoupled, runs resume. Beside
    // 14 other engines there is room for all of this core's: runs go on while coupled.
    let programs = [dma_program(3, 16, 128), cut_program(60)];
    for p in &programs {
        for every in [1, 7, 97, 1013] {
            for others in [24, 14] {
                same_beside(Instance::Trn1, p, &opts(), every, others, true, BOTH);
            }
        }
    }
}

#[test]
fn a_timeout_mid_run_finishes_what_ended_by_then() {
    let p = cut_program(40);
    let (full, _, _) = execution(Instance::Trn1, &p, false, &opts(), 0, 0, false);
    for frac in [0.1, 0.37, 0.5, 0.83] {
        let limit = (full.ticks as f64 * frac) as u64 + 1;
        let o = ExecOptions {
            max_ticks: limit,
            ..opts()
        };
        let r = same_with_and_without_runs(Instance::Trn1, &p, &o, 0, true);
        assert_eq!(r.ticks, limit);
        assert_eq!(r.status, nrt_core::NrtStatus::Timeout);
        let moved: u64 = r.dma_engines.iter().map(|c| c.bytes).sum();
        assert!(moved > 0);
    }
}

/// A first execution of `program` (hazards checked; every event recorded, or with
/// `descriptors` off every event but the descriptors', so that runs replay their boundaries)
/// with the executor woken every `every` ticks besides its own events (0: never): its report
/// and outputs.
fn with_extra_events(
    instance: Instance,
    program: &Program,
    every: u64,
    descriptors: bool,
) -> (ExecReport, Vec<Vec<u8>>) {
    let (dev, lp) = loaded(instance, program, 5, 1);
    EXTRA_EVENTS.with(|c| c.set(every));
    let report = dev.execute(
        &lp,
        &ExecOptions {
            max_events: 1 << 22,
            record_descriptors: descriptors,
            ..ExecOptions::default()
        },
    );
    EXTRA_EVENTS.with(|c| c.set(0));
    let outputs = outputs(&dev, &lp, program);
    (report.unwrap(), outputs)
}

#[test]
fn events_added_at_any_tick_change_nothing() {
    // The schedule is a function of the program alone, not of which ticks the executor
    // happens to stop at: waking it at every tick (a stepper) or every 13 gives the same
    // report. This is what lets whole descriptors and runs drop events. Without descriptor
    // events runs replay their boundaries, at the events' own ticks when every tick is one.
    let programs = [
        dma_program(2, 16, 128),
        dma_program(2, 5, 37),
        cut_program(40),
        kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
        kernels::matmul_looped(300, 700, 520, DType::Bf16, DType::F32).unwrap(),
        kernels::elementwise(kernels::Elementwise::Add, 130, 700, DType::F32).unwrap(),
        kernels::bias_activation(crate::engine::ActFunc::Relu, 200, 300, DType::F32).unwrap(),
        kernels::mlp(64, 256, 512, 128, DType::Bf16, crate::engine::ActFunc::Relu).unwrap(),
    ];
    for instance in [Instance::Trn1, Instance::Trn2] {
        for (p, descriptors) in programs.iter().flat_map(|p| [(p, true), (p, false)]) {
            let (reference, reference_out) = with_extra_events(instance, p, 0, descriptors);
            assert!(
                reference.result().is_ok(),
                "{}: {:?}",
                p.name,
                reference.error
            );
            for every in [1, 13] {
                let (r, out) = with_extra_events(instance, p, every, descriptors);
                assert_eq!(
                    r, reference,
                    "{instance:?} {} (every {every}): reports differ",
                    p.name
                );
                assert_eq!(
                    out, reference_out,
                    "{instance:?} {}: outputs differ",
                    p.name
                );
            }
        }
    }
}

/// A racy program: engines 0 and 1 load overlapping SBUF bytes from `x` as long transfers of
/// uneven descriptors (from SyncE and ScalarE, unordered: write-write races between two runs),
/// GpSimdE memsets some of those bytes at ticks that sweep the runs' boundaries (instructions
/// racing the runs), and
/// engine 2, triggered by VectorE without waiting, stores them to `y` one descriptor per
/// transfer (read-write races whose bytes show when each copy happened, at events of their
/// own). `k` shifts lengths and delays.
fn racy_program(k: u32) -> Program {
    use crate::engine::isa::{AccessPattern, Instr};
    let mut b = ProgramBuilder::new("racy_runs");
    let n = 96u32;
    let x = b.input("x", DType::Bf16, &[u64::from(n) * 1024]);
    let y = b.output("y", DType::Bf16, &[u64::from(n) * 1024]);
    let (s0, s1, s2, delay) = (
        b.sem().unwrap(),
        b.sem().unwrap(),
        b.sem().unwrap(),
        b.sem().unwrap(),
    );
    let sbuf = |i: u32| DmaEndpoint::Sbuf {
        partition: (i % 32) as u8,
        offset: (i / 32) * 1024,
    };
    let len = |i: u32, m: u32| 128 + 64 * ((i * m + k) % 7);
    let load = |shift: u64, m: u32| -> Vec<DmaDescriptor> {
        (0..n)
            .map(|i| DmaDescriptor {
                src: DmaEndpoint::Hbm {
                    tensor: x,
                    offset: u64::from(i) * 2048 + shift,
                },
                dst: sbuf(i),
                len: len(i, m),
            })
            .collect()
    };
    b.dma_on(EngineId::Sync, 0, 0, &load(0, 3), s0, 1);
    for _ in 0..(k * 5) % 11 {
        b.signal(EngineId::Scalar, delay, 1);
    }
    b.dma_on(EngineId::Scalar, 1, 0, &load(512, 5), s1, 1);
    for _ in 0..3 + (k * 7) % 17 {
        b.signal(EngineId::GpSimd, delay, 1);
    }
    // Memsets at issue ticks that sweep the runs' boundaries.
    for j in 0..60u32 {
        for _ in 0..(j * (k + 1) + 3) % 4 {
            b.signal(EngineId::GpSimd, delay, 1);
        }
        b.push(
            EngineId::GpSimd,
            Instr::Memset {
                out: AccessPattern::sbuf(DType::Bf16, 0, 32, (j * 96) % 3072, 16 + (j % 5) as u16),
                bits: 0x3f80_0000 + j,
            },
        );
    }
    for _ in 0..(k * 3) % 13 {
        b.signal(EngineId::Vector, delay, 1);
    }
    let store: Vec<DmaDescriptor> = (0..n)
        .map(|i| DmaDescriptor {
            src: sbuf(i),
            dst: DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(i) * 1024,
            },
            len: 1024,
        })
        .collect();
    // One transfer per descriptor: each starts and ends at an event of its own, at ticks
    // that sweep the runs' boundaries.
    for d in &store {
        b.dma_on(EngineId::Vector, 2, 0, std::slice::from_ref(d), s2, 1);
    }
    b.wait(EngineId::Sync, s0, 1);
    b.wait(EngineId::Sync, s1, 1);
    b.wait(EngineId::Sync, s2, n);
    b.build().unwrap()
}

#[test]
fn a_racy_first_execution_reports_and_writes_the_same_with_runs() {
    // Hazards are checked at each descriptor's start in the order of the schedule without
    // runs, and copies happen at each descriptor's end in that order: the same hazards, in
    // the same order, naming the same accesses, and the same bytes.
    let o = ExecOptions {
        max_hazards: 1 << 16,
        ..opts()
    };
    let mut hazards = 0;
    for instance in [Instance::Trn1, Instance::Trn2] {
        for k in 0..12 {
            let p = racy_program(k);
            for latency in [None, Some(3)] {
                let o = ExecOptions {
                    dma_trigger_latency_ticks: latency,
                    ..o
                };
                let r = same_beside(instance, &p, &o, 0, 0, true, &[true]);
                assert_eq!(r.status, nrt_core::NrtStatus::ExecCompletedWithErr);
                hazards += r.hazards.len();
            }
        }
    }
    assert!(hazards > 1000, "{hazards} hazards");
}
