//! Typed requests: a request number paired with its argument type, and the calls.

use core::marker::PhantomData;
use std::io;

use rustix::ioctl::{Ioctl, IoctlOutput, Opcode};

use super::fd::DeviceFd;
use super::mem::*;
use super::numbers::*;
use super::structs::*;

mod sealed {
    /// Implemented only by the `#[repr(C)]` argument structs of this module.
    pub trait Sealed {}
}

/// A kernel ioctl argument struct mirrored in this module: `#[repr(C)]`, integer fields only
/// (so any bytes the kernel writes form a valid value). Sealed.
pub trait KernelArg: sealed::Sealed {
    /// The C name, e.g. `struct neuron_ioctl_compatible_version`.
    const C_NAME: &'static str;
}

macro_rules! kernel_arg {
    ($($ty:ty => $c:literal),* $(,)?) => {$(
        impl sealed::Sealed for $ty {}
        impl KernelArg for $ty {
            const C_NAME: &'static str = $c;
        }
    )*};
}

kernel_arg! {
    CompatibleVersion => "struct neuron_ioctl_compatible_version",
    DeviceBasicInfo => "struct neuron_ioctl_device_basic_info",
    DeviceDriverInfo => "struct neuron_ioctl_device_driver_info",
    CrwlNcMap => "struct neuron_ioctl_crwl_nc_map",
    CrwlNcMapExt => "struct neuron_ioctl_crwl_nc_map_ext",
    DeviceReset => "struct neuron_ioctl_device_reset",
    DeviceReady => "struct neuron_ioctl_device_ready",
    CinitSet => "struct neuron_ioctl_cinit_set",
    MemAllocV2 => "struct neuron_ioctl_mem_alloc_v2",
    MemAllocV2Mt => "struct neuron_ioctl_mem_alloc_v2_mem_type",
    MemAllocV2Mt64 => "struct neuron_ioctl_mem_alloc_v2_mem_type64",
    MemFree => "struct neuron_ioctl_mem_free",
    MemGetExtendedInfo => "struct neuron_ioctl_mem_get_extended_info",
    MemBufCopy => "struct neuron_ioctl_mem_buf_copy",
    MemBufCopy64 => "struct neuron_ioctl_mem_buf_copy64",
    MemCopy => "struct neuron_ioctl_mem_copy",
    MemCopy64 => "struct neuron_ioctl_mem_copy64",
    Memset => "struct neuron_ioctl_memset",
    Memset64 => "struct neuron_ioctl_memset64",
    NotificationsInitV2 => "struct neuron_ioctl_notifications_init_v2",
    Semaphore => "struct neuron_ioctl_semaphore",
    NeuronUuid => "struct neuron_uuid",
    Crwl => "struct neuron_ioctl_crwl",
}

/// An argument struct with no user pointer in it: the kernel touches only the struct itself,
/// so any value of it may be passed to [`ioctl`]. Sealed; the structs that carry user
/// pointers ([`MemAllocV2`], [`MemAllocV2Mt`], [`MemAllocV2Mt64`], [`MemBufCopy`],
/// [`MemBufCopy64`]) do not implement it.
pub trait PlainArg: KernelArg {}

macro_rules! plain_arg {
    ($($ty:ty),* $(,)?) => {$( impl PlainArg for $ty {} )*};
}

plain_arg!(
    CompatibleVersion,
    DeviceBasicInfo,
    DeviceDriverInfo,
    CrwlNcMap,
    CrwlNcMapExt,
    DeviceReset,
    DeviceReady,
    CinitSet,
    MemFree,
    MemGetExtendedInfo,
    MemCopy,
    MemCopy64,
    Memset,
    Memset64,
    NotificationsInitV2,
    Semaphore,
    Crwl,
);

/// An ioctl request number paired with the argument type its kernel handler copies in and
/// out (`sizeof(T)` bytes through the pointer passed). Only this module builds them.
pub struct Request<T> {
    number: u32,
    _arg: PhantomData<fn(&mut T)>,
}

impl<T> Clone for Request<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Request<T> {}

impl<T> core::fmt::Debug for Request<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Request({:#010x})", self.number)
    }
}

impl<T: KernelArg> Request<T> {
    const fn new(number: u32) -> Self {
        Self {
            number,
            _arg: PhantomData,
        }
    }

    /// The request number passed to `ioctl(2)`.
    pub const fn number(self) -> u32 {
        self.number
    }
}

/// `NEURON_IOCTL_COMPATIBLE_VERSION` (misc: served on an `O_WRONLY` fd).
pub const COMPATIBLE_VERSION: Request<CompatibleVersion> =
    Request::new(NEURON_IOCTL_COMPATIBLE_VERSION);
