//! [`Mapping`]: a shared `mmap` of a device fd, accessed only with volatile loads and stores.

use core::ptr::NonNull;
use std::io;

use rustix::mm::{MapFlags, ProtFlags};
use volatile::VolatilePtr;

use super::fd::DeviceFd;

/// A `MAP_SHARED` mapping of `len` bytes of a device fd (a notification queue, a host chunk).
/// The device (or the emulator behind a regular file) changes it behind the program's back,
/// so every access is volatile and bounds-checked; nothing hands out a reference into it.
/// Unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is plain shared memory owned by this value; every access goes through
// `&self` methods doing single volatile loads/stores, which are sound from any thread (the
// memory is shared with the device anyway; ordering between threads is the callers' locks').
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes at `offset` of `fd`, read-only or read/write.
    pub fn map(fd: &DeviceFd, offset: u64, len: usize, writable: bool) -> io::Result<Self> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        let prot = if writable {
            ProtFlags::READ | ProtFlags::WRITE
        } else {
            ProtFlags::READ
        };
        // SAFETY: a fresh mapping chosen by the kernel (null hint, no MAP_FIXED) cannot alias
        // any existing Rust object; it is owned by the returned value and unmapped on drop.
        let raw = unsafe {
            rustix::mm::mmap(
                core::ptr::null_mut(),
                len,
                prot,
                MapFlags::SHARED,
                fd,
                offset,
            )
        }?;
        let ptr = NonNull::new(raw.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Self { ptr, len, writable })
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (empty mappings are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A pointer to a `T` at `offset`, when it lies inside the mapping and is aligned.
    fn at<T>(&self, offset: usize) -> Option<NonNull<T>> {
        let end = offset.checked_add(size_of::<T>())?;
        if end > self.len || offset % align_of::<T>() != 0 {
            return None;
        }
        // SAFETY: `offset + size_of::<T>() <= len`, so the result stays inside the mapping
        // (page-aligned start, so `offset`'s alignment is the address's).
        Some(unsafe { self.ptr.add(offset) }.cast::<T>())
    }

    fn load<T: Copy>(&self, offset: usize) -> Option<T> {
        let p = self.at::<T>(offset)?;
        // SAFETY: `p` is aligned and inside the live mapping (readable); `T` is an integer
        // type, valid for any bytes. Only a volatile load happens through it.
        let v = unsafe { VolatilePtr::new_read_only(p) };
        Some(v.read())
    }

    fn store<T: Copy>(&self, offset: usize, value: T) -> bool {
        if !self.writable {
            return false;
        }
        let Some(p) = self.at::<T>(offset) else {
            return false;
        };
        // SAFETY: `p` is aligned and inside the live, writable mapping; only a volatile store
        // happens through it, and no Rust reference into the mapping exists.
        let v = unsafe { VolatilePtr::new(p) };
        v.write(value);
        true
    }

    /// The `u32` at `offset` (aligned, in bounds), else `None`.
    pub fn read_u32(&self, offset: usize) -> Option<u32> {
        self.load::<u32>(offset).map(u32::from_le)
    }

    /// The `u64` at `offset` (aligned, in bounds), else `None`.
    pub fn read_u64(&self, offset: usize) -> Option<u64> {
        self.load::<u64>(offset).map(u64::from_le)
    }

    /// Fills `out` from `offset`, byte by byte; `false` (nothing read) when out of bounds.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) -> bool {
        if offset
            .checked_add(out.len())
            .is_none_or(|end| end > self.len)
        {
            return false;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.load::<u8>(offset + i).unwrap_or(0);
        }
        true
    }

    /// Writes `data` at `offset` (8-byte stores where aligned, then bytes); `false` (nothing
    /// written) when out of bounds or the mapping is read-only.
    pub fn write_bytes(&self, offset: usize, data: &[u8]) -> bool {
        if !self.writable
            || offset
                .checked_add(data.len())
                .is_none_or(|end| end > self.len)
        {
            return false;
        }
        let mut i = 0;
        while i < data.len() {
            let at = offset + i;
            if at % 8 == 0 {
                if let Some(word) = data.get(i..i + 8) {
                    let mut w = [0u8; 8];
                    w.copy_from_slice(word);
                    self.store::<u64>(at, u64::from_ne_bytes(w));
                    i += 8;
                    continue;
                }
            }
            if let Some(&b) = data.get(i) {
                self.store::<u8>(at, b);
            }
            i += 1;
        }
        true
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly a mapping this value created and still owns; no
        // reference into it outlives `self`.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
