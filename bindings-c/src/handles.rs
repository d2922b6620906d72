//! Opaque C handles for tensors, tensor sets and the option objects of profiling, tracing and
//! inspect: a generational registry per kind (the same lock-free [`Registry`] the runtime keeps
//! its models in), no process-wide lock.
//!
//! A handle is the registry handle packed into a pointer-sized value that no allocation has:
//! the kind in bits 60..64, the value's id (its generation, never reused) in bits 24..56, the
//! slot in bits 4..24 and zeros below. A pointer that does not decode, names another kind, or
//! whose id is not the slot's current one (freed, never allocated, forged) does not resolve: the
//! caller gets `NRT_INVALID_HANDLE` and one log line, and nothing is dereferenced.

use std::ffi::c_void;
use std::sync::{Mutex, OnceLock, PoisonError};

use nrt_core::registry::{Handle, InsertError, ReaderId, Ref, Registry};
use nrt_core::{Error, err};

/// Bits of the slot index in a packed handle (so a registry has at most 2^20 slots).
const SLOT_BITS: u32 = 20;

/// A registry of one kind of C object.
pub(crate) struct Handles<T> {
    registry: Registry<T>,
    kind: u64,
    /// What the object is called in messages ("tensor", "tensor set").
    what: &'static str,
}

impl<T> Handles<T> {
    /// A registry of `capacity` objects (at most 2^20) of kind `kind` (1 to 15).
    pub(crate) fn new(capacity: u32, kind: u64, what: &'static str) -> Self {
        Self {
            registry: Registry::with_heavy_barrier(
                capacity.min(1 << SLOT_BITS),
                nrt_host::heavy_barrier(),
            ),
            kind: kind & 0xf,
            what,
        }
    }

    fn pack(&self, h: Handle) -> *mut c_void {
        ((self.kind << 60) | (u64::from(h.id()) << 24) | (u64::from(h.slot()) << 4)) as *mut c_void
    }

    fn unpack(&self, p: *const c_void) -> Option<Handle> {
        let v = p as u64;
        if v >> 60 != self.kind || v & 0xf != 0 || (v >> 56) & 0xf != 0 {
            return None;
        }
        let slot = (v >> 4) & ((1 << SLOT_BITS) - 1);
        let id = (v >> 24) & 0xffff_ffff;
        Some(Handle::from_raw((id << 32) | slot))
    }

    fn miss(&self, p: *const c_void) -> Error {
        err!(
            InvalidHandle,
            "Invalid {} handle {p:p} (freed or never allocated)",
            self.what
        )
    }

    /// Registers `value` and returns its C handle; a full registry is `NRT_RESOURCE`.
    pub(crate) fn insert(&self, value: T) -> Result<*mut c_void, Error> {
        match self.registry.insert(value) {
            Ok(h) => Ok(self.pack(h)),
            Err(InsertError::Full) => Err(err!(
                Resource,
                "Too many {}s: all {} handles are in use",
                self.what,
                self.registry.capacity()
            )),
            Err(InsertError::IdsExhausted) => Err(err!(
                Resource,
                "Too many {}s: the handle ids of this process are used up",
                self.what
            )),
        }
    }

    /// Takes a reference to the object of `p`, held until the result drops. NULL is
    /// `NRT_INVALID`; a pointer that is not a live handle of this kind is `NRT_INVALID_HANDLE`.
    pub(crate) fn resolve(&self, p: *const c_void) -> Result<Ref<'_, T>, Error> {
        if p.is_null() {
            return Err(err!(Invalid, "{} is NULL", self.what));
        }
        self.unpack(p)
            .and_then(|h| self.registry.resolve(h, nrt_host::reader_id()))
            .ok_or_else(|| self.miss(p))
    }

    /// [`Handles::resolve`] when it succeeds, `None` otherwise, without building an error (the
    /// hot paths call this first and `resolve` only to report a failure).
    /// `reader` is the calling thread's reader row (`nrt_host::reader_id()`), looked up once
    /// by a call that resolves several handles.
    #[inline]
    pub(crate) fn try_resolve_as(&self, p: *const c_void, reader: ReaderId) -> Option<Ref<'_, T>> {
        if p.is_null() {
            return None;
        }
        self.registry.resolve(self.unpack(p)?, reader)
    }

    /// Unregisters the object of `p` and returns it once no call holds a reference to it.
    /// Errors as [`Handles::resolve`]; a concurrent removal of the same handle makes one of the
    /// two callers fail with `NRT_INVALID_HANDLE`.
    pub(crate) fn remove(&self, p: *const c_void) -> Result<T, Error> {
        let r = self.resolve(p)?;
        match r.erase() {
            Ok(erased) => Ok(erased.wait(|_| std::thread::yield_now()).take()),
            Err(_) => Err(self.miss(p)),
        }
    }
}

