//! The requests whose argument struct carries user pointers, each issued only by one safe
//! function here that sets the pointer from a borrow and checks what the kernel does with it.

use core::mem::{align_of, size_of};
use std::io;

use super::fd::DeviceFd;
use super::mem::*;
use super::request::*;
use super::{DriverFeatures, MemLocation, MemType};

/// What the kernel does through a user pointer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The kernel reads the pointed-to bytes (`copy_from_user`).
    KernelReads,
    /// The kernel writes the pointed-to bytes (`copy_to_user`).
    KernelWrites,
    /// Chosen per call by a field (`copy_to_mem_handle`: 1 reads, 0 writes).
    ByDirectionField,
}

/// How many bytes a user pointer spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// A fixed number of bytes.
    Bytes(usize),
    /// The value of another field of the struct.
    Field(&'static str),
}

/// One user pointer of an argument struct: what the kernel does through it, how far, and the
/// alignment this module guarantees. The pointer is only read during the call: its target
/// must live until the ioctl returns, no longer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserPointer {
    /// The C struct.
    pub c_struct: &'static str,
    /// The pointer field.
    pub field: &'static str,
    /// Reads, writes, or per the direction field.
    pub access: Access,
    /// Bytes reached.
    pub span: Span,
    /// Alignment of the target.
    pub align: usize,
}

/// Every user pointer of the structs this module mirrors.
pub const USER_POINTERS: &[UserPointer] = &[
    UserPointer {
        c_struct: "struct neuron_ioctl_mem_alloc_v2",
        field: "mem_handle",
        access: Access::KernelWrites,
        span: Span::Bytes(size_of::<u64>()),
        align: align_of::<u64>(),
    },
    UserPointer {
        c_struct: "struct neuron_ioctl_mem_alloc_v2_mem_type",
        field: "mem_handle",
        access: Access::KernelWrites,
        span: Span::Bytes(size_of::<u64>()),
        align: align_of::<u64>(),
    },
    UserPointer {
        c_struct: "struct neuron_ioctl_mem_alloc_v2_mem_type64",
        field: "mem_handle",
        access: Access::KernelWrites,
        span: Span::Bytes(size_of::<u64>()),
        align: align_of::<u64>(),
    },
    UserPointer {
        c_struct: "struct neuron_ioctl_mem_buf_copy",
        field: "buffer",
        access: Access::ByDirectionField,
        span: Span::Field("size"),
        align: 1,
    },
    UserPointer {
        c_struct: "struct neuron_ioctl_mem_buf_copy64",
        field: "buffer",
        access: Access::ByDirectionField,
        span: Span::Field("size"),
        align: 1,
    },
];

/// The request forms a driver serves, from its `DRIVER_INFO_GET` feature flags (no flags:
/// a driver older than that request, which serves the oldest forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemForm {
    /// `MEM_ALLOC64`: `MEM_ALLOC_V2MT64` and the 64-bit copy / memset forms.
    Wide,
    /// `MEM_ALLOC_TYPE` without `MEM_ALLOC64`: `MEM_ALLOC_V2MT`, 32-bit copies.
    Typed,
    /// Neither: `MEM_ALLOC_V2` (no memory type), 32-bit copies.
    Untyped,
}

impl MemForm {
    /// The forms a driver with `features` serves.
    pub fn from_features(features: DriverFeatures) -> Self {
        if features.contains(DriverFeatures::MEM_ALLOC64) {
            Self::Wide
        } else if features.contains(DriverFeatures::MEM_ALLOC_TYPE) {
            Self::Typed
        } else {
            Self::Untyped
        }
    }

    /// Whether sizes and offsets of 4 GiB and more are carried.
    pub fn is_wide(self) -> bool {
        self == Self::Wide
    }
}

/// What to allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocParams {
    /// Bytes (below 4 GiB unless [`MemForm::Wide`]).
    pub size: u64,
    /// Alignment in bytes.
    pub align: u64,
    /// Host or device memory.
    pub location: MemLocation,
    /// HBM index of device memory.
    pub dram_channel: u32,
    /// Core of the device the chunk is accounted to.
    pub nc_id: u32,
    /// Category (dropped by [`MemForm::Untyped`]).
    pub mem_type: MemType,
}

