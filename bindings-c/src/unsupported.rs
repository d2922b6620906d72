//! Functions nrt-rs does not support: each runs the lifecycle guard, then returns a status and
//! logs a line naming itself and why.

use std::ffi::{c_char, c_int, c_void};

use nrt_core::{Error, NrtStatus};

use crate::put;

macro_rules! unsupported {
    ($name:ident, $label:literal, $status:ident, $why:literal, ($($arg:ident: $ty:ty),*)) => {
        #[doc = concat!("`", $label, "`: not supported — ", $why, " Returns `", stringify!($status), "`.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: $ty),*) -> u32 {
            $(let _ = $arg;)*
            api!($label, {
                crate::rt().guard()?;
                let e = Error::new(NrtStatus::$status, format_args!("{} is not supported by nrt-rs: {}", $label, $why));
                Err(e)
            })
        }
    };
}

unsupported!(nrt_build_global_comm, "nrt_build_global_comm", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_cc_global_comm_init, "nrt_cc_global_comm_init", Failure, "collectives across devices are not implemented.", (vnc: u32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_trace_start, "nrt_trace_start", Failure, "tracing is not implemented.", (trace_mem: bool));
unsupported!(nrt_trace_stop, "nrt_trace_stop", Failure, "tracing is not implemented.", (filename: *const c_char));
unsupported!(nrt_get_hbm_mmap_va, "nrt_get_hbm_mmap_va", Invalid, "HBM cannot be mapped into the process.", (device_id: c_int, hbm_idx: c_int, addr: *mut *mut c_void, size: *mut usize));
unsupported!(nrt_get_dmabuf_fd, "nrt_get_dmabuf_fd", Failure, "dma-buf export is not implemented.", (va: u64, size: u64, fd: *mut c_int));
unsupported!(nrta_cc_prepare, "nrta_cc_prepare", Failure, "collectives are not implemented.", (comm: *mut c_void, input: *mut c_void, output: *mut c_void, dtype: u32, op: u32, cc_op: u32, ctx: *mut *mut c_void));
unsupported!(nrta_cc_schedule, "nrta_cc_schedule", Failure, "collectives are not implemented.", (ctx: *mut *mut c_void, queue: c_int, ret: *mut u32, seq: *mut u64));

unsupported!(nrt_host_device_id_rid_map_get, "nrt_host_device_id_rid_map_get", Failure, "host device id maps exist only with the Linux driver.", (count: *mut u32, map: *mut u32));
unsupported!(nrt_get_attached_efa_bdf, "nrt_get_attached_efa_bdf", Failure, "EFA devices are not modelled.", (va: *const c_void, bdf: *mut c_char, len: *mut usize));
unsupported!(nrt_set_pool_eng_ucode, "nrt_set_pool_eng_ucode", Failure, "microcode images are not used by nrt-rs.", (info: *const c_void));
unsupported!(nrt_memcpy_to_device, "nrt_memcpy_to_device", Failure, "raw device addresses are not exposed; use nrt_tensor_write.", (dest: *mut c_void, src: *const c_void, size: usize));
unsupported!(nrt_barrier, "nrt_barrier", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32));
unsupported!(nrt_all_gather, "nrt_all_gather", Failure, "collectives across devices are not implemented.", (vnc: i32, g_device_id: u32, g_device_count: u32, size: u32, input: *mut c_void, output: *mut c_void));

/// `nrt_get_libnccl_net`: there is no network plugin; returns NULL with `*err = 1` and a
/// message.
///
/// # Safety
///
/// `err` is NULL or writable; `err_msg` is NULL or writable for `err_msg_size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_libnccl_net(
    err: *mut c_int,
    err_msg: *mut c_char,
    err_msg_size: usize,
) -> *mut c_void {
    api!(value "nrt_get_libnccl_net", std::ptr::null_mut(), {
    let msg = b"nrt-rs has no libnccl-net plugin";
    if !err.is_null() {
        // SAFETY: checked non-NULL.
        unsafe { put(err, 1) };
    }
    if !err_msg.is_null() && err_msg_size > 0 {
        let n = msg.len().min(err_msg_size - 1);
        // SAFETY: writable for `err_msg_size` bytes; we write `n + 1 <= err_msg_size`.
        unsafe {
            std::ptr::copy_nonoverlapping(msg.as_ptr().cast::<c_char>(), err_msg, n);
            err_msg.add(n).write(0);
        }
    }
    Ok(std::ptr::null_mut())
    })
}
