//! The core-dump forwarder: path variables, template expansion and the `neuron-dump` helper.
//!
//! The templating, the enable rule and the helper's argv are pure and live in
//! [`nrt_core::coredump`]; this module supplies what needs the OS (process and thread ids, the
//! clock, `access`, `realpath`, fork/exec/wait).

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use nrt_core::Config;
use nrt_core::coredump::{
    DEFAULT_HELPER, DIR_CAPACITY, FILE_NAME_CAPACITY, PathVariables, dumps_enabled, format_path,
    local_dir_template, report_argv,
};

use crate::{sys, time};

/// The per-process dump counter behind `%l`.
static LOG_ID: AtomicU64 = AtomicU64::new(0);

/// Where EC2 (Nitro) exposes the instance id.
const INSTANCE_ID_FILE: &str = "/sys/devices/virtual/dmi/id/board_asset_tag";

/// The `%i` value when no instance id can be found.
pub const UNKNOWN_INSTANCE_ID: &str = "unknown";

/// The next `%l` value: 1 for the first dump of the process, then 2, 3, ... Distinct across
/// concurrent callers.
pub fn next_log_id() -> u64 {
    LOG_ID.fetch_add(1, Ordering::Relaxed).wrapping_add(1)
}

/// The EC2 instance id from DMI (`i-...`), or [`UNKNOWN_INSTANCE_ID`] off EC2.
pub fn detect_instance_id() -> String {
    std::fs::read_to_string(INSTANCE_ID_FILE)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| s.starts_with("i-"))
        .unwrap_or_else(|| UNKNOWN_INSTANCE_ID.to_owned())
}

/// The owned values of one dump's `%` tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpVariables {
    /// `%p`: process id.
    pub pid: String,
    /// `%t`: id of the thread reporting the dump.
    pub tid: String,
    /// `%l`: per-process dump counter.
    pub log_id: String,
    /// `%c`: collectives cluster id as 16 hex digits, or `none`.
    pub cluster_id: String,
    /// `%d`: UTC date and time, `%Y%m%d-%H%M%S`.
    pub datetime: String,
    /// `%i`: instance id.
    pub instance_id: String,
}

impl DumpVariables {
    /// Borrowed form for [`nrt_core::coredump`].
    pub fn as_path_variables(&self) -> PathVariables<'_> {
        PathVariables {
            pid: &self.pid,
            tid: &self.tid,
            log_id: &self.log_id,
            cluster_id: &self.cluster_id,
            datetime: &self.datetime,
            instance_id: &self.instance_id,
        }
    }
}

/// Expands `template` with `format_path` into a buffer of `capacity` bytes (NUL included).
fn expand_bounded(template: &str, vars: &DumpVariables, capacity: usize) -> String {
    let mut buf = vec![0u8; capacity];
    let n = format_path(
        Some(template.as_bytes()),
        &mut buf,
        &vars.as_path_variables(),
    );
    buf.truncate(n);
    match String::from_utf8(buf) {
        Ok(s) => s,
        // Truncation can split a multi-byte character; drop the partial one.
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    }
}

/// Expands a directory template (bounded by [`DIR_CAPACITY`]).
pub fn expand(template: &str, vars: &DumpVariables) -> String {
    expand_bounded(template, vars, DIR_CAPACITY)
}

/// Expands a file-name template (bounded by [`FILE_NAME_CAPACITY`]).
pub fn expand_file_name(template: &str, vars: &DumpVariables) -> String {
    expand_bounded(template, vars, FILE_NAME_CAPACITY)
}

/// The core-dump forwarder of one runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreDumper {
    /// The external helper (default [`DEFAULT_HELPER`]).
    pub helper: PathBuf,
    /// `NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY` template, if set.
    pub local_dir: Option<String>,
    /// `NEURON_RT_S3_CORE_DUMP_PREFIX`, if set.
    pub s3_prefix: Option<String>,
    /// The `%i` value.
    pub instance_id: String,
    /// The collectives cluster id behind `%c`, if the process is in a cluster.
    pub cluster_id: Option<u64>,
}

impl CoreDumper {
    /// A forwarder for `config`'s dump directory and S3 prefix, with the default helper, the
    /// detected instance id ([`detect_instance_id`]) and no cluster id.
    pub fn from_config(config: &Config) -> Self {
        Self {
            helper: PathBuf::from(DEFAULT_HELPER),
            local_dir: config.local_core_dump_directory().map(str::to_owned),
            s3_prefix: config.s3_core_dump_prefix().map(str::to_owned),
            instance_id: detect_instance_id(),
            cluster_id: None,
        }
    }

    /// Uses `helper` instead of [`DEFAULT_HELPER`].
    pub fn with_helper(mut self, helper: impl Into<PathBuf>) -> Self {
        self.helper = helper.into();
        self
    }

