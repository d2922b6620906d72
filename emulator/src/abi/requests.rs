//! Every request of the driver header (94 at driver 2.24.7.0): its number, the struct the
//! handler copies when the emulator serves it, and the two per-request rules of `ncdev_ioctl`
//! (served on an `O_WRONLY` fd; checked for an attached process). Checked against the ABI
//! JSON by `tests/abi_tables.rs`.

use super::layouts::*;
use super::record::Layout;

/// One driver request.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// Name without the `NEURON_IOCTL_` prefix.
    pub name: &'static str,
    /// The request number (`dir << 30 | size << 16 | 'N' << 8 | nr`).
    pub request: u32,
    /// The struct the emulator copies for it (`None`: the emulator does not decode one).
    pub arg: Option<&'static Layout>,
    /// Served on an `O_WRONLY` ("free access") fd by `ncdev_misc_ioctl`.
    pub misc_ok: bool,
    /// Refused with `EACCES` unless the calling process is attached.
    pub attach_checked: bool,
}

impl Request {
    /// `_IOC_DIR`: 0 none, 1 write, 2 read, 3 both.
    pub const fn dir(&self) -> u32 {
        ioc_dir(self.request)
    }

    /// `_IOC_NR`.
    pub const fn nr(&self) -> u32 {
        ioc_nr(self.request)
    }

    /// `_IOC_SIZE` (8 for the requests declared with a pointer type).
    pub const fn size(&self) -> u32 {
        ioc_size(self.request)
    }
}

/// `_IOC_DIR` of a request number.
pub const fn ioc_dir(request: u32) -> u32 {
    request >> 30
}

/// `_IOC_SIZE` of a request number.
pub const fn ioc_size(request: u32) -> u32 {
    (request >> 16) & 0x3fff
}

/// `_IOC_TYPE` of a request number.
pub const fn ioc_type(request: u32) -> u32 {
    (request >> 8) & 0xff
}

/// `_IOC_NR` of a request number.
pub const fn ioc_nr(request: u32) -> u32 {
    request & 0xff
}

const fn req(
    name: &'static str,
    request: u32,
    arg: Option<&'static Layout>,
    misc_ok: bool,
    attach_checked: bool,
) -> Request {
    Request {
        name,
        request,
        arg,
        misc_ok,
        attach_checked,
    }
}

