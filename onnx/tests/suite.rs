//! Integration tests: one module per file of this folder, built into one test binary (one
//! compile of what they share and one link, instead of one per file). Each file keeps its own
//! `mod common;` (resolved in this folder, as before).
//!
//! One file's tests: `cargo test -p nrt-onnx --test suite -- fusions::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "fusions.rs"]
mod fusions;
#[path = "int_outputs.rs"]
mod int_outputs;
#[path = "io_types.rs"]
mod io_types;
#[path = "models.rs"]
mod models;
#[path = "ops.rs"]
mod ops;
