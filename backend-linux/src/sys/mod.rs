//! The Neuron kernel driver's user-space ABI, as far as this backend uses it, and the only
//! `unsafe` code of the crate.
//!
//! * `#[repr(C)]` mirrors of the driver's ioctl argument structs (`neuron_ioctl.h`), each with
//!   compile-time size, alignment and field-offset asserts beside it (x86_64 / LP64 layout,
//!   which aarch64 shares for these all-integer structs): [`structs`] (lifecycle) and
//!   [`mem`] (memory, notification queues, semaphores, core locks).
//! * Request numbers ([`numbers`]): `const fn` composers mirroring the kernel's `_IOC` / `_IO` /
//!   `_IOR` / `_IOW` / `_IOWR`, and the exact constants of the driver header. Most of the older
//!   ioctls are declared with a *pointer* argument type, so their request number encodes an
//!   `_IOC_SIZE` of 8 rather than the struct size; the constants keep that encoding and a
//!   compile-time assert ties each one to its composer.
//! * [`Request`]: a request number paired with the one argument type its kernel handler copies.
//!   Only this module can build one. Requests whose struct is plain data ([`PlainArg`]) go
//!   through the safe [`ioctl`] wrapper. Requests whose struct carries *user pointers* (the
//!   allocation's handle pointer, the buffer of a host copy) cannot be issued with an arbitrary
//!   struct: each has one safe function here ([`mem_alloc`], [`mem_buf_write`],
//!   [`mem_buf_read`]) that builds the pointer from a borrow, states what the kernel reads or
//!   writes through it ([`UserPointer`], listed per struct in [`USER_POINTERS`]) and checks
//!   length, alignment and lifetime before the call.
//! * [`DeviceFd`]: an owning file descriptor on a `/dev/neuronN` node, closed on drop.
//! * [`Mapping`]: an `mmap` of a device fd (notification queue, host chunk), read and written
//!   only with volatile accesses, unmapped on drop.
//! * [`STRUCTS`] and [`REQUESTS`]: tables of everything defined here, computed from the Rust
//!   definitions, so tests can check them against the driver's machine-readable ABI.
//!
//! System calls go through `rustix` (its `linux_raw` backend, i.e. `linux-raw-sys`), not libc.

mod fd;
mod map;
pub mod mem;
pub mod numbers;
mod request;
pub mod structs;
mod tables;
#[cfg(test)]
mod tests;
mod userptr;

pub use fd::{DeviceFd, OpenMode};
pub use map::Mapping;
pub use mem::*;
pub use numbers::*;
pub use request::*;
pub use structs::*;
pub use tables::*;
pub use userptr::*;

// ---------------------------------------------------------------------------------------------
// Request-number composers (asm-generic/ioctl.h).

/// `_IOC_NONE`: no argument data.
pub const IOC_NONE: u32 = 0;
/// `_IOC_WRITE`: user space writes, the kernel reads.
pub const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: the kernel writes, user space reads.
pub const IOC_READ: u32 = 2;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_SIZEMASK: u32 = (1 << IOC_SIZEBITS) - 1;
const IOC_DIRMASK: u32 = 0b11;

/// `_IOC(dir, type, nr, size)`. `size` is masked to the 14 bits the encoding has (every
/// constant below is checked at compile time, so a truncation could not go unnoticed).
pub const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
    ((dir & IOC_DIRMASK) << IOC_DIRSHIFT)
        | (((size as u32) & IOC_SIZEMASK) << IOC_SIZESHIFT)
        | ((ty as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
}

/// `_IO(type, nr)`.
pub const fn io(ty: u8, nr: u8) -> u32 {
    ioc(IOC_NONE, ty, nr, 0)
}

/// `_IOR(type, nr, size)`.
pub const fn ior(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(IOC_READ, ty, nr, size)
}

/// `_IOW(type, nr, size)`.
pub const fn iow(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(IOC_WRITE, ty, nr, size)
}

/// `_IOWR(type, nr, size)`.
pub const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    ioc(IOC_READ | IOC_WRITE, ty, nr, size)
}

/// `NEURON_IOCTL_BASE`: the ioctl type character `'N'`.
pub const NEURON_IOCTL_BASE: u8 = b'N';

/// `_IOC_SIZE` encoded by an ioctl whose macro names a pointer type (`struct x *`): the size of
/// a pointer on the LP64 kernels the driver supports (it registers no `compat_ioctl`).
pub const POINTER_ARG_SIZE: usize = 8;

// ---------------------------------------------------------------------------------------------
// Driver constants.

/// `NEURON_ARCH_INVALID`.
pub const NEURON_ARCH_INVALID: u32 = 0;
/// `NEURON_ARCH_V1` (Inferentia).
pub const NEURON_ARCH_V1: u32 = 1;
/// `NEURON_ARCH_V2` (Trainium1 / Inferentia2).
pub const NEURON_ARCH_V2: u32 = 2;
/// `NEURON_ARCH_V3` (Trainium2).
pub const NEURON_ARCH_V3: u32 = 3;

