//! The Neuron kernel driver's user-space ABI, as far as this backend uses it, and the only
//! `unsafe` code of the crate.
//!
//! * `#[repr(C)]` mirrors of the driver's ioctl argument structs (`neuron_ioctl.h`), each with
//!   compile-time size, alignment and field-offset asserts beside it (x86_64 / LP64 layout,
//!   which aarch64 shares for these all-integer structs).
//! * Request numbers: `const fn` composers mirroring the kernel's `_IOC` / `_IO` / `_IOR` /
//!   `_IOW` / `_IOWR`, and the exact constants of the driver header. Most of the older ioctls
//!   are declared with a *pointer* argument type, so their request number encodes an
//!   `_IOC_SIZE` of 8 rather than the struct size; the constants keep that encoding and a
//!   compile-time assert ties each one to its composer.
//! * [`Request`]: a request number paired with the one argument type its kernel handler copies.
//!   Only this module can build one, which is what makes the safe [`ioctl`] wrapper sound.
//! * [`DeviceFd`]: an owning file descriptor on a `/dev/neuronN` node, closed on drop.
//! * [`STRUCTS`] and [`REQUESTS`]: tables of everything defined here, computed from the Rust
//!   definitions, so tests can check them against the driver's machine-readable ABI.

use core::marker::PhantomData;
use core::mem::{align_of, offset_of, size_of};
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

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

// ---------------------------------------------------------------------------------------------
// Argument structs. Every field is an integer, so every bit pattern is a valid value: the
// kernel may write any bytes into them.

/// `struct neuron_ioctl_compatible_version`: the runtime compatibility-id range.
/// Note the field order: `max` first.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompatibleVersion {
    /// Newest runtime id the driver accepts.
    pub max: u32,
    /// Oldest runtime id the driver accepts.
    pub min: u32,
}
const _: () = assert!(size_of::<CompatibleVersion>() == 8);
const _: () = assert!(align_of::<CompatibleVersion>() == 4);
const _: () = assert!(offset_of!(CompatibleVersion, max) == 0);
const _: () = assert!(offset_of!(CompatibleVersion, min) == 4);

/// `struct neuron_ioctl_device_basic_info`: architecture and PCI revision of the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceBasicInfo {
    /// `NEURON_ARCH_*`.
    pub architecture: u32,
    /// PCI revision id ([`REVID_QEMU`] / [`REVID_EMU`] on non-hardware platforms).
    pub revision: u32,
}
const _: () = assert!(size_of::<DeviceBasicInfo>() == 8);
const _: () = assert!(align_of::<DeviceBasicInfo>() == 4);
const _: () = assert!(offset_of!(DeviceBasicInfo, architecture) == 0);
const _: () = assert!(offset_of!(DeviceBasicInfo, revision) == 4);

/// `struct neuron_ioctl_device_driver_info`: architecture, revision and feature flags.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceDriverInfo {
    /// `NEURON_ARCH_*`.
    pub architecture: u32,
    /// PCI revision id.
    pub revision: u32,
    /// Struct version ([`NEURON_DEVICE_DRIVER_INFO_VERSION0`]).
    pub version: u32,
    /// Struct size the driver filled in.
    pub size: u32,
    /// `NEURON_DRIVER_FEATURE_*` bits ([`DeviceDriverInfo::features`]).
    pub feature_flags1: u64,
}
impl DeviceDriverInfo {
    /// The feature flags as a set.
    pub const fn features(&self) -> DriverFeatures {
        DriverFeatures::from_bits_retain(self.feature_flags1)
    }
}
const _: () = assert!(size_of::<DeviceDriverInfo>() == 24);
const _: () = assert!(align_of::<DeviceDriverInfo>() == 8);
const _: () = assert!(offset_of!(DeviceDriverInfo, architecture) == 0);
const _: () = assert!(offset_of!(DeviceDriverInfo, revision) == 4);
const _: () = assert!(offset_of!(DeviceDriverInfo, version) == 8);
const _: () = assert!(offset_of!(DeviceDriverInfo, size) == 12);
const _: () = assert!(offset_of!(DeviceDriverInfo, feature_flags1) == 16);

