//! Tensor sets: `nrt_allocate_tensor_set`, `nrt_destroy_tensor_set`, adding and getting tensors.
//!
//! # Reading a set writes nothing shared
//!
//! An execution reads its two sets; a set changes only when the application adds a tensor. A
//! reader takes the set's registry reference (counted in the thread's own reader row: a plain
//! load and store) and then checks the set's `writing` flag; if it is clear, the contents stay
//! unchanged for as long as the reference is held. A writer (serialised per set by a mutex
//! readers never touch) raises the flag and waits until its own reference is the only one left;
//! it then changes the contents in place and lowers the flag. A reader that finds the flag
//! raised drops its reference and tries again.
//!
//! Why it is sound: the same store-buffering pattern as the registry's erase and drain. The
//! reader increments its counter, passes the registry's fence (or, with the process-wide
//! barrier, a compiler fence) and then loads the flag; the writer stores the flag and then sums
//! the counters behind the registry's fence (or barrier), in [`Ref::references`]. So either the
//! reader sees the flag and backs off, or the writer sees the reader's reference and waits for
//! its release (a Release store that the sum's Acquire loads observe). No reader lock word is
//! written, as a read lock would; a write costs the barrier (microseconds), the trade an
//! application that builds its sets once and executes many times wants.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void};
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, TryLockError};

use nrt_core::registry::{ReaderId, Ref};
use nrt_core::tensor::TensorSet;
use nrt_core::{Error, err};

use crate::handles::Handles;
use crate::tensor::tensor_of;
use crate::{cstr, invalid, out, put, rt};

/// A set's contents: the tensors (each holding its storage) and the C handle each was added
/// under (what `nrt_get_tensor_from_tensor_set` returns).
#[derive(Default)]
struct Contents {
    set: TensorSet<'static>,
    ids: Vec<(String, usize)>,
}

/// A tensor set behind a C handle.
pub(crate) struct CSet {
    /// Raised by a writer for the time it changes `contents` (see the module documentation).
    writing: AtomicBool,
    /// Serialises writers; readers never take it.
    writer: Mutex<()>,
    contents: UnsafeCell<Contents>,
}

// SAFETY: `contents` is read only through a `SetRead` (a reference taken while `writing` was
// clear, which keeps any writer waiting) and written only by the writer that raised `writing`
// and saw no other reference (module documentation).
unsafe impl Sync for CSet {}

/// A set referenced for reading: its contents cannot change while this lives.
struct SetRead(Ref<'static, CSet>);

impl Deref for SetRead {
    type Target = Contents;
    fn deref(&self) -> &Contents {
        // SAFETY: the reference was taken while no writer was active, and a writer waits for
        // every reference (module documentation).
        unsafe { &*self.0.contents.get() }
    }
}

/// Tensor sets that can exist at once.
const MAX_SETS: u32 = 1 << 14;

fn sets() -> &'static Handles<CSet> {
    static S: OnceLock<Handles<CSet>> = OnceLock::new();
    S.get_or_init(|| Handles::new(MAX_SETS, 2, "tensor set"))
}

/// The set of `p`, for reading: `NRT_INVALID` for NULL, `NRT_INVALID_HANDLE` (logged by the
/// caller) for anything that is not a live set.
#[inline]
fn read_set(p: *const c_void, reader: ReaderId) -> Result<SetRead, Error> {
    loop {
        let r = match sets().try_resolve_as(p, reader) {
            Some(r) => r,
            // Not live now: `resolve` says why (or, if it became live meanwhile, go on).
            None => sets().resolve(p)?,
        };
        if !r.writing.load(Ordering::Acquire) {
            return Ok(SetRead(r));
        }
        // A writer is active: let it finish.
        drop(r);
        std::thread::yield_now();
    }
}

/// Changes the contents of the set of `p` with `f` (see the module documentation).
fn update<R>(p: *const c_void, f: impl FnOnce(&mut Contents) -> R) -> Result<R, Error> {
    loop {
        let r = sets().resolve(p)?;
        // A writer blocked on the mutex while holding a reference would keep the active writer
        // waiting for it: so wait without a reference.
        if let Some(_guard) = match r.writer.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        } {
            r.writing.store(true, Ordering::SeqCst);
            // Our own reference is the one left when every reader has gone.
            while r.references() > 1 {
                std::thread::yield_now();
            }
            // SAFETY: `writing` is raised and no other reference is held: no reader sees the
            // contents until it is lowered (module documentation), and other writers wait on
            // the mutex we hold.
            let out = f(unsafe { &mut *r.contents.get() });
            r.writing.store(false, Ordering::Release);
            return Ok(out);
        }
        drop(r);
        std::thread::yield_now();
    }
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
        let h = sets().insert(CSet {
            writing: AtomicBool::new(false),
            writer: Mutex::new(()),
            contents: UnsafeCell::new(Contents::default()),
        })?;
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
        update(tensor_set, |s| {
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
        let s = read_set(tensor_set, nrt_host::reader_id())?;
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
    let (i, o) = (read_set(input, reader)?, read_set(output, reader)?);
    f(&i.set, &o.set)
}
