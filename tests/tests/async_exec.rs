//! Explicit async (`nrta_*` v3) and the implicit-async mode on the simulator; unload and close
//! with work in flight. The model is a built two-subgraph NEFF without a simulator program
//! (`plumbing_matmul_neff`: the compiler fixture's I/O, plumbing mode).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nrt_core::runtime::{EXPLICIT_QUEUE_DEPTH, seq_number, seq_xu_id};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{CompletionHook, NrtStatus, Runtime, Xu};
use nrt_host::CapturingHost;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::models::plumbing_matmul_neff;
use nrt_tests::{assert_err, assert_err_prefix, init};

type Rt = Runtime<SimDriver, Arc<CapturingHost>>;

fn runtime(vars: &[(&str, &str)]) -> (Rt, Arc<SimMachine>) {
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn2, 1));
    let rt = Runtime::with_host(SimDriver::attach(&machine), Arc::new(CapturingHost::new()));
    init(&rt, vars).unwrap();
    (rt, machine)
}

fn sets(rt: &Rt) -> (TensorSet<'_>, TensorSet<'_>) {
    let mut i = TensorSet::new();
    i.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Device, 0, 65536, "x")
            .unwrap(),
    );
    i.add(
        "y",
        rt.tensor_allocate(TensorPlacement::Device, 0, 65536, "y")
            .unwrap(),
    );
    let mut o = TensorSet::new();
    let out = rt
        .tensor_allocate(TensorPlacement::Device, 0, 32768, "output0")
        .unwrap();
    out.memset(0, 0xAB, 32768).unwrap();
    o.add("output0", out);
    (i, o)
}

static COMPLETIONS: Mutex<Vec<(u64, NrtStatus)>> = Mutex::new(Vec::new());

fn record(ctx: usize, seq: u64, status: NrtStatus) {
    COMPLETIONS.lock().unwrap().push((seq, status));
    // The C layer writes `*exec_ret` through the context word the same way.
    // SAFETY-free here: ctx indexes a static array of statuses.
    STATUSES[ctx].store(status.code() + 1, Ordering::SeqCst);
}

static STATUSES: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];

#[test]
fn explicit_async_schedules_in_order_and_writes_status_at_completion() {
    let (rt, machine) = runtime(&[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt);
    COMPLETIONS.lock().unwrap().clear();
    let seqs: Vec<u64> = (0..5)
        .map(|k| {
            rt.execute_schedule(
                h,
                &i,
                &o,
                0,
                Some(CompletionHook {
                    call: record,
                    ctx: k,
                }),
            )
            .unwrap()
        })
        .collect();
    // Sequence ids: the compute unit of core 0 in the top 16 bits, numbers 1.. in the low 48.
    assert!(seqs.iter().all(|&s| seq_xu_id(s) == Xu::Compute as u16));
    assert_eq!(
        seqs.iter().map(|&s| seq_number(s)).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    // Nothing ran yet: statuses untouched, not completed.
    assert!(STATUSES[..5].iter().all(|s| s.load(Ordering::SeqCst) == 0));
    assert!(!rt.is_completed(seqs[0]).unwrap());
    assert_eq!(
        seq_number(rt.last_completed_sequence(0, Xu::Compute, 0).unwrap()),
        0
    );
    // A host worker runs the queue.
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| rt.run_async_worker(&stop));
        while !rt.is_completed(seqs[4]).unwrap() {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::SeqCst);
    });
    assert!(seqs.iter().all(|&s| rt.is_completed(s).unwrap()));
    let done = COMPLETIONS.lock().unwrap().clone();
    assert_eq!(
        done.iter().map(|d| d.0).collect::<Vec<_>>(),
        seqs,
        "in order"
    );
    assert!(done.iter().all(|d| d.1 == NrtStatus::Success));
    assert!(STATUSES[..5].iter().all(|s| s.load(Ordering::SeqCst) == 1));
    assert_eq!(
        rt.last_completed_sequence(0, Xu::Compute, 0).unwrap(),
        seqs[4]
    );
    assert_eq!(machine.executions(), 5);
    let mut out = vec![1u8; 32768];
    o.get("output0").unwrap().read(0, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 0));
}

