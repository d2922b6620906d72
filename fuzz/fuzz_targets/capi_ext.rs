//! Sequences of calls through the C library's extension surfaces, as a C program makes them:
//! completion handles and error trackers (`nrt_async.h`), the Neuron datastore
//! (`nds/neuron_ds.h`), debug streams (`ndebug_stream.h`), inspect capture and continuous
//! profiling (`nrt_profile.h`), system-trace filters and fetch options (`nrt_sys_trace.h`), the
//! collectives queries (`nec.h`), interleaved with the core calls that give them something to
//! observe: init / close / re-init (implicit async on or off), loads of kernel-built NEFFs
//! (some mutated) and of one whose program deadlocks (so executions fail inside the simulator,
//! after submission, where trackers and inspect-on-fail see them), the model's own tensor sets,
//! `nrt_execute` / `nrta_execute_schedule` while captures, trackers, streams and datastore
//! objects are live, NULL / stale / forged handles, out-of-range cores and indices, calls after
//! close, objects freed while work is queued. The companion of `capi` (whose `Op` enum stays
//! unchanged so its seeds keep their meaning).
//!
//! The harness keeps the C contract the library cannot check: pointers the library writes are
//! NULL or valid, buffers are valid for the size passed, pointers returned by accessors are
//! used only while their object lives, descriptors are closed once. Handles (trackers, options,
//! datastore instances and objects, debug stream descriptors) may be stale or forged: the
//! library looks them up and must refuse them. Every file the library writes goes under the
//! harness's temporary directory (inspect and continuous-profiling options get a directory
//! there as soon as they are allocated or reset; `nrt_inspect_begin_with_options(NULL)`, whose
//! defaults write to `./output`, is only tried while capture is on, where it is refused).
//!
//! Invariants: no crash, no sanitizer report, no panic; every status is a defined `NRT_STATUS`;
//! every error an error tracker lists is a defined failure status; every completion handle
//! polls readable once `nrt_close` has completed all work; after the closing `nrt_close` the
//! simulated machine holds no device memory, no staged model and no reservation, and the
//! library's own count of device bytes is zero.
#![no_main]

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::OnceLock;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nrt::inspect::*;
use nrt::profile::*;
use nrt::sys_trace::*;
use nrt::*;
use nrt_sim::engine::{DType, kernels};

#[path = "c_caller.rs"]
mod c_caller;
use c_caller::{Sel, init, own_sets, pick, status};

// The extension modules are private to the library: their symbols are declared here as a C
// program's headers declare them (`bindings-c/include/nrt/*.h`).
unsafe extern "C" {
    fn nrta_get_completion_handle(seq: u64, fd: *mut c_int) -> u32;
    fn nrta_error_tracker_create(lnc_idx: u32, error_tracker: *mut *mut c_void) -> u32;
    fn nrta_error_tracker_destroy(error_tracker: *mut c_void);
    fn nrta_error_tracker_get_list(
        error_tracker: *mut c_void,
        list: *mut *const NrtaError,
        error_count: *mut usize,
    ) -> u32;

    fn nrt_debug_client_connect(logical_nc_idx: c_int, stream_fd: *mut c_int) -> u32;
    fn nrt_debug_client_connect_close(stream_fd: c_int);
    fn nrt_debug_client_read_one_event(
        stream_fd: c_int,
        header: *mut c_void,
        payload: *mut *mut c_void,
    ) -> u32;

    fn nds_open(device: *mut c_void, pid: libc::pid_t, inst: *mut *mut c_void) -> c_int;
    fn nds_close(inst: *mut c_void) -> c_int;
    fn nds_increment_nc_counter(inst: *mut c_void, pnc: c_int, counter: u32, n: u64) -> c_int;
    fn nds_decrement_nc_counter(inst: *mut c_void, pnc: c_int, counter: u32, n: u64) -> c_int;
    fn nds_get_nc_counter(inst: *mut c_void, pnc: c_int, counter: u32, value: *mut u64) -> c_int;
    fn nds_set_nc_counter(inst: *mut c_void, pnc: c_int, counter: u32, value: *mut u64) -> c_int;
    fn nds_increment_nd_counter(inst: *mut c_void, counter: u32, n: u64) -> c_int;
    fn nds_decrement_nd_counter(inst: *mut c_void, counter: u32, n: u64) -> c_int;
    fn nds_or_nd_counter(inst: *mut c_void, counter: u32, bit: u64) -> c_int;
    fn nds_get_nd_counter(inst: *mut c_void, counter: u32, value: *mut u64) -> c_int;
    fn nds_set_nd_counter(inst: *mut c_void, counter: u32, value: *mut u64) -> c_int;
    fn nds_obj_new(inst: *mut c_void, kind: c_int) -> *mut c_void;
    fn nds_obj_commit(obj: *mut c_void) -> c_int;
    fn nds_obj_delete(obj: *mut c_void) -> c_int;
    fn nds_obj_handle_to_model_node_info(obj: *mut c_void) -> *mut c_void;
    fn nds_obj_handle_to_model_node_mem_usage(obj: *mut c_void) -> *mut c_void;
    fn nds_obj_handle_to_process_info(obj: *mut c_void) -> *mut c_void;
    fn nds_obj_handle_to_process_info_ext(obj: *mut c_void) -> *mut c_void;
    fn nds_read_all_model_nodes(
        inst: *mut c_void,
        models: *mut *mut *mut c_void,
        count: *mut usize,
    ) -> c_int;
    fn nds_read_process_info(inst: *mut c_void) -> *mut c_void;
    fn nds_read_process_info_ext(inst: *mut c_void) -> *mut c_void;

    fn nec_inc_semaphore(sem_inc_addr: *mut u32, val: u32);
    fn nec_get_dynamic_send_size_bytes(d: *mut c_void, sz: usize, rank: c_int, n: c_int) -> usize;
    fn nec_get_dynamic_send_offset_bytes(d: *mut c_void, sz: usize, r: c_int, n: c_int) -> usize;
    fn nec_get_dynamic_recv_offset_bytes(d: *mut c_void, sz: usize, r: c_int, n: c_int) -> usize;
    fn nec_set_recv_size_bytes(d: *mut c_void, recv: usize, sz: usize, r: c_int, n: c_int);
    fn nec_get_device_count(available_devices_array: *mut c_int, array_size: u32) -> c_int;
    fn nec_get_device_pci_bdf(
        dev: c_int,
        domain: *mut u32,
        bus: *mut u32,
        slot: *mut u8,
        func: *mut u8,
    ) -> c_int;
    fn nec_get_virtual_core_size(virtual_core_size: *mut u32) -> u32;
    fn nec_get_version_info(version_info: *mut c_void) -> u32;
    fn nec_build_port_and_rid_map(dev: c_int, mla: *mut c_int, hosts: *mut c_int, n: c_int) -> u32;
    fn nec_is_mla_available(dev: c_int, mla_idx: c_int) -> bool;
    fn nec_mla_idx_to_rid(dev: c_int, mla_idx: c_int) -> c_int;
    fn nec_rid_to_mla_idx(dev: c_int, rid: c_int) -> c_int;
    fn nec_get_peer_mla_idx(dev: c_int, mla_idx: c_int, port: c_int) -> c_int;
    fn nec_get_p2p_pod_peer_node(dev: u32, node: c_int, dist: u32, peer: *mut c_int) -> c_int;
    fn nec_pod_node_can_access_peer_node(
        pod_type: u32,
        local_rid: u32,
        local_node: u32,
        remote_rid: u32,
        remote_node: u32,
        can_access: *mut c_int,
    ) -> u32;
    fn nec_ndl_printk(s: *mut c_char, size: u32, action: u32);
}

