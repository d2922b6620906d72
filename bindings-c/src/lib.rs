//! `libnrt`: the libnrt 2.31 C ABI over `nrt-core`, for existing C and C++ programs.
//!
//! One process-global runtime backs the C API. The backend is chosen at the first `nrt_init`
//! (or the first count call, which works before it) from the `NEURON_RT_*` variables, read by
//! [`nrt_backend::Selection`] exactly as the `nrt` command reads them — only the default of
//! `NEURON_RT_BACKEND` differs (`auto` here, `sim` for the command):
//!
//! | value of `NEURON_RT_BACKEND` | backend |
//! | --- | --- |
//! | `auto` (default) | the Linux driver when `/dev/neuron0` exists; otherwise `nrt_init` fails as libnrt does ("Cannot find Neuron devices…", `NRT_INVALID`) and the log says to set `NEURON_RT_BACKEND=sim` |
//! | `sim` | the simulator: `NEURON_RT_SIM_INSTANCE` = `trn1` (default), `inf2` or `trn2`; `NEURON_RT_SIM_DEVICES` = device count, 1 to 64 (default 1); `NEURON_RT_SIM_PLUMBING=0` refuses NEFFs without a simulator program instead of running them in plumbing mode |
//! | `linux` | the Linux driver |
//!
//! An invalid value of any of these variables makes `nrt_init` fail with `NRT_INVALID` and a
//! message naming it.
//!
//! Every exported function runs through [`api!`]: panics are caught (→ `NRT_FAILURE` and a log
//! line) and pointers are checked (NULL → `NRT_INVALID`). Model, tensor and tensor-set pointers
//! are opaque handles looked up in tables — a stale or forged one is refused with
//! `NRT_INVALID_HANDLE` / `NRT_INVALID`, never dereferenced.

mod backend;
mod host;

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nrt_backend::{AnyDriver, FrontEnd, NO_DEVICE_HINT, Selection};
use nrt_core::io::TensorUsage;
use nrt_core::tensor::{Tensor, TensorPlacement, TensorSet};
use nrt_core::{
    CompletionHook, Error, FrameworkType, InitState, ModelHandle, NrtStatus, Runtime, Xu, err,
};
use nrt_host::EnvVars;
use nrt_sim::Instance;

use backend::SwitchDriver;
use host::{CHost, InCall};

type Rt = Runtime<&'static SwitchDriver, CHost>;

static DRIVER: SwitchDriver = SwitchDriver::new();

fn rt() -> &'static Rt {
    static RT: OnceLock<Rt> = OnceLock::new();
    RT.get_or_init(|| Runtime::with_host(&DRIVER, CHost::new()))
}

/// Runs an exported function's body: records the function name for log lines, catches panics.
macro_rules! api {
    ($name:literal, $body:expr) => {{
        let _in = InCall::enter($name);
        #[allow(unused_mut)]
        let mut body = || -> Result<(), Error> { $body };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| code(body()))) {
            Ok(c) => c,
            Err(_) => {
                rt().log(
                    nrt_core::Level::Error,
                    format_args!("internal error (panic) caught in {}", $name),
                );
                NrtStatus::Failure.code()
            }
        }
    }};
}

fn code(r: Result<(), Error>) -> u32 {
    match r {
        Ok(()) => NrtStatus::Success.code(),
        Err(e) => e.status().code(),
    }
}

fn invalid(what: &str) -> Error {
    let e = err!(Invalid, "{what} is NULL");
    rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
    e
}

/// A NUL-terminated C string argument (`None` for NULL; invalid UTF-8 is replaced).
///
/// # Safety
///
/// `p` is NULL or points to a NUL-terminated string.
unsafe fn cstr<'a>(p: *const c_char) -> Option<std::borrow::Cow<'a, str>> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy())
}

// ---- handle tables ---------------------------------------------------------------------------

struct CSet {
    set: TensorSet<'static>,
    ids: Vec<(String, u64)>,
}

#[derive(Default)]
struct Tables {
    tensors: HashMap<u64, Tensor<'static>>,
    sets: HashMap<u64, Arc<spin::RwLock<CSet>>>,
}

fn tables() -> MutexGuard<'static, Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

/// A fresh handle value: never 0, never reused, aligned like a pointer.
fn new_handle(kind: u64) -> u64 {
    (kind << 56) | (NEXT_HANDLE.fetch_add(1, Ordering::Relaxed) << 4)
}

const TENSOR_KIND: u64 = 0x01;
const SET_KIND: u64 = 0x02;

fn tensor_of(p: *const c_void) -> Result<Tensor<'static>, Error> {
    if p.is_null() {
        return Err(invalid("tensor"));
    }
    tables().tensors.get(&(p as u64)).cloned().ok_or_else(|| {
        let e = err!(
            InvalidHandle,
            "Invalid tensor handle {p:p} (freed or never allocated)"
        );
        rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        e
    })
}

fn set_of(p: *const c_void) -> Result<Arc<spin::RwLock<CSet>>, Error> {
    if p.is_null() {
        return Err(invalid("tensor set"));
    }
    tables().sets.get(&(p as u64)).cloned().ok_or_else(|| {
        let e = err!(
            InvalidHandle,
            "Invalid tensor set handle {p:p} (destroyed or never allocated)"
        );
        rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        e
    })
}

fn model_of(p: *const c_void) -> Result<ModelHandle, Error> {
    if p.is_null() {
        return Err(invalid("model"));
    }
    Ok(ModelHandle::from_raw(p as u64))
}

/// Writes `v` through an out-pointer that was checked non-NULL.
///
/// # Safety
///
/// `p` is non-NULL, aligned and writable for a `T`.
unsafe fn put<T>(p: *mut T, v: T) {
    // SAFETY: the caller's contract.
    unsafe { p.write(v) }
}