/// `struct neuron_ioctl_crwl_nc_map`: the legacy core-range reservation argument, with a
/// 64-core bitmap.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrwlNcMap {
    /// Number of consecutive cores wanted.
    pub nc_count: u32,
    /// First core that may be used (relative to the opened device).
    pub start_nc_index: u32,
    /// Last core that may be used (inclusive).
    pub end_nc_index: u32,
    /// Out: longest run of free cores seen (meaningful on `EBUSY`).
    pub max_nc_available: u32,
    /// In/out: the cores (C `volatile unsigned long`, 64 bits on LP64).
    pub bitmap: u64,
}
const _: () = assert!(size_of::<CrwlNcMap>() == 24);
const _: () = assert!(align_of::<CrwlNcMap>() == 8);
const _: () = assert!(offset_of!(CrwlNcMap, nc_count) == 0);
const _: () = assert!(offset_of!(CrwlNcMap, start_nc_index) == 4);
const _: () = assert!(offset_of!(CrwlNcMap, end_nc_index) == 8);
const _: () = assert!(offset_of!(CrwlNcMap, max_nc_available) == 12);
const _: () = assert!(offset_of!(CrwlNcMap, bitmap) == 16);

/// Words in [`CrwlNcMapExt::bitmap`] (512 cores).
pub const CRWL_NC_MAP_EXT_WORDS: usize = 8;

/// `struct neuron_ioctl_crwl_nc_map_ext`: the core-range reservation argument with a 512-core
/// bitmap (`NEURON_DRIVER_FEATURE_BIG_CORE_MAPS`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrwlNcMapExt {
    /// Number of consecutive cores wanted.
    pub nc_count: u32,
    /// First core that may be used (relative to the opened device).
    pub start_nc_index: u32,
    /// Last core that may be used (inclusive).
    pub end_nc_index: u32,
    /// Out: longest run of free cores seen (meaningful on `EBUSY`).
    pub max_nc_available: u32,
    /// In/out: the cores, bit `i % 64` of word `i / 64` is core `i`.
    pub bitmap: [u64; CRWL_NC_MAP_EXT_WORDS],
}
const _: () = assert!(size_of::<CrwlNcMapExt>() == 80);
const _: () = assert!(align_of::<CrwlNcMapExt>() == 8);
const _: () = assert!(offset_of!(CrwlNcMapExt, nc_count) == 0);
const _: () = assert!(offset_of!(CrwlNcMapExt, start_nc_index) == 4);
const _: () = assert!(offset_of!(CrwlNcMapExt, end_nc_index) == 8);
const _: () = assert!(offset_of!(CrwlNcMapExt, max_nc_available) == 12);
const _: () = assert!(offset_of!(CrwlNcMapExt, bitmap) == 16);

/// `struct neuron_ioctl_device_reset`: argument of `NC_RESET`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceReset {
    /// Bit `i` = core `i` of the device, or [`NEURON_NC_MAP_DEVICE`].
    pub nc_map: u32,
    /// Out: the id to wait on with `NC_RESET_READY` (the caller's tgid).
    pub request_id: u32,
}
const _: () = assert!(size_of::<DeviceReset>() == 8);
const _: () = assert!(align_of::<DeviceReset>() == 4);
const _: () = assert!(offset_of!(DeviceReset, nc_map) == 0);
const _: () = assert!(offset_of!(DeviceReset, request_id) == 4);

/// `struct neuron_ioctl_device_ready`: argument of `NC_RESET_READY`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceReady {
    /// The reset request to wait for.
    pub request_id: u32,
    /// Out: 0 when the reset succeeded.
    pub result: i32,
}
const _: () = assert!(size_of::<DeviceReady>() == 8);
const _: () = assert!(align_of::<DeviceReady>() == 4);
const _: () = assert!(offset_of!(DeviceReady, request_id) == 0);
const _: () = assert!(offset_of!(DeviceReady, result) == 4);

