//! Test support for the conformance suite: runtimes over simulated machines with a fault
//! injector and a capturing host, and assertions on exact statuses and messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;
use std::sync::Arc;

use nrt_core::driver::FaultInjector;
use nrt_core::{Error, FrameworkType, Host, NrtStatus, Runtime};
use nrt_host::CapturingHost;

pub mod models;
use nrt_sim::{SimDriver, SimMachine};

/// The runtime most tests use: a fault injector over a simulated driver, and a [`TestHost`].
pub type TestRuntime = Runtime<FaultInjector<SimDriver>, Arc<CapturingHost>>;

/// A runtime attached to `machine` (a new "process" on it).
pub fn runtime_on(machine: &Arc<SimMachine>) -> (TestRuntime, Arc<CapturingHost>) {
    let host = Arc::new(CapturingHost::new());
    let rt = Runtime::with_host(
        FaultInjector::new(SimDriver::attach(machine)),
        Arc::clone(&host),
    );
    (rt, host)
}

/// `init` with `NO_FW` and the given variables.
pub fn init<D: nrt_core::Driver, H: Host>(
    rt: &Runtime<D, H>,
    vars: &[(&str, &str)],
) -> Result<(), Error> {
    rt.init(FrameworkType::NoFw, "", "", &vars)
}

/// Asserts that `r` failed with `status` and exactly `message`.
#[track_caller]
pub fn assert_err<T: fmt::Debug>(r: Result<T, Error>, status: NrtStatus, message: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.status(), status, "status of {e:?}");
    assert_eq!(e.message(), message, "message of {e:?}");
}

/// Asserts that `r` failed with `status` and a message starting with `prefix`.
#[track_caller]
pub fn assert_err_prefix<T: fmt::Debug>(r: Result<T, Error>, status: NrtStatus, prefix: &str) {
    let e = r.expect_err("expected an error");
    assert_eq!(e.status(), status, "status of {e:?}");
    assert!(
        e.message().starts_with(prefix),
        "message of {e:?} should start with {prefix:?}"
    );
}

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Replaces the section `name` of `docs/PERFORMANCE.md` (between `<!-- name:begin -->` and
/// `<!-- name:end -->`), appending it if absent, so each benchmark owns its own figures.
pub fn write_performance_section(name: &str, content: &str) -> std::io::Result<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/PERFORMANCE.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Performance\n\nFigures written by the benchmarks named in each section.\n".to_string()
    });
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let section = format!("{begin}\n{}\n{end}", content.trim_end());
    let new = match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{}{}", &doc[..b], section, &doc[e + end.len()..]),
        _ => format!("{}\n{}\n", doc.trim_end(), section),
    };
    std::fs::write(&path, new)?;
    Ok(path)
}
