//! Tensor sets: `nrt_allocate_tensor_set`, `nrt_destroy_tensor_set`, adding and getting tensors.

use std::ffi::{c_char, c_void};
use std::sync::OnceLock;

use nrt_core::registry::Ref;
use nrt_core::tensor::TensorSet;
use nrt_core::{Error, err};

use crate::handles::Handles;
use crate::tensor::tensor_of;
use crate::{cstr, invalid, out, put, rt};

/// A tensor set behind a C handle: the tensors (each holding its storage) and the C handle
/// each was added under (what `nrt_get_tensor_from_tensor_set` returns).
pub(crate) struct CSet {
    set: TensorSet<'static>,
    ids: Vec<(String, usize)>,
}

/// Tensor sets that can exist at once.
const MAX_SETS: u32 = 1 << 14;

fn sets() -> &'static Handles<spin::RwLock<CSet>> {
    static S: OnceLock<Handles<spin::RwLock<CSet>>> = OnceLock::new();
    S.get_or_init(|| Handles::new(MAX_SETS, 2, "tensor set"))
}

fn set_of(p: *const c_void) -> Result<Ref<'static, spin::RwLock<CSet>>, Error> {
    sets().resolve(p)
}

/// `nrt_allocate_tensor_set`.
///
/// # Safety
///
/// `result` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_allocate_tensor_set(result: *mut *mut c_void) -> u32 {
    api!("nrt_allocate_tensor_set", {
        rt().guard()?;
        let slot = out(result, "tensor set")?;
        let h = sets().insert(spin::RwLock::new(CSet {
            set: TensorSet::new(),
            ids: Vec::new(),
        }))?;
        // SAFETY: checked non-NULL.
        unsafe { put(slot, h) };
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
        rt().guard()?;
        let slot = out(tensor_set, "tensor set")?;
        // SAFETY: checked non-NULL.
        let h = unsafe { slot.read() };
        if h.is_null() {
            return Ok(());
        }
        let destroyed = sets().remove(h);
        // SAFETY: checked non-NULL.
        unsafe { put(slot, std::ptr::null_mut()) };
        // Dropping the set drops its references to the tensors' storage; a queued execution
        // holds its own.
        destroyed.map(drop)
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
        rt().guard()?;
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(name) }) else {
            return Err(invalid("tensor name"));
        };
        let t = tensor_of(tensor)?.get().clone();
        let set = set_of(tensor_set)?;
        let mut s = set.write();
        s.set.add(&name, t);
        match s.ids.iter_mut().find(|(n, _)| *n == *name) {
            Some(e) => e.1 = tensor as usize,
            None => s.ids.push((name.into_owned(), tensor as usize)),
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
        rt().guard()?;
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
#[inline]
pub(crate) fn with_sets<R>(
    input: *const c_void,
    output: *const c_void,
    f: impl FnOnce(&TensorSet<'static>, &TensorSet<'static>) -> Result<R, Error>,
) -> Result<R, Error> {
    // Resolve without building an error; on a miss, `set_of` says why.
    let i = match sets().try_resolve(input) {
        Some(r) => r,
        None => set_of(input)?,
    };
    let o = match sets().try_resolve(output) {
        Some(r) => r,
        None => set_of(output)?,
    };
    let (ig, og) = (i.read(), o.read());
    f(&ig.set, &og.set)
}
