//! Raw driver calls for the emulator's tests: open a device node, issue an ioctl with a
//! pointer argument, and the emulator harness with a loud failure when the kernel refuses it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use nrt_emu::{Accounting, InProcess, InProcessConfig};

/// Runs `body` under an in-process emulator; fails the test (with the kernel's reason) when
/// seccomp user notification is unavailable.
pub(crate) fn emulate<T: Send>(
    cfg: InProcessConfig,
    body: impl FnOnce(&InProcess) -> T + Send,
) -> (T, Accounting) {
    match InProcess::run(cfg, body) {
        Ok(r) => r,
        Err(e) => panic!(
            "nrt-emu cannot run here: {e} (seccomp user notification is required; this test \
             fails rather than pass without emulating anything)"
        ),
    }
}

/// `open(path, flags)`.
pub(crate) fn open(path: &Path, flags: i32) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `ioctl(fd, request, arg)`: the return value, or the errno.
pub(crate) fn ioctl_ptr(fd: &OwnedFd, request: u32, arg: *mut u8) -> Result<i32, i32> {
    // SAFETY: the caller passes a pointer the driver may read and write as the request says
    // (or a deliberately bad one, which the emulator must answer with EFAULT).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, arg) };
    if rc < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(rc)
    }
}

/// `ioctl` on a byte buffer holding the struct.
pub(crate) fn ioctl(fd: &OwnedFd, request: u32, arg: &mut [u8]) -> Result<i32, i32> {
    ioctl_ptr(fd, request, arg.as_mut_ptr())
}

/// Little-endian field access on a struct buffer.
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
pub(crate) fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

// Request numbers, spelled out here independently of the crate's table.
pub(crate) const COMPATIBLE_VERSION: u32 = 0x4008_4e5d;
pub(crate) const DEVICE_BASIC_INFO: u32 = 0x4008_4e64;
pub(crate) const DRIVER_INFO_GET: u32 = 0x8018_4e6e;
pub(crate) const DRIVER_INFO_SET: u32 = 0x4018_4e6e;
pub(crate) const CRWL_NC_RANGE_MARK: u32 = 0x4008_4e55;
pub(crate) const CRWL_NC_RANGE_MARK_EXT0: u32 = 0xc050_4e55;
pub(crate) const CRWL_NC_RANGE_UNMARK_EXT0: u32 = 0x4050_4e56;
pub(crate) const MEM_ALLOC_V2MT64: u32 = 0x8038_4e66;
pub(crate) const MEM_FREE: u32 = 0x8008_4e16;
pub(crate) const MEM_GET_EXTENDED_INFO: u32 = 0x8008_4e1d;
pub(crate) const MEM_BUF_COPY64: u32 = 0xc028_4e18;
pub(crate) const MEM_COPY64: u32 = 0x8028_4e17;
pub(crate) const MEMSET64: u32 = 0x8020_4e1c;
pub(crate) const NC_RESET: u32 = 0x8008_4e67;
pub(crate) const NC_RESET_READY: u32 = 0x8008_4e68;
pub(crate) const CINIT_SET_STATE: u32 = 0x4008_4e5b;
pub(crate) const SEMAPHORE_READ: u32 = 0xc008_4e2b;
pub(crate) const SEMAPHORE_WRITE: u32 = 0x8008_4e2c;
pub(crate) const SEMAPHORE_INCREMENT: u32 = 0x8008_4e29;
pub(crate) const SEMAPHORE_DECREMENT: u32 = 0x8008_4e2a;
pub(crate) const EVENT_SET: u32 = 0x8008_4e2d;
pub(crate) const EVENT_GET: u32 = 0xc008_4e2e;
pub(crate) const NOTIFICATIONS_INIT_V2: u32 = 0x8008_4e35;

/// `MEM_ALLOC_V2MT64`: the handle, or the errno.
pub(crate) fn alloc(
    fd: &OwnedFd,
    size: u64,
    align: u64,
    host: bool,
    nc_id: u32,
    mem_type: u32,
) -> Result<u64, i32> {
    let mut handle = 0u64;
    let mut a = [0u8; 56];
    put64(&mut a, 0, size);
    put64(&mut a, 8, align);
    put32(&mut a, 16, u32::from(host));
    put32(&mut a, 28, nc_id);
    put32(&mut a, 32, mem_type);
    put64(&mut a, 40, &mut handle as *mut u64 as u64);
    ioctl(fd, MEM_ALLOC_V2MT64, &mut a)?;
    Ok(handle)
}

/// `MEM_FREE`.
pub(crate) fn free(fd: &OwnedFd, handle: u64) -> Result<i32, i32> {
    let mut a = handle.to_le_bytes();
    ioctl(fd, MEM_FREE, &mut a)
}

/// `MEM_BUF_COPY64` between `buf` and the chunk.
pub(crate) fn buf_copy(
    fd: &OwnedFd,
    handle: u64,
    buf: &mut [u8],
    offset: u64,
    to_chunk: bool,
) -> Result<i32, i32> {
    let mut a = [0u8; 40];
    put64(&mut a, 0, handle);
    put64(&mut a, 8, buf.as_mut_ptr() as u64);
    put64(&mut a, 16, buf.len() as u64);
    put64(&mut a, 24, offset);
    put32(&mut a, 32, u32::from(to_chunk));
    ioctl(fd, MEM_BUF_COPY64, &mut a)
}

/// `MEM_GET_EXTENDED_INFO`: (return value, pa, mmap_offset, size, host_memory).
pub(crate) fn ext_info(fd: &OwnedFd, handle: u64) -> (Result<i32, i32>, u64, u64, u64, u32) {
    let mut a = [0u8; 48];
    put64(&mut a, 0, handle);
    let r = ioctl(fd, MEM_GET_EXTENDED_INFO, &mut a);
    (
        r,
        get64(&a, 24),
        get64(&a, 16),
        get64(&a, 40),
        get32(&a, 12),
    )
}

/// A semaphore request: the struct after the call.
pub(crate) fn sem(fd: &OwnedFd, request: u32, nc: u32, index: u32, value: u32) -> Result<u32, i32> {
    let mut a = [0u8; 12];
    put32(&mut a, 0, nc);
    put32(&mut a, 4, index);
    put32(&mut a, 8, value);
    ioctl(fd, request, &mut a)?;
    Ok(get32(&a, 8))
}

/// `CRWL_NC_RANGE_MARK_EXT0`: (result, bitmap word 0, max_nc_available).
pub(crate) fn mark(fd: &OwnedFd, count: u32, start: u32, end: u32) -> (Result<i32, i32>, u64, u32) {
    let mut a = [0u8; 80];
    put32(&mut a, 0, count);
    put32(&mut a, 4, start);
    put32(&mut a, 8, end);
    let r = ioctl(fd, CRWL_NC_RANGE_MARK_EXT0, &mut a);
    (r, get64(&a, 16), get32(&a, 12))
}

/// `CRWL_NC_RANGE_UNMARK_EXT0` of bitmap word 0.
pub(crate) fn unmark(fd: &OwnedFd, bits: u64) -> Result<i32, i32> {
    let mut a = [0u8; 80];
    put32(&mut a, 0, bits.count_ones());
    put64(&mut a, 16, bits);
    ioctl(fd, CRWL_NC_RANGE_UNMARK_EXT0, &mut a)
}
