//! `nrt-core`: the `no_std` core of a Neuron Runtime (libnrt 2.31) facade.
//!
//! It owns the status codes, the four-state lifecycle guard, `init` / `close` orchestration,
//! configuration parsing, driver-compatibility negotiation, logical-core allocation, version
//! reporting and the core-dump path templater; with `alloc`, the NEFF parser and writer, the
//! model registry, load with the stage seam, tensors, and the synchronous and asynchronous
//! execute paths — written against the [`Driver`] trait and a small [`Host`] trait, never
//! against an OS. Nothing here reads the environment or a clock.
//!
//! ```
//! use nrt_core::{FrameworkType, NrtStatus, Runtime};
//! use nrt_core::driver::*;
//!
//! #[derive(Debug)]
//! struct Unsupported(&'static str);
//! impl core::fmt::Display for Unsupported {
//!     fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
//!         write!(f, "{} is not supported", self.0)
//!     }
//! }
//! impl DriverError for Unsupported {
//!     fn kind(&self) -> ErrorKind { ErrorKind::Unsupported }
//!     fn unsupported(operation: &'static str) -> Self { Unsupported(operation) }
//! }
//!
//! /// A funtime backend with one device of two cores and nothing else.
//! struct Sim;
//! impl Driver for Sim {
//!     type Error = Unsupported;
//!     fn is_funtime(&self) -> bool { true }
//!     fn discover(&self) -> Result<DeviceInfo, Unsupported> {
//!         Ok(DeviceInfo { device_count: 1, cores_per_device: 2, arch: Arch::V2, platform: Platform::Simulator })
//!     }
//! }
//!
//! let rt = Runtime::new(Sim);
//! assert_eq!(rt.guard().unwrap_err().status(), NrtStatus::Uninitialized);
//! rt.init(FrameworkType::NoFw, "", "", &[("NEURON_RT_NUM_CORES", "1")]).unwrap();
//! assert_eq!(rt.visible_lnc_count().unwrap(), 1);
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
pub mod bitmap;
pub mod config;
pub mod coredump;
pub mod device;
pub mod driver;
#[cfg(feature = "alloc")]
pub mod events;
pub mod fmt;
pub mod host;
pub mod io;
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
// Without `alloc` only the lifecycle's lock and atomics use it.
#[cfg_attr(not(feature = "alloc"), allow(dead_code, unused_imports))]
mod sync;
#[cfg(feature = "alloc")]
pub mod tensor;
pub mod topology;
pub mod version;

pub use bitmap::CoreBitmap;
pub use config::{Config, LogLevel, VarSource};
pub use driver::Driver;
pub use error::{Error, Message, Result};
pub use fmt::Level;
pub use host::{Host, NoHost, NoPlatform, Platform};
#[cfg(feature = "alloc")]
pub use runtime::{CompletionHook, ExecMode, ModelHandle, ModelRef, Xu};
pub use runtime::{FrameworkInfo, FrameworkType, ReadyMirror, Runtime, RuntimeOptions};
pub use state::InitState;
pub use status::{NrtStatus, status_as_str};
pub use topology::Topology;