fn out<T>(p: *mut T, what: &str) -> Result<*mut T, Error> {
    if p.is_null() {
        Err(invalid(what))
    } else {
        Ok(p)
    }
}

// ---- lifecycle ---------------------------------------------------------------------------------

/// Opens the backend the `NEURON_RT_*` variables select, unless one is chosen already. An
/// invalid value is logged and returned (`NRT_INVALID`); with `auto` and no Neuron device
/// nothing is chosen (discovery then fails as libnrt's does) and the log says how to select
/// the simulator.
fn choose_backend() -> Result<(), Error> {
    if DRIVER.get().is_some() {
        return Ok(());
    }
    let selection =
        Selection::from_vars(FrontEnd::CLibrary, &EnvVars::capture()).inspect_err(|e| {
            rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        })?;
    match selection.open() {
        Some(driver) => {
            let _ = DRIVER.get_or_choose(|| driver);
        }
        None => rt().log(nrt_core::Level::Error, format_args!("{NO_DEVICE_HINT}")),
    }
    Ok(())
}

static WORKERS_STOP: AtomicBool = AtomicBool::new(false);
static WORKERS: Mutex<Vec<std::thread::JoinHandle<()>>> = Mutex::new(Vec::new());

fn start_workers() {
    WORKERS_STOP.store(false, Ordering::SeqCst);
    let mut w = WORKERS.lock().unwrap_or_else(PoisonError::into_inner);
    if w.is_empty() {
        if let Ok(h) = std::thread::Builder::new()
            .name("nrt-async".into())
            .spawn(|| rt().run_async_worker(&WORKERS_STOP))
        {
            w.push(h);
        }
    }
}

fn stop_workers() {
    WORKERS_STOP.store(true, Ordering::SeqCst);
    let handles = std::mem::take(&mut *WORKERS.lock().unwrap_or_else(PoisonError::into_inner));
    for h in handles {
        let _ = h.join();
    }
}

/// `nrt_init`.
///
/// # Safety
///
/// The version strings are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_init(
    framework: u32,
    fw_version: *const c_char,
    fal_version: *const c_char,
) -> u32 {
    api!("nrt_init", {
        choose_backend()?;
        // SAFETY: the caller's contract.
        let fw = unsafe { cstr(fw_version) }.unwrap_or_default();
        // SAFETY: the caller's contract.
        let fal = unsafe { cstr(fal_version) }.unwrap_or_default();
        let kind = FrameworkType::from_raw(framework).unwrap_or(FrameworkType::Invalid);
        rt().init(kind, &fw, &fal, &EnvVars::capture())?;
        start_workers();
        Ok(())
    })
}

/// `nrt_close`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_close() {
    let _ = api!("nrt_close", {
        rt().close();
        stop_workers();
        Ok(())
    });
}

/// `nrt_get_version`.
///
/// # Safety
///
/// `ver` is NULL or writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_version(ver: *mut c_void, size: usize) -> u32 {
    api!("nrt_get_version", {
        let p = out(ver.cast::<u8>(), "version")?;
        // SAFETY: the caller's contract: writable for `size` bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(p, size) };
        nrt_core::version::write_version(buf)
            .inspect_err(|e| rt().log(nrt_core::Level::Error, format_args!("{}", e.message())))
    })
}

/// `nrt_get_status_as_str`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_get_status_as_str(status: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, std::ffi::CString)>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        let mut v: Vec<(u32, std::ffi::CString)> = NrtStatus::ALL
            .iter()
            .filter_map(|s| std::ffi::CString::new(s.name()).ok().map(|c| (s.code(), c)))
            .collect();
        if let Ok(c) = std::ffi::CString::new("NRT_UNKNOWN_STATUS") {
            v.push((u32::MAX, c));
        }
        v
    });
    names
        .iter()
        .find(|(c, _)| *c == status)
        .or_else(|| names.last())
        .map_or(std::ptr::null(), |(_, s)| s.as_ptr())
}

/// Physical cores and logical core size of the machine, discovering it if needed (the count
/// calls work before `nrt_init`).
fn machine_counts() -> Result<(u32, u32, u32), Error> {
    use nrt_core::driver::Driver;
    choose_backend()?;
    let info = DRIVER
        .discover()
        .map_err(|_| err!(Invalid, "Cannot find Neuron devices"))?;
    let vars = EnvVars::capture();
    let lnc = nrt_core::Config::parse(&vars)?
        .virtual_core_size
        .unwrap_or(info.arch.default_lnc_size())
        .max(1);
    let total = info.total_physical_cores();
    let visible = if rt().state() == InitState::Init {
        rt().visible_lnc_count().unwrap_or(total / lnc)
    } else {
        total / lnc
    };
    Ok((total, total / lnc, visible))
}

macro_rules! count_fn {
    ($name:ident, $label:literal, $pick:expr) => {
        #[doc = concat!("`", $label, "`.")]
        ///
        /// # Safety
        ///
        /// `count` is NULL or writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(count: *mut u32) -> u32 {
            api!($label, {
                let p = out(count, "count")?;
                let c = machine_counts()?;
                // SAFETY: checked non-NULL; the caller's contract.
                unsafe { put(p, $pick(c)) };
                Ok(())
            })
        }
    };
}

