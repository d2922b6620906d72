//! What the runtime needs from its host besides the device: a log sink ([`Host::log`]) and
//! platform services ([`Platform`]: fork detection, relaxing while waiting, registry reader
//! rows, parallel staging, a process-wide barrier).
//!
//! The two are apart so that a host that only changes where logs go implements `log` and names
//! an existing platform (`type Platform = StdPlatform`), forwarding nothing. The core reads no
//! environment, clock or OS. A bare-metal host can use [`NoHost`]; the std host (`nrt-host`)
//! routes logs to stderr and tracks `fork()` through `pthread_atfork`.

use core::fmt;

use crate::fmt::Level;
use crate::reader::{HeavyBarrier, ReaderId};

/// Platform services. Every method has a default fit for a single-threaded host that never
/// forks.
pub trait Platform {
    /// Installs the process's fork handlers (`pthread_atfork`), called at the point of `init`
    /// where the runtime installs them. `Err(code)` fails `init` with "Failed to set atfork
    /// handlers, ret=code". Must be idempotent.
    fn register_fork_handlers(&self) -> Result<(), i32> {
        Ok(())
    }

    /// A counter the host's fork-child handler increments. A runtime that sees it change after
    /// registering the handlers is in a forked child and enters `NRT_STATE_CHILD`. Hosts that
    /// never fork return a constant.
    fn fork_generation(&self) -> u32 {
        0
    }

    /// Called while the runtime waits (an unload draining references, queued work running
    /// elsewhere), between two checks. A std host sleeps 1 ms; the default spins.
    fn relax(&self) {
        core::hint::spin_loop();
    }

    /// The calling thread's reader row for the model registry's reference counters. The
    /// default is a shared row picked by hashing the caller's stack address (correct for any
    /// thread; distinct rows for concurrent threads avoid contention). A host that can give
    /// each thread an index of its own returns [`ReaderId::exclusive`] ones, which count
    /// without atomic read-modify-writes.
    fn reader_id(&self) -> ReaderId {
        ReaderId::shared(stack_shard())
    }

    /// Runs `task(0)`, ..., `task(n - 1)`, in parallel where the host can, and returns when all
    /// have finished (the stage seam's one task per subgraph). The default runs them in order.
    fn run_parallel(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        for i in 0..n {
            task(i);
        }
    }

    /// A process-wide memory barrier for the registry's unload side, if the host has one
    /// (asked once, when the runtime is built). Without it readers use a SeqCst fence.
    fn heavy_barrier(&self) -> Option<HeavyBarrier> {
        None
    }

    /// Whether the host's heap refused an allocation since the last call; the call clears the
    /// record. Rust's collections abort on a refused allocation, so a host that must survive
    /// one (firmware with a fixed heap) serves it from an emergency reserve instead and
    /// records it here. `load` asks once before it starts (discarding an older record) and
    /// after each of its stages (parse, I/O table, staging, publishing); a recorded failure
    /// undoes what the load built and fails it with `NRT_RESOURCE`. The record is global to
    /// the host: with several threads loading at once, a failure in one may fail another's
    /// load too (never the reverse). The default (hosts whose allocation failures abort):
    /// never.
    fn take_heap_failure(&self) -> bool {
        false
    }
}

/// The runtime's host: where log records go, and the platform services it runs on.
pub trait Host {
    /// The platform services.
    type Platform: Platform;

    /// Receives every log record that passes the configured `NEURON_RT_LOG_LEVEL`. The default
    /// forwards to `log` or `defmt`, whichever feature is enabled.
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        crate::fmt::forward(level, args);
    }

    /// Receives every `ERROR` and `WARNING` record, whatever `NEURON_RT_LOG_LEVEL` says, before
    /// [`Host::log`] sees it (if it does): the runtime's recent error log, which a host that
    /// writes core dumps keeps and writes into the dump. The default keeps nothing.
    fn record_error(&self, level: Level, args: fmt::Arguments<'_>) {
        let _ = (level, args);
    }

    /// The platform services.
    fn platform(&self) -> &Self::Platform;
}

/// A shard hint from the current stack address: threads have distinct stacks, megabytes apart.
#[inline]
pub fn stack_shard() -> usize {
    let marker = 0u8;
    let addr = core::ptr::addr_of!(marker).addr();
    // Fibonacci hashing of the 4 KiB page number.
    ((addr >> 12).wrapping_mul(0x9E37_79B9_7F4A_7C15_u64 as usize)) >> (usize::BITS - 8)
}

impl<T: Host + ?Sized> Host for &T {
    type Platform = T::Platform;
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        T::log(self, level, args)
    }
    fn record_error(&self, level: Level, args: fmt::Arguments<'_>) {
        T::record_error(self, level, args)
    }
    fn platform(&self) -> &T::Platform {
        T::platform(self)
    }
}

/// Platform services with every default: no fork, spin while waiting, run tasks in order.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPlatform;

impl Platform for NoPlatform {}

/// A host with no services beyond the default log forwarding.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHost;

impl Host for NoHost {
    type Platform = NoPlatform;
    fn platform(&self) -> &NoPlatform {
        &NoPlatform
    }
}

#[cfg(feature = "alloc")]
impl<T: Host + ?Sized> Host for alloc::sync::Arc<T> {
    type Platform = T::Platform;
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        T::log(self, level, args)
    }
    fn record_error(&self, level: Level, args: fmt::Arguments<'_>) {
        T::record_error(self, level, args)
    }
    fn platform(&self) -> &T::Platform {
        T::platform(self)
    }
}
