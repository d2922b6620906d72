//! The driver argument structs the emulator serves, as field tables (x86_64 LP64 layouts of
//! `neuron_ioctl.h` at driver 2.24.7.0). Each module holds one constant per field and the
//! struct's `LAYOUT`; `tests/abi_tables.rs` checks every table against the ABI JSON.

use super::record::{Field, Layout};

/// Declares a module with one [`Field`] constant per field and the struct's `LAYOUT`.
macro_rules! layout {
    ($module:ident = $cname:literal, $sizeof:literal {
        $($field:ident $fname:literal $offset:literal $size:literal),* $(,)?
    }) => {
        #[doc = concat!("`struct ", $cname, "`.")]
        #[allow(dead_code)]
        pub mod $module {
            use super::{Field, Layout};
            $(
                #[doc = concat!("`", $fname, "`.")]
                pub const $field: Field = Field {
                    name: $fname,
                    offset: $offset,
                    size: $size,
                };
            )*
            /// The struct's layout.
            pub static LAYOUT: Layout = Layout {
                name: $cname,
                sizeof: $sizeof,
                fields: &[$($field),*],
            };
        }
    };
}

layout! {
    compatible_version = "neuron_ioctl_compatible_version", 8 {
        MAX "max" 0 4,
        MIN "min" 4 4,
    }
}

layout! {
    device_basic_info = "neuron_ioctl_device_basic_info", 8 {
        ARCHITECTURE "architecture" 0 4,
        REVISION "revision" 4 4,
    }
}

layout! {
    device_driver_info = "neuron_ioctl_device_driver_info", 24 {
        ARCHITECTURE "architecture" 0 4,
        REVISION "revision" 4 4,
        VERSION "version" 8 4,
        SIZE "size" 12 4,
        FEATURE_FLAGS1 "feature_flags1" 16 8,
    }
}

layout! {
    crwl_nc_map = "neuron_ioctl_crwl_nc_map", 24 {
        NC_COUNT "nc_count" 0 4,
        START_NC_INDEX "start_nc_index" 4 4,
        END_NC_INDEX "end_nc_index" 8 4,
        MAX_NC_AVAILABLE "max_nc_available" 12 4,
        BITMAP "bitmap" 16 8,
    }
}

layout! {
    crwl_nc_map_ext = "neuron_ioctl_crwl_nc_map_ext", 80 {
        NC_COUNT "nc_count" 0 4,
        START_NC_INDEX "start_nc_index" 4 4,
        END_NC_INDEX "end_nc_index" 8 4,
        MAX_NC_AVAILABLE "max_nc_available" 12 4,
        BITMAP "bitmap" 16 64,
    }
}

layout! {
    crwl = "neuron_ioctl_crwl", 36 {
        NC_ID "nc_id" 0 4,
        UUID "uuid" 4 32,
    }
}

layout! {
    device_reset = "neuron_ioctl_device_reset", 8 {
        NC_MAP "nc_map" 0 4,
        REQUEST_ID "request_id" 4 4,
    }
}

layout! {
    device_ready = "neuron_ioctl_device_ready", 8 {
        REQUEST_ID "request_id" 0 4,
        RESULT "result" 4 4,
    }
}

layout! {
    cinit_set = "neuron_ioctl_cinit_set", 12 {
        NC_ID "nc_id" 0 4,
        STATE "state" 4 4,
        NEW_STATE "new_state" 8 4,
    }
}

layout! {
    nc_model_started_count = "neuron_ioctl_nc_model_started_count", 16 {
        NC_ID "nc_id" 0 4,
        STARTED_COUNT "started_count" 8 8,
    }
}

layout! {
    mem_alloc = "neuron_ioctl_mem_alloc", 32 {
        SIZE "size" 0 8,
        HOST_MEMORY "host_memory" 8 4,
        DRAM_CHANNEL "dram_channel" 12 4,
        DRAM_REGION "dram_region" 16 4,
        NC_ID "nc_id" 20 4,
        MEM_HANDLE "mem_handle" 24 8,
    }
}

layout! {
    mem_alloc_v2 = "neuron_ioctl_mem_alloc_v2", 40 {
        SIZE "size" 0 8,
        ALIGN "align" 8 8,
        HOST_MEMORY "host_memory" 16 4,
        DRAM_CHANNEL "dram_channel" 20 4,
        DRAM_REGION "dram_region" 24 4,
        NC_ID "nc_id" 28 4,
        MEM_HANDLE "mem_handle" 32 8,
    }
}

layout! {
    mem_alloc_v2_mem_type = "neuron_ioctl_mem_alloc_v2_mem_type", 48 {
        SIZE "size" 0 8,
        ALIGN "align" 8 8,
        HOST_MEMORY "host_memory" 16 4,
        DRAM_CHANNEL "dram_channel" 20 4,
        DRAM_REGION "dram_region" 24 4,
        NC_ID "nc_id" 28 4,
        MEM_TYPE "mem_type" 32 4,
        MEM_HANDLE "mem_handle" 40 8,
    }
}