/// `NEURON_IOCTL_DEVICE_BASIC_INFO` (misc).
pub const DEVICE_BASIC_INFO: Request<DeviceBasicInfo> =
    Request::new(NEURON_IOCTL_DEVICE_BASIC_INFO);
/// `NEURON_IOCTL_DRIVER_INFO_GET` (misc).
pub const DRIVER_INFO_GET: Request<DeviceDriverInfo> = Request::new(NEURON_IOCTL_DRIVER_INFO_GET);
/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK` (misc; the kernel copies the 24-byte legacy struct).
pub const CRWL_NC_RANGE_MARK: Request<CrwlNcMap> = Request::new(NEURON_IOCTL_CRWL_NC_RANGE_MARK);
/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0` (misc).
pub const CRWL_NC_RANGE_MARK_EXT0: Request<CrwlNcMapExt> =
    Request::new(NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0);
/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK` (misc; legacy 24-byte struct).
pub const CRWL_NC_RANGE_UNMARK: Request<CrwlNcMap> =
    Request::new(NEURON_IOCTL_CRWL_NC_RANGE_UNMARK);
/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0` (misc).
pub const CRWL_NC_RANGE_UNMARK_EXT0: Request<CrwlNcMapExt> =
    Request::new(NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0);
/// `NEURON_IOCTL_NC_RESET` (needs an `O_RDWR`, pid-attached fd).
pub const NC_RESET: Request<DeviceReset> = Request::new(NEURON_IOCTL_NC_RESET);
/// `NEURON_IOCTL_NC_RESET_READY` (needs an `O_RDWR` fd; blocks until the reset ends).
pub const NC_RESET_READY: Request<DeviceReady> = Request::new(NEURON_IOCTL_NC_RESET_READY);
/// `NEURON_IOCTL_CINIT_SET_STATE` (needs an `O_RDWR` fd).
pub const CINIT_SET_STATE: Request<CinitSet> = Request::new(NEURON_IOCTL_CINIT_SET_STATE);

/// `NEURON_IOCTL_MEM_ALLOC_V2` (user pointer: issue with [`super::mem_alloc`]).
pub const MEM_ALLOC_V2: Request<MemAllocV2> = Request::new(NEURON_IOCTL_MEM_ALLOC_V2);
/// `NEURON_IOCTL_MEM_ALLOC_V2MT` (user pointer: issue with [`super::mem_alloc`]).
pub const MEM_ALLOC_V2MT: Request<MemAllocV2Mt> = Request::new(NEURON_IOCTL_MEM_ALLOC_V2MT);
/// `NEURON_IOCTL_MEM_ALLOC_V2MT64` (user pointer: issue with [`super::mem_alloc`]).
pub const MEM_ALLOC_V2MT64: Request<MemAllocV2Mt64> = Request::new(NEURON_IOCTL_MEM_ALLOC_V2MT64);
/// `NEURON_IOCTL_MEM_FREE`.
pub const MEM_FREE: Request<MemFree> = Request::new(NEURON_IOCTL_MEM_FREE);
/// `NEURON_IOCTL_MEM_GET_EXTENDED_INFO` (a bad handle is a *positive* `EINVAL` return).
pub const MEM_GET_EXTENDED_INFO: Request<MemGetExtendedInfo> =
    Request::new(NEURON_IOCTL_MEM_GET_EXTENDED_INFO);
/// `NEURON_IOCTL_MEM_BUF_COPY` (user pointer: [`super::mem_buf_write`] / [`super::mem_buf_read`]).
pub const MEM_BUF_COPY: Request<MemBufCopy> = Request::new(NEURON_IOCTL_MEM_BUF_COPY);
/// `NEURON_IOCTL_MEM_BUF_COPY64` (user pointer: [`super::mem_buf_write`] /
/// [`super::mem_buf_read`]).
pub const MEM_BUF_COPY64: Request<MemBufCopy64> = Request::new(NEURON_IOCTL_MEM_BUF_COPY64);
/// `NEURON_IOCTL_MEM_COPY`.
pub const MEM_COPY: Request<MemCopy> = Request::new(NEURON_IOCTL_MEM_COPY);
/// `NEURON_IOCTL_MEM_COPY64`.
pub const MEM_COPY64: Request<MemCopy64> = Request::new(NEURON_IOCTL_MEM_COPY64);
/// `NEURON_IOCTL_MEMSET`.
pub const MEMSET: Request<Memset> = Request::new(NEURON_IOCTL_MEMSET);
/// `NEURON_IOCTL_MEMSET64`.
pub const MEMSET64: Request<Memset64> = Request::new(NEURON_IOCTL_MEMSET64);
/// `NEURON_IOCTL_NOTIFICATIONS_INIT_V2`.
pub const NOTIFICATIONS_INIT_V2: Request<NotificationsInitV2> =
    Request::new(NEURON_IOCTL_NOTIFICATIONS_INIT_V2);