/// `struct neuron_ioctl_cinit_set`: argument of `CINIT_SET_STATE`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CinitSet {
    /// Core of the device.
    pub nc_id: u32,
    /// Requested `NEURON_CINIT_STATE_*`.
    pub state: u32,
    /// Out: the state after the call.
    pub new_state: u32,
}
const _: () = assert!(size_of::<CinitSet>() == 12);
const _: () = assert!(align_of::<CinitSet>() == 4);
const _: () = assert!(offset_of!(CinitSet, nc_id) == 0);
const _: () = assert!(offset_of!(CinitSet, state) == 4);
const _: () = assert!(offset_of!(CinitSet, new_state) == 8);

// ---------------------------------------------------------------------------------------------
// Request numbers: the exact header constants, each tied to its composer at compile time.

/// `NEURON_IOCTL_COMPATIBLE_VERSION` = `_IOW('N', 93, struct neuron_ioctl_compatible_version *)`
/// (the kernel writes the struct despite the `_IOW`).
pub const NEURON_IOCTL_COMPATIBLE_VERSION: u32 = 0x4008_4e5d;
const _: () =
    assert!(NEURON_IOCTL_COMPATIBLE_VERSION == iow(NEURON_IOCTL_BASE, 93, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_DEVICE_BASIC_INFO` = `_IOW('N', 100, struct neuron_ioctl_device_basic_info *)`
/// (the kernel writes the struct despite the `_IOW`).
pub const NEURON_IOCTL_DEVICE_BASIC_INFO: u32 = 0x4008_4e64;
const _: () =
    assert!(NEURON_IOCTL_DEVICE_BASIC_INFO == iow(NEURON_IOCTL_BASE, 100, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_DRIVER_INFO_GET` = `_IOR('N', 110, struct neuron_ioctl_device_driver_info)`.
pub const NEURON_IOCTL_DRIVER_INFO_GET: u32 = 0x8018_4e6e;
const _: () = assert!(
    NEURON_IOCTL_DRIVER_INFO_GET == ior(NEURON_IOCTL_BASE, 110, size_of::<DeviceDriverInfo>())
);

/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK` = `_IOW('N', 85, struct neuron_ioctl_crwl_nc_map *)`.
pub const NEURON_IOCTL_CRWL_NC_RANGE_MARK: u32 = 0x4008_4e55;
const _: () =
    assert!(NEURON_IOCTL_CRWL_NC_RANGE_MARK == iow(NEURON_IOCTL_BASE, 85, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0` = `_IOWR('N', 85, struct neuron_ioctl_crwl_nc_map_ext)`.
pub const NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0: u32 = 0xc050_4e55;
const _: () = assert!(
    NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0 == iowr(NEURON_IOCTL_BASE, 85, size_of::<CrwlNcMapExt>())
);

/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK` = `_IOW('N', 86, struct neuron_ioctl_crwl_nc_map *)`.
pub const NEURON_IOCTL_CRWL_NC_RANGE_UNMARK: u32 = 0x4008_4e56;
const _: () =
    assert!(NEURON_IOCTL_CRWL_NC_RANGE_UNMARK == iow(NEURON_IOCTL_BASE, 86, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0` = `_IOW('N', 86, struct neuron_ioctl_crwl_nc_map_ext)`.
pub const NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0: u32 = 0x4050_4e56;
const _: () = assert!(
    NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0 == iow(NEURON_IOCTL_BASE, 86, size_of::<CrwlNcMapExt>())
);

/// `NEURON_IOCTL_NC_RESET` = `_IOR('N', 103, struct neuron_ioctl_device_reset *)`.
pub const NEURON_IOCTL_NC_RESET: u32 = 0x8008_4e67;
const _: () = assert!(NEURON_IOCTL_NC_RESET == ior(NEURON_IOCTL_BASE, 103, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_NC_RESET_READY` = `_IOR('N', 104, struct neuron_ioctl_device_ready *)`.
pub const NEURON_IOCTL_NC_RESET_READY: u32 = 0x8008_4e68;
const _: () = assert!(NEURON_IOCTL_NC_RESET_READY == ior(NEURON_IOCTL_BASE, 104, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CINIT_SET_STATE` = `_IOW('N', 91, struct neuron_ioctl_cinit_set *)`.
pub const NEURON_IOCTL_CINIT_SET_STATE: u32 = 0x4008_4e5b;
const _: () = assert!(NEURON_IOCTL_CINIT_SET_STATE == iow(NEURON_IOCTL_BASE, 91, POINTER_ARG_SIZE));

// ---------------------------------------------------------------------------------------------
// Typed requests.

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
}

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

// ---------------------------------------------------------------------------------------------
// Tables for tests.

/// One field of a mirrored struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    /// The C field name.
    pub name: &'static str,
    /// `offsetof`.
    pub offset: usize,
    /// `sizeof` of the field.
    pub size: usize,
}

/// The layout of a mirrored struct, computed from its Rust definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructLayout {
    /// The C name, e.g. `struct neuron_ioctl_crwl_nc_map`.
    pub c_name: &'static str,
    /// `sizeof`.
    pub size: usize,
    /// `_Alignof`.
    pub align: usize,
    /// Every field, in declaration order.
    pub fields: &'static [FieldLayout],
}

const fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

macro_rules! layout {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        StructLayout {
            c_name: <$ty as KernelArg>::C_NAME,
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: &[$(FieldLayout {
                name: stringify!($field),
                offset: offset_of!($ty, $field),
                size: field_size(|s: &$ty| &s.$field),
            }),*],
        }
    };
}

