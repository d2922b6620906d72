//! [`AnyDriver`]: the simulator or the Linux driver behind one [`Driver`], and [`AnyError`],
//! the error of either.

use core::fmt;

use nrt_core::driver::{Driver, DriverError, ErrorKind};
use nrt_linux::{LinuxDriver, LinuxError};
use nrt_sim::{SimDriver, SimError};

/// The backend a selection runs on, once `auto` is resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// The simulator.
    Sim,
    /// The Linux driver.
    Linux,
}

impl BackendKind {
    /// `sim` or `linux`.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Linux => "linux",
        }
    }
}

/// The simulator or the Linux driver; every [`Driver`] method forwards to the one held.
#[derive(Debug)]
pub enum AnyDriver {
    /// The simulator.
    Sim(SimDriver),
    /// The Linux kernel driver.
    Linux(LinuxDriver),
}

impl AnyDriver {
    /// Which backend it is.
    pub const fn kind(&self) -> BackendKind {
        match self {
            AnyDriver::Sim(_) => BackendKind::Sim,
            AnyDriver::Linux(_) => BackendKind::Linux,
        }
    }

    /// The simulator driver, if it is one (its machine has the simulator's statistics and
    /// reports).
    pub const fn as_sim(&self) -> Option<&SimDriver> {
        match self {
            AnyDriver::Sim(d) => Some(d),
            AnyDriver::Linux(_) => None,
        }
    }

    /// The Linux driver, if it is one.
    pub const fn as_linux(&self) -> Option<&LinuxDriver> {
        match self {
            AnyDriver::Linux(d) => Some(d),
            AnyDriver::Sim(_) => None,
        }
    }
}

impl From<SimDriver> for AnyDriver {
    fn from(d: SimDriver) -> Self {
        AnyDriver::Sim(d)
    }
}

impl From<LinuxDriver> for AnyDriver {
    fn from(d: LinuxDriver) -> Self {
        AnyDriver::Linux(d)
    }
}

/// An error of an [`AnyDriver`], or of a front end that has no driver to forward to.
#[derive(Debug)]
pub enum AnyError {
    /// The simulator's.
    Sim(SimError),
    /// The Linux driver's.
    Linux(LinuxError),
    /// No backend did the operation: `what` says why.
    Unavailable {
        /// The portable classification.
        kind: ErrorKind,
        /// What happened, for the log.
        what: &'static str,
    },
}

impl AnyError {
    /// The error of a front end whose backend is not chosen (yet): [`ErrorKind::NotFound`].
    pub const fn no_backend() -> Self {
        AnyError::Unavailable {
            kind: ErrorKind::NotFound,
            what: "no Neuron backend selected",
        }
    }
}

impl fmt::Display for AnyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyError::Sim(e) => fmt::Display::fmt(e, f),
            AnyError::Linux(e) => fmt::Display::fmt(e, f),
            AnyError::Unavailable { what, .. } => f.write_str(what),
        }
    }
}

impl std::error::Error for AnyError {}

impl DriverError for AnyError {
    fn kind(&self) -> ErrorKind {
        match self {
            AnyError::Sim(e) => e.kind(),
            AnyError::Linux(e) => e.kind(),
            AnyError::Unavailable { kind, .. } => *kind,
        }
    }

    fn unsupported(operation: &'static str) -> Self {
        AnyError::Unavailable {
            kind: ErrorKind::Unsupported,
            what: operation,
        }
    }
}

/// Forwards to the driver held, wrapping its error.
macro_rules! any {
    (@value $s:ident, $d:ident => $e:expr) => {
        match $s {
            AnyDriver::Sim($d) => $e,
            AnyDriver::Linux($d) => $e,
        }
    };
    ($s:ident, $call:ident, $d:ident => $e:expr) => {
        match $s {
            AnyDriver::Sim($d) => $e.map_err(AnyError::Sim),
            AnyDriver::Linux($d) => $e.map_err(AnyError::Linux),
        }
    };
}

impl Driver for AnyDriver {
    type Error = AnyError;
    nrt_core::forward_driver!(any);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use nrt_core::driver::DriverCall;
    use nrt_core::{FrameworkType, NrtStatus, Runtime};
    use nrt_sim::Instance;

    use super::*;

    #[test]
    fn the_simulator_runs_behind_any_driver() {
        let rt = Runtime::new(AnyDriver::from(SimDriver::new(Instance::Trn2, 1)));
        rt.init(FrameworkType::NoFw, "", "", &[]).unwrap();
        assert_eq!(rt.visible_lnc_count().unwrap(), 4);
        assert!(rt.driver().is_funtime());
        rt.close();
    }

    #[test]
    fn errors_keep_their_backend_and_kind() {
        let d = AnyDriver::from(SimDriver::new(Instance::Trn1, 1));
        // Funtime has no kernel driver: the simulator's own error comes through.
        let e = d.driver_version().unwrap_err();
        assert!(matches!(e, AnyError::Sim(_)));
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.to_string().starts_with("simulated driver: "), "{e}");
        let e = AnyError::unsupported(DriverCall::Submit.method());
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(e.to_string(), "submit");
        let e = AnyError::no_backend();
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.status(), NrtStatus::Failure);
        let linux = AnyDriver::from(LinuxDriver::with_roots("/nonexistent", "/nonexistent"));
        assert_eq!(linux.kind(), BackendKind::Linux);
        assert!(linux.as_sim().is_none() && linux.as_linux().is_some());
        assert!(matches!(linux.discover().unwrap_err(), AnyError::Linux(_)));
    }
}
