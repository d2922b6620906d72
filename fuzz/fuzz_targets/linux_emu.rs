//! The Linux backend (`nrt-linux`, unmodified) driven through `nrt_core::Runtime` against the
//! device emulator (`nrt-emu`), with driver ioctls failing at the syscall boundary.
//!
//! Input: an instance family (trn1, inf2 or trn2) and 1–2 devices; a fault plan of up to four
//! (ordinal, errno) pairs — the ordinal-th driver ioctl of the run (1..=200) fails — and
//! optionally one request-wide fault (every ioctl of one request fails), the request drawn from
//! the emulator's ABI table restricted to the requests the backend defines
//! (`nrt_linux::sys::REQUESTS`), errnos from a fixed list (EIO, ENOMEM, EINVAL, EBUSY, EFAULT,
//! EAGAIN, ENODEV, EPERM, EINTR, ENOTTY); then at most 24 operations on one runtime over
//! `LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root())`: init (with or without
//! `NEURON_RT_*` variables the backend sees through the init options: core reset, execution
//! timeout, visible / number of cores, logical-core size), close, re-init, load of kernel-built
//! NEFFs (elementwise add, a 4×4×4 matmul, the add on two cores), mutated copies of them and
//! garbage bytes, unload with issued / stale / forged handles, device and host tensors of small
//! sizes, read / write / memset / copy at arbitrary offsets, tensor sets, execute with the
//! model's own tensor sets (inputs written, output read back) or with arbitrary ones.
//!
//! Everything runs inside `InProcess::run` (the seccomp filter stays on the fresh thread it
//! spawns). Invariants (a panic is a finding): no crash, no sanitizer report; every error has
//! a status the runtime defines for it (never `NRT_SUCCESS`, never a status of a family this
//! runtime cannot produce over this backend, such as queue or collectives statuses); the state
//! stays START or INIT; an execute with the model's own sets that succeeds produced exactly the
//! host-computed reference, and when no driver ioctl has failed yet in the run, the model is
//! live and its load used core 0 or any core, it must succeed; after the final close and the
//! runtime dropped the emulator holds nothing: no bytes allocated, no allocations, no reserved
//! cores, no attached process (checked inside the run and on the final accounting, as
//! `tests/tests/linux_ioctl_faults.rs` does).
#![no_main]

use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nrt_core::host::NoHost;
use nrt_core::tensor::{Tensor, TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, InitState, ModelHandle, NrtStatus, Runtime, RuntimeOptions};
use nrt_emu::{Accounting, FaultPlan, InProcess, InProcessConfig};
use nrt_linux::LinuxDriver;
use nrt_sim::Instance;
use nrt_sim::engine::{DType, kernels};

type Rt = Runtime<LinuxDriver, NoHost>;

