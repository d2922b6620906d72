//! Spec 000 §1, §4, §5: the model registry, the unload state machine and the metadata
//! accessors, through the runtime.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nrt_core::driver::{Driver, DriverCall, FaultInjector, SubgraphImage};
use nrt_core::io::{Dtype, IoTable, TensorUsage};
use nrt_core::model::{MODEL_STATE_READY, Model};
use nrt_core::{InitState, Level, ModelHandle, NrtStatus, Runtime, RuntimeOptions};
use nrt_host::CapturingHost;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::models::{matmul_io, model, tensor};
use nrt_tests::{TestRuntime, assert_err, init};

fn runtime_with(options: RuntimeOptions) -> (TestRuntime, Arc<CapturingHost>, Arc<SimMachine>) {
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let host = Arc::new(CapturingHost::new());
    let rt = Runtime::with_options(
        FaultInjector::new(SimDriver::attach(&machine)),
        Arc::clone(&host),
        options,
    );
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "INFO")]).unwrap();
    (rt, host, machine)
}

fn runtime() -> (TestRuntime, Arc<CapturingHost>, Arc<SimMachine>) {
    runtime_with(RuntimeOptions::default())
}

/// A model staged on the simulator, so unload has engine work to do.
fn staged_model(rt: &TestRuntime, name: &str) -> Model {
    let io = matmul_io();
    let image = SubgraphImage {
        lnc: 0,
        index: 0,
        pnc: 0,
        name: "sg00",
        model: name,
        program: None,
        uuid: [0; 16],
        files: &[],
        io: &io,
    };
    let staged = rt.driver().inner().stage_subgraph(&image).unwrap();
    Model::new(name.to_string(), 0, io, vec![staged])
}

#[test]
fn ids_are_monotone_and_never_reused_across_unload_and_load() {
    let (rt, _host, _m) = runtime_with(RuntimeOptions {
        max_models: 2,
        ..Default::default()
    });
    let mut last = 0;
    let mut seen = Vec::new();
    for i in 0..20 {
        let h = rt.register_model(model(&format!("m{i}"), 0)).unwrap();
        assert!(h.id() > last, "id {} after {last}", h.id());
        last = h.id();
        seen.push(h);
        if i % 2 == 1 {
            rt.unload(seen[i - 1]).unwrap();
            rt.unload(h).unwrap();
        }
    }
    // Every old handle is dead for good, although its slot was reused.
    for h in seen {
        assert_err(
            rt.model(h),
            NrtStatus::InvalidHandle,
            &format!("Failed to find model: {}", h.id()),
        );
    }
}

#[test]
fn capacity_exhaustion_is_nrt_resource() {
    let (rt, _host, _m) = runtime_with(RuntimeOptions {
        max_models: 3,
        ..Default::default()
    });
    let hs: Vec<_> = (0..3)
        .map(|i| rt.register_model(model(&format!("m{i}"), 0)).unwrap())
        .collect();
    assert_err(
        rt.register_model(model("one too many", 0)),
        NrtStatus::Resource,
        "Too many models loaded: the registry holds 3 models",
    );
    rt.unload(hs[1]).unwrap();
    rt.register_model(model("fits again", 0)).unwrap();
}

#[test]
fn stale_and_forged_handles_are_invalid_handle() {
    let (rt, host, _m) = runtime();
    let h = rt.register_model(model("a", 0)).unwrap();
    let stale = h;
    rt.unload(h).unwrap();
    let h2 = rt.register_model(model("b", 0)).unwrap();
    assert_eq!(h2.slot(), stale.slot(), "the slot was reused");
    assert_err(
        rt.model(stale),
        NrtStatus::InvalidHandle,
        &format!("Failed to find model: {}", stale.id()),
    );
    assert_err(
        rt.unload(stale),
        NrtStatus::InvalidHandle,
        &format!("Failed to find model: {}", stale.id()),
    );
    for raw in [
        0u64,
        u64::MAX,
        (99u64 << 32) | 7,
        (h2.id() as u64 + 1) << 32,
    ] {
        let forged = ModelHandle::from_raw(raw);
        assert_err(
            rt.io_tensor_count(forged),
            NrtStatus::InvalidHandle,
            &format!("Failed to find model: {}", forged.id()),
        );
    }
    assert!(host.contains(Level::Error, "Failed to find model: "));
    assert_eq!(rt.model(h2).unwrap().name(), "b");
}

