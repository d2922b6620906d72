//! Loom model checks of the lifecycle guard and transitions (init / close racing each other
//! and guarded calls) and of the async queues (schedule, drain, unload, close), through the
//! crate's sync shim: under `--cfg loom` the state word, the published session values, the
//! lifecycle and queue locks, the model's counters and the registry all use loom's types, so
//! every interleaving of their operations (bounded by `LOOM_MAX_PREEMPTIONS`) is explored.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p nrt-core --test loom_lifecycle --release
//! ```
//!
//! The racing calls run on spawned threads (loom explores the interleavings of spawned threads
//! with each other). The driver here is a small in-memory one that counts what is reserved, staged and
//! allocated, so each model ends by checking that nothing is left behind.
#![cfg(loom)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;
use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{
    Arch, CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverError,
    DriverVersion, ErrorKind, ExecRequest, Platform, Reservation, ReserveRequest, StagedModel,
    SubgraphImage,
};
use nrt_core::host::{Host, Platform as HostPlatform};
use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffSpec, NeffTensor, SubgraphSpec};
use nrt_core::state::InitState;
use nrt_core::status::NrtStatus;
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{CompletionHook, Error, FrameworkType, Runtime, RuntimeOptions};

#[derive(Debug)]
struct TestError(&'static str);

impl core::fmt::Display for TestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.0)
    }
}

impl DriverError for TestError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::InvalidArgument
    }
    fn unsupported(operation: &'static str) -> Self {
        TestError(operation)
    }
}

/// An in-memory device of one chip with two cores: device memory is a table of byte vectors
/// (the address is the index), an execution copies input 0 into every output.
#[derive(Debug, Default)]
struct CountingDriver {
    memory: Mutex<Vec<Option<Vec<u8>>>>,
    reserved_cores: AtomicU32,
    reservations: AtomicU32,
    staged: AtomicU32,
    submits: AtomicU32,
}

impl CountingDriver {
    fn live_buffers(&self) -> usize {
        self.memory.lock().unwrap().iter().flatten().count()
    }

    /// Nothing reserved, staged or allocated.
    fn assert_nothing_held(&self) {
        assert_eq!(
            self.reserved_cores.load(Ordering::SeqCst),
            0,
            "cores left reserved"
        );
        assert_eq!(
            self.staged.load(Ordering::SeqCst),
            0,
            "subgraphs left staged"
        );
        assert_eq!(self.live_buffers(), 0, "device memory left allocated");
    }
}

impl Driver for CountingDriver {
    type Error = TestError;

