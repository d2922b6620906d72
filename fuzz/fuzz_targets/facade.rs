//! An arbitrary sequence of operations on one `Runtime` over a simulated machine (through the
//! fault injector): init / close, load of small NEFFs built with the nrt-sim kernel builders
//! (or mutated, or raw fuzz bytes), unload with valid, stale and forged handles, tensor
//! allocate / slice / read / write / copy / memset with arbitrary offsets and sizes, tensor
//! sets, synchronous execute, implicit async, the `nrta` API, model metadata and injected
//! driver failures. Every call must return `Ok` or an error status; the state stays START or
//! INIT with exactly the allocated cores reserved. At the end everything is dropped, the
//! runtime closed, and the machine must hold no device memory, no staged model and no
//! reservation.
#![no_main]

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nrt_core::driver::{DriverCall, FaultInjector};
use nrt_core::io::TensorUsage;
use nrt_core::neff::{self, NeffSpec, NeffTensor, SubgraphSpec};
use nrt_core::tensor::{Tensor, TensorPlacement, TensorSet};
use nrt_core::{
    CompletionHook, FrameworkType, InitState, ModelHandle, NrtStatus, Runtime, RuntimeOptions, Xu,
};
use nrt_sim::engine::{DType, kernels};
use nrt_sim::{Instance, SimConfig, SimDriver, SimMachine};

type Rt = Runtime<FaultInjector<SimDriver>, nrt_core::host::NoHost>;

/// NEFFs to load: elementwise add 2×4 f32 (a, b → out), a 4×4×4 matmul, the elementwise program
/// on two physical cores (LNC 2), and a program-less ("plumbing") NEFF with the same I/O.
fn neffs() -> &'static [Vec<u8>] {
    static NEFFS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    NEFFS.get_or_init(|| {
        let add = kernels::elementwise(kernels::Elementwise::Add, 2, 4, DType::F32)
            .expect("elementwise kernel");
        let mm = kernels::matmul(4, 4, 4, DType::F32, DType::F32).expect("matmul kernel");
        let t = |name: &str, usage| NeffTensor {
            name: name.into(),
            usage,
            size: 32,
            dtype: nrt_core::io::Dtype::Float32,
            shape: vec![2, 4],
            var_id: 1,
        };
        let plumbing = neff::write(&NeffSpec {
            name: "plumbing".into(),
            uuid: [7; 16],
            version: (2, 0),
            feature_bits: nrt_core::neff::NeffFeatures::empty(),
            lnc_size: 1,
            num_tpb: 1,
            gzip: false,
            subgraphs: vec![SubgraphSpec {
                name: "sg00".into(),
                members: vec![],
            }],
            tensors: vec![
                t("a", TensorUsage::Input),
                t("b", TensorUsage::Input),
                t("out", TensorUsage::Output),
            ],
        })
        .expect("plumbing NEFF");
        vec![
            nrt_sim::neff::neff_from_programs("add", std::slice::from_ref(&add)).expect("add NEFF"),
            nrt_sim::neff::neff_from_programs("mm", &[mm]).expect("matmul NEFF"),
            nrt_sim::neff::neff_from_programs("add2", &[add.clone(), add]).expect("LNC-2 NEFF"),
            plumbing,
        ]
    })
}

const NAMES: [&str; 8] = ["a", "b", "out", "lhs", "rhs", "x", "output0", ""];
const VAR_CHOICES: [(&str, &str); 14] = [
    ("NEURON_RT_VISIBLE_CORES", "0"),
    ("NEURON_RT_VISIBLE_CORES", "1"),
    ("NEURON_RT_VISIBLE_CORES", "0-1"),
    ("NEURON_RT_VISIBLE_CORES", "1-3"),
    ("NEURON_RT_NUM_CORES", "1"),
    ("NEURON_RT_NUM_CORES", "2"),
    ("NEURON_RT_VIRTUAL_CORE_SIZE", "1"),
    ("NEURON_RT_VIRTUAL_CORE_SIZE", "2"),
    ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "0"),
    ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "1"),
    ("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "3"),
    ("NEURON_RT_VALIDATE_HASH", "1"),
    ("NEURON_RT_LOG_LEVEL", "ERROR"),
    ("NEURON_RT_VISIBLE_CORES", "nonsense"),
];
const FAULTS: [DriverCall; 12] = [
    DriverCall::StageSubgraph,
    DriverCall::AllocDevice,
    DriverCall::WriteDevice,
    DriverCall::ReadDevice,
    DriverCall::MemsetDevice,
    DriverCall::CopyDevice,
    DriverCall::Submit,
    DriverCall::StopModel,
    DriverCall::UnstageModel,
    DriverCall::Discover,
    DriverCall::ReserveCores,
    DriverCall::InitCores,
];
/// Host tensors are real heap buffers: their size is bounded so the harness stays within
/// libFuzzer's memory limit (device memory is sparse and accounted, so device sizes are not).
const MAX_HOST_TENSOR: u64 = 1 << 20;
/// Longest memset / copy per operation (they touch every byte).
const MAX_TOUCH: u64 = 1 << 18;

