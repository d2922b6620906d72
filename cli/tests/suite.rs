//! Integration tests: one module per file of this folder, built into one test binary (one
//! compile of what they share and one link, instead of one per file). Each file keeps its own
//! `mod common;` (resolved in this folder, as before).
//!
//! One file's tests: `cargo test -p nrt-cli --test suite -- asm::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "asm.rs"]
mod asm;
#[path = "backend.rs"]
mod backend;
#[path = "cli.rs"]
mod cli;
#[path = "emulate.rs"]
mod emulate;
#[path = "graph.rs"]
mod graph;
#[path = "guide.rs"]
mod guide;
#[path = "onnx.rs"]
mod onnx;
#[path = "onnx_int.rs"]
mod onnx_int;
#[path = "readme.rs"]
mod readme;
#[path = "report.rs"]
mod report;
