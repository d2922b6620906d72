//! A backend-agnostic conformance suite: lifecycle, allocation, registry, execute and async
//! checks written once against the [`Backend`] trait, with exact statuses and messages, run
//! over the simulator (`tests/tests/conformance_sim.rs`) and over `nrt-linux` behind the
//! device emulator (`tests/tests/conformance_linux.rs`) with the same expectations.
//!
//! Every check uses a trn1 device (2 physical cores, logical-core size 1) in kernel-driver
//! mode: negotiation, reservation and reset run, nothing is skipped.

use std::sync::Arc;

use nrt_core::driver::{Driver, DriverCall, FaultInjector};
use nrt_core::tensor::{Tensor, TensorPlacement, TensorSet};
use nrt_core::{InitState, NrtStatus, Runtime};
use nrt_host::CapturingHost;
use nrt_sim::engine::{self, ActFunc, DType, Device, ExecOptions, kernels};
use nrt_sim::neff::neff_from_programs;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

use crate::{assert_err, assert_err_prefix, init};

/// A device backend under test.
pub trait Backend {
    /// Its driver.
    type Driver: Driver + Send + Sync;
    /// A fresh driver: a new process's view of the device.
    fn driver(&self) -> Self::Driver;
    /// Device memory (bytes) the device holds allocated right now, for every process.
    fn allocated_bytes(&self) -> u64;
    /// Physical cores reserved on the device right now.
    fn reserved_cores(&self) -> u32;
}

/// A runtime over a backend's driver, with a fault injector and a capturing host.
pub type ConfRuntime<B> = Runtime<FaultInjector<<B as Backend>::Driver>, Arc<CapturingHost>>;

/// A fresh runtime on `b`.
pub fn runtime<B: Backend>(b: &B) -> ConfRuntime<B> {
    Runtime::with_host(
        FaultInjector::new(b.driver()),
        Arc::new(CapturingHost::new()),
    )
}

/// The simulator in kernel-driver mode: one trn1 device.
#[derive(Debug)]
pub struct SimBackend {
    machine: Arc<SimMachine>,
}

impl SimBackend {
    /// One emulated-driver trn1 device.
    pub fn new() -> Self {
        Self {
            machine: SimMachine::new(SimConfig::emulate_driver(Instance::Trn1, 1)),
        }
    }
}

impl Default for SimBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl Backend for SimBackend {
    type Driver = SimDriver;
    fn driver(&self) -> SimDriver {
        SimDriver::attach(&self.machine)
    }
    fn allocated_bytes(&self) -> u64 {
        self.machine.total_device_bytes_allocated()
    }
    fn reserved_cores(&self) -> u32 {
        self.machine.reserved().len()
    }
}

/// The MLP of the suite: (batch, d_in, hidden, d_out) = (32, 64, 48, 16), relu, bf16, every
/// weight an input.
pub const MLP_DIMS: (u64, u64, u64, u64) = (32, 64, 48, 16);

/// Deterministic small values, exactly representable in bf16 (the MLP's data, by seed).
pub fn mlp_values(seed: u32, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 17) as f32 / 8.0 - 1.0)
        .collect()
}

/// The MLP as a simulator program.
pub fn mlp_program() -> engine::Program {
    let (batch, d_in, hidden, d_out) = MLP_DIMS;
    kernels::mlp(batch, d_in, hidden, d_out, DType::Bf16, ActFunc::Relu)
        .unwrap_or_else(|e| panic!("the suite's MLP builds: {e}"))
}

/// The MLP as a NEFF carrying its simulator program.
pub fn mlp_neff() -> Vec<u8> {
    neff_from_programs("mlp", &[mlp_program()])
        .unwrap_or_else(|e| panic!("the suite's MLP NEFF builds: {e}"))
}

/// The MLP's inputs (name, bytes).
pub fn mlp_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let (batch, d_in, hidden, d_out) = MLP_DIMS;
    let e = |seed, n: u64| engine::encode_f32(DType::Bf16, &mlp_values(seed, n as usize));
    vec![
        ("x_t", e(1, d_in * batch)),
        ("w1", e(2, d_in * hidden)),
        ("b1", e(3, hidden)),
        ("w2", e(4, hidden * d_out)),
        ("b2", e(5, d_out)),
    ]
}

