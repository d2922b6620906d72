//! The runtime's event seam (`nrt_core::events`) on the simulator: the exact events of a load,
//! a synchronous execution with host tensors (their device clones are written and read back),
//! `execute_repeat`, implicit-async executions (sequence ids of the implicit queue), an error and
//! an unload; and nothing at all once the hook is removed. The model is the plumbing matmul
//! NEFF (two subgraphs on a trn2 logical core).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex, MutexGuard};

use nrt_core::Runtime;
use nrt_core::events::RuntimeEvent;
use nrt_core::runtime::seq_id;
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_host::CapturingHost;
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};
use nrt_tests::init;
use nrt_tests::models::plumbing_matmul_neff;

type Rt = Runtime<SimDriver, Arc<CapturingHost>>;

/// The events seen, one line each.
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The tests of this file share `SEEN`: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn hook(e: &RuntimeEvent<'_>) {
    let line = match *e {
        RuntimeEvent::ModelLoaded { model, lnc, name } => format!("load m{model} nc{lnc} {name}"),
        RuntimeEvent::ModelUnloaded { model, lnc } => format!("unload m{model} nc{lnc}"),
        RuntimeEvent::ExecSubmitted { model, lnc, seq } => {
            format!("submit m{model} nc{lnc} s{seq:#x}")
        }
        RuntimeEvent::ExecStarted {
            model,
            lnc,
            seq,
            inputs,
            ..
        } => format!("start m{model} nc{lnc} s{seq:#x} in{}", inputs.len()),
        RuntimeEvent::ExecCompleted {
            model,
            lnc,
            seq,
            status,
            staged,
            outputs,
            ..
        } => format!(
            "complete m{model} nc{lnc} s{seq:#x} {} sg{} out{}",
            status.name(),
            staged.len(),
            outputs.len()
        ),
        RuntimeEvent::TensorRead { nc, bytes } => format!("read {nc:?} {bytes}"),
        RuntimeEvent::TensorWrite { nc, bytes } => format!("write {nc:?} {bytes}"),
        RuntimeEvent::TensorCopy { nc, bytes } => format!("copy {nc:?} {bytes}"),
        RuntimeEvent::Error { status, .. } => format!("error {}", status.name()),
    };
    SEEN.lock().unwrap().push(line);
}

fn take() -> Vec<String> {
    std::mem::take(&mut *SEEN.lock().unwrap())
}

fn runtime(vars: &[(&str, &str)]) -> Rt {
    let machine = SimMachine::new(SimConfig::funtime(Instance::Trn2, 1));
    let rt = Runtime::with_host(SimDriver::attach(&machine), Arc::new(CapturingHost::new()));
    init(&rt, vars).unwrap();
    rt
}

/// The matmul's I/O ("x", "y" of 65536 bytes, "output0" of 32768) in `placement`.
fn sets(rt: &Rt, placement: TensorPlacement) -> (TensorSet<'_>, TensorSet<'_>) {
    let mut i = TensorSet::new();
    for name in ["x", "y"] {
        i.add(name, rt.tensor_allocate(placement, 0, 65536, name).unwrap());
    }
    let mut o = TensorSet::new();
    o.add(
        "output0",
        rt.tensor_allocate(placement, 0, 32768, "output0").unwrap(),
    );
    (i, o)
}

#[test]
fn synchronous_executions_report_every_step_in_order() {
    let _s = serial();
    let rt = runtime(&[]);
    rt.set_event_hook(Some(hook));
    take();
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let m = h.id();
    // Host tensors: each execution writes the inputs' device clones (in 4096-byte chunks) and
    // reads the output's back.
    let (i, o) = sets(&rt, TensorPlacement::Host);
    rt.execute(h, &i, &o).unwrap();
    let mut want = vec![format!("load m{m} nc0 plumbing_matmul")];
    want.extend((0..32).map(|_| "write Some(0) 4096".to_owned()));
    want.push(format!("submit m{m} nc0 s0x1"));
    want.push(format!("start m{m} nc0 s0x1 in2"));
    want.push(format!("complete m{m} nc0 s0x1 NRT_SUCCESS sg2 out1"));
    want.extend((0..8).map(|_| "read Some(0) 4096".to_owned()));
    assert_eq!(take(), want);
    // Device tensors, repeated: one submit/start/complete per run, sequence ids counting on.
    let (i, o) = sets(&rt, TensorPlacement::Device);
    rt.execute_repeat(h, &i, &o, 2).unwrap();
    let mut want = Vec::new();
    for s in 2..=3 {
        want.push(format!("submit m{m} nc0 s{s:#x}"));
        want.push(format!("start m{m} nc0 s{s:#x} in2"));
        want.push(format!("complete m{m} nc0 s{s:#x} NRT_SUCCESS sg2 out1"));
    }
    assert_eq!(take(), want);
    // A resolution failure is an error and no execution.
    assert!(rt.execute(h, &TensorSet::new(), &o).is_err());
    assert_eq!(take(), ["error NRT_INVALID"]);
    drop((i, o));
    rt.unload(h).unwrap();
    assert_eq!(take(), [format!("unload m{m} nc0")]);
    // Without the hook nothing is reported (and no sequence id is counted).
    rt.set_event_hook(None);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let (i, o) = sets(&rt, TensorPlacement::Device);
    rt.execute(h, &i, &o).unwrap();
    drop((i, o));
    rt.unload(h).unwrap();
    assert!(take().is_empty());
}

#[test]
fn implicit_async_executions_carry_the_implicit_queue_sequence_ids() {
    let _s = serial();
    let rt = runtime(&[("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "4")]);
    let h = rt.load(&plumbing_matmul_neff(), 0, -1).unwrap();
    let m = h.id();
    let (i, o) = sets(&rt, TensorPlacement::Device);
    rt.set_event_hook(Some(hook));
    take();
    rt.execute(h, &i, &o).unwrap();
    rt.execute(h, &i, &o).unwrap();
    // Both are queued before either runs (no worker in this test).
    let (s1, s2) = (seq_id(u16::MAX, 1), seq_id(u16::MAX, 2));
    assert_eq!(
        take(),
        [
            format!("submit m{m} nc0 s{s1:#x}"),
            format!("submit m{m} nc0 s{s2:#x}")
        ]
    );
    rt.async_drain(0).unwrap();
    assert_eq!(
        take(),
        [
            format!("start m{m} nc0 s{s1:#x} in2"),
            format!("complete m{m} nc0 s{s1:#x} NRT_SUCCESS sg2 out1"),
            format!("start m{m} nc0 s{s2:#x} in2"),
            format!("complete m{m} nc0 s{s2:#x} NRT_SUCCESS sg2 out1"),
        ]
    );
    rt.set_event_hook(None);
}
