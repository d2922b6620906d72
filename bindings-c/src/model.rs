//! Models: `nrt_load`, `nrt_load_collectives`, `nrt_unload` and the model queries.

use std::ffi::{c_char, c_void};

use nrt_core::{Error, ModelHandle, err};

use crate::{invalid, out, put, rt};

pub(crate) fn model_of(p: *const c_void) -> Result<ModelHandle, Error> {
    if p.is_null() {
        return Err(invalid("model"));
    }
    Ok(ModelHandle::from_raw(p as u64))
}

/// Writes `v` through an out-pointer that was checked non-NULL.
/// The body of `nrt_load` (and of a single-device `nrt_load_collectives`).
///
/// # Safety
///
/// As [`nrt_load`].
unsafe fn load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    model: *mut *mut c_void,
) -> Result<(), Error> {
    rt().guard()?;
    let m = out(model, "model")?;
    if neff_bytes.is_null() {
        return Err(invalid("NEFF"));
    }
    // SAFETY: the caller's contract.
    let bytes = unsafe { std::slice::from_raw_parts(neff_bytes.cast::<u8>(), size) };
    let h = rt().load(bytes, vnc, vnc_count)?;
    // SAFETY: checked non-NULL.
    unsafe { put(m, h.to_raw() as *mut c_void) };
    Ok(())
}

/// `nrt_load`.
///
/// # Safety
///
/// `neff_bytes` is readable for `size` bytes; `model` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_load(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    model: *mut *mut c_void,
) -> u32 {
    // SAFETY: the caller's contract.
    api!(dump "nrt_load", unsafe {
        load(neff_bytes, size, vnc, vnc_count, model)
    })
}

/// `nrt_load_collectives`: single-device only.
///
/// # Safety
///
/// As [`nrt_load`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_load_collectives(
    neff_bytes: *const c_void,
    size: usize,
    vnc: i32,
    vnc_count: i32,
    _ctx_device_id: u32,
    ctx_device_count: u32,
    model: *mut *mut c_void,
) -> u32 {
    api!(dump "nrt_load_collectives", {
        if ctx_device_count > 1 {
            rt().guard()?;
            return Err(err!(
                Failure,
                "Multi-device collectives ({ctx_device_count} devices) are not supported by nrt-rs"
            ));
        }
        // SAFETY: the caller's contract, as `nrt_load`'s.
        unsafe { load(neff_bytes, size, vnc, vnc_count, model) }
    })
}

/// `nrt_unload`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_unload(model: *mut c_void) -> u32 {
    api!("nrt_unload", {
        rt().guard()?;
        rt().unload(model_of(model)?)
    })
}

/// What a model occupies: `(physical cores, logical cores, instances)`. A model is loaded once
/// (`vnc_count` is ignored, as libnrt 2.x does), on one logical core, and runs on each of that
/// core's physical cores. One resolution of the handle, no lock (the C hot path).
#[inline]
fn model_counts(model: *const c_void) -> Result<(u32, u32, u32), Error> {
    Ok((rt().model_core_count(model_of(model)?)?, 1, 1))
}

/// The physical core count of [`model_counts`] when the call succeeds, without building an
/// error (the fast path). An `Option<u32>` comes back in registers; a larger value would go
/// through memory written in pieces and read whole, which stalls store forwarding.
#[inline(always)]
fn try_model_core_count(model: *const c_void) -> Option<u32> {
    crate::rt_if_ready()?.model_core_count_if_live(ModelHandle::from_raw(model as u64))
}

macro_rules! model_count_fn {
    ($name:ident, $label:literal, $what:literal, $pick:expr) => {
        #[doc = concat!("`", $label, "`: the ", $what, " the model occupies.")]
        ///
        /// # Safety
        ///
        /// `count` is NULL or writable.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(model: *const c_void, count: *mut u32) -> u32 {
            // One guard and one resolution, nothing built on success; any failure is reported
            // by the full path below.
            // (A NULL model is handle 0, which no model has: it fails the lookup.)
            if !count.is_null() {
                if let Some(n) = crate::fast_path(|| try_model_core_count(model)) {
                    // SAFETY: checked non-NULL; the caller's contract.
                    unsafe { put(count, $pick((n, 1, 1))) };
                    return nrt_core::NrtStatus::Success.code();
                }
            }
            /// The full path: reports why the call fails (kept out of the hot function).
            #[cold]
            #[inline(never)]
            extern "C" fn full(model: *const c_void, count: *mut u32) -> u32 {
                api!($label, {
                    rt().guard()?;
                    let p = out(count, "count")?;
                    let c = model_counts(model)?;
                    // SAFETY: checked non-NULL.
                    unsafe { put(p, $pick(c)) };
                    Ok(())
                })
            }
            full(model, count)
        }
    };
}

type Counts = (u32, u32, u32);
model_count_fn!(
    nrt_get_model_nc_count,
    "nrt_get_model_nc_count",
    "physical Neuron Cores (the logical core size)",
    |c: Counts| c.0
);
model_count_fn!(
    nrt_get_model_vnc_count,
    "nrt_get_model_vnc_count",
    "logical Neuron Cores (1)",
    |c: Counts| c.1
);
model_count_fn!(
    nrt_get_model_instance_count,
    "nrt_get_model_instance_count",
    "instances (1: a model is loaded once)",
    |c: Counts| c.2
);

