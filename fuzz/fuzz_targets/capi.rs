//! Sequences of calls through the C library's exported functions (the `extern "C"` symbols a
//! C program links against, not the Rust API), on the simulator: init / close / re-init (the
//! implicit async mode on or off), load of kernel-built, mutated and garbage NEFFs, unload,
//! tensor allocate / allocate_empty / attach_buffer / slice / free / read / write / copy /
//! memset with arbitrary offsets and sizes, tensor sets, execute and execute_repeat, the
//! explicit `nrta_*` API (execute, tensor read / write / copy, sequences, completion) with
//! objects freed while work is queued, model queries, profiling, system trace, NULL, stale and
//! forged handles, calls after close.
//!
//! The harness keeps the C contract the library cannot check: data pointers are NULL or valid
//! for the size passed, host buffers outlive the work queued on them. Handles (models,
//! tensors, tensor sets, trace configurations) may be stale or forged: the library looks them
//! up and must refuse them. Invariants: no crash, no sanitizer report, no panic (a panic caught
//! at the boundary still aborts: libFuzzer's panic hook runs first); every status is a defined
//! `NRT_STATUS`; after the closing `nrt_close` the simulated machine holds no device memory, no
//! staged model and no reservation, and the library's own count of device bytes is zero.
#![no_main]

use std::ffi::{CString, c_char, c_int, c_void};
use std::ptr::null_mut;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nrt::profile::{nrt_profile_start, nrt_profile_stop};
use nrt::sys_trace::{
    nrt_sys_trace_config_allocate, nrt_sys_trace_config_free,
    nrt_sys_trace_config_set_max_events_per_nc, nrt_sys_trace_fetch_events, nrt_sys_trace_start,
    nrt_sys_trace_stop,
};
use nrt::*;
use nrt_sim::engine::{DType, kernels};

#[path = "c_caller.rs"]
mod c_caller;
use c_caller::{Sel, init, own_sets, pick, status};

/// NEFFs to load: elementwise add 2×4 f32 (a, b → out), a 4×4×4 matmul (lhs_t, rhs → out),
/// the add on two physical cores (LNC 2).
fn neffs() -> &'static [Vec<u8>] {
    static NEFFS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    NEFFS.get_or_init(|| {
        let add = kernels::elementwise(kernels::Elementwise::Add, 2, 4, DType::F32)
            .expect("elementwise kernel");
        let mm = kernels::matmul(4, 4, 4, DType::F32, DType::F32).expect("matmul kernel");
        vec![
            nrt_sim::neff::neff_from_programs("add", std::slice::from_ref(&add)).expect("add"),
            nrt_sim::neff::neff_from_programs("mm", &[mm]).expect("matmul"),
            nrt_sim::neff::neff_from_programs("add2", &[add.clone(), add]).expect("LNC-2"),
        ]
    })
}