/// A registry of small C objects that calls change in place (trace and profiling options,
/// inspect configurations): a [`Handles`] of locked values, created on first use.
pub(crate) struct Objects<T> {
    cell: OnceLock<Handles<Mutex<T>>>,
    capacity: u32,
    kind: u64,
    what: &'static str,
}

impl<T> Objects<T> {
    /// `capacity` objects of kind `kind` (1 to 15, distinct from every other registry's),
    /// called `what` in messages.
    pub(crate) const fn new(capacity: u32, kind: u64, what: &'static str) -> Self {
        Self {
            cell: OnceLock::new(),
            capacity,
            kind,
            what,
        }
    }

    fn handles(&self) -> &Handles<Mutex<T>> {
        self.cell
            .get_or_init(|| Handles::new(self.capacity, self.kind, self.what))
    }

    /// Registers `value` and returns its C handle ([`Handles::insert`]).
    pub(crate) fn insert(&self, value: T) -> Result<*mut c_void, Error> {
        self.handles().insert(Mutex::new(value))
    }

    /// Runs `f` on the object of `p`, locked for the call. Errors as [`Handles::resolve`].
    pub(crate) fn with<R>(
        &self,
        p: *const c_void,
        f: impl FnOnce(&mut T) -> R,
    ) -> Result<R, Error> {
        let r = self.handles().resolve(p)?;
        let mut guard = r.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(f(&mut guard))
    }

    /// Unregisters the object of `p` and returns it ([`Handles::remove`]).
    pub(crate) fn remove(&self, p: *const c_void) -> Result<T, Error> {
        self.handles()
            .remove(p)
            .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nrt_core::NrtStatus;

    #[test]
    fn handles_resolve_until_removed_and_never_again() {
        let tensors: Handles<u64> = Handles::new(4, 1, "tensor");
        let sets: Handles<u64> = Handles::new(4, 2, "tensor set");
        let a = tensors.insert(7).unwrap_or(std::ptr::null_mut());
        let b = tensors.insert(8).unwrap_or(std::ptr::null_mut());
        // Bit 60 marks the kind; the low 4 bits are clear (pointer-aligned).
        assert_eq!(a as u64 >> 60, 1);
        assert_eq!(a as u64 & 0xf, 0);
        assert_eq!(tensors.resolve(a).map(|r| *r), Ok(7));
        assert_eq!(tensors.resolve(b).map(|r| *r), Ok(8));
        // Another kind's registry refuses it.
        let e = sets.resolve(a).err();
        assert_eq!(
            e.as_ref().map(Error::status),
            Some(NrtStatus::InvalidHandle)
        );
        assert_eq!(
            e.as_ref().map(Error::message),
            Some(format!("Invalid tensor set handle {a:p} (freed or never allocated)").as_str())
        );
        assert_eq!(tensors.remove(a), Ok(7));
        // Stale: the slot is reused by the next insert under a new id, yet `a` stays dead.
        let c = tensors.insert(9).unwrap_or(std::ptr::null_mut());
        assert_ne!(c, a);
        for p in [a, (a as u64 | 8) as *mut c_void, 0x1234560 as *mut c_void] {
            let e = tensors.resolve(p).err();
            assert_eq!(e.map(|e| e.status()), Some(NrtStatus::InvalidHandle));
        }
        assert_eq!(
            tensors.remove(a).map_err(|e| e.status()),
            Err(NrtStatus::InvalidHandle)
        );
        assert_eq!(
            tensors
                .resolve(std::ptr::null())
                .map(|r| *r)
                .map_err(|e| e.status()),
            Err(NrtStatus::Invalid)
        );
        assert_eq!(tensors.resolve(c).map(|r| *r), Ok(9));
    }

    #[test]
    fn a_full_registry_is_a_resource_error() {
        let h: Handles<u8> = Handles::new(2, 3, "tensor");
        assert!(h.insert(1).is_ok());
        assert!(h.insert(2).is_ok());
        let e = h.insert(3).err();
        assert_eq!(e.as_ref().map(Error::status), Some(NrtStatus::Resource));
        assert_eq!(
            e.as_ref().map(Error::message),
            Some("Too many tensors: all 2 handles are in use")
        );
    }
}