count_fn!(nrt_get_total_nc_count, "nrt_get_total_nc_count", |c: (
    u32,
    u32,
    u32
)| c.0);
count_fn!(nrt_get_total_vnc_count, "nrt_get_total_vnc_count", |c: (
    u32,
    u32,
    u32
)| c.1);
count_fn!(
    nrt_get_visible_nc_count,
    "nrt_get_visible_nc_count",
    |c: (u32, u32, u32)| c.2
);
count_fn!(
    nrt_get_visible_lnc_count,
    "nrt_get_visible_lnc_count",
    |c: (u32, u32, u32)| c.2
);

/// `nrt_get_instance_info`: family, size, arch name and device revision (32 bytes; a shorter
/// buffer gets the leading fields that fit).
///
/// # Safety
///
/// `info` is NULL or writable for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_instance_info(info: *mut c_void, len: usize) -> u32 {
    api!("nrt_get_instance_info", {
        let p = out(info.cast::<u8>(), "instance info")?;
        rt().guard()?;
        let (family, arch): (u32, &[u8]) = match DRIVER.get().and_then(AnyDriver::as_sim) {
            Some(d) => match d.machine().config().instance {
                Instance::Trn1 => (2, b"trn1"),
                Instance::Inf2 => (4, b"inf2"),
                Instance::Trn2 => (5, b"trn2"),
            },
            _ => (0, b"unknown"),
        };
        let mut bytes = [0u8; 32];
        bytes[0..4].copy_from_slice(&family.to_ne_bytes());
        bytes[4..8].copy_from_slice(&9u32.to_ne_bytes()); // NRT_INSTANCE_SIZE_UNKNOWN
        bytes[8..8 + arch.len()].copy_from_slice(arch);
        bytes[24..27].copy_from_slice(b"sim");
        let n = len.min(32);
        // SAFETY: the caller's contract: writable for `len` bytes; we write `min(len, 32)`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, n) };
        Ok(())
    })
}

// ---- models ------------------------------------------------------------------------------------

fn report_core_dump(what: &str, e: &Error) {
    let Ok(config) = rt().config() else { return };
    let mut dumper = nrt_host::CoreDumper::from_config(&config);
    if let Ok(helper) = std::env::var("NRT_CORE_DUMP_HELPER") {
        dumper = dumper.with_helper(helper);
    }
    if !dumper.enabled() {
        return;
    }
    let vars = dumper.path_variables();
    let dir = dumper.local_output_dir(&vars);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let file = std::path::Path::new(&dir).join(format!("nrt-error-{}.log", vars.log_id));
    if std::fs::write(
        &file,
        format!("{what}: {} ({})\n", e.message(), e.status().name()),
    )
    .is_ok()
    {
        if let Err(err) = dumper.report_generated_file(&file) {
            rt().log(
                nrt_core::Level::Error,
                format_args!("core dump helper failed: {err}"),
            );
        }
    }
}

/// `nrt_load`.
///
/// # Safety
///
/// `neff_bytes` is readable for `size` bytes; `model` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    model: *mut *mut c_void,
) -> u32 {
    api!("nrt_load", {
        let m = out(model, "model")?;
        if neff_bytes.is_null() {
            return Err(invalid("NEFF"));
        }
        // SAFETY: the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(neff_bytes.cast::<u8>(), size) };
        let h = rt()
            .load(bytes, vnc, vnc_count)
            .inspect_err(|e| report_core_dump("nrt_load", e))?;
        // SAFETY: checked non-NULL.
        unsafe { put(m, h.to_raw() as *mut c_void) };
        Ok(())
    })
}

/// `nrt_load_collectives`: single-device only.
///
/// # Safety
///
/// As [`nrt_load`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_load_collectives(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    _ctx_device_id: u32,
    ctx_device_count: u32,
    model: *mut *mut c_void,
) -> u32 {
    if ctx_device_count > 1 {
        return api!("nrt_load_collectives", {
            let e = err!(
                Failure,
                "Multi-device collectives ({ctx_device_count} devices) are not supported by nrt-rs"
            );
            rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
            Err(e)
        });
    }
    // SAFETY: same contract.
    unsafe { nrt_load(neff_bytes, size, vnc, vnc_count, model) }
}

/// `nrt_unload`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_unload(model: *mut c_void) -> u32 {
    api!("nrt_unload", rt().unload(model_of(model)?))
}

macro_rules! model_count_fn {
    ($name:ident, $label:literal) => {
        #[doc = concat!("`", $label, "`: 1 (a model occupies one logical core).")]
        ///
        /// # Safety
        ///
        /// `count` is NULL or writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(model: *const c_void, count: *mut u32) -> u32 {
            api!($label, {
                let p = out(count, "count")?;
                rt().io_tensor_count(model_of(model)?)?;
                // SAFETY: checked non-NULL.
                unsafe { put(p, 1) };
                Ok(())
            })
        }
    };
}

model_count_fn!(nrt_get_model_nc_count, "nrt_get_model_nc_count");
model_count_fn!(nrt_get_model_vnc_count, "nrt_get_model_vnc_count");
model_count_fn!(nrt_get_model_instance_count, "nrt_get_model_instance_count");

/// `nrt_get_model_info`: the model's (process-relative) logical core.
///
/// # Safety
///
/// `info` is NULL or writable for `size_in` bytes; `size_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_model_info(
    model: *const c_void,
    info: *mut c_void,
    size_in: usize,
    size_out: *mut usize,
) -> u32 {
    api!("nrt_get_model_info", {
        let p = out(info.cast::<u32>(), "model info")?;
        let vnc = rt().model_lnc(model_of(model)?)?;
        if size_in >= 4 {
            // SAFETY: at least 4 writable bytes; `nrt_model_info_t` is 4-byte aligned.
            unsafe { put(p, vnc) };
        }
        if !size_out.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { put(size_out, size_in.min(4)) };
        }
        Ok(())
    })
}

