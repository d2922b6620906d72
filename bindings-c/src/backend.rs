//! The driver behind the C library: empty until the first `nrt_init` (or count call) opens
//! the one the `NEURON_RT_*` variables select ([`nrt_backend::Selection`]), then that
//! [`AnyDriver`] for the rest of the process.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use nrt_backend::{AnyDriver, AnyError};
use nrt_core::driver::Driver;

/// Devices whose allocated bytes are counted (the simulator has at most 64).
const COUNTED_DEVICES: usize = 64;

/// The process's driver: empty until a backend is chosen. It counts the device memory
/// allocated through it, per device, on every backend (`nrt_get_vnc_memory_stats`).
#[derive(Debug)]
pub(crate) struct SwitchDriver {
    backend: OnceLock<AnyDriver>,
    allocated: [AtomicU64; COUNTED_DEVICES],
}

impl SwitchDriver {
    pub(crate) const fn new() -> Self {
        Self {
            backend: OnceLock::new(),
            allocated: [const { AtomicU64::new(0) }; COUNTED_DEVICES],
        }
    }

    /// Bytes of device memory of `device` allocated through this driver and not freed.
    pub(crate) fn bytes_allocated(&self, device: u32) -> u64 {
        self.allocated
            .get(device as usize)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn count(&self, device: u32, delta: i64) {
        if let Some(c) = self.allocated.get(device as usize) {
            if delta >= 0 {
                c.fetch_add(delta.unsigned_abs(), Ordering::Relaxed);
            } else {
                c.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
            }
        }
    }

    /// The backend, choosing it with `choose` if none is chosen yet.
    pub(crate) fn get_or_choose(&self, choose: impl FnOnce() -> AnyDriver) -> &AnyDriver {
        self.backend.get_or_init(choose)
    }

    /// The chosen backend, if any.
    pub(crate) fn get(&self) -> Option<&AnyDriver> {
        self.backend.get()
    }
}

/// Forwards to the chosen backend; none chosen: [`AnyError::no_backend`] (registering the
/// soft-incompatibility callback then succeeds and does nothing).
macro_rules! switch {
    (@value $s:ident, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some($d) => $e,
            None => false,
        }
    };
    // With no backend there is nothing to register the callback with: `init` goes on to
    // discovery, which reports the missing device for what it is.
    ($s:ident, RegisterSoftIncompatCallback, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some($d) => $e,
            None => Ok(()),
        }
    };
    // Device memory is counted per device.
    ($s:ident, AllocDevice, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some($d) => {
                let r = $e;
                if let Ok(b) = &r {
                    $s.count(b.device, i64::try_from(b.size).unwrap_or(i64::MAX));
                }
                r
            }
            None => Err(AnyError::no_backend()),
        }
    };
    ($s:ident, FreeDevice, $d:ident => $r:ident . $m:ident ( $buffer:ident )) => {
        match $s.backend.get() {
            Some($d) => {
                let r = $r.$m($buffer);
                if r.is_ok() {
                    $s.count($buffer.device, -i64::try_from($buffer.size).unwrap_or(i64::MAX));
                }
                r
            }
            None => Err(AnyError::no_backend()),
        }
    };
    ($s:ident, $call:ident, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some($d) => $e,
            None => Err(AnyError::no_backend()),
        }
    };
}

impl Driver for SwitchDriver {
    type Error = AnyError;
    nrt_core::forward_driver!(switch);
}
