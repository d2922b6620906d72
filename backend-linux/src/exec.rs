//! Staging and execution under the simulator-program launch convention v1: the stage image
//! in a `CODE_DEVICE` chunk under the core's model lock (`CRWL_*`), and launches through the
//! core's mailbox, doorbell semaphore and notification queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nrt_core::driver::{Binding, ExecRequest, StagedModel, SubgraphImage};
use nrt_core::io::TensorUsage;

use crate::driver::LinuxDriver;
use crate::error::LinuxError;
use crate::image::{self, DescBinding, EncodeError, Side};
use crate::resources::{CoreSlot, Staged, chunk_info, free_chunk, semaphore};
use crate::sys::{self, AllocParams, DeviceFd, MemForm, MemLocation, MemType};

/// Why a compiler NEFF cannot be executed by this backend.
pub(crate) const NOT_PUBLIC: &str = "this NEFF carries no simulator program: executing a \
    compiler NEFF needs the start/complete protocol between the runtime and the NeuronCore \
    (which semaphores, events and queues start an execution and signal its end) and the \
    instruction encoding of its engine streams, neither of which is public; only NEFFs with \
    a simulator program run, through the launch convention of docs/LINUX_BACKEND.md";

/// Seconds a launch waits when the request names no timeout.
pub(crate) const DEFAULT_TIMEOUT_SECS: u32 = 30;
/// Host-side grace beyond the device timeout before a launch is given up.
pub(crate) const HOST_GRACE_SECS: u64 = 10;

fn crwl(
    fd: &DeviceFd,
    request: sys::Request<sys::Crwl>,
    nc: u32,
    uuid: &[u8; 32],
) -> std::io::Result<i32> {
    let mut arg = sys::Crwl {
        nc_id: nc,
        uuid: sys::NeuronUuid { value: *uuid },
    };
    sys::ioctl(fd, request, &mut arg)
}

/// `CRWL_WRITER_ENTER` (`EALREADY` — this process already made the model current — still
/// holds the write lock).
fn writer_enter(fd: &DeviceFd, nc: u32, uuid: &[u8; 32]) -> Result<(), LinuxError> {
    match crwl(fd, sys::CRWL_WRITER_ENTER, nc, uuid) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EALREADY) => Ok(()),
        Err(e) => Err(LinuxError::io("CRWL_WRITER_ENTER", e)),
    }
}

fn call(op: &'static str, r: std::io::Result<i32>) -> Result<(), LinuxError> {
    r.map(|_| ()).map_err(|e| LinuxError::io(op, e))
}

/// Makes the model current on the core and holds one read reference: `CRWL_READER_ENTER`,
/// or — when another model (`ENOENT`) is current — `CRWL_WRITER_ENTER` + `DOWNGRADE` (the
/// downgrade hands the caller the read reference).
fn reader_enter(fd: &DeviceFd, nc: u32, uuid: &[u8; 32]) -> Result<(), LinuxError> {
    match crwl(fd, sys::CRWL_READER_ENTER, nc, uuid) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            writer_enter(fd, nc, uuid)?;
            call(
                "CRWL_WRITER_DOWNGRADE",
                crwl(fd, sys::CRWL_WRITER_DOWNGRADE, nc, uuid),
            )
        }
        Err(e) => Err(LinuxError::io("CRWL_READER_ENTER", e)),
    }
}

fn encode_error(op: &'static str, e: EncodeError) -> LinuxError {
    let EncodeError::TooLarge(what) = e;
    LinuxError::invalid(op, format!("{what} too large for the launch convention"))
}

/// Allocates a `CODE_DEVICE` chunk and writes `bytes` into it: (handle, PA).
fn write_image(
    fd: &DeviceFd,
    form: MemForm,
    nc: u32,
    bytes: &[u8],
) -> Result<(u64, u64), LinuxError> {
    let handle = sys::mem_alloc(
        fd,
        form,
        &AllocParams {
            size: bytes.len() as u64,
            align: 4096,
            location: MemLocation::empty(),
            dram_channel: 0,
            nc_id: nc,
            mem_type: MemType::CODE_DEVICE,
        },
    )
    .map_err(|e| LinuxError::io("MEM_ALLOC (stage image)", e))?;
    let written = sys::mem_buf_write(fd, form, handle, 0, bytes)
        .map_err(|e| LinuxError::io("MEM_BUF_COPY (stage image)", e))
        .and_then(|()| chunk_info(fd, handle));
    match written {
        Ok((pa, _)) => Ok((handle, pa)),
        Err(e) => {
            let _ = free_chunk(fd, handle);
            Err(e)
        }
    }
}

