//! The `Driver` trait: everything the runtime asks of a Neuron device backend.
//!
//! Two methods are required — [`Driver::is_funtime`] and [`Driver::discover`] — and every other
//! capability has a default body that fails with the backend's own "unsupported" error
//! ([`DriverError::unsupported`]), so a partial backend implements what it has and nothing
//! more. The capabilities, in the order the runtime first uses them: the driver's version and
//! compatibility range (skipped in funtime), core reservation and per-core bring-up (skipped in
//! funtime), staging subgraphs, device memory, and submitting executions.
//!
//! Methods take `&self`: a runtime is shared between threads, so backends keep their mutable
//! state behind their own synchronisation. Backend errors keep their native type and expose a
//! portable [`ErrorKind`] (the embedded-hal habit).
//!
//! # Wrappers
//!
//! A driver that wraps another (`&T`, the [`FaultInjector`], a backend switch) forwards every
//! method with [`forward_driver!`](crate::forward_driver): the list of methods lives once, in
//! this module, so adding a method touches only the trait and that list (which also names the
//! method in [`DriverCall`]).
//!
//! # I/O by index
//!
//! The runtime resolves tensor names once per execution; a [`Binding`] names a model tensor by
//! its I/O index (its position on its side of the model's [`IoTable`](crate::io::IoTable)). A
//! backend maps each index to its own slot once, at stage time, from [`SubgraphImage::io`].

use core::fmt;

use crate::bitmap::CoreBitmap;
use crate::status::NrtStatus;
use crate::topology::Topology;

pub use crate::device::{Arch, DeviceInfo, HwRevision, Platform};
pub use crate::topology::ReserveRequest;

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

/// What a reservation gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Reservation {
    /// The cores reserved.
    Reserved(CoreBitmap),
    /// Not enough free cores: `available` is the longest run of free physical cores the driver
    /// saw.
    Unavailable {
        /// Longest run of free physical cores.
        available: u32,
    },
}

/// Parameters of the per-core bring-up (`kmgr_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CoreInitParams {
    /// The process's logical cores.
    pub topology: Topology,
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
    pub lnc: u32,
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
    pub lnc: u32,
    /// Index of the subgraph, which is also the physical core within the logical core.
    pub index: u32,
    /// Absolute physical core it runs on.
    pub pnc: u32,
    /// Subgraph name (`sg00`, ...).
    pub name: &'a str,
    /// The model's name, for diagnostics.
    pub model: &'a str,
    /// The simulator program carried by the NEFF, if any (compiler NEFFs have none).
    pub program: Option<&'a [u8]>,
    /// The NEFF header's UUID (all zero where no NEFF is behind the image).
    pub uuid: [u8; 16],
    /// The subgraph directory's members, in archive order (see [`SubgraphImage::file`]);
    /// empty where no NEFF is behind the image.
    #[cfg(feature = "alloc")]
    pub files: &'a [crate::neff::SubgraphMember],
    /// The model's I/O table: the backend maps each I/O index of a [`Binding`] to its own slot
    /// from it, once, here.
    #[cfg(feature = "alloc")]
    pub io: &'a crate::io::IoTable,
}

#[cfg(feature = "alloc")]
impl<'a> SubgraphImage<'a> {
    /// The kept bytes of member `name` of the subgraph directory (`PE.bin`, `def.json`, …).
    pub fn file(&self, name: &str) -> Option<&'a [u8]> {
        self.files
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.data.as_deref())
    }
}

