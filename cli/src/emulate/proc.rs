//! The program's process under `nrt emulate`: found on `PATH` before anything is set up,
//! forked, given the seccomp filter (whose listener it hands back over a socket pair with
//! `SCM_RIGHTS`) and executed; then reaped, with every process it leaves behind (the `nrt`
//! process is their subreaper), while the caller answers the filter's notifications.
//!
//! The child's protocol on its `SOCK_SEQPACKET` socket (close-on-exec), one message each:
//! `F` with the listener as ancillary data, or `E` + errno when the filter could not be
//! installed; then, only when `execv` fails, `X` + errno. A successful exec closes the
//! socket, which the parent reads as end of file.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

/// Why the program could not be started: a message and `nrt emulate`'s exit status for it.
#[derive(Debug)]
pub(crate) struct StartError {
    pub(crate) message: String,
    pub(crate) code: u8,
}

/// Exit status when the program was not found (as `env`, `timeout`, shells).
pub(crate) const NOT_FOUND: u8 = 127;
/// Exit status when the program was found but could not be executed.
pub(crate) const CANNOT_EXECUTE: u8 = 126;
/// Exit status for a failure of `nrt emulate` itself.
pub(crate) const OWN_FAILURE: u8 = 125;

/// The program's path and arguments, ready for `execv` (built before the fork: the child
/// allocates nothing between fork and exec beyond what installing the filter needs).
#[derive(Debug)]
pub(crate) struct Command {
    path: CString,
    /// The arguments; `argv` points into them.
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    shown: String,
}

/// `PATH` when the variable is not set (glibc's `execvp` default, less the current
/// directory).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Finds `program` as `execvp` would: a name with a slash is a path; another is looked up
/// in each directory of `PATH`, the first executable file winning.
pub(crate) fn resolve(program: &OsStr, path_var: Option<&OsStr>) -> Result<PathBuf, StartError> {
    let shown = program.to_string_lossy();
    if program.is_empty() {
        return Err(StartError {
            message: "the program's name is empty".into(),
            code: NOT_FOUND,
        });
    }
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return match std::fs::metadata(&p) {
            Err(e) => Err(StartError {
                message: format!("cannot run {shown}: {e}"),
                code: if e.kind() == io::ErrorKind::NotFound {
                    NOT_FOUND
                } else {
                    CANNOT_EXECUTE
                },
            }),
            Ok(_) if !is_executable_file(&p) => Err(StartError {
                message: format!("cannot run {shown}: not an executable file"),
                code: CANNOT_EXECUTE,
            }),
            Ok(_) => Ok(p),
        };
    }
    let dirs = path_var.unwrap_or(OsStr::new(DEFAULT_PATH));
    for dir in std::env::split_paths(dirs) {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(program);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
    }
    Err(StartError {
        message: format!("cannot run {shown}: not found in PATH"),
        code: NOT_FOUND,
    })
}

impl Command {
    /// The command `path` with `args` (`args[0]` is the name the program sees).
    pub(crate) fn new(path: &Path, args: &[OsString]) -> Result<Command, StartError> {
        let nul = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| StartError {
                message: format!("{}: an argument holds a NUL byte", s.to_string_lossy()),
                code: OWN_FAILURE,
            })
        };
        let path_c = nul(path.as_os_str())?;
        let args = args.iter().map(|a| nul(a)).collect::<Result<Vec<_>, _>>()?;
        let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        Ok(Command {
            path: path_c,
            _args: args,
            argv,
            shown: path.display().to_string(),
        })
    }
}

/// The child's process id, for the parent's signal forwarding (0: none yet).
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe; a stale pid is harmless (it is our zombie
        // until reaped).
        unsafe { libc::kill(pid, sig) };
    }
}

/// Signals a terminal or a supervisor may send `nrt emulate` itself: forwarded to the
/// program. SIGINT and SIGQUIT reach the program from the terminal directly (same process
/// group): `nrt emulate` ignores them and keeps answering until the program is gone.
const FORWARDED: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1, libc::SIGUSR2];
const IGNORED: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];