layout! {
    mem_alloc_v2_mem_type64 = "neuron_ioctl_mem_alloc_v2_mem_type64", 56 {
        SIZE "size" 0 8,
        ALIGN "align" 8 8,
        HOST_MEMORY "host_memory" 16 4,
        DRAM_CHANNEL "dram_channel" 20 4,
        DRAM_REGION "dram_region" 24 4,
        NC_ID "nc_id" 28 4,
        MEM_TYPE "mem_type" 32 4,
        MEM_HANDLE "mem_handle" 40 8,
        PAD "pad" 48 4,
    }
}

layout! {
    mem_free = "neuron_ioctl_mem_free", 8 {
        MEM_HANDLE "mem_handle" 0 8,
    }
}

layout! {
    mem_get_extended_info = "neuron_ioctl_mem_get_extended_info", 48 {
        MEM_HANDLE "mem_handle" 0 8,
        VERSION "version" 8 4,
        HOST_MEMORY "host_memory" 12 4,
        MMAP_OFFSET "mmap_offset" 16 8,
        PA "pa" 24 8,
        PID "pid" 32 8,
        SIZE "size" 40 8,
    }
}

layout! {
    mem_get_pa = "neuron_ioctl_mem_get_pa", 16 {
        MEM_HANDLE "mem_handle" 0 8,
        PA "pa" 8 8,
    }
}

layout! {
    mem_get_info = "neuron_ioctl_mem_get_info", 24 {
        MEM_HANDLE "mem_handle" 0 8,
        MMAP_OFFSET "mmap_offset" 8 8,
        PA "pa" 16 8,
    }
}

layout! {
    mem_buf_copy = "neuron_ioctl_mem_buf_copy", 32 {
        MEM_HANDLE "mem_handle" 0 8,
        BUFFER "buffer" 8 8,
        SIZE "size" 16 4,
        OFFSET "offset" 20 4,
        COPY_TO_MEM_HANDLE "copy_to_mem_handle" 24 4,
    }
}

layout! {
    mem_buf_copy64 = "neuron_ioctl_mem_buf_copy64", 40 {
        MEM_HANDLE "mem_handle" 0 8,
        BUFFER "buffer" 8 8,
        SIZE "size" 16 8,
        OFFSET "offset" 24 8,
        COPY_TO_MEM_HANDLE "copy_to_mem_handle" 32 4,
    }
}

layout! {
    mem_copy = "neuron_ioctl_mem_copy", 32 {
        SRC_MEM_HANDLE "src_mem_handle" 0 8,
        DST_MEM_HANDLE "dst_mem_handle" 8 8,
        SIZE "size" 16 4,
        SRC_OFFSET "src_offset" 20 4,
        DST_OFFSET "dst_offset" 24 4,
    }
}

layout! {
    mem_copy64 = "neuron_ioctl_mem_copy64", 40 {
        SRC_MEM_HANDLE "src_mem_handle" 0 8,
        DST_MEM_HANDLE "dst_mem_handle" 8 8,
        SIZE "size" 16 8,
        SRC_OFFSET "src_offset" 24 8,
        DST_OFFSET "dst_offset" 32 8,
    }
}

layout! {
    memset = "neuron_ioctl_memset", 24 {
        MEM_HANDLE "mem_handle" 0 8,
        OFFSET "offset" 8 8,
        VALUE "value" 16 4,
        SIZE "size" 20 4,
    }
}

layout! {
    memset64 = "neuron_ioctl_memset64", 32 {
        MEM_HANDLE "mem_handle" 0 8,
        OFFSET "offset" 8 8,
        VALUE "value" 16 4,
        SIZE "size" 24 8,
    }
}

layout! {
    mem_get_mc_mmap_info = "neuron_ioctl_mem_get_mc_mmap_info", 24 {
        PA "pa" 0 8,
        MMAP_OFFSET "mmap_offset" 8 8,
        SIZE "size" 16 8,
    }
}

layout! {
    mem_get_mc_mmap_info_v2 = "neuron_ioctl_mem_get_mc_mmap_info_v2", 32 {
        PA "pa" 0 8,
        MMAP_OFFSET "mmap_offset" 8 8,
        SIZE "size" 16 8,
        MEM_HANDLE "mem_handle" 24 8,
    }
}

layout! {
    notifications_init_v2 = "neuron_ioctl_notifications_init_v2", 48 {
        NQ_DEV_ID "nq_dev_id" 0 4,
        NQ_DEV_TYPE "nq_dev_type" 4 4,
        NQ_TYPE "nq_type" 8 4,
        ENGINE_INDEX "engine_index" 12 4,
        SIZE "size" 16 4,
        ON_HOST_MEMORY "on_host_memory" 20 4,
        DRAM_CHANNEL "dram_channel" 24 4,
        DRAM_REGION "dram_region" 28 4,
        MMAP_OFFSET "mmap_offset" 32 8,
        MEM_HANDLE "mem_handle" 40 8,
    }
}

