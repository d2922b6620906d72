//! Tensors and tensor sets: device, host and virtual (caller-owned) storage, slices sharing
//! their source's storage, bounds-checked read / write / copy / memset.

#![allow(unsafe_code)]

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::ptr::NonNull;

use crate::driver::DeviceBuffer;
use crate::error::Result;

/// `nrt_tensor_placement_t`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TensorPlacement {
    /// `NRT_TENSOR_PLACEMENT_DEVICE`: device (HBM) memory of a logical core.
    Device = 0,
    /// `NRT_TENSOR_PLACEMENT_HOST`: host memory owned by the runtime.
    Host = 1,
    /// `NRT_TENSOR_PLACEMENT_VIRTUAL`: a caller's buffer, attached later.
    Virtual = 2,
}

impl TensorPlacement {
    /// The placement with this C value.
    pub fn from_raw(v: u32) -> Option<Self> {
        [Self::Device, Self::Host, Self::Virtual]
            .into_iter()
            .find(|p| *p as u32 == v)
    }
}

/// Device memory operations a tensor needs from its runtime (implemented by `Runtime`).
pub(crate) trait DeviceMemory: Sync {
    fn free(&self, buffer: DeviceBuffer);
    fn read(&self, buffer: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<()>;
    fn write(&self, buffer: DeviceBuffer, offset: u64, data: &[u8]) -> Result<()>;
    fn copy(&self, src: DeviceBuffer, so: u64, dst: DeviceBuffer, d: u64, len: u64) -> Result<()>;
    fn memset(&self, buffer: DeviceBuffer, offset: u64, value: u8, len: u64) -> Result<()>;
}

/// A caller's buffer attached to a virtual tensor.
#[derive(Clone, Copy)]
struct Attached {
    ptr: NonNull<u8>,
    len: usize,
}

enum Storage<'rt> {
    Device {
        buffer: DeviceBuffer,
        memory: &'rt dyn DeviceMemory,
    },
    Host(spin::Mutex<Vec<u8>>),
    Virtual(spin::Mutex<Option<Attached>>),
}

// SAFETY: the attached pointer of a virtual tensor is only dereferenced under the storage's
// mutex; `attach_buffer`'s contract makes the caller guarantee the buffer stays valid and is
// not accessed elsewhere while attached, from whatever thread.
unsafe impl Send for Storage<'_> {}
// SAFETY: as above; every access goes through a mutex or the (Sync) device memory.
unsafe impl Sync for Storage<'_> {}

impl Drop for Storage<'_> {
    fn drop(&mut self) {
        if let Storage::Device { buffer, memory } = self {
            memory.free(*buffer);
        }
    }
}

/// A tensor: a named window (`offset`, `size`) onto shared storage. Cloning it, or slicing it,
/// shares the storage; device memory is freed when the last tensor using it is dropped.
#[derive(Clone)]
pub struct Tensor<'rt> {
    name: String,
    storage: Arc<Storage<'rt>>,
    offset: u64,
    size: u64,
    /// Virtual tensors take their size from the attached buffer.
    placement: TensorPlacement,
}

impl fmt::Debug for Tensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("name", &self.name)
            .field("placement", &self.placement)
            .field("offset", &self.offset)
            .field("size", &self.size())
            .finish()
    }
}

fn out_of_range(what: &str, name: &str, offset: u64, len: u64, size: u64) -> crate::Error {
    err!(
        Invalid,
        "Tensor \"{name}\": {what} of {len} bytes at offset {offset} is outside its {size} bytes"
    )
}

impl<'rt> Tensor<'rt> {
    pub(crate) fn device(
        name: String,
        buffer: DeviceBuffer,
        memory: &'rt dyn DeviceMemory,
    ) -> Self {
        let size = buffer.size;
        Self {
            name,
            storage: Arc::new(Storage::Device { buffer, memory }),
            offset: 0,
            size,
            placement: TensorPlacement::Device,
        }
    }

