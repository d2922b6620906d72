//! `Phase::Whole` (a descriptor whose data phase nothing can slow, run as one event) against
//! the two-phase schedule it replaces: the same reports, counters, events and outputs, on
//! DMA-bound programs, the kernel library's programs and both generations.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::exec::test_hooks::{COUPLING, ROOMY, SPLIT_PHASES};
use crate::Instance;
use crate::engine::isa::{DmaDescriptor, DmaEndpoint};
use crate::engine::program::TensorKind;
use crate::engine::{
    DType, Device, EngineId, ExecOptions, ExecReport, LoadedProgram, Program, ProgramBuilder,
    kernels,
};

/// `rounds` rounds of `per_round` 8 KiB descriptors over `engines` DMA engines: HBM → SBUF,
/// SBUF → SBUF and SBUF → HBM, the Sync engine waiting for each round.
pub(super) fn dma_program(rounds: u32, engines: usize, per_round: u32) -> Program {
    let mut b = ProgramBuilder::new("dma_mix");
    let x = b.input("x", DType::Bf16, &[u64::from(per_round) * 4096]);
    let y = b.output("y", DType::Bf16, &[u64::from(per_round) * 4096]);
    let s = b.sem().unwrap();
    let desc = |i: u32, src: DmaEndpoint, dst: DmaEndpoint| DmaDescriptor {
        src,
        dst,
        len: 8192 - 64 * (i % 4),
    };
    let sbuf = |i: u32, base: u32| DmaEndpoint::Sbuf {
        partition: (i % 128) as u8,
        offset: base + (i / 128) * 8192,
    };
    let load: Vec<DmaDescriptor> = (0..per_round)
        .map(|i| {
            let hbm = DmaEndpoint::Hbm {
                tensor: x,
                offset: u64::from(i) * 8192,
            };
            desc(i, hbm, sbuf(i, 0))
        })
        .collect();
    let copy: Vec<DmaDescriptor> = (0..per_round)
        .map(|i| desc(i, sbuf(i, 0), sbuf(i, 65536)))
        .collect();
    let store: Vec<DmaDescriptor> = (0..per_round)
        .map(|i| {
            let hbm = DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(i) * 8192,
            };
            desc(i, sbuf(i, 65536), hbm)
        })
        .collect();
    let mut total = 0;
    for _ in 0..rounds {
        for descs in [&load, &copy, &store] {
            total += b.dma_spread(EngineId::Sync, descs, 0, s, engines);
            b.wait(EngineId::Sync, s, total);
        }
    }
    b.build().unwrap()
}

/// `program` loaded on core 0 of a new `instance` device, its inputs filled with the bytes
/// `i * mul + add`.
pub(super) fn loaded(
    instance: Instance,
    program: &Program,
    mul: u64,
    add: u64,
) -> (Device, LoadedProgram) {
    let dev = Device::new(instance);
    let lp = load_filled(&dev, 0, program, mul, add);
    (dev, lp)
}

/// `program` loaded on core `core` of `dev`, its inputs filled with the bytes `i * mul + add`.
fn load_filled(dev: &Device, core: u32, program: &Program, mul: u64, add: u64) -> LoadedProgram {
    let lp = dev.load(core, program.clone()).unwrap();
    for t in program
        .tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Input)
    {
        let bytes = t.size_bytes().unwrap();
        let data: Vec<u8> = (0..bytes).map(|i| (i * mul + add) as u8).collect();
        dev.write_tensor(&lp, &t.name, &data).unwrap();
    }
    lp
}

/// Every output of `program` as loaded in `lp`.
pub(super) fn outputs(dev: &Device, lp: &LoadedProgram, program: &Program) -> Vec<Vec<u8>> {
    program
        .tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Output)
        .map(|t| dev.read_tensor(lp, &t.name).unwrap())
        .collect()
}

/// Runs `program` on `instance` with its inputs filled with a pattern: the report and every
/// output's bytes.
fn run(instance: Instance, program: &Program, split: bool) -> (ExecReport, Vec<Vec<u8>>) {
    run_splitting(instance, program, split, 0, 0)
}

