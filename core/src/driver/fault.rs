//! A driver wrapper that injects failures into chosen calls and counts every call.
//!
//! Wrap any backend, arm faults by [`DriverCall`], run the runtime, then check what it called:
//!
//! ```
//! use nrt_core::driver::{DriverCall, FaultInjector};
//! # use nrt_core::driver::*;
//! # #[derive(Debug)] struct E;
//! # impl core::fmt::Display for E { fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { f.write_str("e") } }
//! # impl DriverError for E { fn kind(&self) -> ErrorKind { ErrorKind::Other } fn unsupported(_: &'static str) -> Self { E } }
//! # struct D;
//! # impl Driver for D { type Error = E;
//! #   fn is_funtime(&self) -> bool { true }
//! #   fn discover(&self) -> Result<DeviceInfo, E> { Err(E) }
//! # }
//! let driver = FaultInjector::new(D);
//! driver.fail_next(DriverCall::Discover);
//! assert!(driver.discover().is_err());
//! assert_eq!(driver.calls(DriverCall::Discover), 1);
//! ```

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

use super::{Driver, DriverError, ErrorKind};

crate::__driver_methods!(__driver_calls!());

impl DriverCall {
    const fn index(self) -> usize {
        self as usize
    }
}

const CALLS: usize = DriverCall::ALL.len();

/// The error a [`FaultInjector`] returns: an injected fault or the inner driver's error.
#[derive(Debug)]
pub enum FaultError<E> {
    /// A fault injected into this call.
    Injected(DriverCall),
    /// The wrapped driver failed by itself.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for FaultError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultError::Injected(call) => write!(f, "injected fault in {call:?}"),
            FaultError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: DriverError> DriverError for FaultError<E> {
    fn kind(&self) -> ErrorKind {
        match self {
            FaultError::Injected(_) => ErrorKind::Injected,
            FaultError::Inner(e) => e.kind(),
        }
    }

    fn unsupported(operation: &'static str) -> Self {
        FaultError::Inner(E::unsupported(operation))
    }
}

/// Wraps a driver, failing armed calls and counting every call.
#[derive(Debug)]
pub struct FaultInjector<D> {
    inner: D,
    /// Per call: number of upcoming calls to fail (`u32::MAX` = every call).
    armed: [AtomicU32; CALLS],
    counts: [AtomicU32; CALLS],
}

impl<D> FaultInjector<D> {
    /// Wraps `inner` with no faults armed.
    pub fn new(inner: D) -> Self {
        Self {
            inner,
            armed: [const { AtomicU32::new(0) }; CALLS],
            counts: [const { AtomicU32::new(0) }; CALLS],
        }
    }

    /// Fails the next call to `call`.
    pub fn fail_next(&self, call: DriverCall) {
        self.fail_times(call, 1);
    }

    /// Fails the next `n` calls to `call`.
    pub fn fail_times(&self, call: DriverCall, n: u32) {
        if let Some(a) = self.armed.get(call.index()) {
            a.store(n, Ordering::SeqCst);
        }
    }

    /// Fails every call to `call` until [`FaultInjector::clear`].
    pub fn fail_always(&self, call: DriverCall) {
        self.fail_times(call, u32::MAX);
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        for a in &self.armed {
            a.store(0, Ordering::SeqCst);
        }
    }

    /// How many times `call` was made (failed or not).
    pub fn calls(&self, call: DriverCall) -> u32 {
        self.counts
            .get(call.index())
            .map_or(0, |c| c.load(Ordering::SeqCst))
    }

    /// Resets every call counter.
    pub fn reset_counts(&self) {
        for c in &self.counts {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// The wrapped driver.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Counts the call and reports whether it must fail.
    fn hit(&self, call: DriverCall) -> bool {
        if let Some(c) = self.counts.get(call.index()) {
            c.fetch_add(1, Ordering::SeqCst);
        }
        let Some(armed) = self.armed.get(call.index()) else {
            return false;
        };
        // Decrement unless disarmed (0) or armed forever (u32::MAX). A compare-exchange loop
        // rather than `fetch_update`, which newer toolchains deprecate under another name.
        let mut n = armed.load(Ordering::SeqCst);
        loop {
            let next = match n {
                0 => return false,
                u32::MAX => return true,
                n => n - 1,
            };
            match armed.compare_exchange_weak(n, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return true,
                Err(current) => n = current,
            }
        }
    }

    fn guard(&self, call: DriverCall) -> Result<(), FaultError<D::Error>>
    where
        D: Driver,
    {
        if self.hit(call) {
            Err(FaultError::Injected(call))
        } else {
            Ok(())
        }
    }
}

/// Counts the call, fails it if armed, else forwards it.
macro_rules! inject {
    (@value $s:ident, $d:ident => $e:expr) => {{
        let $d = &$s.inner;
        $e
    }};
    ($s:ident, $call:ident, $d:ident => $e:expr) => {{
        $s.guard(DriverCall::$call)?;
        let $d = &$s.inner;
        $e.map_err(FaultError::Inner)
    }};
}

impl<D: Driver> Driver for FaultInjector<D> {
    type Error = FaultError<D::Error>;
    crate::forward_driver!(inject);
}
