//! A driver wrapper that injects failures into chosen calls and counts every call.
//!
//! Wrap any backend, arm faults by [`DriverCall`], run the runtime, then check what it called:
//!
//! ```
//! use nrt_core::driver::{DriverCall, FaultInjector};
//! # use nrt_core::driver::*;
//! # use nrt_core::lnc::CoreBitmap;
//! # #[derive(Debug)] struct E;
//! # impl core::fmt::Display for E { fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { f.write_str("e") } }
//! # impl DriverError for E { fn kind(&self) -> ErrorKind { ErrorKind::Other } }
//! # struct D;
//! # impl Driver for D { type Error = E;
//! #   fn is_funtime(&self) -> bool { true }
//! #   fn register_soft_incompat_callback(&self, _: SoftIncompatCallback) -> Result<(), E> { Ok(()) }
//! #   fn discover(&self) -> Result<DeviceInfo, E> { Err(E) }
//! #   fn override_hw_revision(&self, _: HwRevision) -> Result<(), E> { Ok(()) }
//! #   fn driver_version(&self) -> Result<DriverVersion, E> { Err(E) }
//! #   fn compatible_version(&self) -> Result<CompatRange, E> { Err(E) }
//! #   fn reserve_cores(&self, _: ReserveRequest) -> Result<CoreBitmap, ReserveError<E>> { Err(ReserveError::Driver(E)) }
//! #   fn release_cores(&self, _: &CoreBitmap) -> Result<(), E> { Ok(()) }
//! #   fn init_cores(&self, _: &CoreInitParams) -> Result<(), E> { Ok(()) }
//! #   fn start_exec_ready(&self, _: &CoreInitParams) -> Result<(), E> { Ok(()) }
//! #   fn shutdown_cores(&self, _: &CoreInitParams) -> Result<(), E> { Ok(()) }
//! #   fn stop_model(&self, _: StagedModel) -> Result<(), E> { Ok(()) }
//! #   fn unstage_model(&self, _: StagedModel) -> Result<(), E> { Ok(()) }
//! #   fn stage_subgraph(&self, _: &SubgraphImage<'_>) -> Result<StagedModel, E> { Err(E) }
//! #   fn alloc_device(&self, _: u32, _: u64) -> Result<DeviceBuffer, E> { Err(E) }
//! #   fn free_device(&self, _: DeviceBuffer) -> Result<(), E> { Ok(()) }
//! #   fn write_device(&self, _: DeviceBuffer, _: u64, _: &[u8]) -> Result<(), E> { Ok(()) }
//! #   fn read_device(&self, _: DeviceBuffer, _: u64, _: &mut [u8]) -> Result<(), E> { Ok(()) }
//! #   fn copy_device(&self, _: DeviceBuffer, _: u64, _: DeviceBuffer, _: u64, _: u64) -> Result<(), E> { Ok(()) }
//! #   fn memset_device(&self, _: DeviceBuffer, _: u64, _: u8, _: u64) -> Result<(), E> { Ok(()) }
//! #   fn execute(&self, _: &ExecRequest<'_>) -> Result<(), E> { Ok(()) }
//! # }
//! let driver = FaultInjector::new(D);
//! driver.fail_next(DriverCall::Discover);
//! assert!(driver.discover().is_err());
//! assert_eq!(driver.calls(DriverCall::Discover), 1);
//! ```

use core::fmt;
use core::sync::atomic::{AtomicU32, Ordering};

use super::{
    CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverError, DriverVersion,
    ErrorKind, ExecRequest, HwRevision, ReserveError, ReserveRequest, SoftIncompatCallback,
    StagedModel, SubgraphImage,
};
use crate::lnc::CoreBitmap;

/// One method of [`Driver`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DriverCall {
    /// [`Driver::register_soft_incompat_callback`].
    RegisterSoftIncompatCallback,
    /// [`Driver::discover`].
    Discover,
    /// [`Driver::override_hw_revision`].
    OverrideHwRevision,
    /// [`Driver::driver_version`].
    DriverVersion,
    /// [`Driver::compatible_version`].
    CompatibleVersion,
    /// [`Driver::reserve_cores`].
    ReserveCores,
    /// [`Driver::release_cores`].
    ReleaseCores,
    /// [`Driver::init_cores`].
    InitCores,
    /// [`Driver::start_exec_ready`].
    StartExecReady,
    /// [`Driver::shutdown_cores`].
    ShutdownCores,
    /// [`Driver::stop_model`].
    StopModel,
    /// [`Driver::unstage_model`].
    UnstageModel,
    /// [`Driver::stage_subgraph`].
    StageSubgraph,
    /// [`Driver::alloc_device`].
    AllocDevice,
    /// [`Driver::free_device`].
    FreeDevice,
    /// [`Driver::write_device`].
    WriteDevice,
    /// [`Driver::read_device`].
    ReadDevice,
    /// [`Driver::copy_device`].
    CopyDevice,
    /// [`Driver::memset_device`].
    MemsetDevice,
    /// [`Driver::execute`].
    Execute,
}