fn invalid(what: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// A positive ioctl return: the driver's own failure code (`copy_to_user` leftovers, a
/// positive `EINVAL`).
pub fn positive_return(ret: i32) -> io::Error {
    io::Error::other(format!("the driver returned {ret}"))
}

fn check_zero(ret: i32) -> io::Result<()> {
    if ret == 0 {
        Ok(())
    } else {
        Err(positive_return(ret))
    }
}

/// `MEM_ALLOC_V2MT64` / `MEM_ALLOC_V2MT` / `MEM_ALLOC_V2` (per `form`): allocates a chunk and
/// returns its handle, which the kernel writes through the struct's `mem_handle` pointer
/// (8 bytes, to a local `u64` of this function that outlives the call).
pub fn mem_alloc(fd: &DeviceFd, form: MemForm, p: &AllocParams) -> io::Result<u64> {
    if !form.is_wide() && p.size > u64::from(u32::MAX) {
        return Err(invalid(
            "allocations of 4 GiB or more need a driver with MEM_ALLOC64",
        ));
    }
    let mut handle: u64 = 0;
    let handle_ptr = core::ptr::from_mut(&mut handle) as u64;
    let host_memory = p.location.bits();
    let ret = match form {
        MemForm::Wide => {
            let mut arg = MemAllocV2Mt64 {
                size: p.size,
                align: p.align,
                host_memory,
                dram_channel: p.dram_channel,
                dram_region: 0,
                nc_id: p.nc_id,
                mem_type: p.mem_type.0,
                mem_handle: handle_ptr,
                pad: 0,
            };
            // SAFETY: `mem_handle` points at `handle`, an aligned, writable `u64` that lives
            // until this function returns; the kernel writes exactly 8 bytes there.
            unsafe { raw_ioctl(fd, MEM_ALLOC_V2MT64, &mut arg) }?
        }
        MemForm::Typed => {
            let mut arg = MemAllocV2Mt {
                size: p.size,
                align: p.align,
                host_memory,
                dram_channel: p.dram_channel,
                dram_region: 0,
                nc_id: p.nc_id,
                mem_type: p.mem_type.0,
                mem_handle: handle_ptr,
            };
            // SAFETY: as above: 8 bytes written to the live local `handle`.
            unsafe { raw_ioctl(fd, MEM_ALLOC_V2MT, &mut arg) }?
        }
        MemForm::Untyped => {
            let mut arg = MemAllocV2 {
                size: p.size,
                align: p.align,
                host_memory,
                dram_channel: p.dram_channel,
                dram_region: 0,
                nc_id: p.nc_id,
                mem_handle: handle_ptr,
            };
            // SAFETY: as above: 8 bytes written to the live local `handle`.
            unsafe { raw_ioctl(fd, MEM_ALLOC_V2, &mut arg) }?
        }
    };
    check_zero(ret)?;
    if handle == 0 {
        // 0 is never a valid handle: the kernel did not write it.
        return Err(io::Error::other("the driver returned no memory handle"));
    }
    Ok(handle)
}

/// Bytes per host-copy request. The driver's device path counts the remaining bytes of a
/// 64-bit copy in a `u32`, so no request carries 4 GiB or more; 1 GiB keeps each call short.
pub const MAX_BUF_COPY_LEN: usize = 1 << 30;

/// One host-copy request of `len` bytes at `buffer` (a live borrow of the caller).
///
/// # Safety
///
/// `buffer` must be valid for `len` bytes of reads (`to_device`) or writes (not `to_device`)
/// for the duration of the call.
unsafe fn buf_copy_one(
    fd: &DeviceFd,
    form: MemForm,
    handle: u64,
    offset: u64,
    buffer: u64,
    len: usize,
    to_device: bool,
) -> io::Result<()> {
    let copy_to_mem_handle = u32::from(to_device);
    let ret = if form.is_wide() {
        let mut arg = MemBufCopy64 {
            mem_handle: handle,
            buffer,
            size: len as u64,
            offset,
            copy_to_mem_handle,
        };
        // SAFETY: the caller guarantees `buffer` for `len` = `size` bytes in the direction
        // `copy_to_mem_handle` names.
        unsafe { raw_ioctl(fd, MEM_BUF_COPY64, &mut arg) }?
    } else {
        let (Ok(size), Ok(offset)) = (u32::try_from(len), u32::try_from(offset)) else {
            return Err(invalid(
                "host copies beyond 4 GiB need a driver with MEM_ALLOC64",
            ));
        };
        let mut arg = MemBufCopy {
            mem_handle: handle,
            buffer,
            size,
            offset,
            copy_to_mem_handle,
        };
        // SAFETY: as above, `size` = `len` bytes.
        unsafe { raw_ioctl(fd, MEM_BUF_COPY, &mut arg) }?
    };
    check_zero(ret)
}

/// `MEM_BUF_COPY64` / `MEM_BUF_COPY` buffer → chunk: copies `data` to `offset` of the chunk
/// `handle`. The kernel reads exactly `data.len()` bytes of `data` (split into requests of at
/// most [`MAX_BUF_COPY_LEN`]); the borrow outlives every call.
pub fn mem_buf_write(
    fd: &DeviceFd,
    form: MemForm,
    handle: u64,
    offset: u64,
    data: &[u8],
) -> io::Result<()> {
    let mut done = 0usize;
    for piece in data.chunks(MAX_BUF_COPY_LEN) {
        let at = offset
            .checked_add(done as u64)
            .ok_or_else(|| invalid("offset overflows"))?;
        // SAFETY: `piece` is a live shared borrow of `piece.len()` bytes, only read.
        unsafe {
            buf_copy_one(
                fd,
                form,
                handle,
                at,
                piece.as_ptr() as u64,
                piece.len(),
                true,
            )
        }?;
        done += piece.len();
    }
    Ok(())
}

/// `MEM_BUF_COPY64` / `MEM_BUF_COPY` chunk → buffer: fills `out` from `offset` of the chunk
/// `handle`. The kernel writes at most `out.len()` bytes of `out` (any bytes are valid `u8`s),
/// in requests of at most [`MAX_BUF_COPY_LEN`]; the exclusive borrow outlives every call.
pub fn mem_buf_read(
    fd: &DeviceFd,
    form: MemForm,
    handle: u64,
    offset: u64,
    out: &mut [u8],
) -> io::Result<()> {
    let mut done = 0usize;
    for piece in out.chunks_mut(MAX_BUF_COPY_LEN) {
        let at = offset
            .checked_add(done as u64)
            .ok_or_else(|| invalid("offset overflows"))?;
        let len = piece.len();
        // SAFETY: `piece` is a live exclusive borrow of `len` bytes; the kernel writes within it.
        unsafe { buf_copy_one(fd, form, handle, at, piece.as_mut_ptr() as u64, len, false) }?;
        done += len;
    }
    Ok(())
}
