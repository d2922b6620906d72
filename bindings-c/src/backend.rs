//! The driver behind the C library, chosen at the first `nrt_init`: the simulator or the Linux
//! driver.

use std::fmt;
use std::sync::OnceLock;

use nrt_core::driver::{Driver, DriverError, ErrorKind};
use nrt_linux::{LinuxDriver, LinuxError};
use nrt_sim::{SimDriver, SimError};

/// A chosen backend.
#[derive(Debug)]
pub(crate) enum Backend {
    Sim(SimDriver),
    Linux(LinuxDriver),
}

/// The process's driver: empty until the first `nrt_init` chooses one.
#[derive(Debug, Default)]
pub(crate) struct SwitchDriver {
    backend: OnceLock<Backend>,
}

impl SwitchDriver {
    pub(crate) const fn new() -> Self {
        Self {
            backend: OnceLock::new(),
        }
    }

    /// The backend, choosing it with `choose` if none is chosen yet.
    pub(crate) fn get_or_choose(&self, choose: impl FnOnce() -> Backend) -> &Backend {
        self.backend.get_or_init(choose)
    }

    pub(crate) fn get(&self) -> Option<&Backend> {
        self.backend.get()
    }
}

/// Errors of either backend, or "no backend chosen".
#[derive(Debug)]
pub(crate) enum BackendError {
    Sim(SimError),
    Linux(LinuxError),
    None,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Sim(e) => fmt::Display::fmt(e, f),
            BackendError::Linux(e) => fmt::Display::fmt(e, f),
            BackendError::None => f.write_str("no Neuron backend selected"),
        }
    }
}

impl DriverError for BackendError {
    fn kind(&self) -> ErrorKind {
        match self {
            BackendError::Sim(e) => e.kind(),
            BackendError::Linux(e) => e.kind(),
            BackendError::None => ErrorKind::NotFound,
        }
    }

    fn unsupported(operation: &'static str) -> Self {
        BackendError::Sim(SimError::unsupported(operation))
    }
}

/// Forwards to the chosen backend, wrapping its error.
macro_rules! switch {
    (@value $s:ident, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some(Backend::Sim($d)) => $e,
            Some(Backend::Linux($d)) => $e,
            None => false,
        }
    };
    ($s:ident, $call:ident, $d:ident => $e:expr) => {
        match $s.backend.get() {
            Some(Backend::Sim($d)) => $e.map_err(BackendError::Sim),
            Some(Backend::Linux($d)) => $e.map_err(BackendError::Linux),
            None => Err(BackendError::None),
        }
    };
}

impl Driver for SwitchDriver {
    type Error = BackendError;
    nrt_core::forward_driver!(switch);
}
