//! What the runtime needs from its host besides the device: a log sink and fork detection.
//!
//! The core reads no environment, clock or OS. A bare-metal host can use [`NoHost`]; the std
//! host (`nrt-host`) routes logs to stderr and tracks `fork()` through `pthread_atfork`.

use core::fmt;

use crate::fmt::Level;

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
}