impl LinuxDriver {
    pub(crate) fn stage(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, LinuxError> {
        const OP: &str = "stage_subgraph";
        let slot = self
            .core_slot(image.pnc)
            .ok_or_else(|| LinuxError::invalid(OP, "the core is not initialised (init_cores)"))?;
        let form = self.mem_form()?;
        let device = slot.node - self.discovered(&mut self.state())?.base;
        let uuid = image::model_uuid(image.model);
        let bytes = match image.program {
            Some(program) => Some(
                image::stage_image(
                    image
                        .io
                        .tensors(TensorUsage::Input)
                        .iter()
                        .map(|t| t.name.as_str()),
                    image
                        .io
                        .tensors(TensorUsage::Output)
                        .iter()
                        .map(|t| t.name.as_str()),
                    program,
                )
                .map_err(|e| encode_error(OP, e))?,
            ),
            None => None,
        };
        let fd = &slot.fd;
        writer_enter(fd, slot.nc, &uuid)?;
        let written = match &bytes {
            Some(b) => write_image(fd, form, slot.nc, b).map(Some),
            None => Ok(None),
        };
        // Leave the model current with no reference held: executions take their own.
        let unlocked = call(
            "CRWL_WRITER_DOWNGRADE",
            crwl(fd, sys::CRWL_WRITER_DOWNGRADE, slot.nc, &uuid),
        )
        .and_then(|()| {
            call(
                "CRWL_READER_EXIT",
                crwl(fd, sys::CRWL_READER_EXIT, slot.nc, &uuid),
            )
        });
        let image_chunk = match (written, unlocked) {
            (Ok(chunk), Ok(())) => chunk,
            (Ok(chunk), Err(e)) => {
                if let Some((handle, _)) = chunk {
                    let _ = free_chunk(fd, handle);
                }
                return Err(e);
            }
            (Err(e), _) => return Err(e),
        };
        let handle = self.next_model.fetch_add(1, Ordering::Relaxed);
        let staged = Staged {
            lnc: image.lnc,
            pnc: image.pnc,
            device,
            fd: Arc::clone(fd),
            uuid,
            image: image_chunk,
            stopped: AtomicBool::new(false),
        };
        self.staged
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(handle, Arc::new(staged));
        Ok(StagedModel {
            lnc: image.lnc,
            handle,
            plumbing: false,
        })
    }

    fn staged(&self, op: &'static str, model: &StagedModel) -> Result<Arc<Staged>, LinuxError> {
        let table = self.staged.lock().unwrap_or_else(|p| p.into_inner());
        match table.get(&model.handle) {
            Some(s) if s.lnc == model.lnc => Ok(Arc::clone(s)),
            _ => Err(LinuxError::invalid(op, "no such staged model")),
        }
    }

    pub(crate) fn stop(&self, model: StagedModel) -> Result<(), LinuxError> {
        self.staged("stop_model", &model)?
            .stopped
            .store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn unstage(&self, model: StagedModel) -> Result<(), LinuxError> {
        let removed = {
            let mut table = self.staged.lock().unwrap_or_else(|p| p.into_inner());
            match table.get(&model.handle) {
                Some(s) if s.lnc == model.lnc => table.remove(&model.handle),
                _ => None,
            }
        };
        let staged =
            removed.ok_or_else(|| LinuxError::invalid("unstage_model", "no such staged model"))?;
        match staged.image {
            Some((handle, _)) => free_chunk(&staged.fd, handle),
            None => Ok(()),
        }
    }

    pub(crate) fn run(&self, request: &ExecRequest<'_>) -> Result<(), LinuxError> {
        const OP: &str = "submit";
        for model in request.subgraphs {
            let staged = self.staged(OP, model)?;
            if staged.stopped.load(Ordering::Acquire) {
                return Err(LinuxError::invalid(OP, "the model is stopped"));
            }
            let Some((_, image_pa)) = staged.image else {
                return Err(LinuxError::not_public(OP, NOT_PUBLIC));
            };
            let mut bindings = Vec::with_capacity(request.inputs.len() + request.outputs.len());
            for (side, list) in [
                (Side::Input, request.inputs),
                (Side::Output, request.outputs),
            ] {
                for b in list {
                    bindings.push(desc_binding(OP, side, b, staged.device)?);
                }
            }
            let slot = self
                .core_slot(staged.pnc)
                .ok_or_else(|| LinuxError::invalid(OP, "the core is not initialised"))?;
            launch(&slot, &staged, image_pa, request.timeout_secs, &bindings)?;
        }
        Ok(())
    }
}

/// The descriptor binding of `b` on `side`, checked against its buffer and device.
fn desc_binding(
    op: &'static str,
    side: Side,
    b: &Binding,
    device: u32,
) -> Result<DescBinding, LinuxError> {
    if b.buffer.device != device {
        return Err(LinuxError::invalid(
            op,
            "tensor on another device than the model",
        ));
    }
    let pa = match b.offset.checked_add(b.size) {
        Some(end) if end <= b.buffer.size => b.buffer.addr.checked_add(b.offset),
        _ => None,
    }
    .ok_or_else(|| LinuxError::invalid(op, "tensor binding out of its buffer"))?;
    Ok(DescBinding {
        side,
        io_index: b.index,
        pa,
        size: b.size,
    })
}

/// One launch on one core: descriptor, doorbell, then the completion, all under the core's
/// launch lock and a read reference of the core's model lock.
fn launch(
    slot: &CoreSlot,
    staged: &Staged,
    image_pa: u64,
    timeout_secs: Option<u32>,
    bindings: &[DescBinding],
) -> Result<(), LinuxError> {
    const OP: &str = "submit";
    let mut last_seq = slot.launch.lock().unwrap_or_else(|p| p.into_inner());
    let seq = *last_seq + 1;
    let descriptor = image::exec_descriptor(seq, image_pa, timeout_secs.unwrap_or(0), bindings)
        .map_err(|e| encode_error(OP, e))?;
    reader_enter(&slot.fd, slot.nc, &staged.uuid)?;
    let result = (|| {
        if !slot.mailbox.write_bytes(0, &descriptor) {
            return Err(LinuxError::invalid(
                OP,
                "descriptor larger than the mailbox",
            ));
        }
        semaphore(
            &slot.fd,
            sys::SEMAPHORE_INCREMENT,
            "SEMAPHORE_INCREMENT",
            slot.nc,
            image::SEM_DOORBELL,
            1,
        )?;
        // The device has the launch: its seq is used whatever happens next.
        *last_seq = seq;
        let secs = u64::from(timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS)) + HOST_GRACE_SECS;
        let status = wait(slot, seq, Duration::from_secs(secs))
            .ok_or_else(|| LinuxError::no_completion(OP, slot.pnc, secs))?;
        if status == image::STATUS_OK {
            return Ok(());
        }
        let mut area = vec![0u8; image::MESSAGE_MAX];
        let message = if slot.mailbox.read_bytes(image::MAILBOX_MESSAGE, &mut area) {
            image::failure_message(&area)
        } else {
            String::new()
        };
        Err(LinuxError::exec(OP, status, message))
    })();
    let exited = call(
        "CRWL_READER_EXIT",
        crwl(&slot.fd, sys::CRWL_READER_EXIT, slot.nc, &staged.uuid),
    );
    result.and(exited)
}

/// Polls the notification slot of `seq` until it holds `seq` (volatile loads), then returns
/// its status; `None` past `limit`.
fn wait(slot: &CoreSlot, seq: u64, limit: Duration) -> Option<u32> {
    let at = image::nq_slot_offset(seq);
    let start = Instant::now();
    let mut spins = 0u32;
    let mut nap = Duration::from_micros(10);
    loop {
        if slot.nq.read_u64(at) == Some(seq) {
            // `seq` is written last: the status read after it is the device's.
            std::sync::atomic::fence(Ordering::Acquire);
            return slot.nq.read_u32(at + 8);
        }
        if start.elapsed() > limit {
            return None;
        }
        if spins < 1000 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use nrt_core::driver::{DeviceBuffer, DriverError, ErrorKind};

    fn binding(device: u32, offset: u64, size: u64) -> Binding {
        Binding {
            index: 2,
            buffer: DeviceBuffer {
                device,
                addr: 0x10_0000,
                size: 256,
            },
            offset,
            size,
        }
    }

    #[test]
    fn bindings_are_pa_plus_offset_inside_their_buffer() {
        assert_eq!(
            desc_binding("submit", Side::Output, &binding(1, 64, 192), 1).unwrap(),
            DescBinding {
                side: Side::Output,
                io_index: 2,
                pa: 0x10_0040,
                size: 192,
            }
        );
        for (device, offset, size) in [(0, 0, 8), (1, 64, 193), (1, u64::MAX, 2)] {
            let err =
                desc_binding("submit", Side::Input, &binding(device, offset, size), 1).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        }
    }

    #[test]
    fn the_refusal_of_compiler_neffs_says_what_is_not_public() {
        let err = LinuxError::not_public("submit", NOT_PUBLIC);
        assert_eq!(err.kind(), ErrorKind::Unsupported);
        let text = err.to_string();
        assert!(text.contains("start/complete protocol"), "{text}");
        assert!(text.contains("instruction encoding"), "{text}");
    }
}
