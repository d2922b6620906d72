//! Argument structs of the memory, notification-queue, semaphore and core-lock requests.
//!
//! Every field is an integer. The fields that the C header declares as pointers
//! (`mem_handle` of the allocation requests, `buffer` of the host copies) are mirrored as
//! `u64` user addresses: the structs stay plain data, and the requests that carry them can
//! only be issued through the functions of this module that set those addresses from live
//! borrows ([`super::mem_alloc`], [`super::mem_buf_write`], [`super::mem_buf_read`]).

use core::mem::{align_of, offset_of, size_of};

use super::NEURON_UUID_LEN;

/// Asserts size, alignment and every field offset of a mirrored struct.
macro_rules! assert_layout {
    ($ty:ty, size $size:literal, align $align:literal { $($field:ident @ $off:literal),* $(,)? }) => {
        const _: () = assert!(size_of::<$ty>() == $size);
        const _: () = assert!(align_of::<$ty>() == $align);
        $(const _: () = assert!(offset_of!($ty, $field) == $off);)*
    };
}

/// `struct neuron_ioctl_mem_alloc_v2` (`MEM_ALLOC_V2`, drivers without `MEM_ALLOC_TYPE`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemAllocV2 {
    /// Bytes.
    pub size: u64,
    /// Alignment in bytes (0 = the driver's default).
    pub align: u64,
    /// 1 for host memory, 0 for device HBM.
    pub host_memory: u32,
    /// HBM index of device memory.
    pub dram_channel: u32,
    /// Region within the channel.
    pub dram_region: u32,
    /// Core of the device the chunk is accounted to.
    pub nc_id: u32,
    /// User address of the `u64` the kernel writes the handle to (C `__u64 *`).
    pub mem_handle: u64,
}
assert_layout!(MemAllocV2, size 40, align 8 {
    size @ 0, align @ 8, host_memory @ 16, dram_channel @ 20, dram_region @ 24, nc_id @ 28,
    mem_handle @ 32,
});

/// `struct neuron_ioctl_mem_alloc_v2_mem_type` (`MEM_ALLOC_V2MT`, `MEM_ALLOC_TYPE` drivers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemAllocV2Mt {
    /// Bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u64,
    /// 1 for host memory, 0 for device HBM.
    pub host_memory: u32,
    /// HBM index of device memory.
    pub dram_channel: u32,
    /// Region within the channel.
    pub dram_region: u32,
    /// Core of the device the chunk is accounted to.
    pub nc_id: u32,
    /// `mem_alloc_category_t` ([`super::MemType`]).
    pub mem_type: u32,
    /// User address of the `u64` the kernel writes the handle to (C `__u64 *`).
    pub mem_handle: u64,
}
assert_layout!(MemAllocV2Mt, size 48, align 8 {
    size @ 0, align @ 8, host_memory @ 16, dram_channel @ 20, dram_region @ 24, nc_id @ 28,
    mem_type @ 32, mem_handle @ 40,
});

/// `struct neuron_ioctl_mem_alloc_v2_mem_type64` (`MEM_ALLOC_V2MT64`, `MEM_ALLOC64` drivers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemAllocV2Mt64 {
    /// Bytes.
    pub size: u64,
    /// Alignment in bytes.
    pub align: u64,
    /// 1 for host memory, 0 for device HBM.
    pub host_memory: u32,
    /// HBM index of device memory.
    pub dram_channel: u32,
    /// Region within the channel.
    pub dram_region: u32,
    /// Core of the device the chunk is accounted to.
    pub nc_id: u32,
    /// `mem_alloc_category_t` ([`super::MemType`]).
    pub mem_type: u32,
    /// User address of the `u64` the kernel writes the handle to (C `__u64 *`).
    pub mem_handle: u64,
    /// Unused (distinguishes the request from `MEM_ALLOC_V2MT` by size).
    pub pad: u32,
}
assert_layout!(MemAllocV2Mt64, size 56, align 8 {
    size @ 0, align @ 8, host_memory @ 16, dram_channel @ 20, dram_region @ 24, nc_id @ 28,
    mem_type @ 32, mem_handle @ 40, pad @ 48,
});

/// `struct neuron_ioctl_mem_free`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemFree {
    /// The chunk's handle.
    pub mem_handle: u64,
}
assert_layout!(MemFree, size 8, align 8 { mem_handle @ 0 });

/// `struct neuron_ioctl_mem_get_extended_info`: the kernel writes the whole struct back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemGetExtendedInfo {
    /// In: the chunk's handle (out: a kernel-internal value, not the handle).
    pub mem_handle: u64,
    /// Struct version (not written by the driver).
    pub version: u32,
    /// Out: 1 for a host chunk.
    pub host_memory: u32,
    /// Out: the offset to `mmap` the chunk at on the device fd.
    pub mmap_offset: u64,
    /// Out: the chunk's physical (device-visible) address.
    pub pa: u64,
    /// Out: the allocating process.
    pub pid: u64,
    /// Out: bytes.
    pub size: u64,
}
assert_layout!(MemGetExtendedInfo, size 48, align 8 {
    mem_handle @ 0, version @ 8, host_memory @ 12, mmap_offset @ 16, pa @ 24, pid @ 32,
    size @ 40,
});