    fn is_funtime(&self) -> bool {
        false
    }
    fn discover(&self) -> Result<DeviceInfo, TestError> {
        Ok(DeviceInfo {
            device_count: 1,
            cores_per_device: 2,
            arch: Arch::V2,
            platform: Platform::Simulator,
        })
    }
    fn override_hw_revision(&self, _: nrt_core::driver::HwRevision) -> Result<(), TestError> {
        Ok(())
    }
    fn driver_version(&self) -> Result<DriverVersion, TestError> {
        Ok(DriverVersion {
            major: 2,
            minor: 22,
        })
    }
    fn compatible_version(&self) -> Result<CompatRange, TestError> {
        Ok(CompatRange { min: 1, max: 20 })
    }
    fn reserve_cores(&self, r: ReserveRequest) -> Result<Reservation, TestError> {
        self.reservations.fetch_add(1, Ordering::SeqCst);
        self.reserved_cores.fetch_add(r.count, Ordering::SeqCst);
        Ok(Reservation::Reserved(CoreBitmap::range(r.start, r.count)))
    }
    fn init_cores(&self, _: &CoreInitParams) -> Result<(), TestError> {
        Ok(())
    }
    fn start_exec_ready(&self, _: &CoreInitParams) -> Result<(), TestError> {
        Ok(())
    }
    fn shutdown_cores(&self, _: &CoreInitParams) -> Result<(), TestError> {
        Ok(())
    }
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), TestError> {
        let prev = self
            .reserved_cores
            .fetch_sub(bitmap.len(), Ordering::SeqCst);
        assert!(prev >= bitmap.len(), "released more cores than reserved");
        Ok(())
    }
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, TestError> {
        self.staged.fetch_add(1, Ordering::SeqCst);
        Ok(StagedModel {
            lnc: image.lnc,
            handle: u64::from(image.index),
            plumbing: false,
        })
    }
    fn stop_model(&self, _: StagedModel) -> Result<(), TestError> {
        Ok(())
    }
    fn unstage_model(&self, _: StagedModel) -> Result<(), TestError> {
        let prev = self.staged.fetch_sub(1, Ordering::SeqCst);
        assert!(prev > 0, "unstaged more than staged");
        Ok(())
    }
    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, TestError> {
        let mut mem = self.memory.lock().unwrap();
        mem.push(Some(vec![0; size as usize]));
        Ok(DeviceBuffer {
            device,
            addr: (mem.len() - 1) as u64,
            size,
        })
    }
    fn free_device(&self, b: DeviceBuffer) -> Result<(), TestError> {
        let mut mem = self.memory.lock().unwrap();
        let slot = mem
            .get_mut(b.addr as usize)
            .expect("free of a forged buffer");
        assert!(slot.take().is_some(), "double free of device memory");
        Ok(())
    }
    fn write_device(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), TestError> {
        let mut mem = self.memory.lock().unwrap();
        let buf = mem[b.addr as usize].as_mut().expect("write after free");
        buf[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn read_device(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<(), TestError> {
        let mem = self.memory.lock().unwrap();
        let buf = mem[b.addr as usize].as_ref().expect("read after free");
        out.copy_from_slice(&buf[offset as usize..offset as usize + out.len()]);
        Ok(())
    }
    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), TestError> {
        let mut tmp = vec![0; len as usize];
        self.read_device(src, src_offset, &mut tmp)?;
        self.write_device(dst, dst_offset, &tmp)
    }
    fn memset_device(
        &self,
        b: DeviceBuffer,
        offset: u64,
        v: u8,
        len: u64,
    ) -> Result<(), TestError> {
        self.write_device(b, offset, &vec![v; len as usize])
    }
    fn submit(&self, req: &ExecRequest<'_>) -> Result<(), TestError> {
        self.submits.fetch_add(1, Ordering::SeqCst);
        let input = req.inputs.first().expect("an input binding");
        let mut data = vec![0; input.size as usize];
        self.read_device(input.buffer, input.offset, &mut data)?;
        for out in req.outputs {
            let n = data.len().min(out.size as usize);
            self.write_device(out.buffer, out.offset, &data[..n])?;
        }
        Ok(())
    }
}

/// A host whose waits yield to loom's scheduler (a spin would never let the other thread run).
#[derive(Debug, Default)]
struct LoomHost;

#[derive(Debug, Default)]
struct LoomPlatform;

impl HostPlatform for LoomPlatform {
    fn relax(&self) {
        thread::yield_now();
    }
}

impl Host for LoomHost {
    type Platform = LoomPlatform;
    fn platform(&self) -> &LoomPlatform {
        &LoomPlatform
    }
}

type Rt = Runtime<CountingDriver, LoomHost>;

/// A runtime with a registry of one chunk (the default capacity's chunk table would be loads
/// enough to exceed loom's branch bound on every scan of it).
fn runtime() -> Arc<Rt> {
    let options = RuntimeOptions {
        max_models: 2,
        ..RuntimeOptions::default()
    };
    Arc::new(Runtime::with_options(
        CountingDriver::default(),
        LoomHost,
        options,
    ))
}

/// Runs `f` on a new loom thread with a handle of the runtime.
fn on_thread<R: 'static>(
    rt: &Arc<Rt>,
    f: impl FnOnce(&Rt) -> R + 'static,
) -> thread::JoinHandle<R> {
    let rt = Arc::clone(rt);
    thread::spawn(move || f(&rt))
}