/// `nrta_error_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct NrtaError {
    seq_id: u64,
    error_code: u64,
}

/// NEFFs to load: elementwise add 2×4 f32, a 4×4×4 matmul, the add on two physical cores
/// (LNC 2), as `capi` builds them; then [`deadlocked`].
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
            deadlocked(),
        ]
    })
}

/// The add whose vector engine waits for one DMA completion more than ever comes: it loads
/// and starts, and the simulator fails it (deadlock), so executions fail after submission,
/// where error trackers and inspect-on-fail see them.
fn deadlocked() -> Vec<u8> {
    let add = kernels::elementwise(kernels::Elementwise::Add, 2, 4, DType::F32)
        .expect("elementwise kernel");
    let text = nrt_sim::engine::disassemble(&add);
    let wait = "sem_wait sem=0 cmp=ge value=4";
    assert!(
        text.contains(wait),
        "the add kernel's first wait changed:\n{text}"
    );
    let text = text.replacen(wait, "sem_wait sem=0 cmp=ge value=5", 1);
    let dead = nrt_sim::engine::assemble(&text).expect("the deadlocking add assembles");
    nrt_sim::neff::neff_from_programs("dead", &[dead]).expect("dead")
}

/// The per-process temporary directory and the output directories handed to the library.
struct Dirs {
    root: PathBuf,
    /// Output directories (C strings) under `root`; the last one cannot be created (its
    /// parent is a regular file), so writes there fail.
    outputs: Vec<CString>,
}

/// Once per process, before the first call: the simulator backend (trn1, one device of two
/// cores), quiet logs, `nrt_inspect_begin`'s output directory under the temporary directory.
fn setup() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("nrt-fuzz-capi_ext-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&root);
        let _ = std::fs::write(root.join("file"), b"not a directory");
        let c = |p: PathBuf| CString::new(p.to_string_lossy().as_bytes()).expect("path");
        // SAFETY: runs once, at the first input, before the library has started any thread.
        unsafe {
            std::env::set_var("NEURON_RT_BACKEND", "sim");
            std::env::set_var("NEURON_RT_SIM_INSTANCE", "trn1");
            std::env::set_var("NEURON_RT_LOG_LEVEL", "QUIET");
            std::env::set_var("NEURON_RT_INSPECT_OUTPUT_DIR", root.join("env"));
        }
        Dirs {
            outputs: vec![
                c(root.join("a")),
                c(root.join("b").join("deep")),
                c(root.join("file").join("sub")),
            ],
            root,
        }
    })
}

/// A logical core index: small (0, 1 exist on trn1; 2.. do not) or any.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Core {
    Small(u8),
    Any(i32),
}