fn set_handler(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: a zeroed sigaction is valid (empty mask, no flags); the handler is SIG_DFL,
    // SIG_IGN or `forward`, which only calls async-signal-safe functions.
    unsafe {
        let mut sa: libc::sigaction = mem::zeroed();
        sa.sa_sigaction = handler;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// A message on the socket: a tag and an errno.
fn message(tag: u8, errno: i32) -> [u8; 5] {
    let e = errno.to_le_bytes();
    [tag, e[0], e[1], e[2], e[3]]
}

/// Sends `msg` with `fd` (when given) as `SCM_RIGHTS`; async-signal-safe.
fn send(sock: RawFd, msg: &[u8; 5], fd: Option<RawFd>) -> bool {
    // SAFETY: the iovec and control buffer outlive the call; the control message is laid
    // out with the CMSG_* macros within a buffer of CMSG_SPACE(sizeof(int)) bytes (an array
    // of u64, aligned for cmsghdr).
    unsafe {
        let mut iov = libc::iovec {
            iov_base: msg.as_ptr() as *mut libc::c_void,
            iov_len: msg.len(),
        };
        let mut control = [0u64; 4];
        let mut hdr: libc::msghdr = mem::zeroed();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        if let Some(fd) = fd {
            let space = libc::CMSG_SPACE(mem::size_of::<RawFd>() as u32) as usize;
            hdr.msg_control = control.as_mut_ptr().cast();
            hdr.msg_controllen = space;
            let cmsg = libc::CMSG_FIRSTHDR(&hdr);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        }
        libc::sendmsg(sock, &hdr, libc::MSG_NOSIGNAL) == msg.len() as isize
    }
}

/// Receives one message: its tag and errno, and a passed descriptor if any. `None` at end
/// of file.
fn recv(sock: RawFd) -> io::Result<Option<(u8, i32, Option<OwnedFd>)>> {
    let mut buf = [0u8; 5];
    let mut control = [0u64; 8];
    // SAFETY: the buffers outlive the call; the kernel fills at most msg_controllen bytes of
    // control data, which are walked with the CMSG_* macros; a descriptor it passes is ours.
    unsafe {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut hdr: libc::msghdr = mem::zeroed();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = control.as_mut_ptr().cast();
        hdr.msg_controllen = mem::size_of_val(&control);
        let n = loop {
            let n = libc::recvmsg(sock, &mut hdr, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                break n;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        let mut fd = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
                fd = Some(OwnedFd::from_raw_fd(raw));
            }
            cmsg = libc::CMSG_NXTHDR(&hdr, cmsg);
        }
        if n == 0 {
            return Ok(None);
        }
        if n != buf.len() as isize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a {n}-byte message from the program's process"),
            ));
        }
        let errno = i32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]);
        Ok(Some((buf[0], errno, fd)))
    }
}

/// The forked program: its process id and the parent's end of the socket.
#[derive(Debug)]
pub(crate) struct Child {
    pid: libc::pid_t,
    sock: OwnedFd,
    shown: String,
}

/// How the program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Killed(i32),
}

impl Ended {
    /// `nrt emulate`'s exit status for it: the program's, or 128 + the signal.
    pub(crate) fn code(self) -> u8 {
        match self {
            Ended::Exited(c) => (c & 0xff) as u8,
            Ended::Killed(s) => (128 + s).clamp(0, 255) as u8,
        }
    }
}