/// `nrt_tensor_info_t` (296 bytes on LP64).
#[repr(C)]
struct TensorInfoC {
    name: [c_char; 256],
    usage: u32,
    size: usize,
    dtype: u32,
    shape: *mut u32,
    ndim: u32,
}

const _: () = assert!(size_of::<TensorInfoC>() == 296);

/// `nrt_get_model_tensor_info`: inputs by name, then outputs by name. Free the result with
/// `nrt_free_model_tensor_info`.
///
/// # Safety
///
/// `tensor_info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_model_tensor_info(
    model: *mut c_void,
    tensor_info: *mut *mut c_void,
) -> u32 {
    api!("nrt_get_model_tensor_info", {
        let p = out(tensor_info, "tensor info")?;
        let infos = rt().model_tensor_info(model_of(model)?)?;
        let bytes = 8 + infos.len() * size_of::<TensorInfoC>();
        // SAFETY: plain allocation, checked below.
        let array = unsafe { libc::calloc(1, bytes) }.cast::<u8>();
        if array.is_null() {
            return Err(err!(Resource, "Failed to allocate the tensor info array"));
        }
        // SAFETY: `array` has `bytes` bytes; the count goes in the first 8.
        unsafe { array.cast::<u64>().write(infos.len() as u64) };
        for (i, (usage, t)) in infos.iter().enumerate() {
            let mut c = TensorInfoC {
                name: [0; 256],
                usage: *usage as u32,
                size: t.size as usize,
                dtype: t.dtype.code(),
                shape: std::ptr::null_mut(),
                ndim: t.ndim(),
            };
            for (d, s) in c.name.iter_mut().zip(t.name.as_bytes().iter().take(255)) {
                *d = *s as c_char;
            }
            if !t.shape.is_empty() {
                // SAFETY: plain allocation of `ndim` u32s, checked below.
                let shape = unsafe { libc::malloc(4 * t.shape.len()) }.cast::<u32>();
                if !shape.is_null() {
                    // SAFETY: `shape` holds `t.shape.len()` u32s.
                    unsafe {
                        std::ptr::copy_nonoverlapping(t.shape.as_ptr(), shape, t.shape.len())
                    };
                }
                c.shape = shape;
            }
            // SAFETY: element `i` lies inside the allocation (8 + i * 296 + 296 <= bytes); the
            // array starts 8-aligned (calloc) so every element is 8-aligned.
            unsafe {
                array
                    .add(8 + i * size_of::<TensorInfoC>())
                    .cast::<TensorInfoC>()
                    .write(c)
            };
        }
        // SAFETY: checked non-NULL.
        unsafe { put(p, array.cast()) };
        Ok(())
    })
}

/// `nrt_free_model_tensor_info`.
///
/// # Safety
///
/// `tensor_info` is NULL or was returned by `nrt_get_model_tensor_info` and not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_free_model_tensor_info(tensor_info: *mut c_void) -> u32 {
    api!("nrt_free_model_tensor_info", {
        let p = out(tensor_info.cast::<u8>(), "tensor info")?;
        // SAFETY: the caller's contract: an array from `nrt_get_model_tensor_info`.
        let n = unsafe { p.cast::<u64>().read() } as usize;
        for i in 0..n {
            // SAFETY: as in `nrt_get_model_tensor_info`.
            let info = unsafe {
                p.add(8 + i * size_of::<TensorInfoC>())
                    .cast::<TensorInfoC>()
            };
            // SAFETY: each shape came from malloc (or is NULL).
            unsafe { libc::free((*info).shape.cast()) };
        }
        // SAFETY: the array came from calloc.
        unsafe { libc::free(p.cast()) };
        Ok(())
    })
}

// ---- execute -----------------------------------------------------------------------------------

fn with_sets<R>(
    input: *const c_void,
    output: *const c_void,
    f: impl FnOnce(&TensorSet<'static>, &TensorSet<'static>) -> Result<R, Error>,
) -> Result<R, Error> {
    let i = set_of(input)?;
    let o = set_of(output)?;
    let (ig, og) = (i.read(), o.read());
    f(&ig.set, &og.set)
}

/// `nrt_execute`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_execute(
    model: *mut c_void,
    input_set: *const c_void,
    output_set: *mut c_void,
) -> u32 {
    api!("nrt_execute", {
        let h = model_of(model)?;
        with_sets(input_set, output_set, |i, o| rt().execute(h, i, o))
            .inspect_err(|e| report_core_dump("nrt_execute", e))
    })
}

/// `nrt_execute_repeat`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_execute_repeat(
    model: *mut c_void,
    input_set: *const c_void,
    output_set: *mut c_void,
    repeat_count: c_int,
) -> u32 {
    api!("nrt_execute_repeat", {
        let h = model_of(model)?;
        with_sets(input_set, output_set, |i, o| {
            rt().execute_repeat(h, i, o, repeat_count)
        })
    })
}

type AsyncCallback = unsafe extern "C" fn(*mut c_void, u32, u32, u64, u32);

static CALLBACK: Mutex<Option<(AsyncCallback, usize)>> = Mutex::new(None);

fn forward_callback(_params: usize, model_id: u32, vnc: u32, job: u64, status: NrtStatus) {
    let cb = *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((f, params)) = cb {
        // SAFETY: a callback the application registered, called with the parameters it gave.
        unsafe { f(params as *mut c_void, model_id, vnc, job, status.code()) };
    }
}

/// `nrt_register_async_exec_callback`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_register_async_exec_callback(
    callback: Option<AsyncCallback>,
    params: *mut c_void,
) -> u32 {
    api!("nrt_register_async_exec_callback", {
        let Some(cb) = callback else {
            return Err(invalid("callback"));
        };
        *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) = Some((cb, params as usize));
        rt().register_async_exec_callback(forward_callback, 0)
    })
}