impl Core {
    fn get(self) -> i32 {
        match self {
            Core::Small(n) => i32::from(n % 4),
            Core::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum InspectSet {
    Defaults,
    SessionId(i32),
    OutputDir(u8),
    /// An empty or NULL directory (refused).
    BadDir(bool),
    MaxEvents(u64),
    CaptureNc(Core, bool),
    EventType(u8, bool),
    Enable(bool),
    OnFail(bool),
    Activity(u8, bool),
}

#[derive(Arbitrary, Debug)]
enum NdsCounter {
    IncNc(u64),
    DecNc(u64),
    GetNc,
    SetNc(u64),
    IncNd(u64),
    DecNd(u64),
    OrNd(u64),
    GetNd,
    SetNd(u64),
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
    },
    Unload(Sel),
    /// Executes model `m` with its own sets (the newest pair loaded with it) or other sets.
    Execute {
        m: Sel,
        sets: Option<(Sel, Sel)>,
        repeat: Option<i8>,
    },
    Schedule {
        m: Sel,
        sets: Option<(Sel, Sel)>,
        queue: i8,
    },
    Drain(i8),
    FreeTensor(Sel),
    DestroySet(Sel),
    Completed(Option<u8>, u64),
    // nrt_async.h extensions
    CompletionHandle {
        seq: Option<u8>,
        raw: u64,
        null: bool,
    },
    PollHandle(u8),
    CloseHandle(u8),
    TrackerCreate {
        lnc: Core,
        null: bool,
    },
    TrackerDestroy(Sel),
    TrackerList {
        t: Sel,
        null: u8,
    },
    // ndebug_stream.h
    DebugConnect {
        lnc: Core,
        null: bool,
    },
    DebugClose {
        fd: Option<u8>,
        raw: i32,
    },
    DebugRead {
        fd: Option<u8>,
        raw: i32,
        null: u8,
    },
    // nrt_profile.h: inspect
    InspectBegin,
    InspectEnv {
        types: u8,
        cores: u8,
        enable: u8,
    },
    InspectStop,
    InspectBeginWith(Sel),
    InspectConfigAllocate {
        dir: u8,
        null: bool,
    },
    InspectConfigFree(Sel),
    InspectConfigSet(Sel, InspectSet),
    ActivityTypes {
        of: Option<Sel>,
        null: bool,
    },
    // nrt_profile.h: continuous profiling
    ContinuousAllocate {
        dir: u8,
        null: bool,
    },
    ContinuousFree(Sel),
    ContinuousSetDir {
        o: Sel,
        dir: Option<u8>,
    },
    ContinuousStart(Sel),
    ContinuousSave {
        vnc: u32,
        o: Sel,
    },
    ContinuousStop,
    // nrt_sys_trace.h with filters and fetch options
    Trace {
        types: u16,
        off_nc: Option<Core>,
        max_events: u8,
        fetch: Option<(u8, Option<u64>)>,
        stop: bool,
    },
    TraceStop,
    // nds/neuron_ds.h
    NdsOpen {
        device: u8,
        pid: u8,
        null: bool,
    },
    NdsClose(Sel),
    NdsCounter {
        inst: Sel,
        pnc: Core,
        counter: u16,
        op: NdsCounter,
        null: bool,
    },
    NdsObjNew {
        inst: Sel,
        kind: i8,
    },
    /// Writes through the accessors of an object (as a C program fills it).
    NdsObjFill {
        obj: Sel,
        byte: u8,
    },
    NdsObjCommit(Sel),
    NdsObjDelete(Sel),
    NdsReadAll {
        inst: Sel,
        null: bool,
        delete: bool,
    },
    NdsReadProcess {
        inst: Sel,
        ext: bool,
    },
    // nec.h
    Nec {
        which: u8,
        a: i32,
        b: i32,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    ops: Vec<Op>,
}

/// What the harness was given, kept so stale handles can be replayed and everything can be
/// freed at the end.
#[derive(Default)]
struct World {
    models: Vec<*mut c_void>,
    /// The model's own (input, output) sets, by index in `models`.
    own: Vec<(*mut c_void, *mut c_void)>,
    tensors: Vec<*mut c_void>,
    sets: Vec<*mut c_void>,
    seqs: Vec<u64>,
    /// Completion handles (descriptors this harness owns; -1 once closed), and whether a
    /// read has taken the signal already.
    handles: Vec<(c_int, bool)>,
    trackers: Vec<*mut c_void>,
    trackers_live: Vec<*mut c_void>,
    /// Debug stream descriptors returned by connect, and whether still connected.
    streams: Vec<(c_int, bool)>,
    inspect_configs: Vec<*mut c_void>,
    continuous: Vec<*mut c_void>,
    inspect_on: bool,
    trace_on: bool,
    nds_insts: Vec<*mut c_void>,
    nds_objs: Vec<*mut c_void>,
    /// The `NRT_STATUS *ret` of each scheduled request: written when it completes, so kept
    /// until the closing `nrt_close` has completed everything.
    rets: Vec<(Box<u32>, bool)>,
}

impl World {
    fn set(&self, s: Sel) -> *mut c_void {
        pick(&self.sets, s)
    }
}

/// What a request's `*ret` holds until the library writes it.
const NOT_WRITTEN: u32 = u32::MAX;

fn out_dir(d: &Dirs, i: u8) -> &CString {
    &d.outputs[usize::from(i) % d.outputs.len()]
}

const EVENT_TYPES: [&str; 11] = [
    "nrt_load",
    "nrt_unload",
    "nrt_exec_submit",
    "nrt_exec_start",
    "nrt_exec_complete",
    "nrt_tensor_read",
    "nrt_tensor_write",
    "nrt_tensor_copy",
    "nrt_error",
    "nrt_bogus",
    "",
];
const ACTIVITIES: [&str; 6] = [
    "system_profile",
    "device_profile",
    "host_memory",
    "cpu_util",
    "all",
    "gpu_util",
];
/// `NEURON_RT_INSPECT_EVENT_FILTER_TYPE` values.
const TYPE_FILTERS: [&str; 6] = [
    "",
    "nrt_exec_complete,nrt_error",
    "software,^nrt_tensor_read",
    "hardware",
    "^nrt_load, nrt_unload",
    "nrt_nothing",
];
/// `NEURON_RT_INSPECT_EVENT_FILTER_NC` values.
const CORE_FILTERS: [&str; 6] = ["", "0", "1", "0-1,3", "5-2", "0-99999"];

fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL")
}

/// Reads an error tracker's list as a C program does (the list is valid until the next call).
fn tracker_list(t: *mut c_void, null: u8) {
    let mut list: *const NrtaError = std::ptr::null();
    let mut n = 0usize;
    let lp = if null & 1 != 0 {
        std::ptr::null_mut()
    } else {
        &raw mut list
    };
    let np = if null & 2 != 0 {
        std::ptr::null_mut()
    } else {
        &raw mut n
    };
    // SAFETY: both outputs NULL or writable.
    if status(unsafe { nrta_error_tracker_get_list(t, lp, np) }) == 0 {
        assert_eq!(list.is_null(), n == 0, "list {list:p} with {n} errors");
        if std::env::var_os("CAPI_EXT_TRACE").is_some() {
            eprintln!("tracker {t:p}: {n} errors");
        }
        for k in 0..n {
            // SAFETY: `n` elements, valid until the next call on this tracker.
            let e = unsafe { list.add(k).read() };
            if std::env::var_os("CAPI_EXT_TRACE").is_some() {
                eprintln!("tracker {t:p}: {e:?}");
            }
            let code = u32::try_from(e.error_code).expect("error code fits a status");
            assert_ne!(
                status(code),
                0,
                "a tracked error with status SUCCESS: {e:?}"
            );
        }
    }
}

/// Fills a datastore object through the accessors that match its type (NULL for the others).
fn nds_fill(obj: *mut c_void, byte: u8) {
    let fill = |p: *mut c_void, len: usize| {
        if !p.is_null() {
            // SAFETY: a non-NULL accessor result points at the object's record of this
            // C layout's size, valid while the object lives (it does: it was just listed).
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), byte, len) };
        }
    };
    // SAFETY (each): plain calls; the object handle is looked up.
    fill(unsafe { nds_obj_handle_to_model_node_info(obj) }, 284);
    fill(unsafe { nds_obj_handle_to_model_node_mem_usage(obj) }, 384);
    fill(unsafe { nds_obj_handle_to_process_info(obj) }, 60);
    fill(unsafe { nds_obj_handle_to_process_info_ext(obj) }, 256);
}

