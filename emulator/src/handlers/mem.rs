//! Memory requests: allocation (legacy, `V2`, `V2MT`, `V2MT64`), free, the info requests,
//! copies between a user buffer and a chunk, copies between chunks and memsets.

use std::sync::Arc;

use nrt_sim::SimMachine;

use super::call::{Call, Fail, Outcome, errno};
use crate::abi::layouts::{
    host_device_id, mem_alloc, mem_alloc_v2, mem_alloc_v2_mem_type as v2mt,
    mem_alloc_v2_mem_type64 as v2mt64, mem_buf_copy, mem_buf_copy64, mem_copy, mem_copy64,
    mem_free, mem_get_extended_info as ext, mem_get_info, mem_get_mc_mmap_info as mc1,
    mem_get_mc_mmap_info_v2 as mc2, mem_get_pa, memset, memset64,
};
use crate::abi::requests::{self as rq, ioc_nr, ioc_size};
use crate::abi::{Field, Rec};
use crate::memory::{self, AllocRequest};
use crate::state::{Chunk, Device, State};
use crate::target::CHUNK;

fn device(st: &mut State, index: u32) -> Result<&mut Device, Fail> {
    match st.device(index) {
        Some(d) => Ok(d),
        None => errno(libc::ENODEV),
    }
}

/// `ncdev_mem_handle_to_mem_chunk`.
fn chunk(dev: &Device, handle: u64) -> Result<Chunk, Fail> {
    dev.chunks
        .get(&handle)
        .copied()
        .ok_or(Fail::Errno(libc::EINVAL))
}

/// The fields of an allocation request, by struct.
struct AllocFields {
    size: Field,
    align: Option<Field>,
    host: Field,
    channel: Field,
    nc: Field,
    handle: Field,
}

/// `MEM_ALLOC` and the number-102 family (`ncdev_mem_alloc_libnrt`, exact request or
/// `EINVAL`): allocates, then writes the u64 handle through the `mem_handle` user pointer
/// (the struct itself is not written back); a failed write frees the chunk again.
pub(crate) fn alloc(st: &mut State, machine: &Arc<SimMachine>, call: &Call<'_, '_>) -> Outcome {
    let (layout, f) = match call.request {
        rq::MEM_ALLOC => (
            &mem_alloc::LAYOUT,
            AllocFields {
                size: mem_alloc::SIZE,
                align: None,
                host: mem_alloc::HOST_MEMORY,
                channel: mem_alloc::DRAM_CHANNEL,
                nc: mem_alloc::NC_ID,
                handle: mem_alloc::MEM_HANDLE,
            },
        ),
        rq::MEM_ALLOC_V2 => (
            &mem_alloc_v2::LAYOUT,
            AllocFields {
                size: mem_alloc_v2::SIZE,
                align: Some(mem_alloc_v2::ALIGN),
                host: mem_alloc_v2::HOST_MEMORY,
                channel: mem_alloc_v2::DRAM_CHANNEL,
                nc: mem_alloc_v2::NC_ID,
                handle: mem_alloc_v2::MEM_HANDLE,
            },
        ),
        rq::MEM_ALLOC_V2MT => (
            &v2mt::LAYOUT,
            AllocFields {
                size: v2mt::SIZE,
                align: Some(v2mt::ALIGN),
                host: v2mt::HOST_MEMORY,
                channel: v2mt::DRAM_CHANNEL,
                nc: v2mt::NC_ID,
                handle: v2mt::MEM_HANDLE,
            },
        ),
        rq::MEM_ALLOC_V2MT64 => (
            &v2mt64::LAYOUT,
            AllocFields {
                size: v2mt64::SIZE,
                align: Some(v2mt64::ALIGN),
                host: v2mt64::HOST_MEMORY,
                channel: v2mt64::DRAM_CHANNEL,
                nc: v2mt64::NC_ID,
                handle: v2mt64::MEM_HANDLE,
            },
        ),
        _ => return errno(libc::EINVAL),
    };
    let rec = call.read_arg(layout)?;
    let host = rec.get32(f.host) != 0;
    let request = AllocRequest {
        size: rec.get(f.size),
        align: f.align.map_or(0, |a| rec.get(a)),
        host,
        dram_channel: rec.get32(f.channel),
        nc_id: rec.get32(f.nc),
        device_lifespan: false,
    };
    let instance = st.instance;
    let tgid = call.tgid();
    let dev = device(st, call.device)?;
    let handle = memory::alloc(dev, machine, instance, tgid, request).map_err(Fail::Errno)?;
    if let Err(e) = call.target.write(rec.get(f.handle), &handle.to_le_bytes()) {
        let _ = memory::free(dev, handle);
        return Err(e.into());
    }
    Ok(0)
}

