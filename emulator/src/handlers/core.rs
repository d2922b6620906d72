//! Per-core requests: resets (`NC_RESET`, `NC_RESET_READY` and the deprecated device-wide
//! ones), the core-init state machine, semaphores (the doorbell of the launch convention
//! among them), events, notification queues and the model reader/writer locks.

use std::sync::Arc;

use nrt_sim::SimMachine;

use super::call::{Call, Fail, Outcome, errno};
use crate::abi::Rec;
use crate::abi::layouts::{
    cinit_set, crwl, device_ready, device_reset, event, nc_model_started_count,
    notifications_init_v2 as nq2, notifications_init_with_realloc_v2 as nqr, semaphore,
};
use crate::abi::requests as rq;
use crate::launch;
use crate::memory::{self, AllocRequest};
use crate::state::{
    CINIT_COMPLETED, CINIT_INVALID, CINIT_STARTED, Device, EVENTS, MAX_NC_PER_DEVICE, SEMAPHORES,
    State,
};

/// `NEURON_NC_MAP_DEVICE`.
const NC_MAP_DEVICE: u32 = u32::MAX;

/// `ncdev_ncid_valid`: `E2BIG` past the device's cores.
fn nc_valid(dev: &Device, nc_id: u32) -> Result<usize, Fail> {
    if nc_id < dev.cores {
        Ok(nc_id as usize)
    } else {
        errno(libc::E2BIG)
    }
}

fn device<'a>(st: &'a mut State, call: &Call<'_, '_>) -> Result<&'a mut Device, Fail> {
    match st.device(call.device) {
        Some(d) => Ok(d),
        None => errno(libc::ENODEV),
    }
}

/// `nr_start_ncs` minus the hardware: core-init states back to INVALID, model-started counts
/// to 0, the cores' notification queues destroyed, their semaphores and events cleared.
pub(crate) fn reset_cores(dev: &mut Device, nc_map: u32) {
    for nc in 0..MAX_NC_PER_DEVICE {
        if nc_map != NC_MAP_DEVICE && nc_map & (1 << nc) == 0 {
            continue;
        }
        let i = nc as usize;
        if let Some(s) = dev.cinit.get_mut(i) {
            *s = CINIT_INVALID;
        }
        if let Some(c) = dev.model_started.get_mut(i) {
            *c = 0;
        }
        if let Some(s) = dev.semaphores.get_mut(i) {
            *s = [0; SEMAPHORES];
        }
        if let Some(e) = dev.events.get_mut(i) {
            *e = [0; EVENTS];
        }
        let queues: Vec<((u32, u32, u32), u64)> = dev
            .nqs
            .iter()
            .filter(|((core, _, _), _)| *core == nc)
            .map(|(k, h)| (*k, *h))
            .collect();
        for (key, handle) in queues {
            dev.nqs.remove(&key);
            let _ = memory::free(dev, handle);
        }
    }
}

/// `NC_RESET`: starts a reset of `nc_map` keyed by the caller's thread group; `1` when one is
/// already pending for it (nothing is copied back then). The emulated reset is over at once.
pub(crate) fn nc_reset(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&device_reset::LAYOUT)?;
    let tgid = call.tgid();
    let dev = device(st, call)?;
    if dev.resets.contains(&tgid) {
        return Ok(1);
    }
    reset_cores(dev, rec.get32(device_reset::NC_MAP));
    dev.resets.insert(tgid);
    rec.set(device_reset::REQUEST_ID, u64::from(tgid));
    call.write_arg(&rec)?;
    Ok(0)
}

/// `NC_RESET_READY`: `result` 0 for a pending request (which it consumes), 1 for an unknown
/// request id.
pub(crate) fn nc_reset_ready(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&device_ready::LAYOUT)?;
    let dev = device(st, call)?;
    let id = rec.get32(device_ready::REQUEST_ID);
    let result = if dev.resets.remove(&id) { 0 } else { 1 };
    rec.set(device_ready::RESULT, result);
    call.write_arg(&rec)?;
    Ok(0)
}

