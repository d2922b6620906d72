//! Serving one driver ioctl, in the order of `ncdev_ioctl`: an `O_WRONLY` fd gets the misc
//! set only; on an `O_RDWR` fd the attach check comes first, then the requests by exact
//! number or by `_IOC_NR` as the driver matches them, and the misc set last.
//!
//! Requests of the header the emulator does not model (DMA engines, DMA copies started on a
//! queue and queue state, BAR access, metrics, datastore, DMA-buf, HBM scrub, pods, TOP_SP
//! queues, …) fail with `EOPNOTSUPP`; the DMA queue set-up and the semaphore block's mmap
//! info are served by `dma.rs`.
//! The no-ops of the driver (`DEVICE_INIT`, `DEVICE_RELEASE`, `DMA_ENG_INIT`,
//! `NOTIFICATIONS_DESTROY_V1`) return 0, `DMA_QUIESCE_QUEUES` fails with `ENOTTY`
//! (`-ENOIOCTLCMD`) and `NOTIFICATIONS_QUEUE_INFO` with `EPERM` (it returns -1).
//!
//! One difference in failure reporting: where the driver returns the positive count of bytes
//! `copy_to_user`/`copy_from_user` could not copy, the emulator fails with `EFAULT`.

mod call;
mod core;
mod dma;
mod mem;
mod misc;

use std::sync::Arc;

use nrt_sim::SimMachine;

pub(crate) use call::{Call, Fail, Outcome, errno};
pub(crate) use misc::arch_number;
pub use misc::{FEATURE_FLAGS, PCI_REVISION};

use crate::abi::requests::{self as rq, ioc_nr};
use crate::state::State;

/// Serves `call`, then keeps the mapped semaphore blocks equal to what it changed.
pub(crate) fn dispatch(st: &mut State, machine: &Arc<SimMachine>, call: &Call<'_, '_>) -> Outcome {
    let out = serve(st, machine, call);
    if out.is_ok() && !call.free_access {
        dma::mirror(st, call.request, call.device);
    }
    out
}

fn serve(st: &mut State, machine: &Arc<SimMachine>, call: &Call<'_, '_>) -> Outcome {
    if call.free_access {
        return misc::misc(st, call);
    }
    if crate::abi::lookup(call.request).is_some_and(|r| r.attach_checked) {
        let attached = st
            .device(call.device)
            .is_some_and(|d| d.is_attached(call.tgid()));
        if !attached {
            return errno(libc::EACCES);
        }
    }
    let r = call.request;
    let nr = ioc_nr(r);
    match r {
        rq::DEVICE_RESET | rq::DEVICE_READY | rq::DEVICE_RESET_STATUS => core::deprecated(st, call),
        rq::NC_RESET_READY => core::nc_reset_ready(st, call),
        rq::NC_RESET => core::nc_reset(st, call),
        rq::CINIT_SET_STATE => core::cinit_set_state(st, call),
        rq::NC_MODEL_STARTED_COUNT => core::model_started_count(st, call),
        rq::DEVICE_INIT | rq::DEVICE_RELEASE | rq::DMA_ENG_INIT | rq::NOTIFICATIONS_DESTROY_V1 => {
            Ok(0)
        }
        rq::DMA_QUIESCE_QUEUES => errno(libc::ENOTTY),
        rq::MEM_ALLOC => mem::alloc(st, machine, call),
        _ if nr == ioc_nr(rq::MEM_ALLOC_V2MT) => mem::alloc(st, machine, call),
        rq::MEM_GET_EXTENDED_INFO => mem::extended_info(st, call),
        rq::MEM_GET_INFO | rq::MEM_GET_PA => mem::legacy_info(st, call),
        rq::MEM_FREE => mem::free(st, call),
        _ if nr == ioc_nr(rq::MEM_COPY) => mem::copy(st, call),
        _ if nr == ioc_nr(rq::MEM_COPY_ASYNC) => errno(libc::EOPNOTSUPP),
        rq::MEM_COPY_ASYNC_WAIT => errno(libc::EOPNOTSUPP),
        _ if nr == ioc_nr(rq::MEM_BUF_COPY) => mem::buf_copy(st, call),
        // The driver routes every request of this number to the zero-copy path.
        _ if nr == ioc_nr(rq::MEM_BUF_ZEROCOPY64) => mem::buf_copy(st, call),
        _ if nr == ioc_nr(rq::MEMSET) => mem::memset_op(st, call),
        rq::SEMAPHORE_READ
        | rq::SEMAPHORE_WRITE
        | rq::SEMAPHORE_INCREMENT
        | rq::SEMAPHORE_DECREMENT => core::semaphore_op(st, machine, call),
        rq::EVENT_GET | rq::EVENT_SET => core::event_op(st, call),
        rq::NOTIFICATIONS_INIT_V2 | rq::NOTIFICATIONS_INIT_WITH_REALLOC_V2 => {
            core::nq_init(st, machine, call)
        }
        rq::NOTIFICATIONS_QUEUE_INFO => errno(libc::EPERM),
        rq::CRWL_READER_ENTER
        | rq::CRWL_READER_EXIT
        | rq::CRWL_WRITER_ENTER
        | rq::CRWL_WRITER_DOWNGRADE => core::core_lock(st, call),
        _ if nr == ioc_nr(rq::MEM_MC_GET_INFO) => mem::mc_info(st, call),
        rq::HOST_DEVICE_ID => mem::host_device_id(call),
        rq::DMA_QUEUE_INIT | rq::DMA_QUEUE_INIT_BATCH | rq::DMA_QUEUE_RELEASE => {
            dma::queue_op(st, call)
        }
        rq::DMA_COPY_DESCRIPTORS64 => dma::copy_descriptors(st, call),
        rq::RESOURCE_MMAP_INFO => dma::resource_mmap_info(st, call),
        rq::DEVICE_INFO
        | rq::DEVICE_APP_PID
        | rq::DEVICE_GET_ALL_APPS_INFO
        | rq::DMA_ENG_SET_STATE
        | rq::DMA_QUEUE_COPY_START
        | rq::DMA_ACK_COMPLETED
        | rq::DMA_ENG_GET_STATE
        | rq::DMA_QUEUE_GET_STATE
        | rq::DMA_DESCRIPTOR_COPYOUT
        | rq::BAR_READ
        | rq::BAR_WRITE
        | rq::POST_METRIC
        | rq::NOTIFICATIONS_INIT_V1
        | rq::READ_HW_COUNTERS
        | rq::ACQUIRE_NEURON_DS
        | rq::RELEASE_NEURON_DS
        | rq::DEVICE_BDF
        | rq::PROGRAM_ENGINE
        | rq::DUMP_MEM_CHUNKS
        | rq::HBM_SCRUB_START
        | rq::HBM_SCRUB_WAIT => errno(libc::EOPNOTSUPP),
        _ if nr == ioc_nr(rq::DMA_COPY_DESCRIPTORS) || nr == ioc_nr(rq::PROGRAM_ENGINE_NC) => {
            errno(libc::EOPNOTSUPP)
        }
        _ => misc::misc(st, call),
    }
}
