//! `nrt-linux`: an [`nrt_core::Driver`] over the AWS Neuron kernel driver (`neuron.ko`),
//! through `/dev/neuronN` with raw ioctls and sysfs.
//!
//! # What each `Driver` method does
//!
//! | `Driver` method | how |
//! |---|---|
//! | `discover` | count the `neuronN` nodes of the device directory (the run of consecutive indices from the lowest); architecture and PCI revision through `DEVICE_BASIC_INFO` on an `O_WRONLY` fd of the lowest node (sysfs `info/architecture/{device_name,instance_type}` if the ioctl fails); cores per device from sysfs `core_count`, else from the architecture (V1 4, V2 2, V3 8); revision 255 (QEMU) or 240 (emulator) means a simulator platform |
//! | `driver_version` | parse `/sys/module/neuron/version` (`2.24.7.0` → 2.24); no ioctl returns it |
//! | `compatible_version` | `COMPATIBLE_VERSION` |
//! | `reserve_cores` / `release_cores` | `CRWL_NC_RANGE_MARK_EXT0` / `UNMARK_EXT0` when `DRIVER_INFO_GET` reports `BIG_CORE_MAPS`, else the legacy 64-core `CRWL_NC_RANGE_MARK` / `UNMARK` (a driver without `DRIVER_INFO_GET` has no flags); `EBUSY` is "unavailable" with the driver's longest free run |
//! | `init_cores` | open each device holding the cores `O_RDWR` (attaching the process); with `reset_cores`, `NC_RESET` + `NC_RESET_READY` (waiting on the request id the driver wrote back: the process's tgid in the driver's PID namespace; a failed or interrupted wait, reported in `result`, is an error); then per core `CINIT_SET_STATE` STARTED, `NOTIFICATIONS_INIT_V2` (4 KiB host queue, mapped read-only), a 64 KiB mailbox (`MEM_ALLOC_V2MT64` `MISC_HOST`, `MEM_GET_EXTENDED_INFO`, mapped read/write), its PA in semaphores 250/251 (`SEMAPHORE_WRITE`), `CINIT_SET_STATE` COMPLETED (when this call started the core's init) |
//! | `start_exec_ready` | a no-op: the launch convention needs no exec-ready program |
//! | `shutdown_cores` | unmap each core's queue and mailbox, `MEM_FREE` the mailbox, close the `O_RDWR` fds nothing else uses (device memory and staged models keep theirs) |
//! | `stage_subgraph` | under the core's model lock (`CRWL_WRITER_ENTER` with a 32-byte id derived from the model name, `CRWL_WRITER_DOWNGRADE`, `CRWL_READER_EXIT`), write the stage image into a `CODE_DEVICE` chunk (`MEM_ALLOC_V2MT64`, `MEM_BUF_COPY64`, `MEM_GET_EXTENDED_INFO`); a compiler NEFF only takes the lock |
//! | `stop_model` / `unstage_model` | mark stopped / `MEM_FREE` the image chunk |
//! | `alloc_device` / `free_device` | `MEM_ALLOC_V2MT64` (`TENSORS_DEVICE`, HBM 0, 64-byte aligned) + `MEM_GET_EXTENDED_INFO`: the buffer's address is the chunk's PA / `MEM_FREE` |
//! | `write_device` / `read_device` | `MEM_BUF_COPY64` (at most 1 GiB a request) |
//! | `copy_device` / `memset_device` | `MEM_COPY64` (through host memory between devices) / `MEMSET64` |
//! | `submit` | per subgraph, under the core's launch lock and a read reference of its model lock (`CRWL_READER_ENTER`, or `WRITER_ENTER` + `DOWNGRADE` when another model is current; `CRWL_READER_EXIT` after): the execution descriptor into the mailbox, `SEMAPHORE_INCREMENT` of the doorbell (252), the notification slot polled with volatile loads until it holds the launch's `seq` (bounded by the timeout + 10 s), its status mapped to an error kind with the device's failure message; a compiler NEFF is `Unsupported` (its start/complete protocol and instruction encoding are not public) |
//! | `override_hw_revision` | a no-op |
//!
//! Without `MEM_ALLOC64` in the feature flags the memory requests fall back to their older
//! forms (`MEM_ALLOC_V2MT` with `MEM_ALLOC_TYPE`, else `MEM_ALLOC_V2`; the 32-bit
//! `MEM_BUF_COPY`, `MEM_COPY`, `MEMSET`), which refuse sizes and offsets of 4 GiB or more.
//!
//! All misc requests go through one `O_WRONLY` fd on the lowest device node, opened on first
//! use and kept until the [`LinuxDriver`] is dropped: the driver unmarks every core range of a
//! process when **any** of its `O_WRONLY` fds is closed, so no short-lived one is ever opened.
//! Core numbers of reservations are relative to the first core of that node.
//!
//! The kernel ABI (argument structs, request numbers, the fd and mapping types, and every
//! `unsafe` line) lives in [`sys`], with compile-time layout asserts; the test suite checks it
//! against the driver's machine-readable ABI description. System calls go through `rustix`
//! (`linux-raw-sys`), mapped memory through `volatile`. [`LinuxDriver::with_roots`] points the
//! backend at another device directory and sysfs root: device nodes may be regular files
//! (their `mmap` works natively; an emulator answers the ioctls), which is how the tests run
//! on machines without Neuron devices.
//!
//! # Not covered
//!
//! * Executing compiler NEFFs: `submit` refuses them (see above). Their instruction streams
//!   are not copied to the device (`DMA_COPY_DESCRIPTORS64` / `PROGRAM_ENGINE_NC64`): where
//!   they go and how an engine is started on them is the same unpublished protocol.
//! * DMA rings and queues (`DMA_QUEUE_INIT_BATCH`): the launch convention moves no data by
//!   DMA queue, and the driver's own copies (`MEM_BUF_COPY*`, `MEM_COPY*`) set up theirs.
//! * Containers that expose non-consecutive device nodes (only the first consecutive run is
//!   used, reported through the soft-incompatibility callback), `HOST_DEVICE_ID` mapping.
//! * Nothing here has been validated on Neuron hardware yet; on hardware a launch gets no
//!   completion (a Neuron device does not run simulator programs) and times out.
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
