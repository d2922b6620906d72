//! Core dumps: a failed load, tensor operation or execution writes the runtime's recent error
//! log and hands it to the `neuron-dump` helper; calls the guard refuses dump nothing; the
//! helper's path cannot be changed from the environment.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::c_void;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The argument lists of every helper run so far, one per line of `log`, arguments separated by
/// a tab.
fn runs(log: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// The runtime-generated file of a helper run.
fn report(args: &[String]) -> String {
    let f = args
        .iter()
        .position(|a| a == "--runtime-generated")
        .unwrap();
    std::fs::read_to_string(&args[f + 1]).unwrap()
}

#[test]
fn failures_write_the_error_log_and_run_the_helper() {
    let dir = std::env::temp_dir().join(format!("nrt-capi-dump-{}", std::process::id()));
    let dumps = dir.join("dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let helper = dir.join("neuron-dump");
    let log = dir.join("runs");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nIFS=\"$(printf '\\t')\"; echo \"$*\" >> {}\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: this test binary runs this single test; nothing else reads the environment
    // concurrently.
    unsafe {
        std::env::set_var("NEURON_RT_BACKEND", "sim");
        std::env::set_var("NEURON_RT_LOG_LEVEL", "QUIET");
        std::env::set_var(
            "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY",
            format!("{}/pid-%p", dumps.display()),
        );
        // Not an override: the helper's path is fixed.
        std::env::set_var("NRT_CORE_DUMP_HELPER", &helper);
    }
    // Before nrt_init the guard refuses the call: no dump.
    nrt::core_dump::set_helper_for_tests(Some(helper.clone()));
    let mut model: *mut c_void = std::ptr::null_mut();
    let truncated = [0u8; 100];
    // SAFETY: a valid buffer and out-pointer.
    let load = |model: &mut *mut c_void| unsafe {
        nrt::nrt_load(truncated.as_ptr().cast(), truncated.len(), -1, -1, model)
    };
    assert_eq!(load(&mut model), 13, "NRT_UNINITIALIZED");
    assert!(runs(&log).is_empty());

    // SAFETY: NULL version strings are allowed.
    let s = unsafe { nrt::nrt_init(1, std::ptr::null(), std::ptr::null()) };
    assert_eq!(s, 0);

    // With the fixed path (not installed here) dumps are disabled, whatever the environment says.
    nrt::core_dump::set_helper_for_tests(None);
    assert_eq!(load(&mut model), 2, "NRT_INVALID");
    assert!(runs(&log).is_empty());

    nrt::core_dump::set_helper_for_tests(Some(helper.clone()));
    assert_eq!(load(&mut model), 2, "NRT_INVALID");
    let r = runs(&log);
    assert_eq!(r.len(), 1);
    let pid = std::process::id().to_string();
    assert_eq!(r[0][0], "--pid");
    assert_eq!(r[0][1], pid);
    let i = r[0].iter().position(|a| a == "--local-output-dir").unwrap();
    assert_eq!(r[0][i + 1], format!("{}/pid-{pid}", dumps.display()));
    assert!(!r[0].iter().any(|a| a == "--s3-output-prefix"));
    let first = report(&r[0]);
    let lines: Vec<&str> = first.lines().collect();
    assert!(
        lines[0].starts_with("# nrt-rs error log: nrt_load failed with NRT_INVALID (2): Invalid NEFF: the file has 100 bytes"),
        "{first}"
    );
    // The error log holds the earlier failures too (logged at QUIET level all the same): the
    // refused call before init and the first failed load, then this one, last.
    assert!(lines.len() >= 4, "{first}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("NRT:nrt_load") && l.contains("ERROR"))
    );
    assert!(
        lines
            .last()
            .unwrap()
            .contains("Invalid NEFF: the file has 100 bytes"),
        "{first}"
    );
    let before = lines.len();

    // A failed tensor operation: reading past the end of a tensor.
    let mut t: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid name and out-pointer.
    let s = unsafe { nrt::nrt_tensor_allocate(1, 0, 64, c"t".as_ptr(), &mut t) };
    assert_eq!(s, 0);
    let mut buf = [0u8; 128];
    // SAFETY: `buf` is writable for 128 bytes.
    let s = unsafe { nrt::nrt_tensor_read(t, buf.as_mut_ptr().cast(), 0, 128) };
    assert_ne!(s, 0);
    let r = runs(&log);
    assert_eq!(r.len(), 2);
    let second = report(&r[1]);
    assert!(
        second.starts_with("# nrt-rs error log: nrt_tensor_read failed with "),
        "{second}"
    );
    assert!(second.lines().count() > before, "the log grows: {second}");
    assert!(
        second
            .lines()
            .last()
            .unwrap()
            .contains("NRT:nrt_tensor_read"),
        "{second}"
    );
    // Each dump has its own log id, so its own file.
    let (a, b) = (file_of(&r[0]), file_of(&r[1]));
    assert_ne!(a, b);
    // SAFETY: a tensor this test allocated.
    unsafe { nrt::nrt_tensor_free(&mut t) };
    nrt::nrt_close();

    // After close the guard refuses again: no dump.
    assert_eq!(load(&mut model), 13);
    assert_eq!(runs(&log).len(), 2);
    nrt::core_dump::set_helper_for_tests(None);
    let _ = std::fs::remove_dir_all(&dir);
}

fn file_of(args: &[String]) -> PathBuf {
    let f = args
        .iter()
        .position(|a| a == "--runtime-generated")
        .unwrap();
    PathBuf::from(&args[f + 1])
}