/// Every struct this module mirrors.
pub const STRUCTS: &[StructLayout] = &[
    layout!(CompatibleVersion { max, min }),
    layout!(DeviceBasicInfo {
        architecture,
        revision
    }),
    layout!(DeviceDriverInfo {
        architecture,
        revision,
        version,
        size,
        feature_flags1
    }),
    layout!(CrwlNcMap {
        nc_count,
        start_nc_index,
        end_nc_index,
        max_nc_available,
        bitmap
    }),
    layout!(CrwlNcMapExt {
        nc_count,
        start_nc_index,
        end_nc_index,
        max_nc_available,
        bitmap
    }),
    layout!(DeviceReset { nc_map, request_id }),
    layout!(DeviceReady { request_id, result }),
    layout!(CinitSet {
        nc_id,
        state,
        new_state
    }),
];

/// One request this module defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    /// The header macro name, e.g. `NEURON_IOCTL_COMPATIBLE_VERSION`.
    pub name: &'static str,
    /// The request number.
    pub number: u32,
    /// C name of the struct the kernel copies.
    pub arg: &'static str,
    /// `sizeof` of that struct.
    pub arg_size: usize,
    /// Whether this backend issues it on the `O_WRONLY` ("misc", free-access) fd.
    pub misc: bool,
}

const fn request_info<T: KernelArg>(
    name: &'static str,
    request: Request<T>,
    misc: bool,
) -> RequestInfo {
    RequestInfo {
        name,
        number: request.number,
        arg: T::C_NAME,
        arg_size: size_of::<T>(),
        misc,
    }
}

