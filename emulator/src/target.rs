//! The calling thread of a notification, seen from the supervisor: its memory
//! (`process_vm_readv` / `process_vm_writev`) and what `/proc` says about it (thread group,
//! the file behind an fd and the fd's open flags).

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use crate::filter;

/// Why an access to the caller failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The address range is not readable/writable in the caller: the driver's `EFAULT`.
    Efault,
    /// The notification is no longer pending (the caller died or was interrupted): answer
    /// nothing.
    Gone,
}

/// The caller of one notification.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    listener: &'a OwnedFd,
    id: u64,
    /// Thread id.
    pub(crate) tid: u32,
    /// Thread-group id (the process).
    pub(crate) tgid: u32,
}

/// Bytes moved per `process_vm_*` call for bulk copies.
pub(crate) const CHUNK: usize = 64 << 10;

impl<'a> Target<'a> {
    pub(crate) fn new(listener: &'a OwnedFd, id: u64, tid: u32, tgid: u32) -> Self {
        Self {
            listener,
            id,
            tid,
            tgid,
        }
    }

    /// Whether the notification is still pending.
    pub(crate) fn valid(&self) -> bool {
        filter::id_valid(self.listener, self.id)
    }

    /// Reads `len` bytes at `addr` of the caller.
    pub(crate) fn read(&self, addr: u64, len: usize) -> Result<Vec<u8>, Fault> {
        let mut buf = vec![0u8; len];
        self.read_into(addr, &mut buf)?;
        Ok(buf)
    }

    /// Fills `buf` from `addr` of the caller.
    pub(crate) fn read_into(&self, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        if buf.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: `local` describes `buf`, which is writable for its length; the remote
        // range is only read by the kernel on the caller's behalf.
        let n = unsafe { libc::process_vm_readv(self.tid as i32, &local, 1, &remote, 1, 0) };
        self.settle(n, buf.len())
    }

    /// Writes `data` at `addr` of the caller.
    pub(crate) fn write(&self, addr: u64, data: &[u8]) -> Result<(), Fault> {
        if data.is_empty() {
            return Ok(());
        }
        let local = libc::iovec {
            iov_base: data.as_ptr().cast_mut().cast(),
            iov_len: data.len(),
        };
        let remote = libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: `local` describes `data`, only read by the kernel.
        let n = unsafe { libc::process_vm_writev(self.tid as i32, &local, 1, &remote, 1, 0) };
        self.settle(n, data.len())
    }

    fn settle(&self, n: isize, want: usize) -> Result<(), Fault> {
        if !self.valid() {
            return Err(Fault::Gone);
        }
        if n < 0 || n as usize != want {
            return Err(Fault::Efault);
        }
        Ok(())
    }

    /// A NUL-terminated string at `addr` (at most `max` bytes), read page by page so that a
    /// string ending just before an unmapped page is still read.
    pub(crate) fn read_cstr(&self, addr: u64, max: usize) -> Result<Vec<u8>, Fault> {
        let mut out = Vec::new();
        let mut at = addr;
        while out.len() < max {
            let to_page_end = 4096 - (at % 4096) as usize;
            let n = to_page_end.min(max - out.len());
            let piece = self.read(at, n)?;
            if let Some(end) = piece.iter().position(|&b| b == 0) {
                out.extend_from_slice(piece.get(..end).unwrap_or(&[]));
                return Ok(out);
            }
            out.extend_from_slice(&piece);
            at = at.wrapping_add(n as u64);
        }
        Err(Fault::Efault)
    }
}

/// The thread group (process id) of thread `tid`.
pub(crate) fn tgid_of(tid: u32) -> io::Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no Tgid in status"))
}

/// Whether `tid` is (still) a thread of process `tgid`.
pub(crate) fn is_thread_of(tid: u32, tgid: u32) -> bool {
    std::fs::symlink_metadata(format!("/proc/{tgid}/task/{tid}")).is_ok()
}

/// `(st_dev, st_ino)` of a file.
pub(crate) type FileId = (u64, u64);

/// The file behind fd `fd` of thread `tid`, if the fd is open.
pub(crate) fn fd_file(tid: u32, fd: u64) -> Option<FileId> {
    let fd = i32::try_from(fd).ok().filter(|&fd| fd >= 0)?;
    let meta = std::fs::metadata(format!("/proc/{tid}/fd/{fd}")).ok()?;
    Some((meta.dev(), meta.ino()))
}

/// The open flags (`O_ACCMODE` and the rest) of fd `fd` of thread `tid`.
pub(crate) fn fd_flags(tid: u32, fd: u64) -> Option<i32> {
    let info = std::fs::read_to_string(format!("/proc/{tid}/fdinfo/{fd}")).ok()?;
    let octal = info.lines().find_map(|l| l.strip_prefix("flags:"))?;
    i32::from_str_radix(octal.trim(), 8).ok()
}

/// The file `openat(dirfd, path)` of thread `tid` would open, resolved in the caller's own
/// view of the file system (its root, working directory and fds through `/proc`), if it
/// exists.
pub(crate) fn open_target(tid: u32, dirfd: i32, path: &[u8]) -> Option<FileId> {
    if path.is_empty() {
        return None;
    }
    let path = OsStr::from_bytes(path);
    let base = if path.as_bytes().first() == Some(&b'/') {
        PathBuf::from(format!("/proc/{tid}/root"))
    } else if dirfd == libc::AT_FDCWD {
        PathBuf::from(format!("/proc/{tid}/cwd"))
    } else {
        PathBuf::from(format!("/proc/{tid}/fd/{dirfd}"))
    };
    let rel = path
        .as_bytes()
        .iter()
        .position(|&b| b != b'/')
        .map_or(OsStr::new(""), |i| {
            OsStr::from_bytes(path.as_bytes().get(i..).unwrap_or(&[]))
        });
    let meta = std::fs::metadata(base.join(rel)).ok()?;
    Some((meta.dev(), meta.ino()))
}