fn nec(which: u8, a: i32, b: i32) {
    let mut u = [0u32; 2];
    let mut i = [0 as c_int; 8];
    let mut bytes = [0u8; 2];
    let mut version = [0u64; 8];
    // SAFETY (each): every pointer is NULL or valid for what the header says is written.
    unsafe {
        match which % 16 {
            0 => {
                let n = nec_get_device_count(i.as_mut_ptr(), (a as u32) % 9);
                assert!(n >= -1, "device count {n}");
            }
            1 => {
                let n = nec_get_device_count(null_mut(), (a as u32) % 2);
                assert!(n >= -1, "device count {n}");
            }
            2 => {
                status(nec_get_virtual_core_size(if a & 1 == 0 {
                    u.as_mut_ptr()
                } else {
                    null_mut()
                }));
            }
            3 => {
                status(nec_get_version_info(if a & 1 == 0 {
                    version.as_mut_ptr().cast()
                } else {
                    null_mut()
                }));
            }
            4 => {
                let [x, y] = &mut u;
                let [p, q] = &mut bytes;
                nec_get_device_pci_bdf(a, x, y, p, q);
            }
            5 => {
                let (m, h) = i.split_at_mut(4);
                status(nec_build_port_and_rid_map(
                    a,
                    m.as_mut_ptr(),
                    h.as_mut_ptr(),
                    4,
                ));
            }
            6 => {
                nec_is_mla_available(a, b);
            }
            7 => {
                nec_mla_idx_to_rid(a, b);
                nec_rid_to_mla_idx(a, b);
            }
            8 => {
                nec_get_peer_mla_idx(a, b, a ^ b);
            }
            9 => {
                nec_get_p2p_pod_peer_node(a as u32, b, 1, i.as_mut_ptr());
            }
            10 => {
                status(nec_pod_node_can_access_peer_node(
                    a as u32,
                    b as u32,
                    0,
                    1,
                    2,
                    i.as_mut_ptr(),
                ));
            }
            11 => {
                let d = version.as_mut_ptr().cast();
                nec_get_dynamic_send_size_bytes(d, 4, a, b);
                nec_get_dynamic_send_offset_bytes(d, 4, a, b);
                nec_get_dynamic_recv_offset_bytes(d, 4, a, b);
                nec_set_recv_size_bytes(d, 16, 4, a, b);
            }
            12 => nec_inc_semaphore(u.as_mut_ptr(), a as u32),
            13 => {
                let mut s = *b"hello\0";
                nec_ndl_printk(s.as_mut_ptr().cast(), 6, a as u32);
            }
            _ => {
                let _ = nec_get_device_count(i.as_mut_ptr(), 8);
            }
        }
    }
}