/// `NEURON_IOCTL_SEMAPHORE_INCREMENT`.
pub const SEMAPHORE_INCREMENT: Request<Semaphore> = Request::new(NEURON_IOCTL_SEMAPHORE_INCREMENT);
/// `NEURON_IOCTL_SEMAPHORE_WRITE`.
pub const SEMAPHORE_WRITE: Request<Semaphore> = Request::new(NEURON_IOCTL_SEMAPHORE_WRITE);
/// `NEURON_IOCTL_CRWL_READER_ENTER`.
pub const CRWL_READER_ENTER: Request<Crwl> = Request::new(NEURON_IOCTL_CRWL_READER_ENTER);
/// `NEURON_IOCTL_CRWL_READER_EXIT`.
pub const CRWL_READER_EXIT: Request<Crwl> = Request::new(NEURON_IOCTL_CRWL_READER_EXIT);
/// `NEURON_IOCTL_CRWL_WRITER_ENTER` (`EALREADY`: this process already made the same model the
/// core's current one; the write lock is held all the same and must be downgraded).
pub const CRWL_WRITER_ENTER: Request<Crwl> = Request::new(NEURON_IOCTL_CRWL_WRITER_ENTER);
/// `NEURON_IOCTL_CRWL_WRITER_DOWNGRADE` (leaves the caller holding one read reference).
pub const CRWL_WRITER_DOWNGRADE: Request<Crwl> = Request::new(NEURON_IOCTL_CRWL_WRITER_DOWNGRADE);

/// One `ioctl(2)` through rustix: the request number and a pointer to the argument.
struct Call<'a, T> {
    number: u32,
    arg: &'a mut T,
}

// SAFETY: `opcode` is a request number this module paired with `T` (see `Request`); `as_ptr`
// points at a live, exclusively borrowed `T` for the whole call; the kernel may write the
// struct (`IS_MUTATING`); the output is the syscall's non-negative return value and reads
// nothing through the pointer.
unsafe impl<T> Ioctl for Call<'_, T> {
    type Output = i32;
    const IS_MUTATING: bool = true;

    fn opcode(&self) -> Opcode {
        self.number as Opcode
    }

    fn as_ptr(&mut self) -> *mut core::ffi::c_void {
        core::ptr::from_mut(self.arg).cast()
    }

    unsafe fn output_from_ptr(
        out: IoctlOutput,
        _extract_output: *mut core::ffi::c_void,
    ) -> rustix::io::Result<i32> {
        Ok(out)
    }
}

/// Issues `request` with `arg` on `fd`; `arg` must be plain data or a struct whose user
/// pointers the caller (in this module) has set from live borrows.
///
/// # Safety
///
/// Every user pointer `arg` holds must be valid for what the kernel does through it during
/// the call (see [`super::USER_POINTERS`]).
pub(super) unsafe fn raw_ioctl<T: KernelArg>(
    fd: &DeviceFd,
    request: Request<T>,
    arg: &mut T,
) -> io::Result<i32> {
    let call = Call {
        number: request.number,
        arg,
    };
    // SAFETY: `fd` is an open descriptor borrowed for the call. `request` can only be built
    // in this module, where each number is paired with the struct its kernel handler copies
    // (`sizeof(T)` bytes, checked against the driver's ABI table), so the kernel copies only
    // within `*arg`, a live, exclusively borrowed `#[repr(C)]` value whose fields are all
    // integers (any bytes written leave it valid). What it does through user pointers inside
    // `*arg` is this function's caller's obligation. The pointer does not outlive the call.
    Ok(unsafe { rustix::ioctl::ioctl(fd, call) }?)
}

/// `ioctl(fd, request, arg)` for a plain-data argument: returns the non-negative return
/// value, or the `errno` error.
///
/// The kernel may have written `arg` even on failure (the reservation ioctls copy the struct
/// back with `max_nc_available` on `EBUSY`). A positive return is the driver's, not an errno:
/// `NC_RESET` returns 1 for "already pending", several handlers return what `copy_to_user`
/// left uncopied, and `MEM_GET_EXTENDED_INFO` returns a positive `EINVAL` for a bad handle.
pub fn ioctl<T: PlainArg>(fd: &DeviceFd, request: Request<T>, arg: &mut T) -> io::Result<i32> {
    // SAFETY: a `PlainArg` holds no user pointer: the kernel touches only `*arg`.
    unsafe { raw_ioctl(fd, request, arg) }
}
