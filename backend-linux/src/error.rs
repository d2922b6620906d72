//! [`LinuxError`]: what went wrong talking to the kernel driver, and with which operation.

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};

use nrt_core::driver::{Arch, DriverError, ErrorKind};

use crate::image;

/// An error of the Linux backend: the operation that failed and why.
#[derive(Debug)]
pub struct LinuxError {
    op: &'static str,
    path: Option<PathBuf>,
    cause: Cause,
}

#[derive(Debug)]
enum Cause {
    /// A system call failed.
    Io(io::Error),
    /// No `neuronN` node in the device directory (the error's path).
    NoDevice,
    /// A sysfs file (the error's path) did not hold what the driver writes there.
    Parse(String),
    /// The cores per device of this architecture are not known and sysfs did not say.
    UnknownCoreCount(Arch),
    /// `NC_RESET_READY` reported a failed reset.
    Reset { device: u32, result: i32 },
    /// A core bitmap the legacy (64-core) reservation ioctl cannot carry.
    BitmapTooWide,
    /// The backend does not implement the operation yet.
    Unsupported,
    /// What the operation needs is not public (a fixed explanation).
    NotPublic(&'static str),
    /// The backend refused an argument.
    Invalid(String),
    /// `NC_RESET_READY` reported that the wait was interrupted by a termination signal.
    ResetInterrupted { device: u32 },
    /// `NC_RESET` found a reset of this process pending, and no earlier reset told the
    /// process's id as the driver sees it.
    ResetIdUnknown { device: u32 },
    /// `CINIT_SET_STATE` left a core in an unexpected state.
    CoreInit { device: u32, core: u32, state: u32 },
    /// The device reported a non-zero execution status.
    Exec { status: u32, message: String },
    /// No completion arrived within the host-side bound.
    NoCompletion { core: u32, secs: u64 },
}

impl LinuxError {
    pub(crate) fn io(op: &'static str, err: io::Error) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::Io(err),
        }
    }

    pub(crate) fn io_at(op: &'static str, path: &Path, err: io::Error) -> Self {
        Self {
            op,
            path: Some(path.to_path_buf()),
            cause: Cause::Io(err),
        }
    }

    pub(crate) fn no_device(op: &'static str, dir: &Path) -> Self {
        Self {
            op,
            path: Some(dir.to_path_buf()),
            cause: Cause::NoDevice,
        }
    }

    pub(crate) fn parse(op: &'static str, path: &Path, text: &str) -> Self {
        Self {
            op,
            path: Some(path.to_path_buf()),
            cause: Cause::Parse(text.chars().take(64).collect()),
        }
    }