/// `nrt_async_drain_queued_execs`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_async_drain_queued_execs(vnc: i32) -> u32 {
    api!("nrt_async_drain_queued_execs", rt().async_drain(vnc))
}

// ---- tensors -----------------------------------------------------------------------------------

fn new_tensor(t: Tensor<'static>, slot: *mut *mut c_void) -> Result<(), Error> {
    let h = new_handle(TENSOR_KIND);
    tables().tensors.insert(h, t);
    // SAFETY: callers check `slot` non-NULL.
    unsafe { put(slot, h as *mut c_void) };
    Ok(())
}

/// `nrt_tensor_allocate`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate(
    placement: u32,
    vnc: c_int,
    size: usize,
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!("nrt_tensor_allocate", {
        let slot = out(tensor, "tensor")?;
        let placement = TensorPlacement::from_raw(placement)
            .ok_or_else(|| err!(Invalid, "Invalid tensor placement {placement}"))?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        let t = rt().tensor_allocate(placement, vnc, size as u64, &name)?;
        new_tensor(t, slot)
    })
}

/// `nrt_tensor_allocate_empty`.
///
/// # Safety
///
/// As [`nrt_tensor_allocate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate_empty(
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!("nrt_tensor_allocate_empty", {
        let slot = out(tensor, "tensor")?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        rt().guard()?;
        new_tensor(Tensor::empty(&name), slot)
    })
}

/// `nrt_tensor_attach_buffer`.
///
/// # Safety
///
/// `buffer` is valid for `size` bytes until the tensor is freed or given another buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_attach_buffer(
    tensor: *mut c_void,
    buffer: *mut c_void,
    size: usize,
) -> u32 {
    api!("nrt_tensor_attach_buffer", {
        if buffer.is_null() {
            return Err(invalid("buffer"));
        }
        let mut t = tensor_of(tensor)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { t.attach_buffer(buffer.cast(), size)? };
        tables().tensors.insert(tensor as u64, t);
        Ok(())
    })
}

/// `nrt_tensor_allocate_slice`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor_slice` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate_slice(
    source: *const c_void,
    offset: usize,
    size: usize,
    name: *const c_char,
    tensor_slice: *mut *mut c_void,
) -> u32 {
    api!("nrt_tensor_allocate_slice", {
        let slot = out(tensor_slice, "tensor slice")?;
        let src = tensor_of(source)?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        new_tensor(src.slice(offset as u64, size as u64, &name)?, slot)
    })
}

/// `nrt_tensor_free`: frees the tensor and sets `*tensor` to NULL.
///
/// # Safety
///
/// `tensor` is NULL or points to a tensor pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_free(tensor: *mut *mut c_void) {
    let _ = api!("nrt_tensor_free", {
        let slot = out(tensor, "tensor")?;
        // SAFETY: checked non-NULL; the caller's contract.
        let h = unsafe { slot.read() };
        if !h.is_null() && tables().tensors.remove(&(h as u64)).is_none() {
            rt().log(
                nrt_core::Level::Error,
                format_args!("Invalid tensor handle {h:p} (freed or never allocated)"),
            );
        }
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        Ok(())
    });
}

fn byte_slice<'a>(buf: *const c_void, size: usize) -> Result<&'a [u8], Error> {
    if size == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(invalid("buffer"));
    }
    // SAFETY: the exported function's contract: `buf` readable for `size` bytes.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast(), size) })
}

fn byte_slice_mut<'a>(buf: *mut c_void, size: usize) -> Result<&'a mut [u8], Error> {
    if size == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(invalid("buffer"));
    }
    // SAFETY: the exported function's contract: `buf` writable for `size` bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), size) })
}

/// `nrt_tensor_read`.
///
/// # Safety
///
/// `buf` is writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_read(
    tensor: *const c_void,
    buf: *mut c_void,
    offset: usize,
    size: usize,
) -> u32 {
    api!(
        "nrt_tensor_read",
        tensor_of(tensor)?.read(offset as u64, byte_slice_mut(buf, size)?)
    )
}

/// `nrt_tensor_write`.
///
/// # Safety
///
/// `buf` is readable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_write(
    tensor: *mut c_void,
    buf: *const c_void,
    offset: usize,
    size: usize,
) -> u32 {
    api!(
        "nrt_tensor_write",
        tensor_of(tensor)?.write(offset as u64, byte_slice(buf, size)?)
    )
}

/// `nrt_tensor_copy`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_copy(
    src: *const c_void,
    src_offset: usize,
    dst: *mut c_void,
    dst_offset: usize,
    size: usize,
) -> u32 {
    api!("nrt_tensor_copy", {
        let (s, d) = (tensor_of(src)?, tensor_of(dst)?);
        if let (Some((sb, _)), Some((db, _))) = (s.device_location(), d.device_location()) {
            if sb.device != db.device {
                return Err(err!(
                    Invalid,
                    "nrt_tensor_copy between device tensors of different devices"
                ));
            }
        }
        Tensor::copy(&s, src_offset as u64, &d, dst_offset as u64, size as u64)
    })
}

/// `nrt_tensor_memset`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_memset(
    tensor: *mut c_void,
    offset: u64,
    value: c_int,
    size: usize,
) -> u32 {
    api!(
        "nrt_tensor_memset",
        tensor_of(tensor)?.memset(offset, value as u8, size as u64)
    )
}