/// `struct neuron_ioctl_mem_buf_copy64`: a host buffer ↔ chunk copy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemBufCopy64 {
    /// The chunk's handle.
    pub mem_handle: u64,
    /// User address of the host buffer (C `void *`), `size` bytes.
    pub buffer: u64,
    /// Bytes.
    pub size: u64,
    /// Offset in the chunk.
    pub offset: u64,
    /// 1: buffer → chunk (the kernel reads the buffer); 0: chunk → buffer (it writes it).
    pub copy_to_mem_handle: u32,
}
assert_layout!(MemBufCopy64, size 40, align 8 {
    mem_handle @ 0, buffer @ 8, size @ 16, offset @ 24, copy_to_mem_handle @ 32,
});

/// `struct neuron_ioctl_mem_buf_copy`: the 32-bit form (drivers without `MEM_ALLOC64`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemBufCopy {
    /// The chunk's handle.
    pub mem_handle: u64,
    /// User address of the host buffer (C `void *`), `size` bytes.
    pub buffer: u64,
    /// Bytes.
    pub size: u32,
    /// Offset in the chunk.
    pub offset: u32,
    /// 1: buffer → chunk; 0: chunk → buffer.
    pub copy_to_mem_handle: u32,
}
assert_layout!(MemBufCopy, size 32, align 8 {
    mem_handle @ 0, buffer @ 8, size @ 16, offset @ 20, copy_to_mem_handle @ 24,
});

/// `struct neuron_ioctl_mem_copy64`: a chunk → chunk DMA copy.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemCopy64 {
    /// Source chunk.
    pub src_mem_handle: u64,
    /// Destination chunk.
    pub dst_mem_handle: u64,
    /// Bytes.
    pub size: u64,
    /// Offset in the source.
    pub src_offset: u64,
    /// Offset in the destination.
    pub dst_offset: u64,
}
assert_layout!(MemCopy64, size 40, align 8 {
    src_mem_handle @ 0, dst_mem_handle @ 8, size @ 16, src_offset @ 24, dst_offset @ 32,
});

/// `struct neuron_ioctl_mem_copy`: the 32-bit form.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemCopy {
    /// Source chunk.
    pub src_mem_handle: u64,
    /// Destination chunk.
    pub dst_mem_handle: u64,
    /// Bytes.
    pub size: u32,
    /// Offset in the source.
    pub src_offset: u32,
    /// Offset in the destination.
    pub dst_offset: u32,
}
assert_layout!(MemCopy, size 32, align 8 {
    src_mem_handle @ 0, dst_mem_handle @ 8, size @ 16, src_offset @ 20, dst_offset @ 24,
});

/// `struct neuron_ioctl_memset64`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memset64 {
    /// The chunk's handle.
    pub mem_handle: u64,
    /// Offset in the chunk.
    pub offset: u64,
    /// The byte value (low 8 bits).
    pub value: u32,
    /// Bytes.
    pub size: u64,
}
assert_layout!(Memset64, size 32, align 8 { mem_handle @ 0, offset @ 8, value @ 16, size @ 24 });

/// `struct neuron_ioctl_memset`: the 32-bit-size form.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memset {
    /// The chunk's handle.
    pub mem_handle: u64,
    /// Offset in the chunk.
    pub offset: u64,
    /// The byte value (low 8 bits).
    pub value: u32,
    /// Bytes.
    pub size: u32,
}
assert_layout!(Memset, size 24, align 8 { mem_handle @ 0, offset @ 8, value @ 16, size @ 20 });

/// `struct neuron_ioctl_notifications_init_v2`: the kernel writes `mmap_offset` and
/// `mem_handle` back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotificationsInitV2 {
    /// Core (for `nq_dev_type` = NeuronCore).
    pub nq_dev_id: u32,
    /// `NQ_DEVICE_TYPE_*`.
    pub nq_dev_type: u32,
    /// `NQ_TYPE_*`.
    pub nq_type: u32,
    /// Engine of the core.
    pub engine_index: u32,
    /// Bytes of the queue.
    pub size: u32,
    /// 1: the queue lives in host memory.
    pub on_host_memory: u32,
    /// HBM index (device-memory queues).
    pub dram_channel: u32,
    /// Region (device-memory queues).
    pub dram_region: u32,
    /// Out: where to `mmap` the queue on the device fd.
    pub mmap_offset: u64,
    /// Out: the queue chunk's handle (owned by the driver).
    pub mem_handle: u64,
}
assert_layout!(NotificationsInitV2, size 48, align 8 {
    nq_dev_id @ 0, nq_dev_type @ 4, nq_type @ 8, engine_index @ 12, size @ 16,
    on_host_memory @ 20, dram_channel @ 24, dram_region @ 28, mmap_offset @ 32, mem_handle @ 40,
});

/// `struct neuron_ioctl_semaphore`: the argument of the `SEMAPHORE_*` requests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Semaphore {
    /// Core of the device.
    pub nc_id: u32,
    /// Semaphore of the core.
    pub semaphore_index: u32,
    /// The value written, added or subtracted (read: out).
    pub value: u32,
}
assert_layout!(Semaphore, size 12, align 4 { nc_id @ 0, semaphore_index @ 4, value @ 8 });

/// `struct neuron_uuid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NeuronUuid {
    /// The id's bytes.
    pub value: [u8; NEURON_UUID_LEN],
}
assert_layout!(NeuronUuid, size 32, align 1 { value @ 0 });

/// `struct neuron_ioctl_crwl`: the argument of the per-core model lock requests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crwl {
    /// Core of the device.
    pub nc_id: u32,
    /// The model the lock names.
    pub uuid: NeuronUuid,
}
assert_layout!(Crwl, size 36, align 4 { nc_id @ 0, uuid @ 4 });
