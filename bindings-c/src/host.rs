//! The host of the C library: log lines in libnrt's style (`NRT:<function> <message>`) to the
//! console (raw writes to fd 2, safe in a forked child) or syslog, over the std platform
//! services (fork detection, per-thread registry rows, parallel staging).

use std::collections::VecDeque;
use std::ffi::CString;
use std::fmt::{self, Write as _};

use nrt_core::{Host, Level};
use nrt_host::StdPlatform;

/// Marks the calling thread as inside the exported function `name` until the guard drops (log
/// lines name it). The name is kept in a per-thread word of the host reached without
/// `__tls_get_addr` ([`nrt_host::tls`]): every exported call sets and restores it.
pub(crate) struct InCall(Option<&'static str>);

impl InCall {
    #[inline]
    pub(crate) fn enter(name: &'static str) -> Self {
        Self(nrt_host::tls::replace_call_label(Some(name)))
    }
}

impl Drop for InCall {
    #[inline]
    fn drop(&mut self) {
        nrt_host::tls::replace_call_label(self.0);
    }
}

/// The exported function the calling thread is in ("nrt" outside any).
fn current_function() -> &'static str {
    nrt_host::tls::call_label().unwrap_or("nrt")
}

/// Where log lines go (`NEURON_RT_LOG_LOCATION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogLocation {
    Console,
    Syslog,
}

#[derive(Debug)]
pub(crate) struct CHost {
    location: LogLocation,
    /// `NEURON_RT_LOG_LEVEL=QUIET` silences even the records logged before `nrt_init` applies
    /// the configuration.
    quiet: bool,
}

impl CHost {
    pub(crate) fn new() -> Self {
        let location = match std::env::var("NEURON_RT_LOG_LOCATION").as_deref() {
            Ok(v) if v.eq_ignore_ascii_case("syslog") => LogLocation::Syslog,
            _ => LogLocation::Console,
        };
        let quiet =
            std::env::var("NEURON_RT_LOG_LEVEL").is_ok_and(|v| v.eq_ignore_ascii_case("quiet"));
        Self { location, quiet }
    }
}

/// Lines the error log keeps at most (the oldest go first).
const ERROR_LOG_LINES: usize = 256;
/// Bytes the error log keeps at most.
const ERROR_LOG_BYTES: usize = 64 * 1024;

/// The runtime's recent error log: the last `ERROR` and `WARNING` records, at any
/// `NEURON_RT_LOG_LEVEL`, which a core dump writes (`nlog_dump_error_log` in libnrt).
struct ErrorLog {
    lines: VecDeque<String>,
    bytes: usize,
}

static ERROR_LOG: spin::Mutex<ErrorLog> = spin::Mutex::new(ErrorLog {
    lines: VecDeque::new(),
    bytes: 0,
});

/// Takes the error log's lock, or gives up after a bounded wait: a forked child may find it
/// held by a thread of the parent that no longer exists.
fn error_log() -> Option<spin::MutexGuard<'static, ErrorLog>> {
    (0..1000).find_map(|_| {
        ERROR_LOG.try_lock().or_else(|| {
            std::hint::spin_loop();
            None
        })
    })
}

/// The error log's lines, oldest first.
pub(crate) fn recent_errors() -> Vec<String> {
    error_log().map_or_else(Vec::new, |log| log.lines.iter().cloned().collect())
}

impl Host for CHost {
    type Platform = StdPlatform;

    fn record_error(&self, level: Level, args: fmt::Arguments<'_>) {
        let ts = nrt_host::log_timestamp(std::time::SystemTime::now());
        let mut line = String::new();
        let _ = writeln!(
            line,
            "{ts} {}:{} {:<7} NRT:{} {args}",
            std::process::id(),
            tid(),
            level.as_str(),
            current_function()
        );
        if let Some(mut log) = error_log() {
            log.bytes += line.len();
            log.lines.push_back(line);
            while log.lines.len() > ERROR_LOG_LINES || log.bytes > ERROR_LOG_BYTES {
                match log.lines.pop_front() {
                    Some(old) => log.bytes -= old.len(),
                    None => break,
                }
            }
        }
    }

    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        if self.quiet {
            return;
        }
        let func = current_function();
        let mut line = String::new();
        match self.location {
            LogLocation::Console => {
                let ts = nrt_host::log_timestamp(std::time::SystemTime::now());
                let _ = writeln!(
                    line,
                    "{ts} {}:{} {:<7} NRT:{func} {args}",
                    std::process::id(),
                    tid(),
                    level.as_str()
                );
                nrt_host::write_stderr(line.as_bytes());
            }
            LogLocation::Syslog => {
                let _ = write!(line, "NRT:{func} {args}");
                let priority = match level {
                    Level::Error => libc::LOG_ERR,
                    Level::Warning => libc::LOG_WARNING,
                    Level::Info => libc::LOG_INFO,
                    Level::Debug | Level::Trace => libc::LOG_DEBUG,
                };
                if let Ok(c) = CString::new(line.replace('\0', " ")) {
                    // SAFETY: "%s" with one NUL-terminated string argument that outlives the call.
                    unsafe { libc::syslog(priority, c"%s".as_ptr(), c.as_ptr()) };
                }
            }
        }
    }

    fn platform(&self) -> &StdPlatform {
        &StdPlatform
    }
}

fn tid() -> i64 {
    // SAFETY: gettid takes no arguments and cannot fail.
    i64::from(unsafe { libc::syscall(libc::SYS_gettid) } as i32)
}

/// The `log` backend of the library: records of the Rust crates underneath (the driver's
/// soft-incompatibility warnings, which the runtime reports through the `log` facade) go to the
/// runtime's log, filtered by its level like its own records.
pub(crate) struct Forward(pub(crate) fn(Level, fmt::Arguments<'_>));

impl log::Log for Forward {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            log::Level::Error => Level::Error,
            log::Level::Warn => Level::Warning,
            log::Level::Info => Level::Info,
            log::Level::Debug => Level::Debug,
            log::Level::Trace => Level::Trace,
        };
        (self.0)(level, *record.args());
    }

    fn flush(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    static SEEN: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());

    fn record(level: Level, args: fmt::Arguments<'_>) {
        if let Ok(mut v) = SEEN.lock() {
            v.push((level, args.to_string()));
        }
    }

    #[test]
    fn warnings_and_errors_of_the_log_facade_are_forwarded() {
        use log::Log as _;
        let f = Forward(record);
        let emit = |level: log::Level, text: &str| {
            f.log(
                &log::Record::builder()
                    .level(level)
                    .args(format_args!("{text}"))
                    .build(),
            );
        };
        emit(
            log::Level::Warn,
            "Neuron driver soft incompatibility: old firmware",
        );
        emit(log::Level::Error, "broken");
        emit(log::Level::Info, "chatty");
        let seen = SEEN.lock().map(|v| v.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            vec![
                (
                    Level::Warning,
                    "Neuron driver soft incompatibility: old firmware".to_string()
                ),
                (Level::Error, "broken".to_string()),
            ]
        );
    }
}
