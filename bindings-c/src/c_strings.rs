//! `malloc`ed arrays of `malloc`ed C strings, handed to C callers that free them with the
//! library's matching free function (system trace event types, inspect activity names).

use std::ffi::c_char;

use nrt_core::{Error, err};

use crate::ffi_util::logged;
use crate::put;

/// A `malloc`ed array of `malloc`ed copies of `names`, as `*out` / `*count`.
///
/// # Safety
///
/// `out` and `count` were checked non-NULL and are writable.
pub(crate) unsafe fn c_string_array(
    names: &[&str],
    out: *mut *mut *const c_char,
    count: *mut usize,
) -> Result<(), Error> {
    let n = names.len().max(1);
    // SAFETY: plain allocation; checked below.
    let arr = unsafe { libc::calloc(n, size_of::<*const c_char>()) }.cast::<*const c_char>();
    if arr.is_null() {
        return Err(logged(err!(Resource, "Failed to allocate the name array")));
    }
    for (i, name) in names.iter().enumerate() {
        // SAFETY: a fresh allocation of len + 1 bytes, filled below.
        let s = unsafe { libc::malloc(name.len() + 1) }.cast::<u8>();
        if s.is_null() {
            // SAFETY: the first `i` entries and the array came from malloc / calloc.
            unsafe { free_c_string_array(arr, i) };
            return Err(logged(err!(Resource, "Failed to allocate a name")));
        }
        // SAFETY: `s` has room for the bytes and the NUL; `arr` has `n > i` entries.
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), s, name.len());
            s.add(name.len()).write(0);
            arr.add(i).write(s.cast());
        }
    }
    // SAFETY: the caller's contract.
    unsafe {
        put(out, arr);
        put(count, names.len());
    }
    Ok(())
}

/// Frees what [`c_string_array`] allocated.
///
/// # Safety
///
/// `arr` is NULL or came from [`c_string_array`] with at least `count` names.
pub(crate) unsafe fn free_c_string_array(arr: *mut *const c_char, count: usize) {
    if arr.is_null() {
        return;
    }
    for i in 0..count {
        // SAFETY: the caller's contract: entry `i` came from malloc.
        unsafe { libc::free((*arr.add(i)).cast_mut().cast()) };
    }
    // SAFETY: the array came from calloc.
    unsafe { libc::free(arr.cast()) };
}