/// `nrt_tensor_get_size`: 0 for an invalid tensor.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_size(tensor: *const c_void) -> usize {
    let mut size = 0usize;
    let _ = api!("nrt_tensor_get_size", {
        size = tensor_of(tensor)?.size() as usize;
        Ok(())
    });
    size
}

/// `nrt_tensor_get_va`: NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_va(tensor: *const c_void) -> *mut c_void {
    let mut va = 0u64;
    let _ = api!("nrt_tensor_get_va", {
        va = tensor_of(tensor)?.va().unwrap_or(0);
        Ok(())
    });
    va as *mut c_void
}

#[repr(C)]
struct BatchOp {
    offset: u64,
    size: u64,
    buffer: *mut c_void,
}

#[repr(C)]
struct Batch {
    tensor: *const c_void,
    ops: *const BatchOp,
    num_ops: u32,
}

// The layouts of `nrt/nrt.h` and `ndl/neuron_driver_shared_tensor_batch_op.h` (LP64), also
// asserted on the C side by tests/c/header_truth.c.
const _: () = assert!(size_of::<BatchOp>() == 24 && size_of::<Batch>() == 24);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, usage) == 256);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, size) == 264);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, dtype) == 272);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, shape) == 280);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, ndim) == 288);

fn batches(batches: *const Batch, n: u64, write: bool) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    if batches.is_null() {
        return Err(invalid("batches"));
    }
    for i in 0..n as usize {
        // SAFETY: the caller's contract: `n` batches.
        let b = unsafe { &*batches.add(i) };
        let t = tensor_of(b.tensor)?;
        if b.num_ops > 0 && b.ops.is_null() {
            return Err(invalid("batch ops"));
        }
        for j in 0..b.num_ops as usize {
            // SAFETY: the caller's contract: `num_ops` ops.
            let op = unsafe { &*b.ops.add(j) };
            if write {
                t.write(op.offset, byte_slice(op.buffer, op.size as usize)?)?;
            } else {
                t.read(op.offset, byte_slice_mut(op.buffer, op.size as usize)?)?;
            }
        }
    }
    Ok(())
}

/// `nrt_tensor_read_batch`.
///
/// # Safety
///
/// `b` points to `n` batches whose ops and buffers are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_read_batch(b: *const c_void, n: u64, _unsafe: bool) -> u32 {
    api!("nrt_tensor_read_batch", batches(b.cast(), n, false))
}

/// `nrt_tensor_write_batch`.
///
/// # Safety
///
/// As [`nrt_tensor_read_batch`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_write_batch(b: *const c_void, n: u64, _unsafe: bool) -> u32 {
    api!("nrt_tensor_write_batch", batches(b.cast(), n, true))
}

/// `nrt_tensor_get_device_allocation_info`.
///
/// # Safety
///
/// `info` is NULL or writable (24 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_get_device_allocation_info(
    tensor: *const c_void,
    info: *mut c_void,
) -> u32 {
    api!("nrt_tensor_get_device_allocation_info", {
        let p = out(info.cast::<u64>(), "allocation info")?;
        let t = tensor_of(tensor)?;
        let Some((b, off)) = t.device_location() else {
            return Err(err!(
                Invalid,
                "Tensor \"{}\" is not in device memory",
                t.name()
            ));
        };
        // SAFETY: 24 writable bytes: physical address, size, hbm index.
        unsafe {
            p.write(b.addr + off);
            p.add(1).write(b.size);
            p.add(2).cast::<c_int>().write(0);
        }
        Ok(())
    })
}

// ---- tensor sets -------------------------------------------------------------------------------

/// `nrt_allocate_tensor_set`.
///
/// # Safety
///
/// `result` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut c_void) -> u32 {
    api!("nrt_allocate_tensor_set", {
        let slot = out(result, "tensor set")?;
        let h = new_handle(SET_KIND);
        tables().sets.insert(
            h,
            Arc::new(spin::RwLock::new(CSet {
                set: TensorSet::new(),
                ids: Vec::new(),
            })),
        );
        // SAFETY: checked non-NULL.
        unsafe { put(slot, h as *mut c_void) };
        Ok(())
    })
}

/// `nrt_destroy_tensor_set`: sets `*tensor_set` to NULL.
///
/// # Safety
///
/// `tensor_set` is NULL or points to a set pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_destroy_tensor_set(tensor_set: *mut *mut c_void) {
    let _ = api!("nrt_destroy_tensor_set", {
        let slot = out(tensor_set, "tensor set")?;
        // SAFETY: checked non-NULL.
        let h = unsafe { slot.read() };
        if !h.is_null() && tables().sets.remove(&(h as u64)).is_none() {
            rt().log(
                nrt_core::Level::Error,
                format_args!("Invalid tensor set handle {h:p}"),
            );
        }
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        Ok(())
    });
}

/// `nrt_add_tensor_to_tensor_set`: adds or replaces.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_add_tensor_to_tensor_set(
    tensor_set: *mut c_void,
    name: *const c_char,
    tensor: *mut c_void,
) -> u32 {
    api!("nrt_add_tensor_to_tensor_set", {
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(name) }) else {
            return Err(invalid("tensor name"));
        };
        let t = tensor_of(tensor)?;
        let set = set_of(tensor_set)?;
        let mut s = set.write();
        s.set.add(&name, t);
        match s.ids.iter_mut().find(|(n, _)| *n == *name) {
            Some(e) => e.1 = tensor as u64,
            None => s.ids.push((name.into_owned(), tensor as u64)),
        }
        Ok(())
    })
}

