//! Spec 000 §2, §3, §6 on the simulator: load and the stage seam, tensors and tensor sets, the
//! execute fork, resources freed on every edge. Models are the built `plumbing_matmul_neff`
//! (the compiler fixture's I/O, two subgraphs, plumbing mode); the load tests also take the
//! compiler fixture itself when `../shared/` has it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use nrt_core::driver::{DriverCall, FaultInjector};
use nrt_core::io::TensorUsage;
use nrt_core::tensor::{Tensor, TensorPlacement, TensorSet};
use nrt_core::{ExecMode, Level, NrtStatus, Runtime, RuntimeOptions};
use nrt_host::CapturingHost;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::models::plumbing_matmul_neff;
use nrt_tests::{TestRuntime, assert_err, assert_err_prefix, init, matmul_fixture};

/// The NEFFs with the compiler fixture's shape (two subgraphs, no simulator program, inputs
/// `x`, `y` and output `output0`): the built one always, and the compiler fixture itself when
/// `../shared/` has it (otherwise a skip line says that half did not run).
fn matmul_neffs() -> Vec<(&'static str, Vec<u8>)> {
    let mut neffs = vec![("built plumbing NEFF", plumbing_matmul_neff())];
    neffs.extend(matmul_fixture().map(|f| ("compiler fixture", f)));
    neffs
}

fn runtime(
    instance: Instance,
    vars: &[(&str, &str)],
) -> (TestRuntime, Arc<CapturingHost>, Arc<SimMachine>) {
    let machine = SimMachine::new(SimConfig::funtime(instance, 1));
    let host = Arc::new(CapturingHost::new());
    let rt = Runtime::with_options(
        FaultInjector::new(SimDriver::attach(&machine)),
        Arc::clone(&host),
        RuntimeOptions::default(),
    );
    init(&rt, vars).unwrap();
    (rt, host, machine)
}

/// Device tensors for every I/O of the matmul NEFFs: inputs x, y and output output0.
fn device_sets<'rt>(rt: &'rt TestRuntime, fill: u8) -> (TensorSet<'rt>, TensorSet<'rt>) {
    let mut inputs = TensorSet::new();
    let mut outputs = TensorSet::new();
    for (name, size) in [("x", 65536), ("y", 65536)] {
        let t = rt
            .tensor_allocate(TensorPlacement::Device, 0, size, name)
            .unwrap();
        t.memset(0, fill, size).unwrap();
        inputs.add(name, t);
    }
    let o = rt
        .tensor_allocate(TensorPlacement::Device, 0, 32768, "output0")
        .unwrap();
    o.memset(0, 0xEE, 32768).unwrap();
    outputs.add("output0", o);
    (inputs, outputs)
}

#[test]
fn compiler_and_built_neffs_load_at_lnc_2_with_their_tensor_info() {
    for (what, neff) in matmul_neffs() {
        let (rt, host, machine) = runtime(Instance::Trn2, &[("NEURON_RT_LOG_LEVEL", "WARNING")]);
        let h = rt.load(&neff, -1, -1).unwrap();
        assert_eq!(
            machine.staged_models().len(),
            2,
            "{what}: one staged subgraph per physical core"
        );
        assert_eq!(rt.model_lnc(h).unwrap(), 0, "{what}");
        let info = rt.model_tensor_info(h).unwrap();
        let names: Vec<_> = info
            .iter()
            .map(|(u, t)| (*u, t.name.as_str(), t.size, t.shape.clone()))
            .collect();
        assert_eq!(
            names,
            [
                (TensorUsage::Input, "x", 65536, vec![128, 256]),
                (TensorUsage::Input, "y", 65536, vec![256, 128]),
                (TensorUsage::Output, "output0", 32768, vec![128, 128]),
            ],
            "{what}"
        );
        assert!(rt.model(h).unwrap().is_plumbing(), "{what}");
        assert!(
            host.contains(
                Level::Warning,
                "carries no simulator program: its executions run in plumbing mode and zero-fill the outputs"
            ),
            "{what}"
        );
        rt.unload(h).unwrap();
        assert!(machine.staged_models().is_empty(), "{what}");
    }
}

