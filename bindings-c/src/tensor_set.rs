//! Tensor sets: `nrt_allocate_tensor_set`, `nrt_destroy_tensor_set`, adding and getting tensors.
//!
//! # Reading a set costs no read-modify-write
//!
//! An execution reads its two sets; a set changes only when the application adds a tensor. So a
//! set's contents are immutable **versions**, each a value of a second registry ([`versions`]),
//! and the set holds the handle of its current one. A reader resolves the set, loads that
//! handle and resolves the version: registry resolutions, which count the reference in the
//! thread's own reader row (a plain load and store) — no lock word is written, as a read lock
//! would. A writer (serialised per set by a mutex readers never touch) copies the current
//! version, changes the copy, registers it, publishes its handle and then erases the old
//! version, waiting for the readers that still hold it (the registry's drain): a reader that
//! loaded the old handle just before the switch misses it and loads the new one. Adding a
//! tensor therefore copies the set (its names and tensor references) and runs the registry's
//! drain barrier: it costs microseconds where an execution saves a few nanoseconds, the trade
//! an application that builds its sets once and executes many times wants.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use nrt_core::registry::{Handle, ReaderId, Ref, Registry};
use nrt_core::tensor::TensorSet;
use nrt_core::{Error, err};

use crate::handles::Handles;
use crate::tensor::tensor_of;
use crate::{cstr, invalid, out, put, rt};

/// One version of a set's contents: the tensors (each holding its storage) and the C handle
/// each was added under (what `nrt_get_tensor_from_tensor_set` returns).
#[derive(Clone, Default)]
struct Contents {
    set: TensorSet<'static>,
    ids: Vec<(String, usize)>,
}

/// A tensor set behind a C handle.
pub(crate) struct CSet {
    /// The current version ([`Handle::to_raw`] of a [`versions`] value).
    current: AtomicU64,
    /// Serialises writers; readers never take it.
    writer: Mutex<()>,
}

impl CSet {
    /// A set whose current version is `contents`.
    fn new(contents: Contents) -> Result<Self, Error> {
        Ok(Self {
            current: AtomicU64::new(register(contents)?.to_raw()),
            writer: Mutex::new(()),
        })
    }

    /// The current version, referenced for as long as the result lives.
    #[inline]
    fn contents(&self, reader: ReaderId) -> Ref<'static, Contents> {
        loop {
            let h = Handle::from_raw(self.current.load(Ordering::Acquire));
            if let Some(r) = versions().resolve(h, reader) {
                return r;
            }
            // A writer erased that version after publishing its successor: load again.
            std::hint::spin_loop();
        }
    }

    /// Replaces the contents with `f` applied to a copy of them (see the module documentation).
    fn update<R>(&self, f: impl FnOnce(&mut Contents) -> R) -> Result<R, Error> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.contents(nrt_host::reader_id());
        let mut next = (*old).clone();
        let r = f(&mut next);
        self.current
            .store(register(next)?.to_raw(), Ordering::Release);
        retire(old);
        Ok(r)
    }
}

impl Drop for CSet {
    /// Frees the current version. The set was removed from its registry and drained, so no
    /// reader holds a version of it (readers resolve the set first and hold it throughout).
    fn drop(&mut self) {
        let h = Handle::from_raw(*self.current.get_mut());
        if let Some(r) = versions().resolve(h, nrt_host::reader_id()) {
            retire(r);
        }
    }
}

/// Tensor sets that can exist at once.
const MAX_SETS: u32 = 1 << 14;

fn sets() -> &'static Handles<CSet> {
    static S: OnceLock<Handles<CSet>> = OnceLock::new();
    S.get_or_init(|| Handles::new(MAX_SETS, 2, "tensor set"))
}

/// The versions of every set's contents: one per set, plus one per update in progress (writers
/// of one set are serialised, and each retires the version it replaced before it returns).
fn versions() -> &'static Registry<Contents> {
    static V: OnceLock<Registry<Contents>> = OnceLock::new();
    V.get_or_init(|| Registry::with_heavy_barrier(2 * MAX_SETS, nrt_host::heavy_barrier()))
}

fn register(contents: Contents) -> Result<Handle, Error> {
    versions().insert(contents).map_err(|_| {
        err!(
            Resource,
            "Too many tensor sets: no room for a set's contents"
        )
    })
}

/// Erases a version, waits until no reader holds it, and frees it.
fn retire(version: Ref<'static, Contents>) {
    // Only the set's writer (under its mutex) or its last owner erases a version, so the
    // erase cannot lose a race; were it to, the version would stay registered, not be freed
    // under a reader.
    if let Ok(erased) = version.erase() {
        drop(erased.wait(|_| std::thread::yield_now()).take());
    }
}

fn set_of(p: *const c_void) -> Result<Ref<'static, CSet>, Error> {
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
        let h = sets().insert(CSet::new(Contents::default())?)?;
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
        set.update(|s| {
            s.set.add(&name, t);
            match s.ids.iter_mut().find(|(n, _)| *n == *name) {
                Some(e) => e.1 = tensor as usize,
                None => s.ids.push((name.into_owned(), tensor as usize)),
            }
        })
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
        let s = set.contents(nrt_host::reader_id());
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

/// Runs `f` with the current contents of the tensor sets behind two set handles (referenced
/// for the call; see the module documentation).
#[inline]
pub(crate) fn with_sets<R>(
    input: *const c_void,
    output: *const c_void,
    f: impl FnOnce(&TensorSet<'static>, &TensorSet<'static>) -> Result<R, Error>,
) -> Result<R, Error> {
    let reader = nrt_host::reader_id();
    // Resolve without building an error; on a miss, `set_of` says why.
    let i = match sets().try_resolve_as(input, reader) {
        Some(r) => r,
        None => set_of(input)?,
    };
    let o = match sets().try_resolve_as(output, reader) {
        Some(r) => r,
        None => set_of(output)?,
    };
    let (ic, oc) = (i.contents(reader), o.contents(reader));
    f(&ic.set, &oc.set)
}