/// `MEM_FREE` (`EINVAL` for an unknown handle).
pub(crate) fn free(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let rec = call.read_arg(&mem_free::LAYOUT)?;
    let dev = device(st, call.device)?;
    memory::free(dev, rec.get(mem_free::MEM_HANDLE)).map_err(Fail::Errno)?;
    Ok(0)
}

/// A kernel-looking address standing for the `struct mem_chunk *` of handle `handle`.
fn chunk_pointer(handle: u64) -> u64 {
    0xffff_8880_0000_0000 | (handle << 8)
}

/// `MEM_GET_EXTENDED_INFO`: pa, host_memory, size, mmap_offset (= pa), pid; `version` is
/// copied back as it came. Like the driver (`local.mem_handle = (u64)mc`), it overwrites
/// `mem_handle` with the chunk's kernel address, not the handle. An unknown handle returns
/// **positive** `EINVAL` (22) as the ioctl's value, as the driver's `return EINVAL;` does.
pub(crate) fn extended_info(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let mut rec = call.read_arg(&ext::LAYOUT)?;
    let dev = device(st, call.device)?;
    let Ok(c) = chunk(dev, rec.get(ext::MEM_HANDLE)) else {
        return Ok(i64::from(libc::EINVAL));
    };
    rec.set(ext::PA, c.pa);
    rec.set(ext::HOST_MEMORY, u64::from(c.is_host()));
    rec.set(ext::SIZE, c.size);
    rec.set(ext::MMAP_OFFSET, c.pa);
    rec.set(ext::PID, u64::from(c.owner));
    rec.set(ext::MEM_HANDLE, chunk_pointer(rec.get(ext::MEM_HANDLE)));
    call.write_arg(&rec)?;
    Ok(0)
}

/// The deprecated `MEM_GET_PA` and `MEM_GET_INFO`.
pub(crate) fn legacy_info(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let info = call.request == rq::MEM_GET_INFO;
    let layout = if info {
        &mem_get_info::LAYOUT
    } else {
        &mem_get_pa::LAYOUT
    };
    let mut rec = call.read_arg(layout)?;
    let dev = device(st, call.device)?;
    let c = chunk(dev, rec.get(mem_get_pa::MEM_HANDLE))?;
    if info {
        rec.set(mem_get_info::MMAP_OFFSET, c.pa);
        rec.set(mem_get_info::PA, c.pa);
    } else {
        rec.set(mem_get_pa::PA, c.pa);
    }
    call.write_arg(&rec)?;
    Ok(0)
}

/// `MEM_MC_GET_INFO(_V2)`: the chunk holding a PA (`ENOMEM` when none does); v1 or v2 by
/// `_IOC_SIZE`.
pub(crate) fn mc_info(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let layout = match ioc_size(call.request) as usize {
        24 => &mc1::LAYOUT,
        32 => &mc2::LAYOUT,
        _ => return errno(libc::EINVAL),
    };
    let mut rec = call.read_arg(layout)?;
    let dev = device(st, call.device)?;
    let Some((handle, c)) = dev.chunk_at(rec.get(mc1::PA)) else {
        return errno(libc::ENOMEM);
    };
    rec.set(mc1::MMAP_OFFSET, c.pa);
    rec.set(mc1::SIZE, c.size);
    if layout.sizeof == mc2::LAYOUT.sizeof {
        rec.set(mc2::MEM_HANDLE, handle);
    }
    call.write_arg(&rec)?;
    Ok(0)
}

/// `MEM_BUF_COPY`, `MEM_BUF_COPY64` and `MEM_BUF_ZEROCOPY64`: bounds-checked copy between the
/// caller's buffer and a chunk, in 64 KiB pieces (`MAX_DMA_DESC_SIZE`).
pub(crate) fn buf_copy(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let (handle, buffer, size, offset, to_chunk) = match call.request {
        rq::MEM_BUF_COPY => {
            let r = call.read_arg(&mem_buf_copy::LAYOUT)?;
            (
                r.get(mem_buf_copy::MEM_HANDLE),
                r.get(mem_buf_copy::BUFFER),
                r.get(mem_buf_copy::SIZE),
                r.get(mem_buf_copy::OFFSET),
                r.get32(mem_buf_copy::COPY_TO_MEM_HANDLE) != 0,
            )
        }
        r if r == rq::MEM_BUF_COPY64 || ioc_nr(r) == ioc_nr(rq::MEM_BUF_ZEROCOPY64) => {
            let r = call.read_arg(&mem_buf_copy64::LAYOUT)?;
            (
                r.get(mem_buf_copy64::MEM_HANDLE),
                r.get(mem_buf_copy64::BUFFER),
                r.get(mem_buf_copy64::SIZE),
                r.get(mem_buf_copy64::OFFSET),
                r.get32(mem_buf_copy64::COPY_TO_MEM_HANDLE) != 0,
            )
        }
        _ => return errno(libc::EINVAL),
    };
    let dev = device(st, call.device)?;
    let c = chunk(dev, handle)?;
    if !c.within(offset, size) {
        return errno(libc::EINVAL);
    }
    if to_chunk {
        memory::drop_stages_in(dev, &c);
    }
    // The driver's device path counts the bytes left in a `u32`: a copy of 4 GiB or more
    // moves only `size mod 2^32` bytes (host chunks copy everything).
    let size = if c.is_host() {
        size
    } else {
        u64::from(size as u32)
    };
    let mut piece = vec![0u8; CHUNK.min(size as usize)];
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(CHUNK as u64) as usize;
        let buf = piece.get_mut(..n).unwrap_or(&mut []);
        let user = buffer.wrapping_add(done);
        if to_chunk {
            call.target.read_into(user, buf)?;
            memory::write(dev, &c, offset + done, buf).map_err(Fail::Errno)?;
        } else {
            memory::read(dev, &c, offset + done, buf).map_err(Fail::Errno)?;
            call.target.write(user, buf)?;
        }
        done += n as u64;
    }
    Ok(0)
}