/// The MLP's output computed by the engine directly (no runtime, no backend).
pub fn mlp_expected() -> Vec<u8> {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, mlp_program()).unwrap_or_else(|e| panic!("{e}"));
    let ins = mlp_inputs();
    let refs: Vec<(&str, &[u8])> = ins.iter().map(|(n, d)| (*n, d.as_slice())).collect();
    let (outs, _) = dev
        .run(&lp, &refs, &ExecOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    outs.into_iter()
        .find(|(n, _)| n == "y_t")
        .map(|(_, d)| d)
        .unwrap_or_default()
}

/// Input and output sets for the MLP on logical core 0.
pub fn try_mlp_sets<D: Driver + Sync, H: nrt_core::Host + Sync>(
    rt: &Runtime<D, H>,
    placement: TensorPlacement,
) -> nrt_core::Result<(TensorSet<'_>, TensorSet<'_>)> {
    let mut inputs = TensorSet::new();
    for (name, data) in mlp_inputs() {
        let t = rt.tensor_allocate(placement, 0, data.len() as u64, name)?;
        t.write(0, &data)?;
        inputs.add(name, t);
    }
    let mut outputs = TensorSet::new();
    let o = rt.tensor_allocate(placement, 0, MLP_DIMS.3 * MLP_DIMS.0 * 2, "y_t")?;
    o.memset(0, 0xEE, o.size())?;
    outputs.add("y_t", o);
    Ok((inputs, outputs))
}

/// [`try_mlp_sets`], which must succeed.
pub fn mlp_sets<D: Driver + Sync, H: nrt_core::Host + Sync>(
    rt: &Runtime<D, H>,
    placement: TensorPlacement,
) -> (TensorSet<'_>, TensorSet<'_>) {
    try_mlp_sets(rt, placement).unwrap_or_else(|e| panic!("{e}"))
}

/// Every byte of tensor `name` of `set`.
pub fn read_all(set: &TensorSet<'_>, name: &str) -> Vec<u8> {
    let t = set.get(name).unwrap_or_else(|e| panic!("{e}"));
    let mut v = vec![0u8; t.size() as usize];
    t.read(0, &mut v).unwrap_or_else(|e| panic!("{e}"));
    v
}

/// Nothing left on the device once the runtime is closed.
#[track_caller]
fn assert_clean<B: Backend>(b: &B, what: &str) {
    assert_eq!(
        b.allocated_bytes(),
        0,
        "{what}: device memory left allocated"
    );
    assert_eq!(b.reserved_cores(), 0, "{what}: cores left reserved");
}

/// The four-state guard, init / close / re-init, and the driver calls each makes.
pub fn lifecycle<B: Backend>(b: &B) {
    let rt = runtime(b);
    assert_err(rt.guard(), NrtStatus::Uninitialized, "NRT uninitialized");
    init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rt.state(), InitState::Init);
    assert_eq!(rt.visible_lnc_count().ok(), Some(2));
    assert_eq!(b.reserved_cores(), 2);
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 1);
    assert_eq!(rt.driver().calls(DriverCall::InitCores), 1);
    // A second init is a no-op.
    init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rt.driver().calls(DriverCall::ReserveCores), 1);
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
    assert_eq!(rt.driver().calls(DriverCall::ShutdownCores), 1);
    assert_err(rt.guard(), NrtStatus::Uninitialized, "NRT uninitialized");
    assert_clean(b, "close");
    // Re-init works and closes clean again.
    init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.reserved_cores(), 2);
    rt.close();
    assert_clean(b, "second close");
}

