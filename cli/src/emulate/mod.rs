//! `nrt emulate [--instance …] [--devices N] [--fail-ioctl N[:ERRNO]]… [--report FILE] --
//! PROGRAM ARGS…`: runs an unmodified program against the device emulator (`nrt-emu`).
//!
//! 1. The program is looked up on `PATH` first (127 when it is not found).
//! 2. `nrt` enters a user + mount namespace of its own ([`ns`]), starts the emulator with its
//!    root on the namespace's staging tmpfs, and makes `/dev/neuron0..N-1` the emulator's
//!    device files and `/sys/class/neuron_device`, `/sys/module/neuron` its sysfs tree.
//! 3. It forks ([`proc`]); the child installs the emulator's seccomp filter (inherited
//!    across exec, by threads and children), hands the listener back, and executes the
//!    program; the parent answers the filter's notifications until every process of the
//!    program has ended, reaping them.
//! 4. It prints the emulator's accounting on stderr (and in `--report FILE`) and exits with
//!    the program's status (128 + the signal when a signal killed it).
//!
//! Exit status 125 is a failure of `nrt emulate` itself (the kernel refused a user namespace
//! or seccomp user notification, the emulator failed, …), with the reason on one line; 126
//! and 127 as for `env`: the program could not be executed, was not found.

pub(crate) mod faults;
mod ns;
mod proc;

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use nrt_emu::{EmuConfig, Emulator, FaultPlan};

use crate::args::EmulateArgs;
use faults::FailIoctl;
use proc::{OWN_FAILURE, StartError};

/// A failure, with `nrt emulate`'s exit status for it.
struct Failure {
    message: String,
    code: u8,
}

impl From<StartError> for Failure {
    fn from(e: StartError) -> Self {
        Failure {
            message: e.message,
            code: e.code,
        }
    }
}

fn own(message: impl Into<String>) -> Failure {
    Failure {
        message: message.into(),
        code: OWN_FAILURE,
    }
}

/// Runs the command; its exit status.
pub(crate) fn emulate(a: &EmulateArgs) -> ExitCode {
    match run(a) {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            let line: Vec<&str> = f.message.lines().map(str::trim).collect();
            eprintln!("error: emulate: {}", line.join("; "));
            ExitCode::from(f.code)
        }
    }
}

/// Whether the kernel offers seccomp user notification, from
/// `/proc/sys/kernel/seccomp/actions_avail` (Linux 4.14 and later; `user_notif` since 5.0).
fn check_user_notif() -> Result<(), Failure> {
    const AVAIL: &str = "/proc/sys/kernel/seccomp/actions_avail";
    match std::fs::read_to_string(AVAIL) {
        Ok(text) if text.split_whitespace().any(|a| a == "user_notif") => Ok(()),
        Ok(text) => Err(own(format!(
            "the kernel does not offer seccomp user notification ({AVAIL} lists {:?}; it needs Linux 5.0 or later)",
            text.trim()
        ))),
        Err(e) => Err(own(format!(
            "the kernel does not offer seccomp filters ({AVAIL}: {e}; nrt emulate needs seccomp user notification, Linux 5.0 or later with CONFIG_SECCOMP_FILTER)"
        ))),
    }
}

/// The emulator's fault plan from `--fail-ioctl`.
fn faults(fail: &[FailIoctl]) -> FaultPlan {
    fail.iter()
        .fold(FaultPlan::none(), |plan, f| plan.fail_nth(f.nth, f.errno))
}

fn run(a: &EmulateArgs) -> Result<u8, Failure> {
    let (program, _) = a
        .command
        .split_first()
        .ok_or_else(|| own("no program given"))?;
    let path = proc::resolve(program, std::env::var_os("PATH").as_deref())?;
    let command = proc::Command::new(&path, &a.command)?;
    let mut report = a
        .report
        .as_ref()
        .map(|p| File::create(p).map_err(|e| own(format!("{}: {e}", p.display()))))
        .transpose()?;
    check_user_notif()?;

    // Single-threaded up to here: a user namespace needs it.
    let mut namespace = ns::enter(&std::env::temp_dir()).map_err(|e| own(e.0))?;
    let root = namespace.staging().join("emu");
    let emulator = Emulator::new(EmuConfig {
        instance: a.instance.instance(),
        devices: a.devices,
        root: root.clone(),
        faults: faults(&a.fail_ioctl),
    })
    .map_err(|e| own(format!("starting the emulator in {}: {e}", root.display())))?;
    namespace
        .replace_dev(Path::new("/dev"), &emulator.dev_dir())
        .map_err(|e| own(e.0))?;
    namespace
        .overlay(&emulator.sysfs_root(), Path::new("/sys"))
        .map_err(|e| own(e.0))?;
    for s in namespace.skipped() {
        eprintln!("nrt emulate: warning: not reproduced in the namespace: {s}");
    }

    let (child, listener) = proc::spawn(&command, nrt_emu::install_filter)?;
    let (served, ended) = std::thread::scope(|scope| {
        let reaper = scope.spawn(|| child.reap());
        let served = emulator.serve(listener);
        if let Err(e) = &served {
            // The program's notified system calls now fail with ENOSYS; say why at once.
            eprintln!(
                "nrt emulate: the emulator stopped answering ({e}); waiting for the program to end"
            );
        }
        let ended = reaper.join().unwrap_or_else(|_| {
            Err(StartError {
                message: "the thread reaping the program panicked".into(),
                code: OWN_FAILURE,
            })
        });
        (served, ended)
    });
    let ended = ended?;
    let accounting = emulator.accounting().to_string();
    eprintln!(
        "nrt emulate: {} {}; the emulator's accounting:",
        path.display(),
        match ended {
            proc::Ended::Exited(c) => format!("exited with status {c}"),
            proc::Ended::Killed(s) => format!("was killed by signal {s}"),
        }
    );
    eprint!("{accounting}");
    if let (Some(file), Some(p)) = (report.as_mut(), a.report.as_ref()) {
        file.write_all(accounting.as_bytes())
            .map_err(|e| own(format!("writing {}: {e}", p.display())))?;
    }
    served.map_err(|e| own(format!("the emulator stopped answering: {e}")))?;
    Ok(ended.code())
}
