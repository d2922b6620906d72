//! The seccomp side: the BPF filter that routes the driver's system calls to the supervisor
//! ([`install_filter`]) and the listener requests (`SECCOMP_IOCTL_NOTIF_*`).
//!
//! # The filter
//!
//! Hand-assembled classic BPF over `struct seccomp_data` (`nr` at 0, `arch` at 4, `args[i]` at
//! 16 + 8·i, little-endian):
//!
//! ```text
//!  0  ld  [4]                      ; arch
//!  1  jeq #AUDIT_ARCH, 0, →10      ; another ABI (i386, x32 numbers): allow
//!  2  ld  [0]                      ; nr
//!  3  jeq #__NR_ioctl, 0, →7
//!  4  ld  [24]                     ; low word of args[1], the request number
//!  5  and #0xff00                  ; its type byte
//!  6  jeq #0x4e00, →11, →10        ; 'N': notify, anything else: allow
//!  7  jeq #__NR_openat, →11, 0
//!  8  jeq #__NR_open, →11, 0       ; (aarch64 has no `open`: openat again)
//!  9  jeq #__NR_close, →11, 0
//! 10  ret #SECCOMP_RET_ALLOW
//! 11  ret #SECCOMP_RET_USER_NOTIF
//! ```
//!
//! `openat`/`open`/`close` are notified so the supervisor can model what the driver does at
//! open (attach the process, `EBUSY` past 16 processes) and at flush (unmark the process's
//! cores, detach); it lets every one of them proceed (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`)
//! unless the driver would refuse the open. An `ioctl` whose type byte is `'N'` on a file that
//! is not an emulated device node also proceeds untouched (NVMe uses `'N'` too).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e; // AUDIT_ARCH_X86_64
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7; // AUDIT_ARCH_AARCH64

#[cfg(target_arch = "x86_64")]
const NR_OPEN: u32 = libc::SYS_open as u32;
#[cfg(not(target_arch = "x86_64"))]
const NR_OPEN: u32 = libc::SYS_openat as u32;

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

const fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The program documented in the module header.
fn program() -> [libc::sock_filter; 12] {
    [
        stmt(BPF_LD_W_ABS, 4),
        jump(BPF_JEQ_K, AUDIT_ARCH, 0, 8),
        stmt(BPF_LD_W_ABS, 0),
        jump(BPF_JEQ_K, libc::SYS_ioctl as u32, 0, 3),
        stmt(BPF_LD_W_ABS, 24),
        stmt(BPF_AND_K, 0xff00),
        jump(BPF_JEQ_K, u32::from(b'N') << 8, 4, 3),
        jump(BPF_JEQ_K, libc::SYS_openat as u32, 3, 0),
        jump(BPF_JEQ_K, NR_OPEN, 2, 0),
        jump(BPF_JEQ_K, libc::SYS_close as u32, 1, 0),
        stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
        stmt(BPF_RET_K, libc::SECCOMP_RET_USER_NOTIF),
    ]
}

/// Installs the emulator's seccomp filter on the **calling thread** (no `TSYNC`; threads it
/// spawns afterwards inherit it) after setting `no_new_privs`, and returns the listener fd
/// for [`Emulator::serve`](crate::Emulator::serve).
///
/// The filter cannot be removed: once the listener is closed, every notified system call of
/// the thread (`openat`, `close`, `'N'` ioctls) fails with `ENOSYS`. Install it on a thread
/// (or in a process) that ends when the emulation does. The kernel refuses a second listener
/// in the same filter chain (`EBUSY`).
pub fn install_filter() -> io::Result<OwnedFd> {
    let filter = program();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `prog` points at `filter`, which outlives the call; the kernel copies it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

// `_IOWR('!', 0, struct seccomp_notif)`, `_IOWR('!', 1, struct seccomp_notif_resp)`,
// `_IOW('!', 2, __u64)`.
const NOTIF_RECV: u64 = 0xc050_2100;
const NOTIF_SEND: u64 = 0xc018_2101;
const NOTIF_ID_VALID: u64 = 0x4008_2102;

const _: () = assert!(size_of::<libc::seccomp_notif>() == 0x50);
const _: () = assert!(size_of::<libc::seccomp_notif_resp>() == 0x18);

/// One notified system call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Notif {
    pub(crate) id: u64,
    /// Thread id of the caller (in the supervisor's pid namespace).
    pub(crate) tid: u32,
    pub(crate) nr: i64,
    pub(crate) args: [u64; 6],
}

/// How the supervisor answers a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// The system call returns `val`.
    Value(i64),
    /// The system call fails with this errno.
    Errno(i32),
    /// The kernel runs the system call itself.
    Continue,
}

/// Receives one notification. `Ok(None)`: nothing to serve after all (the caller died or was
/// interrupted before the supervisor read it).
pub(crate) fn recv(listener: &OwnedFd) -> io::Result<Option<Notif>> {
    // SAFETY: an all-zero seccomp_notif is valid (the kernel requires it zeroed).
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: NOTIF_RECV writes one seccomp_notif into `n`.
    let rc = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_RECV as _, &mut n) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EINTR | libc::ENOENT) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(Notif {
        id: n.id,
        tid: n.pid,
        nr: i64::from(n.data.nr),
        args: n.data.args,
    }))
}

/// Sends the answer to notification `id`; a caller that died meanwhile is not an error.
pub(crate) fn send(listener: &OwnedFd, id: u64, answer: Answer) -> io::Result<()> {
    let (val, error, flags) = match answer {
        Answer::Value(v) => (v, 0, 0),
        Answer::Errno(e) => (0, -e, 0),
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: NOTIF_SEND reads one seccomp_notif_resp.
    let rc = unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_SEND as _, &mut resp) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOENT) {
            return Ok(());
        }
        return Err(e);
    }
    Ok(())
}

/// Whether notification `id` is still pending (its caller alive and waiting): what was read
/// from the caller's memory or `/proc` entries is then the caller's.
pub(crate) fn id_valid(listener: &OwnedFd, id: u64) -> bool {
    let mut id = id;
    // SAFETY: NOTIF_ID_VALID reads one u64.
    unsafe { libc::ioctl(listener.as_raw_fd(), NOTIF_ID_VALID as _, &mut id) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program() {
        let p = program();
        for (i, ins) in p.iter().enumerate() {
            if ins.code == BPF_JEQ_K {
                assert!(i + 1 + (ins.jt as usize) < p.len());
                assert!(i + 1 + (ins.jf as usize) < p.len());
            }
        }
        assert_eq!(p[10].k, libc::SECCOMP_RET_ALLOW);
        assert_eq!(p[11].k, libc::SECCOMP_RET_USER_NOTIF);
        // Instruction 6's targets are the two returns.
        assert_eq!(6 + 1 + p[6].jt as usize, 11);
        assert_eq!(6 + 1 + p[6].jf as usize, 10);
        assert_eq!(1 + 1 + p[1].jf as usize, 10);
        assert_eq!(3 + 1 + p[3].jf as usize, 7);
    }
}