#[test]
fn compiler_and_built_neffs_are_refused_at_lnc_1() {
    for (what, neff) in matmul_neffs() {
        for (instance, vars) in [
            (Instance::Trn1, vec![]),
            (Instance::Trn2, vec![("NEURON_RT_VIRTUAL_CORE_SIZE", "1")]),
        ] {
            let (rt, _host, machine) = runtime(instance, &vars);
            let e = rt.load(&neff, 0, -1).expect_err(what);
            assert_eq!(e.status(), NrtStatus::Invalid, "{what}: {e:?}");
            assert_eq!(
                e.message(),
                "Insufficient number of pncs, required 2, available 1",
                "{what}"
            );
            assert!(machine.staged_models().is_empty(), "{what}");
            assert!(rt.loaded_models().unwrap().is_empty(), "{what}");
        }
    }
}

#[test]
fn plumbing_execution_zero_fills_outputs() {
    let (rt, _host, machine) = runtime(Instance::Trn2, &[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (inputs, outputs) = device_sets(&rt, 3);
    rt.execute(h, &inputs, &outputs).unwrap();
    let mut out = vec![0xAAu8; 32768];
    outputs.get("output0").unwrap().read(0, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 0));
    assert_eq!(machine.executions(), 1);
    rt.execute_repeat(h, &inputs, &outputs, 3).unwrap();
    assert_eq!(machine.executions(), 4);
    assert_err(
        rt.execute_repeat(h, &inputs, &outputs, 0),
        NrtStatus::Invalid,
        "repeat count 0 must be at least 1",
    );
}

#[test]
fn host_tensors_are_cloned_to_device_and_copied_back() {
    let (rt, _host, machine) = runtime(Instance::Trn2, &[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let before = machine.total_device_bytes_allocated();
    let mut inputs = TensorSet::new();
    inputs.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Host, 0, 65536, "x")
            .unwrap(),
    );
    let mut y_buf = vec![1u8; 65536];
    let mut y = Tensor::empty("y");
    // SAFETY: `y_buf` outlives every use of `y` in this test and is not touched meanwhile.
    unsafe { y.attach_buffer(y_buf.as_mut_ptr(), y_buf.len()).unwrap() };
    inputs.add("y", y);
    let mut outputs = TensorSet::new();
    let o = rt
        .tensor_allocate(TensorPlacement::Host, 0, 32768, "output0")
        .unwrap();
    o.memset(0, 0x77, 32768).unwrap();
    outputs.add("output0", o);
    rt.execute(h, &inputs, &outputs).unwrap();
    let mut out = vec![1u8; 32768];
    outputs.get("output0").unwrap().read(0, &mut out).unwrap();
    assert!(
        out.iter().all(|&b| b == 0),
        "the output came back from its device clone"
    );
    assert_eq!(
        machine.total_device_bytes_allocated(),
        before,
        "clones freed"
    );
    drop(inputs);
    drop(y_buf);
}

#[test]
fn io_sets_are_validated_against_the_model() {
    let (rt, _host, _m) = runtime(Instance::Trn2, &[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let id = h.id();
    let (inputs, outputs) = device_sets(&rt, 0);
    let mut missing = inputs.clone();
    missing = {
        let mut s = TensorSet::new();
        for (n, t) in missing.iter().filter(|(n, _)| *n != "y") {
            s.add(n, t.clone());
        }
        s
    };
    assert_err(
        rt.execute(h, &missing, &outputs),
        NrtStatus::Invalid,
        &format!("Missing input tensor \"y\" for model {id}"),
    );
    let mut unknown = inputs.clone();
    unknown.add(
        "z",
        rt.tensor_allocate(TensorPlacement::Device, 0, 4, "z")
            .unwrap(),
    );
    assert_err(
        rt.execute(h, &unknown, &outputs),
        NrtStatus::Invalid,
        &format!("Unknown input tensor \"z\" for model {id}"),
    );
    let mut wrong = inputs.clone();
    wrong.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Device, 0, 100, "x")
            .unwrap(),
    );
    assert_err(
        rt.execute(h, &wrong, &outputs),
        NrtStatus::Invalid,
        &format!("The input tensor \"x\" has 100 bytes, model {id} expects 65536"),
    );
    let no_out = TensorSet::new();
    assert_err(
        rt.execute(h, &inputs, &no_out),
        NrtStatus::Invalid,
        &format!("Missing output tensor \"output0\" for model {id}"),
    );
    rt.unload(h).unwrap();
    assert_err(
        rt.execute(h, &inputs, &outputs),
        NrtStatus::InvalidHandle,
        &format!("Failed to find model: {id}"),
    );
}

#[test]
fn implicit_async_mode_refuses_host_tensors() {
    let (rt, _host, _m) = runtime(
        Instance::Trn2,
        &[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4")],
    );
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (mut inputs, outputs) = device_sets(&rt, 0);
    inputs.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Host, 0, 65536, "x")
            .unwrap(),
    );
    assert_err_prefix(
        rt.execute(h, &inputs, &outputs),
        NrtStatus::Invalid,
        "Async exec mode only supports device allocated tensors",
    );
}

