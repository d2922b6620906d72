//! The `Driver` trait: everything the runtime asks of a Neuron device backend.
//!
//! First version: discovery, driver version, compatibility-id range, core reservation
//! (mark/unmark), core bring-up/tear-down and the funtime flag. Later capabilities (device
//! memory, staging, submit, completion) extend this trait with new methods.
//!
//! Methods take `&self`: a runtime is shared between threads, so backends keep their mutable
//! state behind their own synchronisation. Backend errors keep their native type and expose a
//! portable [`ErrorKind`] (the embedded-hal habit).

use core::fmt;

use crate::lnc::CoreBitmap;
use crate::status::NrtStatus;

/// Chip architecture, as the kernel driver numbers it (`NEURON_ARCH_V*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Arch {
    /// No device, or one the runtime cannot drive.
    Invalid = 0,
    /// Inferentia (inf1, NeuronCore-v1). Not supported by the 2.x runtime.
    V1 = 1,
    /// Trainium1 / Inferentia2 (NeuronCore-v2); `SUNDA` in the runtime's own naming.
    V2 = 2,
    /// Trainium2 (NeuronCore-v3); logical cores of 2 physical cores by default.
    V3 = 3,
    /// The generation after Trainium2 (the runtime's "arch 4").
    V4 = 4,
}

impl Arch {
    /// Whether the 2.x runtime can drive this architecture.
    pub const fn is_supported(self) -> bool {
        matches!(self, Arch::V2 | Arch::V3 | Arch::V4)
    }

    /// The runtime's compatibility ids `(vtpb, v25)` for this architecture: `(6, 6)` for SUNDA
    /// (V2), `(10, 11)` otherwise. The driver must advertise a range `[min, max]` with
    /// `vtpb >= min` and `max >= v25`.
    pub const fn compat_ids(self) -> (u32, u32) {
        match self {
            Arch::V2 => (6, 6),
            _ => (10, 11),
        }
    }

    /// Default logical-core (LNC) size when `NEURON_RT_VIRTUAL_CORE_SIZE` is unset.
    pub const fn default_lnc_size(self) -> u32 {
        match self {
            Arch::V3 | Arch::V4 => 2,
            _ => 1,
        }
    }

    /// Largest logical-core size the architecture supports.
    pub const fn max_lnc_size(self) -> u32 {
        match self {
            Arch::V3 | Arch::V4 => 2,
            _ => 1,
        }
    }
}

/// Where the device lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Platform {
    /// Real hardware.
    Hardware,
    /// A simulator or emulator: the runtime overrides the hardware revision to REV_A.
    Simulator,
}

/// Hardware revisions the runtime may force on a non-hardware platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HwRevision {
    /// Revision A.
    A,
    /// Revision B.
    B,
}

/// What discovery found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceInfo {
    /// Number of Neuron devices (chips).
    pub device_count: u32,
    /// Physical NeuronCores per device.
    pub cores_per_device: u32,
    /// Chip architecture.
    pub arch: Arch,
    /// Hardware or simulator.
    pub platform: Platform,
}

impl DeviceInfo {
    /// Physical cores over all devices (saturating).
    pub const fn total_physical_cores(&self) -> u32 {
        self.device_count.saturating_mul(self.cores_per_device)
    }
}

/// The kernel driver's version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DriverVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// The range of runtime compatibility ids the driver accepts (`NEURON_IOCTL_COMPATIBLE_VERSION`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CompatRange {
    /// Oldest runtime id the driver accepts.
    pub min: u32,
    /// Newest runtime id the driver accepts.
    pub max: u32,
}

/// A reservation request: `count` consecutive physical cores anywhere in `[start, end]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ReserveRequest {
    /// Number of consecutive physical cores wanted.
    pub count: u32,
    /// First physical core that may be used.
    pub start: u32,
    /// Last physical core that may be used (inclusive).
    pub end: u32,
}

/// Why a reservation failed.
#[derive(Debug)]
pub enum ReserveError<E> {
    /// Not enough free cores: `available` is the longest free run the driver saw.
    Unavailable {
        /// Longest run of free physical cores.
        available: u32,
    },
    /// The driver call itself failed.
    Driver(E),
}

/// Parameters of the per-core bring-up (`kmgr_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CoreInitParams {
    /// First logical core of the process (absolute).
    pub first_vnc: u32,
    /// Number of logical cores.
    pub vnc_count: u32,
    /// Physical cores per logical core.
    pub lnc_size: u32,
    /// Reset the cores before use (`NEURON_RT_RESET_CORES`).
    pub reset_cores: bool,
    /// Implicit async mode is on (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` > 0).
    pub implicit_async: bool,
    /// In-flight request bound of the implicit async mode.
    pub async_max_inflight: u32,
}

