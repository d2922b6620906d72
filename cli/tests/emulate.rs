//! `nrt emulate`: the program sees the emulator's device files and sysfs entries (and the
//! rest of /dev and /sys as before), runs under the seccomp filter, and its exit status is
//! `nrt emulate`'s; a program that cannot run is one clear line. Where the kernel refuses
//! user namespaces or seccomp user notification, the tests say so and check only that
//! `nrt emulate` reports it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{example, nrt};

/// `nrt emulate` with a private TMPDIR (to check the staging directory goes away).
fn emulate(tmp: &Path) -> assert_cmd::Command {
    let mut c = nrt();
    c.env("TMPDIR", tmp).arg("emulate");
    c
}

/// Whether this machine can run `nrt emulate`. If not, the reason must be a one-line error
/// with exit status 125, and the test fails with it: the emulator tests never pass without
/// emulating anything.
fn available() -> bool {
    let tmp = tempfile::tempdir().unwrap();
    let out = emulate(tmp.path()).args(["--", "true"]).output().unwrap();
    if out.status.success() {
        return true;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("refused a user namespace") || err.contains("seccomp"),
        "{err}"
    );
    panic!(
        "nrt emulate cannot run here (user namespaces and seccomp user notification are required): {err}"
    );
}

/// stdout and stderr of a run that exits with `code`.
fn run(tmp: &Path, args: &[&str], code: i32) -> (String, String) {
    let out = emulate(tmp).args(args).output().unwrap();
    let (o, e) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(code), "nrt emulate {args:?}: {e}");
    (o, e)
}

#[test]
fn program_sees_the_device_files_and_sysfs() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = run(
        tmp.path(),
        &[
            "--",
            "/bin/sh",
            "-c",
            "ls /dev/neuron0 && cat /sys/module/neuron/version",
        ],
        0,
    );
    assert_eq!(out, "/dev/neuron0\n2.24.7.0\n");
    assert!(
        err.contains("nrt emulate: /bin/sh exited with status 0; the emulator's accounting:"),
        "{err}"
    );
    assert!(err.contains("nrt-emu: 0 ioctls served (0 failed)"), "{err}");
    // Nothing is left on the host: the staging directory is gone.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn devices_instance_and_the_rest_of_dev_and_sys() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let script = "ls /dev | grep '^neuron'; ls /sys/class/neuron_device; \
         cat /sys/class/neuron_device/neuron2/core_count; echo; \
         cat /sys/class/neuron_device/neuron0/info/architecture/instance_type; \
         echo hi > /dev/null && head -c 4 /dev/zero | od -An -tx1; \
         test -e /sys/class/net/lo && test -d /sys/module/kernel && test -d /dev/pts && echo rest-ok; \
         readlink /dev/fd; grep '^Seccomp:' /proc/self/status; sh -c \"grep '^Seccomp:' /proc/self/status\"";
    let (out, _) = run(
        tmp.path(),
        &[
            "--instance",
            "trn2",
            "--devices",
            "3",
            "--",
            "sh",
            "-c",
            script,
        ],
        0,
    );
    assert_eq!(
        out,
        "neuron0\nneuron1\nneuron2\n\
         neuron0\nneuron1\nneuron2\n\
         8\n\
         Trn2\n \
         00 00 00 00\n\
         rest-ok\n\
         /proc/self/fd\n\
         Seccomp:\t2\n\
         Seccomp:\t2\n"
    );
}

#[test]
fn exit_status_is_the_programs() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (_, err) = run(tmp.path(), &["--", "sh", "-c", "exit 7"], 7);
    assert!(err.contains("exited with status 7"), "{err}");
    // Killed by a signal: 128 + the signal, as shells report it.
    let (_, err) = run(tmp.path(), &["--", "sh", "-c", "kill -TERM $$"], 143);
    assert!(err.contains("was killed by signal 15"), "{err}");
    // The options before `--` are nrt's, everything after it the program's.
    let (out, _) = run(
        tmp.path(),
        &[
            "--devices",
            "2",
            "--",
            "sh",
            "-c",
            "echo \"$0 $1\"",
            "--devices",
            "x",
        ],
        0,
    );
    assert_eq!(out, "--devices x\n");
    // Without `--`, the first word not an option of nrt's starts the program.
    let (out, _) = run(tmp.path(), &["echo", "-n", "plain"], 0);
    assert_eq!(out, "plain");
}