layout! {
    notifications_init_with_realloc_v2 = "neuron_ioctl_notifications_init_with_realloc_v2", 56 {
        NQ_DEV_ID "nq_dev_id" 0 4,
        NQ_DEV_TYPE "nq_dev_type" 4 4,
        NQ_TYPE "nq_type" 8 4,
        ENGINE_INDEX "engine_index" 12 4,
        SIZE "size" 16 4,
        ON_HOST_MEMORY "on_host_memory" 20 4,
        DRAM_CHANNEL "dram_channel" 24 4,
        DRAM_REGION "dram_region" 28 4,
        FORCE_ALLOC_MEM "force_alloc_mem" 32 4,
        MMAP_OFFSET "mmap_offset" 40 8,
        MEM_HANDLE "mem_handle" 48 8,
    }
}

layout! {
    semaphore = "neuron_ioctl_semaphore", 12 {
        NC_ID "nc_id" 0 4,
        SEMAPHORE_INDEX "semaphore_index" 4 4,
        VALUE "value" 8 4,
    }
}

layout! {
    event = "neuron_ioctl_event", 12 {
        NC_ID "nc_id" 0 4,
        EVENT_INDEX "event_index" 4 4,
        VALUE "value" 8 4,
    }
}

layout! {
    host_device_id = "neuron_ioctl_host_device_id", 4 {
        HOST_DEVICE_ID "host_device_id" 0 4,
    }
}

layout! {
    resource_mmap_info = "neuron_ioctl_resource_mmap_info", 32 {
        BLOCK "block" 0 4,
        BLOCK_ID "block_id" 4 4,
        RESOURCE "resource" 8 4,
        OFFSET "offset" 16 8,
        SIZE "size" 24 8,
    }
}

layout! {
    dma_queue_init = "neuron_ioctl_dma_queue_init", 48 {
        ENG_ID "eng_id" 0 4,
        QID "qid" 4 4,
        TX_DESC_COUNT "tx_desc_count" 8 4,
        RX_DESC_COUNT "rx_desc_count" 12 4,
        TX_HANDLE "tx_handle" 16 8,
        RX_HANDLE "rx_handle" 24 8,
        RXC_HANDLE "rxc_handle" 32 8,
        AXI_PORT "axi_port" 40 4,
    }
}

layout! {
    dma_queue_init_batch = "neuron_ioctl_dma_queue_init_batch", 12296 {
        COUNT "count" 0 4,
        ENTRIES "entries" 8 12288,
    }
}

layout! {
    dma_queue_release = "neuron_ioctl_dma_queue_release", 8 {
        ENG_ID "eng_id" 0 4,
        QID "qid" 4 4,
    }
}

layout! {
    dma_copy_descriptors64 = "neuron_ioctl_dma_copy_descriptors64", 40 {
        MEM_HANDLE "mem_handle" 0 8,
        BUFFER "buffer" 8 8,
        NUM_DESCS "num_descs" 16 4,
        OFFSET "offset" 24 8,
        QUEUE_TYPE "queue_type" 32 4,
    }
}

/// Every layout above.
pub static ALL: &[&Layout] = &[
    &compatible_version::LAYOUT,
    &device_basic_info::LAYOUT,
    &device_driver_info::LAYOUT,
    &crwl_nc_map::LAYOUT,
    &crwl_nc_map_ext::LAYOUT,
    &crwl::LAYOUT,
    &device_reset::LAYOUT,
    &device_ready::LAYOUT,
    &cinit_set::LAYOUT,
    &nc_model_started_count::LAYOUT,
    &mem_alloc::LAYOUT,
    &mem_alloc_v2::LAYOUT,
    &mem_alloc_v2_mem_type::LAYOUT,
    &mem_alloc_v2_mem_type64::LAYOUT,
    &mem_free::LAYOUT,
    &mem_get_extended_info::LAYOUT,
    &mem_get_pa::LAYOUT,
    &mem_get_info::LAYOUT,
    &mem_buf_copy::LAYOUT,
    &mem_buf_copy64::LAYOUT,
    &mem_copy::LAYOUT,
    &mem_copy64::LAYOUT,
    &memset::LAYOUT,
    &memset64::LAYOUT,
    &mem_get_mc_mmap_info::LAYOUT,
    &mem_get_mc_mmap_info_v2::LAYOUT,
    &notifications_init_v2::LAYOUT,
    &notifications_init_with_realloc_v2::LAYOUT,
    &semaphore::LAYOUT,
    &event::LAYOUT,
    &host_device_id::LAYOUT,
    &resource_mmap_info::LAYOUT,
    &dma_queue_init::LAYOUT,
    &dma_queue_init_batch::LAYOUT,
    &dma_queue_release::LAYOUT,
    &dma_copy_descriptors64::LAYOUT,
];