/// A model the backend staged on the device, named by the backend's own handle (libnrt's
/// `H_MODEL`, reached from a model record through its bridge).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StagedModel {
    /// Absolute logical core the model is staged on.
    pub vnc: u32,
    /// The backend's handle for it.
    pub handle: u64,
    /// The backend runs it without computing anything (a simulator given a compiler NEFF,
    /// which carries no simulator program): executions zero-fill the outputs.
    pub plumbing: bool,
}

/// A device memory allocation in the HBM of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceBuffer {
    /// Device (chip) index.
    pub device: u32,
    /// Device address.
    pub addr: u64,
    /// Size in bytes.
    pub size: u64,
}

/// One subgraph of a model to stage on one physical core of a logical core.
#[derive(Clone, Copy, Debug)]
pub struct SubgraphImage<'a> {
    /// Absolute logical core.
    pub vnc: u32,
    /// Index of the subgraph, which is also the physical core within the logical core.
    pub index: u32,
    /// Absolute physical core it runs on.
    pub pcore: u32,
    /// Subgraph name (`sg00`, ...).
    pub name: &'a str,
    /// The model's name, for diagnostics.
    pub model: &'a str,
    /// The simulator program carried by the NEFF, if any (compiler NEFFs have none).
    pub program: Option<&'a [u8]>,
}

/// One tensor bound for an execution: the model variable `name` lives in `buffer` at
/// `offset`, `size` bytes.
#[derive(Clone, Copy, Debug)]
pub struct Binding<'a> {
    /// Model variable (I/O tensor) name.
    pub name: &'a str,
    /// Device memory holding it.
    pub buffer: DeviceBuffer,
    /// Offset in `buffer`.
    pub offset: u64,
    /// Bytes.
    pub size: u64,
}

/// One execution of a staged model.
#[derive(Clone, Copy, Debug)]
pub struct ExecRequest<'a> {
    /// The model's staged subgraphs (one per physical core).
    pub subgraphs: &'a [StagedModel],
    /// Input bindings.
    pub inputs: &'a [Binding<'a>],
    /// Output bindings.
    pub outputs: &'a [Binding<'a>],
    /// `NEURON_RT_EXEC_TIMEOUT` in seconds (of device time), `None` for the backend default.
    pub timeout_secs: Option<u32>,
}

/// Portable classification of a backend error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ErrorKind {
    /// No device or driver found.
    NotFound,
    /// The resource is held by someone else.
    Busy,
    /// Permission denied.
    PermissionDenied,
    /// The backend does not implement the operation.
    Unsupported,
    /// The backend rejected an argument.
    InvalidArgument,
    /// Out of device or host memory.
    OutOfMemory,
    /// The device reported a hardware error.
    Hardware,
    /// An I/O error talking to the driver.
    Io,
    /// An execution did not complete within its timeout.
    Timeout,
    /// An execution completed with an error (hazard, bad descriptor, ...).
    Execution,
    /// A fault injected by [`FaultInjector`].
    Injected,
    /// Anything else.
    Other,
}

/// Errors returned by a [`Driver`].
pub trait DriverError: fmt::Debug + fmt::Display {
    /// The portable classification.
    fn kind(&self) -> ErrorKind;

    /// The status a runtime call reports when this error ends it.
    fn status(&self) -> NrtStatus {
        match self.kind() {
            ErrorKind::OutOfMemory => NrtStatus::Resource,
            ErrorKind::Hardware => NrtStatus::HwError,
            ErrorKind::Busy => NrtStatus::ExecNcBusy,
            ErrorKind::InvalidArgument => NrtStatus::Invalid,
            ErrorKind::Timeout => NrtStatus::Timeout,
            ErrorKind::Execution => NrtStatus::ExecCompletedWithErr,
            _ => NrtStatus::Failure,
        }
    }
}

/// Callback through which a driver reports soft incompatibilities (logged as warnings).
pub type SoftIncompatCallback = fn(&str);

/// A Neuron device backend.
pub trait Driver {
    /// The backend's native error type.
    type Error: DriverError;

    /// Whether this backend runs in funtime (functional simulation) mode: no driver to
    /// negotiate with, core reservations marked locally, no per-core bring-up.
    fn is_funtime(&self) -> bool;

    /// Registers the callback the driver layer uses to report soft incompatibilities.
    fn register_soft_incompat_callback(
        &self,
        callback: SoftIncompatCallback,
    ) -> Result<(), Self::Error>;

    /// Device discovery: count, cores per device, architecture.
    fn discover(&self) -> Result<DeviceInfo, Self::Error>;

    /// Forces a hardware revision (only asked on non-hardware platforms).
    fn override_hw_revision(&self, revision: HwRevision) -> Result<(), Self::Error>;

    /// The kernel driver's version.
    fn driver_version(&self) -> Result<DriverVersion, Self::Error>;

    /// The range of runtime compatibility ids the driver accepts.
    fn compatible_version(&self) -> Result<CompatRange, Self::Error>;

