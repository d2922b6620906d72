//! Tensors: allocation, slices, attached buffers, reads, writes, copies and queries.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use nrt_core::tensor::{Tensor, TensorPlacement};
use nrt_core::{Error, err};

use crate::{cstr, invalid, out, put, rt};

#[derive(Default)]
pub(crate) struct Tables {
    pub(crate) tensors: HashMap<u64, Tensor<'static>>,
}

pub(crate) fn tables() -> MutexGuard<'static, Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

pub(crate) static NEXT_HANDLE: AtomicU64 = AtomicU64::new(1);

/// A fresh handle value: never 0, never reused, aligned like a pointer.
pub(crate) fn new_handle(kind: u64) -> u64 {
    (kind << 56) | (NEXT_HANDLE.fetch_add(1, Ordering::Relaxed) << 4)
}

pub(crate) const TENSOR_KIND: u64 = 0x01;
pub(crate) const SET_KIND: u64 = 0x02;

pub(crate) fn tensor_of(p: *const c_void) -> Result<Tensor<'static>, Error> {
    if p.is_null() {
        return Err(invalid("tensor"));
    }
    tables().tensors.get(&(p as u64)).cloned().ok_or_else(|| {
        let e = err!(
            InvalidHandle,
            "Invalid tensor handle {p:p} (freed or never allocated)"
        );
        rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        e
    })
}

pub(crate) fn new_tensor(t: Tensor<'static>, slot: *mut *mut c_void) -> Result<(), Error> {
    let h = new_handle(TENSOR_KIND);
    tables().tensors.insert(h, t);
    // SAFETY: callers check `slot` non-NULL.
    unsafe { put(slot, h as *mut c_void) };
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
    api!("nrt_tensor_allocate", {
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
        let slot = out(tensor, "tensor")?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        rt().guard()?;
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
        if buffer.is_null() {
            return Err(invalid("buffer"));
        }
        let mut t = tensor_of(tensor)?;
        // SAFETY: the caller's contract, passed on.
        unsafe { t.attach_buffer(buffer.cast(), size)? };
        tables().tensors.insert(tensor as u64, t);
        Ok(())
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
    api!("nrt_tensor_allocate_slice", {
        let slot = out(tensor_slice, "tensor slice")?;
        let src = tensor_of(source)?;
        // SAFETY: the caller's contract.
        let name = unsafe { cstr(name) }.unwrap_or_default();
        new_tensor(src.slice(offset as u64, size as u64, &name)?, slot)
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
        let slot = out(tensor, "tensor")?;
        // SAFETY: checked non-NULL; the caller's contract.
        let h = unsafe { slot.read() };
        if !h.is_null() && tables().tensors.remove(&(h as u64)).is_none() {
            rt().log(
                nrt_core::Level::Error,
                format_args!("Invalid tensor handle {h:p} (freed or never allocated)"),
            );
        }
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        Ok(())
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
    api!(
        "nrt_tensor_read",
        tensor_of(tensor)?.read(offset as u64, byte_slice_mut(buf, size)?)
    )
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
    api!(
        "nrt_tensor_write",
        tensor_of(tensor)?.write(offset as u64, byte_slice(buf, size)?)
    )
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
    api!("nrt_tensor_copy", {
        let (s, d) = (tensor_of(src)?, tensor_of(dst)?);
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
    api!(
        "nrt_tensor_memset",
        tensor_of(tensor)?.memset(offset, value as u8, size as u64)
    )
}

/// `nrt_tensor_get_size`: 0 for an invalid tensor.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_size(tensor: *const c_void) -> usize {
    api!(value "nrt_tensor_get_size", 0, Ok(tensor_of(tensor)?.size() as usize))
}

/// `nrt_tensor_get_va`: NULL on failure.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_tensor_get_va(tensor: *const c_void) -> *mut c_void {
    api!(value "nrt_tensor_get_va", std::ptr::null_mut(), Ok(tensor_of(tensor)?.va().unwrap_or(0) as *mut c_void))
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
    api!("nrt_tensor_read_batch", batches(b.cast(), n, false))
}

/// `nrt_tensor_write_batch`.
///
/// # Safety
///
/// As [`nrt_tensor_read_batch`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_tensor_write_batch(b: *const c_void, n: u64, _unsafe: bool) -> u32 {
    api!("nrt_tensor_write_batch", batches(b.cast(), n, true))
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
        let p = out(info.cast::<u64>(), "allocation info")?;
        let t = tensor_of(tensor)?;
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
