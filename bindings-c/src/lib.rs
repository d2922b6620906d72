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
//! # Layout
//!
//! This file is the boundary: the process's driver and runtime, the [`api!`] macro every
//! exported function runs its body in, and the argument helpers. The exported functions live
//! in one module per C object: `init` (lifecycle, version, machine queries), `model` (load,
//! unload, model queries), `execute` (synchronous and implicit-async execution), `tensor`,
//! `tensor_set`, `async_exec` (the explicit `nrta_*` API) and `unsupported` (functions that
//! refuse with a status and a log line); `core_dump` writes the error report of failed loads
//! and executions.
//!
//! Every exported function runs through [`api!`]: panics are caught (→ `NRT_FAILURE` and a log
//! line) and pointers are checked (NULL → `NRT_INVALID`). Model, tensor and tensor-set pointers
//! are opaque handles looked up in tables — a stale or forged one is refused with
//! `NRT_INVALID_HANDLE` / `NRT_INVALID`, never dereferenced.

use std::ffi::{CStr, c_char};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use nrt_core::io::TensorUsage;
use nrt_core::{Error, InitState, NrtStatus, ReadyMirror, Runtime, RuntimeOptions, err};

use backend::SwitchDriver;
use host::CHost;

type Rt = Runtime<&'static SwitchDriver, CHost>;

static DRIVER: SwitchDriver = SwitchDriver::new();

/// The process's runtime (created on first use).
static RT: OnceLock<Rt> = OnceLock::new();

/// The runtime's hot-path gate, mirrored here by the runtime itself
/// ([`RuntimeOptions::ready_mirror`]): 1 while the runtime is INIT, 0 before, after, and in a
/// forked child (closed by [`close_ready_in_child`]). It opens only after [`RT`] is set.
static READY: AtomicU32 = AtomicU32::new(0);

/// The fork-child handler that closes [`READY`] (async-signal-safe: one atomic store).
extern "C" fn close_ready_in_child() {
    READY.store(0, Ordering::SeqCst);
}

#[inline]
fn rt() -> &'static Rt {
    RT.get_or_init(|| {
        // The mirror is used only with its fork-child handler in place.
        // SAFETY: null prepare and parent handlers are allowed; the child handler is an
        // `extern "C"` fn item that lives as long as the process.
        let handler = unsafe { libc::pthread_atfork(None, None, Some(close_ready_in_child)) };
        Runtime::with_options(
            &DRIVER,
            CHost::new(),
            RuntimeOptions {
                ready_mirror: (handler == 0).then_some(ReadyMirror(&READY)),
                ..Default::default()
            },
        )
    })
}

/// The runtime when its guard would pass (INIT, not in a forked child): one load and one
/// comparison, then the runtime without another check. `None` sends a hot path to its full
/// path, which reports why.
#[inline(always)]
fn rt_if_ready() -> Option<&'static Rt> {
    if READY.load(Ordering::Acquire) != 1 {
        return None;
    }
    // SAFETY: `READY` is set to 1 only by the runtime stored in `RT` (its `set_state`), which
    // exists only once `RT.get_or_init` has completed; the Acquire load above synchronises
    // with that Release store, so `RT` is set.
    Some(unsafe { RT.get().unwrap_unchecked() })
}

/// Makes records of the `log` facade (warnings and errors, such as the driver's
/// soft-incompatibility warnings) reach the runtime's log; `nrt_init` calls it first. A process
/// that installed a logger of its own keeps it.
fn forward_log_records() {
    static FORWARD: host::Forward = host::Forward(|level, args| rt().log(level, args));
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if log::set_logger(&FORWARD).is_ok() {
            log::set_max_level(log::LevelFilter::Warn);
        }
    });
}

/// Runs an exported function's body: records the function name for log lines and catches
/// panics, whatever the function returns.
///
/// * `api!("nrt_x", { ... })`: the body is a `Result<(), Error>`; the function returns the
///   `NRT_STATUS` code (`u32`).
/// * `api!(value "nrt_x", default, { ... })`: the body is a `Result<T, Error>`; the function
///   returns the `T` (a size, a pointer, a bool), or `default` on failure.
/// * `api!(void "nrt_x", { ... })`: the body is a `Result<(), Error>`; the function returns
///   nothing.
/// * `api!(dump "nrt_x", { ... })`: as the first form, and a failure writes a core dump
///   ([`core_dump`]).
macro_rules! api {
    (value $name:literal, $default:expr, $body:expr) => {
        $crate::run_boundary($name, || -> Result<_, nrt_core::Error> { $body }).unwrap_or($default)
    };
    (void $name:literal, $body:expr) => {{
        let _ = $crate::run_boundary($name, || -> Result<(), nrt_core::Error> { $body });
    }};
    (dump $name:literal, $body:expr) => {
        $crate::status_code($crate::run_boundary(
            $name,
            || -> Result<(), nrt_core::Error> {
                $crate::core_dump::dumping($name, || -> Result<(), nrt_core::Error> { $body })
            },
        ))
    };
    ($name:literal, $body:expr) => {
        $crate::status_code($crate::run_boundary(
            $name,
            || -> Result<(), nrt_core::Error> { $body },
        ))
    };
}