#[test]
fn explicit_async_errors() {
    let (rt, _m) = runtime(&[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (mut i, o) = sets(&rt);
    assert_err(
        rt.execute_schedule(h, &i, &o, 1, None).map(|_| ()),
        NrtStatus::Invalid,
        "The compute execution unit has only queue 0, not 1",
    );
    assert_err(
        rt.is_completed(nrt_core::runtime::seq_id(1, 7)).map(|_| ()),
        NrtStatus::Invalid,
        "Invalid sequence id 0x1000000000007",
    );
    assert_err(
        rt.last_completed_sequence(9, Xu::Compute, 0).map(|_| ()),
        NrtStatus::Invalid,
        "Logical Neuron Core 9 is not visible to this process",
    );
    // The queue is bounded.
    for _ in 0..EXPLICIT_QUEUE_DEPTH {
        rt.execute_schedule(h, &i, &o, 0, None).unwrap();
    }
    assert_err_prefix(
        rt.execute_schedule(h, &i, &o, 0, None).map(|_| ()),
        NrtStatus::QueueFull,
        "The async queue of Neuron Core 0 is full (64 requests)",
    );
    assert_eq!(rt.process_async(), EXPLICIT_QUEUE_DEPTH);
    rt.execute_schedule(h, &i, &o, 0, None).unwrap();
    // Host tensors are refused.
    i.add(
        "x",
        rt.tensor_allocate(TensorPlacement::Host, 0, 65536, "x")
            .unwrap(),
    );
    assert_err(
        rt.execute_schedule(h, &i, &o, 0, None).map(|_| ()),
        NrtStatus::Invalid,
        &format!(
            "Async APIs only supports device allocated tensors: tensor \"x\" of model {} is in host memory",
            h.id()
        ),
    );
}

static CALLBACKS: AtomicUsize = AtomicUsize::new(0);

fn on_complete(params: usize, _model: u32, vnc: u32, _job: u64, status: NrtStatus) {
    assert_eq!(params, 42);
    assert_eq!(vnc, 0);
    assert_eq!(status, NrtStatus::Success);
    CALLBACKS.fetch_add(1, Ordering::SeqCst);
}

#[test]
fn implicit_async_queues_are_bounded_and_drain() {
    let (rt, machine) = runtime(&[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "2")]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt);
    rt.register_async_exec_callback(on_complete, 42).unwrap();
    rt.execute(h, &i, &o).unwrap();
    rt.execute(h, &i, &o).unwrap();
    assert_eq!(machine.executions(), 0, "enqueued, not run");
    assert_err_prefix(
        rt.execute(h, &i, &o),
        NrtStatus::QueueFull,
        "The async queue of Neuron Core 0 is full (2 requests)",
    );
    rt.async_drain(0).unwrap();
    assert_eq!(machine.executions(), 2);
    assert_eq!(CALLBACKS.load(Ordering::SeqCst), 2);
    // Same outputs as the synchronous mode (the plumbing zero-fill).
    let mut out = vec![1u8; 32768];
    o.get("output0").unwrap().read(0, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 0));
    assert_err(
        rt.async_drain(4),
        NrtStatus::Invalid,
        "Logical Neuron Core 4 is not visible to this process (visible: 0-3)",
    );
}

#[test]
fn unload_runs_the_models_queued_executions_first() {
    let (rt, machine) = runtime(&[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "8")]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt);
    for _ in 0..5 {
        rt.execute(h, &i, &o).unwrap();
    }
    let seq = rt.execute_schedule(h, &i, &o, 0, None).unwrap();
    rt.unload(h).unwrap();
    assert_eq!(
        machine.executions(),
        6,
        "queued work ran before the model went away"
    );
    assert!(rt.is_completed(seq).unwrap());
    assert_eq!(rt.async_pending(), 0);
}

#[test]
fn close_with_queued_work_and_concurrent_callers() {
    let (rt, machine) = runtime(&[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4")]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt);
    for _ in 0..3 {
        rt.execute(h, &i, &o).unwrap();
    }
    let stop = AtomicBool::new(false);
    let calls = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    for r in [
                        rt.model(h).map(|_| ()),
                        rt.io_tensor_count(h).map(|_| ()),
                        rt.execute(h, &i, &o),
                    ] {
                        if let Err(e) = r {
                            assert!(
                                matches!(
                                    e.status(),
                                    NrtStatus::Closed
                                        | NrtStatus::Uninitialized
                                        | NrtStatus::InvalidHandle
                                        | NrtStatus::QueueFull
                                ),
                                "{e:?}"
                            );
                        }
                    }
                    calls.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        while calls.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        rt.close();
        stop.store(true, Ordering::SeqCst);
    });
    assert!(machine.staged_models().is_empty());
    assert!(machine.executions() >= 3);
}

#[test]
fn device_memory_freed_while_queued_is_released_when_the_executions_complete() {
    let (rt, machine) = runtime(&[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt);
    let output_addr = o.get("output0").unwrap().device_location().unwrap().0.addr;
    let seqs: Vec<u64> = (0..2)
        .map(|_| rt.execute_schedule(h, &i, &o, 0, None).unwrap())
        .collect();
    let with_tensors = machine.device_bytes_allocated(0);
    // Every tensor dropped while both executions are queued (no worker runs them yet).
    drop((i, o));
    assert_eq!(
        machine.device_bytes_allocated(0),
        with_tensors,
        "nothing is freed under a queued execution"
    );
    let fresh = rt
        .tensor_allocate(TensorPlacement::Device, 0, 32768, "fresh")
        .unwrap();
    let fresh_addr = fresh.device_location().unwrap().0.addr;
    assert_ne!(
        fresh_addr, output_addr,
        "the queued output is not handed out again"
    );
    assert_eq!(machine.device_bytes_allocated(0), with_tensors + 32768);
    // The executions complete; then the three buffers (64 KiB, 64 KiB, 32 KiB) are freed.
    assert_eq!(rt.process_async(), 2);
    assert!(seqs.iter().all(|&s| rt.is_completed(s).unwrap()));
    assert_eq!(
        machine.device_bytes_allocated(0),
        with_tensors + 32768 - (65536 + 65536 + 32768)
    );
    assert_eq!(machine.executions(), 2);
    drop(fresh);
    assert_eq!(
        machine.device_bytes_allocated(0),
        with_tensors - (65536 + 65536 + 32768)
    );
}

#[test]
fn a_model_on_trn2_runs_on_the_two_physical_cores_of_its_logical_core() {
    let (rt, _m) = runtime(&[]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    assert_eq!(rt.model_core_count(h).unwrap(), 2);
    rt.unload(h).unwrap();
    assert_err(
        rt.model_core_count(h).map(|_| ()),
        NrtStatus::InvalidHandle,
        &format!("Failed to find model: {}", h.id()),
    );
}
