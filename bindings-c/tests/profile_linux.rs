//! On the Linux backend (which cannot execute) device profiles are unsupported: the profile
//! calls return `NRT_FAILURE` with one log line naming the function and why, and inspect
//! capture with device profiles is refused; the system trace still works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::{CStr, c_char, c_void};
use std::ptr::null_mut;

#[test]
fn profiles_are_unsupported_on_the_linux_backend_and_the_system_trace_works() {
    let log = std::env::temp_dir().join(format!("nrt-capi-linux-{}.log", std::process::id()));
    let log_c = std::ffi::CString::new(log.to_str().unwrap()).unwrap();
    // SAFETY: this test binary runs this single test; nothing else reads the environment
    // concurrently.
    unsafe {
        std::env::set_var("NEURON_RT_BACKEND", "linux");
        std::env::set_var("NEURON_RT_LOG_LEVEL", "ERROR");
    }
    // The backend is chosen by nrt_init, which then fails here unless a Neuron device exists.
    // SAFETY: NULL version strings are allowed.
    let st = unsafe { nrt::nrt_init(1, std::ptr::null(), std::ptr::null()) };
    if st == 0 {
        eprintln!("SKIPPED: a Neuron device is present; this test needs its absence");
        nrt::nrt_close();
        return;
    }
    let file = c"/tmp/never-written.json";
    // The log lines of one call: stderr goes to a file meanwhile.
    // SAFETY: plain descriptor operations on a file this test owns; fd 2 is restored.
    let (saved, fd) = unsafe {
        let fd = libc::open(
            log_c.as_ptr(),
            libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY,
            0o600,
        );
        assert!(fd >= 0);
        let saved = libc::dup(2);
        libc::dup2(fd, 2);
        (saved, fd)
    };
    // SAFETY: a NUL-terminated file name; the model pointer is never dereferenced.
    let st = unsafe { nrt::profile::nrt_profile_start(0x10 as *mut c_void, file.as_ptr()) };
    // SAFETY: as above.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
        libc::close(fd);
    }
    assert_eq!(st, 1, "NRT_FAILURE");
    let lines = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(
            "NRT:nrt_profile_start nrt_profile_start is not supported by nrt-rs on \
                           this backend"
        ) && lines[0].contains("only the simulator backend"),
        "{}",
        lines[0]
    );
    let mut opts: *mut c_void = null_mut();
    // SAFETY: a valid out-pointer.
    let st = unsafe { nrt::profile::nrt_profile_continuous_options_allocate(&mut opts) };
    assert_eq!(st, 0);
    assert_eq!(nrt::profile::nrt_profile_continuous_start(opts), 1);
    assert_eq!(nrt::profile::nrt_profile_continuous_options_free(opts), 0);
    // Inspect: the defaults include device profiles (refused); the system profile alone works.
    assert_eq!(nrt::inspect::nrt_inspect_begin_with_options(null_mut()), 1);
    let mut cfg: *mut c_void = null_mut();
    // SAFETY: valid out-pointer and strings.
    unsafe {
        assert_eq!(nrt::inspect::nrt_inspect_config_allocate(&mut cfg), 0);
        assert_eq!(
            nrt::inspect::nrt_inspect_config_set_activity(cfg, c"device_profile".as_ptr(), false),
            0
        );
        let dir = std::env::temp_dir().join(format!("nrt-capi-linux-{}", std::process::id()));
        let dir = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        assert_eq!(
            nrt::inspect::nrt_inspect_config_set_output_dir(cfg, dir.as_ptr()),
            0
        );
    }
    assert_eq!(nrt::inspect::nrt_inspect_begin_with_options(cfg), 0);
    assert_eq!(nrt::inspect::nrt_inspect_stop(), 0);
    assert_eq!(nrt::inspect::nrt_inspect_config_free(cfg), 0);
    // The system trace: started, nothing happened, fetched empty.
    assert_eq!(nrt::sys_trace::nrt_sys_trace_start(null_mut()), 0);
    let mut buf: *mut c_char = null_mut();
    let mut size = 0usize;
    // SAFETY: valid out-pointers.
    let st = unsafe {
        nrt::sys_trace::nrt_sys_trace_fetch_events(&mut buf, &mut size, std::ptr::null())
    };
    assert_eq!(st, 0);
    // SAFETY: the library returned a NUL-terminated buffer.
    let text = unsafe { CStr::from_ptr(buf) }.to_str().unwrap().to_owned();
    assert_eq!(text, "{\"events\":[],\"dropped_events\":0}");
    assert_eq!(size, text.len());
    // SAFETY: the buffer came from nrt_sys_trace_fetch_events.
    unsafe { nrt::sys_trace::nrt_sys_trace_buffer_free(buf) };
    assert_eq!(nrt::sys_trace::nrt_sys_trace_stop(), 0);
    let _ = std::fs::remove_file(&log);
}