#[test]
fn exec_mode_is_inverted_as_in_libnrt() {
    assert_eq!(ExecMode::for_fork(false), ExecMode::ExplicitAsync);
    assert_eq!(ExecMode::for_fork(false) as u32, 1);
    assert_eq!(ExecMode::for_fork(true), ExecMode::Async);
    assert_eq!(ExecMode::for_fork(true) as u32, 0);
}

#[test]
fn tensors_read_write_copy_memset_with_bounds() {
    let (rt, _host, _m) = runtime(Instance::Trn1, &[]);
    for placement in [TensorPlacement::Device, TensorPlacement::Host] {
        let t = rt.tensor_allocate(placement, 0, 64, "t").unwrap();
        assert_eq!(t.size(), 64);
        t.write(8, &[1, 2, 3, 4]).unwrap();
        let mut b = [0u8; 6];
        t.read(7, &mut b).unwrap();
        assert_eq!(b, [0, 1, 2, 3, 4, 0]);
        assert_err(
            t.read(60, &mut [0u8; 5]),
            NrtStatus::Invalid,
            "Tensor \"t\": a read of 5 bytes at offset 60 is outside its 64 bytes",
        );
        assert_err(
            t.write(u64::MAX, &[1]),
            NrtStatus::Invalid,
            &format!(
                "Tensor \"t\": a write of 1 bytes at offset {} is outside its 64 bytes",
                u64::MAX
            ),
        );
        t.memset(32, 9, 32).unwrap();
        assert_err(
            t.memset(33, 9, 32),
            NrtStatus::Invalid,
            "Tensor \"t\": a memset of 32 bytes at offset 33 is outside its 64 bytes",
        );
        // Slices share storage.
        let s = t.slice(30, 4, "s").unwrap();
        s.write(0, &[5, 5]).unwrap();
        let mut b = [0u8; 4];
        t.read(30, &mut b).unwrap();
        assert_eq!(b, [5, 5, 9, 9]);
        assert_err(
            t.slice(60, 5, "bad").map(|_| ()),
            NrtStatus::Invalid,
            "Tensor \"t\": a slice of 5 bytes at offset 60 is outside its 64 bytes",
        );
        assert!(t.va().is_some());
        // Copies across placements.
        for other in [TensorPlacement::Device, TensorPlacement::Host] {
            let d = rt.tensor_allocate(other, 0, 16, "d").unwrap();
            Tensor::copy(&t, 8, &d, 2, 4).unwrap();
            let mut b = [0u8; 8];
            d.read(0, &mut b).unwrap();
            assert_eq!(b, [0, 0, 1, 2, 3, 4, 0, 0]);
            assert_err(
                Tensor::copy(&t, 0, &d, 14, 4),
                NrtStatus::Invalid,
                "Tensor \"d\": a copy destination of 4 bytes at offset 14 is outside its 16 bytes",
            );
        }
    }
    let e = Tensor::empty("v");
    assert_eq!(e.size(), 0);
    assert_err(
        e.read(0, &mut []),
        NrtStatus::Invalid,
        "Tensor \"v\" has no buffer attached",
    );
    assert_err(
        rt.tensor_allocate(TensorPlacement::Device, 5, 4, "far")
            .map(|_| ()),
        NrtStatus::Invalid,
        "Logical Neuron Core 5 is not visible to this process (visible: 0-1)",
    );
}