const VARS: [(&str, &str); 1] = [("NEURON_RT_NUM_CORES", "1")];

fn init(rt: &Rt) -> nrt_core::Result<()> {
    rt.init(FrameworkType::NoFw, "", "", &VARS)
}

/// A NEFF with one input `x` and one output `y` of 8 bytes each.
fn neff_bytes() -> Vec<u8> {
    let tensor = |name: &str, usage, var_id| NeffTensor {
        name: name.into(),
        usage,
        size: 8,
        dtype: Dtype::Float32,
        shape: vec![2],
        var_id,
    };
    neff::write(&NeffSpec {
        name: "loom".into(),
        uuid: [7; 16],
        version: (2, 0),
        feature_bits: neff::NeffFeatures::empty(),
        lnc_size: 1,
        num_tpb: 1,
        gzip: false,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![],
        }],
        tensors: vec![
            tensor("x", TensorUsage::Input, 1),
            tensor("y", TensorUsage::Output, 2),
        ],
    })
    .unwrap()
}

fn assert_status(e: &Error, allowed: &[(NrtStatus, &str)]) {
    assert!(
        allowed
            .iter()
            .any(|(s, m)| e.status() == *s && e.message() == *m),
        "unexpected error {:?}: {}",
        e.status(),
        e.message()
    );
}

const UNINIT: (NrtStatus, &str) = (NrtStatus::Uninitialized, "NRT uninitialized");
const CLOSED: (NrtStatus, &str) = (NrtStatus::Closed, "NRT already closed");
const MISSING: (NrtStatus, &str) = (NrtStatus::InvalidHandle, "Failed to find model: 1");

/// Device input and output tensors of the test model, input set to `value`.
fn tensors(rt: &Rt, value: u8) -> nrt_core::Result<(TensorSet<'_>, TensorSet<'_>)> {
    let x = rt.tensor_allocate(TensorPlacement::Device, 0, 8, "x")?;
    let y = rt.tensor_allocate(TensorPlacement::Device, 0, 8, "y")?;
    x.write(0, &[value; 8])?;
    let (mut ins, mut outs) = (TensorSet::new(), TensorSet::new());
    ins.add("x", x);
    outs.add("y", y);
    Ok((ins, outs))
}

fn output(outs: &TensorSet<'_>) -> [u8; 8] {
    let mut y = [0; 8];
    outs.get("y").unwrap().read(0, &mut y).unwrap();
    y
}

/// init racing a guarded call: the call sees START (`NRT_UNINITIALIZED`) or INIT (its answer),
/// never a half-initialised session; the runtime ends INIT with one reservation.
#[test]
fn init_racing_a_guarded_call() {
    loom::model(|| {
        let rt = runtime();
        let caller = {
            let rt = Arc::clone(&rt);
            thread::spawn(move || match rt.visible_lnc_count() {
                Ok(n) => {
                    assert_eq!(n, 1);
                    assert_eq!(rt.topology().unwrap().lnc_count(), 1);
                }
                Err(e) => assert_status(&e, &[UNINIT]),
            })
        };
        let initer = on_thread(&rt, move |rt| init(rt).unwrap());
        caller.join().unwrap();
        initer.join().unwrap();
        assert_eq!(rt.state(), InitState::Init);
        assert_eq!(rt.driver().reservations.load(Ordering::SeqCst), 1);
        rt.close();
        rt.driver().assert_nothing_held();
    });
}

/// Two racing inits bring the runtime up once: both succeed, one reservation is made.
#[test]
fn two_inits_bring_up_once() {
    loom::model(|| {
        let rt = runtime();
        let initers: Vec<_> = (0..2)
            .map(|_| on_thread(&rt, move |rt| init(rt).unwrap()))
            .collect();
        for t in initers {
            t.join().unwrap();
        }
        assert_eq!(rt.state(), InitState::Init);
        assert_eq!(rt.driver().reservations.load(Ordering::SeqCst), 1);
        assert_eq!(rt.driver().reserved_cores.load(Ordering::SeqCst), 1);
        rt.close();
        rt.driver().assert_nothing_held();
    });
}