#[allow(clippy::too_many_lines)]
fn step(w: &mut World, d: &Dirs, op: &Op, open: &mut bool) {
    match *op {
        Op::Init { inflight } => {
            if !*open {
                init(inflight);
                *open = true;
            } else {
                // SAFETY: NULL version strings are allowed.
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
        } => {
            // `which` below 0xf0 picks one of the working NEFFs, above the deadlocking one.
            let all = neffs();
            let k = if which >= 0xf0 {
                all.len() - 1
            } else {
                usize::from(which) % (all.len() - 1)
            };
            let mut bytes = all[k].clone();
            for &(at, v) in edits.iter().take(4) {
                let i = usize::from(at) % bytes.len();
                bytes[i] ^= v;
            }
            let mut m = null_mut();
            // SAFETY: `bytes` is valid for its length; `m` is writable.
            let s = unsafe {
                nrt_load(
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    i32::from(vnc % 4),
                    -1,
                    &mut m,
                )
            };
            if status(s) == 0 {
                w.models.push(m);
                let own = own_sets(&mut w.tensors, &mut w.sets, m, 1 << 16);
                w.own.push(own);
            }
        }
        Op::Unload(m) => {
            status(nrt_unload(pick(&w.models, m)));
        }
        Op::Execute { m, sets, repeat } => {
            let (mi, m) = model(w, m);
            let (i, o) = io(w, mi, sets);
            match repeat {
                None => status(nrt_execute(m, i, o)),
                Some(r) => status(nrt_execute_repeat(m, i, o, c_int::from(r % 4))),
            };
        }
        Op::Schedule { m, sets, queue } => {
            let (mi, m) = model(w, m);
            let (i, o) = io(w, mi, sets);
            let mut ret = Box::new(NOT_WRITTEN);
            let mut seq = 0u64;
            // SAFETY: `ret` stays writable until after the closing `nrt_close`; `seq` is
            // writable.
            let s = unsafe {
                nrta_execute_schedule(m, i, o, c_int::from(queue % 3), &mut *ret, &mut seq)
            };
            let accepted = status(s) == 0;
            w.rets.push((ret, accepted));
            if accepted {
                w.seqs.push(seq);
            }
        }
        Op::Drain(vnc) => {
            status(nrt_async_drain_queued_execs(i32::from(vnc % 4)));
        }
        Op::FreeTensor(t) => {
            let mut h = pick(&w.tensors, t);
            // SAFETY: `h` is a local the library may clear.
            unsafe { nrt_tensor_free(&mut h) };
        }
        Op::DestroySet(s) => {
            let mut h = w.set(s);
            // SAFETY: as above.
            unsafe { nrt_destroy_tensor_set(&mut h) };
        }
        Op::Completed(which, raw) => {
            let seq = seq_of(w, which, raw);
            let mut done = false;
            // SAFETY: `done` writable.
            status(unsafe { nrta_is_completed(seq, &mut done) });
        }
        Op::CompletionHandle { seq, raw, null } => {
            let seq = seq_of(w, seq, raw);
            let mut fd: c_int = -1;
            let p = if null { null_mut() } else { &raw mut fd };
            // SAFETY: `p` is NULL or writable.
            if status(unsafe { nrta_get_completion_handle(seq, p) }) == 0 && !null {
                assert!(fd >= 0, "completion handle {fd}");
                w.handles.push((fd, false));
            }
        }
        Op::PollHandle(k) => {
            if !w.handles.is_empty() {
                let i = usize::from(k) % w.handles.len();
                let (fd, _) = w.handles[i];
                if fd >= 0 {
                    let mut v = 0u64;
                    // SAFETY: our open eventfd; 8 writable bytes (non-blocking).
                    if unsafe { libc::read(fd, (&raw mut v).cast(), 8) } == 8 {
                        w.handles[i].1 = true;
                    }
                }
            }
        }
        Op::CloseHandle(k) => {
            if !w.handles.is_empty() {
                let i = usize::from(k) % w.handles.len();
                if w.handles[i].0 >= 0 {
                    // SAFETY: ours, closed once.
                    unsafe { libc::close(w.handles[i].0) };
                    w.handles[i].0 = -1;
                }
            }
        }
        Op::TrackerCreate { lnc, null } => {
            let mut t = null_mut();
            let p = if null { null_mut() } else { &raw mut t };
            // SAFETY: `p` is NULL or writable.
            if status(unsafe { nrta_error_tracker_create(lnc.get() as u32, p) }) == 0 && !null {
                if std::env::var_os("CAPI_EXT_TRACE").is_some() {
                    eprintln!("tracker {t:p}: logical core {}", lnc.get());
                }
                w.trackers.push(t);
                w.trackers_live.push(t);
            }
        }
        Op::TrackerDestroy(t) => {
            let h = pick(&w.trackers, t);
            // SAFETY: looked up by the library.
            unsafe { nrta_error_tracker_destroy(h) };
            w.trackers_live.retain(|&x| x != h);
        }
        Op::TrackerList { t, null } => tracker_list(pick(&w.trackers, t), null),
        Op::DebugConnect { lnc, null } => {
            let mut fd: c_int = -1;
            let p = if null { null_mut() } else { &raw mut fd };
            // SAFETY: `p` is NULL or writable.
            if status(unsafe { nrt_debug_client_connect(lnc.get(), p) }) == 0 && !null {
                assert!(fd >= 0, "debug stream {fd}");
                w.streams.push((fd, true));
            }
        }
        Op::DebugClose { fd, raw } => {
            let fd = stream_fd(w, fd, raw);
            // SAFETY: a descriptor number, looked up by the library (it closes only its own).
            unsafe { nrt_debug_client_connect_close(fd) };
            for s in w.streams.iter_mut().filter(|s| s.0 == fd) {
                s.1 = false;
            }
        }
        Op::DebugRead { fd, raw, null } => {
            let fd = stream_fd(w, fd, raw);
            let mut header = [0u64; 8];
            let mut payload: *mut c_void = null_mut();
            let h = if null & 1 != 0 {
                null_mut()
            } else {
                header.as_mut_ptr().cast()
            };
            let p = if null & 2 != 0 {
                null_mut()
            } else {
                &raw mut payload
            };
            // SAFETY: 64 writable header bytes or NULL; `p` NULL or writable.
            if status(unsafe { nrt_debug_client_read_one_event(fd, h, p) }) == 0 {
                // SAFETY: malloc'ed by the library (or NULL), freed once.
                unsafe { libc::free(payload) };
            }
        }
        Op::InspectBegin => {
            if status(nrt_inspect_begin()) == 0 {
                w.inspect_on = true;
            }
        }
        Op::InspectEnv {
            types,
            cores,
            enable,
        } => {
            // Only while closed: no library thread runs then.
            if !*open {
                let set = |k: &str, v: &str| {
                    // SAFETY: no library thread runs while the library is closed.
                    unsafe {
                        if v.is_empty() {
                            std::env::remove_var(k);
                        } else {
                            std::env::set_var(k, v);
                        }
                    }
                };
                set(
                    "NEURON_RT_INSPECT_EVENT_FILTER_TYPE",
                    TYPE_FILTERS[usize::from(types) % TYPE_FILTERS.len()],
                );
                set(
                    "NEURON_RT_INSPECT_EVENT_FILTER_NC",
                    CORE_FILTERS[usize::from(cores) % CORE_FILTERS.len()],
                );
                set(
                    "NEURON_RT_INSPECT_ENABLE",
                    ["", "1", "0"][usize::from(enable % 3)],
                );
                set(
                    "NEURON_RT_INSPECT_ON_FAIL",
                    ["", "1", "0"][usize::from(enable / 3 % 3)],
                );
                set(
                    "NEURON_RT_INSPECT_DEVICE_PROFILE",
                    ["", "0"][usize::from(enable / 9 % 2)],
                );
            }
        }
        Op::InspectStop => {
            status(nrt_inspect_stop());
            w.inspect_on = false;
        }
        Op::InspectBeginWith(s) => {
            let h = pick(&w.inspect_configs, s);
            // NULL options take the defaults, which write under `./output`: tried only while
            // capture is on (refused then).
            if (!h.is_null() || w.inspect_on) && status(nrt_inspect_begin_with_options(h)) == 0 {
                w.inspect_on = true;
            }
        }
        Op::InspectConfigAllocate { dir, null } => {
            let mut h = null_mut();
            let p = if null { null_mut() } else { &raw mut h };
            // SAFETY: `p` NULL or writable.
            if status(unsafe { nrt_inspect_config_allocate(p) }) == 0 && !null {
                // SAFETY: a C string.
                status(unsafe { nrt_inspect_config_set_output_dir(h, out_dir(d, dir).as_ptr()) });
                w.inspect_configs.push(h);
            }
        }
        Op::InspectConfigFree(s) => {
            status(nrt_inspect_config_free(pick(&w.inspect_configs, s)));
        }
        Op::InspectConfigSet(s, ref what) => {
            let h = pick(&w.inspect_configs, s);
            // SAFETY (each): string arguments are C strings or NULL.
            match *what {
                InspectSet::Defaults => {
                    status(nrt_inspect_config_set_defaults(h));
                    // The defaults write under `./output`: a directory of ours again.
                    status(unsafe { nrt_inspect_config_set_output_dir(h, out_dir(d, 0).as_ptr()) });
                }
                InspectSet::SessionId(id) => {
                    status(nrt_inspect_config_set_session_id(h, id));
                }
                InspectSet::OutputDir(k) => {
                    status(unsafe { nrt_inspect_config_set_output_dir(h, out_dir(d, k).as_ptr()) });
                }
                InspectSet::BadDir(null) => {
                    let empty = c("");
                    let p = if null {
                        std::ptr::null()
                    } else {
                        empty.as_ptr()
                    };
                    status(unsafe { nrt_inspect_config_set_output_dir(h, p) });
                }
                InspectSet::MaxEvents(n) => {
                    status(nrt_inspect_config_set_sys_trace_max_events_per_nc(h, n));
                }
                InspectSet::CaptureNc(core, on) => {
                    status(nrt_inspect_config_set_capture_enabled_for_nc(
                        h,
                        core.get() as u32,
                        on,
                    ));
                }
                InspectSet::EventType(k, on) => {
                    let name = c(EVENT_TYPES[usize::from(k) % EVENT_TYPES.len()]);
                    let p = if k == 255 {
                        std::ptr::null()
                    } else {
                        name.as_ptr()
                    };
                    status(unsafe {
                        nrt_inspect_config_set_capture_enabled_for_event_type_string(h, p, on)
                    });
                }
                InspectSet::Enable(on) => {
                    status(nrt_inspect_config_set_enable_inspect(h, on));
                }
                InspectSet::OnFail(on) => {
                    status(nrt_inspect_config_set_enable_inspect_on_fail(h, on));
                }
                InspectSet::Activity(k, on) => {
                    let name = c(ACTIVITIES[usize::from(k) % ACTIVITIES.len()]);
                    let p = if k == 255 {
                        std::ptr::null()
                    } else {
                        name.as_ptr()
                    };
                    status(unsafe { nrt_inspect_config_set_activity(h, p, on) });
                }
            }
        }
        Op::ActivityTypes { of, null } => {
            let mut arr: *mut *const c_char = null_mut();
            let mut n = 0usize;
            let np = if null { null_mut() } else { &raw mut n };
            // SAFETY: outputs writable or NULL.
            let s = unsafe {
                match of {
                    None => nrt_inspect_config_get_all_activity_types(&mut arr, np),
                    Some(s) => nrt_inspect_config_get_enabled_activity_types(
                        pick(&w.inspect_configs, s),
                        &mut arr,
                        np,
                    ),
                }
            };
            if status(s) == 0 {
                assert!(n <= 4, "{n} activity types");
                for k in 0..n {
                    // SAFETY: `n` NUL-terminated names.
                    let name = unsafe { std::ffi::CStr::from_ptr(*arr.add(k)) };
                    let name = name.to_str().expect("UTF-8");
                    assert!(ACTIVITIES[..4].contains(&name), "activity type {name}");
                }
                // SAFETY: the array the call returned, with its count, freed once.
                unsafe { nrt_inspect_config_free_activity_types(arr, n) };
            }
        }
        Op::ContinuousAllocate { dir, null } => {
            let mut h = null_mut();
            let p = if null { null_mut() } else { &raw mut h };
            // SAFETY: `p` NULL or writable.
            if status(unsafe { nrt_profile_continuous_options_allocate(p) }) == 0 && !null {
                // SAFETY: a C string.
                status(unsafe {
                    nrt_profile_continuous_options_set_output_dir(h, out_dir(d, dir).as_ptr())
                });
                w.continuous.push(h);
            }
        }
        Op::ContinuousFree(s) => {
            status(nrt_profile_continuous_options_free(pick(&w.continuous, s)));
        }
        Op::ContinuousSetDir { o, dir } => {
            let h = pick(&w.continuous, o);
            let empty = c("");
            let p = match dir {
                Some(k) if k < 200 => out_dir(d, k).as_ptr(),
                Some(_) => empty.as_ptr(),
                None => std::ptr::null(),
            };
            // SAFETY: NULL or a C string.
            status(unsafe { nrt_profile_continuous_options_set_output_dir(h, p) });
        }
        Op::ContinuousStart(s) => {
            status(nrt_profile_continuous_start(pick(&w.continuous, s)));
        }
        Op::ContinuousSave { vnc, o } => {
            status(nrt_profile_continuous_save(vnc % 5, pick(&w.continuous, o)));
        }
        Op::ContinuousStop => {
            status(nrt_profile_continuous_stop());
        }
        Op::Trace {
            types,
            off_nc,
            max_events,
            fetch,
            stop,
        } => {
            let mut cfg = null_mut();
            // SAFETY: `cfg` writable.
            if status(unsafe { nrt_sys_trace_config_allocate(&mut cfg) }) == 0 {
                nrt_sys_trace_config_set_max_events_per_nc(cfg, u64::from(max_events));
                for (k, name) in EVENT_TYPES.iter().enumerate() {
                    if types & (1 << k) != 0 {
                        let name = c(name);
                        // SAFETY: a C string.
                        status(unsafe {
                            nrt_sys_trace_config_set_capture_enabled_for_event_type(
                                cfg,
                                name.as_ptr(),
                                types & (1 << 15) != 0,
                            )
                        });
                    }
                }
                if let Some(core) = off_nc {
                    nrt_sys_trace_config_set_capture_enabled_for_nc(cfg, core.get() as u32, false);
                }
                if status(nrt_sys_trace_start(cfg)) == 0 {
                    w.trace_on = true;
                }
                nrt_sys_trace_config_free(cfg);
            }
            if let Some((max, nc)) = fetch {
                let mut opts = null_mut();
                // SAFETY: `opts` writable.
                if status(unsafe { nrt_sys_trace_fetch_options_allocate(&mut opts) }) == 0 {
                    nrt_sys_trace_fetch_options_set_max_events_per_nc(opts, u64::from(max));
                    if let Some(nc) = nc {
                        nrt_sys_trace_fetch_options_set_nc_idx(opts, nc % 4);
                    }
                    let (mut buf, mut len): (*mut c_char, usize) = (null_mut(), 0);
                    // SAFETY: both outputs writable; options are ours.
                    if status(unsafe { nrt_sys_trace_fetch_events(&mut buf, &mut len, opts) }) == 0
                    {
                        // SAFETY: a buffer the library allocated.
                        unsafe { nrt_sys_trace_buffer_free(buf) };
                    }
                    nrt_sys_trace_fetch_options_free(opts);
                }
            }
            if stop {
                status(nrt_sys_trace_stop());
                w.trace_on = false;
            }
        }
        Op::TraceStop => {
            status(nrt_sys_trace_stop());
            w.trace_on = false;
        }
        Op::NdsOpen { device, pid, null } => {
            let mut inst = null_mut();
            let p = if null { null_mut() } else { &raw mut inst };
            // A few device keys only: each new key is a datastore kept for the process.
            let device = (usize::from(device % 4) * 64) as *mut c_void;
            let pid = match pid % 3 {
                0 => 0,
                // SAFETY: plain system call.
                1 => unsafe { libc::getpid() },
                _ => 1,
            };
            // SAFETY: `p` NULL or writable.
            if unsafe { nds_open(device, pid, p) } == 0 {
                assert!(!null && !inst.is_null(), "nds_open");
                w.nds_insts.push(inst);
            }
        }
        Op::NdsClose(s) => {
            // SAFETY: looked up.
            unsafe { nds_close(pick(&w.nds_insts, s)) };
        }
        Op::NdsCounter {
            inst,
            pnc,
            counter,
            ref op,
            null,
        } => {
            let inst = pick(&w.nds_insts, inst);
            let (pnc, counter) = (pnc.get(), u32::from(counter % 128));
            let mut v = 0u64;
            let vp = |v: &mut u64| if null { null_mut() } else { v as *mut u64 };
            // SAFETY (each): `vp` NULL or a valid u64.
            let r = unsafe {
                match *op {
                    NdsCounter::IncNc(n) => nds_increment_nc_counter(inst, pnc, counter, n),
                    NdsCounter::DecNc(n) => nds_decrement_nc_counter(inst, pnc, counter, n),
                    NdsCounter::GetNc => nds_get_nc_counter(inst, pnc, counter, vp(&mut v)),
                    NdsCounter::SetNc(n) => {
                        v = n;
                        nds_set_nc_counter(inst, pnc, counter, vp(&mut v))
                    }
                    NdsCounter::IncNd(n) => nds_increment_nd_counter(inst, counter, n),
                    NdsCounter::DecNd(n) => nds_decrement_nd_counter(inst, counter, n),
                    NdsCounter::OrNd(n) => nds_or_nd_counter(inst, counter, n),
                    NdsCounter::GetNd => nds_get_nd_counter(inst, counter, vp(&mut v)),
                    NdsCounter::SetNd(n) => {
                        v = n;
                        nds_set_nd_counter(inst, counter, vp(&mut v))
                    }
                }
            };
            assert!(r == 0 || r == -1, "nds counter call returned {r}");
        }
        Op::NdsObjNew { inst, kind } => {
            // SAFETY: looked up.
            let o = unsafe { nds_obj_new(pick(&w.nds_insts, inst), c_int::from(kind % 4)) };
            if !o.is_null() {
                w.nds_objs.push(o);
            }
        }
        Op::NdsObjFill { obj, byte } => nds_fill(pick(&w.nds_objs, obj), byte),
        Op::NdsObjCommit(s) => {
            // SAFETY: looked up.
            let r = unsafe { nds_obj_commit(pick(&w.nds_objs, s)) };
            assert!(r == 0 || r == -1, "nds_obj_commit returned {r}");
        }
        Op::NdsObjDelete(s) => {
            // SAFETY: looked up.
            unsafe { nds_obj_delete(pick(&w.nds_objs, s)) };
        }
        Op::NdsReadAll { inst, null, delete } => {
            let mut arr: *mut *mut c_void = null_mut();
            let mut n = 0usize;
            let np = if null { null_mut() } else { &raw mut n };
            // SAFETY: outputs writable or NULL.
            if unsafe { nds_read_all_model_nodes(pick(&w.nds_insts, inst), &mut arr, np) } == 0 {
                assert_eq!(arr.is_null(), n == 0, "{n} model nodes at {arr:p}");
                for k in 0..n {
                    // SAFETY: `n` handles.
                    let h = unsafe { *arr.add(k) };
                    nds_fill(h, k as u8);
                    if delete {
                        // SAFETY: a snapshot handle, deleted once.
                        assert_eq!(unsafe { nds_obj_delete(h) }, 0, "deleting a snapshot");
                    } else {
                        w.nds_objs.push(h);
                    }
                }
                // SAFETY: the malloc'ed array, freed once.
                unsafe { libc::free(arr.cast()) };
            }
        }
        Op::NdsReadProcess { inst, ext } => {
            let inst = pick(&w.nds_insts, inst);
            // SAFETY: looked up.
            let o = unsafe {
                if ext {
                    nds_read_process_info_ext(inst)
                } else {
                    nds_read_process_info(inst)
                }
            };
            if !o.is_null() {
                w.nds_objs.push(o);
            }
        }
        Op::Nec { which, a, b } => nec(which, a, b),
    }
}

fn nth<T>(v: &[T], k: u8) -> Option<&T> {
    if v.is_empty() {
        None
    } else {
        v.get(usize::from(k) % v.len())
    }
}

fn seq_of(w: &World, which: Option<u8>, raw: u64) -> u64 {
    match which {
        Some(i) if !w.seqs.is_empty() => w.seqs[usize::from(i) % w.seqs.len()],
        _ => raw,
    }
}

fn stream_fd(w: &World, which: Option<u8>, raw: i32) -> c_int {
    match which.and_then(|k| nth(&w.streams, k)) {
        Some(&(fd, _)) => fd,
        None => raw,
    }
}

fn model(w: &World, m: Sel) -> (Option<usize>, *mut c_void) {
    match m {
        Sel::Issued(i) if !w.models.is_empty() => {
            let k = usize::from(i) % w.models.len();
            (Some(k), w.models[k])
        }
        other => (None, pick(&w.models, other)),
    }
}

fn io(w: &World, mi: Option<usize>, sets: Option<(Sel, Sel)>) -> (*mut c_void, *mut c_void) {
    match (sets, mi) {
        (Some((i, o)), _) => (w.set(i), w.set(o)),
        (None, Some(k)) => w.own[k],
        (None, None) => (null_mut(), null_mut()),
    }
}

fuzz_target!(|input: Input| {
    let dirs = setup();
    let mut w = World::default();
    // The inspect variables an earlier input set (the library is closed between inputs).
    for var in [
        "NEURON_RT_INSPECT_EVENT_FILTER_TYPE",
        "NEURON_RT_INSPECT_EVENT_FILTER_NC",
        "NEURON_RT_INSPECT_ENABLE",
        "NEURON_RT_INSPECT_ON_FAIL",
        "NEURON_RT_INSPECT_DEVICE_PROFILE",
    ] {
        // SAFETY: no library thread runs while the library is closed.
        unsafe { std::env::remove_var(var) };
    }
    init(0);
    let mut open = true;
    for op in input.ops.iter().take(64) {
        step(&mut w, dirs, op, &mut open);
    }
    // Teardown as a careful C program does it: stop captures, finish queued work, free what
    // it holds, close.
    if !open {
        init(0);
    }
    let _ = nrt_inspect_stop();
    let _ = nrt_profile_continuous_stop();
    if w.trace_on {
        let _ = nrt_sys_trace_stop();
    }
    let _ = nrt_async_drain_queued_execs(-1);
    for &t in &w.trackers_live {
        tracker_list(t, 0);
        // SAFETY: a live tracker, destroyed once.
        unsafe { nrta_error_tracker_destroy(t) };
    }
    for &(fd, live) in &w.streams {
        if live {
            // SAFETY: a connection of ours.
            unsafe { nrt_debug_client_connect_close(fd) };
        }
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
    for &h in &w.inspect_configs {
        let _ = nrt_inspect_config_free(h);
    }
    for &h in &w.continuous {
        let _ = nrt_profile_continuous_options_free(h);
    }
    // Objects before instances (deleting a created object takes its record out of the store
    // of an open writable instance); stale entries are refused.
    for &o in &w.nds_objs {
        // SAFETY: looked up.
        unsafe { nds_obj_delete(o) };
    }
    for &i in &w.nds_insts {
        // SAFETY: looked up.
        unsafe { nds_close(i) };
    }
    nrt_close();
    // Closing completes every request: each accepted request's `*ret` holds a defined status.
    for (ret, accepted) in &w.rets {
        if *accepted {
            assert_ne!(
                **ret, NOT_WRITTEN,
                "an accepted request's status was never written"
            );
            status(**ret);
        }
    }
    // Each completion handle whose signal was not read yet polls readable.
    for &(fd, read) in w.handles.iter().filter(|h| h.0 >= 0) {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; our open descriptor.
        let n = unsafe { libc::poll(&raw mut p, 1, if read { 0 } else { 2000 }) };
        assert!(
            read || n == 1,
            "completion handle {fd} not signalled after nrt_close"
        );
        // SAFETY: ours, closed once.
        unsafe { libc::close(fd) };
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
    // What the library wrote stays under the temporary directory; it is emptied so that a
    // long run does not fill the disk.
    for sub in ["a", "b", "env"] {
        let _ = std::fs::remove_dir_all(dirs.root.join(sub));
    }
});