    pub(crate) fn unknown_core_count(op: &'static str, arch: Arch) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::UnknownCoreCount(arch),
        }
    }

    pub(crate) fn reset(op: &'static str, device: u32, result: i32) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::Reset { device, result },
        }
    }

    pub(crate) fn not_public(op: &'static str, what: &'static str) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::NotPublic(what),
        }
    }

    pub(crate) fn invalid(op: &'static str, what: impl Into<String>) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::Invalid(what.into()),
        }
    }

    pub(crate) fn reset_interrupted(op: &'static str, device: u32) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::ResetInterrupted { device },
        }
    }

    pub(crate) fn reset_id_unknown(op: &'static str, device: u32) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::ResetIdUnknown { device },
        }
    }

    pub(crate) fn core_init(op: &'static str, device: u32, core: u32, state: u32) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::CoreInit {
                device,
                core,
                state,
            },
        }
    }

    pub(crate) fn exec(op: &'static str, status: u32, message: String) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::Exec { status, message },
        }
    }

    pub(crate) fn no_completion(op: &'static str, core: u32, secs: u64) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::NoCompletion { core, secs },
        }
    }

    pub(crate) fn bitmap_too_wide(op: &'static str) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::BitmapTooWide,
        }
    }

    /// The operation that failed (an ioctl name, or what was being read).
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The file the operation was about, when there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The `errno` of a failed system call.
    pub fn raw_os_error(&self) -> Option<i32> {
        match &self.cause {
            Cause::Io(e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The underlying I/O error, if a system call failed.
    pub fn io_error(&self) -> Option<&io::Error> {
        match &self.cause {
            Cause::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Classifies an `errno`.
pub(crate) fn errno_kind(errno: i32) -> ErrorKind {
    match errno {
        libc::ENOENT | libc::ENODEV | libc::ENXIO => ErrorKind::NotFound,
        libc::EBUSY => ErrorKind::Busy,
        libc::EACCES | libc::EPERM => ErrorKind::PermissionDenied,
        libc::EINVAL => ErrorKind::InvalidArgument,
        libc::ENOMEM => ErrorKind::OutOfMemory,
        libc::ENOTTY | libc::EOPNOTSUPP | libc::ENOSYS => ErrorKind::Unsupported,
        _ => ErrorKind::Io,
    }
}

fn io_kind(err: &io::Error) -> ErrorKind {
    if let Some(errno) = err.raw_os_error() {
        return errno_kind(errno);
    }
    match err.kind() {
        io::ErrorKind::NotFound => ErrorKind::NotFound,
        io::ErrorKind::PermissionDenied => ErrorKind::PermissionDenied,
        io::ErrorKind::InvalidInput => ErrorKind::InvalidArgument,
        io::ErrorKind::OutOfMemory => ErrorKind::OutOfMemory,
        io::ErrorKind::Unsupported => ErrorKind::Unsupported,
        _ => ErrorKind::Io,
    }
}

impl DriverError for LinuxError {
    fn kind(&self) -> ErrorKind {
        match &self.cause {
            Cause::Io(e) => io_kind(e),
            Cause::NoDevice => ErrorKind::NotFound,
            Cause::Parse(_) => ErrorKind::Other,
            Cause::UnknownCoreCount(_) => ErrorKind::Unsupported,
            Cause::Reset { .. } => ErrorKind::Hardware,
            Cause::BitmapTooWide => ErrorKind::InvalidArgument,
            Cause::Unsupported | Cause::NotPublic(_) => ErrorKind::Unsupported,
            Cause::Invalid(_) => ErrorKind::InvalidArgument,
            Cause::ResetInterrupted { .. } => ErrorKind::Other,
            Cause::ResetIdUnknown { .. } => ErrorKind::Busy,
            Cause::CoreInit { .. } => ErrorKind::Hardware,
            Cause::Exec { status, .. } => match *status {
                image::STATUS_FAILED => ErrorKind::Execution,
                image::STATUS_TIMEOUT => ErrorKind::Timeout,
                image::STATUS_MALFORMED => ErrorKind::InvalidArgument,
                _ => ErrorKind::Hardware,
            },
            Cause::NoCompletion { .. } => ErrorKind::Timeout,
        }
    }

    /// "not implemented by the Linux backend yet": the default of every capability this
    /// backend does not implement (none today: every method is implemented, see the crate docs).
    fn unsupported(op: &'static str) -> Self {
        Self {
            op,
            path: None,
            cause: Cause::Unsupported,
        }
    }
}

impl fmt::Display for LinuxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "{} {}: ", self.op, path.display())?,
            None => write!(f, "{}: ", self.op)?,
        }
        match &self.cause {
            Cause::Io(e) => write!(f, "{e}"),
            Cause::NoDevice => f.write_str("no Neuron device node (neuronN) found"),
            Cause::Parse(text) => write!(f, "unexpected content {text:?}"),
            Cause::UnknownCoreCount(arch) => write!(
                f,
                "cores per device of {arch:?} unknown and sysfs core_count unreadable"
            ),
            Cause::Reset { device, result } => {
                write!(f, "core reset of neuron{device} failed (result {result})")
            }
            Cause::BitmapTooWide => f.write_str(
                "cores above 63 cannot be released through the legacy 64-core reservation ioctl",
            ),
            Cause::Unsupported => f.write_str("not implemented by the Linux backend yet"),
            Cause::NotPublic(what) => f.write_str(what),
            Cause::Invalid(what) => f.write_str(what),
            Cause::ResetInterrupted { device } => write!(
                f,
                "waiting for the core reset of neuron{device} was interrupted by a termination \
                 signal"
            ),
            Cause::ResetIdUnknown { device } => write!(
                f,
                "a reset of this process is already pending on neuron{device} and its request \
                 id is unknown"
            ),
            Cause::CoreInit {
                device,
                core,
                state,
            } => write!(
                f,
                "core {core} of neuron{device} is in core-init state {state} (another \
                 initialisation did not complete)"
            ),
            Cause::Exec { status, message } => {
                let what = match *status {
                    image::STATUS_FAILED => "the program failed",
                    image::STATUS_TIMEOUT => "the program did not finish within the timeout",
                    image::STATUS_MALFORMED => "the device found the descriptor or image malformed",
                    _ => "unknown execution status",
                };
                write!(f, "{what} (status {status})")?;
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            Cause::NoCompletion { core, secs } => write!(
                f,
                "no completion from core {core} within {secs} s (a real Neuron device does not \
                 run simulator programs)"
            ),
        }
    }
}

impl std::error::Error for LinuxError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Io(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use nrt_core::status::NrtStatus;

    fn os(errno: i32) -> LinuxError {
        LinuxError::io("TEST", io::Error::from_raw_os_error(errno))
    }

    #[test]
    fn errno_maps_to_portable_kinds() {
        assert_eq!(os(libc::ENOENT).kind(), ErrorKind::NotFound);
        assert_eq!(os(libc::EBUSY).kind(), ErrorKind::Busy);
        assert_eq!(os(libc::EACCES).kind(), ErrorKind::PermissionDenied);
        assert_eq!(os(libc::EPERM).kind(), ErrorKind::PermissionDenied);
        assert_eq!(os(libc::EINVAL).kind(), ErrorKind::InvalidArgument);
        assert_eq!(os(libc::ENOMEM).kind(), ErrorKind::OutOfMemory);
        assert_eq!(os(libc::ENOTTY).kind(), ErrorKind::Unsupported);
        assert_eq!(os(libc::EIO).kind(), ErrorKind::Io);
        assert_eq!(os(libc::EBUSY).status(), NrtStatus::ExecNcBusy);
        assert_eq!(os(libc::EBUSY).raw_os_error(), Some(libc::EBUSY));
    }

    #[test]
    fn other_causes_map_to_kinds_and_display_the_operation() {
        let e = LinuxError::no_device("discover", Path::new("/dev"));
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(e.to_string().starts_with("discover /dev: "), "{e}");
        assert_eq!(e.path(), Some(Path::new("/dev")));
        assert_eq!(
            LinuxError::reset("NC_RESET", 1, -5).kind(),
            ErrorKind::Hardware
        );
        assert_eq!(
            LinuxError::unknown_core_count("discover", Arch::V4).kind(),
            ErrorKind::Unsupported
        );
        let p = LinuxError::parse("driver_version", Path::new("/x"), "garbage");
        assert_eq!(p.kind(), ErrorKind::Other);
        assert!(p.to_string().contains("garbage"));
        assert!(p.io_error().is_none());
        let io_err = LinuxError::io("x", io::Error::new(io::ErrorKind::NotFound, "gone"));
        assert_eq!(io_err.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn execution_statuses_map_to_kinds_with_the_device_message() {
        let failed = LinuxError::exec("submit", 1, "hazard on t0".into());
        assert_eq!(failed.kind(), ErrorKind::Execution);
        assert_eq!(failed.status(), NrtStatus::ExecCompletedWithErr);
        assert_eq!(
            failed.to_string(),
            "submit: the program failed (status 1): hazard on t0"
        );
        assert_eq!(
            LinuxError::exec("submit", 2, String::new()).kind(),
            ErrorKind::Timeout
        );
        assert_eq!(
            LinuxError::exec("submit", 3, String::new()).kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            LinuxError::exec("submit", 9, String::new()).kind(),
            ErrorKind::Hardware
        );
        let late = LinuxError::no_completion("submit", 2, 40);
        assert_eq!(late.kind(), ErrorKind::Timeout);
        assert_eq!(late.status(), NrtStatus::Timeout);
        let np = LinuxError::not_public("submit", "not public");
        assert_eq!(np.kind(), ErrorKind::Unsupported);
        assert_eq!(np.to_string(), "submit: not public");
        assert_eq!(
            LinuxError::core_init("CINIT_SET_STATE", 0, 1, 3).kind(),
            ErrorKind::Hardware
        );
    }
}
