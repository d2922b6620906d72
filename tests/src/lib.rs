//! Test support for the conformance suite: runtimes over simulated machines with a fault
//! injector and a capturing host, and assertions on exact statuses and messages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use nrt_core::driver::FaultInjector;
use nrt_core::{Error, FrameworkType, Host, NrtStatus, Runtime};
use nrt_host::CapturingHost;

pub mod conformance;
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

/// The environment variable that turns a missing `../shared/` file into a test failure when it
/// is `1`. `.ci/run` sets it: the CI layout always has the folder, so CI never skips.
pub const REQUIRE_SHARED_VAR: &str = "NRT_REQUIRE_SHARED";

/// The compiler fixture, relative to `../shared/`: a real `neuronx-cc` NEFF (two subgraphs,
/// inputs `x` and `y`, output `output0`; see [`models::plumbing_matmul_neff`] for a built
/// NEFF with the same I/O).
pub const MATMUL_FIXTURE: &str = "fixtures/neff/matmul_small.neff";

/// The path of `relative` inside `shared/`, the folder beside the repository that holds the
/// specification, the compiler fixture and the driver ABI description, when it exists.
///
/// A fresh clone has no such folder. Then this prints one line on stderr, starting with
/// `SKIPPED` and naming the test and the missing path (written to the stderr stream directly,
/// past the test harness's output capture, so that it shows every time), and returns `None`:
/// the caller skips what needs the file. With `NRT_REQUIRE_SHARED=1` the absence panics instead.
#[track_caller]
pub fn shared_path(relative: &str) -> Option<PathBuf> {
    // `CARGO_MANIFEST_DIR` is `<repo>/tests`, absolute: its grandparent holds `shared/`.
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let beside = manifest.parent().and_then(|repo| repo.parent());
    let path = beside.unwrap_or(manifest).join("shared").join(relative);
    if path.exists() {
        return Some(path);
    }
    if std::env::var_os(REQUIRE_SHARED_VAR).is_some_and(|v| v == "1") {
        panic!(
            "{} is absent, and {REQUIRE_SHARED_VAR}=1 requires it (the `shared/` folder beside \
             the repository)",
            path.display()
        );
    }
    print_skipped(&format!(
        "{} is absent (no `shared/` folder beside the repository), so what needs it did not \
         run; set {REQUIRE_SHARED_VAR}=1 to make this a failure",
        path.display()
    ));
    None
}

/// Prints `SKIPPED in <test>: <why>` as one line on stderr, written to the stream directly:
/// the harness captures `eprintln!` of passing tests, so a skip said that way would not show.
pub fn print_skipped(why: &str) {
    let thread = std::thread::current();
    let who = thread.name().filter(|n| *n != "main").unwrap_or("this run");
    let _ = writeln!(std::io::stderr(), "SKIPPED in {who}: {why}");
}

/// The bytes of `relative` inside `shared/`, or `None` after the skip line of [`shared_path`].
#[track_caller]
pub fn shared_fixture(relative: &str) -> Option<Vec<u8>> {
    let path = shared_path(relative)?;
    Some(std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display())))
}

/// The compiler fixture [`MATMUL_FIXTURE`], or `None` (skip line printed) without `shared/`.
#[track_caller]
pub fn matmul_fixture() -> Option<Vec<u8>> {
    shared_fixture(MATMUL_FIXTURE)
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
