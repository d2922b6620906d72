//! What the driver does at `open`, `flush` (every `close`) and process exit.
//!
//! * open `O_WRONLY` ("free access"): nothing. Any other mode attaches the thread group
//!   (`npid_attach`: a second open of the same process counts up; a 17th process gets
//!   `EBUSY`).
//! * flush of an `O_WRONLY` fd: every core range of the process is unmarked.
//! * flush of an attached fd: when it is the process's last attach, its per-process state on
//!   the device goes (pending resets, model locks, memory chunks, staged programs — its
//!   simulated driver is dropped); then the attach count goes down. When no process is
//!   attached any more, the device-lifespan chunks (notification queues) are freed, as the
//!   driver's `release` of the last opener does.
//! * process exit (seen through a pidfd for other processes): every fd is flushed.

use std::sync::Arc;

use nrt_sim::{SimDriver, SimMachine};

use crate::memory;
use crate::state::{Device, MAX_PROCESSES, State};

/// `npid_attach` at an attaching open.
pub(crate) fn attach(
    st: &mut State,
    machine: &Arc<SimMachine>,
    device: u32,
    tgid: u32,
) -> Result<(), i32> {
    let dev = st.device(device).ok_or(libc::ENODEV)?;
    match dev.attached.get_mut(&tgid) {
        Some(n) => *n += 1,
        None => {
            if dev.attached.len() >= MAX_PROCESSES {
                return Err(libc::EBUSY);
            }
            dev.attached.insert(tgid, 1);
            dev.sims
                .entry(tgid)
                .or_insert_with(|| SimDriver::attach(machine));
        }
    }
    Ok(())
}

/// The flush of one `close` of a device fd.
pub(crate) fn flush(st: &mut State, device: u32, tgid: u32, free_access: bool) {
    if free_access {
        st.ranges.unmark_all(tgid);
        return;
    }
    let Some(dev) = st.device(device) else {
        return;
    };
    let count = dev.attached.get(&tgid).copied().unwrap_or(0);
    if count == 1 {
        release_process(dev, tgid);
    }
    if count <= 1 {
        dev.attached.remove(&tgid);
    } else {
        dev.attached.insert(tgid, count - 1);
    }
    release_if_unused(dev);
}

/// Process `tgid` exited: every fd of it is flushed.
pub(crate) fn process_exit(st: &mut State, tgid: u32) {
    st.ranges.unmark_all(tgid);
    for dev in &mut st.devices {
        if dev.attached.remove(&tgid).is_some() {
            release_process(dev, tgid);
            release_if_unused(dev);
        }
    }
}

/// The per-process cleanup of `ncdev_flush` for the process's last attach.
fn release_process(dev: &mut Device, tgid: u32) {
    dev.resets.remove(&tgid);
    for lock in &mut dev.locks {
        lock.release(tgid);
    }
    let mine: Vec<u64> = dev
        .chunks
        .iter()
        .filter(|(_, c)| c.owner == tgid && !c.device_lifespan)
        .map(|(h, _)| *h)
        .collect();
    for handle in mine {
        let _ = memory::free(dev, handle);
    }
    dev.staged.retain(|_, s| s.owner != tgid);
    // `ndmar_handle_process_exit`: the process's queues go back to the driver's dummy ring.
    dev.dma_queues.retain(|_, q| q.owner != tgid);
    // Device-lifespan chunks of the process stay (they outlive it); their HBM stays with the
    // simulated driver, which is kept while it holds any.
    let holds_device_memory = dev.chunks.values().any(|c| c.owner == tgid && !c.is_host());
    if !holds_device_memory {
        dev.sims.remove(&tgid);
    }
}

/// The driver's `release` of the last opener: device-lifespan chunks are freed.
fn release_if_unused(dev: &mut Device) {
    if !dev.attached.is_empty() {
        return;
    }
    let handles: Vec<u64> = dev.nqs.values().copied().collect();
    dev.nqs.clear();
    for handle in handles {
        let _ = memory::free(dev, handle);
    }
    let leftovers: Vec<u64> = dev
        .chunks
        .iter()
        .filter(|(_, c)| c.device_lifespan)
        .map(|(h, _)| *h)
        .collect();
    for handle in leftovers {
        let _ = memory::free(dev, handle);
    }
    dev.sims.clear();
    dev.staged.clear();
}