#[test]
fn unload_requires_ready_state() {
    let (rt, _host, _m) = runtime();
    let h = rt.register_model(model("busy", 0)).unwrap();
    rt.model(h).unwrap().set_state(3);
    assert_err(
        rt.unload(h),
        NrtStatus::Invalid,
        &format!("DLR {} state 3, must be stopped before unloading", h.id()),
    );
    // Refused, so still loaded.
    assert_eq!(rt.model(h).unwrap().state(), 3);
    rt.model(h).unwrap().set_state(MODEL_STATE_READY);
    rt.unload(h).unwrap();
}

#[test]
fn unload_of_a_referenced_model_waits_until_released() {
    let (rt, host, _m) = runtime_with(RuntimeOptions {
        unload_warn_every: 5,
        ..Default::default()
    });
    let h = rt.register_model(model("held", 0)).unwrap();
    let released = AtomicBool::new(false);
    std::thread::scope(|s| {
        let reference = rt.model(h).unwrap();
        let unloader = s.spawn(|| {
            rt.unload(h).unwrap();
            // The unload cannot have returned while the reference was held.
            assert!(
                released.load(Ordering::SeqCst),
                "unload returned before the release"
            );
        });
        // Wait until the unloader is draining: it logs the periodic warning.
        while !host.contains(
            Level::Warning,
            &format!("still waiting for model[{}] ref count 0", h.id()),
        ) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Erased already: new resolutions miss, while our reference still reads the model.
        assert_err(
            rt.model(h),
            NrtStatus::InvalidHandle,
            &format!("Failed to find model: {}", h.id()),
        );
        assert_eq!(reference.name(), "held");
        released.store(true, Ordering::SeqCst);
        drop(reference);
        unloader.join().unwrap();
    });
    assert!(host.contains(
        Level::Warning,
        &format!(
            "Execution requests on model {} have not been drained before unloading",
            h.id()
        )
    ));
    assert!(host.contains(Level::Info, &format!("Unloaded NN: {}", h.id())));
    assert!(host.relaxations() >= 5);
}

#[test]
fn unload_stops_then_unstages_on_the_engine() {
    let (rt, host, machine) = runtime();
    let h = rt.register_model(staged_model(&rt, "staged")).unwrap();
    assert_eq!(machine.staged_models().len(), 1);
    rt.unload(h).unwrap();
    assert!(machine.staged_models().is_empty());
    assert_eq!(rt.driver().calls(DriverCall::StopModel), 1);
    assert_eq!(rt.driver().calls(DriverCall::UnstageModel), 1);
    assert!(host.contains(Level::Info, &format!("Unloaded NN: {}", h.id())));
    assert!(!host.contains(Level::Warning, "have not been drained"));
}

#[test]
fn unstage_failure_is_reported_and_the_record_is_still_gone() {
    let (rt, host, _m) = runtime();
    let h = rt.register_model(staged_model(&rt, "staged")).unwrap();
    rt.driver().fail_next(DriverCall::UnstageModel);
    assert_err(
        rt.unload(h),
        NrtStatus::Failure,
        &format!(
            "Failed to unstage model: {} (injected fault in UnstageModel)",
            h.id()
        ),
    );
    assert!(!host.contains(Level::Info, &format!("Unloaded NN: {}", h.id())));
    assert_eq!(rt.model(h).unwrap_err().status(), NrtStatus::InvalidHandle);
}

