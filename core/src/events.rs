//! The runtime's event seam: one optional observer, called at the points of the runtime's life
//! that profilers and system traces record (model load and unload, each execution submitted,
//! started and completed, device tensor reads, writes and copies, and every error the runtime
//! logs).
//!
//! The seam costs one relaxed atomic load and a branch per point while no hook is installed;
//! the event value is built only when one is. The hook is a plain function pointer, so the seam
//! needs no allocation and stays `no_std`; a host that wants state keeps it in its own statics.
//! Events borrow what the runtime has at hand (names, bindings, staged subgraphs) for the
//! duration of the call: a hook copies what it keeps.
//!
//! Hooks run on the thread that reaches the point (the caller's thread for synchronous work, a
//! worker thread for queued executions). Some points are inside a runtime lock (an execution is
//! reported submitted under its queue's lock, so that it is reported before it can start; an
//! error may be logged under a lock; `close` unloads under the lifecycle lock): a hook must not
//! call into the runtime, except from [`RuntimeEvent::ExecStarted`] and
//! [`RuntimeEvent::ExecCompleted`], which hold no runtime lock, and then only the driver's
//! memory reads.

use core::sync::atomic::{AtomicBool, Ordering};

use crate::driver::{Binding, StagedModel};
use crate::io::IoTable;
use crate::status::NrtStatus;
use crate::topology::Topology;

/// The process-relative index of absolute logical core `abs` (itself if `t` does not own it).
pub fn relative_core(t: Topology, abs: u32) -> u32 {
    t.relative_lnc(abs).unwrap_or(abs)
}

/// The first process-relative logical core on device `device`, if the process has one there.
pub fn core_on_device(t: Topology, device: u32) -> Option<u32> {
    (0..t.lnc_count()).find(|&r| {
        t.absolute_lnc(r)
            .is_some_and(|a| t.device_of_lnc(a) == device)
    })
}

/// One observed point of the runtime's life. Cores are process-relative logical cores (what
/// the C API calls `nc_idx` / `vnc`; see [`relative_core`]).
#[derive(Clone, Copy, Debug)]
pub enum RuntimeEvent<'a> {
    /// A model was loaded and registered.
    ModelLoaded {
        /// Model id.
        model: u32,
        /// Logical core it is loaded on.
        lnc: u32,
        /// The NEFF's name.
        name: &'a str,
    },
    /// A model was unloaded (after its references drained and it was unstaged).
    ModelUnloaded {
        /// Model id.
        model: u32,
        /// Logical core it was loaded on.
        lnc: u32,
    },
    /// An execution was accepted: resolved and bound (synchronous) or queued (asynchronous).
    ExecSubmitted {
        /// Model id.
        model: u32,
        /// Logical core.
        lnc: u32,
        /// Sequence id: the `nrta` sequence id of a queued execution, or the runtime's count of
        /// synchronous executions (see [`EventSeam::next_sync_seq`]).
        seq: u64,
    },
    /// An execution is about to be handed to the driver; its inputs are bound.
    ExecStarted {
        /// Model id.
        model: u32,
        /// Logical core.
        lnc: u32,
        /// Sequence id, as in [`RuntimeEvent::ExecSubmitted`].
        seq: u64,
        /// The model's I/O table (names of the bindings' indices).
        io: &'a IoTable,
        /// The input bindings.
        inputs: &'a [Binding],
    },
    /// The driver returned from an execution.
    ExecCompleted {
        /// Model id.
        model: u32,
        /// Logical core.
        lnc: u32,
        /// Sequence id, as in [`RuntimeEvent::ExecSubmitted`].
        seq: u64,
        /// The execution's status.
        status: NrtStatus,
        /// The subgraphs that ran (the backend's handles).
        staged: &'a [StagedModel],
        /// The model's I/O table.
        io: &'a IoTable,
        /// The output bindings (their device memory holds the outputs).
        outputs: &'a [Binding],
    },
    /// Bytes read from a device tensor into host memory.
    TensorRead {
        /// The first logical core of the process on the tensor's device (`None`: none is).
        nc: Option<u32>,
        /// Bytes.
        bytes: u64,
    },
    /// Bytes written into a device tensor.
    TensorWrite {
        /// The first logical core of the process on the tensor's device (`None`: none is).
        nc: Option<u32>,
        /// Bytes.
        bytes: u64,
    },
    /// Bytes copied between device tensors.
    TensorCopy {
        /// The first logical core of the process on the tensor's device (`None`: none is).
        nc: Option<u32>,
        /// Bytes.
        bytes: u64,
    },
    /// The runtime logged an error.
    Error {
        /// Its status.
        status: NrtStatus,
        /// Its message.
        message: &'a str,
    },
}

