//! DMA queues and the mapped semaphore block, as driver 2.24.7.0 serves them.
//!
//! * `DMA_QUEUE_INIT` / `DMA_QUEUE_INIT_BATCH` (`ndmar_queue_init` per entry): `EINVAL` for
//!   an engine past `NUM_DMA_ENG_PER_DEVICE` (132) or a queue past `DMA_MAX_Q_V4` (16); a
//!   ring handle that names no chunk leaves that ring unset (the driver's lookup logs and
//!   passes `NULL`); a completion ring smaller than `rx_desc_count` descriptors is `EINVAL`,
//!   one that fits is refused by `udma_m2m_init_queue` with -1 (`EPERM`: "Completion ring not
//!   supported"), as are ring sizes that are not a multiple of 16 descriptors and ring
//!   chunks whose PA is not 256-byte aligned. The batch stops at the first failing entry
//!   (earlier ones stay initialised); a `count` of 256 or more is `E2BIG`. Queues hold no
//!   memory of their own (their rings are the caller's chunks), so [`Accounting`] has no
//!   entry for them; the process's last close forgets them.
//! * `DMA_QUEUE_RELEASE`: 0 once the struct is read (the driver's `ndmar_queue_release` does
//!   nothing on these architectures).
//! * `DMA_COPY_DESCRIPTORS64`: `num_descs` 16-byte descriptors from the user buffer into the
//!   chunk at `offset` (`EINVAL` for an unknown handle or a range outside the chunk, `EFAULT`
//!   for an unreadable buffer). The emulator runs no DMA engine: the descriptors are bytes.
//! * `RESOURCE_MMAP_INFO` for block `TPB` (0), resource `SEMAPHORE` (0), `block_id` = core:
//!   the offset and size (8 KiB, as the V2/V3 tables state) of the core's semaphore block in
//!   the node's file, which is kept equal to what the semaphore and event requests see:
//!   event `i` at offset `4 i`, semaphore `i`'s value at `0x1000 + 4 i` (the layout of the
//!   driver's address map: events first, the semaphore read registers at +0x1000). Writes
//!   through a mapping are not seen by the emulator (the set/increment registers of the
//!   hardware are not modelled); other blocks and resources of the driver's table (state
//!   buffer, TOP_SP, device memory) are `EOPNOTSUPP`, anything else (a core the device
//!   does not have included) `EINVAL`.
//!
//! [`Accounting`]: crate::Accounting

use std::os::unix::fs::FileExt;

use super::call::{Call, Fail, Outcome, errno};
use crate::abi::layouts::{
    dma_copy_descriptors64 as dcd64, dma_queue_init as dqi, dma_queue_init_batch as dqib,
    dma_queue_release as dqr, resource_mmap_info as rmi,
};
use crate::abi::{Rec, requests as rq};
use crate::memory;
use crate::state::{
    Device, DmaQueue, EVENTS, MAX_NC_PER_DEVICE, SEM_BLOCK_BASE, SEMAPHORES, State,
};

/// `NUM_DMA_ENG_PER_DEVICE`.
pub(crate) const DMA_ENGINES: u32 = 132;
/// `DMA_MAX_Q_V4`.
pub(crate) const DMA_QUEUES: u32 = 16;
/// `MAX_DMA_QUEUE_INIT_BATCH`.
pub(crate) const MAX_BATCH: u32 = 256;
/// `sizeof(union udma_desc)`.
pub(crate) const DESC_SIZE: u64 = 16;
/// `UDMA_QUEUE_ADDR_BYTE_ALIGNMENT`.
const RING_ALIGN: u64 = 256;

/// Bytes of one core's block (`V2_MMAP_NC_SEMA_SIZE`, `V3_MMAP_NC_SEMA_SIZE`).
pub(crate) const SEM_BLOCK_SIZE: u64 = 0x2000;
/// Offset of semaphore 0's value in a block.
pub(crate) const SEM_VALUES: u64 = 0x1000;
/// `NEURON_DM_BLOCK_TPB`, `NEURON_DM_RESOURCE_SEMAPHORE`.
const BLOCK_TPB: u32 = 0;
const RESOURCE_SEMAPHORE: u32 = 0;
/// The last block type (`HBM`) and resource type (`DMEM`) of the driver's enums.
const LAST_BLOCK: u32 = 2;
const LAST_RESOURCE: u32 = 3;

fn device<'a>(st: &'a mut State, call: &Call<'_, '_>) -> Result<&'a mut Device, Fail> {
    match st.device(call.device) {
        Some(d) => Ok(d),
        None => errno(libc::ENODEV),
    }
}

/// One entry of `DMA_QUEUE_INIT(_BATCH)` (`ndmar_queue_init`).
fn queue_init(dev: &mut Device, tgid: u32, e: &Rec) -> Result<(), i32> {
    let eng = e.get32(dqi::ENG_ID);
    let qid = e.get32(dqi::QID);
    if eng >= DMA_ENGINES || qid >= DMA_QUEUES {
        return Err(libc::EINVAL);
    }
    let tx_count = e.get32(dqi::TX_DESC_COUNT);
    let rx_count = e.get32(dqi::RX_DESC_COUNT);
    let ring = |field| {
        let handle = e.get(field);
        (handle != 0)
            .then(|| dev.chunks.get(&handle).map(|c| (handle, *c)))
            .flatten()
    };
    let (tx, rx, rxc) = (
        ring(dqi::TX_HANDLE),
        ring(dqi::RX_HANDLE),
        ring(dqi::RXC_HANDLE),
    );
    if let Some((_, c)) = rxc {
        if u64::from(rx_count) * DESC_SIZE > c.size {
            return Err(libc::EINVAL);
        }
    }
    // `udma_m2m_init_queue`: -1 for a misaligned ring, a size not a multiple of 16
    // descriptors, or any completion ring.
    let per_align = (RING_ALIGN / DESC_SIZE) as u32;
    let misaligned = [tx, rx]
        .iter()
        .flatten()
        .any(|(_, c)| c.pa % RING_ALIGN != 0);
    if misaligned || tx_count % per_align != 0 || rx_count % per_align != 0 || rxc.is_some() {
        return Err(libc::EPERM);
    }
    dev.dma_queues.insert(
        (eng, qid),
        DmaQueue {
            owner: tgid,
            tx_desc_count: tx_count,
            rx_desc_count: rx_count,
            tx: tx.map(|(h, _)| h),
            rx: rx.map(|(h, _)| h),
        },
    );
    Ok(())
}