/// The deprecated requests: `DEVICE_RESET` resets every core; `DEVICE_READY` (1 when a reset
/// of the caller completed or none is pending) and `DEVICE_RESET_STATUS` (always 1) write one
/// byte.
pub(crate) fn deprecated(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let tgid = call.tgid();
    let dev = device(st, call)?;
    match call.request {
        rq::DEVICE_RESET => {
            reset_cores(dev, NC_MAP_DEVICE);
            Ok(0)
        }
        rq::DEVICE_READY => {
            dev.resets.remove(&tgid);
            call.write_raw(&[1])?;
            Ok(0)
        }
        _ => {
            call.write_raw(&[1])?;
            Ok(0)
        }
    }
}

/// `CINIT_SET_STATE` (`nci_set_state`). STARTED moves INVALID to STARTED; on a core already
/// STARTED by someone the driver waits up to 5 s for COMPLETED, the emulator answers the
/// current state at once. COMPLETED is only valid from STARTED. The new state is copied back.
pub(crate) fn cinit_set_state(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&cinit_set::LAYOUT)?;
    let dev = device(st, call)?;
    let nc = nc_valid(dev, rec.get32(cinit_set::NC_ID))?;
    let Some(state) = dev.cinit.get_mut(nc) else {
        return errno(libc::E2BIG);
    };
    match rec.get32(cinit_set::STATE) {
        CINIT_STARTED if *state == CINIT_INVALID => *state = CINIT_STARTED,
        CINIT_COMPLETED if *state == CINIT_STARTED => *state = CINIT_COMPLETED,
        _ => {}
    }
    rec.set(cinit_set::NEW_STATE, u64::from(*state));
    call.write_arg(&rec)?;
    Ok(0)
}

/// `NC_MODEL_STARTED_COUNT`.
pub(crate) fn model_started_count(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&nc_model_started_count::LAYOUT)?;
    let dev = device(st, call)?;
    let nc = nc_valid(dev, rec.get32(nc_model_started_count::NC_ID))?;
    let count = dev.model_started.get(nc).copied().unwrap_or(0);
    rec.set(nc_model_started_count::STARTED_COUNT, count);
    call.write_arg(&rec)?;
    Ok(0)
}

/// `SEMAPHORE_{READ,WRITE,INCREMENT,DECREMENT}`: `E2BIG` for a bad core, `EINVAL` for an
/// index past the 256 semaphores (the index is the driver's `u16`). Incrementing the
/// doorbell launches an execution before the ioctl returns.
pub(crate) fn semaphore_op(
    st: &mut State,
    machine: &Arc<SimMachine>,
    call: &Call<'_, '_>,
) -> Outcome {
    let mut rec = call.read_arg(&semaphore::LAYOUT)?;
    let tgid = call.tgid();
    let dev = device(st, call)?;
    let nc = nc_valid(dev, rec.get32(semaphore::NC_ID))?;
    let index = usize::from(rec.get32(semaphore::SEMAPHORE_INDEX) as u16);
    let value = rec.get32(semaphore::VALUE);
    let Some(sem) = dev.semaphores.get_mut(nc).and_then(|s| s.get_mut(index)) else {
        return errno(libc::EINVAL);
    };
    match call.request {
        rq::SEMAPHORE_READ => {
            rec.set(semaphore::VALUE, u64::from(*sem));
            call.write_arg(&rec)?;
        }
        rq::SEMAPHORE_WRITE => *sem = value,
        rq::SEMAPHORE_INCREMENT => {
            *sem = sem.wrapping_add(value);
            if index == launch::SEM_DOORBELL && value > 0 {
                launch::ring(st, machine, call.device, nc as u32, tgid);
            }
        }
        _ => *sem = sem.wrapping_sub(value),
    }
    Ok(0)
}

/// `EVENT_SET` / `EVENT_GET`: the driver checks neither the core (beyond its `u8`) nor index
/// 256 (one past the block); the emulator refuses both with `EINVAL`.
pub(crate) fn event_op(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&event::LAYOUT)?;
    let dev = device(st, call)?;
    let nc = usize::from(rec.get32(event::NC_ID) as u8);
    let index = usize::from(rec.get32(event::EVENT_INDEX) as u16);
    let Some(ev) = dev.events.get_mut(nc).and_then(|e| e.get_mut(index)) else {
        return errno(libc::EINVAL);
    };
    if call.request == rq::EVENT_GET {
        rec.set(event::VALUE, u64::from(*ev));
        call.write_arg(&rec)?;
    } else {
        *ev = rec.get32(event::VALUE);
    }
    Ok(0)
}

/// Queues per core: 16 engines × 6 types (`MAX_NQ_SUPPORTED`).
const NQ_ENGINES: u32 = 16;
const NQ_TYPES: u32 = 6;

