//! Device memory: `MEM_ALLOC*` chunks in HBM, named by their PA, with host copies
//! (`MEM_BUF_COPY*`), device copies (`MEM_COPY*`) and fills (`MEMSET*`).

use nrt_core::driver::DeviceBuffer;

use crate::driver::LinuxDriver;
use crate::error::LinuxError;
use crate::resources::{Chunk, chunk_info, free_chunk};
use crate::sys::{self, AllocParams, MemForm, MemLocation, MemType};

/// Alignment of device allocations.
const DEVICE_ALIGN: u64 = 64;
/// Bytes per bounce copy between devices.
const BOUNCE: usize = 4 << 20;

fn positive(op: &'static str, ret: i32) -> Result<(), LinuxError> {
    if ret == 0 {
        Ok(())
    } else {
        Err(LinuxError::io(op, sys::positive_return(ret)))
    }
}

/// `[offset, offset + len)` inside `buffer`, else an argument error.
fn check_range(
    op: &'static str,
    b: &DeviceBuffer,
    offset: u64,
    len: u64,
) -> Result<(), LinuxError> {
    match offset.checked_add(len) {
        Some(end) if end <= b.size => Ok(()),
        _ => Err(LinuxError::invalid(op, "device memory access out of range")),
    }
}

fn narrow(op: &'static str, v: u64) -> Result<u32, LinuxError> {
    u32::try_from(v).map_err(|_| {
        LinuxError::invalid(
            op,
            "sizes and offsets of 4 GiB or more need a driver with MEM_ALLOC64",
        )
    })
}

impl LinuxDriver {
    /// The chunk of `b`, if it is a live allocation of this driver.
    fn chunk(&self, op: &'static str, b: &DeviceBuffer) -> Result<Chunk, LinuxError> {
        let memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
        match memory.get(&(b.device, b.addr)) {
            Some(c) if c.size == b.size => Ok(c.clone()),
            _ => Err(LinuxError::invalid(
                op,
                "not a device allocation of this process",
            )),
        }
    }

    pub(crate) fn alloc(&self, device: u32, size: u64) -> Result<DeviceBuffer, LinuxError> {
        const OP: &str = "alloc_device";
        let (fd, form, nc_id) = {
            let mut st = self.state();
            let discovered = self.discovered(&mut st)?;
            if device >= discovered.info.device_count {
                return Err(LinuxError::invalid(OP, "no such device"));
            }
            let node = discovered.base + device;
            let form = MemForm::from_features(self.features(&mut st)?);
            let nc_id = st.cores.iter().find(|c| c.node == node).map_or(0, |c| c.nc);
            (self.attach(&mut st, node)?, form, nc_id)
        };
        // A zero-byte tensor still gets a distinct address.
        let handle = sys::mem_alloc(
            &fd,
            form,
            &AllocParams {
                size: size.max(1),
                align: DEVICE_ALIGN,
                location: MemLocation::empty(),
                dram_channel: 0,
                nc_id,
                mem_type: MemType::TENSORS_DEVICE,
            },
        )
        .map_err(|e| LinuxError::io("MEM_ALLOC", e))?;
        let pa = match chunk_info(&fd, handle) {
            Ok((pa, _)) => pa,
            Err(e) => {
                let _ = free_chunk(&fd, handle);
                return Err(e);
            }
        };
        self.memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((device, pa), Chunk { handle, size, fd });
        Ok(DeviceBuffer {
            device,
            addr: pa,
            size,
        })
    }

    pub(crate) fn free(&self, b: DeviceBuffer) -> Result<(), LinuxError> {
        let chunk = {
            let mut memory = self.memory.lock().unwrap_or_else(|p| p.into_inner());
            match memory.get(&(b.device, b.addr)) {
                Some(c) if c.size == b.size => memory.remove(&(b.device, b.addr)),
                _ => None,
            }
        };
        let chunk = chunk.ok_or_else(|| {
            LinuxError::invalid("free_device", "not a device allocation of this process")
        })?;
        free_chunk(&chunk.fd, chunk.handle)
    }

    pub(crate) fn write(
        &self,
        b: DeviceBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), LinuxError> {
        const OP: &str = "write_device";
        check_range(OP, &b, offset, data.len() as u64)?;
        let chunk = self.chunk(OP, &b)?;
        sys::mem_buf_write(&chunk.fd, self.mem_form()?, chunk.handle, offset, data)
            .map_err(|e| LinuxError::io("MEM_BUF_COPY (to device)", e))
    }

    pub(crate) fn read(
        &self,
        b: DeviceBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), LinuxError> {
        const OP: &str = "read_device";
        check_range(OP, &b, offset, out.len() as u64)?;
        let chunk = self.chunk(OP, &b)?;
        sys::mem_buf_read(&chunk.fd, self.mem_form()?, chunk.handle, offset, out)
            .map_err(|e| LinuxError::io("MEM_BUF_COPY (from device)", e))
    }

    pub(crate) fn copy(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), LinuxError> {
        const OP: &str = "copy_device";
        check_range(OP, &src, src_offset, len)?;
        check_range(OP, &dst, dst_offset, len)?;
        let from = self.chunk(OP, &src)?;
        let to = self.chunk(OP, &dst)?;
        if len == 0 {
            return Ok(());
        }
        if src.device != dst.device {
            // Handles are per device: bounce through host memory.
            let mut bounce = vec![0u8; BOUNCE.min(len as usize)];
            let mut done = 0u64;
            while done < len {
                let n = (len - done).min(bounce.len() as u64) as usize;
                let buf = bounce.get_mut(..n).unwrap_or(&mut []);
                self.read(src, src_offset + done, buf)?;
                self.write(dst, dst_offset + done, buf)?;
                done += n as u64;
            }
            return Ok(());
        }
        let ret = if self.mem_form()?.is_wide() {
            let mut arg = sys::MemCopy64 {
                src_mem_handle: from.handle,
                dst_mem_handle: to.handle,
                size: len,
                src_offset,
                dst_offset,
            };
            sys::ioctl(&from.fd, sys::MEM_COPY64, &mut arg)
                .map_err(|e| LinuxError::io("MEM_COPY64", e))?
        } else {
            let mut arg = sys::MemCopy {
                src_mem_handle: from.handle,
                dst_mem_handle: to.handle,
                size: narrow(OP, len)?,
                src_offset: narrow(OP, src_offset)?,
                dst_offset: narrow(OP, dst_offset)?,
            };
            sys::ioctl(&from.fd, sys::MEM_COPY, &mut arg)
                .map_err(|e| LinuxError::io("MEM_COPY", e))?
        };
        positive("MEM_COPY", ret)
    }

    pub(crate) fn fill(
        &self,
        b: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), LinuxError> {
        const OP: &str = "memset_device";
        check_range(OP, &b, offset, len)?;
        let chunk = self.chunk(OP, &b)?;
        if len == 0 {
            return Ok(());
        }
        let ret = if self.mem_form()?.is_wide() {
            let mut arg = sys::Memset64 {
                mem_handle: chunk.handle,
                offset,
                value: u32::from(value),
                size: len,
            };
            sys::ioctl(&chunk.fd, sys::MEMSET64, &mut arg)
                .map_err(|e| LinuxError::io("MEMSET64", e))?
        } else {
            let mut arg = sys::Memset {
                mem_handle: chunk.handle,
                offset,
                value: u32::from(value),
                size: narrow(OP, len)?,
            };
            sys::ioctl(&chunk.fd, sys::MEMSET, &mut arg).map_err(|e| LinuxError::io("MEMSET", e))?
        };
        positive("MEMSET", ret)
    }
}