/// Explicit and implicit core allocation, and what a request beyond the device says.
pub fn allocation<B: Backend>(b: &B) {
    let rt = runtime(b);
    init(&rt, &[("NEURON_RT_VISIBLE_CORES", "1")]).unwrap_or_else(|e| panic!("{e}"));
    let a = rt.allocation().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((a.topology.first_lnc(), a.topology.lnc_count()), (1, 1));
    assert_eq!(b.reserved_cores(), 1);
    assert_err(
        rt.tensor_allocate(TensorPlacement::Device, 1, 4, "far")
            .map(|_| ()),
        NrtStatus::Invalid,
        "Logical Neuron Core 1 is not visible to this process (visible: 0-0)",
    );
    rt.close();
    assert_clean(b, "visible cores");
    let rt = runtime(b);
    init(&rt, &[("NEURON_RT_NUM_CORES", "1")]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(b.reserved_cores(), 1);
    rt.close();
    let rt = runtime(b);
    assert_err(
        init(&rt, &[("NEURON_RT_NUM_CORES", "3")]),
        NrtStatus::Failure,
        "Logical Neuron Core(s) not available - Requested:3 Available:2 Logical Core size 1",
    );
    assert_eq!(rt.state(), InitState::Start);
    assert_clean(b, "refused request");
}

/// Loading and unloading many models; stale handles.
pub fn registry<B: Backend>(b: &B) {
    let rt = runtime(b);
    init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
    let neff = mlp_neff();
    let before = b.allocated_bytes();
    let handles: Vec<_> = (0..16)
        .map(|i| {
            rt.load(&neff, i % 2, -1)
                .unwrap_or_else(|e| panic!("load {i}: {e}"))
        })
        .collect();
    assert_eq!(rt.loaded_models().map(|v| v.len()).ok(), Some(16));
    for &h in &handles {
        rt.unload(h).unwrap_or_else(|e| panic!("{e}"));
    }
    let stale = handles[3];
    assert_err(
        rt.unload(stale),
        NrtStatus::InvalidHandle,
        &format!("Failed to find model: {}", stale.id()),
    );
    assert_eq!(b.allocated_bytes(), before, "unload frees what load staged");
    rt.close();
    assert_clean(b, "registry");
}

/// The MLP computes the engine's output through device and host tensors; tensor operations
/// keep their bounds.
pub fn execute<B: Backend>(b: &B) {
    let rt = runtime(b);
    init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
    let h = rt
        .load(&mlp_neff(), 0, -1)
        .unwrap_or_else(|e| panic!("{e}"));
    let expected = mlp_expected();
    assert!(expected.iter().any(|&b| b != 0));
    for placement in [TensorPlacement::Device, TensorPlacement::Host] {
        let (i, o) = mlp_sets(&rt, placement);
        rt.execute(h, &i, &o).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_all(&o, "y_t"), expected, "{placement:?}");
    }
    // A wrong-size output is refused before anything runs.
    let (i, _) = mlp_sets(&rt, TensorPlacement::Device);
    let mut bad = TensorSet::new();
    bad.add(
        "y_t",
        rt.tensor_allocate(TensorPlacement::Device, 0, 8, "small")
            .unwrap_or_else(|e| panic!("{e}")),
    );
    assert_err(
        rt.execute(h, &i, &bad),
        NrtStatus::Invalid,
        &format!(
            "The output tensor \"y_t\" has 8 bytes, model {} expects 1024",
            h.id()
        ),
    );
    drop((i, bad));
    // Device tensors: write, read, memset, copy, slices, bounds.
    let t = rt
        .tensor_allocate(TensorPlacement::Device, 0, 64, "t")
        .unwrap_or_else(|e| panic!("{e}"));
    t.memset(0, 0, 64).unwrap_or_else(|e| panic!("{e}"));
    t.write(8, &[1, 2, 3, 4]).unwrap_or_else(|e| panic!("{e}"));
    let mut buf = [0u8; 6];
    t.read(7, &mut buf).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(buf, [0, 1, 2, 3, 4, 0]);
    assert_err(
        t.read(60, &mut [0u8; 5]),
        NrtStatus::Invalid,
        "Tensor \"t\": a read of 5 bytes at offset 60 is outside its 64 bytes",
    );
    t.memset(32, 9, 32).unwrap_or_else(|e| panic!("{e}"));
    let s = t.slice(30, 4, "s").unwrap_or_else(|e| panic!("{e}"));
    s.write(0, &[5, 5]).unwrap_or_else(|e| panic!("{e}"));
    let mut four = [0u8; 4];
    t.read(30, &mut four).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(four, [5, 5, 9, 9]);
    let d = rt
        .tensor_allocate(TensorPlacement::Device, 1, 16, "d")
        .unwrap_or_else(|e| panic!("{e}"));
    d.memset(0, 0, 16).unwrap_or_else(|e| panic!("{e}"));
    Tensor::copy(&t, 8, &d, 2, 4).unwrap_or_else(|e| panic!("{e}"));
    let mut eight = [0u8; 8];
    d.read(0, &mut eight).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(eight, [0, 0, 1, 2, 3, 4, 0, 0]);
    drop((s, t, d));
    rt.unload(h).unwrap_or_else(|e| panic!("{e}"));
    rt.close();
    assert_clean(b, "execute");
}