impl DriverCall {
    /// Every call, in the order `init` first makes them, then `unload`'s.
    pub const ALL: [DriverCall; 20] = [
        DriverCall::RegisterSoftIncompatCallback,
        DriverCall::Discover,
        DriverCall::OverrideHwRevision,
        DriverCall::DriverVersion,
        DriverCall::CompatibleVersion,
        DriverCall::ReserveCores,
        DriverCall::InitCores,
        DriverCall::StartExecReady,
        DriverCall::ShutdownCores,
        DriverCall::ReleaseCores,
        DriverCall::StopModel,
        DriverCall::UnstageModel,
        DriverCall::StageSubgraph,
        DriverCall::AllocDevice,
        DriverCall::FreeDevice,
        DriverCall::WriteDevice,
        DriverCall::ReadDevice,
        DriverCall::CopyDevice,
        DriverCall::MemsetDevice,
        DriverCall::Execute,
    ];

    const fn index(self) -> usize {
        self as usize
    }
}

const CALLS: usize = 20;

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

impl<D: Driver> Driver for FaultInjector<D> {
    type Error = FaultError<D::Error>;

    fn is_funtime(&self) -> bool {
        self.inner.is_funtime()
    }

    fn register_soft_incompat_callback(
        &self,
        callback: SoftIncompatCallback,
    ) -> Result<(), Self::Error> {
        self.guard(DriverCall::RegisterSoftIncompatCallback)?;
        self.inner
            .register_soft_incompat_callback(callback)
            .map_err(FaultError::Inner)
    }

    fn discover(&self) -> Result<DeviceInfo, Self::Error> {
        self.guard(DriverCall::Discover)?;
        self.inner.discover().map_err(FaultError::Inner)
    }

    fn override_hw_revision(&self, revision: HwRevision) -> Result<(), Self::Error> {
        self.guard(DriverCall::OverrideHwRevision)?;
        self.inner
            .override_hw_revision(revision)
            .map_err(FaultError::Inner)
    }

    fn driver_version(&self) -> Result<DriverVersion, Self::Error> {
        self.guard(DriverCall::DriverVersion)?;
        self.inner.driver_version().map_err(FaultError::Inner)
    }

    fn compatible_version(&self) -> Result<CompatRange, Self::Error> {
        self.guard(DriverCall::CompatibleVersion)?;
        self.inner.compatible_version().map_err(FaultError::Inner)
    }

    fn reserve_cores(
        &self,
        request: ReserveRequest,
    ) -> Result<CoreBitmap, ReserveError<Self::Error>> {
        if self.hit(DriverCall::ReserveCores) {
            return Err(ReserveError::Driver(FaultError::Injected(
                DriverCall::ReserveCores,
            )));
        }
        self.inner.reserve_cores(request).map_err(|e| match e {
            ReserveError::Unavailable { available } => ReserveError::Unavailable { available },
            ReserveError::Driver(e) => ReserveError::Driver(FaultError::Inner(e)),
        })
    }

    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), Self::Error> {
        self.guard(DriverCall::ReleaseCores)?;
        self.inner.release_cores(bitmap).map_err(FaultError::Inner)
    }

    fn init_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        self.guard(DriverCall::InitCores)?;
        self.inner.init_cores(params).map_err(FaultError::Inner)
    }

    fn start_exec_ready(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        self.guard(DriverCall::StartExecReady)?;
        self.inner
            .start_exec_ready(params)
            .map_err(FaultError::Inner)
    }

    fn shutdown_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        self.guard(DriverCall::ShutdownCores)?;
        self.inner.shutdown_cores(params).map_err(FaultError::Inner)
    }

    fn stop_model(&self, model: StagedModel) -> Result<(), Self::Error> {
        self.guard(DriverCall::StopModel)?;
        self.inner.stop_model(model).map_err(FaultError::Inner)
    }

    fn unstage_model(&self, model: StagedModel) -> Result<(), Self::Error> {
        self.guard(DriverCall::UnstageModel)?;
        self.inner.unstage_model(model).map_err(FaultError::Inner)
    }

    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, Self::Error> {
        self.guard(DriverCall::StageSubgraph)?;
        self.inner.stage_subgraph(image).map_err(FaultError::Inner)
    }

    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, Self::Error> {
        self.guard(DriverCall::AllocDevice)?;
        self.inner
            .alloc_device(device, size)
            .map_err(FaultError::Inner)
    }

    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), Self::Error> {
        self.guard(DriverCall::FreeDevice)?;
        self.inner.free_device(buffer).map_err(FaultError::Inner)
    }

    fn write_device(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), Self::Error> {
        self.guard(DriverCall::WriteDevice)?;
        self.inner
            .write_device(b, offset, data)
            .map_err(FaultError::Inner)
    }

    fn read_device(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<(), Self::Error> {
        self.guard(DriverCall::ReadDevice)?;
        self.inner
            .read_device(b, offset, out)
            .map_err(FaultError::Inner)
    }

    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), Self::Error> {
        self.guard(DriverCall::CopyDevice)?;
        self.inner
            .copy_device(src, src_offset, dst, dst_offset, len)
            .map_err(FaultError::Inner)
    }

    fn memset_device(&self, b: DeviceBuffer, o: u64, v: u8, len: u64) -> Result<(), Self::Error> {
        self.guard(DriverCall::MemsetDevice)?;
        self.inner
            .memset_device(b, o, v, len)
            .map_err(FaultError::Inner)
    }

    fn execute(&self, request: &ExecRequest<'_>) -> Result<(), Self::Error> {
        self.guard(DriverCall::Execute)?;
        self.inner.execute(request).map_err(FaultError::Inner)
    }
}