/// Forks; the child runs `install` (which installs the seccomp filter in it and returns the
/// listener), hands the listener to the parent and executes `cmd`. Returns the child and the
/// listener. The calling process becomes a child subreaper, so orphans of the program are
/// reaped by [`Child::reap`].
pub(crate) fn spawn(
    cmd: &Command,
    install: fn() -> io::Result<OwnedFd>,
) -> Result<(Child, OwnedFd), StartError> {
    let own = |what: &str, e: io::Error| StartError {
        message: format!("{what}: {e}"),
        code: OWN_FAILURE,
    };
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors socketpair writes.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(own("socketpair", io::Error::last_os_error()));
    }
    // SAFETY: socketpair returned two new descriptors, owned from here on.
    let (parent_end, child_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: prctl with an integer argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } < 0 {
        return Err(own(
            "prctl(PR_SET_CHILD_SUBREAPER)",
            io::Error::last_os_error(),
        ));
    }
    // Forwarding is in place before the program exists (it does nothing until CHILD is set).
    for sig in FORWARDED {
        set_handler(sig, forward as *const () as libc::sighandler_t);
    }
    for sig in IGNORED {
        set_handler(sig, libc::SIG_IGN);
    }
    // SAFETY: the child only makes system calls (and runs `install`) before exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(own("fork", io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(parent_end);
        child(cmd, child_end.as_raw_fd(), install);
    }
    CHILD.store(pid, Ordering::Relaxed);
    drop(child_end);
    let child = Child {
        pid,
        sock: parent_end,
        shown: cmd.shown.clone(),
    };
    let failed = |message: String| {
        // The child is exiting (or exited) on its own; reap it before reporting.
        let _ = child.wait_direct();
        Err(StartError {
            message,
            code: OWN_FAILURE,
        })
    };
    match recv(child.sock.as_raw_fd()) {
        Ok(Some((b'F', _, Some(listener)))) => Ok((child, listener)),
        Ok(Some((b'E', errno, _))) => failed(format!(
            "installing the seccomp filter in the program's process: {}",
            filter_error(io::Error::from_raw_os_error(errno))
        )),
        Ok(Some((tag, errno, _))) => failed(format!(
            "unexpected message {tag:#x} ({errno}) from the program's process"
        )),
        Ok(None) => {
            failed("the program's process ended before installing the seccomp filter".into())
        }
        Err(e) => failed(format!("reading from the program's process: {e}")),
    }
}

/// A failure to install the filter, with what it means.
fn filter_error(e: io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EINVAL) => {
            "; the kernel does not support seccomp user notification (SECCOMP_FILTER_FLAG_NEW_LISTENER and SECCOMP_RET_USER_NOTIF need Linux 5.0 or later)"
        }
        Some(libc::EBUSY) => {
            "; a seccomp filter with a listener is already installed (nrt emulate cannot run under another emulator or supervisor)"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "; the kernel or a security policy refuses new seccomp filters"
        }
        _ => "",
    };
    format!("{e}{hint}")
}

/// The child, from fork to exec: never returns.
fn child(cmd: &Command, sock: RawFd, install: fn() -> io::Result<OwnedFd>) -> ! {
    // The program starts with the default dispositions of the signals Rust's runtime
    // (SIGPIPE) or the parent set.
    for sig in FORWARDED.into_iter().chain(IGNORED).chain([libc::SIGPIPE]) {
        set_handler(sig, libc::SIG_DFL);
    }
    match install() {
        Ok(listener) => {
            // Only this sendmsg runs between the filter and exec: no notification of ours can
            // wait for a supervisor that does not hold the listener yet.
            if !send(sock, &message(b'F', 0), Some(listener.as_raw_fd())) {
                // SAFETY: _exit ends the process without running anything of ours.
                unsafe { libc::_exit(i32::from(OWN_FAILURE)) };
            }
            // Close-on-exec: closing it here would be a notified `close` (answered, but for
            // nothing).
            let _ = listener.into_raw_fd();
        }
        Err(e) => {
            send(sock, &message(b'E', e.raw_os_error().unwrap_or(0)), None);
            // SAFETY: as above.
            unsafe { libc::_exit(i32::from(OWN_FAILURE)) };
        }
    }
    // SAFETY: path and argv are NUL-terminated strings and a null-terminated array of them,
    // built before the fork; execv only returns on failure.
    unsafe { libc::execv(cmd.path.as_ptr(), cmd.argv.as_ptr()) };
    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    send(sock, &message(b'X', errno), None);
    let code = if errno == libc::ENOENT {
        NOT_FOUND
    } else {
        CANNOT_EXECUTE
    };
    // SAFETY: as above.
    unsafe { libc::_exit(i32::from(code)) }
}

