//! What a simulated machine keeps of each execution's report ([`Reports`]): nothing by
//! default, the last report of each physical core when asked — with the event log only for
//! [`Reports::Events`] (and, without its per-descriptor events, [`Reports::Transfers`]) — and
//! no stale report after a plumbing-mode execution.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffSpec, NeffTensor, SubgraphSpec};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{ModelHandle, Runtime};
use nrt_sim::engine::{DType, EventKind, encode_f32, kernels};
use nrt_sim::{Instance, Reports, SimDriver, SimMachine};

type Rt = Runtime<SimDriver>;

fn runtime(instance: Instance, reports: Reports) -> (Rt, Arc<SimMachine>) {
    common::sim_runtime(instance, reports)
}

/// An `a + b` NEFF of `subgraphs` subgraphs (one per physical core of the logical core).
fn add_neff(subgraphs: usize) -> Vec<u8> {
    let add = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
    nrt_sim::neff::neff_from_programs("add", &vec![add; subgraphs]).unwrap()
}

/// A NEFF with the same I/O and no simulator program (plumbing mode).
fn plumbing_neff() -> Vec<u8> {
    let t = |name: &str, usage, var_id| NeffTensor {
        name: name.into(),
        usage,
        size: 128,
        dtype: Dtype::Float32,
        shape: vec![4, 8],
        var_id,
    };
    neff::write(&NeffSpec {
        name: "plumbing".into(),
        uuid: [0; 16],
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
        lnc_size: 1,
        num_tpb: 1,
        gzip: true,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![],
        }],
        tensors: vec![
            t("a", TensorUsage::Input, 1),
            t("b", TensorUsage::Input, 2),
            t("out", TensorUsage::Output, 3),
        ],
    })
    .unwrap()
}

fn execute(rt: &Rt, h: ModelHandle) {
    let mut inputs = TensorSet::new();
    for name in ["a", "b"] {
        let t = rt
            .tensor_allocate(TensorPlacement::Device, 0, 128, name)
            .unwrap();
        t.write(0, &encode_f32(DType::F32, &[1.5; 32])).unwrap();
        inputs.add(name, t);
    }
    let mut outputs = TensorSet::new();
    outputs.add(
        "out",
        rt.tensor_allocate(TensorPlacement::Device, 0, 128, "out")
            .unwrap(),
    );
    rt.execute(h, &inputs, &outputs).unwrap();
}

/// The physical cores of a loaded model's subgraphs.
fn pncs(rt: &Rt, machine: &SimMachine, h: ModelHandle) -> Vec<u32> {
    rt.model(h)
        .unwrap()
        .staged()
        .iter()
        .map(|s| machine.staged_pnc(s.handle).unwrap())
        .collect()
}

#[test]
fn nothing_is_kept_by_default() {
    let (rt, machine) = runtime(Instance::Trn1, Reports::Off);
    assert_eq!(machine.reports(), Reports::Off);
    let h = rt.load(&add_neff(1), 0, -1).unwrap();
    execute(&rt, h);
    assert_eq!(machine.executions(), 1);
    assert!(machine.last_report(pncs(&rt, &machine, h)[0]).is_none());
}

#[test]
fn counters_keep_the_last_report_without_events() {
    let (rt, machine) = runtime(Instance::Trn1, Reports::Counters);
    let h = rt.load(&add_neff(1), 0, -1).unwrap();
    let pnc = pncs(&rt, &machine, h)[0];
    assert!(machine.last_report(pnc).is_none(), "nothing ran yet");
    execute(&rt, h);
    let first = machine.last_report(pnc).unwrap();
    assert!(first.ticks > 0 && first.result().is_ok());
    assert!(first.events.is_empty());
    execute(&rt, h);
    let second = machine.last_report(pnc).unwrap();
    assert!(!Arc::ptr_eq(&first, &second), "the last execution's report");
    assert_eq!(first.ticks, second.ticks, "deterministic");
    // The report outlives the model.
    rt.unload(h).unwrap();
    assert!(machine.last_report(pnc).is_some());
    // Turning reports off forgets them.
    machine.set_reports(Reports::Off);
    assert!(machine.last_report(pnc).is_none());
    assert!(machine.last_report(u32::MAX).is_none());
}

#[test]
fn events_keep_the_event_log() {
    let (rt, machine) = runtime(Instance::Trn1, Reports::Events);
    let h = rt.load(&add_neff(1), 0, -1).unwrap();
    execute(&rt, h);
    let report = machine.last_report(pncs(&rt, &machine, h)[0]).unwrap();
    assert!(!report.events.is_empty());
    let descriptors = report
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Descriptor { .. }))
        .count();
    assert_eq!(
        descriptors as u64,
        report
            .dma_engines
            .iter()
            .map(|c| c.instructions)
            .sum::<u64>(),
        "one event per descriptor"
    );
}

/// `Reports::Transfers` keeps the same log without the per-descriptor events: the same
/// instruction and transfer events, the same ticks.
#[test]
fn transfers_keep_the_log_without_descriptors() {
    let log = |reports| {
        let (rt, machine) = runtime(Instance::Trn1, reports);
        let h = rt.load(&add_neff(1), 0, -1).unwrap();
        execute(&rt, h);
        machine.last_report(pncs(&rt, &machine, h)[0]).unwrap()
    };
    let (full, lean) = (log(Reports::Events), log(Reports::Transfers));
    assert_eq!(full.ticks, lean.ticks);
    let kept: Vec<_> = full
        .events
        .iter()
        .filter(|e| !matches!(e.kind, EventKind::Descriptor { .. }))
        .map(|e| format!("{e:?}"))
        .collect();
    let got: Vec<_> = lean.events.iter().map(|e| format!("{e:?}")).collect();
    assert!(kept.iter().any(|e| e.contains("Transfer")), "{kept:?}");
    assert!(
        kept.len() < full.events.len(),
        "the program moves data by DMA"
    );
    assert_eq!(got, kept);
    assert!(Reports::Transfers.records_events() && !Reports::Transfers.records_descriptors());
}

#[test]
fn each_physical_core_of_a_logical_core_keeps_its_report() {
    let (rt, machine) = runtime(Instance::Trn2, Reports::Counters);
    let h = rt.load(&add_neff(2), 0, -1).unwrap();
    let cores = pncs(&rt, &machine, h);
    assert_eq!(cores, vec![0, 1]);
    execute(&rt, h);
    for pnc in cores {
        assert!(machine.last_report(pnc).unwrap().ticks > 0, "core {pnc}");
    }
    assert!(machine.last_report(2).is_none());
}

#[test]
fn a_plumbing_execution_leaves_no_stale_report() {
    let (rt, machine) = runtime(Instance::Trn1, Reports::Counters);
    let program = rt.load(&add_neff(1), 0, 1).unwrap();
    let plumbing = rt.load(&plumbing_neff(), 0, 1).unwrap();
    let pnc = pncs(&rt, &machine, program)[0];
    assert_eq!(pncs(&rt, &machine, plumbing), vec![pnc]);
    execute(&rt, program);
    assert!(machine.last_report(pnc).is_some());
    execute(&rt, plumbing);
    assert!(machine.last_report(pnc).is_none());
}