#[test]
fn device_memory_exhaustion_is_nrt_resource_and_freed_memory_returns() {
    let (rt, _host, machine) = runtime(Instance::Trn1, &[]);
    let a = rt
        .tensor_allocate(TensorPlacement::Device, 0, 20 << 30, "a")
        .unwrap();
    assert_err_prefix(
        rt.tensor_allocate(TensorPlacement::Device, 1, 20 << 30, "b")
            .map(|_| ()),
        NrtStatus::Resource,
        "Failed to allocate 21474836480 bytes of device memory for tensor \"b\" on Neuron Core 1",
    );
    let slice = a.slice(0, 16, "s").unwrap();
    drop(a);
    assert!(
        machine.total_device_bytes_allocated() > 0,
        "the slice keeps the storage"
    );
    drop(slice);
    assert_eq!(machine.total_device_bytes_allocated(), 0);
    rt.tensor_allocate(TensorPlacement::Device, 1, 20 << 30, "b")
        .unwrap();
}

#[test]
fn tensor_set_add_replaces_and_get_misses_with_failure() {
    let mut set = TensorSet::new();
    set.add("a", Tensor::empty("first"));
    set.add("a", Tensor::empty("second"));
    assert_eq!(set.len(), 1);
    assert_eq!(set.get("a").unwrap().name(), "second");
    assert_err(
        set.get("b").map(|_| ()),
        NrtStatus::Failure,
        "Tensor \"b\" is not in the tensor set",
    );
}

#[test]
fn explicit_and_least_loaded_core_choice() {
    let (rt, _host, _m) = runtime(Instance::Trn2, &[]);
    let a = rt.load(&plumbing_matmul_neff(), -1, -1).unwrap();
    let b = rt.load(&plumbing_matmul_neff(), -1, -1).unwrap();
    let c = rt.load(&plumbing_matmul_neff(), 3, -1).unwrap();
    let d = rt.load(&plumbing_matmul_neff(), -1, -1).unwrap();
    assert_eq!([a, b, c, d].map(|h| rt.model_lnc(h).unwrap()), [0, 1, 3, 2]);
    assert_err(
        rt.load(&plumbing_matmul_neff(), 4, -1).map(|_| ()),
        NrtStatus::Invalid,
        "Logical Neuron Core 4 is not visible to this process (visible: 0-3)",
    );
}

/// `vnc_count` (the load's last argument) other than -1 or 1 is deprecated: the model loads on
/// one logical core anyway, with a warning naming the value; -1 and 1 load without it.
#[test]
fn vnc_count_other_than_one_is_ignored_with_a_warning() {
    let (rt, host, _m) = runtime(Instance::Trn2, &[("NEURON_RT_LOG_LEVEL", "WARNING")]);
    for vnc in [-1, 1] {
        let h = rt.load(&plumbing_matmul_neff(), 0, vnc).unwrap();
        rt.unload(h).unwrap();
    }
    assert!(!host.contains(Level::Warning, "is deprecated and ignored"));
    for vnc in [2, 0, -7] {
        let h = rt.load(&plumbing_matmul_neff(), 1, vnc).unwrap();
        assert_eq!(rt.model_lnc(h).unwrap(), 1, "vnc_count {vnc}");
        assert!(
            host.contains(
                Level::Warning,
                &format!("vnc_count {vnc} is deprecated and ignored: loading on one core")
            ),
            "vnc_count {vnc}"
        );
        rt.unload(h).unwrap();
    }
}

/// `NEURON_RT_VALIDATE_HASH=1` at init makes `load` check the header hash: a NEFF whose hash
/// does not match its payload is refused; without the variable the same bytes load.
#[test]
fn validate_hash_at_init_refuses_a_mismatched_neff() {
    let mut neff = plumbing_matmul_neff();
    neff[172] ^= 1;
    let (rt, _host, machine) = runtime(Instance::Trn2, &[("NEURON_RT_VALIDATE_HASH", "1")]);
    rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let staged = machine.staged_models().len();
    assert_err(
        rt.load(&neff, 0, -1).map(|_| ()),
        NrtStatus::Invalid,
        "Invalid NEFF: the header hash does not match the payload (NEURON_RT_VALIDATE_HASH)",
    );
    assert_eq!(
        machine.staged_models().len(),
        staged,
        "nothing staged by the refusal"
    );
    let (rt, _host, _m) = runtime(Instance::Trn2, &[]);
    assert!(rt.load(&neff, 0, -1).is_ok());
}