/// A NEFF the harness builds, with the I/O it expects.
struct Model {
    bytes: Vec<u8>,
    /// Input names and their bytes (f32, little-endian).
    inputs: Vec<(&'static str, Vec<u8>)>,
    /// The output's name and its reference bytes, computed on the host.
    output: (&'static str, Vec<u8>),
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The models: elementwise add 2×4 f32 (a, b → out), a 4×4×4 f32 matmul (lhs_t [K, M], rhs
/// [K, N] → out [M, N]), the add on two physical cores (LNC 2). Small integers, so every sum
/// is exact.
fn models() -> &'static [Model] {
    static MODELS: OnceLock<Vec<Model>> = OnceLock::new();
    MODELS.get_or_init(|| {
        let add = kernels::elementwise(kernels::Elementwise::Add, 2, 4, DType::F32)
            .expect("elementwise kernel");
        let mm = kernels::matmul(4, 4, 4, DType::F32, DType::F32).expect("matmul kernel");
        let a: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
        let b: Vec<f32> = (0..8).map(|i| (i * 3 % 5) as f32).collect();
        let sum: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        let lhs_t: Vec<f32> = (0..16).map(|i| (i % 7) as f32 - 2.0).collect();
        let rhs: Vec<f32> = (0..16).map(|i| (i * 5 % 9) as f32 - 4.0).collect();
        let mut prod = vec![0f32; 16];
        for m in 0..4 {
            for n in 0..4 {
                let mut acc = 0.0f32;
                for k in 0..4 {
                    acc += lhs_t[k * 4 + m] * rhs[k * 4 + n];
                }
                prod[m * 4 + n] = acc;
            }
        }
        let add_io = || {
            (
                vec![("a", f32_bytes(&a)), ("b", f32_bytes(&b))],
                ("out", f32_bytes(&sum)),
            )
        };
        let (add_in, add_out) = add_io();
        let (add2_in, add2_out) = add_io();
        vec![
            Model {
                bytes: nrt_sim::neff::neff_from_programs("add", std::slice::from_ref(&add))
                    .expect("add NEFF"),
                inputs: add_in,
                output: add_out,
            },
            Model {
                bytes: nrt_sim::neff::neff_from_programs("mm", &[mm]).expect("matmul NEFF"),
                inputs: vec![("lhs_t", f32_bytes(&lhs_t)), ("rhs", f32_bytes(&rhs))],
                output: ("out", f32_bytes(&prod)),
            },
            Model {
                bytes: nrt_sim::neff::neff_from_programs("add2", &[add.clone(), add])
                    .expect("LNC-2 NEFF"),
                inputs: add2_in,
                output: add2_out,
            },
        ]
    })
}

/// The driver requests the backend defines, as the emulator's ABI table numbers them.
fn backend_requests() -> &'static [u32] {
    static REQUESTS: OnceLock<Vec<u32>> = OnceLock::new();
    REQUESTS.get_or_init(|| {
        let v: Vec<u32> = nrt_emu::abi::REQUESTS
            .iter()
            .map(|r| r.request)
            .filter(|n| nrt_linux::sys::REQUESTS.iter().any(|b| b.number == *n))
            .collect();
        assert!(
            v.len() >= 20,
            "the emulator's table lacks the backend's requests"
        );
        v
    })
}

const ERRNOS: [i32; 10] = [
    libc::EIO,
    libc::ENOMEM,
    libc::EINVAL,
    libc::EBUSY,
    libc::EFAULT,
    libc::EAGAIN,
    libc::ENODEV,
    libc::EPERM,
    libc::EINTR,
    libc::ENOTTY,
];
const MAX_ORDINAL: u64 = 200;
const MAX_OPS: usize = 24;

/// Variables the backend sees (through `InitOptions`) or that shape what it is asked to do.
const VAR_CHOICES: [(&str, &str); 14] = [
    ("NEURON_RT_RESET_CORES", "0"),
    ("NEURON_RT_RESET_CORES", "1"),
    ("NEURON_RT_EXEC_TIMEOUT", "1"),
    ("NEURON_RT_EXEC_TIMEOUT", "30"),
    ("NEURON_RT_VISIBLE_CORES", "0"),
    ("NEURON_RT_VISIBLE_CORES", "1"),
    ("NEURON_RT_VISIBLE_CORES", "0-1"),
    ("NEURON_RT_VISIBLE_CORES", "2-9"),
    ("NEURON_RT_NUM_CORES", "1"),
    ("NEURON_RT_NUM_CORES", "2"),
    ("NEURON_RT_VIRTUAL_CORE_SIZE", "1"),
    ("NEURON_RT_VIRTUAL_CORE_SIZE", "2"),
    ("NEURON_RT_VALIDATE_HASH", "1"),
    ("NEURON_RT_VISIBLE_CORES", "nonsense"),
];
const NAMES: [&str; 7] = ["a", "b", "out", "lhs_t", "rhs", "x", ""];
/// Largest tensor (host tensors are real heap buffers; every byte of a copy goes through the
/// emulator).
const MAX_TENSOR: u64 = 1 << 16;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum HandleSel {
    /// The n-th handle ever returned by load (possibly unloaded or from before a close).
    Issued(u8),
    /// Any raw value.
    Forged(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Offset {
    Small(u8),
    Any(u64),
}

impl Offset {
    fn get(self) -> u64 {
        match self {
            Offset::Small(n) => u64::from(n),
            Offset::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Init(Vec<u8>),
    Close,
    Load {
        which: u8,
        vnc: i8,
    },
    LoadMutated {
        which: u8,
        edits: Vec<(u16, u8)>,
    },
    LoadRaw(Vec<u8>),
    Unload(HandleSel),
    Allocate {
        host: bool,
        vnc: i8,
        size: u16,
        name: u8,
    },
    Drop(u8),
    Read {
        t: u8,
        offset: Offset,
        len: u16,
    },
    Write {
        t: u8,
        offset: Offset,
        data: Vec<u8>,
    },
    Memset {
        t: u8,
        offset: Offset,
        value: u8,
        len: u16,
    },
    Copy {
        src: u8,
        src_offset: Offset,
        dst: u8,
        dst_offset: Offset,
        len: u16,
    },
    SetAdd {
        set: bool,
        name: u8,
        t: u8,
    },
    /// Execute with two of the harness's arbitrary sets.
    Execute {
        h: HandleSel,
        inputs: bool,
        outputs: bool,
    },
    /// Execute with the model's own sets, built for the occasion on the core it was loaded on.
    ExecuteProper {
        h: HandleSel,
        host: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    instance: u8,
    two_devices: bool,
    faults: Vec<(u16, u8)>,
    request_fault: Option<(u8, u8)>,
    ops: Vec<Op>,
}

/// A handle load returned, with what it loaded.
struct Issued {
    h: ModelHandle,
    /// The harness's model index.
    model: usize,
    /// The logical core the tensors of its proper sets go on.
    vnc: i32,
    /// Whether the load asked for core 0 or any core (the valid request for every instance).
    plain: bool,
    /// Loaded since the last init and not unloaded.
    live: bool,
}

fn pick<T>(v: &[T], i: u8) -> Option<&T> {
    if v.is_empty() {
        None
    } else {
        v.get(usize::from(i) % v.len())
    }
}

/// Statuses a runtime call over this backend may end with; anything else (SUCCESS as an error,
/// queue, collectives or hardware-family statuses this backend never produces) is a finding.
const DEFINED: [NrtStatus; 13] = [
    NrtStatus::Failure,
    NrtStatus::Invalid,
    NrtStatus::InvalidHandle,
    NrtStatus::Resource,
    NrtStatus::Timeout,
    NrtStatus::HwError,
    NrtStatus::LoadNotEnoughNc,
    NrtStatus::UnsupportedNeffVersion,
    NrtStatus::Uninitialized,
    NrtStatus::Closed,
    NrtStatus::ExecBadInput,
    NrtStatus::ExecCompletedWithErr,
    NrtStatus::ExecNcBusy,
];

/// `LINUX_EMU_TRACE=1`: every operation's outcome on stderr (for reading a finding).
fn tracing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("LINUX_EMU_TRACE").is_some())
}

#[track_caller]
fn status<T>(what: &str, r: &nrt_core::Result<T>) {
    if tracing() {
        match r {
            Ok(_) => eprintln!("  {what}: ok"),
            Err(e) => eprintln!("  {what}: {:?} {}", e.status(), e.message()),
        }
    }
    if let Err(e) = r {
        assert!(
            DEFINED.contains(&e.status()),
            "{what}: an error with status {:?}: {e:?}",
            e.status()
        );
    }
}

fn check_state(rt: &Rt) {
    match rt.state() {
        InitState::Init => {
            let a = rt.allocation().expect("allocation while INIT");
            assert_eq!(a.reserved, a.topology.physical_cores());
        }
        InitState::Start => {}
        s => panic!("runtime left in {s:?}"),
    }
}

fn clean(acct: &Accounting) -> bool {
    acct.allocated_bytes == 0
        && acct.allocations == 0
        && acct.reserved_cores == 0
        && acct.attached_processes == 0
}

fn handle(issued: &[Issued], h: HandleSel) -> (ModelHandle, Option<&Issued>) {
    match h {
        HandleSel::Issued(i) => match pick(issued, i) {
            Some(x) => (x.h, Some(x)),
            None => (ModelHandle::from_raw(u64::from(i)), None),
        },
        HandleSel::Forged(raw) => (ModelHandle::from_raw(raw), None),
    }
}

/// The model's own sets on `vnc`, its inputs written, the output pre-filled with 0xEE.
fn proper_sets<'r>(
    rt: &'r Rt,
    m: &Model,
    placement: TensorPlacement,
    vnc: i32,
) -> nrt_core::Result<(TensorSet<'r>, TensorSet<'r>)> {
    let mut inputs = TensorSet::new();
    for (name, data) in &m.inputs {
        let t = rt.tensor_allocate(placement, vnc, data.len() as u64, name)?;
        t.write(0, data)?;
        inputs.add(name, t);
    }
    let mut outputs = TensorSet::new();
    let o = rt.tensor_allocate(placement, vnc, m.output.1.len() as u64, m.output.0)?;
    o.memset(0, 0xEE, o.size())?;
    outputs.add(m.output.0, o);
    Ok((inputs, outputs))
}

/// Runs the operations; returns with every tensor dropped and the runtime closed.
fn run(emu: &InProcess, rt: &Rt, ops: &[Op]) {
    let models = models();
    let mut issued: Vec<Issued> = Vec::new();
    let mut tensors: Vec<Tensor<'_>> = Vec::new();
    let mut sets: [TensorSet<'_>; 2] = [TensorSet::new(), TensorSet::new()];
    for op in ops.iter().take(MAX_OPS) {
        if tracing() {
            eprintln!("{op:?}");
        }
        match op {
            Op::Init(choices) => {
                let vars: Vec<(&str, &str)> = choices
                    .iter()
                    .take(3)
                    .map(|&c| VAR_CHOICES[usize::from(c) % VAR_CHOICES.len()])
                    .collect();
                let was = rt.state();
                let r = rt.init(FrameworkType::NoFw, "", "", &vars.as_slice());
                status("init", &r);
                if r.is_ok() && was == InitState::Start {
                    for i in &mut issued {
                        i.live = false;
                    }
                }
            }
            Op::Close => {
                rt.close();
                for i in &mut issued {
                    i.live = false;
                }
            }
            Op::Load { which, vnc } => {
                let model = usize::from(*which) % models.len();
                let vnc = i32::from(*vnc).clamp(-1, 17);
                let r = rt.load(&models[model].bytes, vnc, -1);
                status("load", &r);
                if let Ok(h) = r {
                    issued.push(Issued {
                        h,
                        model,
                        vnc: vnc.max(0),
                        plain: vnc <= 0,
                        live: true,
                    });
                }
            }
            Op::LoadMutated { which, edits } => {
                let mut b = pick(models, *which).expect("models").bytes.clone();
                for (at, value) in edits.iter().take(4) {
                    let i = usize::from(*at) % b.len();
                    b[i] = *value;
                }
                status("load (mutated)", &rt.load(&b, -1, -1));
                // A mutated NEFF that loads is not tracked: its I/O may differ.
            }
            Op::LoadRaw(bytes) => status("load (raw)", &rt.load(bytes, -1, -1)),
            Op::Unload(h) => {
                let (raw, known) = handle(&issued, *h);
                let known = known.is_some();
                let r = rt.unload(raw);
                status("unload", &r);
                if r.is_ok() && known {
                    for i in issued.iter_mut().filter(|i| i.h == raw) {
                        i.live = false;
                    }
                }
            }
            Op::Allocate {
                host,
                vnc,
                size,
                name,
            } => {
                let placement = if *host {
                    TensorPlacement::Host
                } else {
                    TensorPlacement::Device
                };
                let size = u64::from(*size) % (MAX_TENSOR + 1);
                let r = rt.tensor_allocate(
                    placement,
                    i32::from(*vnc),
                    size,
                    NAMES[usize::from(*name) % NAMES.len()],
                );
                status("tensor_allocate", &r);
                if let Ok(t) = r {
                    assert_eq!(t.size(), size);
                    tensors.push(t);
                }
            }
            Op::Drop(t) => {
                if !tensors.is_empty() {
                    let i = usize::from(*t) % tensors.len();
                    drop(tensors.swap_remove(i));
                }
            }
            Op::Read { t, offset, len } => {
                if let Some(t) = pick(&tensors, *t) {
                    let mut buf = vec![0u8; usize::from(*len)];
                    status("read", &t.read(offset.get(), &mut buf));
                }
            }
            Op::Write { t, offset, data } => {
                if let Some(t) = pick(&tensors, *t) {
                    status("write", &t.write(offset.get(), data));
                }
            }
            Op::Memset {
                t,
                offset,
                value,
                len,
            } => {
                if let Some(t) = pick(&tensors, *t) {
                    status("memset", &t.memset(offset.get(), *value, u64::from(*len)));
                }
            }
            Op::Copy {
                src,
                src_offset,
                dst,
                dst_offset,
                len,
            } => {
                if let (Some(s), Some(d)) = (pick(&tensors, *src), pick(&tensors, *dst)) {
                    status(
                        "copy",
                        &Tensor::copy(s, src_offset.get(), d, dst_offset.get(), u64::from(*len)),
                    );
                }
            }
            Op::SetAdd { set, name, t } => {
                if let Some(t) = pick(&tensors, *t) {
                    let name = NAMES[usize::from(*name) % NAMES.len()];
                    sets[usize::from(*set)].add(name, t.clone());
                }
            }
            Op::Execute { h, inputs, outputs } => {
                let (raw, _) = handle(&issued, *h);
                status(
                    "execute",
                    &rt.execute(
                        raw,
                        &sets[usize::from(*inputs)],
                        &sets[usize::from(*outputs)],
                    ),
                );
            }
            Op::ExecuteProper { h, host } => {
                let (raw, known) = handle(&issued, *h);
                let Some(known) = known else { continue };
                let m = &models[known.model];
                let placement = if *host {
                    TensorPlacement::Host
                } else {
                    TensorPlacement::Device
                };
                let failed_before = emu.accounting().ioctls_failed;
                let must_succeed = failed_before == 0
                    && known.live
                    && known.plain
                    && rt.state() == InitState::Init;
                let r = proper_sets(rt, m, placement, known.vnc).and_then(|(i, o)| {
                    rt.execute(raw, &i, &o)?;
                    let out = o.get(m.output.0)?;
                    let mut bytes = vec![0u8; out.size() as usize];
                    out.read(0, &mut bytes)?;
                    Ok(bytes)
                });
                status("execute (own sets)", &r);
                match r {
                    Ok(bytes) => assert_eq!(
                        bytes, m.output.1,
                        "model {} executed with its own sets: wrong output",
                        known.model
                    ),
                    Err(e) => assert!(
                        !must_succeed || emu.accounting().ioctls_failed != 0,
                        "model {} (live, loaded on core {}) failed with no driver fault: {e:?}",
                        known.model,
                        known.vnc
                    ),
                }
            }
        }
        check_state(rt);
    }
    drop(sets);
    drop(tensors);
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
}

fuzz_target!(|input: Input| {
    let instance =
        [Instance::Trn1, Instance::Inf2, Instance::Trn2][usize::from(input.instance % 3)];
    let devices = if input.two_devices { 2 } else { 1 };
    let mut plan = FaultPlan::none();
    for &(n, e) in input.faults.iter().take(4) {
        plan = plan.fail_nth(
            u64::from(n) % MAX_ORDINAL + 1,
            ERRNOS[usize::from(e) % ERRNOS.len()],
        );
    }
    if let Some((r, e)) = input.request_fault {
        let requests = backend_requests();
        plan = plan.fail_request(
            requests[usize::from(r) % requests.len()],
            ERRNOS[usize::from(e) % ERRNOS.len()],
        );
    }
    let cfg = InProcessConfig::new(instance, devices).with_faults(plan);
    let (after_drop, end) = InProcess::run(cfg, |emu| {
        {
            let rt: Rt = Runtime::with_options(
                LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root()),
                NoHost,
                RuntimeOptions {
                    max_models: 4,
                    ..Default::default()
                },
            );
            run(emu, &rt, &input.ops);
        }
        emu.accounting()
    })
    .unwrap_or_else(|e| {
        panic!("nrt-emu cannot run here: {e} (seccomp user notification is required)")
    });
    if tracing() {
        eprintln!("{end}");
    }
    assert!(
        clean(&after_drop),
        "held after the final close: {after_drop}"
    );
    assert!(clean(&end), "held at the end: {end}");
});