/// `NOTIFICATIONS_INIT_V2` / `_WITH_REALLOC_V2` on a NeuronCore (`nnq_init`): the size must be
/// a power of two; an existing queue is returned again unless `force_alloc_mem`; a device
/// queue has no mmap offset (-1). Queue chunks live with the device, not the process.
pub(crate) fn nq_init(st: &mut State, machine: &Arc<SimMachine>, call: &Call<'_, '_>) -> Outcome {
    let realloc = call.request == rq::NOTIFICATIONS_INIT_WITH_REALLOC_V2;
    let layout = if realloc { &nqr::LAYOUT } else { &nq2::LAYOUT };
    let mut rec = call.read_arg(layout)?;
    // The two structs agree up to `dram_region`.
    let field = |f| rec.get32(f);
    let (dev_type, nc, ty, engine, size, on_host, channel) = (
        field(nq2::NQ_DEV_TYPE),
        field(nq2::NQ_DEV_ID),
        field(nq2::NQ_TYPE),
        field(nq2::ENGINE_INDEX),
        field(nq2::SIZE),
        field(nq2::ON_HOST_MEMORY),
        field(nq2::DRAM_CHANNEL),
    );
    let force = realloc && rec.get32(nqr::FORCE_ALLOC_MEM) != 0;
    match dev_type {
        0 => {}
        1 => return errno(libc::EOPNOTSUPP), // TOP_SP queues are not emulated
        _ => return errno(libc::ENOSYS),
    }
    let instance = st.instance;
    let tgid = call.tgid();
    let dev = device(st, call)?;
    // `nnq_init` takes the core as a u8.
    let nc = u32::from(nc as u8);
    if size & size.wrapping_sub(1) != 0 || nc >= dev.cores || engine >= NQ_ENGINES || ty >= NQ_TYPES
    {
        return errno(libc::EINVAL);
    }
    let key = (nc, engine, ty);
    let existing = dev.nqs.get(&key).copied();
    let handle = match existing {
        Some(h) if !force => h,
        _ => {
            let align = if on_host != 0 { 0 } else { u64::from(size) };
            let h = memory::alloc(
                dev,
                machine,
                instance,
                tgid,
                AllocRequest {
                    size: u64::from(size),
                    align,
                    host: on_host != 0,
                    dram_channel: channel,
                    nc_id: nc,
                    device_lifespan: true,
                    mem_type: None,
                },
            )
            .map_err(Fail::Errno)?;
            dev.nqs.insert(key, h);
            if let Some(old) = existing {
                let _ = memory::free(dev, old);
            }
            h
        }
    };
    let Some(chunk) = dev.chunks.get(&handle) else {
        return errno(libc::EINVAL);
    };
    let mmap_offset = if chunk.is_host() { chunk.pa } else { u64::MAX };
    let (off_field, handle_field) = if realloc {
        (nqr::MMAP_OFFSET, nqr::MEM_HANDLE)
    } else {
        (nq2::MMAP_OFFSET, nq2::MEM_HANDLE)
    };
    rec.set(off_field, mmap_offset);
    rec.set(handle_field, handle);
    call.write_arg(&rec)?;
    Ok(0)
}

/// `CRWL_READER_ENTER` … `CRWL_WRITER_DOWNGRADE` (`EINVAL` past `MAX_NC_PER_DEVICE`).
pub(crate) fn core_lock(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let rec: Rec = call.read_arg(&crwl::LAYOUT)?;
    let tgid = call.tgid();
    let mut uuid = [0u8; 32];
    for (d, s) in uuid.iter_mut().zip(rec.field_bytes(crwl::UUID)) {
        *d = *s;
    }
    let dev = device(st, call)?;
    let Some(lock) = dev.locks.get_mut(rec.get32(crwl::NC_ID) as usize) else {
        return errno(libc::EINVAL);
    };
    let result = match call.request {
        rq::CRWL_READER_ENTER => lock.reader_enter(tgid, &uuid),
        rq::CRWL_READER_EXIT => lock.reader_exit(tgid, &uuid),
        rq::CRWL_WRITER_ENTER => lock.writer_enter(tgid, &uuid),
        _ => lock.writer_downgrade(tgid, &uuid),
    };
    result.map(|()| 0).map_err(Fail::Errno)
}