/// `NEURON_IOCTL_DEVICE_RESET`.
pub const DEVICE_RESET: u32 = 0x0000_4e01;
/// `NEURON_IOCTL_DEVICE_READY`.
pub const DEVICE_READY: u32 = 0x8001_4e02;
/// `NEURON_IOCTL_DEVICE_RESET_STATUS`.
pub const DEVICE_RESET_STATUS: u32 = 0x8001_4e6a;
/// `NEURON_IOCTL_DEVICE_INFO`.
pub const DEVICE_INFO: u32 = 0x8008_4e03;
/// `NEURON_IOCTL_DEVICE_INIT`.
pub const DEVICE_INIT: u32 = 0x8008_4e04;
/// `NEURON_IOCTL_DEVICE_RELEASE`.
pub const DEVICE_RELEASE: u32 = 0x0000_4e05;
/// `NEURON_IOCTL_DEVICE_APP_PID`.
pub const DEVICE_APP_PID: u32 = 0x8004_4e06;
/// `NEURON_IOCTL_DEVICE_GET_ALL_APPS_INFO`.
pub const DEVICE_GET_ALL_APPS_INFO: u32 = 0x8008_4e07;
/// `NEURON_IOCTL_BAR_READ`.
pub const BAR_READ: u32 = 0x8008_4e0b;
/// `NEURON_IOCTL_BAR_WRITE`.
pub const BAR_WRITE: u32 = 0x4008_4e0c;
/// `NEURON_IOCTL_POST_METRIC`.
pub const POST_METRIC: u32 = 0x4008_4e0d;
/// `NEURON_IOCTL_MEM_ALLOC`.
pub const MEM_ALLOC: u32 = 0x8008_4e15;
/// `NEURON_IOCTL_MEM_ALLOC_V2`.
pub const MEM_ALLOC_V2: u32 = 0x8008_4e66;
/// `NEURON_IOCTL_MEM_ALLOC_V2MT`.
pub const MEM_ALLOC_V2MT: u32 = 0x8030_4e66;
/// `NEURON_IOCTL_MEM_ALLOC_V2MT64`.
pub const MEM_ALLOC_V2MT64: u32 = 0x8038_4e66;
/// `NEURON_IOCTL_MEM_FREE`.
pub const MEM_FREE: u32 = 0x8008_4e16;
/// `NEURON_IOCTL_MEM_COPY`.
pub const MEM_COPY: u32 = 0x8008_4e17;
/// `NEURON_IOCTL_MEM_COPY64`.
pub const MEM_COPY64: u32 = 0x8028_4e17;
/// `NEURON_IOCTL_MEM_BUF_COPY`.
pub const MEM_BUF_COPY: u32 = 0xc008_4e18;
/// `NEURON_IOCTL_MEM_BUF_COPY64`.
pub const MEM_BUF_COPY64: u32 = 0xc028_4e18;
/// `NEURON_IOCTL_MEM_GET_PA`.
pub const MEM_GET_PA: u32 = 0x8008_4e19;
/// `NEURON_IOCTL_MEM_GET_INFO`.
pub const MEM_GET_INFO: u32 = 0x8008_4e1a;
/// `NEURON_IOCTL_PROGRAM_ENGINE`.
pub const PROGRAM_ENGINE: u32 = 0xc008_4e1b;
/// `NEURON_IOCTL_MEMSET`.
pub const MEMSET: u32 = 0x8008_4e1c;
/// `NEURON_IOCTL_MEMSET64`.
pub const MEMSET64: u32 = 0x8020_4e1c;
/// `NEURON_IOCTL_MEM_GET_EXTENDED_INFO`.
pub const MEM_GET_EXTENDED_INFO: u32 = 0x8008_4e1d;
/// `NEURON_IOCTL_DMA_ENG_INIT`.
pub const DMA_ENG_INIT: u32 = 0x8008_4e1e;
/// `NEURON_IOCTL_DMA_ENG_SET_STATE`.
pub const DMA_ENG_SET_STATE: u32 = 0x8008_4e1f;
/// `NEURON_IOCTL_DMA_ENG_GET_STATE`.
pub const DMA_ENG_GET_STATE: u32 = 0xc008_4e20;
/// `NEURON_IOCTL_DMA_QUEUE_INIT`.
pub const DMA_QUEUE_INIT: u32 = 0x8008_4e21;
/// `NEURON_IOCTL_DMA_QUEUE_INIT_BATCH`.
pub const DMA_QUEUE_INIT_BATCH: u32 = 0xb008_4e85;
/// `NEURON_IOCTL_DMA_QUEUE_RELEASE`.
pub const DMA_QUEUE_RELEASE: u32 = 0x8008_4e22;
/// `NEURON_IOCTL_DMA_QUEUE_COPY_START`.
pub const DMA_QUEUE_COPY_START: u32 = 0x8008_4e23;
/// `NEURON_IOCTL_DMA_ACK_COMPLETED`.
pub const DMA_ACK_COMPLETED: u32 = 0x8008_4e24;
/// `NEURON_IOCTL_DMA_QUEUE_GET_STATE`.
pub const DMA_QUEUE_GET_STATE: u32 = 0xc008_4e25;
/// `NEURON_IOCTL_DMA_COPY_DESCRIPTORS`.
pub const DMA_COPY_DESCRIPTORS: u32 = 0x8008_4e26;
/// `NEURON_IOCTL_DMA_COPY_DESCRIPTORS64`.
pub const DMA_COPY_DESCRIPTORS64: u32 = 0x8028_4e26;
/// `NEURON_IOCTL_DMA_DESCRIPTOR_COPYOUT`.
pub const DMA_DESCRIPTOR_COPYOUT: u32 = 0xc008_4e27;
/// `NEURON_IOCTL_DMA_QUIESCE_QUEUES`.
pub const DMA_QUIESCE_QUEUES: u32 = 0x8008_4e28;
/// `NEURON_IOCTL_SEMAPHORE_INCREMENT`.
pub const SEMAPHORE_INCREMENT: u32 = 0x8008_4e29;
/// `NEURON_IOCTL_SEMAPHORE_DECREMENT`.
pub const SEMAPHORE_DECREMENT: u32 = 0x8008_4e2a;
/// `NEURON_IOCTL_SEMAPHORE_READ`.
pub const SEMAPHORE_READ: u32 = 0xc008_4e2b;
/// `NEURON_IOCTL_SEMAPHORE_WRITE`.
pub const SEMAPHORE_WRITE: u32 = 0x8008_4e2c;
/// `NEURON_IOCTL_EVENT_SET`.
pub const EVENT_SET: u32 = 0x8008_4e2d;
/// `NEURON_IOCTL_EVENT_GET`.
pub const EVENT_GET: u32 = 0xc008_4e2e;
/// `NEURON_IOCTL_NOTIFICATIONS_INIT_V1`.
pub const NOTIFICATIONS_INIT_V1: u32 = 0x8008_4e33;
/// `NEURON_IOCTL_NOTIFICATIONS_DESTROY_V1`.
pub const NOTIFICATIONS_DESTROY_V1: u32 = 0x8008_4e34;
/// `NEURON_IOCTL_NOTIFICATIONS_INIT_V2`.
pub const NOTIFICATIONS_INIT_V2: u32 = 0x8008_4e35;
/// `NEURON_IOCTL_NOTIFICATIONS_INIT_WITH_REALLOC_V2`.
pub const NOTIFICATIONS_INIT_WITH_REALLOC_V2: u32 = 0x8008_4e36;
/// `NEURON_IOCTL_NOTIFICATIONS_QUEUE_INFO`.
pub const NOTIFICATIONS_QUEUE_INFO: u32 = 0x8008_4e3a;
/// `NEURON_IOCTL_READ_HW_COUNTERS`.
pub const READ_HW_COUNTERS: u32 = 0x8008_4e3d;
/// `NEURON_IOCTL_ACQUIRE_NEURON_DS`.
pub const ACQUIRE_NEURON_DS: u32 = 0x8008_4e47;
/// `NEURON_IOCTL_RELEASE_NEURON_DS`.
pub const RELEASE_NEURON_DS: u32 = 0x8008_4e48;
/// `NEURON_IOCTL_CRWL_READER_ENTER`.
pub const CRWL_READER_ENTER: u32 = 0x4008_4e51;
/// `NEURON_IOCTL_CRWL_READER_EXIT`.
pub const CRWL_READER_EXIT: u32 = 0x4008_4e52;
/// `NEURON_IOCTL_CRWL_WRITER_ENTER`.
pub const CRWL_WRITER_ENTER: u32 = 0x4008_4e53;
/// `NEURON_IOCTL_CRWL_WRITER_DOWNGRADE`.
pub const CRWL_WRITER_DOWNGRADE: u32 = 0x4008_4e54;
/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK`.
pub const CRWL_NC_RANGE_MARK: u32 = 0x4008_4e55;
/// `NEURON_IOCTL_CRWL_NC_RANGE_MARK_EXT0`.
pub const CRWL_NC_RANGE_MARK_EXT0: u32 = 0xc050_4e55;
/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK`.
pub const CRWL_NC_RANGE_UNMARK: u32 = 0x4008_4e56;
/// `NEURON_IOCTL_CRWL_NC_RANGE_UNMARK_EXT0`.
pub const CRWL_NC_RANGE_UNMARK_EXT0: u32 = 0x4050_4e56;
/// `NEURON_IOCTL_CINIT_SET_STATE`.
pub const CINIT_SET_STATE: u32 = 0x4008_4e5b;
/// `NEURON_IOCTL_NC_MODEL_STARTED_COUNT`.
pub const NC_MODEL_STARTED_COUNT: u32 = 0x4008_4e5c;
/// `NEURON_IOCTL_COMPATIBLE_VERSION`.
pub const COMPATIBLE_VERSION: u32 = 0x4008_4e5d;
/// `NEURON_IOCTL_DEVICE_BASIC_INFO`.
pub const DEVICE_BASIC_INFO: u32 = 0x4008_4e64;
/// `NEURON_IOCTL_DEVICE_BDF`.
pub const DEVICE_BDF: u32 = 0x8008_4e65;
/// `NEURON_IOCTL_NC_RESET`.
pub const NC_RESET: u32 = 0x8008_4e67;
/// `NEURON_IOCTL_NC_RESET_READY`.
pub const NC_RESET_READY: u32 = 0x8008_4e68;
/// `NEURON_IOCTL_PROGRAM_ENGINE_NC`.
pub const PROGRAM_ENGINE_NC: u32 = 0xc008_4e69;
/// `NEURON_IOCTL_PROGRAM_ENGINE_NC64`.
pub const PROGRAM_ENGINE_NC64: u32 = 0xc028_4e69;
/// `NEURON_IOCTL_DEVICE_BDF_EXT`.
pub const DEVICE_BDF_EXT: u32 = 0x8008_4e6a;
/// `NEURON_IOCTL_DMABUF_FD`.
pub const DMABUF_FD: u32 = 0x8008_4e6b;
/// `NEURON_IOCTL_MEM_COPY_ASYNC`.
pub const MEM_COPY_ASYNC: u32 = 0xc030_4e6c;
/// `NEURON_IOCTL_MEM_COPY_ASYNC64`.
pub const MEM_COPY_ASYNC64: u32 = 0xc038_4e6c;
/// `NEURON_IOCTL_MEM_COPY_ASYNC_WAIT`.
pub const MEM_COPY_ASYNC_WAIT: u32 = 0x4018_4e6d;
/// `NEURON_IOCTL_DRIVER_INFO_GET`.
pub const DRIVER_INFO_GET: u32 = 0x8018_4e6e;
/// `NEURON_IOCTL_DRIVER_INFO_SET`.
pub const DRIVER_INFO_SET: u32 = 0x4018_4e6e;
/// `NEURON_IOCTL_MEM_MC_GET_INFO`.
pub const MEM_MC_GET_INFO: u32 = 0xc018_4e6f;
/// `NEURON_IOCTL_MEM_MC_GET_INFO_V2`.
pub const MEM_MC_GET_INFO_V2: u32 = 0xc020_4e6f;
/// `NEURON_IOCTL_RESOURCE_MMAP_INFO`.
pub const RESOURCE_MMAP_INFO: u32 = 0xc020_4e70;
/// `NEURON_IOCTL_PRINTK`.
pub const PRINTK: u32 = 0x4010_4e71;
/// `NEURON_IOCTL_HOST_DEVICE_ID`.
pub const HOST_DEVICE_ID: u32 = 0x8004_4e72;
/// `NEURON_IOCTL_HOST_DEVICE_ID_TO_RID_MAP`.
pub const HOST_DEVICE_ID_TO_RID_MAP: u32 = 0xc104_4e73;
/// `NEURON_IOCTL_DUMP_MEM_CHUNKS`.
pub const DUMP_MEM_CHUNKS: u32 = 0x8008_4e74;
/// `NEURON_IOCTL_NC_PID_STATE_DUMP`.
pub const NC_PID_STATE_DUMP: u32 = 0xc010_4e75;
/// `NEURON_IOCTL_HBM_SCRUB_START`.
pub const HBM_SCRUB_START: u32 = 0xc010_4e76;
/// `NEURON_IOCTL_HBM_SCRUB_WAIT`.
pub const HBM_SCRUB_WAIT: u32 = 0xc008_4e77;
/// `NEURON_IOCTL_GET_LOGICAL_TO_PHYSICAL_NC_MAP`.
pub const GET_LOGICAL_TO_PHYSICAL_NC_MAP: u32 = 0xc010_4e78;
/// `NEURON_IOCTL_POD_INFO`.
pub const POD_INFO: u32 = 0xc104_4e79;
/// `NEURON_IOCTL_POD_STATUS`.
pub const POD_STATUS: u32 = 0xc10c_4e7a;
/// `NEURON_IOCTL_POD_STATUS_V2`.
pub const POD_STATUS_V2: u32 = 0xc114_4e7a;
/// `NEURON_IOCTL_POD_CTRL`.
pub const POD_CTRL: u32 = 0xc010_4e7b;
/// `NEURON_IOCTL_POD_CTRL_V2`.
pub const POD_CTRL_V2: u32 = 0xc014_4e7b;
/// `NEURON_IOCTL_MEM_BUF_ZEROCOPY64`.
pub const MEM_BUF_ZEROCOPY64: u32 = 0xc028_4e7c;

