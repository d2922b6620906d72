//! Boundary helpers of the extra public headers (`nec.h`, `nds/neuron_ds.h`, `ndebug_stream.h`,
//! `nrt_async_sendrecv.h`, the `nrt_async.h` additions).
//!
//! Status-returning functions go through the crate's `api!` macro. Functions that return
//! something else (an `int`, a size, a pointer, `void`) go through [`boundary`], which does
//! the same for them: it names the function for log lines and turns a panic into the given
//! fallback value and one log line. (It is meant to be replaced by the crate-wide boundary
//! macro's forms for other return types when that lands.)

use nrt_core::{Error, Level, NrtStatus};

use crate::rt;

/// The status of a call this library does not provide. libnrt 2.31 defines no dedicated
/// "unsupported" code, so such calls report `NRT_FAILURE`, always with one log line naming the
/// function and the reason ([`unsupported`]).
pub(crate) const UNSUPPORTED: NrtStatus = NrtStatus::Failure;

/// Logs `"<name> is not supported by nrt-rs: <why>"` once and returns it as an error with
/// status [`UNSUPPORTED`].
pub(crate) fn unsupported(name: &str, why: &str) -> Error {
    let e = Error::new(
        UNSUPPORTED,
        format_args!("{name} is not supported by nrt-rs: {why}"),
    );
    logged(e)
}

/// Logs `e`'s message at error level and marks it logged, so the boundary does not log it
/// again (every failure is logged exactly once).
pub(crate) fn logged(e: Error) -> Error {
    rt().log(Level::Error, format_args!("{}", e.message()));
    e.mark_logged()
}

/// Logs a message at error level.
pub(crate) fn log_msg(args: std::fmt::Arguments<'_>) {
    rt().log(Level::Error, args);
}

/// Runs the body of the exported function `name` that returns a plain value (an `int`, a size,
/// a pointer, nothing) through the crate's one boundary (`run_boundary`, behind `api!`): names
/// the function in log lines, and turns a panic into `fallback` and one log line.
pub(crate) fn boundary<T>(name: &'static str, fallback: T, body: impl FnOnce() -> T) -> T {
    crate::run_boundary(name, || Ok::<T, Error>(body())).unwrap_or(fallback)
}

/// Defines exported status-returning functions that are not provided: each logs one line
/// naming itself and the reason, and returns [`UNSUPPORTED`] (after the lifecycle guard, like
/// every entry: 13 before `nrt_init` and after `nrt_close`, 1 in a forked child).
macro_rules! unsupported_status {
    ($(#[$doc:meta])* $name:ident, $label:literal, $why:literal, ($($arg:ident: $ty:ty),*)) => {
        $(#[$doc])*
        #[doc = concat!("\n\nNot provided by nrt-rs (", $why, "): logs that and returns `NRT_FAILURE`.")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name($($arg: $ty),*) -> u32 {
            $(let _ = $arg;)*
            api!($label, {
                $crate::rt().guard()?;
                Err($crate::ffi_util::unsupported($label, $why))
            })
        }
    };
}
pub(crate) use unsupported_status;
