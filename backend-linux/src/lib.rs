//! `nrt-linux`: an [`nrt_core::Driver`] over the AWS Neuron kernel driver (`neuron.ko`),
//! through `/dev/neuronN` with raw ioctls and sysfs.
//!
//! # What is covered
//!
//! The lifecycle capabilities of the `Driver` trait, i.e. what `nrt_init` / `nrt_close` need:
//!
//! | `Driver` method | how |
//! |---|---|
//! | `discover` | count the `neuronN` nodes of the device directory (the run of consecutive indices from the lowest); architecture and PCI revision through `DEVICE_BASIC_INFO` on an `O_WRONLY` fd of the lowest node (sysfs `info/architecture/{device_name,instance_type}` if the ioctl fails); cores per device from sysfs `core_count`, else from the architecture (V1 4, V2 2, V3 8); revision 255 (QEMU) or 240 (emulator) means a simulator platform |
//! | `driver_version` | parse `/sys/module/neuron/version` (`2.24.7.0` → 2.24); no ioctl returns it |
//! | `compatible_version` | `COMPATIBLE_VERSION` |
//! | `reserve_cores` / `release_cores` | `CRWL_NC_RANGE_MARK_EXT0` / `UNMARK_EXT0`, falling back to the legacy 64-core `CRWL_NC_RANGE_MARK` / `UNMARK` on `EINVAL`/`ENOTTY`; `EBUSY` is "unavailable" with the driver's longest free run |
//! | `init_cores` | open each device holding the cores `O_RDWR` (attaching the process); with `reset_cores`, `NC_RESET` + `NC_RESET_READY` of those cores |
//! | `shutdown_cores` | close those fds |
//! | `start_exec_ready`, `override_hw_revision` | no-ops (see their docs) |
//!
//! All misc requests go through one `O_WRONLY` fd on the lowest device node, opened on first
//! use and kept until the [`LinuxDriver`] is dropped: the driver unmarks every core range of a
//! process when **any** of its `O_WRONLY` fds is closed, so no short-lived one is ever opened.
//! Core numbers of reservations are relative to the first core of that node.
//!
//! The kernel ABI (argument structs, request numbers, the fd type and the one `unsafe` ioctl
//! call) lives in [`sys`], with compile-time layout asserts; the test suite checks it against
//! the driver's machine-readable ABI description. [`LinuxDriver::with_roots`] points the
//! backend at another device directory and sysfs root, which is how the tests run discovery
//! against a fake tree on machines without Neuron devices.
//!
//! # Not covered yet
//!
//! * Core-init state (`CINIT_SET_STATE`; the struct and request are defined), device memory,
//!   DMA rings and queues, model staging, the exec-ready program, submission and completion
//!   (notification queues). Those `Driver` methods keep the trait's default bodies, which fail
//!   with this backend's "not implemented by the Linux backend yet" error
//!   ([`ErrorKind::Unsupported`](nrt_core::driver::ErrorKind::Unsupported)).
//! * Containers that expose non-consecutive device nodes (only the first consecutive run is
//!   used, reported through the soft-incompatibility callback), `HOST_DEVICE_ID` mapping.
//! * Choosing the reservation variant from `DRIVER_INFO_GET` feature flags (it is learnt from
//!   the driver's answer instead); [`LinuxDriver::driver_info`] exposes the flags.
//! * Nothing here has been validated on Neuron hardware yet.
//!
//! The crate is empty on non-Linux targets.

#![cfg(target_os = "linux")]

mod bringup;
mod driver;
mod error;
mod exec;
mod image;
mod memory;
mod reserve;
mod resources;
pub mod sys;
mod sysfs;

pub use driver::{DEFAULT_DEV_DIR, DEFAULT_SYSFS_ROOT, LinuxDriver};
pub use error::LinuxError;
pub use sysfs::parse_driver_version;
