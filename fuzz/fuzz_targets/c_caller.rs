//! What the C-caller targets (`capi`, `capi_ext`) share: handle selectors, the status check,
//! `nrt_init` with the implicit-async variable, and the model's own tensor sets built as a C
//! program builds them. Included by each target with `#[path]` (not a target itself).

use std::ffi::{c_char, c_void};
use std::ptr::null_mut;

use arbitrary::Arbitrary;
use nrt::*;

/// Which handle of a kind an operation passes.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Sel {
    /// The n-th object of its kind ever returned (possibly freed: stale).
    Issued(u8),
    Null,
    /// Any value: never dereferenced by the library.
    Forged(u64),
}

pub fn pick(list: &[*mut c_void], s: Sel) -> *mut c_void {
    match s {
        Sel::Issued(i) if !list.is_empty() => list[usize::from(i) % list.len()],
        Sel::Issued(_) | Sel::Null => null_mut(),
        Sel::Forged(v) => v as usize as *mut c_void,
    }
}

/// Every status the library returns is a defined `NRT_STATUS` code.
pub fn status(code: u32) -> u32 {
    assert!(
        nrt_core::NrtStatus::ALL.iter().any(|s| s.code() == code),
        "undefined status {code}"
    );
    code
}

/// `nrt_init` with `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` unset, 1 or 2 (`inflight % 3`).
pub fn init(inflight: u8) {
    // Between a close and an init no library thread runs, so the environment can change.
    // SAFETY: called only while the library is closed (no worker threads).
    unsafe {
        if inflight.is_multiple_of(3) {
            std::env::remove_var("NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS");
        } else {
            std::env::set_var(
                "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS",
                (inflight % 3).to_string(),
            );
        }
    }
    // SAFETY: NULL version strings are allowed.
    status(unsafe { nrt_init(0, std::ptr::null(), std::ptr::null()) });
}

/// One element of `nrt_tensor_info_array_t` as `nrt/nrt.h` declares it (after the array's
/// 8-byte count). Only the name, usage and size are read; the rest is layout.
#[repr(C)]
#[allow(dead_code)]
struct TensorInfo {
    name: [c_char; 256],
    usage: u32,
    size: usize,
    dtype: u32,
    shape: *mut u32,
    ndim: u32,
}

/// After a load: the model's own input and output sets, built as a C program builds them from
/// `nrt_get_model_tensor_info` (a device tensor per tensor, named and sized as the model says,
/// at most `max_size` bytes, inputs written), pushed as the newest sets and tensors; returns
/// them (input, output), NULL where the library refused one. Without them an execute reaches
/// the device only after about nine ops that happen to agree on names and sizes, which the
/// seeds of the first campaigns never did (`fuzz/coverage.sh`: no execution reached the
/// simulator).
pub fn own_sets(
    tensors: &mut Vec<*mut c_void>,
    sets: &mut Vec<*mut c_void>,
    m: *mut c_void,
    max_size: usize,
) -> (*mut c_void, *mut c_void) {
    let mut arr = null_mut();
    // SAFETY: `arr` is writable.
    if status(unsafe { nrt_get_model_tensor_info(m, &mut arr) }) != 0 || arr.is_null() {
        return (null_mut(), null_mut());
    }
    // SAFETY: the array starts with its element count (u64), then that many elements.
    let count = unsafe { arr.cast::<u64>().read() } as usize;
    let mut own = [null_mut(); 2];
    for s in &mut own {
        // SAFETY: `s` is writable.
        if status(unsafe { nrt_allocate_tensor_set(s) }) == 0 {
            sets.push(*s);
        }
    }
    for i in 0..count {
        // SAFETY: element `i` of the array (8-byte count, then `count` elements).
        let info = unsafe {
            &*arr
                .cast::<u8>()
                .add(8 + i * size_of::<TensorInfo>())
                .cast::<TensorInfo>()
        };
        let size = info.size.min(max_size);
        let mut t = null_mut();
        // SAFETY: `info.name` is NUL-terminated (the library zero-fills the name field past
        // 255 bytes); `t` is writable.
        if status(unsafe { nrt_tensor_allocate(0, 0, size, info.name.as_ptr(), &mut t) }) != 0 {
            continue;
        }
        tensors.push(t);
        let set = own[usize::from(info.usage != 0)];
        if info.usage == 0 {
            let bytes: Vec<u8> = (0..size).map(|b| (b % 7) as u8).collect();
            // SAFETY: `bytes` is valid for `size` bytes during the call.
            status(unsafe { nrt_tensor_write(t, bytes.as_ptr().cast(), 0, size) });
        }
        // SAFETY: the name is a C string.
        status(unsafe { nrt_add_tensor_to_tensor_set(set, info.name.as_ptr(), t) });
    }
    // SAFETY: the array from `nrt_get_model_tensor_info`, freed once.
    status(unsafe { nrt_free_model_tensor_info(arr) });
    (own[0], own[1])
}