#[test]
fn failed_load_rolls_back_every_staged_subgraph() {
    let (rt, _host, machine) = runtime(Instance::Trn2, &[]);
    let before = rt.driver().calls(DriverCall::StageSubgraph);
    rt.driver().fail_next(DriverCall::StageSubgraph);
    assert_err_prefix(
        rt.load(&plumbing_matmul_neff(), 0, -1).map(|_| ()),
        NrtStatus::Failure,
        "Failed to stage subgraph sg0",
    );
    assert_eq!(
        rt.driver().calls(DriverCall::StageSubgraph) - before,
        2,
        "both subgraphs were attempted in parallel"
    );
    assert!(
        machine.staged_models().is_empty(),
        "the one that succeeded was unstaged"
    );
    assert!(rt.loaded_models().unwrap().is_empty());
    // A full registry also rolls back.
    let machine2 = SimMachine::new(SimConfig::funtime(Instance::Trn2, 1));
    let rt2 = Runtime::with_options(
        SimDriver::attach(&machine2),
        CapturingHost::new(),
        RuntimeOptions {
            max_models: 1,
            ..Default::default()
        },
    );
    init(&rt2, &[]).unwrap();
    rt2.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    assert_err(
        rt2.load(&plumbing_matmul_neff(), 1, -1).map(|_| ()),
        NrtStatus::Resource,
        "Too many models loaded: the registry holds 1 models",
    );
    assert_eq!(machine2.staged_models().len(), 2);
}

#[test]
fn every_injected_failure_in_a_cycle_leaves_nothing_behind() {
    let calls = [
        DriverCall::StageSubgraph,
        DriverCall::AllocDevice,
        DriverCall::WriteDevice,
        DriverCall::ReadDevice,
        DriverCall::MemsetDevice,
        DriverCall::Submit,
        DriverCall::StopModel,
        DriverCall::UnstageModel,
    ];
    for call in calls {
        let (rt, _host, machine) = runtime(Instance::Trn2, &[]);
        rt.driver().fail_next(call);
        // One load / execute (host and device tensors) / unload cycle.
        let result = (|| -> nrt_core::Result<()> {
            let h = rt.load(&plumbing_matmul_neff(), 0, -1)?;
            let mut inputs = TensorSet::new();
            inputs.add(
                "x",
                rt.tensor_allocate(TensorPlacement::Host, 0, 65536, "x")?,
            );
            inputs.add(
                "y",
                rt.tensor_allocate(TensorPlacement::Device, 0, 65536, "y")?,
            );
            let mut outputs = TensorSet::new();
            outputs.add(
                "output0",
                rt.tensor_allocate(TensorPlacement::Host, 0, 32768, "output0")?,
            );
            inputs.get("x")?.memset(0, 1, 65536)?;
            inputs.get("y")?.memset(0, 2, 65536)?;
            rt.execute(h, &inputs, &outputs)?;
            rt.unload(h)
        })();
        if call == DriverCall::StopModel {
            // As in libnrt, a failed engine stop is logged and unload goes on to unstage.
            result.unwrap();
            assert!(_host.contains(Level::Error, "Failed to stop model"));
        } else {
            let e = result.expect_err(&format!("{call:?} must fail the cycle"));
            // Injected faults classify as non-specific failures.
            assert_eq!(e.status(), NrtStatus::Failure, "{call:?}: {e}");
        }
        // Whatever happened, closing leaves nothing allocated or staged, and the runtime works.
        rt.close();
        assert_eq!(
            machine.total_device_bytes_allocated(),
            0,
            "{call:?} leaked device memory"
        );
        assert!(
            machine.staged_models().is_empty(),
            "{call:?} left a staged model"
        );
        init(&rt, &[]).unwrap();
        let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
        let (inputs, outputs) = device_sets(&rt, 1);
        rt.execute(h, &inputs, &outputs).unwrap();
        drop((inputs, outputs));
        rt.unload(h).unwrap();
        assert_eq!(machine.total_device_bytes_allocated(), 0);
    }
}

#[test]
fn plumbing_mode_can_be_refused() {
    let machine = SimMachine::new(SimConfig {
        refuse_plumbing: true,
        ..SimConfig::funtime(Instance::Trn2, 1)
    });
    let rt = Runtime::new(SimDriver::attach(&machine));
    init(&rt, &[]).unwrap();
    assert_err(
        rt.load(&plumbing_matmul_neff(), 0, -1).map(|_| ()),
        NrtStatus::Failure,
        "Failed to stage subgraph sg00 of plumbing_matmul on Neuron Core 0: simulated driver: this NEFF carries no simulator program and plumbing mode is disabled (NEURON_RT_SIM_PLUMBING=0)",
    );
    assert!(machine.staged_models().is_empty());
}