    /// Sets the instance id.
    pub fn with_instance_id(mut self, instance_id: impl Into<String>) -> Self {
        self.instance_id = instance_id.into();
        self
    }

    /// Sets the cluster id.
    pub fn with_cluster_id(mut self, cluster_id: Option<u64>) -> Self {
        self.cluster_id = cluster_id;
        self
    }

    /// Whether the helper is a regular file that passes `access(X_OK)`. (A directory also
    /// passes `access(X_OK)` but cannot be executed.)
    pub fn helper_is_executable(&self) -> bool {
        std::fs::metadata(&self.helper).is_ok_and(|m| m.is_file())
            && sys::access_executable(&self.helper)
    }

    /// The enable rule: a local directory or an S3 prefix is configured, and the helper is
    /// executable.
    pub fn enabled(&self) -> bool {
        dumps_enabled(
            self.local_dir.as_deref(),
            self.s3_prefix.as_deref(),
            self.helper_is_executable(),
        )
    }

    /// Fresh variables for one dump: this process and thread, the next log id, the current
    /// UTC time.
    pub fn path_variables(&self) -> DumpVariables {
        DumpVariables {
            pid: std::process::id().to_string(),
            tid: sys::gettid().to_string(),
            log_id: next_log_id().to_string(),
            cluster_id: match self.cluster_id {
                Some(id) => format!("{id:016x}"),
                None => "none".to_owned(),
            },
            datetime: time::dump_datetime(SystemTime::now()),
            instance_id: self.instance_id.clone(),
        }
    }

    /// The expanded local output directory: the configured template, or the default one when
    /// only an S3 prefix is set.
    pub fn local_output_dir(&self, vars: &DumpVariables) -> String {
        expand(local_dir_template(self.local_dir.as_deref()), vars)
    }

    /// The helper's arguments (without argv\[0\]) for reporting `file`, which should already be
    /// canonical.
    pub fn report_args(&self, vars: &DumpVariables, local_dir: &str, file: &Path) -> Vec<OsString> {
        let helper = self.helper.to_string_lossy();
        let file_lossy = file.to_string_lossy();
        let argv = report_argv(
            &helper,
            &vars.as_path_variables(),
            local_dir,
            self.s3_prefix.as_deref(),
            &file_lossy,
        );
        let mut args: Vec<OsString> = argv.iter().skip(1).map(OsString::from).collect();
        // The file is the last argument; pass its exact bytes, even if not UTF-8.
        if let Some(last) = args.last_mut() {
            *last = file.as_os_str().to_owned();
        }
        args
    }

