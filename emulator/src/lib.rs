//! `nrt-emu`: a simulated Neuron device behind the **real** driver ABI.
//!
//! Threads filtered by [`install_filter`] issue ordinary system calls on ordinary files
//! (`root/dev/neuronN`, sparse regular files); a seccomp filter routes the driver's ioctls
//! (type byte `'N'`) and the `openat`/`close` of those files to a supervisor
//! ([`Emulator::serve`]), which answers them at the syscall boundary as the kernel driver
//! (`neuron.ko` 2.24.7.0) would, backed by the simulator's device model (`nrt-sim`: one
//! [`nrt_sim::SimDriver`] per attached process and device). `nrt-linux` runs unmodified
//! against it.
//!
//! * Argument structs are decoded through field tables of the emulator's own ([`abi`]),
//!   checked against the ABI JSON by `tests/abi_tables.rs`.
//! * Host-memory chunks and notification queues live in the device node's file: a host
//!   chunk's PA and `mmap_offset` are its offset in the file, so the target's
//!   `mmap(fd, mmap_offset)` maps the very bytes the emulator reads and writes. Device
//!   chunks live in the simulated HBM, at PAs from 2^48 up.
//! * The launch convention of `docs/LINUX_BACKEND.md` (version 1) runs simulator programs.
//! * DMA queue set-up (`DMA_QUEUE_INIT(_BATCH)`, `DMA_QUEUE_RELEASE`,
//!   `DMA_COPY_DESCRIPTORS64`) follows the driver's argument rules without running a DMA
//!   engine; each core's semaphore block (`RESOURCE_MMAP_INFO`) lives in the node's file and
//!   is kept equal to what the semaphore and event requests see, so its `mmap` works natively.
//! * [`FaultPlan`] fails chosen requests; [`Accounting`] reports what is held and served.
//! * [`InProcess`] serves threads of the test process itself for `cargo test`.
//!
//! Linux only (x86_64, aarch64); dev-only.

pub mod abi;
mod config;
mod crwl;
mod emulator;
mod filter;
mod handlers;
mod harness;
mod launch;
mod lifecycle;
mod memory;
mod state;
mod target;
mod tree;

pub use config::{Accounting, EmuConfig, FaultPlan};
pub use emulator::Emulator;
pub use filter::install_filter;
pub use harness::{InProcess, InProcessConfig};
pub use tree::DRIVER_VERSION;

/// The PCI revision, architecture number and feature flags the emulated devices report.
pub mod identity {
    pub use crate::handlers::{FEATURE_FLAGS, PCI_REVISION};

    /// `NEURON_ARCH_*` of an instance family (2 for trn1/inf2, 3 for trn2).
    pub fn arch_number(instance: nrt_sim::Instance) -> u32 {
        crate::handlers::arch_number(instance)
    }
}

/// The launch convention's semaphore indices.
pub mod convention {
    pub use crate::launch::{SEM_COMPLETED, SEM_DOORBELL, SEM_MAILBOX_HI, SEM_MAILBOX_LO};
}