/// [`run`], the core coupling with other cores' `others` HBM engines and uncoupling in turn
/// every `every` ticks (0: never).
fn run_splitting(
    instance: Instance,
    program: &Program,
    split: bool,
    every: u64,
    others: u64,
) -> (ExecReport, Vec<Vec<u8>>) {
    SPLIT_PHASES.with(|c| c.set(split));
    COUPLING.with(|c| c.set((every, every, others, false)));
    let (dev, lp) = loaded(instance, program, 7, 3);
    let opts = ExecOptions {
        record_events: true,
        record_descriptors: true,
        max_events: 1 << 22,
        ..ExecOptions::default()
    };
    let report = dev.execute(&lp, &opts).unwrap();
    let outputs = outputs(&dev, &lp, program);
    SPLIT_PHASES.with(|c| c.set(false));
    COUPLING.with(|c| c.set((0, 0, 0, false)));
    (report, outputs)
}

#[test]
fn whole_descriptors_change_no_tick_counter_event_or_byte() {
    let programs = [
        dma_program(3, 1, 16),
        dma_program(4, 16, 128),
        dma_program(2, 5, 37),
        kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
        kernels::elementwise(kernels::Elementwise::Add, 130, 700, DType::F32).unwrap(),
        kernels::matmul_looped(300, 700, 520, DType::Bf16, DType::F32).unwrap(),
    ];
    for instance in [Instance::Trn1, Instance::Trn2] {
        for p in &programs {
            let (split, split_out) = run(instance, p, true);
            let (whole, whole_out) = run(instance, p, false);
            assert!(
                split.result().is_ok(),
                "{instance:?} {}: {:?}",
                p.name,
                split.error
            );
            assert!(split.ticks > 0);
            assert_eq!(whole, split, "{instance:?} {}: reports differ", p.name);
            assert_eq!(
                whole_out, split_out,
                "{instance:?} {}: outputs differ",
                p.name
            );
        }
    }
}

#[test]
fn coupling_mid_flight_splits_whole_descriptors_exactly() {
    // Coupling at many ticks meets descriptors in their overhead phase and part-way through
    // their data (the periods are prime to the programs' overheads and data times); while
    // coupled, 24 other engines share HBM, so the rates of the split data phases change and
    // the units they have left count.
    // With 14 other engines there is room for all 16 of this core's beside them (820 GB/s
    // over 30 engines is above 27.2 GB/s each): the descriptors stay whole, nothing slows.
    let p = dma_program(3, 16, 128);
    let (alone, _) = run(Instance::Trn1, &p, true);
    for (others, slowed) in [(24, true), (14, false)] {
        for every in [1, 7, 97, 1013] {
            let (reference, reference_out) = run_splitting(Instance::Trn1, &p, true, every, others);
            ROOMY.with(|c| c.set(0));
            let (r, out) = run_splitting(Instance::Trn1, &p, false, every, others);
            let what = format!("{others} other engines, coupling every {every} ticks");
            assert!(reference.result().is_ok());
            assert_eq!(r, reference, "{what}: reports differ");
            assert_eq!(out, reference_out, "{what}: outputs differ");
            // Sharing slowed something (the comparison covered rate changes), or had room.
            assert_eq!(reference.ticks > alone.ticks, slowed, "{what}");
            assert_eq!(ROOMY.with(std::cell::Cell::get) > 0, !slowed, "{what}");
        }
    }
}

/// A group's reports (first execution, repeat), its outputs and a count of member 0's room.
type GroupRun = (Vec<ExecReport>, Vec<ExecReport>, Vec<Vec<Vec<u8>>>, u64);

/// Reports of a first execution and a repeat of `programs` as one lock-step group (member `i`
/// on core `i` of `dev()`), the outputs after both, and how often member 0 (the calling
/// thread) found room while coupled; `split`: every descriptor as two phases.
fn group_run(dev: &dyn Fn() -> Device, programs: &[Program], split: bool) -> GroupRun {
    let opts = ExecOptions {
        record_events: true,
        record_descriptors: false,
        max_events: 1 << 22,
        ..ExecOptions::default()
    };
    SPLIT_PHASES.with(|c| c.set(split));
    ROOMY.with(|c| c.set(0));
    let dev = dev();
    let lps: Vec<LoadedProgram> = programs
        .iter()
        .zip(0..)
        .map(|(p, core)| load_filled(&dev, core, p, 7, 3 + u64::from(core)))
        .collect();
    let group: Vec<(&LoadedProgram, &[(usize, u64)])> =
        lps.iter().map(|lp| (lp, &[][..])).collect();
    let first = dev.execute_group(&group, &opts).unwrap();
    let repeat = dev.execute_group(&group, &opts).unwrap();
    let outs: Vec<_> = lps
        .iter()
        .zip(programs)
        .map(|(lp, p)| outputs(&dev, lp, p))
        .collect();
    SPLIT_PHASES.with(|c| c.set(false));
    (first, repeat, outs, ROOMY.with(std::cell::Cell::get))
}

