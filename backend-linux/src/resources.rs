//! What the backend holds per core, per allocation and per staged subgraph, and the small
//! chunk / semaphore requests they share. A leaf module: the [`LinuxDriver`] state names
//! these types, and the files implementing its capabilities use them.
//!
//! [`LinuxDriver`]: crate::LinuxDriver

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::error::LinuxError;
use crate::sys::{self, DeviceFd, Mapping};

/// What bring-up built for one physical core of the process.
#[derive(Debug)]
pub(crate) struct CoreSlot {
    /// Physical core (relative to the base node).
    pub(crate) pnc: u32,
    /// Device node index.
    pub(crate) node: u32,
    /// Core within the device (`nc_id`).
    pub(crate) nc: u32,
    pub(crate) fd: Arc<DeviceFd>,
    /// The notification queue, mapped read-only.
    pub(crate) nq: Mapping,
    /// The mailbox host chunk, mapped read/write.
    pub(crate) mailbox: Mapping,
    pub(crate) mailbox_handle: u64,
    /// The `seq` of the core's last launch; the lock serialises launches on the core.
    pub(crate) launch: Mutex<u64>,
}

impl CoreSlot {
    /// `MEM_FREE` of the mailbox chunk (after its mapping is gone: called on a slot being
    /// dropped by its owner).
    pub(crate) fn free(self) -> Result<(), LinuxError> {
        let CoreSlot {
            fd,
            nq,
            mailbox,
            mailbox_handle,
            ..
        } = self;
        drop(nq);
        drop(mailbox);
        free_chunk(&fd, mailbox_handle)
    }
}

/// `MEM_FREE` of a chunk.
pub(crate) fn free_chunk(fd: &DeviceFd, handle: u64) -> Result<(), LinuxError> {
    let mut arg = sys::MemFree { mem_handle: handle };
    match sys::ioctl(fd, sys::MEM_FREE, &mut arg) {
        Ok(0) => Ok(()),
        Ok(ret) => Err(LinuxError::io("MEM_FREE", sys::positive_return(ret))),
        Err(e) => Err(LinuxError::io("MEM_FREE", e)),
    }
}

/// `MEM_GET_EXTENDED_INFO` of a chunk: (PA, mmap offset). A bad handle is a positive return.
pub(crate) fn chunk_info(fd: &DeviceFd, handle: u64) -> Result<(u64, u64), LinuxError> {
    let mut arg = sys::MemGetExtendedInfo {
        mem_handle: handle,
        ..Default::default()
    };
    match sys::ioctl(fd, sys::MEM_GET_EXTENDED_INFO, &mut arg) {
        Ok(0) => Ok((arg.pa, arg.mmap_offset)),
        Ok(ret) => Err(LinuxError::io(
            "MEM_GET_EXTENDED_INFO",
            sys::positive_return(ret),
        )),
        Err(e) => Err(LinuxError::io("MEM_GET_EXTENDED_INFO", e)),
    }
}

/// `SEMAPHORE_WRITE` / `SEMAPHORE_INCREMENT` of semaphore `index` of core `nc`.
pub(crate) fn semaphore(
    fd: &DeviceFd,
    request: sys::Request<sys::Semaphore>,
    op: &'static str,
    nc: u32,
    index: u32,
    value: u32,
) -> Result<(), LinuxError> {
    let mut arg = sys::Semaphore {
        nc_id: nc,
        semaphore_index: index,
        value,
    };
    match sys::ioctl(fd, request, &mut arg) {
        Ok(0) => Ok(()),
        Ok(ret) => Err(LinuxError::io(op, sys::positive_return(ret))),
        Err(e) => Err(LinuxError::io(op, e)),
    }
}

/// One allocation of the process.
#[derive(Debug, Clone)]
pub(crate) struct Chunk {
    pub(crate) handle: u64,
    /// Bytes the caller asked for (the chunk may be larger).
    pub(crate) size: u64,
    pub(crate) fd: Arc<DeviceFd>,
}

/// One staged subgraph.
#[derive(Debug)]
pub(crate) struct Staged {
    pub(crate) lnc: u32,
    /// Physical core (relative to the base node) and its device core.
    pub(crate) pnc: u32,
    pub(crate) device: u32,
    pub(crate) fd: Arc<DeviceFd>,
    /// Core-lock id of the model.
    pub(crate) uuid: [u8; 32],
    /// The stage image chunk (handle, PA); `None` for a compiler NEFF.
    pub(crate) image: Option<(u64, u64)>,
    pub(crate) stopped: AtomicBool,
}