/// One tensor bound for an execution: the model tensor at I/O index `index` (on the side of
/// the list holding the binding) lives in `buffer` at `offset`, `size` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Position of the tensor on its side of the model's I/O table.
    pub index: u32,
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
    /// Input bindings, in I/O-index order.
    pub inputs: &'a [Binding],
    /// Output bindings, in I/O-index order.
    pub outputs: &'a [Binding],
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

    /// The error a backend returns for an operation it does not implement (`operation` is the
    /// [`Driver`] method's name); its kind must be [`ErrorKind::Unsupported`].
    fn unsupported(operation: &'static str) -> Self
    where
        Self: Sized;

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

/// The default body of an optional capability.
fn unsupported<T, E: DriverError>(operation: &'static str) -> Result<T, E> {
    Err(E::unsupported(operation))
}

/// A Neuron device backend.
pub trait Driver {
    /// The backend's native error type.
    type Error: DriverError;

    /// Whether this backend runs in funtime (functional simulation) mode: no driver to
    /// negotiate with, core reservations marked locally, no per-core bring-up.
    fn is_funtime(&self) -> bool;

    /// Whether [`Driver::stage_subgraph`] reads the subgraph's files
    /// ([`SubgraphImage::files`]: instruction streams, constants) beyond the simulator program.
    /// The loader keeps every member of a NEFF's subgraphs in memory only for such a backend
    /// (bounded: a NEFF whose members exceed 1 GiB is refused there); the default keeps the
    /// simulator program alone, whatever the NEFF's size.
    fn stages_subgraph_files(&self) -> bool {
        false
    }

    /// Device discovery: count, cores per device, architecture.
    fn discover(&self) -> Result<DeviceInfo, Self::Error>;

    /// Registers the callback the driver layer uses to report soft incompatibilities. The
    /// default accepts it and never calls it (a backend with nothing to report).
    fn register_soft_incompat_callback(
        &self,
        callback: SoftIncompatCallback,
    ) -> Result<(), Self::Error> {
        let _ = callback;
        Ok(())
    }

    /// Forces a hardware revision (only asked on non-hardware platforms; a failure is logged
    /// as a warning).
    fn override_hw_revision(&self, revision: HwRevision) -> Result<(), Self::Error> {
        let _ = revision;
        unsupported("override_hw_revision")
    }

    /// The kernel driver's version.
    fn driver_version(&self) -> Result<DriverVersion, Self::Error> {
        unsupported("driver_version")
    }

    /// The range of runtime compatibility ids the driver accepts.
    fn compatible_version(&self) -> Result<CompatRange, Self::Error> {
        unsupported("compatible_version")
    }

    /// Reserves `count` consecutive physical cores in `[start, end]` for this process.
    fn reserve_cores(&self, request: ReserveRequest) -> Result<Reservation, Self::Error> {
        let _ = request;
        unsupported("reserve_cores")
    }

    /// Per-core bring-up of the process's cores (reset, rings, queues).
    fn init_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        let _ = params;
        unsupported("init_cores")
    }

    /// Starts the exec-ready program on the process's cores (last step of init).
    fn start_exec_ready(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        let _ = params;
        unsupported("start_exec_ready")
    }

    /// Per-core teardown, the inverse of [`Driver::init_cores`].
    fn shutdown_cores(&self, params: &CoreInitParams) -> Result<(), Self::Error> {
        let _ = params;
        unsupported("shutdown_cores")
    }

    /// Releases exactly the cores of `bitmap` reserved by this process.
    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), Self::Error> {
        let _ = bitmap;
        unsupported("release_cores")
    }

    /// Stops a staged model on its core's execution engine (the synchronous engine's model
    /// stop, first step of unloading it).
    fn stop_model(&self, model: StagedModel) -> Result<(), Self::Error> {
        let _ = model;
        unsupported("stop_model")
    }

    /// Removes a stopped model from the device and frees what staging allocated for it.
    fn unstage_model(&self, model: StagedModel) -> Result<(), Self::Error> {
        let _ = model;
        unsupported("unstage_model")
    }

    /// Stages one subgraph of a model on its physical core (the per-core model build).
    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, Self::Error> {
        let _ = image;
        unsupported("stage_subgraph")
    }

    /// Allocates `size` bytes of the HBM of device `device` (out of memory:
    /// [`ErrorKind::OutOfMemory`]).
    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, Self::Error> {
        let _ = (device, size);
        unsupported("alloc_device")
    }

    /// Frees device memory.
    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), Self::Error> {
        let _ = buffer;
        unsupported("free_device")
    }

    /// Copies `data` into `buffer` at `offset`.
    fn write_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), Self::Error> {
        let _ = (buffer, offset, data);
        unsupported("write_device")
    }

    /// Copies `out.len()` bytes of `buffer` at `offset` into `out`.
    fn read_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), Self::Error> {
        let _ = (buffer, offset, out);
        unsupported("read_device")
    }

    /// Copies `len` bytes between device buffers.
    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), Self::Error> {
        let _ = (src, src_offset, dst, dst_offset, len);
        unsupported("copy_device")
    }

    /// Sets `len` bytes of `buffer` at `offset` to `value`.
    fn memset_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), Self::Error> {
        let _ = (buffer, offset, value, len);
        unsupported("memset_device")
    }

    /// Submits one execution and waits for it to complete (the submit-and-wait of the
    /// synchronous engine). Must not allocate for a model whose program is empty.
    fn submit(&self, request: &ExecRequest<'_>) -> Result<(), Self::Error> {
        let _ = request;
        unsupported("submit")
    }
}

mod forward;

/// `&T` forwards to `T`.
macro_rules! by_ref {
    (@value $s:ident, $d:ident => $e:expr) => {{
        let $d = &**$s;
        $e
    }};
    ($s:ident, $call:ident, $d:ident => $e:expr) => {{
        let $d = &**$s;
        $e
    }};
}

impl<T: Driver + ?Sized> Driver for &T {
    type Error = T::Error;
    crate::forward_driver!(by_ref);
}

pub mod fault;
pub use fault::{DriverCall, FaultError, FaultInjector};
