//! Core dumps on failure (`nrt_core_dump` in libnrt): when a load, an execution, a tensor
//! operation or an `nrta_*` call fails after the lifecycle guard let it in, and core dumps are
//! enabled (`NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY` or `NEURON_RT_S3_CORE_DUMP_PREFIX` set, and the
//! `neuron-dump` helper installed), the runtime's recent error log is written to
//! `<local dump directory>/nrt-error-<log id>.log` and handed to the helper
//! (`--runtime-generated`, [`nrt_host::CoreDumper::report_generated_file`]).
//!
//! The helper's path is fixed, as in libnrt (`/opt/aws/neuron/bin/neuron-dump`, no environment
//! override). Builds with the `test-hooks` feature (the crate's own tests) can put another
//! program in its place with [`set_helper_for_tests`].
//!
//! libnrt also runs the helper once per physical core of the failing model to capture device
//! state; the simulator has no device state outside the process and the Linux backend cannot
//! execute yet, so only the runtime-generated error log is reported.

use std::fmt::Write as _;

use nrt_core::Error;

use crate::rt;

#[cfg(feature = "test-hooks")]
static TEST_HELPER: std::sync::Mutex<Option<std::path::PathBuf>> = std::sync::Mutex::new(None);

/// Replaces the `neuron-dump` helper (`None`: the fixed path again). Only in builds with the
/// `test-hooks` feature, so no user of the library can redirect dumps.
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub fn set_helper_for_tests(helper: Option<std::path::PathBuf>) {
    *TEST_HELPER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = helper;
}

fn dumper(config: &nrt_core::config::Config) -> nrt_host::CoreDumper {
    let dumper = nrt_host::CoreDumper::from_config(config);
    #[cfg(feature = "test-hooks")]
    if let Some(helper) = TEST_HELPER
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
    {
        return dumper.with_helper(helper);
    }
    dumper
}

/// Runs the body of the exported function `what` and writes a core dump if it fails: the
/// failure is logged first (once), so the dump's error log ends with it.
pub(crate) fn dumping<T>(
    what: &'static str,
    body: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    body().map_err(|e| {
        let e = crate::log_failure(e);
        write_dump(what, &e);
        e
    })
}

fn write_dump(what: &str, e: &Error) {
    // Calls the guard refused (before init, after close, in a forked child) dump nothing.
    if !rt().is_ready() {
        return;
    }
    let Ok(config) = rt().config() else { return };
    let dumper = dumper(&config);
    if !dumper.enabled() {
        return;
    }
    let vars = dumper.path_variables();
    let dir = dumper.local_output_dir(&vars);
    if let Err(err) = std::fs::create_dir_all(&dir) {
        crate::ffi_util::log_msg(format_args!(
            "Failed to create the core dump directory {dir}: {err}"
        ));
        return;
    }
    let mut report = String::new();
    let _ = writeln!(
        report,
        "# nrt-rs error log: {what} failed with {} ({}): {}",
        e.status().name(),
        e.status().code(),
        e.message()
    );
    for line in crate::host::recent_errors() {
        report.push_str(&line);
    }
    let file = std::path::Path::new(&dir).join(format!("nrt-error-{}.log", vars.log_id));
    if let Err(err) = std::fs::write(&file, report) {
        crate::ffi_util::log_msg(format_args!(
            "Failed to write the error log {}: {err}",
            file.display()
        ));
        return;
    }
    if let Err(err) = dumper.report_generated_file(&file) {
        crate::ffi_util::log_msg(format_args!("core dump helper failed: {err}"));
    }
}
