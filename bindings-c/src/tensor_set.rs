//! Tensor sets: `nrt_allocate_tensor_set`, `nrt_destroy_tensor_set`, adding and getting tensors.

use std::collections::HashMap;
use std::ffi::{c_char, c_void};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use nrt_core::tensor::TensorSet;
use nrt_core::{Error, err};

use crate::tensor::{SET_KIND, new_handle, tensor_of};
use crate::{cstr, invalid, out, put, rt};

pub(crate) struct CSet {
    pub(crate) set: TensorSet<'static>,
    pub(crate) ids: Vec<(String, u64)>,
}

#[derive(Default)]
pub(crate) struct Tables {
    pub(crate) sets: HashMap<u64, Arc<spin::RwLock<CSet>>>,
}

pub(crate) fn tables() -> MutexGuard<'static, Tables> {
    static T: OnceLock<Mutex<Tables>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn set_of(p: *const c_void) -> Result<Arc<spin::RwLock<CSet>>, Error> {
    if p.is_null() {
        return Err(invalid("tensor set"));
    }
    tables().sets.get(&(p as u64)).cloned().ok_or_else(|| {
        let e = err!(
            InvalidHandle,
            "Invalid tensor set handle {p:p} (destroyed or never allocated)"
        );
        rt().log(nrt_core::Level::Error, format_args!("{}", e.message()));
        e
    })
}

/// `nrt_allocate_tensor_set`.
///
/// # Safety
///
/// `result` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut c_void) -> u32 {
    api!("nrt_allocate_tensor_set", {
        let slot = out(result, "tensor set")?;
        let h = new_handle(SET_KIND);
        tables().sets.insert(
            h,
            Arc::new(spin::RwLock::new(CSet {
                set: TensorSet::new(),
                ids: Vec::new(),
            })),
        );
        // SAFETY: checked non-NULL.
        unsafe { put(slot, h as *mut c_void) };
        Ok(())
    })
}

/// `nrt_destroy_tensor_set`: sets `*tensor_set` to NULL.
///
/// # Safety
///
/// `tensor_set` is NULL or points to a set pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_destroy_tensor_set(tensor_set: *mut *mut c_void) {
    api!(void "nrt_destroy_tensor_set", {
        let slot = out(tensor_set, "tensor set")?;
        // SAFETY: checked non-NULL.
        let h = unsafe { slot.read() };
        if !h.is_null() && tables().sets.remove(&(h as u64)).is_none() {
            rt().log(
                nrt_core::Level::Error,
                format_args!("Invalid tensor set handle {h:p}"),
            );
        }
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        Ok(())
    })
}

/// `nrt_add_tensor_to_tensor_set`: adds or replaces.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_add_tensor_to_tensor_set(
    tensor_set: *mut c_void,
    name: *const c_char,
    tensor: *mut c_void,
) -> u32 {
    api!("nrt_add_tensor_to_tensor_set", {
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(name) }) else {
            return Err(invalid("tensor name"));
        };
        let t = tensor_of(tensor)?;
        let set = set_of(tensor_set)?;
        let mut s = set.write();
        s.set.add(&name, t);
        match s.ids.iter_mut().find(|(n, _)| *n == *name) {
            Some(e) => e.1 = tensor as u64,
            None => s.ids.push((name.into_owned(), tensor as u64)),
        }
        Ok(())
    })
}

/// `nrt_get_tensor_from_tensor_set`: a missing name is `NRT_FAILURE`.
///
/// # Safety
///
/// `name` is NULL or NUL-terminated; `tensor` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_get_tensor_from_tensor_set(
    tensor_set: *mut c_void,
    name: *const c_char,
    tensor: *mut *mut c_void,
) -> u32 {
    api!("nrt_get_tensor_from_tensor_set", {
        let slot = out(tensor, "tensor")?;
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(name) }) else {
            return Err(invalid("tensor name"));
        };
        let set = set_of(tensor_set)?;
        let s = set.read();
        match s.ids.iter().find(|(n, _)| *n == *name) {
            Some((_, h)) => {
                // SAFETY: checked non-NULL.
                unsafe { put(slot, *h as *mut c_void) };
                Ok(())
            }
            None => Err(err!(Failure, "Tensor \"{name}\" is not in the tensor set")),
        }
    })
}

/// Runs `f` with the tensor sets behind two set handles (read-locked for the call).
pub(crate) fn with_sets<R>(
    input: *const c_void,
    output: *const c_void,
    f: impl FnOnce(&TensorSet<'static>, &TensorSet<'static>) -> Result<R, Error>,
) -> Result<R, Error> {
    let i = set_of(input)?;
    let o = set_of(output)?;
    let (ig, og) = (i.read(), o.read());
    f(&ig.set, &og.set)
}
