//! Memory chunks: allocation (`mc_alloc_align`: sizes rounded up to pages; host chunks in the
//! device node's sparse file, device chunks in the owner's simulated HBM), free, and byte
//! access for copies, memsets and the launch convention.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use nrt_core::driver::{Driver, DriverError, ErrorKind};
use nrt_sim::{Instance, SimDriver, SimMachine};

use crate::state::{
    Backing, Chunk, DEVICE_PA_BASE, Device, MAX_NC_PER_DEVICE, PAGE, SEM_BLOCK_BASE,
};

/// What an allocation asks for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllocRequest {
    pub(crate) size: u64,
    pub(crate) align: u64,
    pub(crate) host: bool,
    pub(crate) dram_channel: u32,
    pub(crate) nc_id: u32,
    pub(crate) device_lifespan: bool,
    /// `mem_type` of the requests that carry one (`NEURON_MEMALLOC_TYPE_*`).
    pub(crate) mem_type: Option<u32>,
}

/// HBM channels per device (`dram_channels` of the HAL).
pub(crate) fn dram_channels(instance: Instance) -> u32 {
    match instance {
        Instance::Trn2 => 4,
        Instance::Trn1 | Instance::Inf2 => 2,
    }
}

fn errno_of(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::OutOfMemory => libc::ENOMEM,
        ErrorKind::Busy => libc::EBUSY,
        ErrorKind::PermissionDenied => libc::EACCES,
        ErrorKind::Timeout => libc::ETIMEDOUT,
        _ => libc::EINVAL,
    }
}

/// The simulated driver of process `tgid` on `dev`, attached on first use.
pub(crate) fn sim<'a>(dev: &'a mut Device, machine: &Arc<SimMachine>, tgid: u32) -> &'a SimDriver {
    dev.sims
        .entry(tgid)
        .or_insert_with(|| SimDriver::attach(machine))
}

/// Allocates a chunk for `owner` and gives it a handle.
pub(crate) fn alloc(
    dev: &mut Device,
    machine: &Arc<SimMachine>,
    instance: Instance,
    owner: u32,
    r: AllocRequest,
) -> Result<u64, i32> {
    if r.size > i64::MAX as u64 {
        return Err(libc::EINVAL);
    }
    let size = r.size.next_multiple_of(PAGE);
    if r.dram_channel >= dram_channels(instance) || r.nc_id >= MAX_NC_PER_DEVICE {
        return Err(libc::EINVAL);
    }
    if size == 0 {
        // gen_pool cannot hand out an empty range.
        return Err(libc::ENOMEM);
    }
    let (backing, pa) = if r.host {
        if r.align != 0 {
            // "Allocating aligned host memory not supported".
            return Err(libc::EINVAL);
        }
        let pa = host_alloc(dev, size)?;
        (Backing::Host, pa)
    } else {
        let align = r.align.max(1);
        // Over-allocate when the alignment exceeds the HBM page, then align inside.
        let extra = if align > PAGE { align } else { 0 };
        let total = size.checked_add(extra).ok_or(libc::ENOMEM)?;
        let device = dev.index;
        let buffer = sim(dev, machine, owner)
            .alloc_device(device, total)
            .map_err(|e| errno_of(e.kind()))?;
        let base = DEVICE_PA_BASE + buffer.addr;
        let pa = base.checked_next_multiple_of(align).ok_or(libc::EINVAL)?;
        (
            Backing::Device {
                buffer,
                offset: pa - base,
            },
            pa,
        )
    };
    let handle = dev.next_handle;
    dev.next_handle += 1;
    dev.chunks.insert(
        handle,
        Chunk {
            owner,
            backing,
            pa,
            size,
            device_lifespan: r.device_lifespan,
            mem_type: r.mem_type,
        },
    );
    Ok(handle)
}

/// First fit of `size` bytes (a page multiple) in the node's file, from page 1 on; grows the
/// file (sparse) to cover it so that `mmap` of the range does not fault.
fn host_alloc(dev: &mut Device, size: u64) -> Result<u64, i32> {
    let mut cursor = PAGE;
    for (&start, &end) in &dev.host_ranges {
        if start.saturating_sub(cursor) >= size {
            break;
        }
        cursor = cursor.max(end);
    }
    let end = cursor.checked_add(size).ok_or(libc::ENOMEM)?;
    if end > SEM_BLOCK_BASE {
        // The cores' semaphore blocks live above.
        return Err(libc::ENOMEM);
    }
    let len = dev.file.metadata().map_err(|_| libc::EIO)?.len();
    if len < end {
        dev.file.set_len(end).map_err(|_| libc::ENOMEM)?;
    }
    dev.host_ranges.insert(cursor, end);
    Ok(cursor)
}

