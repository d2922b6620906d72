//! `nrt-core`: the `no_std` core of a Neuron Runtime (libnrt 2.31) facade.
//!
//! It owns the status codes, the four-state lifecycle guard, `init` / `close` orchestration,
//! configuration parsing, driver-compatibility negotiation, logical-core allocation, version
//! reporting and the core-dump path templater — written against the [`Driver`] trait and a
//! small [`Host`] trait, never against an OS. Nothing here reads the environment or a clock.
//!
//! ```
//! use nrt_core::{FrameworkType, NrtStatus, Runtime};
//! # use nrt_core::driver::*;
//! # use nrt_core::lnc::CoreBitmap;
//! # #[derive(Debug)] struct E;
//! # impl core::fmt::Display for E { fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { f.write_str("e") } }
//! # impl DriverError for E { fn kind(&self) -> ErrorKind { ErrorKind::Other } }
//! # struct Sim;
//! # impl Driver for Sim { type Error = E;
//! #   fn is_funtime(&self) -> bool { true }
//! #   fn register_soft_incompat_callback(&self, _: SoftIncompatCallback) -> Result<(), E> { Ok(()) }
//! #   fn discover(&self) -> Result<DeviceInfo, E> { Ok(DeviceInfo { device_count: 1, cores_per_device: 2, arch: Arch::V2, platform: Platform::Simulator }) }
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
//! let rt = Runtime::new(Sim);
//! assert_eq!(rt.guard().unwrap_err().status(), NrtStatus::Uninitialized);
//! rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
//! assert_eq!(rt.visible_vnc_count().unwrap(), 1);
//! rt.close();
//! ```
#![no_std]
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(feature = "alloc")]
#[allow(unused_extern_crates)]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

#[macro_use]
pub mod error;
pub mod config;
pub mod coredump;
pub mod driver;
pub mod fmt;
pub mod host;
pub mod lnc;
#[cfg(feature = "alloc")]
pub mod model;
#[cfg(feature = "alloc")]
pub mod neff;
pub mod reader;
#[cfg(feature = "alloc")]
pub mod registry;
pub mod runtime;
pub mod state;
pub mod status;
#[cfg(feature = "alloc")]
mod sync;
#[cfg(feature = "alloc")]
pub mod tensor;
pub mod version;

pub use config::{Config, LogLevel, VarSource};
pub use driver::Driver;
pub use error::{Error, Message, Result};
pub use fmt::Level;
pub use host::{Host, NoHost};
#[cfg(feature = "alloc")]
pub use runtime::{CompletionHook, ExecMode, ModelHandle, ModelRef, Xu};
pub use runtime::{FrameworkInfo, FrameworkType, Runtime, RuntimeOptions};
pub use state::InitState;
pub use status::{NrtStatus, status_as_str};
