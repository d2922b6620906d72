//! Per-core bring-up and teardown: reset, core-init state, the notification queue, the
//! mailbox and its semaphores (docs/LINUX_BACKEND.md, "Per core, at bring-up").

use std::sync::{Arc, Mutex};

use nrt_core::driver::CoreInitParams;
use nrt_core::topology;

use crate::driver::{LinuxDriver, State};
use crate::error::LinuxError;
use crate::image;
use crate::resources::{CoreSlot, chunk_info, free_chunk, semaphore};
use crate::sys::{self, AllocParams, DeviceFd, Mapping, MemForm, MemLocation, MemType};

/// `CINIT_SET_STATE` of core `nc`: the state after the call.
fn cinit(fd: &DeviceFd, nc: u32, state: u32) -> Result<u32, LinuxError> {
    let mut arg = sys::CinitSet {
        nc_id: nc,
        state,
        new_state: 0,
    };
    match sys::ioctl(fd, sys::CINIT_SET_STATE, &mut arg) {
        Ok(0) => Ok(arg.new_state),
        Ok(ret) => Err(LinuxError::io("CINIT_SET_STATE", sys::positive_return(ret))),
        Err(e) => Err(LinuxError::io("CINIT_SET_STATE", e)),
    }
}

/// The request id to wait on after `NC_RESET` returned `ret` with `written` in the struct's
/// `request_id` (0 when the driver did not write it). `tgid` — the process's id as the driver
/// sees it (inside a PID namespace it differs from `getpid`) — is learnt from a written id and
/// used when a reset of this process was already pending (`ret` 1: the driver returns before
/// writing the struct back).
fn reset_request_id(
    ret: i32,
    written: u32,
    node: u32,
    tgid: &mut Option<u32>,
) -> Result<u32, LinuxError> {
    match ret {
        0 if written != 0 => {
            *tgid = Some(written);
            Ok(written)
        }
        0 => Err(LinuxError::io(
            "NC_RESET",
            std::io::Error::other("the driver wrote back no request id"),
        )),
        1 => tgid.ok_or(LinuxError::reset_id_unknown("NC_RESET", node)),
        ret => Err(LinuxError::io("NC_RESET", sys::positive_return(ret))),
    }
}

/// `NC_RESET_READY`'s verdict: the wait itself never fails with `EINTR`; `result` is 0 (reset
/// done), `-EINTR` (a termination signal interrupted the wait) or anything else (1: the reset
/// failed or the id is unknown).
fn reset_outcome(result: i32, node: u32) -> Result<(), LinuxError> {
    match result {
        0 => Ok(()),
        r if r == -libc::EINTR => Err(LinuxError::reset_interrupted("NC_RESET_READY", node)),
        r => Err(LinuxError::reset("NC_RESET_READY", node, r)),
    }
}

/// `NC_RESET` of the cores in `nc_map`, then `NC_RESET_READY` until the reset is over.
pub(crate) fn reset_cores(
    fd: &DeviceFd,
    node: u32,
    nc_map: u32,
    tgid: &mut Option<u32>,
) -> Result<(), LinuxError> {
    let mut reset = sys::DeviceReset {
        nc_map,
        request_id: 0,
    };
    let ret =
        sys::ioctl(fd, sys::NC_RESET, &mut reset).map_err(|e| LinuxError::io("NC_RESET", e))?;
    let request_id = reset_request_id(ret, reset.request_id, node, tgid)?;
    let mut ready = sys::DeviceReady {
        request_id,
        result: 0,
    };
    let ret = sys::ioctl(fd, sys::NC_RESET_READY, &mut ready)
        .map_err(|e| LinuxError::io("NC_RESET_READY", e))?;
    if ret != 0 {
        return Err(LinuxError::io("NC_RESET_READY", sys::positive_return(ret)));
    }
    reset_outcome(ready.result, node)
}