/// `MEM_COPY` / `MEM_COPY64`: bounds-checked chunk-to-chunk copy.
pub(crate) fn copy(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let (src, dst, size, src_off, dst_off) = match call.request {
        rq::MEM_COPY => {
            let r = call.read_arg(&mem_copy::LAYOUT)?;
            (
                r.get(mem_copy::SRC_MEM_HANDLE),
                r.get(mem_copy::DST_MEM_HANDLE),
                r.get(mem_copy::SIZE),
                r.get(mem_copy::SRC_OFFSET),
                r.get(mem_copy::DST_OFFSET),
            )
        }
        rq::MEM_COPY64 => {
            let r = call.read_arg(&mem_copy64::LAYOUT)?;
            (
                r.get(mem_copy64::SRC_MEM_HANDLE),
                r.get(mem_copy64::DST_MEM_HANDLE),
                r.get(mem_copy64::SIZE),
                r.get(mem_copy64::SRC_OFFSET),
                r.get(mem_copy64::DST_OFFSET),
            )
        }
        _ => return errno(libc::EINVAL),
    };
    let dev = device(st, call.device)?;
    let (s, d) = (chunk(dev, src)?, chunk(dev, dst)?);
    if !s.within(src_off, size) || !d.within(dst_off, size) {
        return errno(libc::EINVAL);
    }
    memory::drop_stages_in(dev, &d);
    // Through a bounce buffer; overlapping ranges of one chunk copy as memmove when the
    // destination is ahead (walk backwards).
    let backwards = src == dst && dst_off > src_off;
    let mut piece = vec![0u8; CHUNK.min(size as usize)];
    let mut done = 0u64;
    while done < size {
        let n = (size - done).min(CHUNK as u64);
        let at = if backwards { size - done - n } else { done };
        let buf = piece.get_mut(..n as usize).unwrap_or(&mut []);
        memory::read(dev, &s, src_off + at, buf).map_err(Fail::Errno)?;
        memory::write(dev, &d, dst_off + at, buf).map_err(Fail::Errno)?;
        done += n;
    }
    Ok(0)
}

/// `MEMSET` / `MEMSET64`: the byte `value & 0xff` over `[offset, offset + size)`.
pub(crate) fn memset_op(st: &mut State, call: &Call<'_, '_>) -> Outcome {
    let (handle, offset, value, size) = match call.request {
        rq::MEMSET => {
            let r = call.read_arg(&memset::LAYOUT)?;
            (
                r.get(memset::MEM_HANDLE),
                r.get(memset::OFFSET),
                r.get32(memset::VALUE),
                r.get(memset::SIZE),
            )
        }
        rq::MEMSET64 => {
            let r = call.read_arg(&memset64::LAYOUT)?;
            (
                r.get(memset64::MEM_HANDLE),
                r.get(memset64::OFFSET),
                r.get32(memset64::VALUE),
                r.get(memset64::SIZE),
            )
        }
        _ => return errno(libc::EINVAL),
    };
    let dev = device(st, call.device)?;
    let c = chunk(dev, handle)?;
    if !c.within(offset, size) {
        return errno(libc::EINVAL);
    }
    memory::drop_stages_in(dev, &c);
    memory::fill(dev, &c, offset, value as u8, size).map_err(Fail::Errno)?;
    Ok(0)
}

/// `HOST_DEVICE_ID`: the device index.
pub(crate) fn host_device_id(call: &Call<'_, '_>) -> Outcome {
    let mut rec = Rec::zeroed(&host_device_id::LAYOUT);
    rec.set(host_device_id::HOST_DEVICE_ID, u64::from(call.device));
    call.write_arg(&rec)?;
    Ok(0)
}
