//! Execution: `nrt_execute`, `nrt_execute_repeat` and the implicit-async callback and drain.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, PoisonError};

use nrt_core::NrtStatus;

use crate::model::model_of;
use crate::tensor_set::with_sets;
use crate::{invalid, rt};

/// `nrt_execute`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_execute(
    model: *mut c_void,
    input_set: *const c_void,
    output_set: *mut c_void,
) -> u32 {
    api!(dump "nrt_execute", {
        rt().guard()?;
        let h = model_of(model)?;
        with_sets(input_set, output_set, |i, o| rt().execute(h, i, o))
    })
}

/// `nrt_execute_repeat`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_execute_repeat(
    model: *mut c_void,
    input_set: *const c_void,
    output_set: *mut c_void,
    repeat_count: c_int,
) -> u32 {
    api!(dump "nrt_execute_repeat", {
        rt().guard()?;
        let h = model_of(model)?;
        with_sets(input_set, output_set, |i, o| {
            rt().execute_repeat(h, i, o, repeat_count)
        })
    })
}

type AsyncCallback = unsafe extern "C" fn(*mut c_void, u32, u32, u64, u32);

pub(crate) static CALLBACK: Mutex<Option<(AsyncCallback, usize)>> = Mutex::new(None);

pub(crate) fn forward_callback(
    _params: usize,
    model_id: u32,
    vnc: u32,
    job: u64,
    status: NrtStatus,
) {
    let cb = *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((f, params)) = cb {
        // SAFETY: a callback the application registered, called with the parameters it gave.
        unsafe { f(params as *mut c_void, model_id, vnc, job, status.code()) };
    }
}

/// `nrt_register_async_exec_callback`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_register_async_exec_callback(
    callback: Option<AsyncCallback>,
    params: *mut c_void,
) -> u32 {
    api!("nrt_register_async_exec_callback", {
        rt().guard()?;
        let Some(cb) = callback else {
            return Err(invalid("callback"));
        };
        *CALLBACK.lock().unwrap_or_else(PoisonError::into_inner) = Some((cb, params as usize));
        rt().register_async_exec_callback(forward_callback, 0)
    })
}

/// `nrt_async_drain_queued_execs`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_async_drain_queued_execs(vnc: i32) -> u32 {
    api!("nrt_async_drain_queued_execs", {
        rt().guard()?;
        rt().async_drain(vnc)
    })
}
