//! The std [`Host`] implementations.

use core::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use nrt_core::reader::{HeavyBarrier, ReaderId};
use nrt_core::{Host, Level, Platform};

use crate::{fork, sys, time};

/// Formats one log line: `<timestamp> <pid> <LEVEL> NRT: <message>\n`.
fn log_line(level: Level, args: fmt::Arguments<'_>) -> String {
    format!(
        "{} {} {} NRT: {}\n",
        time::log_timestamp(SystemTime::now()),
        std::process::id(),
        level.as_str(),
        args
    )
}

/// Where [`StdHost`] writes.
enum Sink {
    /// File descriptor 2, written directly (no std lock, so a forked child can log).
    Stderr,
    /// A caller-supplied writer.
    Writer(Mutex<Box<dyn Write + Send>>),
}

/// The std platform services, all process-global: fork detection through `pthread_atfork`
/// ([`register_fork_handlers`](crate::register_fork_handlers),
/// [`fork_generation`](crate::fork_generation)), a 1 ms sleep while waiting, a registry reader
/// row per thread ([`reader_id`]), one thread per staging task ([`run_parallel`]) and the
/// `membarrier` heavy barrier ([`heavy_barrier`]). A host that only changes where logs go
/// names it as its platform.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdPlatform;

impl Platform for StdPlatform {
    fn register_fork_handlers(&self) -> Result<(), i32> {
        fork::register_fork_handlers()
    }

    #[inline]
    fn fork_generation(&self) -> u32 {
        fork::fork_generation()
    }

    /// Sleeps 1 ms, as libnrt does between checks of a draining model.
    fn relax(&self) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }

    #[inline]
    fn reader_id(&self) -> ReaderId {
        reader_id()
    }

    fn heavy_barrier(&self) -> Option<HeavyBarrier> {
        heavy_barrier()
    }

    fn run_parallel(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        run_parallel(n, task);
    }
}

/// Writes `line` to file descriptor 2 with raw `write` calls, without std's stderr lock, so a
/// child forked while another thread held that lock can still log. Every host of this project
/// that logs to stderr writes through it. Errors are ignored: a line that cannot be written is
/// dropped.
pub fn write_stderr(line: &[u8]) {
    sys::write_stderr(line);
}

/// The std host: log lines to stderr (or a sink), the [`StdPlatform`] services.
///
/// Each record becomes one line, `<UTC timestamp> <pid> <LEVEL> NRT: <message>`, e.g.
/// `2026-04-14T12:00:00.000000Z 4242 ERROR NRT: NRT uninitialized`, written with a single write
/// so that lines from concurrent threads do not interleave. Write errors are ignored.
///
/// The fork services are process-global ([`register_fork_handlers`](crate::register_fork_handlers),
/// [`fork_generation`](crate::fork_generation)), shared by every `StdHost`.
pub struct StdHost {
    sink: Sink,
}

impl StdHost {
    /// A host that logs to stderr.
    pub fn new() -> Self {
        Self { sink: Sink::Stderr }
    }

    /// A host that logs to `sink` (behind a mutex). Note that a child forked while another
    /// thread held that mutex would block on its next log line; stderr has no such lock.
    pub fn with_sink(sink: Box<dyn Write + Send>) -> Self {
        Self {
            sink: Sink::Writer(Mutex::new(sink)),
        }
    }
}

impl Default for StdHost {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for StdHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sink = match self.sink {
            Sink::Stderr => "stderr",
            Sink::Writer(_) => "writer",
        };
        f.debug_struct("StdHost").field("sink", &sink).finish()
    }
}

impl Host for StdHost {
    type Platform = StdPlatform;

    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        let line = log_line(level, args);
        match &self.sink {
            Sink::Stderr => sys::write_stderr(line.as_bytes()),
            Sink::Writer(w) => {
                let mut w = w.lock().unwrap_or_else(PoisonError::into_inner);
                let _ = w.write_all(line.as_bytes());
                let _ = w.flush();
            }
        }
    }

    fn platform(&self) -> &StdPlatform {
        &StdPlatform
    }
}

/// Runs `task(i)` for every `i < n` on its own thread (the first on the calling thread) and
/// joins them all.
pub fn run_parallel(n: usize, task: &(dyn Fn(usize) + Sync)) {
    std::thread::scope(|s| {
        for i in 1..n {
            s.spawn(move || task(i));
        }
        if n > 0 {
            task(0);
        }
    });
}

/// The process-wide barrier for the registry's unload side: Linux
/// `membarrier(PRIVATE_EXPEDITED)`, registered once per process; `None` where the kernel does
/// not offer it (readers then use a SeqCst fence).
pub fn heavy_barrier() -> Option<HeavyBarrier> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *REGISTERED.get_or_init(sys::membarrier_register) {
        // SAFETY: after a successful registration, `membarrier(PRIVATE_EXPEDITED)` makes every
        // running thread of the process execute a full barrier before returning (and aborts the
        // process rather than return having failed).
        Some(unsafe { HeavyBarrier::new(sys::membarrier) })
    } else {
        None
    }
}

/// The calling thread's registry reader id: each thread gets its own index from a process
/// counter the first time it asks, and indices are never reused, so the first
/// [`EXCLUSIVE_ROWS`](nrt_core::reader::EXCLUSIVE_ROWS) threads of the process count their
/// model references without atomic read-modify-writes; later threads share rows. The index
/// is kept in a per-thread word reached without `__tls_get_addr` (see [`crate::tls`]).
#[inline]
pub fn reader_id() -> ReaderId {
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let index = crate::tls::reader_index(|| NEXT.fetch_add(1, Ordering::Relaxed));
    // SAFETY: `index` comes from a process-wide counter that is never decremented, and each
    // thread keeps the one it drew: no two threads ever hold the same index.
    unsafe { ReaderId::exclusive(index) }
}