/// `nrt_get_tensor_from_tensor_set`: a missing name is `NRT_FAILURE`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_tensor_from_tensor_set(
    tensor_set: *mut c_void,
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!("nrt_get_tensor_from_tensor_set", {
        let slot = out(tensor, "tensor")?;
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(name) }) else {
            return Err(invalid("tensor name"));
        };
        let set = set_of(tensor_set)?;
        let s = set.read();
        match s.ids.iter().find(|(n, _)| *n == *name) {
            Some((_, h)) => {
                // SAFETY: checked non-NULL.
                unsafe { put(slot, *h as *mut c_void) };
                Ok(())
            }
            None => Err(err!(Failure, "Tensor \"{name}\" is not in the tensor set")),
        }
    })
}

// ---- explicit async (NRT_3.0.0) ------------------------------------------------------------------

fn write_status(ctx: usize, _seq: u64, status: NrtStatus) {
    if ctx != 0 {
        // SAFETY: `ctx` is the caller's `NRT_STATUS *ret`, which it keeps alive until
        // completion (the API's contract).
        unsafe { (ctx as *mut u32).write(status.code()) };
    }
}

/// `nrta_execute_schedule` (v3): `*ret` is written at completion.
///
/// # Safety
///
/// `ret` is NULL or stays writable until the request completes; `seq` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_execute_schedule(
    model: *mut c_void,
    input: *const c_void,
    output: *mut c_void,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!("nrta_execute_schedule", {
        let s = out(seq, "sequence")?;
        let h = model_of(model)?;
        let hook = CompletionHook {
            call: write_status,
            ctx: ret as usize,
        };
        let id = with_sets(input, output, |i, o| {
            rt().execute_schedule(h, i, o, queue, Some(hook))
        })?;
        // SAFETY: checked non-NULL.
        unsafe { put(s, id) };
        Ok(())
    })
}

/// `nrta_is_completed`.
///
/// # Safety
///
/// `is_completed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_is_completed(seq: u64, is_completed: *mut bool) -> u32 {
    api!("nrta_is_completed", {
        let p = out(is_completed, "is_completed")?;
        let done = rt().is_completed(seq)?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, done) };
        Ok(())
    })
}

/// `nrta_get_sequence`: the last completed sequence id of an execution unit's queue.
///
/// # Safety
///
/// `seq` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_get_sequence(lnc: u32, xu: u32, queue: c_int, seq: *mut u64) -> u32 {
    api!("nrta_get_sequence", {
        let p = out(seq, "sequence")?;
        let xu = match xu {
            0 => Xu::TensorOp,
            1 => Xu::Compute,
            2 => Xu::Collectives,
            other => return Err(err!(Invalid, "Invalid execution unit {other}")),
        };
        let s = rt().last_completed_sequence(lnc, xu, queue)?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, s) };
        Ok(())
    })
}

/// Runs a tensor operation at once on the tensor-op unit of core 0, writing `*ret` (completion
/// is immediate) and the sequence id.
fn tensor_op(
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
    op: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    let s = out(seq, "sequence")?;
    if queue != 0 {
        return Err(err!(
            Invalid,
            "The tensor-op execution unit has only queue 0, not {queue}"
        ));
    }
    rt().guard()?;
    let status = match op() {
        Ok(()) => NrtStatus::Success,
        Err(e) => e.status(),
    };
    let id = rt().record_completed(0, Xu::TensorOp)?;
    write_status(ret as usize, id, status);
    // SAFETY: checked non-NULL.
    unsafe { put(s, id) };
    Ok(())
}

/// `nrta_tensor_write` (v3).
///
/// # Safety
///
/// `buf` is readable for `size` bytes; `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_write(
    tensor: *mut c_void,
    buf: *const c_void,
    offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        "nrta_tensor_write",
        tensor_op(queue, ret, seq, || tensor_of(tensor)?
            .write(offset, byte_slice(buf, size as usize)?))
    )
}

/// `nrta_tensor_read` (v3).
///
/// # Safety
///
/// `buf` is writable for `size` bytes; `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_read(
    buf: *mut c_void,
    tensor: *mut c_void,
    offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        "nrta_tensor_read",
        tensor_op(queue, ret, seq, || tensor_of(tensor)?
            .read(offset, byte_slice_mut(buf, size as usize)?))
    )
}

/// `nrta_tensor_copy` (v3).
///
/// # Safety
///
/// `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_copy(
    src: *mut c_void,
    src_offset: u64,
    dst: *mut c_void,
    dst_offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        "nrta_tensor_copy",
        tensor_op(queue, ret, seq, || Tensor::copy(
            &tensor_of(src)?,
            src_offset,
            &tensor_of(dst)?,
            dst_offset,
            size
        ))
    )
}

// ---- not supported -------------------------------------------------------------------------------

macro_rules! unsupported {
    ($name:ident, $label:literal, $status:ident, $why:literal, ($($arg:ident: $ty:ty),*)) => {
        #[doc = concat!("`", $label, "`: not supported — ", $why, " Returns `", stringify!($status), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: $ty),*) -> u32 {
            $(let _ = $arg;)*
            api!($label, {
                let e = Error::new(NrtStatus::$status, format_args!("{} is not supported by nrt-rs: {}", $label, $why));
                rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
                Err(e)
            })
        }
    };
}