/// Zeroes `[offset, offset + len)` of the node's file, giving the pages back when the file
/// system can.
fn host_zero(dev: &Device, offset: u64, len: u64) -> Result<(), i32> {
    let punched = i64::try_from(offset)
        .ok()
        .zip(i64::try_from(len).ok())
        .is_some_and(|(off, n)| {
            // SAFETY: fallocate on an fd we own, integer arguments only.
            unsafe {
                libc::fallocate(
                    dev.file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    off,
                    n,
                ) == 0
            }
        });
    if punched {
        return Ok(());
    }
    let zeros = vec![0u8; 64 << 10];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(zeros.len() as u64) as usize;
        dev.file
            .write_all_at(zeros.get(..n).unwrap_or(&[]), offset + done)
            .map_err(|_| libc::EIO)?;
        done += n as u64;
    }
    Ok(())
}

/// Frees chunk `handle`: its memory, and any launch-convention stage cached on it.
pub(crate) fn free(dev: &mut Device, handle: u64) -> Result<(), i32> {
    let chunk = dev.chunks.remove(&handle).ok_or(libc::EINVAL)?;
    drop_stages_in(dev, &chunk);
    match chunk.backing {
        Backing::Host => {
            dev.host_ranges.remove(&chunk.pa);
            host_zero(dev, chunk.pa, chunk.size)?;
        }
        Backing::Device { buffer, .. } => {
            if let Some(sim) = dev.sims.get(&chunk.owner) {
                sim.free_device(buffer).map_err(|e| errno_of(e.kind()))?;
            }
        }
    }
    Ok(())
}

/// Unstages every cached stage whose image lies in `chunk` (it is freed or rewritten).
pub(crate) fn drop_stages_in(dev: &mut Device, chunk: &Chunk) {
    let doomed: Vec<u64> = dev
        .staged
        .keys()
        .copied()
        .filter(|&pa| pa >= chunk.pa && pa - chunk.pa < chunk.size)
        .collect();
    for pa in doomed {
        if let Some(s) = dev.staged.remove(&pa) {
            if let Some(sim) = dev.sims.get(&s.owner) {
                let _ = sim.unstage_model(s.model);
            }
        }
    }
}

/// Reads `buf.len()` bytes at `offset` of `chunk` (bounds checked by the caller).
pub(crate) fn read(dev: &Device, chunk: &Chunk, offset: u64, buf: &mut [u8]) -> Result<(), i32> {
    match chunk.backing {
        Backing::Host => dev
            .file
            .read_exact_at(buf, chunk.pa + offset)
            .map_err(|_| libc::EIO),
        Backing::Device { buffer, offset: o } => dev
            .sims
            .get(&chunk.owner)
            .ok_or(libc::EINVAL)?
            .read_device(buffer, o + offset, buf)
            .map_err(|e| errno_of(e.kind())),
    }
}

/// Writes `data` at `offset` of `chunk` (bounds checked by the caller).
pub(crate) fn write(dev: &Device, chunk: &Chunk, offset: u64, data: &[u8]) -> Result<(), i32> {
    match chunk.backing {
        Backing::Host => dev
            .file
            .write_all_at(data, chunk.pa + offset)
            .map_err(|_| libc::EIO),
        Backing::Device { buffer, offset: o } => dev
            .sims
            .get(&chunk.owner)
            .ok_or(libc::EINVAL)?
            .write_device(buffer, o + offset, data)
            .map_err(|e| errno_of(e.kind())),
    }
}

/// Sets `len` bytes at `offset` of `chunk` to `value`.
pub(crate) fn fill(
    dev: &Device,
    chunk: &Chunk,
    offset: u64,
    value: u8,
    len: u64,
) -> Result<(), i32> {
    if let Backing::Device { buffer, offset: o } = chunk.backing {
        return dev
            .sims
            .get(&chunk.owner)
            .ok_or(libc::EINVAL)?
            .memset_device(buffer, o + offset, value, len)
            .map_err(|e| errno_of(e.kind()));
    }
    let piece = vec![value; 64 << 10];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(piece.len() as u64) as usize;
        write(dev, chunk, offset + done, piece.get(..n).unwrap_or(&[]))?;
        done += n as u64;
    }
    Ok(())
}
