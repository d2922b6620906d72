//! Opaque objects handed to C callers as handle values (so a freed or forged pointer is refused,
//! never dereferenced), the log-and-return helper of API misuse, and `malloc`ed string arrays —
//! shared by the profiling and tracing functions (`sys_trace.rs`, `profile.rs`, `inspect.rs`).

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nrt_core::{Error, err};

use crate::{invalid, put, rt};

/// Objects the C caller holds as opaque pointers: kept here under a handle value, so a freed or
/// forged pointer is refused (`NRT_INVALID` and a log line), never dereferenced.
pub(crate) struct Handles<T> {
    kind: usize,
    next: AtomicUsize,
    map: Mutex<BTreeMap<usize, T>>,
}

impl<T> Handles<T> {
    pub(crate) const fn new(kind: usize) -> Self {
        Self {
            kind,
            next: AtomicUsize::new(1),
            map: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, T>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `v`; returns its handle.
    pub(crate) fn insert(&self, v: T) -> *mut c_void {
        let h = (self.kind << 48) | (self.next.fetch_add(1, Ordering::Relaxed) << 4);
        self.lock().insert(h, v);
        h as *mut c_void
    }

    /// Runs `f` on the object `p` names.
    pub(crate) fn with<R>(
        &self,
        p: *const c_void,
        what: &str,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, Error> {
        if p.is_null() {
            return Err(invalid(what));
        }
        match self.lock().get_mut(&(p as usize)) {
            Some(v) => Ok(f(v)),
            None => Err(stale(what, p)),
        }
    }

    /// Forgets the object `p` names, returning it.
    pub(crate) fn remove(&self, p: *const c_void, what: &str) -> Result<T, Error> {
        if p.is_null() {
            return Err(invalid(what));
        }
        self.lock()
            .remove(&(p as usize))
            .ok_or_else(|| stale(what, p))
    }
}

fn stale(what: &str, p: *const c_void) -> Error {
    let e = err!(Invalid, "Invalid {what} {p:p} (freed or never allocated)");
    rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
    e
}

/// Logs `e` (an API misuse found here) and returns it.
pub(crate) fn logged(e: Error) -> Error {
    rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
    e
}

// ---- string arrays -----------------------------------------------------------------------------

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