    /// Reserves `count` consecutive physical cores in `[start, end]` for this process; on
    /// success returns the bitmap of the cores reserved.
    fn reserve_cores(
        &self,
        request: ReserveRequest,
    ) -> Result<CoreBitmap, ReserveError<Self::Error>>;

    /// Releases exactly the cores of `bitmap` reserved by this process.
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), Self::Error>;

    /// Per-core bring-up of the process's cores (reset, rings, queues).
    fn init_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error>;

    /// Starts the exec-ready program on the process's cores (last step of init).
    fn start_exec_ready(&self, params: &CoreInitParams) -> Result<(), Self::Error>;

    /// Per-core teardown, the inverse of [`Driver::init_cores`].
    fn shutdown_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error>;

    /// Stops a staged model on its core's execution engine (the synchronous engine's model
    /// stop, first step of unloading it).
    fn stop_model(&self, model: StagedModel) -> Result<(), Self::Error>;

    /// Removes a stopped model from the device and frees what staging allocated for it.
    fn unstage_model(&self, model: StagedModel) -> Result<(), Self::Error>;

    /// Stages one subgraph of a model on its physical core (the per-core model build).
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, Self::Error>;

    /// Allocates `size` bytes of the HBM of device `device` (out of memory:
    /// [`ErrorKind::OutOfMemory`]).
    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, Self::Error>;

    /// Frees device memory.
    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), Self::Error>;

    /// Copies `data` into `buffer` at `offset`.
    fn write_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Self::Error>;

    /// Copies `out.len()` bytes of `buffer` at `offset` into `out`.
    fn read_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), Self::Error>;

    /// Copies `len` bytes between device buffers.
    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), Self::Error>;

    /// Sets `len` bytes of `buffer` at `offset` to `value`.
    fn memset_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), Self::Error>;

    /// Runs one execution to completion (the submit-and-wait of the synchronous engine).
    /// Must not allocate for a model whose program is empty.
    fn execute(&self, request: &ExecRequest<'_>) -> Result<(), Self::Error>;
}

impl<T: Driver + ?Sized> Driver for &T {
    type Error = T::Error;
    fn is_funtime(&self) -> bool {
        T::is_funtime(self)
    }
    fn register_soft_incompat_callback(&self, cb: SoftIncompatCallback) -> Result<(), T::Error> {
        T::register_soft_incompat_callback(self, cb)
    }
    fn discover(&self) -> Result<DeviceInfo, T::Error> {
        T::discover(self)
    }
    fn override_hw_revision(&self, revision: HwRevision) -> Result<(), T::Error> {
        T::override_hw_revision(self, revision)
    }
    fn driver_version(&self) -> Result<DriverVersion, T::Error> {
        T::driver_version(self)
    }
    fn compatible_version(&self) -> Result<CompatRange, T::Error> {
        T::compatible_version(self)
    }
    fn reserve_cores(&self, r: ReserveRequest) -> Result<CoreBitmap, ReserveError<T::Error>> {
        T::reserve_cores(self, r)
    }
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), T::Error> {
        T::release_cores(self, bitmap)
    }
    fn init_cores(&self, params: &CoreInitParams) -> Result<(), T::Error> {
        T::init_cores(self, params)
    }
    fn start_exec_ready(&self, params: &CoreInitParams) -> Result<(), T::Error> {
        T::start_exec_ready(self, params)
    }
    fn shutdown_cores(&self, params: &CoreInitParams) -> Result<(), T::Error> {
        T::shutdown_cores(self, params)
    }
    fn stop_model(&self, model: StagedModel) -> Result<(), T::Error> {
        T::stop_model(self, model)
    }
    fn unstage_model(&self, model: StagedModel) -> Result<(), T::Error> {
        T::unstage_model(self, model)
    }
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, T::Error> {
        T::stage_subgraph(self, image)
    }
    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, T::Error> {
        T::alloc_device(self, device, size)
    }
    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), T::Error> {
        T::free_device(self, buffer)
    }
    fn write_device(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), T::Error> {
        T::write_device(self, b, offset, data)
    }
    fn read_device(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<(), T::Error> {
        T::read_device(self, b, offset, out)
    }
    fn copy_device(
        &self,
        src: DeviceBuffer,
        so: u64,
        dst: DeviceBuffer,
        d: u64,
        len: u64,
    ) -> Result<(), T::Error> {
        T::copy_device(self, src, so, dst, d, len)
    }
    fn memset_device(&self, b: DeviceBuffer, o: u64, v: u8, len: u64) -> Result<(), T::Error> {
        T::memset_device(self, b, o, v, len)
    }
    fn execute(&self, request: &ExecRequest<'_>) -> Result<(), T::Error> {
        T::execute(self, request)
    }
}

pub mod fault;
pub use fault::{DriverCall, FaultError, FaultInjector};
