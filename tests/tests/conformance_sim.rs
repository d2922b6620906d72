//! The backend-agnostic conformance suite (`nrt_tests::conformance`) over the simulator in
//! kernel-driver mode; `conformance_linux.rs` runs the same checks over `nrt-linux`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_tests::conformance::{self, SimBackend};

#[test]
fn lifecycle() {
    conformance::lifecycle(&SimBackend::new());
}

#[test]
fn allocation() {
    conformance::allocation(&SimBackend::new());
}

#[test]
fn registry() {
    conformance::registry(&SimBackend::new());
}

#[test]
fn execute() {
    conformance::execute(&SimBackend::new());
}

#[test]
fn async_exec() {
    conformance::async_exec(&SimBackend::new());
}

#[test]
fn injected_driver_faults() {
    conformance::injected_driver_faults(&SimBackend::new());
}