/// A test host: records every log record and simulates forks instead of tracking real ones.
#[derive(Debug, Default)]
pub struct CapturingHost {
    records: Mutex<Vec<(Level, String)>>,
    generation: AtomicU32,
    registrations: AtomicU32,
    /// Error number `register_fork_handlers` returns; 0 = succeed.
    registration_error: AtomicI32,
    relaxations: AtomicU32,
}

impl CapturingHost {
    /// An empty recorder whose fork registration succeeds.
    pub fn new() -> Self {
        Self::default()
    }

    /// The records so far, oldest first.
    pub fn records(&self) -> Vec<(Level, String)> {
        self.lock().clone()
    }

    /// Removes and returns the records so far.
    pub fn take(&self) -> Vec<(Level, String)> {
        std::mem::take(&mut *self.lock())
    }

    /// Forgets the records so far.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Whether a record at `level` contains `needle`.
    pub fn contains(&self, level: Level, needle: &str) -> bool {
        self.lock()
            .iter()
            .any(|(l, m)| *l == level && m.contains(needle))
    }

    /// The messages recorded at `level`, oldest first.
    pub fn messages(&self, level: Level) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(l, _)| *l == level)
            .map(|(_, m)| m.clone())
            .collect()
    }

    /// Acts as if the process had just forked: bumps the fork generation this host reports.
    pub fn simulate_fork(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Makes later `register_fork_handlers` calls fail with `Err(ret)` (`None` or `Some(0)`:
    /// succeed).
    pub fn set_fork_registration_error(&self, ret: Option<i32>) {
        self.registration_error
            .store(ret.unwrap_or(0), Ordering::SeqCst);
    }

    /// How many times the runtime relaxed while waiting (e.g. for an unload to drain).
    pub fn relaxations(&self) -> u32 {
        self.relaxations.load(Ordering::SeqCst)
    }

    /// How many times `register_fork_handlers` was called (successfully or not).
    pub fn fork_registrations(&self) -> u32 {
        self.registrations.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Level, String)>> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Host for CapturingHost {
    type Platform = Self;

    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        self.lock().push((level, args.to_string()));
    }

    fn platform(&self) -> &Self {
        self
    }
}

/// The std services, except that forks are simulated ([`CapturingHost::simulate_fork`]),
/// fork-handler registration can be made to fail, and relaxing yields and is counted.
impl Platform for CapturingHost {
    fn register_fork_handlers(&self) -> Result<(), i32> {
        self.registrations.fetch_add(1, Ordering::SeqCst);
        match self.registration_error.load(Ordering::SeqCst) {
            0 => Ok(()),
            ret => Err(ret),
        }
    }

    #[inline]
    fn fork_generation(&self) -> u32 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Yields the thread and counts the call ([`CapturingHost::relaxations`]).
    fn relax(&self) {
        self.relaxations.fetch_add(1, Ordering::SeqCst);
        std::thread::yield_now();
    }

    #[inline]
    fn reader_id(&self) -> ReaderId {
        reader_id()
    }

    fn run_parallel(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        run_parallel(n, task);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn std_host_writes_one_formatted_line_per_record() {
        let buf = Shared::default();
        let host = StdHost::with_sink(Box::new(buf.clone()));
        host.log(Level::Error, format_args!("NRT uninitialized"));
        host.log(Level::Warning, format_args!("value {}", 7));
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        let pid = std::process::id().to_string();
        for (line, (level, msg)) in lines
            .iter()
            .zip([("ERROR", "NRT uninitialized"), ("WARNING", "value 7")])
        {
            let mut parts = line.splitn(4, ' ');
            let ts = parts.next().unwrap();
            assert_eq!(ts.len(), "2000-01-01T00:00:00.000000Z".len(), "{line}");
            assert!(ts.ends_with('Z') && ts.as_bytes()[10] == b'T', "{line}");
            assert_eq!(parts.next(), Some(pid.as_str()));
            assert_eq!(parts.next(), Some(level));
            assert_eq!(parts.next(), Some(format!("NRT: {msg}").as_str()));
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn std_host_debug_names_the_sink() {
        assert_eq!(
            format!("{:?}", StdHost::new()),
            "StdHost { sink: \"stderr\" }"
        );
        let host = StdHost::with_sink(Box::new(std::io::sink()));
        assert_eq!(format!("{host:?}"), "StdHost { sink: \"writer\" }");
    }

    #[test]
    fn std_host_fork_services_are_the_process_globals() {
        let host = StdHost::default();
        assert_eq!(host.platform().register_fork_handlers(), Ok(()));
        assert_eq!(host.platform().fork_generation(), fork::fork_generation());
    }

    #[test]
    fn capturing_host_records_and_simulates() {
        let host = CapturingHost::new();
        host.log(Level::Error, format_args!("bad {}", 1));
        host.log(Level::Info, format_args!("fine"));
        assert!(host.contains(Level::Error, "bad 1"));
        assert!(!host.contains(Level::Info, "bad"));
        assert_eq!(host.messages(Level::Info), ["fine"]);
        assert_eq!(host.take().len(), 2);
        assert!(host.records().is_empty());

        assert_eq!(host.fork_generation(), 0);
        host.simulate_fork();
        assert_eq!(host.fork_generation(), 1);

        assert_eq!(host.register_fork_handlers(), Ok(()));
        host.set_fork_registration_error(Some(12));
        assert_eq!(host.register_fork_handlers(), Err(12));
        host.set_fork_registration_error(None);
        assert_eq!(host.register_fork_handlers(), Ok(()));
        assert_eq!(host.fork_registrations(), 3);
    }
}
