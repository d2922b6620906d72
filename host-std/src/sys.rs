//! The crate's only `unsafe` code: thin wrappers over the libc calls it needs.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Registers `child` as a `pthread_atfork` child handler (no prepare or parent handler).
/// Returns `pthread_atfork`'s result: 0 on success, an error number otherwise.
pub(crate) fn pthread_atfork_child(child: unsafe extern "C" fn()) -> i32 {
    // SAFETY: null prepare and parent handlers are allowed; `child` is a valid `extern "C"`
    // function with the expected signature that lives for the whole process (it is a fn item).
    unsafe { libc::pthread_atfork(None, None, Some(child)) }
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Registers the process for `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`; `true` on success.
pub(crate) fn membarrier_register() -> bool {
    // SAFETY: `membarrier` takes integer arguments only and touches no memory of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
            0,
            0,
        )
    };
    r == 0
}

/// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: every running thread of the process executes
/// a full memory barrier before this returns. Only called after a successful
/// [`membarrier_register`], after which the kernel documents no failure; if it did fail anyway
/// the registry's protocol would be unsound, so the process aborts rather than continue.
pub(crate) fn membarrier() {
    // SAFETY: as in `membarrier_register`.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if r != 0 {
        std::process::abort();
    }
}

/// Whether `path` passes `access(path, X_OK)`.
pub(crate) fn access_executable(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        // A path with an interior NUL names no file.
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; `access` only reads
    // it.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// The calling thread's kernel thread id (`gettid`).
pub(crate) fn gettid() -> i64 {
    // SAFETY: `gettid` takes no arguments, cannot fail and touches no memory.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    // `c_long` is `i64` only on 64-bit targets.
    #[allow(clippy::useless_conversion)]
    i64::from(tid)
}

/// Writes all of `buf` to file descriptor 2, without taking std's stderr lock (so a forked
/// child can still log if another thread of the parent held that lock at `fork`). Errors are
/// ignored: a log line that cannot be written is dropped.
pub(crate) fn write_stderr(mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: `buf` is a valid, initialised byte slice for `buf.len()` bytes; `write` only
        // reads it. An invalid descriptor 2 yields EBADF, not undefined behaviour.
        let n = unsafe { libc::write(libc::STDERR_FILENO, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let Ok(n) = usize::try_from(n) else { return };
        if n == 0 {
            return;
        }
        buf = buf.get(n..).unwrap_or(&[]);
    }
}

/// Test-only process control.
#[cfg(test)]
pub(crate) mod testing {
    use std::io;

    /// Forks; the child exits 0 if it observes a fork generation different from `before` and 1
    /// otherwise. The parent waits for it and returns its exit status (`None` if it did not exit
    /// normally).
    pub(crate) fn fork_child_sees_new_generation(before: u32) -> io::Result<Option<i32>> {
        // SAFETY: the child runs only async-signal-safe code, as required after `fork` in a
        // multithreaded process: one atomic load (`fork_generation`) and `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            let code = if crate::fork::fork_generation() != before {
                0
            } else {
                1
            };
            // SAFETY: `_exit` is async-signal-safe and never returns; it runs no destructors or
            // atexit handlers of the parent's state.
            unsafe { libc::_exit(code) }
        }
        let mut status: libc::c_int = 0;
        loop {
            // SAFETY: `status` is a valid, writable `c_int`; `pid` is our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            if r == pid {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)))
    }
}