#[derive(Arbitrary, Debug)]
enum HandleSel {
    /// The n-th handle ever returned by load (possibly unloaded: stale).
    Issued(u8),
    /// Any raw value.
    Forged(u64),
}

#[derive(Arbitrary, Debug)]
enum Size {
    Small(u8),
    Io(bool),
    Any(u64),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Init(Vec<u8>),
    Close,
    Load {
        which: u8,
        vnc: i8,
        vnc_count: i8,
    },
    LoadMutated {
        which: u8,
        at: u16,
        value: u8,
    },
    LoadRaw {
        bytes: Vec<u8>,
        vnc: i8,
    },
    Unload(HandleSel),
    Allocate {
        placement: u8,
        vnc: i8,
        size: Size,
        name: u8,
    },
    Slice {
        t: u8,
        offset: u64,
        size: u64,
    },
    Drop {
        t: u8,
    },
    Read {
        t: u8,
        offset: u64,
        len: u16,
    },
    Write {
        t: u8,
        offset: u64,
        data: Vec<u8>,
    },
    Memset {
        t: u8,
        offset: u64,
        value: u8,
        len: u64,
    },
    Copy {
        src: u8,
        src_offset: u64,
        dst: u8,
        dst_offset: u64,
        len: u64,
    },
    SetAdd {
        set: u8,
        name: u8,
        t: u8,
    },
    SetGet {
        set: u8,
        name: u8,
    },
    SetClear {
        set: u8,
    },
    Execute {
        h: HandleSel,
        inputs: u8,
        outputs: u8,
        repeat: i8,
    },
    Schedule {
        h: HandleSel,
        inputs: u8,
        outputs: u8,
        queue: i8,
        hook: bool,
    },
    IsCompleted {
        issued: Option<u8>,
        raw: u64,
    },
    LastCompleted {
        lnc: u8,
        xu: u8,
        queue: i8,
    },
    RecordCompleted {
        lnc: u8,
        xu: u8,
    },
    ProcessAsync,
    Drain {
        vnc: i8,
    },
    Metadata {
        h: HandleSel,
        index: u8,
        name: Option<u8>,
    },
    FailNext(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    instance: u8,
    devices: u8,
    emulate: bool,
    max_models: u8,
    ops: Vec<Op>,
}

static HOOK_CALLS: AtomicU64 = AtomicU64::new(0);

fn hook(_ctx: usize, _seq: u64, _status: NrtStatus) {
    HOOK_CALLS.fetch_add(1, Ordering::Relaxed);
}

fn pick<T>(v: &[T], i: u8) -> Option<&T> {
    if v.is_empty() {
        None
    } else {
        v.get(usize::from(i) % v.len())
    }
}

fn handle(issued: &[ModelHandle], h: &HandleSel) -> ModelHandle {
    match h {
        HandleSel::Issued(i) => pick(issued, *i)
            .copied()
            .unwrap_or(ModelHandle::from_raw(u64::from(*i))),
        HandleSel::Forged(raw) => ModelHandle::from_raw(*raw),
    }
}

fn xu(v: u8) -> Xu {
    match v % 3 {
        0 => Xu::TensorOp,
        1 => Xu::Compute,
        _ => Xu::Collectives,
    }
}

/// Whatever an operation returned: Ok, or an error status. `Success` is not an error.
fn status<T>(r: &nrt_core::Result<T>) {
    if let Err(e) = r {
        assert_ne!(
            e.status(),
            NrtStatus::Success,
            "an error with status SUCCESS: {e:?}"
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

/// After a load: the model's own input set (`sets[0]`, inputs written) and output set
/// (`sets[1]`), a device tensor per tensor named and sized as `model_tensor_info` says, as a
/// program builds them. Without them an execute reaches the device only after several ops that
/// happen to agree on names and sizes, which the seeds of the first campaigns never did
/// (`fuzz/coverage.sh`: no execution reached the simulator's run path).
fn own_sets<'rt>(
    rt: &'rt Rt,
    h: ModelHandle,
    tensors: &mut Vec<Tensor<'rt>>,
    sets: &mut [TensorSet<'rt>; 3],
) {
    let Ok(infos) = rt.model_tensor_info(h) else {
        return;
    };
    sets[0] = TensorSet::new();
    sets[1] = TensorSet::new();
    for (usage, info) in infos {
        let r = rt.tensor_allocate(TensorPlacement::Device, 0, info.size, &info.name);
        status(&r);
        let Ok(t) = r else { continue };
        if usage == TensorUsage::Input {
            let bytes: Vec<u8> = (0..info.size).map(|b| (b % 7) as u8).collect();
            status(&t.write(0, &bytes));
        }
        sets[usize::from(usage != TensorUsage::Input)].add(&info.name, t.clone());
        tensors.push(t);
    }
}

fn run(rt: &Rt, input: &Input) {
    let neffs = neffs();
    let mut issued: Vec<ModelHandle> = Vec::new();
    let mut seqs: Vec<u64> = Vec::new();
    let mut tensors: Vec<Tensor<'_>> = Vec::new();
    let mut sets: [TensorSet<'_>; 3] = [TensorSet::new(), TensorSet::new(), TensorSet::new()];
    for op in input.ops.iter().take(64) {
        match op {
            Op::Init(choices) => {
                let vars: Vec<(&str, &str)> = choices
                    .iter()
                    .take(4)
                    .map(|&c| VAR_CHOICES[usize::from(c) % VAR_CHOICES.len()])
                    .collect();
                status(&rt.init(FrameworkType::NoFw, "", "", &vars.as_slice()));
            }
            Op::Close => rt.close(),
            Op::Load {
                which,
                vnc,
                vnc_count,
            } => {
                let r = rt.load(
                    pick(neffs, *which).expect("NEFFs"),
                    i32::from(*vnc),
                    i32::from(*vnc_count),
                );
                status(&r);
                if let Ok(h) = r {
                    issued.push(h);
                    own_sets(rt, h, &mut tensors, &mut sets);
                }
            }
            Op::LoadMutated { which, at, value } => {
                let mut b = pick(neffs, *which).expect("NEFFs").clone();
                let i = usize::from(*at) % b.len();
                b[i] = *value;
                let r = rt.load(&b, -1, -1);
                status(&r);
                if let Ok(h) = r {
                    issued.push(h);
                }
            }
            Op::LoadRaw { bytes, vnc } => {
                let r = rt.load(bytes, i32::from(*vnc), -1);
                status(&r);
                if let Ok(h) = r {
                    issued.push(h);
                }
            }
            Op::Unload(h) => status(&rt.unload(handle(&issued, h))),
            Op::Allocate {
                placement,
                vnc,
                size,
                name,
            } => {
                let placement = match placement % 3 {
                    0 => TensorPlacement::Device,
                    1 => TensorPlacement::Host,
                    _ => TensorPlacement::Virtual,
                };
                let mut size = match size {
                    Size::Small(s) => u64::from(*s),
                    Size::Io(false) => 32,
                    Size::Io(true) => 64,
                    Size::Any(s) => *s,
                };
                if placement == TensorPlacement::Host {
                    size %= MAX_HOST_TENSOR + 1;
                }
                let r = rt.tensor_allocate(
                    placement,
                    i32::from(*vnc),
                    size,
                    NAMES[usize::from(*name) % NAMES.len()],
                );
                status(&r);
                if let Ok(t) = r {
                    assert_eq!(
                        t.size(),
                        if placement == TensorPlacement::Virtual {
                            0
                        } else {
                            size
                        }
                    );
                    tensors.push(t);
                }
            }
            Op::Slice { t, offset, size } => {
                if let Some(t) = pick(&tensors, *t) {
                    let r = t.slice(*offset, *size, "slice");
                    status(&r);
                    if let Ok(s) = r {
                        tensors.push(s);
                    }
                }
            }
            Op::Drop { t } => {
                if !tensors.is_empty() {
                    let i = usize::from(*t) % tensors.len();
                    drop(tensors.swap_remove(i));
                }
            }
            Op::Read { t, offset, len } => {
                if let Some(t) = pick(&tensors, *t) {
                    let mut buf = vec![0u8; usize::from(*len)];
                    status(&t.read(*offset, &mut buf));
                }
            }
            Op::Write { t, offset, data } => {
                if let Some(t) = pick(&tensors, *t) {
                    status(&t.write(*offset, data));
                }
            }
            Op::Memset {
                t,
                offset,
                value,
                len,
            } => {
                if let Some(t) = pick(&tensors, *t) {
                    status(&t.memset(*offset, *value, *len % (MAX_TOUCH + 1)));
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
                    status(&Tensor::copy(
                        s,
                        *src_offset,
                        d,
                        *dst_offset,
                        *len % (MAX_TOUCH + 1),
                    ));
                }
            }
            Op::SetAdd { set, name, t } => {
                if let Some(t) = pick(&tensors, *t) {
                    let name = NAMES[usize::from(*name) % NAMES.len()];
                    let s = &mut sets[usize::from(*set) % 3];
                    s.add(name, t.clone());
                    assert!(s.get(name).is_ok());
                }
            }
            Op::SetGet { set, name } => {
                let r = sets[usize::from(*set) % 3].get(NAMES[usize::from(*name) % NAMES.len()]);
                if let Err(e) = &r {
                    assert_eq!(e.status(), NrtStatus::Failure, "{e:?}");
                }
            }
            Op::SetClear { set } => sets[usize::from(*set) % 3] = TensorSet::new(),
            Op::Execute {
                h,
                inputs,
                outputs,
                repeat,
            } => {
                let (i, o) = (usize::from(*inputs) % 3, usize::from(*outputs) % 3);
                status(&rt.execute_repeat(
                    handle(&issued, h),
                    &sets[i],
                    &sets[o],
                    i32::from(*repeat) % 4,
                ));
            }
            Op::Schedule {
                h,
                inputs,
                outputs,
                queue,
                hook: with_hook,
            } => {
                let (i, o) = (usize::from(*inputs) % 3, usize::from(*outputs) % 3);
                let r = rt.execute_schedule(
                    handle(&issued, h),
                    &sets[i],
                    &sets[o],
                    i32::from(*queue),
                    with_hook.then_some(CompletionHook { call: hook, ctx: 0 }),
                );
                status(&r);
                if let Ok(s) = r {
                    seqs.push(s);
                }
            }
            Op::IsCompleted { issued: i, raw } => {
                let seq = i.and_then(|i| pick(&seqs, i).copied()).unwrap_or(*raw);
                status(&rt.is_completed(seq));
            }
            Op::LastCompleted { lnc, xu: x, queue } => {
                status(&rt.last_completed_sequence(u32::from(*lnc % 8), xu(*x), i32::from(*queue)))
            }
            Op::RecordCompleted { lnc, xu: x } => {
                let r = rt.record_completed(u32::from(*lnc % 8), xu(*x));
                status(&r);
                if let Ok(s) = r {
                    seqs.push(s);
                }
            }
            Op::ProcessAsync => {
                let _ = rt.process_async();
            }
            Op::Drain { vnc } => status(&rt.async_drain(i32::from(*vnc))),
            Op::Metadata { h, index, name } => {
                let h = handle(&issued, h);
                status(&rt.io_tensor_count(h));
                status(&rt.input_count(h));
                status(&rt.model_tensor_info(h));
                status(&rt.model_lnc(h));
                status(&rt.io_tensor_info(h, TensorUsage::Input, u32::from(*index)));
                status(&rt.io_tensor_info(h, TensorUsage::Output, u32::from(*index)));
                status(
                    &rt.is_valid_input_name(h, name.map(|n| NAMES[usize::from(n) % NAMES.len()])),
                );
                status(&rt.loaded_models());
                status(&rt.visible_lnc_count());
            }
            Op::FailNext(c) => rt
                .driver()
                .fail_next(FAULTS[usize::from(*c) % FAULTS.len()]),
        }
        check_state(rt);
    }
    // Teardown: no more injected faults, drop every tensor (sets first), close.
    rt.driver().clear();
    drop(sets);
    drop(tensors);
    let _ = rt.process_async();
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
}

fuzz_target!(|input: Input| {
    let instance =
        [Instance::Inf2, Instance::Trn1, Instance::Trn2][usize::from(input.instance % 3)];
    let devices = u32::from(input.devices % 2) + 1;
    let machine = SimMachine::new(if input.emulate {
        SimConfig::emulate_driver(instance, devices)
    } else {
        SimConfig::funtime(instance, devices)
    });
    {
        let rt: Rt = Runtime::with_options(
            FaultInjector::new(SimDriver::attach(&machine)),
            nrt_core::host::NoHost,
            RuntimeOptions {
                max_models: u32::from(input.max_models % 4) + 1,
                ..Default::default()
            },
        );
        run(&rt, &input);
    }
    assert_eq!(
        machine.total_device_bytes_allocated(),
        0,
        "device memory outstanding after close"
    );
    assert!(
        machine.staged_models().is_empty(),
        "staged models after close: {:?}",
        machine.staged_models()
    );
    assert!(
        machine.reserved().is_empty(),
        "cores reserved after close: {:?}",
        machine.reserved()
    );
});
