//! The backend-agnostic conformance suite (`nrt_tests::conformance`) over `nrt-linux`, whose
//! every request goes through the real syscall boundary to the in-process device emulator
//! (`nrt-emu`: seccomp user notification). Same expectations as `conformance_sim.rs`.
//!
//! Without seccomp user notification these tests fail, saying why; they never pass silently.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_emu::{InProcess, InProcessConfig};
use nrt_linux::LinuxDriver;
use nrt_sim::Instance;
use nrt_tests::conformance::{self, Backend};

/// `nrt-linux` over the emulator serving this thread.
struct Emulated<'a>(&'a InProcess);

impl Backend for Emulated<'_> {
    type Driver = LinuxDriver;
    fn driver(&self) -> LinuxDriver {
        LinuxDriver::with_roots(self.0.dev_dir(), self.0.sysfs_root())
    }
    fn allocated_bytes(&self) -> u64 {
        self.0.accounting().allocated_bytes
    }
    fn reserved_cores(&self) -> u32 {
        self.0.accounting().reserved_cores
    }
}

/// Runs `check` over an emulated trn1 device and asserts the emulator's accounting is clean at
/// the end: nothing allocated, reserved or attached, every launch successful.
fn emulated(check: fn(&Emulated<'_>)) {
    let ((), acct) = InProcess::run(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        check(&Emulated(emu))
    })
    .unwrap_or_else(|e| {
        panic!(
            "nrt-emu cannot run here: {e} (seccomp user notification is required; this test \
             fails rather than pass without emulating anything)"
        )
    });
    assert_eq!(acct.allocated_bytes, 0, "{acct}");
    assert_eq!(acct.allocations, 0, "{acct}");
    assert_eq!(acct.reserved_cores, 0, "{acct}");
    assert_eq!(acct.attached_processes, 0, "{acct}");
    assert!(acct.ioctls_served > 0, "{acct}");
}

#[test]
fn lifecycle() {
    emulated(|b| conformance::lifecycle(b));
}

#[test]
fn allocation() {
    emulated(|b| conformance::allocation(b));
}

#[test]
fn registry() {
    emulated(|b| conformance::registry(b));
}

#[test]
fn execute() {
    emulated(|b| conformance::execute(b));
}

#[test]
fn async_exec() {
    emulated(|b| conformance::async_exec(b));
}

#[test]
fn injected_driver_faults() {
    emulated(|b| conformance::injected_driver_faults(b));
}
