//! Every synchronisation primitive the lock-free parts of the crate use, imported from here so
//! that `--cfg loom` swaps in loom's model-checked versions (the tokio habit).

#[cfg(loom)]
pub(crate) use core::sync::atomic::compiler_fence;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering, fence,
};

#[cfg(all(not(loom), target_has_atomic = "64"))]
pub(crate) use core::sync::atomic::AtomicU64;
#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicUsize, Ordering, compiler_fence, fence,
};
#[cfg(all(loom, target_has_atomic = "64"))]
pub(crate) use loom::sync::atomic::AtomicU64;

/// Tells the scheduler (or loom) that this thread is waiting for another one.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// An `UnsafeCell` with loom's closure-based API, so accesses are tracked under loom.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(loom::cell::UnsafeCell<T>);

#[cfg(loom)]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(loom::cell::UnsafeCell::new(v))
    }
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        self.0.with(f)
    }
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        self.0.with_mut(f)
    }
}

/// An `UnsafeCell` with loom's closure-based API, so accesses are tracked under loom.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        Self(core::cell::UnsafeCell::new(v))
    }
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The lock of the lifecycle, the async queues and the unstage retry list: `spin`'s mutex, or
/// under loom a wrapper of loom's (same `lock()` signature, poisoning ignored: a panicking
/// model-check thread fails the test anyway).
#[cfg(not(loom))]
pub(crate) type Mutex<T> = spin::Mutex<T>;

/// The lock of the lifecycle, the async queues and the unstage retry list: `spin`'s mutex, or
/// under loom a wrapper of loom's (same `lock()` signature, poisoning ignored: a panicking
/// model-check thread fails the test anyway).
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(v: T) -> Self {
        Self(loom::sync::Mutex::new(v))
    }
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