unsupported!(nrt_build_global_comm, "nrt_build_global_comm", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_cc_global_comm_init, "nrt_cc_global_comm_init", Failure, "collectives across devices are not implemented.", (vnc: u32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_trace_start, "nrt_trace_start", Failure, "tracing is not implemented.", (trace_mem: bool));
unsupported!(nrt_trace_stop, "nrt_trace_stop", Failure, "tracing is not implemented.", (filename: *const c_char));
unsupported!(nrt_get_hbm_mmap_va, "nrt_get_hbm_mmap_va", Invalid, "HBM cannot be mapped into the process.", (device_id: c_int, hbm_idx: c_int, addr: *mut *mut c_void, size: *mut usize));
unsupported!(nrt_get_dmabuf_fd, "nrt_get_dmabuf_fd", Failure, "dma-buf export is not implemented.", (va: u64, size: u64, fd: *mut c_int));
unsupported!(nrta_cc_prepare, "nrta_cc_prepare", Failure, "collectives are not implemented.", (comm: *mut c_void, input: *mut c_void, output: *mut c_void, dtype: u32, op: u32, cc_op: u32, ctx: *mut *mut c_void));
unsupported!(nrta_cc_schedule, "nrta_cc_schedule", Failure, "collectives are not implemented.", (ctx: *mut *mut c_void, queue: c_int, ret: *mut u32, seq: *mut u64));

/// The runtime's lifecycle state (for Rust callers of this crate and its tests).
pub fn state() -> InitState {
    rt().state()
}

/// The usages of the I/O tensors of a model (for Rust callers of this crate).
pub fn _usage_names() -> [&'static str; 2] {
    [TensorUsage::Input.as_str(), TensorUsage::Output.as_str()]
}

unsupported!(nrt_host_device_id_rid_map_get, "nrt_host_device_id_rid_map_get", Failure, "host device id maps exist only with the Linux driver.", (count: *mut u32, map: *mut u32));
unsupported!(nrt_tensor_check_output_completion, "nrt_tensor_check_output_completion", Failure, "output completion counters are not implemented.", (tensor: *const c_void, timeout: i64, expected: u64));
unsupported!(nrt_tensor_reset_output_completion, "nrt_tensor_reset_output_completion", Failure, "output completion counters are not implemented.", (tensor: *mut c_void));
unsupported!(nrt_get_attached_efa_bdf, "nrt_get_attached_efa_bdf", Failure, "EFA devices are not modelled.", (va: *const c_void, bdf: *mut c_char, len: *mut usize));
unsupported!(nrt_set_pool_eng_ucode, "nrt_set_pool_eng_ucode", Failure, "microcode images are not used by nrt-rs.", (info: *const c_void));
unsupported!(nrt_memcpy_to_device, "nrt_memcpy_to_device", Failure, "raw device addresses are not exposed; use nrt_tensor_write.", (dest: *mut c_void, src: *const c_void, size: usize));
unsupported!(nrt_barrier, "nrt_barrier", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_all_gather, "nrt_all_gather", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32, size: u32, input: *mut c_void, output: *mut c_void));

/// `nrt_host_device_id_get`: the device's own index (the simulator has no containers).
///
/// # Safety
///
/// `host_device_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_host_device_id_get(
    neuron_dev: c_int,
    host_device_id: *mut u32,
) -> u32 {
    api!("nrt_host_device_id_get", {
        let p = out(host_device_id, "host device id")?;
        use nrt_core::driver::Driver;
        let devices = DRIVER
            .discover()
            .map_err(|_| err!(Invalid, "Cannot find Neuron devices"))?
            .device_count;
        match u32::try_from(neuron_dev) {
            Ok(d) if d < devices => {
                // SAFETY: checked non-NULL.
                unsafe { put(p, d) };
                Ok(())
            }
            _ => Err(err!(
                Invalid,
                "No Neuron device {neuron_dev} (the machine has {devices})"
            )),
        }
    })
}

/// `nrt_get_vnc_memory_stats`: device memory in use on the logical core's device and the
/// device's capacity.
///
/// # Safety
///
/// `stats` is NULL or writable for `size_in` bytes; `size_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_vnc_memory_stats(
    vnc: u32,
    stats: *mut c_void,
    size_in: usize,
    size_out: *mut usize,
) -> u32 {
    api!("nrt_get_vnc_memory_stats", {
        let p = out(stats.cast::<u8>(), "stats")?;
        let abs = rt().absolute_lnc(vnc.into())?;
        let device = rt().topology()?.device_of_lnc(abs);
        let (used, limit) = match DRIVER.get().and_then(AnyDriver::as_sim) {
            Some(d) => {
                let m = d.machine();
                (
                    m.device_bytes_allocated(device),
                    m.config().instance.hbm_bytes_per_device(),
                )
            }
            _ => {
                return Err(err!(
                    Failure,
                    "memory statistics need the simulator backend"
                ));
            }
        };
        let bytes: [u64; 2] = [used, limit];
        let n = size_in.min(16);
        // SAFETY: the caller's contract: writable for `size_in` bytes; we write `min(size_in, 16)`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<u8>(), p, n) };
        if !size_out.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { put(size_out, n) };
        }
        Ok(())
    })
}

/// `nrt_get_libnccl_net`: there is no network plugin; returns NULL with `*err = 1` and a
/// message.
///
/// # Safety
///
/// `err` is NULL or writable; `err_msg` is NULL or writable for `err_msg_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_libnccl_net(
    err: *mut c_int,
    err_msg: *mut c_char,
    err_msg_size: usize,
) -> *mut c_void {
    let msg = b"nrt-rs has no libnccl-net plugin";
    if !err.is_null() {
        // SAFETY: checked non-NULL.
        unsafe { put(err, 1) };
    }
    if !err_msg.is_null() && err_msg_size > 0 {
        let n = msg.len().min(err_msg_size - 1);
        // SAFETY: writable for `err_msg_size` bytes; we write `n + 1 <= err_msg_size`.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.as_ptr().cast::<c_char>(), err_msg, n);
            err_msg.add(n).write(0);
        }
    }
    std::ptr::null_mut()
}

mod handles;
pub mod inspect;
pub mod profile;
pub mod sys_trace;
mod trace_store;
