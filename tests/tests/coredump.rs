//! Spec 002 §5: the core-dump path templater, the enable rule and the helper's argv.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::coredump::{
    DEFAULT_HELPER, DEFAULT_LOCAL_DIR_TEMPLATE, PathVariables, dumps_enabled, format_path,
    local_dir_template, report_argv,
};

const VARS: PathVariables<'static> = PathVariables {
    pid: "4242",
    tid: "4243",
    log_id: "7",
    cluster_id: "00000000deadbeef",
    datetime: "20261130-102400",
    instance_id: "i-0123456789abcdef0",
};

/// Expands into a buffer of `cap` bytes; returns the string and checks the NUL.
fn expand(template: &str, cap: usize) -> String {
    let mut out = vec![0xFFu8; cap + 8];
    let n = format_path(Some(template.as_bytes()), &mut out[..cap], &VARS);
    assert!(n < cap, "length {n} must leave room for the NUL in {cap}");
    assert_eq!(out[n], 0, "NUL-terminated");
    assert!(
        out[cap..].iter().all(|&b| b == 0xFF),
        "nothing written past the buffer"
    );
    String::from_utf8(out[..n].to_vec()).unwrap()
}

#[test]
fn templater_expands_each_token() {
    assert_eq!(expand("%p", 64), "4242");
    assert_eq!(expand("%t", 64), "4243");
    assert_eq!(expand("%l", 64), "7");
    assert_eq!(expand("%c", 64), "00000000deadbeef");
    assert_eq!(expand("%d", 64), "20261130-102400");
    assert_eq!(expand("%i", 64), "i-0123456789abcdef0");
    assert_eq!(
        expand("/dumps/%i/pid-%p-tid-%t/%l_%d_%c.bin", 256),
        "/dumps/i-0123456789abcdef0/pid-4242-tid-4243/7_20261130-102400_00000000deadbeef.bin"
    );
}

#[test]
fn templater_unknown_token_is_a_literal_percent() {
    assert_eq!(expand("a%xb", 64), "a%xb");
    assert_eq!(expand("%%p", 64), "%4242");
    assert_eq!(expand("100%", 64), "100%");
    assert_eq!(expand("%P%T", 64), "%P%T");
}

#[test]
fn templater_plain_text_stops_at_the_boundary() {
    assert_eq!(expand("abcdef", 4), "abc");
    assert_eq!(expand("abc", 4), "abc");
    assert_eq!(expand("", 4), "");
    assert_eq!(expand("abc", 1), "");
}

#[test]
fn templater_truncation_exactly_at_the_boundary() {
    // "x" + "4242" = 5 chars: fits in 6 bytes (5 + NUL).
    assert_eq!(expand("x%p", 6), "x4242");
    // In 5 bytes the expansion no longer fits: snprintf writes what fits and expansion stops.
    assert_eq!(expand("x%py", 5), "x424");
    assert_eq!(expand("x%py", 6), "x4242");
    assert_eq!(expand("x%py", 7), "x4242y");
    // A token after the boundary is not expanded at all.
    assert_eq!(expand("abc%p", 4), "abc");
    // Stop cleanly: nothing after a truncated expansion.
    assert_eq!(expand("%p%t", 7), "424242");
}

#[test]
fn templater_handles_null_template_and_empty_buffer() {
    let mut out = [0xFFu8; 8];
    assert_eq!(format_path(None, &mut out, &VARS), 0);
    assert_eq!(out[0], 0);
    let mut empty: [u8; 0] = [];
    assert_eq!(format_path(Some(b"%p"), &mut empty, &VARS), 0);
    // An embedded NUL ends the template, as it would end a C string.
    let mut out = [0xFFu8; 16];
    let n = format_path(Some(b"ab\0%p"), &mut out, &VARS);
    assert_eq!(&out[..=n], b"ab\0");
}

#[test]
fn enable_rule_needs_a_destination_and_the_helper() {
    assert!(!dumps_enabled(None, None, true));
    assert!(!dumps_enabled(Some(""), Some(""), true));
    assert!(dumps_enabled(Some("/tmp/d"), None, true));
    assert!(dumps_enabled(None, Some("s3://b/p"), true));
    assert!(!dumps_enabled(Some("/tmp/d"), Some("s3://b/p"), false));
    assert_eq!(DEFAULT_HELPER, "/opt/aws/neuron/bin/neuron-dump");
}

#[test]
fn default_directory_template_is_datetime_and_cluster_id() {
    assert_eq!(
        DEFAULT_LOCAL_DIR_TEMPLATE,
        "/tmp/neuron-core-dump/dt-%d-cid-%c"
    );
    assert_eq!(local_dir_template(None), DEFAULT_LOCAL_DIR_TEMPLATE);
    assert_eq!(local_dir_template(Some("")), DEFAULT_LOCAL_DIR_TEMPLATE);
    assert_eq!(local_dir_template(Some("/d/%p")), "/d/%p");
    assert_eq!(
        expand(DEFAULT_LOCAL_DIR_TEMPLATE, 4096),
        "/tmp/neuron-core-dump/dt-20261130-102400-cid-00000000deadbeef"
    );
}

#[test]
fn argv_without_s3_prefix() {
    let argv = report_argv("/h/neuron-dump", &VARS, "/d", None, "/f/log.txt");
    assert_eq!(
        argv.as_slice(),
        &[
            "/h/neuron-dump",
            "--pid",
            "4242",
            "--tid",
            "4243",
            "--log-id",
            "7",
            "--instance-id",
            "i-0123456789abcdef0",
            "--local-output-dir",
            "/d",
            "--cluster-id",
            "00000000deadbeef",
            "--date-time",
            "20261130-102400",
            "--runtime-generated",
            "/f/log.txt",
        ]
    );
    // An empty prefix counts as unset.
    assert_eq!(report_argv("/h", &VARS, "/d", Some(""), "/f").len(), 17);
}

#[test]
fn argv_with_s3_prefix_shifts_later_flags_by_two() {
    let argv = report_argv(
        "/h/neuron-dump",
        &VARS,
        "/d",
        Some("s3://bucket/p"),
        "/f/log.txt",
    );
    assert_eq!(argv.len(), 19);
    assert_eq!(
        &argv[9..13],
        &[
            "--local-output-dir",
            "/d",
            "--s3-output-prefix",
            "s3://bucket/p"
        ]
    );
    assert_eq!(argv[13], "--cluster-id");
    assert_eq!(argv[15], "--date-time");
    assert_eq!(&argv[17..], &["--runtime-generated", "/f/log.txt"]);
}
