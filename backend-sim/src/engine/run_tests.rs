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

/// A repeat execution of `program` (the second at the same addresses: the first proved it
/// free of hazards, so the second skips the check and may run descriptors in runs), with or
/// without runs, coupling and uncoupling with other cores' `others` HBM engines every `every`
/// ticks (0: never). Returns its report, every output's bytes and the runs planned in it.
fn repeat(
    instance: Instance,
    program: &Program,
    runs: bool,
    opts: &ExecOptions,
    every: u64,
    others: u64,
) -> (ExecReport, Vec<Vec<u8>>, u64) {
    let (dev, lp) = loaded(instance, program, 7, 3);
    let first = dev
        .execute(
            &lp,
            &ExecOptions {
                max_ticks: ExecOptions::default().max_ticks,
                ..*opts
            },
        )
        .unwrap();
    assert!(
        first.result().is_ok(),
        "{}: {:?}",
        program.name,
        first.error
    );
    assert!(first.hazards_checked);
    NO_RUNS.with(|c| c.set(!runs));
    RUNS.with(|c| c.set(0));
    COUPLING.with(|c| c.set((every, every, others, false)));
    let report = dev.execute(&lp, opts).unwrap();
    assert!(!report.hazards_checked, "{}", program.name);
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

/// Asserts that `program` gives the same repeat execution with runs as without, and that
/// runs happened in it when `expect_runs`; coupled every `every` ticks (0: never) with 24
/// other engines.
fn same_with_and_without_runs(
    instance: Instance,
    program: &Program,
    opts: &ExecOptions,
    every: u64,
    expect_runs: bool,
) -> ExecReport {
    same_beside(instance, program, opts, every, 24, expect_runs)
}

/// [`same_with_and_without_runs`], coupled with `others` other engines.
fn same_beside(
    instance: Instance,
    program: &Program,
    opts: &ExecOptions,
    every: u64,
    others: u64,
    expect_runs: bool,
) -> ExecReport {
    let (reference, reference_out, none) = repeat(instance, program, false, opts, every, others);
    let (r, out, planned) = repeat(instance, program, true, opts, every, others);
    let name = &program.name;
    assert_eq!(none, 0, "{instance:?} {name}: runs planned with runs off");
    if expect_runs {
        assert!(planned > 0, "{instance:?} {name}: no run planned");
    }
    assert_eq!(
        r, reference,
        "{instance:?} {name} (every {every}): reports differ"
    );
    assert_eq!(out, reference_out, "{instance:?} {name}: outputs differ");
    r
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
fn no_run_while_hazards_are_checked_or_descriptors_recorded() {
    let p = dma_program(2, 16, 128);
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (o, checked) in [
        (opts(), true),
        (
            ExecOptions {
                recheck_hazards: true,
                ..opts()
            },
            true,
        ),
        (ExecOptions::default(), false),
    ] {
        RUNS.with(|c| c.set(0));
        let r = dev.execute(&lp, &o).unwrap();
        assert!(r.result().is_ok());
        assert_eq!(r.hazards_checked, checked);
        assert_eq!(RUNS.with(std::cell::Cell::get), 0);
    }
    // The same program, unchecked and without descriptor events: runs.
    RUNS.with(|c| c.set(0));
    dev.execute(&lp, &opts()).unwrap();
    assert!(RUNS.with(std::cell::Cell::get) > 0);
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
                same_beside(Instance::Trn1, p, &opts(), every, others, true);
            }
        }
    }
}

#[test]
fn a_timeout_mid_run_finishes_what_ended_by_then() {
    let p = cut_program(40);
    let (full, _, _) = repeat(Instance::Trn1, &p, false, &opts(), 0, 0);
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

/// A first execution of `program` (hazards checked, every event recorded) with the executor
/// woken every `every` ticks besides its own events (0: never): its report and outputs.
fn with_extra_events(
    instance: Instance,
    program: &Program,
    every: u64,
) -> (ExecReport, Vec<Vec<u8>>) {
    let (dev, lp) = loaded(instance, program, 5, 1);
    EXTRA_EVENTS.with(|c| c.set(every));
    let report = dev.execute(
        &lp,
        &ExecOptions {
            max_events: 1 << 22,
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
    // report. This is what lets whole descriptors and runs drop events.
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
        for p in &programs {
            let (reference, reference_out) = with_extra_events(instance, p, 0);
            assert!(
                reference.result().is_ok(),
                "{}: {:?}",
                p.name,
                reference.error
            );
            for every in [1, 13] {
                let (r, out) = with_extra_events(instance, p, every);
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
