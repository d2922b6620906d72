//! Test support for the conformance suite: a host that captures log records and can simulate
//! `fork()`, and shorthands for building runtimes over simulated machines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use nrt_core::driver::FaultInjector;
use nrt_core::{Error, FrameworkType, Host, Level, NrtStatus, Runtime};
use nrt_sim::{SimDriver, SimMachine};

/// A host that records every log record, can refuse fork-handler registration and can pretend
/// the process forked.
#[derive(Debug, Default)]
pub struct TestHost {
    records: Mutex<Vec<(Level, String)>>,
    fork_generation: AtomicU32,
    refuse_fork_handlers: Mutex<Option<i32>>,
    fork_handler_registrations: AtomicU32,
}

impl TestHost {
    /// A host that accepts everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `register_fork_handlers` fail with `ret`.
    pub fn refuse_fork_handlers(&self, ret: Option<i32>) {
        *self.refuse_fork_handlers.lock().unwrap() = ret;
    }

    /// What the fork-child handler would do: bump the generation.
    pub fn simulate_fork(&self) {
        self.fork_generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Times the runtime asked for fork handlers.
    pub fn fork_handler_registrations(&self) -> u32 {
        self.fork_handler_registrations.load(Ordering::SeqCst)
    }

    /// Every record so far.
    pub fn records(&self) -> Vec<(Level, String)> {
        self.records.lock().unwrap().clone()
    }

    /// Whether a record at `level` contains `needle`.
    pub fn logged(&self, level: Level, needle: &str) -> bool {
        self.records()
            .iter()
            .any(|(l, m)| *l == level && m.contains(needle))
    }

    /// Forgets every record.
    pub fn clear(&self) {
        self.records.lock().unwrap().clear();
    }
}

impl Host for TestHost {
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        self.records.lock().unwrap().push((level, args.to_string()));
    }

    fn register_fork_handlers(&self) -> Result<(), i32> {
        self.fork_handler_registrations
            .fetch_add(1, Ordering::SeqCst);
        match *self.refuse_fork_handlers.lock().unwrap() {
            Some(ret) => Err(ret),
            None => Ok(()),
        }
    }

    fn fork_generation(&self) -> u32 {
        self.fork_generation.load(Ordering::SeqCst)
    }
}

/// The runtime most tests use: a fault injector over a simulated driver, and a [`TestHost`].
pub type TestRuntime = Runtime<FaultInjector<SimDriver>, Arc<TestHost>>;

/// A runtime attached to `machine` (a new "process" on it).
pub fn runtime_on(machine: &Arc<SimMachine>) -> (TestRuntime, Arc<TestHost>) {
    let host = Arc::new(TestHost::new());
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
