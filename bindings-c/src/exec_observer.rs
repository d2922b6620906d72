//! What the driver wrapper (`backend.rs`) reports about every execution it hands to the
//! backend: the output completion counters (read by `output_completion.rs`) and, once an async
//! error tracker exists, the failures (delivered to `async_ext.rs` through the hook it
//! installs). Plain data with no reference to the rest of the library, so the driver wrapper can
//! call it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use hashbrown::HashMap;

use nrt_core::NrtStatus;
use nrt_core::driver::ExecRequest;

/// A device location: device, buffer address + offset.
pub(crate) type Key = (u32, u64);

/// Entries of the lock-free table (a power of two). Locations beyond it, and those whose key
/// does not pack into one word, are counted in the locked overflow map.
const TABLE: usize = 4096;

/// How many entries a lookup probes before it gives up on the table.
const PROBES: usize = 64;

/// One counted location: its packed key (0 while free; claimed once, never released) and
/// its count.
struct Entry {
    key: AtomicU64,
    count: AtomicU64,
}

/// Completion counts by device location, and a condition variable signalled on a change while
/// someone waits.
///
/// Counting is one atomic add on the location's entry of a fixed open-addressed table (found
/// by a hash of the location and a short linear probe; a free entry is claimed with a
/// compare-and-swap), so an execution takes no lock. The locked map holds what the table
/// cannot: a location of a device ≥ 128 or an address ≥ 2^56, or any location once the
/// table is crowded.
pub(crate) struct Counters {
    table: Box<[Entry]>,
    overflow: Mutex<HashMap<Key, u64>>,
    /// The mutex waiters sleep under.
    sleep: Mutex<()>,
    /// Notified after a count while `waiters` is non-zero.
    changed: Condvar,
    /// Threads inside [`Counters::wait_timeout`]. An execution notifies only when there are
    /// some, so the common case (nobody waiting) makes no `futex` system call.
    waiters: AtomicUsize,
}

/// The packed table key of a location (bit 63 set, so never 0), if it fits.
fn pack((device, addr): Key) -> Option<u64> {
    (device < 128 && addr < 1 << 56).then(|| (1 << 63) | (u64::from(device) << 56) | addr)
}

impl Counters {
    fn new() -> Self {
        Self {
            table: (0..TABLE)
                .map(|_| Entry {
                    key: AtomicU64::new(0),
                    count: AtomicU64::new(0),
                })
                .collect(),
            overflow: Mutex::new(HashMap::new()),
            sleep: Mutex::new(()),
            changed: Condvar::new(),
            waiters: AtomicUsize::new(0),
        }
    }

    /// The table entry of `key`, claiming a free one when `claim`; `None` when the location
    /// belongs to the overflow map (it does not pack, or `claim` found no free entry within
    /// [`PROBES`]) or, without `claim`, was never counted in the table.
    fn entry(&self, key: Key, claim: bool) -> Option<&Entry> {
        let packed = pack(key)?;
        let start = (packed.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize;
        for i in 0..PROBES {
            let e = &self.table[(start + i) & (TABLE - 1)];
            match e.key.load(Ordering::Acquire) {
                k if k == packed => return Some(e),
                0 if claim => {
                    match e
                        .key
                        .compare_exchange(0, packed, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => return Some(e),
                        Err(k) if k == packed => return Some(e),
                        Err(_) => {}
                    }
                }
                // Entries are claimed in probe order and never released: a free one ends
                // the search.
                0 => return None,
                _ => {}
            }
        }
        None
    }

    fn overflow(&self) -> MutexGuard<'_, HashMap<Key, u64>> {
        self.overflow.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds 1 to the count of `key`.
    fn count(&self, key: Key) {
        match self.entry(key, true) {
            Some(e) => {
                e.count.fetch_add(1, Ordering::SeqCst);
            }
            None => {
                let mut m = self.overflow();
                let n = m.entry(key).or_insert(0);
                *n = n.wrapping_add(1);
            }
        }
    }

    /// The count of `key`.
    pub(crate) fn get(&self, key: Key) -> u64 {
        match self.entry(key, false) {
            Some(e) => e.count.load(Ordering::SeqCst),
            None => self.overflow().get(&key).copied().unwrap_or(0),
        }
    }

    /// Sets the count of `key` to 0.
    pub(crate) fn reset(&self, key: Key) {
        if let Some(e) = self.entry(key, false) {
            e.count.store(0, Ordering::SeqCst);
        }
        self.overflow().remove(&key);
    }

    /// Waits (for at most `timeout`) for a count to change, returning early when `done` holds.
    /// The waiter registers (SeqCst) before it checks `done` under the sleep mutex, and a
    /// counting thread adds (SeqCst) before it reads `waiters`: so either the check sees the
    /// new count or the counter sees the waiter and notifies, under the same mutex, after the
    /// waiter is asleep.
    pub(crate) fn wait_timeout(&self, timeout: Duration, done: impl Fn() -> bool) {
        let guard = self.sleep.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_add(1, Ordering::SeqCst);
        if !done() {
            drop(
                self.changed
                    .wait_timeout(guard, timeout)
                    .unwrap_or_else(PoisonError::into_inner),
            );
        }
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes the waiters, if any, after a count.
    fn notify(&self) {
        if self.waiters.load(Ordering::SeqCst) > 0 {
            drop(self.sleep.lock().unwrap_or_else(PoisonError::into_inner));
            self.changed.notify_all();
        }
    }
}

/// The process's completion counters.
pub(crate) fn counters() -> &'static Counters {
    static C: OnceLock<Counters> = OnceLock::new();
    C.get_or_init(Counters::new)
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
            for b in request.outputs {
                c.count((b.buffer.device, b.buffer.addr + b.offset));
            }
            c.notify();
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
        let c = counters();
        assert_eq!(c.get((0, 0x9000)), 2);
        assert_eq!(c.get((0, 0x9040)), 2);
        assert_eq!(c.get((1, 0x9000)), 2);
        assert_eq!(c.get((0, 0x1000)), 0); // inputs are not counted
        // A failure with no hook installed changes nothing; with one, the hook gets it.
        submitted(&request, Some(NrtStatus::Invalid));
        assert_eq!(FAILURES.load(Ordering::SeqCst), 0);
        set_failure_hook(hook);
        submitted(&request, Some(NrtStatus::Invalid));
        assert_eq!(FAILURES.load(Ordering::SeqCst), (5 << 32) | (2 << 1));
        assert_eq!(c.get((0, 0x9000)), 2);
    }

    #[test]
    fn a_crowded_table_and_unpackable_locations_count_in_the_overflow_map() {
        let c = Counters::new();
        // More locations than the table has entries, plus some that do not pack.
        let keys: Vec<Key> = (0..2 * TABLE as u64)
            .map(|i| (0, 0x1000 + 64 * i))
            .chain([(200, 0x40), (1, 1 << 60)])
            .collect();
        for (i, &k) in keys.iter().enumerate() {
            for _ in 0..=(i % 3) {
                c.count(k);
            }
        }
        assert!(!c.overflow().is_empty());
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(c.get(k), (i % 3) as u64 + 1, "location {k:?}");
        }
        assert_eq!(c.get((0, 0x10)), 0);
        for &k in &keys {
            c.reset(k);
            assert_eq!(c.get(k), 0);
        }
        c.count(keys[0]);
        assert_eq!(c.get(keys[0]), 1);
    }
}
