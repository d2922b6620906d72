//! Tables of every struct and request this module defines, for tests.

use core::mem::{align_of, offset_of, size_of};

use super::mem::*;
use super::request::*;
use super::structs::*;

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
    layout!(MemAllocV2 {
        size,
        align,
        host_memory,
        dram_channel,
        dram_region,
        nc_id,
        mem_handle
    }),
    layout!(MemAllocV2Mt {
        size,
        align,
        host_memory,
        dram_channel,
        dram_region,
        nc_id,
        mem_type,
        mem_handle
    }),
    layout!(MemAllocV2Mt64 {
        size,
        align,
        host_memory,
        dram_channel,
        dram_region,
        nc_id,
        mem_type,
        mem_handle,
        pad
    }),
    layout!(MemFree { mem_handle }),
    layout!(MemGetExtendedInfo {
        mem_handle,
        version,
        host_memory,
        mmap_offset,
        pa,
        pid,
        size
    }),
    layout!(MemBufCopy {
        mem_handle,
        buffer,
        size,
        offset,
        copy_to_mem_handle
    }),
    layout!(MemBufCopy64 {
        mem_handle,
        buffer,
        size,
        offset,
        copy_to_mem_handle
    }),
    layout!(MemCopy {
        src_mem_handle,
        dst_mem_handle,
        size,
        src_offset,
        dst_offset
    }),
    layout!(MemCopy64 {
        src_mem_handle,
        dst_mem_handle,
        size,
        src_offset,
        dst_offset
    }),
    layout!(Memset {
        mem_handle,
        offset,
        value,
        size
    }),
    layout!(Memset64 {
        mem_handle,
        offset,
        value,
        size
    }),
    layout!(NotificationsInitV2 {
        nq_dev_id,
        nq_dev_type,
        nq_type,
        engine_index,
        size,
        on_host_memory,
        dram_channel,
        dram_region,
        mmap_offset,
        mem_handle
    }),
    layout!(Semaphore {
        nc_id,
        semaphore_index,
        value
    }),
    layout!(NeuronUuid { value }),
    layout!(Crwl { nc_id, uuid }),
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
        number: request.number(),
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
    request_info("NEURON_IOCTL_MEM_ALLOC_V2", MEM_ALLOC_V2, false),
    request_info("NEURON_IOCTL_MEM_ALLOC_V2MT", MEM_ALLOC_V2MT, false),
    request_info("NEURON_IOCTL_MEM_ALLOC_V2MT64", MEM_ALLOC_V2MT64, false),
    request_info("NEURON_IOCTL_MEM_FREE", MEM_FREE, false),
    request_info(
        "NEURON_IOCTL_MEM_GET_EXTENDED_INFO",
        MEM_GET_EXTENDED_INFO,
        false,
    ),
    request_info("NEURON_IOCTL_MEM_BUF_COPY", MEM_BUF_COPY, false),
    request_info("NEURON_IOCTL_MEM_BUF_COPY64", MEM_BUF_COPY64, false),
    request_info("NEURON_IOCTL_MEM_COPY", MEM_COPY, false),
    request_info("NEURON_IOCTL_MEM_COPY64", MEM_COPY64, false),
    request_info("NEURON_IOCTL_MEMSET", MEMSET, false),
    request_info("NEURON_IOCTL_MEMSET64", MEMSET64, false),
    request_info(
        "NEURON_IOCTL_NOTIFICATIONS_INIT_V2",
        NOTIFICATIONS_INIT_V2,
        false,
    ),
    request_info(
        "NEURON_IOCTL_SEMAPHORE_INCREMENT",
        SEMAPHORE_INCREMENT,
        false,
    ),
    request_info("NEURON_IOCTL_SEMAPHORE_WRITE", SEMAPHORE_WRITE, false),
    request_info("NEURON_IOCTL_CRWL_READER_ENTER", CRWL_READER_ENTER, false),
    request_info("NEURON_IOCTL_CRWL_READER_EXIT", CRWL_READER_EXIT, false),
    request_info("NEURON_IOCTL_CRWL_WRITER_ENTER", CRWL_WRITER_ENTER, false),
    request_info(
        "NEURON_IOCTL_CRWL_WRITER_DOWNGRADE",
        CRWL_WRITER_DOWNGRADE,
        false,
    ),
];
