//! Argument structs of the lifecycle requests (version, info, reservation, reset, core init).
//! Every field is an integer, so every bit pattern is a valid value: the kernel may write any
//! bytes into them.

use core::mem::{align_of, offset_of, size_of};

use super::DriverFeatures;

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
    /// PCI revision id ([`REVID_QEMU`](super::REVID_QEMU) / [`REVID_EMU`](super::REVID_EMU) on non-hardware platforms).
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
    /// Struct version ([`NEURON_DEVICE_DRIVER_INFO_VERSION0`](super::NEURON_DEVICE_DRIVER_INFO_VERSION0)).
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
    /// Bit `i` = core `i` of the device, or [`NEURON_NC_MAP_DEVICE`](super::NEURON_NC_MAP_DEVICE).
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