/// The observer: called with every event while installed.
pub type EventHook = fn(&RuntimeEvent<'_>);

/// The observer and the count of synchronous executions it has seen.
#[derive(Debug, Default)]
struct Observer {
    hook: Option<EventHook>,
    sync_seq: u64,
}

/// Where a runtime keeps its observer (one per [`Runtime`](crate::Runtime)). Only 32-bit
/// atomics are used, so the seam builds for every target the core does.
#[derive(Debug, Default)]
pub struct EventSeam {
    on: AtomicBool,
    observer: spin::Mutex<Observer>,
}

impl EventSeam {
    /// A seam with no observer.
    pub const fn new() -> Self {
        Self {
            on: AtomicBool::new(false),
            observer: spin::Mutex::new(Observer {
                hook: None,
                sync_seq: 0,
            }),
        }
    }

    /// Installs `hook` (replacing any), or removes the observer with `None`.
    pub fn set(&self, hook: Option<EventHook>) {
        let mut o = self.observer.lock();
        o.hook = hook;
        self.on.store(hook.is_some(), Ordering::Release);
    }

    /// Whether an observer is installed.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// Calls the observer, if any, with the event `make` builds (built only then).
    #[inline]
    pub fn emit<'a>(&self, make: impl FnOnce() -> RuntimeEvent<'a>) {
        if self.is_on() {
            self.emit_slow(&make());
        }
    }

    #[cold]
    #[inline(never)]
    fn emit_slow(&self, event: &RuntimeEvent<'_>) {
        let hook = self.observer.lock().hook;
        if let Some(h) = hook {
            h(event);
        }
    }

    /// The sequence id of the next synchronous execution (1, 2, …, in submission order);
    /// 0 while no observer is installed (nothing is counted then).
    #[inline]
    pub fn next_sync_seq(&self) -> u64 {
        if self.is_on() {
            let mut o = self.observer.lock();
            o.sync_seq = o.sync_seq.wrapping_add(1);
            o.sync_seq
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicU32;

    static SEEN: AtomicU32 = AtomicU32::new(0);

    fn count(e: &RuntimeEvent<'_>) {
        if let RuntimeEvent::ModelUnloaded { model, .. } = e {
            SEEN.fetch_add(*model, Ordering::SeqCst);
        }
    }

    #[test]
    fn events_reach_the_hook_only_while_installed() {
        let seam = EventSeam::new();
        let mut built = 0;
        seam.emit(|| {
            built += 1;
            RuntimeEvent::ModelUnloaded { model: 5, lnc: 0 }
        });
        assert_eq!(built, 0);
        assert_eq!(seam.next_sync_seq(), 0);
        seam.set(Some(count));
        seam.emit(|| RuntimeEvent::ModelUnloaded { model: 7, lnc: 0 });
        assert_eq!(SEEN.load(Ordering::SeqCst), 7);
        assert_eq!(seam.next_sync_seq(), 1);
        assert_eq!(seam.next_sync_seq(), 2);
        seam.set(None);
        seam.emit(|| RuntimeEvent::ModelUnloaded { model: 100, lnc: 0 });
        assert_eq!(SEEN.load(Ordering::SeqCst), 7);
    }
}
