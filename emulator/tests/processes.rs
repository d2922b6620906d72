//! Rules that need a second process: core ranges owned per process (the driver's scan with
//! the [free, busy, free, free] case, owner-only unmark, unmark when the owner exits) and the
//! per-device attach limit of 16 processes. The other processes are this test binary run
//! again (`child_helper`), spawned from the filtered thread, so they inherit the filter.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use nrt_emu::{InProcess, InProcessConfig};
use nrt_sim::Instance;

const ROLE: &str = "NRT_EMU_CHILD_ROLE";

/// In a child: does what `NRT_EMU_CHILD_ROLE` says, reports one line, waits for stdin to
/// close and exits without closing its fds (the exit flushes them). In a normal run: nothing.
#[test]
fn child_helper() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let mut parts = role.split('|');
    let (what, path) = (parts.next().unwrap(), Path::new(parts.next().unwrap()));
    let line = match what {
        "mark" => {
            let core: u32 = parts.next().unwrap().parse().unwrap();
            let fd = open(path, libc::O_WRONLY).unwrap();
            let (r, bits, _) = mark(&fd, 1, core, core);
            std::mem::forget(fd);
            format!("{r:?} {bits}")
        }
        "attach" => match open(path, libc::O_RDWR) {
            Ok(fd) => {
                std::mem::forget(fd);
                "attached".to_string()
            }
            Err(e) => format!("errno {}", e.raw_os_error().unwrap_or(0)),
        },
        _ => panic!("unknown role {what}"),
    };
    println!("child: {line}");
    std::io::stdout().flush().unwrap();
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    std::process::exit(0);
}

/// Spawns a child in `role`; returns it and its report line. (The caller reaps it with
/// [`finish`].)
#[allow(clippy::zombie_processes)]
fn spawn(role: &str) -> (Child, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_helper", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the child ended early"
        );
        // libtest prints the test's name on the same line first.
        if let Some((_, report)) = line.split_once("child: ") {
            return (child, report.trim().to_string());
        }
    }
}

/// Closes the child's stdin and reaps it.
fn finish(mut child: Child) {
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

/// Waits until `done` holds for the emulator's accounting (it sees a process exit through a
/// pidfd, asynchronously).
fn wait_for(emu: &InProcess, done: impl Fn(&nrt_emu::Accounting) -> bool) {
    let start = Instant::now();
    while !done(&emu.accounting()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out: {}",
            emu.accounting()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn core_ranges_are_per_process_and_go_with_the_process() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 2), |emu| {
        let path0 = emu.device_path(0);
        // The child takes core 1: [free, busy, free, free].
        let (child, report) = spawn(&format!("mark|{}|1", path0.display()));
        assert_eq!(report, "Ok(0) 2");
        let fd0 = open(&path0, libc::O_WRONLY).unwrap();
        // The driver's scan resumes two cores past a short run: no run of 2 is found.
        assert_eq!(mark(&fd0, 2, 0, 3), (Err(libc::EBUSY), 0, 1));
        // Unmarking someone else's core does nothing (and succeeds).
        assert_eq!(unmark(&fd0, 0b10), Ok(0));
        assert_eq!(mark(&fd0, 2, 0, 3), (Err(libc::EBUSY), 0, 1));
        assert_eq!(mark(&fd0, 2, 2, 3), (Ok(0), 0b1100, 0));
        assert_eq!(emu.accounting().reserved_cores, 3);
        assert_eq!(unmark(&fd0, 0b1100), Ok(0));
        // Indices are relative to the fd's device: device 1's cores 0-1 are cores 2-3.
        let fd1 = open(&emu.device_path(1), libc::O_WRONLY).unwrap();
        assert_eq!(mark(&fd1, 2, 0, 1), (Ok(0), 0b11, 0));
        assert_eq!(mark(&fd0, 1, 2, 3), (Err(libc::EBUSY), 0, 0));
        // Reversed or out-of-range ranges.
        assert_eq!(mark(&fd0, 1, 3, 2).0, Err(libc::EINVAL));
        assert_eq!(mark(&fd0, 1, 0, 512).0, Err(libc::EINVAL));
        // The child exits without closing: its core is unmarked.
        finish(child);
        wait_for(emu, |a| a.reserved_cores == 2);
        assert_eq!(mark(&fd0, 2, 0, 3), (Ok(0), 0b11, 0));
        assert_eq!(emu.accounting().reserved_cores, 4);
        // Closing one O_WRONLY fd unmarks every core of the process.
        drop(fd1);
        assert_eq!(emu.accounting().reserved_cores, 0);
    });
    assert_eq!(acc.reserved_cores, 0);
}

#[test]
fn seventeen_processes_cannot_attach() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let path = emu.device_path(0);
        let me = open(&path, libc::O_RDWR).unwrap();
        let mut children = Vec::new();
        for _ in 0..15 {
            let (child, report) = spawn(&format!("attach|{}", path.display()));
            assert_eq!(report, "attached");
            children.push(child);
        }
        assert_eq!(emu.accounting().attached_processes, 16);
        let (child, report) = spawn(&format!("attach|{}", path.display()));
        assert_eq!(report, format!("errno {}", libc::EBUSY));
        finish(child);
        // The same process may attach again; O_WRONLY opens never attach.
        let again = open(&path, libc::O_RDWR).unwrap();
        let misc = open(&path, libc::O_WRONLY).unwrap();
        for child in children {
            finish(child);
        }
        wait_for(emu, |a| a.attached_processes == 1);
        drop((again, misc));
        assert_eq!(emu.accounting().attached_processes, 1);
        drop(me);
        assert_eq!(emu.accounting().attached_processes, 0);
    });
    assert_eq!(acc.attached_processes, 0);
}