/// Brings up core `nc` of device `node` (`pnc` relative to the base node):
/// `CINIT_SET_STATE` STARTED, the notification queue, the mailbox and its semaphores, then
/// COMPLETED when this call started the core's init.
fn bring_up(
    fd: &Arc<DeviceFd>,
    form: MemForm,
    node: u32,
    nc: u32,
    pnc: u32,
) -> Result<CoreSlot, LinuxError> {
    let state = cinit(fd, nc, sys::NEURON_CINIT_STATE_STARTED)?;
    let started = match state {
        sys::NEURON_CINIT_STATE_STARTED => true,
        sys::NEURON_CINIT_STATE_COMPLETED => false,
        other => return Err(LinuxError::core_init("CINIT_SET_STATE", node, nc, other)),
    };

    let mut nq = sys::NotificationsInitV2 {
        nq_dev_id: nc,
        nq_dev_type: sys::NQ_DEVICE_TYPE_NEURON_CORE,
        nq_type: sys::NQ_TYPE_NOTIFY,
        engine_index: 0,
        size: image::NQ_SIZE,
        on_host_memory: 1,
        ..Default::default()
    };
    match sys::ioctl(fd, sys::NOTIFICATIONS_INIT_V2, &mut nq) {
        Ok(0) => {}
        Ok(ret) => {
            return Err(LinuxError::io(
                "NOTIFICATIONS_INIT_V2",
                sys::positive_return(ret),
            ));
        }
        Err(e) => return Err(LinuxError::io("NOTIFICATIONS_INIT_V2", e)),
    }
    // The queue's memory belongs to the driver (freed by a reset or the last close), so it
    // is mapped but never freed here.
    let nq_map = Mapping::map(fd, nq.mmap_offset, image::NQ_SIZE as usize, false)
        .map_err(|e| LinuxError::io("mmap notification queue", e))?;

    let mailbox_handle = sys::mem_alloc(
        fd,
        form,
        &AllocParams {
            size: image::MAILBOX_SIZE,
            align: 4096,
            location: MemLocation::HOST,
            dram_channel: 0,
            nc_id: nc,
            mem_type: MemType::MISC_HOST,
        },
    )
    .map_err(|e| LinuxError::io("MEM_ALLOC (mailbox)", e))?;
    let mapped = chunk_info(fd, mailbox_handle).and_then(|(pa, offset)| {
        let map = Mapping::map(fd, offset, image::MAILBOX_SIZE as usize, true)
            .map_err(|e| LinuxError::io("mmap mailbox", e))?;
        Ok((pa, map))
    });
    let (pa, mailbox) = match mapped {
        Ok(m) => m,
        Err(e) => {
            let _ = free_chunk(fd, mailbox_handle);
            return Err(e);
        }
    };
    let slot = CoreSlot {
        pnc,
        node,
        nc,
        fd: Arc::clone(fd),
        nq: nq_map,
        mailbox,
        mailbox_handle,
        launch: Mutex::new(0),
    };
    let published = semaphore(
        fd,
        sys::SEMAPHORE_WRITE,
        "SEMAPHORE_WRITE",
        nc,
        image::SEM_MAILBOX_LO,
        pa as u32,
    )
    .and_then(|()| {
        semaphore(
            fd,
            sys::SEMAPHORE_WRITE,
            "SEMAPHORE_WRITE",
            nc,
            image::SEM_MAILBOX_HI,
            (pa >> 32) as u32,
        )
    })
    .and_then(|()| {
        if started {
            cinit(fd, nc, sys::NEURON_CINIT_STATE_COMPLETED).map(|_| ())
        } else {
            Ok(())
        }
    });
    if let Err(e) = published {
        let _ = slot.free();
        return Err(e);
    }
    Ok(slot)
}

/// The process's cores on one device: node index, `nc_map`, and each core as (pnc, nc).
type DeviceCores = (u32, u32, Vec<(u32, u32)>);

impl LinuxDriver {
    /// `init_cores` under the state lock.
    pub(crate) fn init_locked(
        &self,
        st: &mut State,
        params: &CoreInitParams,
    ) -> Result<(), LinuxError> {
        let discovered = self.discovered(st)?;
        let form = MemForm::from_features(self.features(st)?);
        // (node index, nc_map, cores as (pnc, nc)) per device, in core order.
        let mut devices: Vec<DeviceCores> = Vec::new();
        for pnc in params.topology.pnc_range() {
            let (device, nc) = topology::locate_pnc(pnc, params.topology.cores_per_device());
            let node = discovered.base.saturating_add(device);
            let bit = 1u32.checked_shl(nc).unwrap_or(0);
            match devices.last_mut() {
                Some((n, map, cores)) if *n == node => {
                    *map |= bit;
                    cores.push((pnc, nc));
                }
                _ => devices.push((node, bit, vec![(pnc, nc)])),
            }
        }
        let attached_before = st.attached.len();
        let result = self.init_devices(st, form, &devices, params.reset_cores);
        if result.is_err() {
            // Close the fds this call opened (nothing else holds them yet).
            let mut i = attached_before;
            while i < st.attached.len() {
                if st.cores.iter().any(|c| c.node == st.attached[i].0) {
                    i += 1;
                } else {
                    st.attached.remove(i);
                }
            }
        }
        result
    }