mod async_exec;
mod backend;
pub mod core_dump;
mod execute;
mod handles;
mod host;
mod init;
mod machine;
mod model;
mod tensor;
mod tensor_set;
mod unsupported;

// The modules of the SDK's other public headers.
mod async_ext;
mod exec_observer;
mod ffi_util;
mod ndebug;
mod nds;
mod nec;
mod nrt_gaps;
mod output_completion;
mod sendrecv;

// Profiling, system trace and inspect (nrt_profile.h, nrt_sys_trace.h).
mod c_strings;
pub mod inspect;
pub mod profile;
pub mod sys_trace;
mod trace_store;

/// What the library holds on the simulated machine, for the crate's tests and the `capi` fuzz
/// target (the `test-hooks` feature; never in a shipped library).
#[cfg(feature = "test-hooks")]
pub mod test_hooks {
    /// The simulated machine behind the library, once the simulator is the chosen backend.
    pub fn sim_machine() -> Option<std::sync::Arc<nrt_sim::SimMachine>> {
        crate::DRIVER
            .get()
            .and_then(|d| d.as_sim())
            .map(|s| std::sync::Arc::clone(s.machine()))
    }

    /// Device memory of `device` allocated through the library and not freed, in bytes.
    pub fn device_bytes_allocated(device: u32) -> u64 {
        crate::DRIVER.bytes_allocated(device)
    }
}

pub use async_exec::*;
pub use execute::*;
pub use init::*;
pub use model::*;
pub use tensor::*;
pub use tensor_set::*;
pub use unsupported::*;

/// The body of [`api!`]: runs `body` inside the exported function `name` (log lines name it)
/// and turns a panic into `NRT_FAILURE` with a log line.
///
/// On success nothing of the size of an [`Error`] (520 bytes) is moved: the unwinding closure
/// hands back only the value, and an error is parked beside it, so a short call does not pay
/// for copying a `Result` out of `catch_unwind`.
#[inline(always)]
fn run_boundary<T>(
    name: &'static str,
    body: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    let _in = host::InCall::enter(name);
    let mut failure: Option<Error> = None;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match body() {
        Ok(v) => Some(v),
        Err(e) => {
            failure = Some(e);
            None
        }
    }));
    match caught {
        Ok(Some(v)) => Ok(v),
        Ok(None) => Err(boundary_failure(failure, name)),
        Err(_) => Err(boundary_failure(
            Some(err!(Failure, "internal error (panic) caught in {name}")),
            name,
        )),
    }
}

/// The failure of a call, logged once ([`log_failure`]).
#[cold]
#[inline(never)]
fn boundary_failure(failure: Option<Error>, name: &str) -> Error {
    // Every failure is logged exactly once: the runtime marks what it logged, the rest is
    // logged here.
    log_failure(failure.unwrap_or_else(|| err!(Failure, "internal error: {name} failed")))
}

/// The fast path of a hot exported function: `body` answers `Some` when the call succeeds with
/// nothing to report — no log line, no [`Error`] built (an `Error` is 520 bytes, and moving
/// `Result`s of it between the layers of a call was most of the cost of a short call) — and
/// `None` to make the caller fall back to its full path under [`api!`], which runs the call
/// again and reports why it fails. A panic also falls back (and the full path catches it).
#[inline]
fn fast_path<T>(body: impl FnOnce() -> Option<T>) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .ok()
        .flatten()
}

/// Logs `e` unless it was logged already, and returns it marked as logged.
fn log_failure(e: Error) -> Error {
    if e.is_logged() {
        e
    } else {
        rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        e.mark_logged()
    }
}

/// The `NRT_STATUS` code of a result.
#[inline(always)]
fn status_code(r: Result<(), Error>) -> u32 {
    match r {
        Ok(()) => NrtStatus::Success.code(),
        Err(e) => e.status().code(),
    }
}

/// `NRT_INVALID` for a NULL argument (logged by [`api!`]).
fn invalid(what: &str) -> Error {
    err!(Invalid, "{what} is NULL")
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

/// The runtime's lifecycle state (for Rust callers of this crate and its tests).
pub fn state() -> InitState {
    rt().state()
}

/// The usages of the I/O tensors of a model (for Rust callers of this crate).
pub fn _usage_names() -> [&'static str; 2] {
    [TensorUsage::Input.as_str(), TensorUsage::Output.as_str()]
}
