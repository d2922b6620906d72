//! Arbitrary templates, output sizes and variable values → the core-dump path templater, plus
//! the enable rule, the directory-template choice and the helper's argv.
//!
//! Asserted (the templater's contract): nothing is written past `out.len()` (guard bytes stay
//! intact), the result is NUL-terminated at the returned length, which is below the capacity
//! (0 for an empty buffer).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use nrt_core::coredump::{
    DEFAULT_LOCAL_DIR_TEMPLATE, DIR_CAPACITY, MAX_ARGV, PathVariables, dumps_enabled, format_path,
    local_dir_template, report_argv,
};

#[derive(Arbitrary, Debug)]
struct Input {
    template: Option<Vec<u8>>,
    cap: u16,
    pid: String,
    tid: String,
    log_id: String,
    cluster_id: String,
    datetime: String,
    instance_id: String,
    s3: Option<String>,
    helper_executable: bool,
}

const GUARD: usize = 32;

fuzz_target!(|input: Input| {
    let vars = PathVariables {
        pid: &input.pid,
        tid: &input.tid,
        log_id: &input.log_id,
        cluster_id: &input.cluster_id,
        datetime: &input.datetime,
        instance_id: &input.instance_id,
    };
    let cap = usize::from(input.cap) % (DIR_CAPACITY + 2);
    let mut buf = vec![0xEEu8; cap + GUARD];
    let n = format_path(input.template.as_deref(), &mut buf[..cap], &vars);
    if cap == 0 {
        assert_eq!(n, 0);
    } else {
        assert!(n < cap, "length {n} for capacity {cap}");
        assert_eq!(buf[n], 0, "not NUL-terminated at {n}");
    }
    assert!(
        buf[cap..].iter().all(|&b| b == 0xEE),
        "wrote past the {cap}-byte buffer"
    );
    if let Some(t) = &input.template {
        // Without '%' and NUL, a template that fits is copied verbatim.
        if !t.contains(&b'%') && !t.contains(&0) && t.len() < cap {
            assert_eq!(&buf[..n], &t[..], "plain template not copied verbatim");
        }
    }

    let path = String::from_utf8_lossy(&buf[..n]).into_owned();
    let local = Some(path.as_str()).filter(|_| input.template.is_some());
    let _ = dumps_enabled(local, input.s3.as_deref(), input.helper_executable);
    let dir = local_dir_template(local);
    if local.is_none_or(str::is_empty) {
        assert_eq!(dir, DEFAULT_LOCAL_DIR_TEMPLATE);
    }
    let argv = report_argv("/helper", &vars, dir, input.s3.as_deref(), "file");
    assert!(argv.len() <= MAX_ARGV);
    assert_eq!(
        argv.last().copied(),
        Some("file"),
        "argv truncated: {argv:?}"
    );
});
