//! The explicit async API (`NRT_3.0.0`): `nrta_execute_schedule`, `nrta_is_completed`,
//! `nrta_get_sequence` and the tensor operations.

use std::ffi::{c_int, c_void};

use nrt_core::tensor::Tensor;
use nrt_core::{CompletionHook, Error, NrtStatus, Xu, err};

use crate::model::model_of;
use crate::tensor::{byte_slice, byte_slice_mut, tensor_of};
use crate::tensor_set::with_sets;
use crate::{out, put, rt};

pub(crate) fn write_status(ctx: usize, _seq: u64, status: NrtStatus) {
    if ctx != 0 {
        // SAFETY: `ctx` is the caller's `NRT_STATUS *ret`, which it keeps alive until
        // completion (the API's contract).
        unsafe { (ctx as *mut u32).write(status.code()) };
    }
}

/// `nrta_execute_schedule` (v3): `*ret` is written at completion.
///
/// # Safety
///
/// `ret` is NULL or stays writable until the request completes; `seq` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_execute_schedule(
    model: *mut c_void,
    input: *const c_void,
    output: *mut c_void,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(dump "nrta_execute_schedule", {
        rt().guard()?;
        let s = out(seq, "sequence")?;
        let h = model_of(model)?;
        let hook = CompletionHook {
            call: write_status,
            ctx: ret as usize,
        };
        let id = with_sets(input, output, |i, o| {
            rt().execute_schedule(h, i, o, queue, Some(hook))
        })?;
        // SAFETY: checked non-NULL.
        unsafe { put(s, id) };
        Ok(())
    })
}

/// `nrta_is_completed`.
///
/// # Safety
///
/// `is_completed` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_is_completed(seq: u64, is_completed: *mut bool) -> u32 {
    api!("nrta_is_completed", {
        rt().guard()?;
        let p = out(is_completed, "is_completed")?;
        let done = rt().is_completed(seq)?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, done) };
        Ok(())
    })
}

/// `nrta_get_sequence`: the last completed sequence id of an execution unit's queue.
///
/// # Safety
///
/// `seq` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_get_sequence(lnc: u32, xu: u32, queue: c_int, seq: *mut u64) -> u32 {
    api!("nrta_get_sequence", {
        rt().guard()?;
        let p = out(seq, "sequence")?;
        let xu = match xu {
            0 => Xu::TensorOp,
            1 => Xu::Compute,
            2 => Xu::Collectives,
            other => return Err(err!(Invalid, "Invalid execution unit {other}")),
        };
        let s = rt().last_completed_sequence(lnc, xu, queue)?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, s) };
        Ok(())
    })
}

/// Runs a tensor operation at once on the tensor-op unit of core 0, writing `*ret` (completion
/// is immediate) and the sequence id.
pub(crate) fn tensor_op(
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
    op: impl FnOnce() -> Result<(), Error>,
) -> Result<(), Error> {
    rt().guard()?;
    let s = out(seq, "sequence")?;
    if queue != 0 {
        return Err(err!(
            Invalid,
            "The tensor-op execution unit has only queue 0, not {queue}"
        ));
    }
    // The operation's failure is reported through `*ret`, and logged here.
    let status = match op() {
        Ok(()) => NrtStatus::Success,
        Err(e) => crate::log_failure(e).status(),
    };
    let id = rt().record_completed(0, Xu::TensorOp)?;
    write_status(ret as usize, id, status);
    // SAFETY: checked non-NULL.
    unsafe { put(s, id) };
    Ok(())
}

/// `nrta_tensor_write` (v3).
///
/// # Safety
///
/// `buf` is readable for `size` bytes; `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_write(
    tensor: *mut c_void,
    buf: *const c_void,
    offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        dump "nrta_tensor_write",
        tensor_op(queue, ret, seq, || tensor_of(tensor)?
            .get()
            .write(offset, byte_slice(buf, size as usize)?))
    )
}

/// `nrta_tensor_read` (v3).
///
/// # Safety
///
/// `buf` is writable for `size` bytes; `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_read(
    buf: *mut c_void,
    tensor: *mut c_void,
    offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        dump "nrta_tensor_read",
        tensor_op(queue, ret, seq, || tensor_of(tensor)?
            .get()
            .read(offset, byte_slice_mut(buf, size as usize)?))
    )
}

/// `nrta_tensor_copy` (v3).
///
/// # Safety
///
/// `ret` and `seq` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrta_tensor_copy(
    src: *mut c_void,
    src_offset: u64,
    dst: *mut c_void,
    dst_offset: u64,
    size: u64,
    queue: c_int,
    ret: *mut u32,
    seq: *mut u64,
) -> u32 {
    api!(
        dump "nrta_tensor_copy",
        tensor_op(queue, ret, seq, || Tensor::copy(
            &tensor_of(src)?.get(),
            src_offset,
            &tensor_of(dst)?.get(),
            dst_offset,
            size
        ))
    )
}
