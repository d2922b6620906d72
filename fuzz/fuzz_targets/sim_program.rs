//! Raw bytes → the simulator's program decoder (`Program::from_bytes`, which validates); a
//! program that decodes is re-encoded and decoded again (the encoding must be stable), loaded
//! on a small simulated device, given arbitrary input bytes, executed with small tick, event
//! and hazard limits, rendered as a trace and unloaded (all its HBM given back). A clean
//! execution is repeated (the hazard check then skipped) and repeated again without
//! descriptor events (descriptors then run back to back as one event where they can), each
//! against the same execution, checked, on a twin device that has run the program as often:
//! they must agree (a program may write its own inputs, so a repeat is not compared with the
//! first execution's outputs). The program is then also loaded on the other core and the two run twice
//! as one lock-step group: the two group runs must have one schedule.
//!
//! Inputs that do not start with the magic are also tried behind a valid preamble (magic,
//! format 1.0, no flags), so mutations reach the sections.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    Device, ExecOptions, ExecReport, FORMAT_MAJOR, FORMAT_MINOR, LoadedProgram, MAGIC, Program,
    TensorKind, trace,
};

/// HBM of the fuzzing device: large programs fail to load with NRT_RESOURCE instead of
/// allocating gigabytes.
const HBM_BYTES: u64 = 64 << 20;

/// Inputs: a pattern from the fuzz input, exactly each input's size (bounded by the HBM).
fn fill_inputs(dev: &Device, lp: &LoadedProgram, bytes: &[u8]) {
    let inputs: Vec<(String, u64)> = lp
        .program()
        .tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Input)
        .map(|t| (t.name.clone(), t.size_bytes().unwrap_or(0)))
        .collect();
    for (name, size) in inputs {
        if size <= 1 << 20 {
            let data: Vec<u8> = (0..size as usize)
                .map(|i| bytes.get(i % bytes.len().max(1)).copied().unwrap_or(0))
                .collect();
            let _ = dev.write_tensor(lp, &name, &data);
        }
    }
}