#[test]
fn close_unloads_every_model() {
    let (rt, host, machine) = runtime();
    let hs: Vec<_> = (0..5)
        .map(|i| {
            rt.register_model(staged_model(&rt, &format!("m{i}")))
                .unwrap()
        })
        .collect();
    // Even one that is not READY goes at close.
    rt.model(hs[2]).unwrap().set_state(1);
    assert_eq!(rt.loaded_models().unwrap().len(), 5);
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
    assert!(machine.staged_models().is_empty());
    assert_eq!(rt.driver().calls(DriverCall::UnstageModel), 5);
    for h in &hs {
        assert!(host.contains(Level::Info, &format!("Unloaded NN: {}", h.id())));
    }
    // After a new init the old handles are still dead.
    init(&rt, &[]).unwrap();
    assert!(rt.loaded_models().unwrap().is_empty());
    assert_eq!(
        rt.model(hs[0]).unwrap_err().status(),
        NrtStatus::InvalidHandle
    );
}

#[test]
fn model_calls_are_guarded() {
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let rt = Runtime::new(SimDriver::attach(&machine));
    let h = ModelHandle::from_raw(1 << 32);
    assert_err(
        rt.register_model(model("x", 0)),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    assert_err(rt.model(h), NrtStatus::Uninitialized, "NRT uninitialized");
    assert_err(rt.unload(h), NrtStatus::Uninitialized, "NRT uninitialized");
    assert_err(
        rt.io_tensor_count(h),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    assert_err(
        rt.is_valid_input_name(h, Some("x")),
        NrtStatus::Uninitialized,
        "NRT uninitialized",
    );
    rt.mark_forked_child();
    assert_err(
        rt.unload(h),
        NrtStatus::Failure,
        "Incompatible runtime state: NRT_STATE_CHILD",
    );
}

// ---- §5 metadata ----------------------------------------------------------------------------

#[test]
fn io_tensor_count_and_input_count() {
    let (rt, _host, _m) = runtime();
    let h = rt.register_model(model("mm", 0)).unwrap();
    assert_eq!(rt.io_tensor_count(h).unwrap(), (2, 1));
    assert_eq!(rt.input_count(h).unwrap(), 2);
}

#[test]
fn tensor_info_by_index_is_in_name_order() {
    let (rt, _host, _m) = runtime();
    let h = rt.register_model(model("mm", 0)).unwrap();
    let x = rt.io_tensor_info(h, TensorUsage::Input, 0).unwrap();
    assert_eq!(
        (
            x.name.as_str(),
            x.size,
            x.dtype,
            x.ndim(),
            x.shape.as_slice()
        ),
        ("x", 65536, Dtype::Float16, 2, &[128, 256][..])
    );
    let y = rt.io_tensor_info(h, TensorUsage::Input, 1).unwrap();
    assert_eq!(
        (y.name.as_str(), y.size, y.shape.as_slice()),
        ("y", 65536, &[256, 128][..])
    );
    let o = rt.io_tensor_info(h, TensorUsage::Output, 0).unwrap();
    assert_eq!(
        (o.name.as_str(), o.size, o.dtype.code()),
        ("output0", 32768, 7)
    );
    assert_err(
        rt.io_tensor_info(h, TensorUsage::Output, 1),
        NrtStatus::Invalid,
        &format!(
            "Tensor index 1 out of range: model {} has 1 output tensor(s)",
            h.id()
        ),
    );
    let all = rt.model_tensor_info(h).unwrap();
    let names: Vec<_> = all.iter().map(|(u, t)| (*u, t.name.as_str())).collect();
    assert_eq!(
        names,
        [
            (TensorUsage::Input, "x"),
            (TensorUsage::Input, "y"),
            (TensorUsage::Output, "output0")
        ]
    );
}

#[test]
fn is_valid_input_name_and_a_missing_name() {
    let (rt, _host, _m) = runtime();
    let h = rt.register_model(model("mm", 0)).unwrap();
    assert!(rt.is_valid_input_name(h, Some("x")).unwrap());
    assert!(rt.is_valid_input_name(h, Some("y")).unwrap());
    assert!(!rt.is_valid_input_name(h, Some("output0")).unwrap());
    assert!(!rt.is_valid_input_name(h, Some("")).unwrap());
    assert_err(
        rt.is_valid_input_name(h, None),
        NrtStatus::Invalid,
        "Input tensor name is NULL",
    );
}

#[test]
fn io_table_validates_names() {
    let long = "n".repeat(256);
    assert_err(
        IoTable::new(vec![tensor(&long, Dtype::Float32, &[1])], vec![]),
        NrtStatus::Invalid,
        "Invalid input tensor name of 256 bytes: names are 1 to 255 bytes without NUL",
    );
    let max = "n".repeat(255);
    assert!(IoTable::new(vec![tensor(&max, Dtype::Float32, &[1])], vec![]).is_ok());
    assert_err(
        IoTable::new(
            vec![],
            vec![
                tensor("o", Dtype::Int8, &[2]),
                tensor("o", Dtype::Int8, &[2]),
            ],
        ),
        NrtStatus::Invalid,
        "Duplicate output tensor name \"o\"",
    );
    // The same name may be both an input and an output.
    assert!(
        IoTable::new(
            vec![tensor("t", Dtype::Int8, &[1])],
            vec![tensor("t", Dtype::Int8, &[1])]
        )
        .is_ok()
    );
}

#[test]
fn concurrent_unloads_of_one_handle_succeed_once() {
    let (rt, _host, _m) = runtime();
    for _ in 0..50 {
        let h = rt.register_model(model("twice", 0)).unwrap();
        let results: Vec<_> = std::thread::scope(|s| {
            let a = s.spawn(|| rt.unload(h));
            let b = s.spawn(|| rt.unload(h));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let ok = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(ok, 1, "{results:?}");
        for r in results.into_iter().filter_map(Result::err) {
            assert_eq!(r.status(), NrtStatus::InvalidHandle);
        }
    }
}

/// No fixed model limit (issue 13): 10,000 models loaded from a NEFF through `Runtime::load`,
/// each queried and executed, then all unloaded; the registry grew a chunk at a time and every
/// unloaded handle is refused.
#[test]
fn ten_thousand_models_load_execute_and_unload() {
    use nrt_core::tensor::{TensorPlacement, TensorSet};
    const N: usize = 10_000;
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn1, 1));
    let rt = Runtime::with_options(
        FaultInjector::new(SimDriver::attach(&machine)),
        Arc::new(CapturingHost::new()),
        RuntimeOptions::default(),
    );
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "ERROR")]).unwrap();
    assert!(rt.options().max_models >= 65_536);
    let neff = nrt_tests::models::empty_neff();
    let hs: Vec<ModelHandle> = (0..N).map(|_| rt.load(&neff, 0, -1).unwrap()).collect();
    assert_eq!(rt.loaded_models().unwrap().len(), N);
    let input = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "in")
        .unwrap();
    let output = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "out")
        .unwrap();
    let mut inputs = TensorSet::new();
    inputs.add("in", input);
    let mut outputs = TensorSet::new();
    outputs.add("out", output);
    for h in &hs {
        assert_eq!(
            rt.model_core_count(*h).unwrap(),
            1,
            "trn1: one core per model"
        );
        // A model without a program zero-fills its output: poison it first.
        outputs.get("out").unwrap().write(0, &[0xa5; 64]).unwrap();
        rt.execute(*h, &inputs, &outputs).unwrap();
        let mut got = [0xffu8; 64];
        outputs.get("out").unwrap().read(0, &mut got).unwrap();
        assert_eq!(got, [0u8; 64]);
    }
    for h in &hs {
        rt.unload(*h).unwrap();
    }
    assert!(rt.loaded_models().unwrap().is_empty());
    for h in hs.iter().step_by(997) {
        assert_err(
            rt.model(*h),
            NrtStatus::InvalidHandle,
            &format!("Failed to find model: {}", h.id()),
        );
    }
}