    pub(crate) fn host(name: String, size: u64) -> Result<Self> {
        let len = usize::try_from(size)
            .map_err(|_| err!(Resource, "Failed to allocate {size} bytes of host memory"))?;
        let mut v = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| err!(Resource, "Failed to allocate {size} bytes of host memory"))?;
        v.resize(len, 0);
        Ok(Self {
            name,
            storage: Arc::new(Storage::Host(spin::Mutex::new(v))),
            offset: 0,
            size,
            placement: TensorPlacement::Host,
        })
    }

    /// An empty virtual tensor (`nrt_tensor_allocate_empty`): size 0 until a buffer is attached.
    pub fn empty(name: &str) -> Self {
        Self {
            name: String::from(name),
            storage: Arc::new(Storage::Virtual(spin::Mutex::new(None))),
            offset: 0,
            size: 0,
            placement: TensorPlacement::Virtual,
        }
    }

    /// Attaches a caller-owned buffer to a virtual tensor (`nrt_tensor_attach_buffer`); the
    /// caller keeps ownership. Refused for device or host tensors and for slices.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as this tensor (or
    /// any clone) may access it — until another buffer is attached or every clone is dropped —
    /// and must not be accessed by anything else during that time.
    pub unsafe fn attach_buffer(&mut self, ptr: *mut u8, len: usize) -> Result<()> {
        let Storage::Virtual(slot) = &*self.storage else {
            return Err(err!(
                Invalid,
                "Tensor \"{}\": only an empty (virtual) tensor accepts a buffer",
                self.name
            ));
        };
        if self.offset != 0 {
            return Err(err!(
                Invalid,
                "Tensor \"{}\": cannot attach a buffer to a slice",
                self.name
            ));
        }
        let Some(ptr) = NonNull::new(ptr) else {
            return Err(err!(
                Invalid,
                "Tensor \"{}\": the buffer is NULL",
                self.name
            ));
        };
        *slot.lock() = Some(Attached { ptr, len });
        self.size = len as u64;
        Ok(())
    }

    /// A slice `[offset, offset + size)` of `self` sharing its storage
    /// (`nrt_tensor_allocate_slice`).
    pub fn slice(&self, offset: u64, size: u64, name: &str) -> Result<Tensor<'rt>> {
        match offset.checked_add(size) {
            Some(end) if end <= self.size() => Ok(Tensor {
                name: String::from(name),
                storage: Arc::clone(&self.storage),
                offset: self.offset + offset,
                size,
                placement: self.placement,
            }),
            _ => Err(out_of_range(
                "a slice",
                &self.name,
                offset,
                size,
                self.size(),
            )),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the bytes live.
    pub fn placement(&self) -> TensorPlacement {
        self.placement
    }

    /// Size in bytes (`nrt_tensor_get_size`).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Whether the bytes live in host memory (host or attached virtual tensors).
    pub fn is_host_resident(&self) -> bool {
        !matches!(&*self.storage, Storage::Device { .. })
    }

    /// The device buffer and offset of a device tensor.
    pub fn device_location(&self) -> Option<(DeviceBuffer, u64)> {
        match &*self.storage {
            Storage::Device { buffer, .. } => Some((*buffer, self.offset)),
            _ => None,
        }
    }

    /// The address of the first byte (`nrt_tensor_get_va`): the host address for host and
    /// virtual tensors, the device address for device tensors, `None` for an empty virtual one.
    pub fn va(&self) -> Option<u64> {
        match &*self.storage {
            Storage::Device { buffer, .. } => Some(buffer.addr + self.offset),
            Storage::Host(v) => Some(v.lock().as_ptr() as u64 + self.offset),
            Storage::Virtual(a) => a.lock().map(|a| a.ptr.as_ptr() as u64 + self.offset),
        }
    }

    fn check(&self, what: &str, offset: u64, len: u64) -> Result<u64> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size() => Ok(self.offset + offset),
            _ => Err(out_of_range(what, &self.name, offset, len, self.size())),
        }
    }

    /// Copies `out.len()` bytes at `offset` into `out` (`nrt_tensor_read`).
    pub fn read(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        let at = self.check("a read", offset, out.len() as u64)?;
        match &*self.storage {
            Storage::Device { buffer, memory } => memory.read(*buffer, at, out),
            Storage::Host(v) => {
                let v = v.lock();
                // `check` bounded the range by the tensor, whose storage is at least as long.
                let Some(src) = v.get(at as usize..at as usize + out.len()) else {
                    let len = v.len() as u64;
                    return Err(out_of_range(
                        "a read",
                        &self.name,
                        offset,
                        out.len() as u64,
                        len,
                    ));
                };
                out.copy_from_slice(src);
                Ok(())
            }
            Storage::Virtual(a) => {
                let a = a.lock();
                let Some(a) = *a else {
                    return Err(self.no_buffer());
                };
                if at as usize + out.len() > a.len {
                    return Err(out_of_range(
                        "a read",
                        &self.name,
                        offset,
                        out.len() as u64,
                        a.len as u64,
                    ));
                }
                // SAFETY: `attach_buffer`'s contract: `a.ptr` is valid for `a.len` bytes and
                // accessed only by us while attached; the range was checked just above.
                let src = unsafe {
                    core::slice::from_raw_parts(a.ptr.as_ptr().add(at as usize), out.len())
                };
                out.copy_from_slice(src);
                Ok(())
            }
        }
    }

    /// Copies `data` to `offset` (`nrt_tensor_write`).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<()> {
        let at = self.check("a write", offset, data.len() as u64)?;
        match &*self.storage {
            Storage::Device { buffer, memory } => memory.write(*buffer, at, data),
            Storage::Host(v) => {
                let mut v = v.lock();
                let len = v.len() as u64;
                let Some(dst) = v.get_mut(at as usize..at as usize + data.len()) else {
                    return Err(out_of_range(
                        "a write",
                        &self.name,
                        offset,
                        data.len() as u64,
                        len,
                    ));
                };
                dst.copy_from_slice(data);
                Ok(())
            }
            Storage::Virtual(a) => {
                let a = a.lock();
                let Some(a) = *a else {
                    return Err(self.no_buffer());
                };
                if at as usize + data.len() > a.len {
                    return Err(out_of_range(
                        "a write",
                        &self.name,
                        offset,
                        data.len() as u64,
                        a.len as u64,
                    ));
                }
                // SAFETY: as in `read`.
                let dst = unsafe {
                    core::slice::from_raw_parts_mut(a.ptr.as_ptr().add(at as usize), data.len())
                };
                dst.copy_from_slice(data);
                Ok(())
            }
        }
    }

    /// Sets `len` bytes at `offset` to `value` (`nrt_tensor_memset`).
    pub fn memset(&self, offset: u64, value: u8, len: u64) -> Result<()> {
        let at = self.check("a memset", offset, len)?;
        match &*self.storage {
            Storage::Device { buffer, memory } => memory.memset(*buffer, at, value, len),
            _ => {
                let chunk = [value; 256];
                let mut done = 0u64;
                while done < len {
                    let n = (len - done).min(256) as usize;
                    self.write(offset + done, chunk.get(..n).unwrap_or(&[]))?;
                    done += n as u64;
                }
                Ok(())
            }
        }
    }

    /// Copies `len` bytes from `src` at `src_offset` to `dst` at `dst_offset`
    /// (`nrt_tensor_copy`), between any placements.
    pub fn copy(
        src: &Tensor<'_>,
        src_offset: u64,
        dst: &Tensor<'_>,
        dst_offset: u64,
        len: u64,
    ) -> Result<()> {
        let s = src.check("a copy source", src_offset, len)?;
        let d = dst.check("a copy destination", dst_offset, len)?;
        if let (Storage::Device { buffer: sb, memory }, Storage::Device { buffer: db, .. }) =
            (&*src.storage, &*dst.storage)
        {
            return memory.copy(*sb, s, *db, d, len);
        }
        let mut chunk = [0u8; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            let buf = chunk.get_mut(..n).unwrap_or(&mut []);
            src.read(src_offset + done, buf)?;
            dst.write(dst_offset + done, buf)?;
            done += n as u64;
        }
        Ok(())
    }

    fn no_buffer(&self) -> crate::Error {
        err!(Invalid, "Tensor \"{}\" has no buffer attached", self.name)
    }
}

/// A named collection of tensors (`nrt_tensor_set_t`).
#[derive(Clone, Debug, Default)]
pub struct TensorSet<'rt> {
    entries: Vec<(String, Tensor<'rt>)>,
}

impl<'rt> TensorSet<'rt> {
    /// An empty set.
    pub fn new() -> Self {
        Self {
            entries: Vec::new(),
        }
    }

    /// Adds `tensor` under `name`; a tensor already under that name is replaced.
    pub fn add(&mut self, name: &str, tensor: Tensor<'rt>) {
        match self.entries.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 = tensor,
            None => self.entries.push((String::from(name), tensor)),
        }
    }

    /// The tensor under `name`; a missing name is `NRT_FAILURE`.
    pub fn get(&self, name: &str) -> Result<&Tensor<'rt>> {
        self.find(name)
            .ok_or_else(|| err!(Failure, "Tensor \"{name}\" is not in the tensor set"))
    }

    pub(crate) fn find(&self, name: &str) -> Option<&Tensor<'rt>> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }

    /// The (name, tensor) entries, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor<'rt>)> {
        self.entries.iter().map(|(n, t)| (n.as_str(), t))
    }

    /// Number of tensors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
