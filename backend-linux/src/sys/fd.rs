//! Device file descriptors.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// How a device node is opened; the driver treats the two very differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// `O_WRONLY`: a "free access" fd. No pid attach; only the misc ioctls are served
    /// (reservation, compatible version, basic/driver info). Closing **any** such fd of the
    /// process unmarks every core range the process reserved.
    Misc,
    /// `O_RDWR`: attaches the calling process to the device (at most 16 per device); every
    /// ioctl is served. Closing the last one of the process tears down its per-device state.
    Attach,
}

/// An owning file descriptor on a Neuron device node (`O_CLOEXEC`), closed on drop.
#[derive(Debug)]
pub struct DeviceFd {
    fd: OwnedFd,
    mode: OpenMode,
}

impl DeviceFd {
    /// Opens `path` in `mode`. Never creates the file.
    pub fn open(path: &Path, mode: OpenMode) -> io::Result<Self> {
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Misc => options.write(true),
            OpenMode::Attach => options.read(true).write(true),
        };
        // `File` owns the descriptor from the moment `open(2)` returns it.
        let file = options.open(path)?;
        Ok(Self {
            fd: OwnedFd::from(file),
            mode,
        })
    }

    /// The mode the fd was opened in.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }
}

impl AsFd for DeviceFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