/// A lock-step group on trn1 (`Device::execute_group`: its cores meet at every quantum
/// boundary and share the device's 820 GB/s): member 0 moves HBM data on all 16 engines,
/// member 1 is a matmul that loads, computes and stores. While member 1's engines are idle,
/// or once it has finished, member 0 has room beside them and runs its HBM descriptors whole
/// (in the repeat also in runs), publishing its demand at boundaries; while both load they
/// share the bandwidth, and run as two phases. The first execution and the repeat give the
/// two-phase schedule's reports and outputs, member for member.
#[test]
fn a_group_runs_whole_where_the_others_leave_room() {
    let programs = [
        dma_program(12, 16, 128),
        kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
    ];
    let trn1 = || Device::new(Instance::Trn1);
    let run = |split: bool| group_run(&trn1, &programs, split);
    let (ref_first, ref_repeat, ref_outs, _) = run(true);
    let (first, repeat, outs, roomy) = run(false);
    for r in ref_first.iter().chain(&ref_repeat) {
        assert!(r.result().is_ok(), "{:?}", r.error);
    }
    assert!(ref_first.iter().all(|r| r.hazards_checked));
    assert!(ref_repeat.iter().all(|r| !r.hazards_checked));
    // Member 0 had no room at some boundary (more than 14 other engines), its demand slowed
    // member 1 (what member 0 publishes counts), and member 0 had room elsewhere.
    assert!(ref_first[0].peak_peer_hbm_engines > 14);
    assert!(ref_first[1].bandwidth_stall() > 0);
    assert!(roomy > 0, "member 0 never had room");
    assert_eq!(first, ref_first, "first execution: reports differ");
    assert_eq!(repeat, ref_repeat, "repeat: reports differ");
    assert_eq!(outs, ref_outs, "outputs differ");
}

/// More groups against the two-phase schedule, first execution and repeat: DMA programs of
/// other widths and lengths, a looped matmul, an elementwise kernel, two members that both
/// load on all 16 engines; and three members of a trn2 whose HBM is cut to 500 GB/s, where a
/// core has room beside at most 5 other engines (500 GB/s over 21 engines is above 23 B/ns).
#[test]
fn groups_of_other_shapes_keep_the_two_phase_schedule() {
    let trn1 = || Device::new(Instance::Trn1);
    let trn2_500 = || Device::with_hbm_mbps(Instance::Trn2, 500_000).unwrap();
    let cases: [(&dyn Fn() -> Device, Vec<Program>); 5] = [
        (&trn1, vec![dma_program(6, 5, 37), dma_program(8, 16, 64)]),
        (
            &trn1,
            vec![
                kernels::matmul_looped(300, 700, 520, DType::Bf16, DType::F32).unwrap(),
                dma_program(10, 15, 128),
            ],
        ),
        (
            &trn1,
            vec![
                kernels::elementwise(kernels::Elementwise::Add, 130, 700, DType::F32).unwrap(),
                kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
            ],
        ),
        (
            &trn1,
            vec![dma_program(4, 16, 128), dma_program(4, 16, 128)],
        ),
        (
            &trn2_500,
            vec![
                dma_program(6, 4, 64),
                dma_program(5, 16, 128),
                kernels::matmul(256, 512, 256, DType::Bf16, DType::F32).unwrap(),
            ],
        ),
    ];
    let (mut roomy, mut slowed) = (0, 0);
    for (i, (dev, programs)) in cases.iter().enumerate() {
        let (ref_first, ref_repeat, ref_outs, _) = group_run(*dev, programs, true);
        let (first, repeat, outs, r) = group_run(*dev, programs, false);
        for rep in ref_first.iter().chain(&ref_repeat) {
            assert!(rep.result().is_ok(), "case {i}: {:?}", rep.error);
        }
        assert_eq!(
            first, ref_first,
            "case {i}: first execution: reports differ"
        );
        assert_eq!(repeat, ref_repeat, "case {i}: repeat: reports differ");
        assert_eq!(outs, ref_outs, "case {i}: outputs differ");
        roomy += r;
        slowed += ref_first
            .iter()
            .map(ExecReport::bandwidth_stall)
            .sum::<u64>();
    }
    assert!(
        roomy > 0 && slowed > 0,
        "room {roomy}, bandwidth stalls {slowed}"
    );
}
