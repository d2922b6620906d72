//! The std host layer of the Neuron Runtime facade.
//!
//! `nrt-core` is `no_std`: it reads no environment, clock or OS state, and asks its
//! [`Host`](nrt_core::Host) for logging and fork detection. This crate supplies those services on
//! a hosted (Linux, std) target, for the C bindings and for Rust programs that embed the runtime:
//!
//! - [`EnvVars`]: a snapshot of the process's `NEURON_RT_*` variables, a
//!   [`VarSource`](nrt_core::VarSource) for [`Config::parse`](nrt_core::Config::parse).
//! - [`StdHost`]: a [`Host`](nrt_core::Host) that writes timestamped log lines to stderr (or a
//!   caller-supplied sink) with the [`StdPlatform`] services: `fork()` detected through a
//!   `pthread_atfork` child handler ([`register_fork_handlers`], [`fork_generation`]), a reader
//!   row per thread, parallel staging, the `membarrier` barrier. Hosts that log differently
//!   name [`StdPlatform`] as their platform and write to stderr with [`write_stderr`].
//! - [`CapturingHost`]: a [`Host`](nrt_core::Host) that records log records and simulates forks,
//!   for tests.
//! - [`coredump::CoreDumper`]: the core-dump forwarder, which expands the dump path templates and
//!   runs the external `neuron-dump` helper.
//!
//! `unsafe` code is limited to the libc calls of one private module (`sys`) and the promise
//! behind [`reader_id`] (each thread its own registry reader row).

mod env;
mod fork;
mod host;
mod sys;
mod time;

pub mod tls;

pub mod coredump;

pub use coredump::CoreDumper;
pub use env::EnvVars;
pub use fork::{fork_generation, register_fork_handlers};
pub use host::{
    CapturingHost, StdHost, StdPlatform, heavy_barrier, reader_id, run_parallel, write_stderr,
};
pub use time::{dump_datetime, log_timestamp};