/// Implicit async mode: queued executions run in order and compute the same output.
pub fn async_exec<B: Backend>(b: &B) {
    let rt = runtime(b);
    init(&rt, &[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "2")])
        .unwrap_or_else(|e| panic!("{e}"));
    let h = rt
        .load(&mlp_neff(), 0, -1)
        .unwrap_or_else(|e| panic!("{e}"));
    let (i, o) = mlp_sets(&rt, TensorPlacement::Device);
    rt.execute(h, &i, &o).unwrap_or_else(|e| panic!("{e}"));
    rt.execute(h, &i, &o).unwrap_or_else(|e| panic!("{e}"));
    assert_err_prefix(
        rt.execute(h, &i, &o),
        NrtStatus::QueueFull,
        "The async queue of Neuron Core 0 is full (2 requests)",
    );
    rt.async_drain(0).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(read_all(&o, "y_t"), mlp_expected());
    assert_eq!(rt.driver().calls(DriverCall::Submit), 2);
    drop((i, o));
    rt.unload(h).unwrap_or_else(|e| panic!("{e}"));
    rt.close();
    assert_clean(b, "async");
}

/// Every driver call of a load / execute / unload cycle fails once in turn: the cycle fails
/// with `NRT_FAILURE` (or, for a failed stop, logs and goes on), closing leaves nothing
/// behind, and a retry succeeds.
pub fn injected_driver_faults<B: Backend>(b: &B) {
    let calls = [
        DriverCall::StageSubgraph,
        DriverCall::AllocDevice,
        DriverCall::WriteDevice,
        DriverCall::ReadDevice,
        DriverCall::MemsetDevice,
        DriverCall::Submit,
        DriverCall::UnstageModel,
    ];
    let neff = mlp_neff();
    for call in calls {
        let rt = runtime(b);
        init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
        rt.driver().fail_next(call);
        let result = (|| -> nrt_core::Result<()> {
            let h = rt.load(&neff, 0, -1)?;
            let (i, o) = try_mlp_sets(&rt, TensorPlacement::Device)?;
            rt.execute(h, &i, &o)?;
            let mut out = vec![0u8; 16];
            o.get("y_t")?.read(0, &mut out)?;
            drop((i, o));
            rt.unload(h)
        })();
        let e = result.expect_err(&format!("{call:?} must fail the cycle"));
        // Injected faults classify as non-specific failures.
        assert_eq!(e.status(), NrtStatus::Failure, "{call:?}: {e}");
        rt.close();
        assert_clean(b, &format!("{call:?}"));
        // The same runtime works again.
        init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
        let h = rt.load(&neff, 0, -1).unwrap_or_else(|e| panic!("{e}"));
        let (i, o) = mlp_sets(&rt, TensorPlacement::Device);
        rt.execute(h, &i, &o).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read_all(&o, "y_t"), mlp_expected(), "{call:?}");
        drop((i, o));
        rt.unload(h).unwrap_or_else(|e| panic!("{e}"));
        rt.close();
        assert_clean(b, &format!("{call:?} retry"));
    }
}

/// Every check of the suite, in order.
pub fn all<B: Backend>(b: &B) {
    lifecycle(b);
    allocation(b);
    registry(b);
    execute(b);
    async_exec(b);
    injected_driver_faults(b);
}
