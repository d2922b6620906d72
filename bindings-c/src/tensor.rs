//! Tensors: allocation, slices, attached buffers, reads, writes, copies and queries.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use nrt_core::registry::Ref;
use nrt_core::tensor::{Tensor, TensorPlacement};
use nrt_core::{Error, err};

use crate::handles::Handles;
use crate::{cstr, invalid, out, put, rt};

/// A tensor behind a C handle. The lock is the tensor's own (attaching a buffer changes its
/// size); every other operation takes it shared.
pub(crate) type CTensor = spin::RwLock<Tensor<'static>>;

/// Tensors that can exist at once.
const MAX_TENSORS: u32 = 1 << 16;

fn tensors() -> &'static Handles<CTensor> {
    static T: OnceLock<Handles<CTensor>> = OnceLock::new();
    T.get_or_init(|| Handles::new(MAX_TENSORS, 1, "tensor"))
}

/// A held reference to the tensor behind a C handle (released when dropped).
pub(crate) struct TensorRef(Ref<'static, CTensor>);

impl TensorRef {
    /// The tensor.
    pub(crate) fn get(&self) -> spin::RwLockReadGuard<'_, Tensor<'static>> {
        self.0.read()
    }
}

/// The tensor behind `p`: NULL is `NRT_INVALID`, anything but a live tensor handle is
/// `NRT_INVALID_HANDLE`.
pub(crate) fn tensor_of(p: *const c_void) -> Result<TensorRef, Error> {
    tensors().resolve(p).map(TensorRef)
}

fn new_tensor(t: Tensor<'static>, slot: *mut *mut c_void) -> Result<(), Error> {
    let h = tensors().insert(spin::RwLock::new(t))?;
    // SAFETY: callers check `slot` non-NULL.
    unsafe { put(slot, h) };
    Ok(())
}

/// `nrt_tensor_allocate`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate(
    placement: u32,
    vnc: c_int,
    size: usize,
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!(dump "nrt_tensor_allocate", {
        rt().guard()?;
        let slot = out(tensor, "tensor")?;
        let placement = TensorPlacement::from_raw(placement)
            .ok_or_else(|| err!(Invalid, "Invalid tensor placement {placement}"))?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        let t = rt().tensor_allocate(placement, vnc, size as u64, &name)?;
        new_tensor(t, slot)
    })
}

/// `nrt_tensor_allocate_empty`.
///
/// # Safety
///
/// As [`nrt_tensor_allocate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate_empty(
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!("nrt_tensor_allocate_empty", {
        rt().guard()?;
        let slot = out(tensor, "tensor")?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        new_tensor(Tensor::empty(&name), slot)
    })
}

/// `nrt_tensor_attach_buffer`.
///
/// # Safety
///
/// `buffer` is valid for `size` bytes until the tensor is freed or given another buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_attach_buffer(
    tensor: *mut c_void,
    buffer: *mut c_void,
    size: usize,
) -> u32 {
    api!("nrt_tensor_attach_buffer", {
        rt().guard()?;
        if buffer.is_null() {
            return Err(invalid("buffer"));
        }
        let t = tensor_of(tensor)?;
        let mut t = t.0.write();
        // SAFETY: the caller's contract, passed on.
        unsafe { t.attach_buffer(buffer.cast(), size) }
    })
}

/// `nrt_tensor_allocate_slice`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor_slice` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_allocate_slice(
    source: *const c_void,
    offset: usize,
    size: usize,
    name: *const c_char,
    tensor_slice: *mut *mut c_void,
) -> u32 {
    api!(dump "nrt_tensor_allocate_slice", {
        rt().guard()?;
        let slot = out(tensor_slice, "tensor slice")?;
        let src = tensor_of(source)?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        let t = src.get().slice(offset as u64, size as u64, &name)?;
        new_tensor(t, slot)
    })
}

/// `nrt_tensor_free`: frees the tensor and sets `*tensor` to NULL.
///
/// # Safety
///
/// `tensor` is NULL or points to a tensor pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_free(tensor: *mut *mut c_void) {
    api!(void "nrt_tensor_free", {
        rt().guard()?;
        let slot = out(tensor, "tensor")?;
        // SAFETY: checked non-NULL; the caller's contract.
        let h = unsafe { slot.read() };
        if h.is_null() {
            return Ok(());
        }
        let freed = tensors().remove(h);
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        // The storage is released when the last user lets go of it: tensor sets and queued
        // executions hold their own references.
        freed.map(drop)
    })
}

pub(crate) fn byte_slice<'a>(buf: *const c_void, size: usize) -> Result<&'a [u8], Error> {
    if size == 0 {
        return Ok(&[]);
    }
    if buf.is_null() {
        return Err(invalid("buffer"));
    }
    // SAFETY: the exported function's contract: `buf` readable for `size` bytes.
    Ok(unsafe { std::slice::from_raw_parts(buf.cast(), size) })
}

pub(crate) fn byte_slice_mut<'a>(buf: *mut c_void, size: usize) -> Result<&'a mut [u8], Error> {
    if size == 0 {
        return Ok(&mut []);
    }
    if buf.is_null() {
        return Err(invalid("buffer"));
    }
    // SAFETY: the exported function's contract: `buf` writable for `size` bytes.
    Ok(unsafe { std::slice::from_raw_parts_mut(buf.cast(), size) })
}

