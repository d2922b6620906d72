//! The driver behind the C library: empty until the first `nrt_init` (or count call) opens
//! the one the `NEURON_RT_*` variables select ([`nrt_backend::Selection`]), then that
//! [`AnyDriver`] for the rest of the process.

use std::sync::OnceLock;

use nrt_backend::{AnyDriver, AnyError};
use nrt_core::driver::Driver;

/// The process's driver: empty until a backend is chosen.
#[derive(Debug, Default)]
pub(crate) struct SwitchDriver {
    backend: OnceLock<AnyDriver>,
}

impl SwitchDriver {
    pub(crate) const fn new() -> Self {
        Self {
            backend: OnceLock::new(),
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

/// Forwards to the chosen backend; none chosen: [`AnyError::no_backend`].
macro_rules! switch {
    (@value $s:ident, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some($d) => $e,
            None => false,
        }
    };
    // Executions are also reported to the output-completion counters and the async error
    // trackers (`exec_observer.rs`).
    ($s:ident, Submit, $d:ident => $x:ident . submit ( $req:ident )) => {
        match $s.backend.get() {
            Some($d) => {
                let r = $x.submit($req);
                crate::exec_observer::submitted(
                    $req,
                    r.as_ref().err().map(nrt_core::driver::DriverError::status),
                );
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