/// PCI revision id of the hardware emulator (`narch_is_emu`).
pub const REVID_EMU: u32 = 240;
/// PCI revision id of the QEMU device model (`narch_is_qemu`).
pub const REVID_QEMU: u32 = 255;

/// `MAX_NEURON_DEVICE_COUNT`: device nodes the driver creates at most.
pub const MAX_NEURON_DEVICE_COUNT: u32 = 64;
/// `MAX_NC_PER_DEVICE`.
pub const MAX_NC_PER_DEVICE: u32 = 8;

/// `NEURON_NC_MAP_DEVICE`: an `nc_map` meaning "every core of the device".
pub const NEURON_NC_MAP_DEVICE: u32 = 0xffff_ffff;

/// `NEURON_DEVICE_DRIVER_INFO_VERSION0`: the only [`DeviceDriverInfo::version`] so far.
pub const NEURON_DEVICE_DRIVER_INFO_VERSION0: u32 = 0;

bitflags::bitflags! {
    /// `enum neuron_driver_feature_flag`: what the driver serves, from
    /// [`DeviceDriverInfo::feature_flags1`] ([`DeviceDriverInfo::features`]). Bits this version
    /// does not name are kept.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct DriverFeatures: u64 {
        /// `NEURON_DRIVER_FEATURE_DMABUF`.
        const DMABUF = 1 << 0;
        /// `NEURON_DRIVER_FEATURE_ASYNC_DMA`.
        const ASYNC_DMA = 1 << 1;
        /// `NEURON_DRIVER_FEATURE_BATCH_DMAQ_INIT`.
        const BATCH_DMAQ_INIT = 1 << 2;
        /// `NEURON_DRIVER_FEATURE_BIG_CORE_MAPS`: the `CRWL_NC_RANGE_*_EXT0` requests are
        /// served.
        const BIG_CORE_MAPS = 1 << 3;
        /// `NEURON_DRIVER_FEATURE_MEM_ALLOC_TYPE`.
        const MEM_ALLOC_TYPE = 1 << 4;
        /// `NEURON_DRIVER_FEATURE_HBM_SCRUB`.
        const HBM_SCRUB = 1 << 5;
        /// `NEURON_DRIVER_FEATURE_MEM_ALLOC64`.
        const MEM_ALLOC64 = 1 << 6;
        /// `NEURON_DRIVER_FEATURE_CONTIGUOUS_SCRATCHPAD`.
        const CONTIGUOUS_SCRATCHPAD = 1 << 7;
        // Bits of later drivers.
        const _ = !0;
    }
}

/// `NEURON_CINIT_STATE_STARTED`.
pub const NEURON_CINIT_STATE_STARTED: u32 = 1;
/// `NEURON_CINIT_STATE_COMPLETED`.
pub const NEURON_CINIT_STATE_COMPLETED: u32 = 2;
/// `NEURON_CINIT_STATE_INVALID` (the state after a reset).
pub const NEURON_CINIT_STATE_INVALID: u32 = 3;

/// `struct neuron_uuid`: the 32-byte id of the model a core lock names.
pub const NEURON_UUID_LEN: usize = 32;

/// `enum NQ_DEVICE_TYPE`: `NQ_DEVICE_TYPE_NEURON_CORE`.
pub const NQ_DEVICE_TYPE_NEURON_CORE: u32 = 0;
/// `enum NQ_TYPE`: `NQ_TYPE_NOTIFY`.
pub const NQ_TYPE_NOTIFY: u32 = 1;

/// `mem_alloc_category_t`: what a chunk is for (the driver's per-category accounting). A
/// category number, not a bit set, so a newtype rather than `bitflags`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemType(pub u32);

impl MemType {
    /// `NEURON_MEMALLOC_TYPE_UNKNOWN_HOST`.
    pub const UNKNOWN_HOST: Self = Self(0);
    /// `NEURON_MEMALLOC_TYPE_MISC_HOST`.
    pub const MISC_HOST: Self = Self(4);
    /// `NEURON_MEMALLOC_TYPE_UNKNOWN_DEVICE`.
    pub const UNKNOWN_DEVICE: Self = Self(7);
    /// `NEURON_MEMALLOC_TYPE_CODE_DEVICE`.
    pub const CODE_DEVICE: Self = Self(8);
    /// `NEURON_MEMALLOC_TYPE_TENSORS_DEVICE`.
    pub const TENSORS_DEVICE: Self = Self(9);
}

bitflags::bitflags! {
    /// Where a chunk lives, as `MEM_ALLOC*`'s `host_memory` and `MEM_GET_EXTENDED_INFO`'s
    /// `host_memory` carry it (0 device HBM, 1 host memory).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MemLocation: u32 {
        /// `host_memory` = 1: a host chunk (DMA-able, mappable).
        const HOST = 1;
    }
}