#[test]
fn report_file_holds_the_accounting() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("report.txt");
    let (_, err) = run(
        tmp.path(),
        &["--report", report.to_str().unwrap(), "--", "true"],
        0,
    );
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        text.starts_with("nrt-emu: 0 ioctls served (0 failed), 0 launches (0 failed)\n"),
        "{text}"
    );
    assert!(
        text.contains("held: 0 bytes in 0 allocations, 0 reserved cores, 0 attached processes"),
        "{text}"
    );
    assert!(err.ends_with(&text), "{err}");
}

#[test]
fn a_process_that_exits_without_closing_its_device_is_detached() {
    if !available() {
        return;
    }
    // The program's exit closes the fd without a `close` call the emulator sees; the hang-up
    // of the listener must still flush the process.
    for _ in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let (_, err) = run(
            tmp.path(),
            &["--", "sh", "-c", "exec 3<>/dev/neuron0; true"],
            0,
        );
        assert!(
            err.contains("held: 0 bytes in 0 allocations, 0 reserved cores, 0 attached processes"),
            "{err}"
        );
    }
}

/// A one-line error with `code` and `needle`, nothing else on stderr or stdout.
fn fails_one_line(args: &[&str], code: i32, needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = run(tmp.path(), args, code);
    assert_eq!(out, "");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "{err:?} lacks {needle:?}");
    // Nothing was set up: no staging directory left.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn a_program_that_cannot_run_is_one_clear_line() {
    fails_one_line(
        &["--", "no-such-program-nrt-test"],
        127,
        "error: emulate: cannot run no-such-program-nrt-test: not found in PATH",
    );
    fails_one_line(
        &["--", "/no/such/dir/prog"],
        127,
        "error: emulate: cannot run /no/such/dir/prog: No such file or directory",
    );
    let dir = tempfile::tempdir().unwrap();
    let (data, garbage) = (dir.path().join("data"), dir.path().join("garbage"));
    std::fs::write(&data, "not a program\n").unwrap();
    std::fs::write(&garbage, [0u8; 64]).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = data.to_str().unwrap();
    fails_one_line(
        &["--", data],
        126,
        &format!("error: emulate: cannot run {data}: not an executable file"),
    );
    if !available() {
        return;
    }
    // Found and executable, but the kernel cannot execute it: the exec fails in the child.
    let garbage = garbage.to_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = run(tmp.path(), &["--", garbage], 126);
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!("error: emulate: cannot run {garbage}: Exec format error (os error 8)\n")
    );
}

#[test]
fn usage_errors() {
    fails_one_line(&[], 2, "<PROGRAM>");
    fails_one_line(
        &["--fail-ioctl", "0", "--", "true"],
        2,
        "is not an ioctl ordinal",
    );
    fails_one_line(
        &["--fail-ioctl", "3:EWHAT", "--", "true"],
        2,
        "is not an errno",
    );
    fails_one_line(&["--devices", "0", "--", "true"], 2, "--devices");
    fails_one_line(&["--instance", "inf1", "--", "true"], 2, "--instance");
}

/// Under `nrt emulate`, a second `nrt emulate` cannot install its own filter (the kernel
/// allows one listener per filter chain): it says exactly that.
#[test]
fn nested_emulation_says_why_it_cannot_run() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let nrt_bin = env!("CARGO_BIN_EXE_nrt");
    let (_, err) = run(tmp.path(), &["--", nrt_bin, "emulate", "--", "true"], 125);
    assert!(
        err.contains(
            "error: emulate: installing the seccomp filter in the program's process: Device or resource busy (os error 16); a seccomp filter with a listener is already installed"
        ),
        "{err}"
    );
    assert!(err.contains("exited with status 125"), "{err}");
}