/// `nrt_get_model_info`: the model's (process-relative) logical core.
///
/// # Safety
///
/// `info` is NULL or writable for `size_in` bytes; `size_out` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_model_info(
    model: *const c_void,
    info: *mut c_void,
    size_in: usize,
    size_out: *mut usize,
) -> u32 {
    api!("nrt_get_model_info", {
        rt().guard()?;
        let p = out(info.cast::<u32>(), "model info")?;
        let vnc = rt().model_lnc(model_of(model)?)?;
        if size_in >= 4 {
            // SAFETY: at least 4 writable bytes; `nrt_model_info_t` is 4-byte aligned.
            unsafe { put(p, vnc) };
        }
        if !size_out.is_null() {
            // SAFETY: checked non-NULL.
            unsafe { put(size_out, size_in.min(4)) };
        }
        Ok(())
    })
}

/// `nrt_tensor_info_t` (296 bytes on LP64).
#[repr(C)]
pub(crate) struct TensorInfoC {
    name: [c_char; 256],
    usage: u32,
    size: usize,
    dtype: u32,
    shape: *mut u32,
    ndim: u32,
}

const _: () = assert!(size_of::<TensorInfoC>() == 296);

/// `nrt_get_model_tensor_info`: inputs by name, then outputs by name. Free the result with
/// `nrt_free_model_tensor_info`.
///
/// # Safety
///
/// `tensor_info` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_model_tensor_info(
    model: *mut c_void,
    tensor_info: *mut *mut c_void,
) -> u32 {
    api!("nrt_get_model_tensor_info", {
        rt().guard()?;
        let p = out(tensor_info, "tensor info")?;
        let infos = rt().model_tensor_info(model_of(model)?)?;
        let bytes = 8 + infos.len() * size_of::<TensorInfoC>();
        // SAFETY: plain allocation, checked below.
        let array = unsafe { libc::calloc(1, bytes) }.cast::<u8>();
        if array.is_null() {
            return Err(err!(Resource, "Failed to allocate the tensor info array"));
        }
        // SAFETY: `array` has `bytes` bytes; the count goes in the first 8.
        unsafe { array.cast::<u64>().write(infos.len() as u64) };
        for (i, (usage, t)) in infos.iter().enumerate() {
            let mut c = TensorInfoC {
                name: [0; 256],
                usage: *usage as u32,
                size: t.size as usize,
                dtype: t.dtype.code(),
                shape: std::ptr::null_mut(),
                ndim: t.ndim(),
            };
            for (d, s) in c.name.iter_mut().zip(t.name.as_bytes().iter().take(255)) {
                *d = *s as c_char;
            }
            if !t.shape.is_empty() {
                // SAFETY: plain allocation of `ndim` u32s, checked below.
                let shape = unsafe { libc::malloc(4 * t.shape.len()) }.cast::<u32>();
                if !shape.is_null() {
                    // SAFETY: `shape` holds `t.shape.len()` u32s.
                    unsafe {
                        std::ptr::copy_nonoverlapping(t.shape.as_ptr(), shape, t.shape.len())
                    };
                }
                c.shape = shape;
            }
            // SAFETY: element `i` lies inside the allocation (8 + i * 296 + 296 <= bytes); the
            // array starts 8-aligned (calloc) so every element is 8-aligned.
            unsafe {
                array
                    .add(8 + i * size_of::<TensorInfoC>())
                    .cast::<TensorInfoC>()
                    .write(c)
            };
        }
        // SAFETY: checked non-NULL.
        unsafe { put(p, array.cast()) };
        Ok(())
    })
}

/// `nrt_free_model_tensor_info`.
///
/// # Safety
///
/// `tensor_info` is NULL or was returned by `nrt_get_model_tensor_info` and not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_free_model_tensor_info(tensor_info: *mut c_void) -> u32 {
    api!("nrt_free_model_tensor_info", {
        rt().guard()?;
        let p = out(tensor_info.cast::<u8>(), "tensor info")?;
        // SAFETY: the caller's contract: an array from `nrt_get_model_tensor_info`.
        let n = unsafe { p.cast::<u64>().read() } as usize;
        for i in 0..n {
            // SAFETY: as in `nrt_get_model_tensor_info`.
            let info = unsafe {
                p.add(8 + i * size_of::<TensorInfoC>())
                    .cast::<TensorInfoC>()
            };
            // SAFETY: each shape came from malloc (or is NULL).
            unsafe { libc::free((*info).shape.cast()) };
        }
        // SAFETY: the array came from calloc.
        unsafe { libc::free(p.cast()) };
        Ok(())
    })
}

const _: () = assert!(std::mem::offset_of!(TensorInfoC, usage) == 256);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, size) == 264);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, dtype) == 272);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, shape) == 280);
const _: () = assert!(std::mem::offset_of!(TensorInfoC, ndim) == 288);
