//! A fault-injection sweep at the syscall boundary: every driver ioctl that one
//! init → load → execute → read → unload → close cycle of `nrt-linux` issues fails once in
//! turn (the device emulator answers it with an errno and does nothing). Each time the cycle
//! reports the failure with the status the runtime specifies for that step, the emulator's
//! accounting shows nothing left allocated, reserved or attached, and a retry of the whole
//! cycle succeeds with the right output.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex, PoisonError};

use nrt_core::tensor::TensorPlacement;
use nrt_core::{Level, NrtStatus, Runtime};
use nrt_emu::{Accounting, FaultPlan, InProcess, InProcessConfig};
use nrt_host::CapturingHost;
use nrt_linux::LinuxDriver;
use nrt_sim::Instance;
use nrt_tests::conformance::{mlp_expected, mlp_neff, try_mlp_sets};
use nrt_tests::init;

/// Records of the `log` facade (what backends report through, such as the Linux backend's
/// soft-incompatibility warnings), kept for the cycle that is running.
struct Captured(Mutex<Vec<String>>);

impl log::Log for Captured {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

static CAPTURED: Captured = Captured(Mutex::new(Vec::new()));

/// Where a cycle stopped.
#[derive(Debug)]
struct Outcome {
    step: &'static str,
    status: NrtStatus,
    message: String,
}

/// One cycle: `Ok(output)` or where and how it failed, with the lines the runtime logged at
/// ERROR or WARNING. Close always runs.
fn cycle(emu: &InProcess, neff: &[u8]) -> (Result<Vec<u8>, Outcome>, Vec<String>) {
    let host = Arc::new(CapturingHost::new());
    CAPTURED
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let rt = Runtime::with_host(
        LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root()),
        Arc::clone(&host),
    );
    let fail = |step: &'static str| {
        move |e: nrt_core::Error| Outcome {
            step,
            status: e.status(),
            message: e.message().to_string(),
        }
    };
    let result = (|| {
        init(&rt, &[]).map_err(fail("init"))?;
        let h = rt.load(neff, 0, -1).map_err(fail("load"))?;
        let run = || -> nrt_core::Result<Vec<u8>> {
            let (inputs, outputs) = try_mlp_sets(&rt, TensorPlacement::Device)?;
            rt.execute(h, &inputs, &outputs)?;
            let out = outputs.get("y_t")?;
            let mut bytes = vec![0u8; out.size() as usize];
            out.read(0, &mut bytes)?;
            Ok(bytes)
        };
        let out = run().map_err(fail("execute"));
        let unloaded = rt.unload(h).map_err(fail("unload"));
        let out = out?;
        unloaded?;
        Ok(out)
    })();
    rt.close();
    let mut logged = host.messages(Level::Error);
    logged.extend(host.messages(Level::Warning));
    logged.extend(
        CAPTURED
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..),
    );
    (result, logged)
}

fn clean(acct: &Accounting) -> bool {
    acct.allocated_bytes == 0
        && acct.allocations == 0
        && acct.reserved_cores == 0
        && acct.attached_processes == 0
}

fn emulate<T: Send>(
    faults: FaultPlan,
    body: impl FnOnce(&InProcess) -> T + Send,
) -> (T, Accounting) {
    InProcess::run(
        InProcessConfig::new(Instance::Trn1, 1).with_faults(faults),
        body,
    )
    .unwrap_or_else(|e| {
        panic!(
            "nrt-emu cannot run here: {e} (seccomp user notification is required; this \
                 test fails rather than pass without emulating anything)"
        )
    })
}

/// The status and message prefix the runtime specifies for a failed driver request in
/// each step of the cycle (spec 002: init's compatibility check and reservation, device
/// bring-up, staging, execution, unstaging).
fn specified(o: &Outcome) -> Option<(NrtStatus, &'static str)> {
    let table: &[(&str, NrtStatus, &str)] = &[
        (
            "init",
            NrtStatus::Invalid,
            "Unable to read compatible Driver version",
        ),
        (
            "init",
            NrtStatus::Failure,
            "Logical Neuron Core(s) not available - Requested:2",
        ),
        (
            "init",
            NrtStatus::Failure,
            "Failed to initialize devices, error:1 (",
        ),
        (
            "load",
            NrtStatus::Failure,
            "Failed to stage subgraph sg00 of mlp on Neuron Core 0: ",
        ),
        ("execute", NrtStatus::Failure, "Failed to allocate "),
        (
            "execute",
            NrtStatus::Failure,
            "Failed to write device memory: ",
        ),
        (
            "execute",
            NrtStatus::Failure,
            "Failed to set device memory: ",
        ),
        (
            "execute",
            NrtStatus::Failure,
            "Failed to read device memory: ",
        ),
        ("execute", NrtStatus::Failure, "Execution of model "),
        ("unload", NrtStatus::Failure, "Failed to unstage model: "),
    ];
    table
        .iter()
        .find(|(step, status, prefix)| {
            *step == o.step && *status == o.status && o.message.starts_with(prefix)
        })
        .map(|&(_, status, prefix)| (status, prefix))
}

#[test]
fn every_ioctl_of_a_cycle_fails_once_in_turn() {
    let _ = log::set_logger(&CAPTURED);
    log::set_max_level(log::LevelFilter::Warn);
    let neff = mlp_neff();
    let expected = mlp_expected();
    // The clean cycle: how many driver ioctls it issues.
    let ((out, logged), acct) = emulate(FaultPlan::none(), |emu| cycle(emu, &neff));
    assert_eq!(out.unwrap(), expected);
    assert!(logged.is_empty(), "{logged:?}");
    assert!(clean(&acct), "{acct}");
    let total = acct.ioctls_served;
    assert!(total > 40, "{acct}");
    let (mut failed, mut tolerated) = (0, 0);
    for k in 1..=total {
        let (((first, logged), after_first, (retry, _)), end) =
            emulate(FaultPlan::none().fail_nth(k, libc::EIO), |emu| {
                let first = cycle(emu, &neff);
                let after = emu.accounting();
                let retry = cycle(emu, &neff);
                (first, after, retry)
            });
        assert_eq!(
            end.ioctls_failed, 1,
            "ioctl {k}: exactly the injected fault"
        );
        match first {
            Err(o) => {
                failed += 1;
                println!("ioctl {k:3}: {} → {:?} {}", o.step, o.status, o.message);
                assert!(
                    specified(&o).is_some(),
                    "ioctl {k}: unspecified outcome {o:?}"
                );
                // The driver's own words reach the message or the log.
                assert!(
                    o.message.contains("Input/output error")
                        || logged.iter().any(|l| l.contains("Input/output error")),
                    "ioctl {k}: {o:?}, logged {logged:?}"
                );
            }
            Ok(out) => {
                // A request whose failure the runtime survives (a free in teardown, a
                // discovery fallback): the cycle's output is still right, and the failure
                // was logged.
                tolerated += 1;
                println!("ioctl {k:3}: tolerated, logged {logged:?}");
                assert_eq!(out, expected, "ioctl {k}");
                assert!(!logged.is_empty(), "ioctl {k}: failed silently");
            }
        }
        assert!(
            clean(&after_first),
            "ioctl {k}: leaked after the failed cycle: {after_first}"
        );
        assert_eq!(retry.ok().as_ref(), Some(&expected), "ioctl {k}: the retry");
        assert!(clean(&end), "ioctl {k}: {end}");
    }
    println!("{total} ioctls: {failed} failed the cycle as specified, {tolerated} tolerated");
    assert!(failed > tolerated);
}
