//! Request numbers: the exact header constants, each tied to its composer at compile time.

use core::mem::size_of;

use super::mem::{MemAllocV2Mt, MemAllocV2Mt64, MemBufCopy64, MemCopy64, Memset64};
use super::structs::{CrwlNcMapExt, DeviceDriverInfo};
use super::{NEURON_IOCTL_BASE, POINTER_ARG_SIZE, ior, iow, iowr};

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

/// `NEURON_IOCTL_MEM_ALLOC_V2` = `_IOR('N', 102, struct neuron_ioctl_mem_alloc_v2 *)`.
pub const NEURON_IOCTL_MEM_ALLOC_V2: u32 = 0x8008_4e66;
const _: () = assert!(NEURON_IOCTL_MEM_ALLOC_V2 == ior(NEURON_IOCTL_BASE, 102, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEM_ALLOC_V2MT` = `_IOR('N', 102, struct neuron_ioctl_mem_alloc_v2_mem_type)`.
pub const NEURON_IOCTL_MEM_ALLOC_V2MT: u32 = 0x8030_4e66;
const _: () =
    assert!(NEURON_IOCTL_MEM_ALLOC_V2MT == ior(NEURON_IOCTL_BASE, 102, size_of::<MemAllocV2Mt>()));

/// `NEURON_IOCTL_MEM_ALLOC_V2MT64` = `_IOR('N', 102, struct neuron_ioctl_mem_alloc_v2_mem_type64)`.
pub const NEURON_IOCTL_MEM_ALLOC_V2MT64: u32 = 0x8038_4e66;
const _: () = assert!(
    NEURON_IOCTL_MEM_ALLOC_V2MT64 == ior(NEURON_IOCTL_BASE, 102, size_of::<MemAllocV2Mt64>())
);

/// `NEURON_IOCTL_MEM_FREE` = `_IOR('N', 22, struct neuron_ioctl_mem_free *)`.
pub const NEURON_IOCTL_MEM_FREE: u32 = 0x8008_4e16;
const _: () = assert!(NEURON_IOCTL_MEM_FREE == ior(NEURON_IOCTL_BASE, 22, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEM_GET_EXTENDED_INFO` = `_IOR('N', 29, struct neuron_ioctl_mem_get_extended_info *)`.
pub const NEURON_IOCTL_MEM_GET_EXTENDED_INFO: u32 = 0x8008_4e1d;
const _: () =
    assert!(NEURON_IOCTL_MEM_GET_EXTENDED_INFO == ior(NEURON_IOCTL_BASE, 29, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEM_BUF_COPY` = `_IOWR('N', 24, struct neuron_ioctl_mem_buf_copy *)`.
pub const NEURON_IOCTL_MEM_BUF_COPY: u32 = 0xc008_4e18;
const _: () = assert!(NEURON_IOCTL_MEM_BUF_COPY == iowr(NEURON_IOCTL_BASE, 24, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEM_BUF_COPY64` = `_IOWR('N', 24, struct neuron_ioctl_mem_buf_copy64)`.
pub const NEURON_IOCTL_MEM_BUF_COPY64: u32 = 0xc028_4e18;
const _: () =
    assert!(NEURON_IOCTL_MEM_BUF_COPY64 == iowr(NEURON_IOCTL_BASE, 24, size_of::<MemBufCopy64>()));

/// `NEURON_IOCTL_MEM_COPY` = `_IOR('N', 23, struct neuron_ioctl_mem_copy *)`.
pub const NEURON_IOCTL_MEM_COPY: u32 = 0x8008_4e17;
const _: () = assert!(NEURON_IOCTL_MEM_COPY == ior(NEURON_IOCTL_BASE, 23, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEM_COPY64` = `_IOR('N', 23, struct neuron_ioctl_mem_copy64)`.
pub const NEURON_IOCTL_MEM_COPY64: u32 = 0x8028_4e17;
const _: () =
    assert!(NEURON_IOCTL_MEM_COPY64 == ior(NEURON_IOCTL_BASE, 23, size_of::<MemCopy64>()));

/// `NEURON_IOCTL_MEMSET` = `_IOR('N', 28, struct neuron_ioctl_memset *)`.
pub const NEURON_IOCTL_MEMSET: u32 = 0x8008_4e1c;
const _: () = assert!(NEURON_IOCTL_MEMSET == ior(NEURON_IOCTL_BASE, 28, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_MEMSET64` = `_IOR('N', 28, struct neuron_ioctl_memset64)`.
pub const NEURON_IOCTL_MEMSET64: u32 = 0x8020_4e1c;
const _: () = assert!(NEURON_IOCTL_MEMSET64 == ior(NEURON_IOCTL_BASE, 28, size_of::<Memset64>()));

/// `NEURON_IOCTL_NOTIFICATIONS_INIT_V2` = `_IOR('N', 53, struct neuron_ioctl_notifications_init_v2 *)`.
pub const NEURON_IOCTL_NOTIFICATIONS_INIT_V2: u32 = 0x8008_4e35;
const _: () =
    assert!(NEURON_IOCTL_NOTIFICATIONS_INIT_V2 == ior(NEURON_IOCTL_BASE, 53, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_SEMAPHORE_INCREMENT` = `_IOR('N', 41, struct neuron_ioctl_semaphore *)`.
pub const NEURON_IOCTL_SEMAPHORE_INCREMENT: u32 = 0x8008_4e29;
const _: () =
    assert!(NEURON_IOCTL_SEMAPHORE_INCREMENT == ior(NEURON_IOCTL_BASE, 41, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_SEMAPHORE_WRITE` = `_IOR('N', 44, struct neuron_ioctl_semaphore *)`.
pub const NEURON_IOCTL_SEMAPHORE_WRITE: u32 = 0x8008_4e2c;
const _: () = assert!(NEURON_IOCTL_SEMAPHORE_WRITE == ior(NEURON_IOCTL_BASE, 44, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_READER_ENTER` = `_IOW('N', 81, struct neuron_ioctl_crwl *)`.
pub const NEURON_IOCTL_CRWL_READER_ENTER: u32 = 0x4008_4e51;
const _: () =
    assert!(NEURON_IOCTL_CRWL_READER_ENTER == iow(NEURON_IOCTL_BASE, 81, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_READER_EXIT` = `_IOW('N', 82, struct neuron_ioctl_crwl *)`.
pub const NEURON_IOCTL_CRWL_READER_EXIT: u32 = 0x4008_4e52;
const _: () =
    assert!(NEURON_IOCTL_CRWL_READER_EXIT == iow(NEURON_IOCTL_BASE, 82, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_WRITER_ENTER` = `_IOW('N', 83, struct neuron_ioctl_crwl *)`.
pub const NEURON_IOCTL_CRWL_WRITER_ENTER: u32 = 0x4008_4e53;
const _: () =
    assert!(NEURON_IOCTL_CRWL_WRITER_ENTER == iow(NEURON_IOCTL_BASE, 83, POINTER_ARG_SIZE));

/// `NEURON_IOCTL_CRWL_WRITER_DOWNGRADE` = `_IOW('N', 84, struct neuron_ioctl_crwl *)`.
pub const NEURON_IOCTL_CRWL_WRITER_DOWNGRADE: u32 = 0x4008_4e54;
const _: () =
    assert!(NEURON_IOCTL_CRWL_WRITER_DOWNGRADE == iow(NEURON_IOCTL_BASE, 84, POINTER_ARG_SIZE));
