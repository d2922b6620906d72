//! Integration tests: one module per file of this folder, built into one test binary (one
//! compile of what they share and one link, instead of one per file). Each file keeps its own
//! `mod common;` (resolved in this folder, as before). `processes.rs` stays a binary of its
//! own: it runs itself again as the second process, by test name.
//!
//! One file's tests: `cargo test -p nrt-emu --test suite -- abi_tables::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "abi_tables.rs"]
mod abi_tables;
#[path = "dma.rs"]
mod dma;
#[path = "harness.rs"]
mod harness;
#[path = "launch.rs"]
mod launch;
#[path = "linux_driver.rs"]
mod linux_driver;
#[path = "linux_e2e.rs"]
mod linux_e2e;
#[path = "memory.rs"]
mod memory;
#[path = "misc.rs"]
mod misc;