fn ended(status: libc::c_int) -> Option<Ended> {
    if libc::WIFEXITED(status) {
        Some(Ended::Exited(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(Ended::Killed(libc::WTERMSIG(status)))
    } else {
        None
    }
}

impl Child {
    /// Waits for the direct child only.
    fn wait_direct(&self) -> io::Result<Ended> {
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if let Some(end) = ended(status) {
                CHILD.store(0, Ordering::Relaxed);
                return Ok(end);
            }
        }
    }

    /// Waits until the exec is known to have succeeded or failed, then reaps the program and
    /// every process it left behind. Returns how the program ended, or why it could not run.
    pub(crate) fn reap(&self) -> Result<Ended, StartError> {
        let exec = match recv(self.sock.as_raw_fd()) {
            Ok(None) => None,
            Ok(Some((b'X', errno, _))) => Some(io::Error::from_raw_os_error(errno)),
            Ok(Some((tag, errno, _))) => Some(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected message {tag:#x} ({errno})"),
            )),
            Err(e) => Some(e),
        };
        let mut program = None;
        loop {
            let mut status = 0;
            // SAFETY: `status` is a valid out-pointer.
            let r = unsafe { libc::waitpid(-1, &mut status, 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::ECHILD) => break,
                    _ => {
                        return Err(StartError {
                            message: format!("waiting for the program: {e}"),
                            code: OWN_FAILURE,
                        });
                    }
                }
            }
            if r == self.pid {
                program = ended(status);
                CHILD.store(0, Ordering::Relaxed);
            }
        }
        if let Some(e) = exec {
            let code = if e.raw_os_error() == Some(libc::ENOENT) {
                NOT_FOUND
            } else {
                CANNOT_EXECUTE
            };
            return Err(StartError {
                message: format!("cannot run {}: {e}", self.shown),
                code,
            });
        }
        program.ok_or_else(|| StartError {
            message: format!("{}: its exit status was lost", self.shown),
            code: OWN_FAILURE,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn resolve_follows_path_like_execvp() {
        let dir = tempfile::tempdir().unwrap();
        let (exe, data) = (dir.path().join("tool"), dir.path().join("data"));
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::write(&data, "").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path =
            std::env::join_paths(["/nonexistent-dir", dir.path().to_str().unwrap()]).unwrap();
        // The first executable file on PATH wins; a non-executable one is passed over.
        assert_eq!(resolve(OsStr::new("tool"), Some(&path)).unwrap(), exe);
        let e = resolve(OsStr::new("data"), Some(&path)).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (NOT_FOUND, "cannot run data: not found in PATH")
        );
        // A name with a slash is a path, PATH unused.
        assert_eq!(resolve(exe.as_os_str(), Some(OsStr::new(""))).unwrap(), exe);
        let e = resolve(data.as_os_str(), None).unwrap_err();
        assert_eq!(e.code, CANNOT_EXECUTE);
        let e = resolve(OsStr::new(""), None).unwrap_err();
        assert_eq!(e.code, NOT_FOUND);
        // Without PATH, the default directories.
        assert_eq!(
            resolve(OsStr::new("sh"), None)
                .unwrap()
                .file_name()
                .unwrap(),
            "sh"
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(Ended::Exited(0).code(), 0);
        assert_eq!(Ended::Exited(7).code(), 7);
        assert_eq!(Ended::Killed(libc::SIGKILL).code(), 137);
        assert_eq!(Ended::Killed(libc::SIGTERM).code(), 143);
    }
}
