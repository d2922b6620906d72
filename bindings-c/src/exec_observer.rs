//! What the driver wrapper (`backend.rs`) reports about every execution it hands to the
//! backend: the output completion counters (read by `output_completion.rs`) and, once an async
//! error tracker exists, the failures (delivered to `async_ext.rs` through the hook it
//! installs). Plain data with no reference to the rest of the library, so the driver wrapper can
//! call it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use hashbrown::HashMap;

use nrt_core::NrtStatus;
use nrt_core::driver::ExecRequest;

/// A device location: device, buffer address + offset.
pub(crate) type Key = (u32, u64);

/// Completion counts by device location, and a condition variable signalled on a change while
/// someone waits.
pub(crate) struct Counters {
    map: Mutex<HashMap<Key, u64>>,
    /// Notified after a count while `waiters` is non-zero.
    changed: Condvar,
    /// Threads inside [`Counters::wait_timeout`]. An execution notifies only when there are
    /// some, so the common case (nobody waiting) makes no `futex` system call.
    waiters: AtomicUsize,
}

impl Counters {
    /// The counts, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<Key, u64>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits (for at most `timeout`) for the next count, with the counts locked as `guard`.
    /// The waiter is registered under the lock, before it releases it to wait, so a count made
    /// after the caller last looked at the map (under the same lock) sees it and notifies.
    pub(crate) fn wait_timeout<'a>(
        &'a self,
        guard: MutexGuard<'a, HashMap<Key, u64>>,
        timeout: Duration,
    ) -> MutexGuard<'a, HashMap<Key, u64>> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let guard = self
            .changed
            .wait_timeout(guard, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        guard
    }
}

/// The process's completion counters.
pub(crate) fn counters() -> &'static Counters {
    static C: OnceLock<Counters> = OnceLock::new();
    C.get_or_init(|| Counters {
        map: Mutex::new(HashMap::new()),
        changed: Condvar::new(),
        waiters: AtomicUsize::new(0),
    })
}

/// Receives failed executions: absolute logical core, status, whether it ran on the library's
/// async worker thread.
pub(crate) type FailureHook = fn(lnc: u32, status: NrtStatus, from_queue_thread: bool);

static FAILURE_HOOK: OnceLock<FailureHook> = OnceLock::new();

/// Installs the receiver of failed executions (the first installation stays).
pub(crate) fn set_failure_hook(hook: FailureHook) {
    let _ = FAILURE_HOOK.set(hook);
}

/// Observes one execution handed to the backend: on success counts its outputs; on failure
/// passes it to the failure hook, if one is installed.
pub(crate) fn submitted(request: &ExecRequest<'_>, failure: Option<NrtStatus>) {
    match failure {
        None => {
            if request.outputs.is_empty() {
                return;
            }
            let c = counters();
            let mut m = c.lock();
            for b in request.outputs {
                let n = m
                    .entry((b.buffer.device, b.buffer.addr + b.offset))
                    .or_insert(0);
                *n = n.wrapping_add(1);
            }
            drop(m);
            // A waiter registers under the lock before waiting: if it looked at the map
            // before this count, the unlock above orders its registration before this load.
            if c.waiters.load(Ordering::SeqCst) > 0 {
                c.changed.notify_all();
            }
        }
        Some(status) => {
            if let (Some(hook), Some(first)) = (FAILURE_HOOK.get(), request.subgraphs.first()) {
                let queue_thread = std::thread::current().name() == Some("nrt-async");
                hook(first.lnc, status, queue_thread);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use nrt_core::driver::{Binding, DeviceBuffer, StagedModel};

    use super::*;

    static FAILURES: AtomicU64 = AtomicU64::new(0);

    fn hook(lnc: u32, status: NrtStatus, from_queue_thread: bool) {
        // One packed word per failure: lnc, status, thread flag.
        let word =
            (u64::from(lnc) << 32) | (u64::from(status.code()) << 1) | u64::from(from_queue_thread);
        FAILURES.store(word, Ordering::SeqCst);
    }

    fn binding(device: u32, addr: u64, offset: u64) -> Binding {
        Binding {
            index: 0,
            buffer: DeviceBuffer {
                device,
                addr,
                size: 4096,
            },
            offset,
            size: 64,
        }
    }

    #[test]
    fn successes_count_each_output_location_and_failures_reach_the_hook() {
        let staged = [StagedModel {
            lnc: 5,
            handle: 1,
            plumbing: true,
        }];
        let inputs = [binding(0, 0x1000, 0)];
        // Two outputs in one buffer, and one at the same address on another device.
        let outputs = [
            binding(0, 0x9000, 0),
            binding(0, 0x9000, 64),
            binding(1, 0x9000, 0),
        ];
        let request = ExecRequest {
            subgraphs: &staged,
            inputs: &inputs,
            outputs: &outputs,
            timeout_secs: None,
        };
        submitted(&request, None);
        submitted(&request, None);
        {
            let m = counters().lock();
            assert_eq!(m.get(&(0, 0x9000)), Some(&2));
            assert_eq!(m.get(&(0, 0x9040)), Some(&2));
            assert_eq!(m.get(&(1, 0x9000)), Some(&2));
            assert_eq!(m.get(&(0, 0x1000)), None); // inputs are not counted
        }
        // A failure with no hook installed changes nothing; with one, the hook gets it.
        submitted(&request, Some(NrtStatus::Invalid));
        assert_eq!(FAILURES.load(Ordering::SeqCst), 0);
        set_failure_hook(hook);
        submitted(&request, Some(NrtStatus::Invalid));
        assert_eq!(FAILURES.load(Ordering::SeqCst), (5 << 32) | (2 << 1));
        assert_eq!(counters().lock().get(&(0, 0x9000)), Some(&2));
    }
}