/// Every request of the header, in header order.
pub static REQUESTS: &[Request] = &[
    req("DEVICE_RESET", DEVICE_RESET, None, false, false),
    req("DEVICE_READY", DEVICE_READY, None, false, false),
    req(
        "DEVICE_RESET_STATUS",
        DEVICE_RESET_STATUS,
        None,
        false,
        false,
    ),
    req("DEVICE_INFO", DEVICE_INFO, None, false, false),
    req("DEVICE_INIT", DEVICE_INIT, None, false, false),
    req("DEVICE_RELEASE", DEVICE_RELEASE, None, false, false),
    req("DEVICE_APP_PID", DEVICE_APP_PID, None, false, false),
    req(
        "DEVICE_GET_ALL_APPS_INFO",
        DEVICE_GET_ALL_APPS_INFO,
        None,
        false,
        false,
    ),
    req("BAR_READ", BAR_READ, None, false, false),
    req("BAR_WRITE", BAR_WRITE, None, false, true),
    req("POST_METRIC", POST_METRIC, None, false, true),
    req(
        "MEM_ALLOC",
        MEM_ALLOC,
        Some(&mem_alloc::LAYOUT),
        false,
        true,
    ),
    req(
        "MEM_ALLOC_V2",
        MEM_ALLOC_V2,
        Some(&mem_alloc_v2::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_ALLOC_V2MT",
        MEM_ALLOC_V2MT,
        Some(&mem_alloc_v2_mem_type::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_ALLOC_V2MT64",
        MEM_ALLOC_V2MT64,
        Some(&mem_alloc_v2_mem_type64::LAYOUT),
        false,
        false,
    ),
    req("MEM_FREE", MEM_FREE, Some(&mem_free::LAYOUT), false, true),
    req("MEM_COPY", MEM_COPY, Some(&mem_copy::LAYOUT), false, true),
    req(
        "MEM_COPY64",
        MEM_COPY64,
        Some(&mem_copy64::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_BUF_COPY",
        MEM_BUF_COPY,
        Some(&mem_buf_copy::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_BUF_COPY64",
        MEM_BUF_COPY64,
        Some(&mem_buf_copy64::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_GET_PA",
        MEM_GET_PA,
        Some(&mem_get_pa::LAYOUT),
        false,
        true,
    ),
    req(
        "MEM_GET_INFO",
        MEM_GET_INFO,
        Some(&mem_get_info::LAYOUT),
        false,
        true,
    ),
    req("PROGRAM_ENGINE", PROGRAM_ENGINE, None, false, false),
    req("MEMSET", MEMSET, Some(&memset::LAYOUT), false, false),
    req("MEMSET64", MEMSET64, Some(&memset64::LAYOUT), false, false),
    req(
        "MEM_GET_EXTENDED_INFO",
        MEM_GET_EXTENDED_INFO,
        Some(&mem_get_extended_info::LAYOUT),
        false,
        false,
    ),
    req("DMA_ENG_INIT", DMA_ENG_INIT, None, false, true),
    req("DMA_ENG_SET_STATE", DMA_ENG_SET_STATE, None, false, true),
    req("DMA_ENG_GET_STATE", DMA_ENG_GET_STATE, None, false, false),
    req(
        "DMA_QUEUE_INIT",
        DMA_QUEUE_INIT,
        Some(&dma_queue_init::LAYOUT),
        false,
        true,
    ),
    req(
        "DMA_QUEUE_INIT_BATCH",
        DMA_QUEUE_INIT_BATCH,
        Some(&dma_queue_init_batch::LAYOUT),
        false,
        false,
    ),
    req(
        "DMA_QUEUE_RELEASE",
        DMA_QUEUE_RELEASE,
        Some(&dma_queue_release::LAYOUT),
        false,
        true,
    ),
    req(
        "DMA_QUEUE_COPY_START",
        DMA_QUEUE_COPY_START,
        None,
        false,
        false,
    ),
    req("DMA_ACK_COMPLETED", DMA_ACK_COMPLETED, None, false, true),
    req(
        "DMA_QUEUE_GET_STATE",
        DMA_QUEUE_GET_STATE,
        None,
        false,
        false,
    ),
    req(
        "DMA_COPY_DESCRIPTORS",
        DMA_COPY_DESCRIPTORS,
        None,
        false,
        true,
    ),
    req(
        "DMA_COPY_DESCRIPTORS64",
        DMA_COPY_DESCRIPTORS64,
        Some(&dma_copy_descriptors64::LAYOUT),
        false,
        false,
    ),
    req(
        "DMA_DESCRIPTOR_COPYOUT",
        DMA_DESCRIPTOR_COPYOUT,
        None,
        false,
        false,
    ),
    req("DMA_QUIESCE_QUEUES", DMA_QUIESCE_QUEUES, None, false, false),
    req(
        "SEMAPHORE_INCREMENT",
        SEMAPHORE_INCREMENT,
        Some(&semaphore::LAYOUT),
        false,
        false,
    ),
    req(
        "SEMAPHORE_DECREMENT",
        SEMAPHORE_DECREMENT,
        Some(&semaphore::LAYOUT),
        false,
        false,
    ),
    req(
        "SEMAPHORE_READ",
        SEMAPHORE_READ,
        Some(&semaphore::LAYOUT),
        false,
        false,
    ),
    req(
        "SEMAPHORE_WRITE",
        SEMAPHORE_WRITE,
        Some(&semaphore::LAYOUT),
        false,
        false,
    ),
    req("EVENT_SET", EVENT_SET, Some(&event::LAYOUT), false, false),
    req("EVENT_GET", EVENT_GET, Some(&event::LAYOUT), false, false),
    req(
        "NOTIFICATIONS_INIT_V1",
        NOTIFICATIONS_INIT_V1,
        None,
        false,
        true,
    ),
    req(
        "NOTIFICATIONS_DESTROY_V1",
        NOTIFICATIONS_DESTROY_V1,
        None,
        false,
        false,
    ),
    req(
        "NOTIFICATIONS_INIT_V2",
        NOTIFICATIONS_INIT_V2,
        Some(&notifications_init_v2::LAYOUT),
        false,
        true,
    ),
    req(
        "NOTIFICATIONS_INIT_WITH_REALLOC_V2",
        NOTIFICATIONS_INIT_WITH_REALLOC_V2,
        Some(&notifications_init_with_realloc_v2::LAYOUT),
        false,
        true,
    ),
    req(
        "NOTIFICATIONS_QUEUE_INFO",
        NOTIFICATIONS_QUEUE_INFO,
        None,
        false,
        false,
    ),
    req("READ_HW_COUNTERS", READ_HW_COUNTERS, None, false, false),
    req("ACQUIRE_NEURON_DS", ACQUIRE_NEURON_DS, None, false, false),
    req("RELEASE_NEURON_DS", RELEASE_NEURON_DS, None, false, false),
    req(
        "CRWL_READER_ENTER",
        CRWL_READER_ENTER,
        Some(&crwl::LAYOUT),
        false,
        false,
    ),
    req(
        "CRWL_READER_EXIT",
        CRWL_READER_EXIT,
        Some(&crwl::LAYOUT),
        false,
        false,
    ),
    req(
        "CRWL_WRITER_ENTER",
        CRWL_WRITER_ENTER,
        Some(&crwl::LAYOUT),
        false,
        false,
    ),
    req(
        "CRWL_WRITER_DOWNGRADE",
        CRWL_WRITER_DOWNGRADE,
        Some(&crwl::LAYOUT),
        false,
        false,
    ),
    req(
        "CRWL_NC_RANGE_MARK",
        CRWL_NC_RANGE_MARK,
        Some(&crwl_nc_map::LAYOUT),
        true,
        false,
    ),
    req(
        "CRWL_NC_RANGE_MARK_EXT0",
        CRWL_NC_RANGE_MARK_EXT0,
        Some(&crwl_nc_map_ext::LAYOUT),
        true,
        false,
    ),
    req(
        "CRWL_NC_RANGE_UNMARK",
        CRWL_NC_RANGE_UNMARK,
        Some(&crwl_nc_map::LAYOUT),
        true,
        false,
    ),
    req(
        "CRWL_NC_RANGE_UNMARK_EXT0",
        CRWL_NC_RANGE_UNMARK_EXT0,
        Some(&crwl_nc_map_ext::LAYOUT),
        true,
        false,
    ),
    req(
        "CINIT_SET_STATE",
        CINIT_SET_STATE,
        Some(&cinit_set::LAYOUT),
        false,
        false,
    ),
    req(
        "NC_MODEL_STARTED_COUNT",
        NC_MODEL_STARTED_COUNT,
        Some(&nc_model_started_count::LAYOUT),
        false,
        false,
    ),
    req(
        "COMPATIBLE_VERSION",
        COMPATIBLE_VERSION,
        Some(&compatible_version::LAYOUT),
        true,
        false,
    ),
    req(
        "DEVICE_BASIC_INFO",
        DEVICE_BASIC_INFO,
        Some(&device_basic_info::LAYOUT),
        true,
        false,
    ),
    req("DEVICE_BDF", DEVICE_BDF, None, false, false),
    req(
        "NC_RESET",
        NC_RESET,
        Some(&device_reset::LAYOUT),
        false,
        false,
    ),
    req(
        "NC_RESET_READY",
        NC_RESET_READY,
        Some(&device_ready::LAYOUT),
        false,
        false,
    ),
    req("PROGRAM_ENGINE_NC", PROGRAM_ENGINE_NC, None, false, false),
    req(
        "PROGRAM_ENGINE_NC64",
        PROGRAM_ENGINE_NC64,
        None,
        false,
        false,
    ),
    req("DEVICE_BDF_EXT", DEVICE_BDF_EXT, None, true, false),
    req("DMABUF_FD", DMABUF_FD, None, true, false),
    req("MEM_COPY_ASYNC", MEM_COPY_ASYNC, None, false, true),
    req("MEM_COPY_ASYNC64", MEM_COPY_ASYNC64, None, false, false),
    req(
        "MEM_COPY_ASYNC_WAIT",
        MEM_COPY_ASYNC_WAIT,
        None,
        false,
        true,
    ),
    req(
        "DRIVER_INFO_GET",
        DRIVER_INFO_GET,
        Some(&device_driver_info::LAYOUT),
        true,
        false,
    ),
    req(
        "DRIVER_INFO_SET",
        DRIVER_INFO_SET,
        Some(&device_driver_info::LAYOUT),
        true,
        true,
    ),
    req(
        "MEM_MC_GET_INFO",
        MEM_MC_GET_INFO,
        Some(&mem_get_mc_mmap_info::LAYOUT),
        false,
        false,
    ),
    req(
        "MEM_MC_GET_INFO_V2",
        MEM_MC_GET_INFO_V2,
        Some(&mem_get_mc_mmap_info_v2::LAYOUT),
        false,
        false,
    ),
    req(
        "RESOURCE_MMAP_INFO",
        RESOURCE_MMAP_INFO,
        Some(&resource_mmap_info::LAYOUT),
        false,
        false,
    ),
    req("PRINTK", PRINTK, None, true, false),
    req(
        "HOST_DEVICE_ID",
        HOST_DEVICE_ID,
        Some(&host_device_id::LAYOUT),
        false,
        false,
    ),
    req(
        "HOST_DEVICE_ID_TO_RID_MAP",
        HOST_DEVICE_ID_TO_RID_MAP,
        None,
        true,
        false,
    ),
    req("DUMP_MEM_CHUNKS", DUMP_MEM_CHUNKS, None, false, false),
    req("NC_PID_STATE_DUMP", NC_PID_STATE_DUMP, None, true, false),
    req("HBM_SCRUB_START", HBM_SCRUB_START, None, false, false),
    req("HBM_SCRUB_WAIT", HBM_SCRUB_WAIT, None, false, false),
    req(
        "GET_LOGICAL_TO_PHYSICAL_NC_MAP",
        GET_LOGICAL_TO_PHYSICAL_NC_MAP,
        None,
        true,
        false,
    ),
    req("POD_INFO", POD_INFO, None, true, false),
    req("POD_STATUS", POD_STATUS, None, true, false),
    req("POD_STATUS_V2", POD_STATUS_V2, None, true, false),
    req("POD_CTRL", POD_CTRL, None, true, false),
    req("POD_CTRL_V2", POD_CTRL_V2, None, true, false),
    req(
        "MEM_BUF_ZEROCOPY64",
        MEM_BUF_ZEROCOPY64,
        Some(&mem_buf_copy64::LAYOUT),
        false,
        false,
    ),
];

/// The table entry of request number `request`.
pub fn lookup(request: u32) -> Option<&'static Request> {
    REQUESTS.iter().find(|r| r.request == request)
}

/// The name of request number `request` (`"?"` when the header has none).
pub fn name_of(request: u32) -> &'static str {
    lookup(request).map_or("?", |r| r.name)
}