    /// Hands a runtime-generated file to the helper (`--runtime-generated`) and waits for it.
    ///
    /// Does nothing if dumps are disabled. Fails if `file` cannot be resolved ("Unable to find
    /// file: ..."), if the helper cannot be started, or if it exits unsuccessfully.
    pub fn report_generated_file(&self, file: &Path) -> io::Result<()> {
        if !self.enabled() {
            return Ok(());
        }
        let resolved = std::fs::canonicalize(file).map_err(|e| {
            io::Error::new(e.kind(), format!("Unable to find file: {}", file.display()))
        })?;
        let vars = self.path_variables();
        let local_dir = self.local_output_dir(&vars);
        let args = self.report_args(&vars, &local_dir, &resolved);
        let status = Command::new(&self.helper)
            .args(&args)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("Unable to run {}: {e}", self.helper.display()),
                )
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "{} exited with {status}",
                self.helper.display()
            )))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::collections::HashSet;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    use nrt_core::config::vars;

    use super::*;

    /// A unique temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let nanos = SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = std::env::temp_dir().join(format!(
                "nrt-host-{}-{}-{nanos}-{name}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Writes a fake helper that appends each argument, one per line, to `args`, then exits
    /// with `code`.
    fn fake_helper(dir: &TempDir, mode: u32, code: i32) -> (PathBuf, PathBuf) {
        let helper = dir.0.join("neuron-dump");
        let args = dir.0.join("args");
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '{}'\nexit {code}\n",
            args.display()
        );
        std::fs::write(&helper, script).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(mode)).unwrap();
        (helper, args)
    }

    /// `report_generated_file`, retrying while another test thread's fork briefly holds the
    /// freshly written script open for writing (ETXTBSY).
    fn report(d: &CoreDumper, file: &Path) -> io::Result<()> {
        for _ in 0..50 {
            match d.report_generated_file(file) {
                Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                r => return r,
            }
        }
        d.report_generated_file(file)
    }

    fn read_args(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn dumper(config: &[(&str, &str)], helper: &Path) -> CoreDumper {
        let config = Config::parse(&config).unwrap();
        CoreDumper::from_config(&config)
            .with_helper(helper)
            .with_instance_id("i-0123456789abcdef0")
    }

    fn is_datetime(s: &str) -> bool {
        s.len() == 15
            && s.bytes().enumerate().all(|(i, b)| {
                if i == 8 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            })
    }

    /// Runs the helper on a fresh file and checks the argv it received; returns it.
    fn check_report(s3: Option<&str>, cluster_id: Option<u64>) -> Vec<String> {
        let dir = TempDir::new("report");
        let (helper, args_file) = fake_helper(&dir, 0o755, 0);
        let file = dir.0.join("sub").join("nrt-error.log");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "log").unwrap();
        // Report it through a non-canonical path.
        let indirect = dir
            .0
            .join("sub")
            .join("..")
            .join("sub")
            .join("nrt-error.log");

        let local_template = format!("{}/dumps/p%p-l%l-c%c-i%i", dir.0.display());
        let mut config = vec![(vars::LOCAL_CORE_DUMP_DIRECTORY, local_template.as_str())];
        if let Some(s3) = s3 {
            config.push((vars::S3_CORE_DUMP_PREFIX, s3));
        }
        let d = dumper(&config, &helper).with_cluster_id(cluster_id);
        assert!(d.enabled());

        let before = time::dump_datetime(SystemTime::now());
        report(&d, &indirect).unwrap();
        let after = time::dump_datetime(SystemTime::now());
        let got = read_args(&args_file);

        let pid = std::process::id().to_string();
        let tid = sys::gettid().to_string();
        let cid = match cluster_id {
            Some(c) => format!("{c:016x}"),
            None => "none".to_owned(),
        };
        let log_id = got.get(5).cloned().unwrap_or_default();
        assert!(log_id.parse::<u64>().is_ok_and(|l| l > 0), "{got:?}");
        let datetime = got
            .get(got.len().saturating_sub(3))
            .cloned()
            .unwrap_or_default();
        assert!(is_datetime(&datetime), "{got:?}");
        assert!(before <= datetime && datetime <= after, "{got:?}");

        let local = format!(
            "{}/dumps/p{pid}-l{log_id}-c{cid}-ii-0123456789abcdef0",
            dir.0.display()
        );
        let resolved = std::fs::canonicalize(&file).unwrap();
        let mut want: Vec<String> = vec![
            "--pid".into(),
            pid,
            "--tid".into(),
            tid,
            "--log-id".into(),
            log_id,
            "--instance-id".into(),
            "i-0123456789abcdef0".into(),
            "--local-output-dir".into(),
            local,
        ];
        if let Some(s3) = s3 {
            want.extend(["--s3-output-prefix".into(), s3.into()]);
        }
        want.extend([
            "--cluster-id".into(),
            cid,
            "--date-time".into(),
            datetime,
            "--runtime-generated".into(),
            resolved.display().to_string(),
        ]);
        assert_eq!(got, want);
        got
    }

    #[test]
    fn report_without_s3_prefix_passes_exact_argv() {
        let got = check_report(None, None);
        assert_eq!(got.len(), 16);
        assert_eq!(got[10], "--cluster-id");
        assert!(!got.iter().any(|a| a == "--s3-output-prefix"));
    }

    #[test]
    fn report_with_s3_prefix_shifts_later_flags_by_two() {
        let got = check_report(Some("s3://bucket/prefix"), Some(0xabc));
        assert_eq!(got.len(), 18);
        assert_eq!(got[10], "--s3-output-prefix");
        assert_eq!(got[11], "s3://bucket/prefix");
        assert_eq!(got[12], "--cluster-id");
        assert_eq!(got[13], "0000000000000abc");
        assert_eq!(got[14], "--date-time");
        assert_eq!(got[16], "--runtime-generated");
    }

    #[test]
    fn s3_only_uses_the_default_local_dir_template() {
        let dir = TempDir::new("s3only");
        let (helper, _) = fake_helper(&dir, 0o755, 0);
        let d =
            dumper(&[(vars::S3_CORE_DUMP_PREFIX, "s3://b/p")], &helper).with_cluster_id(Some(1));
        assert!(d.enabled());
        let v = d.path_variables();
        assert_eq!(
            d.local_output_dir(&v),
            format!(
                "/tmp/neuron-core-dump/dt-{}-cid-0000000000000001",
                v.datetime
            )
        );
    }

    #[test]
    fn non_executable_helper_disables_dumps() {
        let dir = TempDir::new("noexec");
        let (helper, args_file) = fake_helper(&dir, 0o644, 0);
        let d = dumper(&[(vars::LOCAL_CORE_DUMP_DIRECTORY, "/tmp/x")], &helper);
        assert!(!d.helper_is_executable());
        assert!(!d.enabled());
        let file = dir.0.join("f");
        std::fs::write(&file, "x").unwrap();
        report(&d, &file).unwrap();
        assert!(!args_file.exists());
    }

    #[test]
    fn nothing_configured_disables_dumps() {
        let dir = TempDir::new("unconfigured");
        let (helper, args_file) = fake_helper(&dir, 0o755, 0);
        let d = dumper(&[], &helper);
        assert!(d.helper_is_executable());
        assert!(!d.enabled());
        let file = dir.0.join("f");
        std::fs::write(&file, "x").unwrap();
        report(&d, &file).unwrap();
        assert!(!args_file.exists());
    }

    #[test]
    fn missing_or_directory_helper_disables_dumps() {
        let dir = TempDir::new("nohelper");
        let d = dumper(&[(vars::LOCAL_CORE_DUMP_DIRECTORY, "/tmp/x")], &dir.0);
        assert!(!d.enabled(), "a directory is not a helper");
        let d = d.with_helper(dir.0.join("absent"));
        assert!(!d.enabled());
    }

    #[test]
    fn missing_file_is_reported_and_helper_not_run() {
        let dir = TempDir::new("nofile");
        let (helper, args_file) = fake_helper(&dir, 0o755, 0);
        let d = dumper(&[(vars::LOCAL_CORE_DUMP_DIRECTORY, "/tmp/x")], &helper);
        let missing = dir.0.join("missing.log");
        let err = report(&d, &missing).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            err.to_string(),
            format!("Unable to find file: {}", missing.display())
        );
        assert!(!args_file.exists());
    }

    #[test]
    fn failing_helper_is_an_error() {
        let dir = TempDir::new("fail");
        let (helper, args_file) = fake_helper(&dir, 0o755, 3);
        let d = dumper(&[(vars::LOCAL_CORE_DUMP_DIRECTORY, "/tmp/x")], &helper);
        let file = dir.0.join("f");
        std::fs::write(&file, "x").unwrap();
        let err = report(&d, &file).unwrap_err();
        assert!(err.to_string().contains("exited with"), "{err}");
        assert!(args_file.exists(), "the helper ran");
    }

    #[test]
    fn path_variables_have_the_expected_shapes() {
        let d = CoreDumper::from_config(&Config::default()).with_instance_id("i-x");
        assert_eq!(d.helper, Path::new(DEFAULT_HELPER));
        assert_eq!(d.local_dir, None);
        assert_eq!(d.s3_prefix, None);
        let v = d.path_variables();
        assert_eq!(v.pid, std::process::id().to_string());
        assert_eq!(v.tid, sys::gettid().to_string());
        assert_eq!(v.cluster_id, "none");
        assert!(is_datetime(&v.datetime), "{v:?}");
        assert_eq!(v.instance_id, "i-x");
        let w = d.path_variables();
        assert!(w.log_id.parse::<u64>().unwrap() > v.log_id.parse::<u64>().unwrap());
        let c = d.with_cluster_id(Some(u64::MAX)).path_variables();
        assert_eq!(c.cluster_id, "ffffffffffffffff");
    }

    #[test]
    fn concurrent_log_ids_are_distinct() {
        let threads: Vec<_> = (0..8)
            .map(|_| std::thread::spawn(|| (0..200).map(|_| next_log_id()).collect::<Vec<_>>()))
            .collect();
        let mut seen = HashSet::new();
        for t in threads {
            for id in t.join().unwrap() {
                assert!(id > 0);
                assert!(seen.insert(id), "duplicate log id {id}");
            }
        }
        assert_eq!(seen.len(), 1600);
    }

    #[test]
    fn expand_tokens_and_bounds() {
        let v = DumpVariables {
            pid: "12".into(),
            tid: "34".into(),
            log_id: "5".into(),
            cluster_id: "none".into(),
            datetime: "20000229-000000".into(),
            instance_id: "i-1".into(),
        };
        assert_eq!(
            expand("/d/%p/%t/%l/%c/%d/%i/%x%", &v),
            "/d/12/34/5/none/20000229-000000/i-1/%x%"
        );
        let long = "a".repeat(1000);
        assert_eq!(expand_file_name(&long, &v).len(), FILE_NAME_CAPACITY - 1);
        assert_eq!(expand(&"b".repeat(10_000), &v).len(), DIR_CAPACITY - 1);
        // A truncated multi-byte character is dropped, not mangled.
        let wide = format!("{}é", "a".repeat(FILE_NAME_CAPACITY - 2));
        assert_eq!(
            expand_file_name(&wide, &v),
            "a".repeat(FILE_NAME_CAPACITY - 2)
        );
    }

    #[test]
    fn instance_id_detection_never_fails() {
        let id = detect_instance_id();
        assert!(id == UNKNOWN_INSTANCE_ID || id.starts_with("i-"), "{id}");
    }
}
