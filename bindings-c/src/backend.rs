//! The driver behind the C library, chosen at the first `nrt_init`: the simulator or the Linux
//! driver.

use std::fmt;
use std::sync::OnceLock;

use nrt_core::driver::{
    CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverError, DriverVersion,
    ErrorKind, ExecRequest, HwRevision, ReserveError, ReserveRequest, SoftIncompatCallback,
    StagedModel, SubgraphImage,
};
use nrt_core::lnc::CoreBitmap;
use nrt_linux::{LinuxDriver, LinuxError};
use nrt_sim::{SimDriver, SimError};

/// A chosen backend.
#[derive(Debug)]
pub(crate) enum Backend {
    Sim(SimDriver),
    Linux(LinuxDriver),
}

/// The process's driver: empty until the first `nrt_init` chooses one.
#[derive(Debug, Default)]
pub(crate) struct SwitchDriver {
    backend: OnceLock<Backend>,
}

impl SwitchDriver {
    pub(crate) const fn new() -> Self {
        Self {
            backend: OnceLock::new(),
        }
    }

    /// The backend, choosing it with `choose` if none is chosen yet.
    pub(crate) fn get_or_choose(&self, choose: impl FnOnce() -> Backend) -> &Backend {
        self.backend.get_or_init(choose)
    }

    pub(crate) fn get(&self) -> Option<&Backend> {
        self.backend.get()
    }
}

/// Errors of either backend, or "no backend chosen".
#[derive(Debug)]
pub(crate) enum BackendError {
    Sim(SimError),
    Linux(LinuxError),
    None,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendError::Sim(e) => fmt::Display::fmt(e, f),
            BackendError::Linux(e) => fmt::Display::fmt(e, f),
            BackendError::None => f.write_str("no Neuron backend selected"),
        }
    }
}

impl DriverError for BackendError {
    fn kind(&self) -> ErrorKind {
        match self {
            BackendError::Sim(e) => e.kind(),
            BackendError::Linux(e) => e.kind(),
            BackendError::None => ErrorKind::NotFound,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $d:ident => $call:expr) => {
        match $self.backend.get() {
            Some(Backend::Sim($d)) => $call.map_err(BackendError::Sim),
            Some(Backend::Linux($d)) => $call.map_err(BackendError::Linux),
            None => Err(BackendError::None),
        }
    };
}

impl Driver for SwitchDriver {
    type Error = BackendError;

    fn is_funtime(&self) -> bool {
        match self.backend.get() {
            Some(Backend::Sim(d)) => d.is_funtime(),
            Some(Backend::Linux(d)) => d.is_funtime(),
            None => false,
        }
    }
    fn register_soft_incompat_callback(
        &self,
        cb: SoftIncompatCallback,
    ) -> Result<(), BackendError> {
        delegate!(self, d => d.register_soft_incompat_callback(cb))
    }
    fn discover(&self) -> Result<DeviceInfo, BackendError> {
        delegate!(self, d => d.discover())
    }
    fn override_hw_revision(&self, r: HwRevision) -> Result<(), BackendError> {
        delegate!(self, d => d.override_hw_revision(r))
    }
    fn driver_version(&self) -> Result<DriverVersion, BackendError> {
        delegate!(self, d => d.driver_version())
    }
    fn compatible_version(&self) -> Result<CompatRange, BackendError> {
        delegate!(self, d => d.compatible_version())
    }
    fn reserve_cores(&self, r: ReserveRequest) -> Result<CoreBitmap, ReserveError<BackendError>> {
        let map = |e: ReserveError<BackendError>| e;
        match self.backend.get() {
            Some(Backend::Sim(d)) => d.reserve_cores(r).map_err(|e| match e {
                ReserveError::Unavailable { available } => ReserveError::Unavailable { available },
                ReserveError::Driver(e) => ReserveError::Driver(BackendError::Sim(e)),
            }),
            Some(Backend::Linux(d)) => d.reserve_cores(r).map_err(|e| match e {
                ReserveError::Unavailable { available } => ReserveError::Unavailable { available },
                ReserveError::Driver(e) => ReserveError::Driver(BackendError::Linux(e)),
            }),
            None => Err(map(ReserveError::Driver(BackendError::None))),
        }
    }
    fn release_cores(&self, b: &CoreBitmap) -> Result<(), BackendError> {
        delegate!(self, d => d.release_cores(b))
    }
    fn init_cores(&self, p: &CoreInitParams) -> Result<(), BackendError> {
        delegate!(self, d => d.init_cores(p))
    }
    fn start_exec_ready(&self, p: &CoreInitParams) -> Result<(), BackendError> {
        delegate!(self, d => d.start_exec_ready(p))
    }
    fn shutdown_cores(&self, p: &CoreInitParams) -> Result<(), BackendError> {
        delegate!(self, d => d.shutdown_cores(p))
    }
    fn stop_model(&self, m: StagedModel) -> Result<(), BackendError> {
        delegate!(self, d => d.stop_model(m))
    }
    fn unstage_model(&self, m: StagedModel) -> Result<(), BackendError> {
        delegate!(self, d => d.unstage_model(m))
    }
    fn stage_subgraph(&self, i: &SubgraphImage<'_>) -> Result<StagedModel, BackendError> {
        delegate!(self, d => d.stage_subgraph(i))
    }
    fn alloc_device(&self, dev: u32, size: u64) -> Result<DeviceBuffer, BackendError> {
        delegate!(self, d => d.alloc_device(dev, size))
    }
    fn free_device(&self, b: DeviceBuffer) -> Result<(), BackendError> {
        delegate!(self, d => d.free_device(b))
    }
    fn write_device(&self, b: DeviceBuffer, o: u64, data: &[u8]) -> Result<(), BackendError> {
        delegate!(self, d => d.write_device(b, o, data))
    }
    fn read_device(&self, b: DeviceBuffer, o: u64, out: &mut [u8]) -> Result<(), BackendError> {
        delegate!(self, d => d.read_device(b, o, out))
    }
    fn copy_device(
        &self,
        s: DeviceBuffer,
        so: u64,
        t: DeviceBuffer,
        to: u64,
        len: u64,
    ) -> Result<(), BackendError> {
        delegate!(self, d => d.copy_device(s, so, t, to, len))
    }
    fn memset_device(&self, b: DeviceBuffer, o: u64, v: u8, len: u64) -> Result<(), BackendError> {
        delegate!(self, d => d.memset_device(b, o, v, len))
    }
    fn execute(&self, r: &ExecRequest<'_>) -> Result<(), BackendError> {
        delegate!(self, d => d.execute(r))
    }
}