/// Once per process, before the first call: the simulator backend (trn1, one device of two
/// cores), quiet logs, profiles written under the temporary directory.
fn setup() -> &'static CString {
    static DIR: OnceLock<CString> = OnceLock::new();
    DIR.get_or_init(|| {
        // SAFETY: runs once, at the first input, before the library has started any thread.
        unsafe {
            std::env::set_var("NEURON_RT_BACKEND", "sim");
            std::env::set_var("NEURON_RT_SIM_INSTANCE", "trn1");
            std::env::set_var("NEURON_RT_LOG_LEVEL", "QUIET");
        }
        let dir = std::env::temp_dir().join(format!("nrt-fuzz-capi-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        CString::new(dir.join("profile.ntff").to_string_lossy().as_bytes()).expect("path")
    })
}

const NAMES: [&str; 7] = ["a", "b", "out", "lhs_t", "rhs", "x", ""];
/// Host-backed memory is real: sizes are bounded to stay within libFuzzer's memory limit.
const MAX_HOST: usize = 1 << 20;
/// Longest buffer handed to a read or write, and longest memset / copy.
const MAX_BUF: usize = 1 << 16;

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Len {
    Small(u8),
    Io,
    Any(u64),
}

impl Len {
    fn get(self) -> u64 {
        match self {
            Len::Small(n) => u64::from(n),
            Len::Io => 32,
            Len::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Init {
        inflight: u8,
    },
    Close,
    Load {
        which: u8,
        edits: Vec<(u16, u8)>,
        vnc: i8,
        count: i8,
    },
    LoadRaw {
        bytes: Vec<u8>,
        vnc: i8,
    },
    Unload(Sel),
    Alloc {
        placement: u8,
        vnc: i8,
        size: Len,
        name: u8,
    },
    AllocEmpty {
        name: u8,
    },
    Attach {
        t: Sel,
        size: u16,
    },
    Slice {
        t: Sel,
        offset: Len,
        size: Len,
        name: u8,
    },
    Free(Sel),
    Read {
        t: Sel,
        offset: Len,
        size: u16,
        null: bool,
    },
    Write {
        t: Sel,
        offset: Len,
        size: u16,
        byte: u8,
        null: bool,
    },
    Copy {
        src: Sel,
        src_off: Len,
        dst: Sel,
        dst_off: Len,
        size: u16,
    },
    Memset {
        t: Sel,
        offset: Len,
        value: i32,
        size: u16,
    },
    Query(Sel),
    SetAlloc,
    SetAdd {
        s: Sel,
        name: u8,
        t: Sel,
    },
    SetGet {
        s: Sel,
        name: u8,
    },
    SetDestroy(Sel),
    Execute {
        m: Sel,
        input: Sel,
        output: Sel,
        repeat: Option<i8>,
    },
    Schedule {
        m: Sel,
        input: Sel,
        output: Sel,
        queue: i8,
    },
    AsyncRead {
        t: Sel,
        offset: Len,
        size: u16,
        queue: i8,
    },
    AsyncWrite {
        t: Sel,
        offset: Len,
        size: u16,
        queue: i8,
    },
    AsyncCopy {
        src: Sel,
        dst: Sel,
        offset: Len,
        size: u16,
        queue: i8,
    },
    Completed(Option<u8>, u64),
    Sequence {
        lnc: u8,
        xu: u8,
        queue: i8,
    },
    Drain(i8),
    ModelInfo(Sel),
    Profile {
        m: Sel,
        stop: bool,
    },
    Trace {
        max_events: u8,
        fetch: bool,
    },
    Misc(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

/// What the harness was given, kept so stale handles can be replayed and host buffers
/// outlive the work queued on them.
#[derive(Default)]
struct World {
    models: Vec<*mut c_void>,
    tensors: Vec<*mut c_void>,
    sets: Vec<*mut c_void>,
    seqs: Vec<u64>,
    /// Buffers attached to tensors or handed to queued reads and writes: freed only after
    /// the closing `nrt_close` has finished all work.
    kept: Vec<Box<[u8]>>,
    tensor_infos: Vec<*mut c_void>,
    /// `ret` of every `nrta_*` request: written by the library at completion, so kept (and
    /// checked) until after the closing `nrt_close`. Boxed: the library holds each address
    /// while the vector grows.
    #[allow(
        clippy::vec_box,
        reason = "the library writes through each box's address later"
    )]
    rets: Vec<Box<u32>>,
}

impl World {
    fn tensor(&self, s: Sel) -> *mut c_void {
        pick(&self.tensors, s)
    }
    fn set(&self, s: Sel) -> *mut c_void {
        pick(&self.sets, s)
    }
    /// A buffer of `len` bytes (at most [`MAX_BUF`]) kept until the end.
    fn buffer(&mut self, len: usize, byte: u8) -> (*mut c_void, usize) {
        let len = len.min(MAX_BUF);
        self.kept.push(vec![byte; len.max(1)].into_boxed_slice());
        let b = self.kept.last_mut().expect("just pushed");
        (b.as_mut_ptr().cast(), len)
    }
}

fn name(i: u8) -> CString {
    CString::new(NAMES[usize::from(i) % NAMES.len()]).expect("no NUL")
}

/// Calls an `nrta_*` function whose `ret` the library writes when the request completes
/// (`nrt/nrt_async.h`: it must stay valid until then), so `ret` lives in `rets` until after the
/// closing `nrt_close`; returns the call's status and the sequence number it wrote.
#[allow(
    clippy::vec_box,
    reason = "the library writes through each box's address later"
)]
fn out_u64(rets: &mut Vec<Box<u32>>, f: &mut dyn FnMut(*mut u32, *mut u64) -> u32) -> (u32, u64) {
    let mut ret = Box::new(0u32);
    let mut seq = 0u64;
    let s = status(f(&mut *ret, &mut seq));
    rets.push(ret);
    (s, seq)
}

#[allow(clippy::too_many_lines)]
fn step(w: &mut World, op: &Op, profile: &CString, open: &mut bool) {
    match *op {
        Op::Init { inflight } => {
            if !*open {
                init(inflight);
                *open = true;
            } else {
                // A second init while open is refused.
                status(unsafe { nrt_init(0, std::ptr::null(), std::ptr::null()) });
            }
        }
        Op::Close => {
            nrt_close();
            *open = false;
        }
        Op::Load {
            which,
            ref edits,
            vnc,
            count,
        } => {
            let all = neffs();
            let mut bytes = all[usize::from(which) % all.len()].clone();
            for &(at, v) in edits.iter().take(8) {
                let i = usize::from(at) % bytes.len();
                bytes[i] ^= v;
            }
            let mut m = null_mut();
            // SAFETY: `bytes` is valid for its length; `m` is writable.
            let s = unsafe {
                nrt_load(
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    vnc.into(),
                    count.into(),
                    &mut m,
                )
            };
            if status(s) == 0 {
                w.models.push(m);
                own_sets(&mut w.tensors, &mut w.sets, m, MAX_BUF);
            }
        }
        Op::LoadRaw { ref bytes, vnc } => {
            let mut m = null_mut();
            // SAFETY: as above.
            let s = unsafe { nrt_load(bytes.as_ptr().cast(), bytes.len(), vnc.into(), 1, &mut m) };
            if status(s) == 0 {
                w.models.push(m);
            }
        }
        Op::Unload(m) => {
            status(nrt_unload(pick(&w.models, m)));
        }
        Op::Alloc {
            placement,
            vnc,
            size,
            name: n,
        } => {
            let placement = u32::from(placement % 4);
            let mut size = size.get() as usize;
            if placement != 0 {
                size = size.min(MAX_HOST);
            }
            let mut t = null_mut();
            // SAFETY: the name is a C string, `t` writable.
            let s = unsafe {
                nrt_tensor_allocate(placement, vnc.into(), size, name(n).as_ptr(), &mut t)
            };
            if status(s) == 0 {
                w.tensors.push(t);
            }
        }
        Op::AllocEmpty { name: n } => {
            let mut t = null_mut();
            // SAFETY: as above.
            if status(unsafe { nrt_tensor_allocate_empty(name(n).as_ptr(), &mut t) }) == 0 {
                w.tensors.push(t);
            }
        }
        Op::Attach { t, size } => {
            let (buf, len) = w.buffer(usize::from(size), 0);
            // SAFETY: `buf` is valid for `len` bytes until the end of the input.
            status(unsafe { nrt_tensor_attach_buffer(w.tensor(t), buf, len) });
        }
        Op::Slice {
            t,
            offset,
            size,
            name: n,
        } => {
            let mut slice = null_mut();
            // SAFETY: as above.
            let s = unsafe {
                nrt_tensor_allocate_slice(
                    w.tensor(t),
                    offset.get() as usize,
                    size.get() as usize,
                    name(n).as_ptr(),
                    &mut slice,
                )
            };
            if status(s) == 0 {
                w.tensors.push(slice);
            }
        }
        Op::Free(t) => {
            let mut h = w.tensor(t);
            // SAFETY: `h` is a local the library may clear.
            unsafe { nrt_tensor_free(&mut h) };
        }
        Op::Read {
            t,
            offset,
            size,
            null,
        } => {
            let (buf, len) = w.buffer(usize::from(size), 0);
            let buf = if null { null_mut() } else { buf };
            // SAFETY: `buf` is NULL or valid for `len` bytes.
            status(unsafe { nrt_tensor_read(w.tensor(t), buf, offset.get() as usize, len) });
        }
        Op::Write {
            t,
            offset,
            size,
            byte,
            null,
        } => {
            let (buf, len) = w.buffer(usize::from(size), byte);
            let buf = if null { null_mut() } else { buf };
            // SAFETY: as above.
            status(unsafe { nrt_tensor_write(w.tensor(t), buf, offset.get() as usize, len) });
        }
        Op::Copy {
            src,
            src_off,
            dst,
            dst_off,
            size,
        } => {
            status(nrt_tensor_copy(
                w.tensor(src),
                src_off.get() as usize,
                w.tensor(dst),
                dst_off.get() as usize,
                usize::from(size),
            ));
        }
        Op::Memset {
            t,
            offset,
            value,
            size,
        } => {
            status(nrt_tensor_memset(
                w.tensor(t),
                offset.get(),
                value,
                usize::from(size),
            ));
        }
        Op::Query(t) => {
            let h = w.tensor(t);
            let _ = nrt_tensor_get_size(h);
            let _ = nrt_tensor_get_va(h);
            let mut info = [0u64; 8];
            // SAFETY: 64 writable bytes, more than the info struct.
            status(unsafe { nrt_tensor_get_device_allocation_info(h, info.as_mut_ptr().cast()) });
        }
        Op::SetAlloc => {
            let mut s = null_mut();
            // SAFETY: `s` writable.
            if status(unsafe { nrt_allocate_tensor_set(&mut s) }) == 0 {
                w.sets.push(s);
            }
        }
        Op::SetAdd { s, name: n, t } => {
            // SAFETY: the name is a C string.
            status(unsafe {
                nrt_add_tensor_to_tensor_set(w.set(s), name(n).as_ptr(), w.tensor(t))
            });
        }
        Op::SetGet { s, name: n } => {
            let mut t = null_mut();
            // SAFETY: as above; `t` writable.
            status(unsafe { nrt_get_tensor_from_tensor_set(w.set(s), name(n).as_ptr(), &mut t) });
        }
        Op::SetDestroy(s) => {
            let mut h = w.set(s);
            // SAFETY: `h` is a local the library may clear.
            unsafe { nrt_destroy_tensor_set(&mut h) };
        }
        Op::Execute {
            m,
            input,
            output,
            repeat,
        } => {
            let (m, i, o) = (pick(&w.models, m), w.set(input), w.set(output));
            match repeat {
                None => status(nrt_execute(m, i, o)),
                Some(r) => status(nrt_execute_repeat(m, i, o, c_int::from(r % 4))),
            };
        }
        Op::Schedule {
            m,
            input,
            output,
            queue,
        } => {
            let (m, i, o) = (pick(&w.models, m), w.set(input), w.set(output));
            let (s, seq) = out_u64(&mut w.rets, &mut |ret, seq| {
                // SAFETY: `ret` and `seq` are writable.
                unsafe { nrta_execute_schedule(m, i, o, queue.into(), ret, seq) }
            });
            if s == 0 {
                w.seqs.push(seq);
            }
        }
        Op::AsyncRead {
            t,
            offset,
            size,
            queue,
        } => {
            let h = w.tensor(t);
            let (buf, len) = w.buffer(usize::from(size), 0);
            let (s, seq) = out_u64(&mut w.rets, &mut |ret, seq| {
                // SAFETY: `buf` stays valid until after the closing `nrt_close`.
                unsafe {
                    nrta_tensor_read(buf, h, offset.get(), len as u64, queue.into(), ret, seq)
                }
            });
            if s == 0 {
                w.seqs.push(seq);
            }
        }
        Op::AsyncWrite {
            t,
            offset,
            size,
            queue,
        } => {
            let h = w.tensor(t);
            let (buf, len) = w.buffer(usize::from(size), 0x5a);
            let (s, seq) = out_u64(&mut w.rets, &mut |ret, seq| {
                // SAFETY: as above.
                unsafe {
                    nrta_tensor_write(h, buf, offset.get(), len as u64, queue.into(), ret, seq)
                }
            });
            if s == 0 {
                w.seqs.push(seq);
            }
        }
        Op::AsyncCopy {
            src,
            dst,
            offset,
            size,
            queue,
        } => {
            let (a, b) = (w.tensor(src), w.tensor(dst));
            let (s, seq) = out_u64(&mut w.rets, &mut |ret, seq| {
                // SAFETY: `ret` and `seq` are writable.
                unsafe {
                    nrta_tensor_copy(
                        a,
                        offset.get(),
                        b,
                        0,
                        u64::from(size),
                        queue.into(),
                        ret,
                        seq,
                    )
                }
            });
            if s == 0 {
                w.seqs.push(seq);
            }
        }
        Op::Completed(which, raw) => {
            let seq = match which {
                Some(i) if !w.seqs.is_empty() => w.seqs[usize::from(i) % w.seqs.len()],
                _ => raw,
            };
            let mut done = false;
            // SAFETY: `done` writable.
            status(unsafe { nrta_is_completed(seq, &mut done) });
        }
        Op::Sequence { lnc, xu, queue } => {
            let mut seq = 0;
            // SAFETY: `seq` writable.
            status(unsafe {
                nrta_get_sequence(
                    u32::from(lnc % 4),
                    u32::from(xu % 4),
                    queue.into(),
                    &mut seq,
                )
            });
        }
        Op::Drain(vnc) => {
            status(nrt_async_drain_queued_execs(vnc.into()));
        }
        Op::ModelInfo(m) => {
            let m = pick(&w.models, m);
            let mut info = [0u8; 256];
            let mut written = 0usize;
            // SAFETY: 256 writable bytes, declared as such.
            status(unsafe {
                nrt_get_model_info(m, info.as_mut_ptr().cast(), info.len(), &mut written)
            });
            let mut arr = null_mut();
            // SAFETY: `arr` writable.
            if status(unsafe { nrt_get_model_tensor_info(m, &mut arr) }) == 0 {
                w.tensor_infos.push(arr);
            }
            let mut n = 0u32;
            // SAFETY: `n` writable.
            status(unsafe { nrt_get_model_vnc_count(m, &mut n) });
        }
        Op::Profile { m, stop } => {
            if stop {
                // SAFETY: a C string.
                status(unsafe { nrt_profile_stop(profile.as_ptr()) });
            } else {
                // SAFETY: as above.
                status(unsafe { nrt_profile_start(pick(&w.models, m), profile.as_ptr()) });
            }
        }
        Op::Trace { max_events, fetch } => {
            let mut cfg = null_mut();
            // SAFETY: `cfg` writable.
            if status(unsafe { nrt_sys_trace_config_allocate(&mut cfg) }) == 0 {
                nrt_sys_trace_config_set_max_events_per_nc(cfg, u64::from(max_events));
                status(nrt_sys_trace_start(cfg));
                if fetch {
                    let (mut buf, mut len): (*mut c_char, usize) = (null_mut(), 0);
                    // SAFETY: both outputs writable; NULL options take the defaults.
                    if status(unsafe { nrt_sys_trace_fetch_events(&mut buf, &mut len, null_mut()) })
                        == 0
                    {
                        // SAFETY: a buffer the library allocated.
                        unsafe { nrt::sys_trace::nrt_sys_trace_buffer_free(buf) };
                    }
                }
                status(nrt_sys_trace_stop());
                nrt_sys_trace_config_free(cfg);
            }
        }
        Op::Misc(k) => misc(k),
    }
}

fn misc(k: u8) {
    let mut n = 0u32;
    match k % 6 {
        0 => {
            let mut v = [0u8; 512];
            // SAFETY: 512 writable bytes.
            status(unsafe { nrt_get_version(v.as_mut_ptr().cast(), v.len()) });
        }
        1 => {
            let _ = nrt_get_status_as_str(u32::from(k));
        }
        // SAFETY (2–5): every output is writable for the size passed.
        2 => {
            status(unsafe { nrt_get_visible_lnc_count(&mut n) });
            status(unsafe { nrt_get_total_nc_count(&mut n) });
        }
        3 => {
            let mut info = [0u8; 256];
            status(unsafe { nrt_get_instance_info(info.as_mut_ptr().cast(), info.len()) });
        }
        4 => {
            let mut stats = [0u8; 64];
            let mut out = 0usize;
            status(unsafe {
                nrt_get_vnc_memory_stats(
                    u32::from(k >> 3),
                    stats.as_mut_ptr().cast(),
                    stats.len(),
                    &mut out,
                )
            });
        }
        _ => {
            status(unsafe { nrt_host_device_id_get(c_int::from(k >> 3), &mut n) });
        }
    }
}

fuzz_target!(|input: Input| {
    let profile = setup();
    let mut w = World::default();
    init(1);
    let mut open = true;
    for op in input.ops.iter().take(64) {
        step(&mut w, op, profile, &mut open);
    }
    // Teardown as a careful C program does it: finish queued work, free what it holds, close.
    if !open {
        init(0);
    }
    let _ = nrt_async_drain_queued_execs(-1);
    for info in w.tensor_infos.drain(..) {
        // SAFETY: arrays from `nrt_get_model_tensor_info`, each freed once.
        let _ = unsafe { nrt_free_model_tensor_info(info) };
    }
    for &s in &w.sets {
        let mut h = s;
        // SAFETY: a local the library may clear.
        unsafe { nrt_destroy_tensor_set(&mut h) };
    }
    for &t in &w.tensors {
        let mut h = t;
        // SAFETY: as above.
        unsafe { nrt_tensor_free(&mut h) };
    }
    nrt_close();
    drop(w.kept);
    // Every request has completed: each `ret` holds a defined status (0 where never written).
    for r in &w.rets {
        status(**r);
    }
    let machine = nrt::test_hooks::sim_machine().expect("the simulator backend");
    assert_eq!(
        machine.total_device_bytes_allocated(),
        0,
        "device memory after close"
    );
    assert_eq!(
        nrt::test_hooks::device_bytes_allocated(0),
        0,
        "library's count after close"
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
