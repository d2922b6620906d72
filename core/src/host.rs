//! What the runtime needs from its host besides the device: a log sink and fork detection.
//!
//! The core reads no environment, clock or OS. A bare-metal host can use [`NoHost`]; the std
//! host (`nrt-host`) routes logs to stderr and tracks `fork()` through `pthread_atfork`.

use core::fmt;

use crate::fmt::Level;
use crate::reader::{HeavyBarrier, ReaderId};

/// Host services.
pub trait Host {
    /// Receives every log record that passes the configured `NEURON_RT_LOG_LEVEL`. The default
    /// forwards to `log` or `defmt`, whichever feature is enabled.
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        crate::fmt::forward(level, args);
    }

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

    /// Called while `unload` waits for in-flight references to a model to drain, between two
    /// checks. A std host sleeps 1 ms; the default spins.
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
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        T::log(self, level, args)
    }
    fn register_fork_handlers(&self) -> Result<(), i32> {
        T::register_fork_handlers(self)
    }
    fn fork_generation(&self) -> u32 {
        T::fork_generation(self)
    }
    fn relax(&self) {
        T::relax(self)
    }
    fn reader_id(&self) -> ReaderId {
        T::reader_id(self)
    }
    fn heavy_barrier(&self) -> Option<HeavyBarrier> {
        T::heavy_barrier(self)
    }
    fn run_parallel(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        T::run_parallel(self, n, task)
    }
}

/// A host with no services beyond the default log forwarding.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHost;

impl Host for NoHost {}

#[cfg(feature = "alloc")]
impl<T: Host + ?Sized> Host for alloc::sync::Arc<T> {
    fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        T::log(self, level, args)
    }
    fn register_fork_handlers(&self) -> Result<(), i32> {
        T::register_fork_handlers(self)
    }
    fn fork_generation(&self) -> u32 {
        T::fork_generation(self)
    }
    fn relax(&self) {
        T::relax(self)
    }
    fn reader_id(&self) -> ReaderId {
        T::reader_id(self)
    }
    fn heavy_barrier(&self) -> Option<HeavyBarrier> {
        T::heavy_barrier(self)
    }
    fn run_parallel(&self, n: usize, task: &(dyn Fn(usize) + Sync)) {
        T::run_parallel(self, n, task)
    }
}