/// `nrt_tensor_read`.
///
/// # Safety
///
/// `buf` is writable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_read(
    tensor: *const c_void,
    buf: *mut c_void,
    offset: usize,
    size: usize,
) -> u32 {
    api!(dump "nrt_tensor_read", {
        rt().guard()?;
        tensor_of(tensor)?
            .get()
            .read(offset as u64, byte_slice_mut(buf, size)?)
    })
}

/// `nrt_tensor_write`.
///
/// # Safety
///
/// `buf` is readable for `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_write(
    tensor: *mut c_void,
    buf: *const c_void,
    offset: usize,
    size: usize,
) -> u32 {
    api!(dump "nrt_tensor_write", {
        rt().guard()?;
        tensor_of(tensor)?
            .get()
            .write(offset as u64, byte_slice(buf, size)?)
    })
}

/// `nrt_tensor_copy`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_copy(
    src: *const c_void,
    src_offset: usize,
    dst: *mut c_void,
    dst_offset: usize,
    size: usize,
) -> u32 {
    api!(dump "nrt_tensor_copy", {
        rt().guard()?;
        let (s, d) = (tensor_of(src)?, tensor_of(dst)?);
        let (s, d) = (s.get(), d.get());
        if let (Some((sb, _)), Some((db, _))) = (s.device_location(), d.device_location()) {
            if sb.device != db.device {
                return Err(err!(
                    Invalid,
                    "nrt_tensor_copy between device tensors of different devices"
                ));
            }
        }
        Tensor::copy(&s, src_offset as u64, &d, dst_offset as u64, size as u64)
    })
}

/// `nrt_tensor_memset`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_memset(
    tensor: *mut c_void,
    offset: u64,
    value: c_int,
    size: usize,
) -> u32 {
    api!(dump "nrt_tensor_memset", {
        rt().guard()?;
        tensor_of(tensor)?
            .get()
            .memset(offset, value as u8, size as u64)
    })
}

/// `nrt_tensor_get_size`: 0 for an invalid tensor.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_size(tensor: *const c_void) -> usize {
    api!(value "nrt_tensor_get_size", 0, {
        rt().guard()?;
        Ok(tensor_of(tensor)?.get().size() as usize)
    })
}

/// `nrt_tensor_get_va`: NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_va(tensor: *const c_void) -> *mut c_void {
    api!(value "nrt_tensor_get_va", std::ptr::null_mut(), {
        rt().guard()?;
        Ok(tensor_of(tensor)?.get().va().unwrap_or(0) as *mut c_void)
    })
}

#[repr(C)]
pub(crate) struct BatchOp {
    offset: u64,
    size: u64,
    buffer: *mut c_void,
}

#[repr(C)]
pub(crate) struct Batch {
    tensor: *const c_void,
    ops: *const BatchOp,
    num_ops: u32,
}

// The layouts of `nrt/nrt.h` and `ndl/neuron_driver_shared_tensor_batch_op.h` (LP64), also
// asserted on the C side by tests/c/header_truth.c.
const _: () = assert!(size_of::<BatchOp>() == 24 && size_of::<Batch>() == 24);

pub(crate) fn batches(batches: *const Batch, n: u64, write: bool) -> Result<(), Error> {
    if n == 0 {
        return Ok(());
    }
    if batches.is_null() {
        return Err(invalid("batches"));
    }
    for i in 0..n as usize {
        // SAFETY: the caller's contract: `n` batches.
        let b = unsafe { &*batches.add(i) };
        let t = tensor_of(b.tensor)?;
        let t = t.get();
        if b.num_ops > 0 && b.ops.is_null() {
            return Err(invalid("batch ops"));
        }
        for j in 0..b.num_ops as usize {
            // SAFETY: the caller's contract: `num_ops` ops.
            let op = unsafe { &*b.ops.add(j) };
            if write {
                t.write(op.offset, byte_slice(op.buffer, op.size as usize)?)?;
            } else {
                t.read(op.offset, byte_slice_mut(op.buffer, op.size as usize)?)?;
            }
        }
    }
    Ok(())
}

/// `nrt_tensor_read_batch`.
///
/// # Safety
///
/// `b` points to `n` batches whose ops and buffers are valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_read_batch(b: *const c_void, n: u64, _unsafe: bool) -> u32 {
    api!(dump "nrt_tensor_read_batch", {
        rt().guard()?;
        batches(b.cast(), n, false)
    })
}

/// `nrt_tensor_write_batch`.
///
/// # Safety
///
/// As [`nrt_tensor_read_batch`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_write_batch(b: *const c_void, n: u64, _unsafe: bool) -> u32 {
    api!(dump "nrt_tensor_write_batch", {
        rt().guard()?;
        batches(b.cast(), n, true)
    })
}

/// `nrt_tensor_get_device_allocation_info`.
///
/// # Safety
///
/// `info` is NULL or writable (24 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_get_device_allocation_info(
    tensor: *const c_void,
    info: *mut c_void,
) -> u32 {
    api!("nrt_tensor_get_device_allocation_info", {
        rt().guard()?;
        let p = out(info.cast::<u64>(), "allocation info")?;
        let t = tensor_of(tensor)?;
        let t = t.get();
        let Some((b, off)) = t.device_location() else {
            return Err(err!(
                Invalid,
                "Tensor \"{}\" is not in device memory",
                t.name()
            ));
        };
        // SAFETY: 24 writable bytes: physical address, size, hbm index.
        unsafe {
            p.write(b.addr + off);
            p.add(1).write(b.size);
            p.add(2).cast::<c_int>().write(0);
        }
        Ok(())
    })
}
