//! What the driver wrapper (`backend.rs`) reports about every execution it hands to the
//! backend: the output completion counters (read by `output_completion.rs`) and, once an async
//! error tracker exists, the failures (delivered to `async_ext.rs` through the hook it
//! installs). Plain data with no reference to the rest of the library, so the driver wrapper can
//! call it.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use nrt_core::NrtStatus;
use nrt_core::driver::ExecRequest;

/// A device location: device, buffer address + offset.
pub(crate) type Key = (u32, u64);

/// Completion counts by device location, and a condition variable signalled on each change.
pub(crate) struct Counters {
    map: Mutex<HashMap<Key, u64>>,
    /// Notified after every count.
    pub(crate) changed: Condvar,
}

impl Counters {
    /// The counts, locked.
    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<Key, u64>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The process's completion counters.
pub(crate) fn counters() -> &'static Counters {
    static C: OnceLock<Counters> = OnceLock::new();
    C.get_or_init(|| Counters {
        map: Mutex::new(HashMap::new()),
        changed: Condvar::new(),
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
            c.changed.notify_all();
        }
        Some(status) => {
            if let (Some(hook), Some(first)) = (FAILURE_HOOK.get(), request.subgraphs.first()) {
                let queue_thread = std::thread::current().name() == Some("nrt-async");
                hook(first.lnc, status, queue_thread);
            }
        }
    }
}
