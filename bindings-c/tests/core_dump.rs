//! The C library runs the core-dump helper when a load fails and dumps are enabled.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;

#[test]
fn a_failed_load_reports_through_the_core_dump_helper() {
    let dir = std::env::temp_dir().join(format!("nrt-capi-dump-{}", std::process::id()));
    let dumps = dir.join("dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let helper = dir.join("neuron-dump");
    let argv_file = dir.join("argv");
    std::fs::write(
        &helper,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done > {}\n",
            argv_file.display()
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
        std::env::set_var("NRT_CORE_DUMP_HELPER", &helper);
    }
    // SAFETY: NULL version strings are allowed.
    let status = unsafe { nrt::nrt_init(1, std::ptr::null(), std::ptr::null()) };
    assert_eq!(status, 0);
    let truncated = [0u8; 100];
    let mut model: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: a valid buffer and out-pointer.
    let status = unsafe {
        nrt::nrt_load(
            truncated.as_ptr().cast(),
            truncated.len(),
            -1,
            -1,
            &mut model,
        )
    };
    assert_eq!(status, 2, "NRT_INVALID");
    nrt::nrt_close();
    let argv = std::fs::read_to_string(&argv_file).expect("the helper ran");
    let args: Vec<&str> = argv.lines().collect();
    let pid = std::process::id().to_string();
    assert_eq!(args[0], "--pid");
    assert_eq!(args[1], pid);
    let i = args
        .iter()
        .position(|a| *a == "--local-output-dir")
        .unwrap();
    assert_eq!(args[i + 1], format!("{}/pid-{pid}", dumps.display()));
    assert!(!args.contains(&"--s3-output-prefix"));
    let f = args
        .iter()
        .position(|a| *a == "--runtime-generated")
        .unwrap();
    let report = std::fs::read_to_string(args[f + 1]).unwrap();
    assert!(
        report.starts_with("nrt_load: Invalid NEFF: the file has 100 bytes"),
        "{report}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