/// `DMA_QUEUE_INIT`, `DMA_QUEUE_INIT_BATCH`, `DMA_QUEUE_RELEASE`.
pub(crate) fn queue_op(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let tgid = call.tgid();
    match call.request {
        rq::DMA_QUEUE_INIT => {
            let rec = call.read_arg(&dqi::LAYOUT)?;
            let dev = device(st, call)?;
            queue_init(dev, tgid, &rec).map_err(Fail::Errno)?;
        }
        rq::DMA_QUEUE_INIT_BATCH => {
            let rec = call.read_arg(&dqib::LAYOUT)?;
            let count = rec.get32(dqib::COUNT);
            if count >= MAX_BATCH {
                return errno(libc::E2BIG);
            }
            let entries = rec.field_bytes(dqib::ENTRIES);
            let dev = device(st, call)?;
            for i in 0..count as usize {
                let at = i * dqi::LAYOUT.sizeof;
                let bytes = entries.get(at..at + dqi::LAYOUT.sizeof).unwrap_or(&[]);
                let entry = Rec::from_bytes(&dqi::LAYOUT, bytes);
                queue_init(dev, tgid, &entry).map_err(Fail::Errno)?;
            }
        }
        _ => {
            call.read_arg(&dqr::LAYOUT)?;
        }
    }
    Ok(0)
}

/// `DMA_COPY_DESCRIPTORS64`.
pub(crate) fn copy_descriptors(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let rec = call.read_arg(&dcd64::LAYOUT)?;
    let handle = rec.get(dcd64::MEM_HANDLE);
    let offset = rec.get(dcd64::OFFSET);
    let len = u64::from(rec.get32(dcd64::NUM_DESCS)) * DESC_SIZE;
    let dev = device(st, call)?;
    let Some(chunk) = dev.chunks.get(&handle).copied() else {
        return errno(libc::EINVAL);
    };
    if !chunk.within(offset, len) {
        return errno(libc::EINVAL);
    }
    let data = call.target.read(rec.get(dcd64::BUFFER), len as usize)?;
    memory::write(dev, &chunk, offset, &data).map_err(Fail::Errno)?;
    Ok(0)
}

/// `RESOURCE_MMAP_INFO`.
pub(crate) fn resource_mmap_info(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&rmi::LAYOUT)?;
    let block = rec.get32(rmi::BLOCK);
    let id = rec.get32(rmi::BLOCK_ID);
    let resource = rec.get32(rmi::RESOURCE);
    let dev = device(st, call)?;
    if block == BLOCK_TPB && resource == RESOURCE_SEMAPHORE {
        if id >= dev.cores {
            // No entry of the driver's table names a core the device does not have.
            return errno(libc::EINVAL);
        }
        publish(dev, id).map_err(Fail::Errno)?;
        rec.set(rmi::OFFSET, block_offset(id));
        rec.set(rmi::SIZE, SEM_BLOCK_SIZE);
        call.write_arg(&rec)?;
        return Ok(0);
    }
    if block <= LAST_BLOCK && resource <= LAST_RESOURCE {
        return errno(libc::EOPNOTSUPP);
    }
    errno(libc::EINVAL)
}

/// File offset of core `nc`'s semaphore block.
pub(crate) fn block_offset(nc: u32) -> u64 {
    SEM_BLOCK_BASE + u64::from(nc) * SEM_BLOCK_SIZE
}

/// Writes core `nc`'s events and semaphores into its block of the node's file.
pub(crate) fn publish(dev: &Device, nc: u32) -> Result<(), i32> {
    let (Some(events), Some(sems)) = (dev.events.get(nc as usize), dev.semaphores.get(nc as usize))
    else {
        return Err(libc::EINVAL);
    };
    let mut block = vec![0u8; SEM_BLOCK_SIZE as usize];
    for (i, v) in events.iter().enumerate().take(EVENTS) {
        block[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    let base = SEM_VALUES as usize;
    for (i, v) in sems.iter().enumerate().take(SEMAPHORES) {
        block[base + i * 4..base + i * 4 + 4].copy_from_slice(&v.to_le_bytes());
    }
    dev.file
        .write_all_at(&block, block_offset(nc))
        .map_err(|_| libc::EIO)
}

/// After a request that may have changed semaphores or events (the semaphore and event
/// requests, a launch, a reset): every core block of the device is written again.
pub(crate) fn mirror(st: &mut State, request: u32, device: u32) {
    let touches = matches!(
        request,
        rq::SEMAPHORE_WRITE
            | rq::SEMAPHORE_INCREMENT
            | rq::SEMAPHORE_DECREMENT
            | rq::EVENT_SET
            | rq::NC_RESET
            | rq::NC_RESET_READY
            | rq::DEVICE_RESET
    );
    if !touches {
        return;
    }
    if let Some(dev) = st.device(device) {
        for nc in 0..dev.cores.min(MAX_NC_PER_DEVICE) {
            let _ = publish(dev, nc);
        }
    }
}
