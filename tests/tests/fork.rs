//! A real `fork()` of an initialised runtime: the child is in NRT_STATE_CHILD for good.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::{InitState, NrtStatus, Runtime};
use nrt_host::StdHost;
use nrt_sim::{Instance, SimDriver};
use nrt_tests::init;

/// Runs in the forked child: only atomics, stack formatting and `_exit` (no allocation, no
/// locks: the log level is QUIET so nothing is written).
fn child_checks<D: nrt_core::Driver>(rt: &Runtime<D, StdHost>) -> i32 {
    if rt.state() != InitState::Child {
        return 10;
    }
    match rt.guard() {
        Err(e) if e.status() == NrtStatus::Failure => {
            if e.message() != "Incompatible runtime state: NRT_STATE_CHILD" {
                return 11;
            }
        }
        _ => return 12,
    }
    match init(rt, &[("NEURON_RT_LOG_LEVEL", "QUIET")]) {
        Err(e) if e.status() == NrtStatus::Failure => {}
        _ => return 13,
    }
    0
}

#[test]
fn forked_child_of_an_initialized_runtime_is_in_child_state() {
    let rt = Runtime::with_host(SimDriver::new(Instance::Trn1, 1), StdHost::new());
    init(&rt, &[("NEURON_RT_LOG_LEVEL", "QUIET")]).unwrap();
    // SAFETY: the child only runs `child_checks` (atomics and stack-only formatting) and then
    // `_exit`, never returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child_checks(&rt);
        // SAFETY: `_exit` ends the child without running destructors or atexit handlers.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(r, pid);
    assert!(
        libc::WIFEXITED(status),
        "child did not exit normally: {status:#x}"
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "child check failed");
    // The parent is untouched.
    assert_eq!(rt.state(), InitState::Init);
    rt.close();
    assert_eq!(rt.state(), InitState::Start);
}