/// Every request this module defines.
pub const REQUESTS: &[RequestInfo] = &[
    request_info("NEURON_IOCTL_COMPATIBLE_VERSION", COMPATIBLE_VERSION, true),
    request_info("NEURON_IOCTL_DEVICE_BASIC_INFO", DEVICE_BASIC_INFO, true),
    request_info("NEURON_IOCTL_DRIVER_INFO_GET", DRIVER_INFO_GET, true),
    request_info("NEURON_IOCTL_CRWL_NC_RANGE_MARK", CRWL_NC_RANGE_MARK, true),
    request_info(
        "NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0",
        CRWL_NC_RANGE_MARK_EXT0,
        true,
    ),
    request_info(
        "NEURON_IOCTL_CRWL_NC_RANGE_UNMARK",
        CRWL_NC_RANGE_UNMARK,
        true,
    ),
    request_info(
        "NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0",
        CRWL_NC_RANGE_UNMARK_EXT0,
        true,
    ),
    request_info("NEURON_IOCTL_NC_RESET", NC_RESET, false),
    request_info("NEURON_IOCTL_NC_RESET_READY", NC_RESET_READY, false),
    request_info("NEURON_IOCTL_CINIT_SET_STATE", CINIT_SET_STATE, false),
];

// ---------------------------------------------------------------------------------------------
// File descriptors and the ioctl call.

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

/// `ioctl(fd, request, arg)`: returns the non-negative return value, or the `errno` error.
///
/// The kernel may have written `arg` even on failure (the reservation ioctls copy the struct
/// back with `max_nc_available` on `EBUSY`).
pub fn ioctl<T: KernelArg>(fd: &DeviceFd, request: Request<T>, arg: &mut T) -> io::Result<i32> {
    let arg_ptr = core::ptr::from_mut(arg).cast::<libc::c_void>();
    // SAFETY: `fd` is an open descriptor owned by `DeviceFd` and borrowed for the whole call.
    // `request` can only be built in this module, where each request number is paired with
    // the struct its kernel handler copies (`sizeof(T)` bytes, checked against the driver's
    // ABI table), so the kernel reads and writes only within `*arg`, which is a live,
    // exclusively borrowed `#[repr(C)]` value. Its fields are all integers, so any bytes the
    // kernel writes leave it valid. The pointer does not outlive the call.
    let ret = unsafe { libc::ioctl(fd.fd.as_raw_fd(), request.number as libc::Ioctl, arg_ptr) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn composers_match_kernel_macros() {
        // Values of the kernel's own macros for well-known requests.
        assert_eq!(io(b'N', 1), 0x0000_4e01);
        assert_eq!(ior(b'N', 2, 1), 0x8001_4e02);
        assert_eq!(iow(b'N', 93, 8), 0x4008_4e5d);
        assert_eq!(iowr(b'N', 85, 80), 0xc050_4e55);
        // The size field is 14 bits wide.
        assert_eq!(ior(b'N', 133, 12296), 0xb008_4e85);
    }

    #[test]
    fn tables_are_consistent_with_the_types() {
        assert_eq!(STRUCTS.len(), 8);
        for s in STRUCTS {
            let mut end = 0;
            for f in s.fields {
                assert!(f.offset >= end, "{}: {} overlaps", s.c_name, f.name);
                end = f.offset + f.size;
            }
            assert!(end <= s.size, "{}", s.c_name);
        }
        for r in REQUESTS {
            assert!(
                STRUCTS
                    .iter()
                    .any(|s| s.c_name == r.arg && s.size == r.arg_size),
                "{} has no struct table entry",
                r.name
            );
        }
    }

    #[test]
    fn opening_a_missing_node_fails_with_enoent() {
        let err = DeviceFd::open(Path::new("/nonexistent-nrt-linux/neuron0"), OpenMode::Misc)
            .expect_err("must not exist");
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn ioctl_on_a_regular_file_is_enotty() {
        let path = std::env::temp_dir().join(format!("nrt-linux-sys-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let fd = DeviceFd::open(&path, OpenMode::Misc).unwrap();
        assert_eq!(fd.mode(), OpenMode::Misc);
        let mut v = CompatibleVersion::default();
        let err = ioctl(&fd, COMPATIBLE_VERSION, &mut v).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
        drop(fd);
        let _ = std::fs::remove_file(&path);
    }
}