    fn init_devices(
        &self,
        st: &mut State,
        form: MemForm,
        devices: &[DeviceCores],
        reset: bool,
    ) -> Result<(), LinuxError> {
        let mut fds = Vec::with_capacity(devices.len());
        for (node, _, _) in devices {
            fds.push(self.attach(st, *node)?);
        }
        if reset {
            for ((node, nc_map, cores), fd) in devices.iter().zip(&fds) {
                // A reset destroys the cores' queues: what an earlier bring-up built goes.
                self.teardown(st, cores.iter().map(|&(pnc, _)| pnc));
                reset_cores(fd, *node, *nc_map, &mut st.kernel_tgid)?;
            }
        }
        let mut built: Vec<CoreSlot> = Vec::new();
        for ((node, _, cores), fd) in devices.iter().zip(&fds) {
            for &(pnc, nc) in cores {
                if st.cores.iter().any(|c| c.pnc == pnc) {
                    continue;
                }
                match bring_up(fd, form, *node, nc, pnc) {
                    Ok(slot) => built.push(slot),
                    Err(e) => {
                        for slot in built {
                            let _ = slot.free();
                        }
                        return Err(e);
                    }
                }
            }
        }
        st.cores.extend(built.into_iter().map(Arc::new));
        Ok(())
    }

    /// Drops the bring-up state of cores `pncs`: unmaps the queue and the mailbox and frees
    /// the mailbox chunk. A slot still used by a launch in flight is freed by its last user.
    pub(crate) fn teardown(
        &self,
        st: &mut State,
        pncs: impl Iterator<Item = u32>,
    ) -> Option<LinuxError> {
        let mut first_error = None;
        for pnc in pncs {
            let Some(i) = st.cores.iter().position(|c| c.pnc == pnc) else {
                continue;
            };
            let slot = st.cores.swap_remove(i);
            if let Ok(slot) = Arc::try_unwrap(slot) {
                if let Err(e) = slot.free() {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error
    }

    /// The bring-up state of physical core `pnc`.
    pub(crate) fn core_slot(&self, pnc: u32) -> Option<Arc<CoreSlot>> {
        self.state()
            .cores
            .iter()
            .find(|c| c.pnc == pnc)
            .map(Arc::clone)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use nrt_core::driver::{DriverError, ErrorKind};

    #[test]
    fn the_reset_id_is_the_one_the_driver_wrote() {
        // Inside a PID namespace the driver's tgid (here 4242) is not our getpid().
        let mut tgid = None;
        assert_eq!(reset_request_id(0, 4242, 0, &mut tgid).unwrap(), 4242);
        assert_eq!(tgid, Some(4242));
        // Already pending: nothing written back, the learnt id is used.
        assert_eq!(reset_request_id(1, 0, 0, &mut tgid).unwrap(), 4242);
        // Pending with no id learnt yet: an error, not a guess.
        let mut unknown = None;
        let err = reset_request_id(1, 0, 3, &mut unknown).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert!(err.to_string().contains("neuron3"), "{err}");
        assert_eq!(unknown, None);
        // Success without an id, or a copy_to_user leftover: errors.
        assert!(reset_request_id(0, 0, 0, &mut tgid).is_err());
        assert_eq!(
            reset_request_id(8, 0, 0, &mut tgid).unwrap_err().kind(),
            ErrorKind::Io
        );
    }

    #[test]
    fn reset_results_are_done_interrupted_or_failed() {
        assert!(reset_outcome(0, 0).is_ok());
        let interrupted = reset_outcome(-libc::EINTR, 1).unwrap_err();
        assert_eq!(interrupted.kind(), ErrorKind::Other);
        assert!(
            interrupted.to_string().contains("interrupted"),
            "{interrupted}"
        );
        let failed = reset_outcome(1, 1).unwrap_err();
        assert_eq!(failed.kind(), ErrorKind::Hardware);
        assert!(failed.to_string().contains("result 1"), "{failed}");
    }
}