fn run(bytes: &[u8]) {
    let program = match Program::from_bytes(bytes) {
        Ok(p) => p,
        Err(e) => {
            assert!(
                matches!(
                    e.status(),
                    NrtStatus::Invalid | NrtStatus::UnsupportedNeffVersion
                ),
                "{e:?}"
            );
            return;
        }
    };
    let encoded = program.to_bytes();
    let again = Program::from_bytes(&encoded)
        .unwrap_or_else(|e| panic!("a decoded program does not decode after to_bytes: {e:?}"));
    assert_eq!(again.to_bytes(), encoded, "unstable encoding");

    let dev = Device::with_hbm_capacity(Instance::Trn1, HBM_BYTES);
    let core = u32::from(bytes.last().copied().unwrap_or(0) & 1);
    let lp = match dev.load(core, program) {
        Ok(lp) => lp,
        Err(e) => {
            assert!(
                matches!(e.status(), NrtStatus::Invalid | NrtStatus::Resource),
                "{e:?}"
            );
            assert_eq!(dev.hbm().allocated(), 0, "a failed load kept HBM");
            return;
        }
    };
    fill_inputs(&dev, &lp, bytes);
    let opts = ExecOptions {
        max_ticks: 2_000_000,
        record_events: true,
        record_descriptors: true,
        max_events: 256,
        max_hazards: 4,
        recheck_hazards: false,
        // A trigger-to-start latency too: it reorders the DMA engines' work.
        dma_trigger_latency_ticks: Some(u64::from(bytes.len() as u32 % 2048)),
    };
    let outputs = |dev: &Device, lp: &LoadedProgram| -> Vec<Vec<u8>> {
        lp.program()
            .tensors
            .iter()
            .filter(|t| {
                t.kind == TensorKind::Output && t.size_bytes().unwrap_or(u64::MAX) <= 1 << 20
            })
            .map(|t| dev.read_tensor(lp, &t.name).unwrap_or_default())
            .collect()
    };
    match dev.execute(&lp, &opts) {
        Ok(report) => {
            assert!(report.events.len() <= opts.max_events);
            assert!(report.hazards.len() <= opts.max_hazards);
            assert_eq!(report.status == NrtStatus::Success, report.error.is_none());
            let _ = trace::chrome_trace_json(&report);
            // The same first execution without descriptor events, on a twin loaded and filled
            // the same way: a transfer's descriptors may then run back to back, their
            // boundaries replayed in order (`exec/dma_run.rs`). The same schedule, hazards and
            // bytes, racy program or not.
            // A device loaded and filled as `dev` was, before its first execution.
            let twin_of = || {
                let twin = Device::with_hbm_capacity(Instance::Trn1, HBM_BYTES);
                let tlp = twin
                    .load(core, lp.program().clone())
                    .expect("the twin loads the program as the device did");
                fill_inputs(&twin, &tlp, bytes);
                (twin, tlp)
            };
            {
                let (twin, tlp) = twin_of();
                let r = twin
                    .execute(
                        &tlp,
                        &ExecOptions {
                            record_descriptors: false,
                            ..opts
                        },
                    )
                    .expect("the twin's first execution without descriptor events");
                assert_eq!(r.status, report.status);
                assert_eq!(r.error, report.error);
                assert_eq!(r.ticks, report.ticks);
                assert_eq!(r.engines, report.engines);
                assert_eq!(r.dma_engines, report.dma_engines);
                assert_eq!(r.semaphores, report.semaphores);
                assert_eq!(r.hazards, report.hazards);
                assert_eq!(outputs(&twin, &tlp), outputs(&dev, &lp));
                twin.unload(tlp).expect("unload of the twin's program");
            }
            if report.result().is_ok() {
                for t in &lp.program().tensors {
                    if t.kind == TensorKind::Output && t.size_bytes().unwrap_or(u64::MAX) <= 1 << 20
                    {
                        let out = dev.read_tensor(&lp, &t.name);
                        assert!(out.is_ok(), "{out:?}");
                    }
                }
                // A clean run is remembered: the next one at the same addresses skips the
                // hazard check, and nothing else may differ (the schedule depends on nothing
                // but the program and its addresses). A program may write its own inputs, or
                // HBM past its tensors, so a repeat starts from other bytes: each later
                // execution here is compared with the same execution on a twin device, loaded
                // and filled the same way and run the same so far, where it is checked.
                assert!(report.hazards_checked);
                let (twin, tlp) = twin_of();
                let twin_first = twin
                    .execute(&tlp, &opts)
                    .expect("the twin's first execution");
                let same = |r: &ExecReport, base: &ExecReport| {
                    assert_eq!(r.status, base.status);
                    assert_eq!(r.ticks, base.ticks);
                    assert_eq!(r.engines, base.engines);
                    assert_eq!(r.dma_engines, base.dma_engines);
                    assert_eq!(r.semaphores, base.semaphores);
                };
                same(&twin_first, &report);
                assert_eq!(twin_first.events.len(), report.events.len());
                assert_eq!(outputs(&twin, &tlp), outputs(&dev, &lp));
                // Repeats unchecked on the device, checked on the twin: descriptor events
                // recorded, then not (a transfer's descriptors may then run back to back as one
                // event, `exec/dma_run.rs`). The schedule and the outputs must not change.
                let quiet = ExecOptions {
                    record_descriptors: false,
                    ..opts
                };
                for o in [opts, quiet] {
                    let unchecked = dev.execute(&lp, &o).expect("a repeat");
                    let checked = twin
                        .execute(
                            &tlp,
                            &ExecOptions {
                                recheck_hazards: true,
                                ..o
                            },
                        )
                        .expect("a checked repeat");
                    assert!(!unchecked.hazards_checked && checked.hazards_checked);
                    same(&unchecked, &checked);
                    same(&unchecked, &report);
                    assert_eq!(unchecked.events.len(), checked.events.len());
                    assert_eq!(outputs(&dev, &lp), outputs(&twin, &tlp));
                }
                twin.unload(tlp).expect("unload of the twin's program");
                assert_eq!(twin.hbm().allocated(), 0, "unload left HBM allocated");
                // The same program on the device's other core too, the two as one lock-step
                // group (sharing the device's HBM bandwidth, meeting at quantum boundaries):
                // twice, with one schedule. (Outputs are not compared: an offset past a tensor
                // may reach the other member's.)
                if let Ok(lp2) = dev.load(1 - core, lp.program().clone()) {
                    let group = [(&lp, &[][..]), (&lp2, &[][..])];
                    if let (Ok(a), Ok(b)) = (
                        dev.execute_group(&group, &quiet),
                        dev.execute_group(&group, &quiet),
                    ) {
                        assert_eq!(a.len(), 2);
                        for (x, y) in a.iter().zip(&b) {
                            same(x, y);
                            assert_eq!(x.peak_peer_hbm_engines, y.peak_peer_hbm_engines);
                        }
                    }
                    dev.unload(lp2)
                        .expect("unload of the second core's program");
                }
            }
        }
        Err(e) => {
            let _ = e;
        }
    }
    dev.unload(lp).expect("unload of a loaded program");
    assert_eq!(dev.hbm().allocated(), 0, "unload left HBM allocated");
}

fuzz_target!(|data: &[u8]| {
    run(data);
    if !data.starts_with(&MAGIC) {
        let mut b = Vec::with_capacity(data.len() + 16);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
        b.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(data);
        run(&b);
    }
});