/// `--fail-ioctl N:ERRNO` fails exactly the N-th driver ioctl, with that errno; the others
/// are served (two COMPATIBLE_VERSION requests from Python, when there is a python3).
#[test]
fn fail_ioctl_fails_exactly_the_chosen_ioctl() {
    if !available() {
        return;
    }
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("import fcntl")
        .output()
        .map_or(true, |o| !o.status.success())
    {
        eprintln!("SKIPPED: no python3 with fcntl");
        return;
    }
    let script = "import fcntl, os\n\
        fd = os.open('/dev/neuron0', os.O_RDWR)\n\
        for _ in range(3):\n\
        \x20   try:\n\
        \x20       print('ok', fcntl.ioctl(fd, 0x40084e5d, bytearray(8), True))\n\
        \x20   except OSError as e:\n\
        \x20       print('errno', e.errno)\n\
        os.close(fd)\n";
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("report.txt");
    let (out, _) = run(
        tmp.path(),
        &[
            "--fail-ioctl",
            "2:ENOMEM",
            "--report",
            report.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            script,
        ],
        0,
    );
    assert_eq!(out, "ok 0\nerrno 12\nok 0\n");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        text.starts_with("nrt-emu: 3 ioctls served (1 failed), 0 launches (0 failed)\n"),
        "{text}"
    );
    assert!(text.contains("COMPATIBLE_VERSION"), "{text}");
    let (out, _) = run(
        tmp.path(),
        &["--fail-ioctl", "1", "--", "python3", "-c", script],
        0,
    );
    assert_eq!(out, format!("errno {}\nok 0\nok 0\n", 5));
}

/// SIGTERM sent to `nrt emulate` reaches the program (exit 143, as its own death by the
/// signal); processes the program leaves behind are waited for.
#[test]
fn signals_are_forwarded_and_orphans_waited_for() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ready = tmp.path().join("ready");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nrt"))
        .env("TMPDIR", tmp.path())
        .args(["emulate", "--", "sh", "-c"])
        .arg(format!("touch {} && exec sleep 30", ready.display()))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !ready.exists() {
        assert!(start.elapsed().as_secs() < 20, "the program never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill with our child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("sh was killed by signal 15"), "{err}");
    assert!(start.elapsed().as_secs() < 20);

    // The shell exits at once; its background child writes a file 300 ms later, and
    // nrt emulate returns only after that.
    let late = tmp.path().join("late");
    let script = format!("(sleep 0.3; echo late > {}) & exit 4", late.display());
    run(tmp.path(), &["--", "sh", "-c", &script], 4);
    assert_eq!(std::fs::read_to_string(&late).unwrap(), "late\n");
}

#[test]
fn help_lists_emulate() {
    let s = common::stdout_of(nrt().arg("--help"));
    assert!(s.contains("  emulate "), "{s}");
    let s = common::stdout_of(nrt().args(["emulate", "--help"]));
    for want in [
        "Usage: nrt emulate [OPTIONS] <PROGRAM>...",
        "--instance <INSTANCE>",
        "--devices <N>",
        "--fail-ioctl <N[:ERRNO]>",
        "--report <FILE>",
    ] {
        assert!(s.contains(want), "{want} missing from\n{s}");
    }
}

/// The Linux backend end to end: `nrt run --backend linux` of the MLP spec under
/// `nrt emulate` writes the same output bytes as the simulator backend, with one launch, no
/// failed ioctl, and nothing held by the emulator once it has exited.
#[test]
fn linux_backend_under_emulation_matches_the_simulator() {
    if !available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (sim, linux, report) = (
        tmp.path().join("sim"),
        tmp.path().join("linux"),
        tmp.path().join("report.txt"),
    );
    let spec = example("mlp.toml");
    nrt()
        .args(["run", "--backend", "sim", &spec, "-o"])
        .arg(&sim)
        .assert()
        .success();
    let staging = tempfile::tempdir().unwrap();
    let (out, err) = run(
        staging.path(),
        &[
            "--report",
            report.to_str().unwrap(),
            "--",
            env!("CARGO_BIN_EXE_nrt"),
            "run",
            "--backend",
            "linux",
            &spec,
            "-o",
            linux.to_str().unwrap(),
        ],
        0,
    );
    assert!(
        out.contains("backend    linux: /dev/neuron*, model on logical core 0"),
        "{out}"
    );
    let want = std::fs::read(sim.join("y_t.npy")).unwrap();
    let got = std::fs::read(linux.join("y_t.npy")).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "y_t.npy differs between the backends");
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.contains("(0 failed), 1 launches (0 failed)"), "{text}");
    assert!(
        text.contains("held: 0 bytes in 0 allocations, 0 reserved cores, 0 attached processes"),
        "{text}"
    );
    assert!(err.ends_with(&text), "{err}");
}
