//! Integration tests: one module per file of this folder, built into one test binary (one
//! compile of what they share and one link, instead of one per file). Each file keeps its own
//! `mod common;` (resolved in this folder, as before).
//!
//! The files that set environment variables, install a logger, fork, or drive the C library's
//! process-wide runtime stay binaries of their own (tests/Cargo.toml names them): in one process
//! they would see each other's state.
//!
//! One file's tests: `cargo test -p nrt-tests --test suite -- allocation::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "allocation.rs"]
mod allocation;
#[path = "config.rs"]
mod config;
#[path = "conformance_linux.rs"]
mod conformance_linux;
#[path = "conformance_sim.rs"]
mod conformance_sim;
#[path = "coredump.rs"]
mod coredump;
#[path = "linux_compiler_neff.rs"]
mod linux_compiler_neff;
#[path = "neff.rs"]
mod neff;
#[path = "robustness.rs"]
mod robustness;
#[path = "sim_models.rs"]
mod sim_models;
#[path = "version.rs"]
mod version;
