//! Core-dump path templating, the enable rule and the helper's argv.
//!
//! The fork/exec forwarder itself needs an OS and lives in the std host crate; everything here
//! is pure and bounded.

/// Default location of the external dump helper.
pub const DEFAULT_HELPER: &str = "/opt/aws/neuron/bin/neuron-dump";

/// Directory template used when only an S3 prefix is configured: datetime and cluster id.
pub const DEFAULT_LOCAL_DIR_TEMPLATE: &str = "/tmp/neuron-core-dump/dt-%d-cid-%c";

/// Capacity of an expanded directory path (bytes, NUL included).
pub const DIR_CAPACITY: usize = 0x1000;

/// Capacity of an expanded file name (bytes, NUL included).
pub const FILE_NAME_CAPACITY: usize = 0xFF;

/// The per-dump values the `%` tokens expand to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathVariables<'a> {
    /// `%p`: process id.
    pub pid: &'a str,
    /// `%t`: thread id.
    pub tid: &'a str,
    /// `%l`: per-process dump counter.
    pub log_id: &'a str,
    /// `%c`: collectives cluster id (`%016x`), or `none`.
    pub cluster_id: &'a str,
    /// `%d`: date and time, `%Y%m%d-%H%M%S`.
    pub datetime: &'a str,
    /// `%i`: instance id.
    pub instance_id: &'a str,
}

/// Expands `template` into `out` and NUL-terminates it; returns the length written (without
/// the NUL).
///
/// Tokens: `%p` pid, `%t` tid, `%l` log id, `%c` cluster id, `%d` datetime, `%i` instance id.
/// Any other `%X` (and a trailing `%`) writes a literal `%` and continues with `X`. The output is
/// bounded by `out.len()` and always NUL-terminated (unless `out` is empty): plain characters
/// stop at `out.len() - 1`; an expansion that does not fit is written truncated, like
/// `snprintf`, and expansion stops there. A `None` template yields the empty string.
pub fn format_path(template: Option<&[u8]>, out: &mut [u8], vars: &PathVariables<'_>) -> usize {
    let Some(last) = out.len().checked_sub(1) else {
        return 0;
    };
    let Some(template) = template else {
        if let Some(b) = out.get_mut(0) {
            *b = 0;
        }
        return 0;
    };
    // Stop at an embedded NUL, as the C string would.
    let template = match template.iter().position(|&b| b == 0) {
        Some(n) => template.get(..n).unwrap_or(&[]),
        None => template,
    };
    let mut o = 0usize;
    let mut i = 0usize;
    while let Some(&ch) = template.get(i) {
        if o >= last {
            break;
        }
        if ch == b'%' {
            let src = match template.get(i + 1) {
                Some(b'p') => Some(vars.pid),
                Some(b't') => Some(vars.tid),
                Some(b'l') => Some(vars.log_id),
                Some(b'c') => Some(vars.cluster_id),
                Some(b'd') => Some(vars.datetime),
                Some(b'i') => Some(vars.instance_id),
                _ => None,
            };
            let Some(src) = src else {
                if let Some(b) = out.get_mut(o) {
                    *b = b'%';
                }
                o += 1;
                i += 1;
                continue;
            };
            let room = out.len() - o; // > 1 here
            let n = src.len();
            if room <= n {
                // snprintf semantics: write what fits, NUL-terminate, stop.
                let fit = room - 1;
                if let (Some(d), Some(s)) = (out.get_mut(o..o + fit), src.as_bytes().get(..fit)) {
                    d.copy_from_slice(s);
                }
                if let Some(b) = out.get_mut(o + fit) {
                    *b = 0;
                }
                return o + fit;
            }
            if let Some(d) = out.get_mut(o..o + n) {
                d.copy_from_slice(src.as_bytes());
            }
            o += n;
            i += 2;
        } else {
            if let Some(b) = out.get_mut(o) {
                *b = ch;
            }
            o += 1;
            i += 1;
        }
    }
    if let Some(b) = out.get_mut(o) {
        *b = 0;
    }
    o
}

/// The enable rule: a local directory or an S3 prefix is configured, and the helper is an
/// executable file.
pub fn dumps_enabled(
    local_dir: Option<&str>,
    s3_prefix: Option<&str>,
    helper_executable: bool,
) -> bool {
    let configured =
        local_dir.is_some_and(|s| !s.is_empty()) || s3_prefix.is_some_and(|s| !s.is_empty());
    configured && helper_executable
}

/// The directory template in force: the configured one, or [`DEFAULT_LOCAL_DIR_TEMPLATE`].
pub fn local_dir_template(local_dir: Option<&str>) -> &str {
    match local_dir {
        Some(d) if !d.is_empty() => d,
        _ => DEFAULT_LOCAL_DIR_TEMPLATE,
    }
}

/// Most arguments [`report_argv`] produces.
pub const MAX_ARGV: usize = 20;

/// The helper's argv for reporting a runtime-generated file, built by appending: the
/// `--s3-output-prefix` pair is present only when a prefix is set, shifting everything after it.
pub fn report_argv<'a>(
    helper: &'a str,
    vars: &PathVariables<'a>,
    local_dir: &'a str,
    s3_prefix: Option<&'a str>,
    file: &'a str,
) -> heapless::Vec<&'a str, MAX_ARGV> {
    let mut argv: heapless::Vec<&'a str, MAX_ARGV> = heapless::Vec::new();
    let mut push = |a: &'a str| {
        // MAX_ARGV covers the longest argv built below.
        let _ = argv.push(a);
    };
    push(helper);
    push("--pid");
    push(vars.pid);
    push("--tid");
    push(vars.tid);
    push("--log-id");
    push(vars.log_id);
    push("--instance-id");
    push(vars.instance_id);
    push("--local-output-dir");
    push(local_dir);
    if let Some(p) = s3_prefix.filter(|p| !p.is_empty()) {
        push("--s3-output-prefix");
        push(p);
    }
    push("--cluster-id");
    push(vars.cluster_id);
    push("--date-time");
    push(vars.datetime);
    push("--runtime-generated");
    push(file);
    argv
}