/// init racing close: init either finds INIT (nothing to do), sees the teardown (CLOSED), or
/// brings a fresh session up after it; close leaves START; nothing is reserved twice.
#[test]
fn init_racing_close() {
    loom::model(|| {
        let rt = runtime();
        init(&rt).unwrap();
        let closer = on_thread(&rt, move |rt| rt.close());
        let initer = {
            let rt = Arc::clone(&rt);
            thread::spawn(move || {
                if let Err(e) = init(&rt) {
                    assert_status(&e, &[CLOSED]);
                }
            })
        };
        closer.join().unwrap();
        initer.join().unwrap();
        let state = rt.state();
        assert!(
            matches!(state, InitState::Init | InitState::Start),
            "{state:?}"
        );
        let cores = rt.driver().reserved_cores.load(Ordering::SeqCst);
        assert_eq!(cores, u32::from(state == InitState::Init));
        rt.close();
        rt.driver().assert_nothing_held();
    });
}

/// close racing a load, tensor allocation and execute: each call either completes (and the
/// execution is right) or fails with the guard's status; close unloads whatever the load
/// registered, waiting for the execution's reference; nothing stays staged or allocated.
#[test]
fn close_racing_load_and_execute() {
    let neff = neff_bytes();
    loom::model(move || {
        let rt = runtime();
        init(&rt).unwrap();
        let worker = {
            let (rt, neff) = (Arc::clone(&rt), neff.clone());
            thread::spawn(move || {
                let h = match rt.load(&neff, 0, 1) {
                    Ok(h) => h,
                    Err(e) => return assert_status(&e, &[CLOSED, UNINIT]),
                };
                let (ins, outs) = match tensors(&rt, 5) {
                    Ok(t) => t,
                    Err(e) => return assert_status(&e, &[CLOSED, UNINIT]),
                };
                // An execute that passed the guard before CLOSED may find the model already
                // swept by close: the handle misses.
                match rt.execute(h, &ins, &outs) {
                    Ok(()) => assert_eq!(output(&outs), [5; 8]),
                    Err(e) => assert_status(&e, &[CLOSED, UNINIT, MISSING]),
                }
            })
        };
        let closer = on_thread(&rt, move |rt| rt.close());
        worker.join().unwrap();
        closer.join().unwrap();
        assert_eq!(rt.state(), InitState::Start);
        rt.driver().assert_nothing_held();
    });
}

fn count_completion(ctx: usize, _seq: u64, status: NrtStatus) {
    // SAFETY (test): ctx is `Arc::as_ptr` of a `Completions` the model keeps alive until every
    // worker has joined.
    let c = unsafe { &*(ctx as *const Completions) };
    c.calls.fetch_add(1, Ordering::SeqCst);
    if status == NrtStatus::Success {
        c.succeeded.fetch_add(1, Ordering::SeqCst);
    }
}

/// A completion hook counting into `done` (which must outlive the requests).
fn counting_hook(done: &Arc<Completions>) -> CompletionHook {
    CompletionHook {
        call: count_completion,
        ctx: Arc::as_ptr(done) as usize,
    }
}

#[derive(Debug, Default)]
struct Completions {
    calls: AtomicUsize,
    succeeded: AtomicUsize,
}

/// An explicit-async schedule racing close: a request that was accepted completes exactly once
/// (close drains the queues first), a refused one gets the guard's status and no completion.
#[test]
fn schedule_racing_close() {
    let neff = neff_bytes();
    loom::model(move || {
        let rt = runtime();
        init(&rt).unwrap();
        let h = rt.load(&neff, 0, 1).unwrap();
        let done = Arc::new(Completions::default());
        let accepted = Arc::new(AtomicUsize::new(0));
        let scheduler = {
            let (rt, done, accepted) = (Arc::clone(&rt), Arc::clone(&done), Arc::clone(&accepted));
            thread::spawn(move || {
                let (ins, outs) = match tensors(&rt, 9) {
                    Ok(t) => t,
                    Err(e) => return assert_status(&e, &[CLOSED, UNINIT]),
                };
                let hook = counting_hook(&done);
                match rt.execute_schedule(h, &ins, &outs, 0, Some(hook)) {
                    Ok(_) => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        // The tensors are dropped while the request may still be queued: their
                        // device memory is freed when the request completes.
                    }
                    Err(e) => assert_status(&e, &[CLOSED, UNINIT, MISSING]),
                }
            })
        };
        let closer = on_thread(&rt, move |rt| rt.close());
        scheduler.join().unwrap();
        closer.join().unwrap();
        let accepted = accepted.load(Ordering::SeqCst);
        assert_eq!(done.calls.load(Ordering::SeqCst), accepted, "completions");
        assert_eq!(done.succeeded.load(Ordering::SeqCst), accepted);
        assert_eq!(rt.async_pending(), 0);
        rt.driver().assert_nothing_held();
    });
}

/// An explicit-async schedule racing unload of its model, with a worker running the queue:
/// unload drains the model's queued work first, so an accepted request completes exactly once
/// and succeeds; after the unload the handle is gone.
#[test]
fn schedule_racing_unload_and_a_worker() {
    let neff = neff_bytes();
    loom::model(move || {
        let rt = runtime();
        init(&rt).unwrap();
        let h = rt.load(&neff, 0, 1).unwrap();
        let done = Arc::new(Completions::default());
        let (ins, outs) = tensors(&rt, 3).unwrap();
        let hook = counting_hook(&done);
        let accepted = match rt.execute_schedule(h, &ins, &outs, 0, Some(hook)) {
            Ok(_) => 1,
            Err(e) => panic!("{e}"),
        };
        let worker = {
            let rt = Arc::clone(&rt);
            thread::spawn(move || {
                rt.process_async();
            })
        };
        let unloader = on_thread(&rt, move |rt| rt.unload(h).unwrap());
        worker.join().unwrap();
        unloader.join().unwrap();
        assert_eq!(done.calls.load(Ordering::SeqCst), accepted);
        assert_eq!(done.succeeded.load(Ordering::SeqCst), accepted);
        assert_eq!(output(&outs), [3; 8]);
        match rt.model(h) {
            Ok(_) => panic!("the unloaded model still resolves"),
            Err(e) => assert_status(&e, &[MISSING]),
        }
        drop((ins, outs));
        rt.close();
        rt.driver().assert_nothing_held();
    });
}

/// Two requests queued; a worker runs the queues while another thread drains them: every
/// request runs exactly once (never by both), in order, and both calls return.
#[test]
fn drain_racing_a_worker() {
    let neff = neff_bytes();
    loom::model(move || {
        let rt = runtime();
        init(&rt).unwrap();
        let h = rt.load(&neff, 0, 1).unwrap();
        let done = Arc::new(Completions::default());
        let (ins, outs) = tensors(&rt, 4).unwrap();
        let hook = counting_hook(&done);
        let first = rt.execute_schedule(h, &ins, &outs, 0, Some(hook)).unwrap();
        let second = rt.execute_schedule(h, &ins, &outs, 0, Some(hook)).unwrap();
        let worker = {
            let rt = Arc::clone(&rt);
            thread::spawn(move || {
                rt.process_async();
            })
        };
        let drainer = on_thread(&rt, move |rt| rt.async_drain(0).unwrap());
        worker.join().unwrap();
        drainer.join().unwrap();
        assert_eq!(done.calls.load(Ordering::SeqCst), 2);
        assert_eq!(done.succeeded.load(Ordering::SeqCst), 2);
        assert_eq!(rt.driver().submits.load(Ordering::SeqCst), 2);
        assert!(rt.is_completed(first).unwrap() && rt.is_completed(second).unwrap());
        assert_eq!(output(&outs), [4; 8]);
        drop((ins, outs));
        rt.unload(h).unwrap();
        rt.close();
        rt.driver().assert_nothing_held();
    });
}
