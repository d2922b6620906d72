//! The simulator's integration tests: one module per file of this folder, built into one test
//! binary (one compile of what they share and one link, instead of one per file). Each file keeps
//! its own `mod common;` / `mod ops_common;` (resolved in this folder, as before). `lnc2.rs` and
//! `engine_share.rs` stay binaries of their own: the sanitizer runs (.ci/sanitizers.sh) build
//! just those.
//!
//! One file's tests: `cargo test -p nrt-sim --test suite -- engine_alu::`.

// Each file declares its shared helpers itself (`mod common;`), as it did as a binary of its own.
#![allow(clippy::duplicate_mod)]

#[path = "engine_act.rs"]
mod engine_act;
#[path = "engine_alu.rs"]
mod engine_alu;
#[path = "engine_calibration.rs"]
mod engine_calibration;
#[path = "engine_format.rs"]
mod engine_format;
#[path = "engine_generations.rs"]
mod engine_generations;
#[path = "engine_hazard_exact.rs"]
mod engine_hazard_exact;
#[path = "engine_hazard_memo.rs"]
mod engine_hazard_memo;
#[path = "engine_isa11.rs"]
mod engine_isa11;
#[path = "engine_kernels.rs"]
mod engine_kernels;
#[path = "engine_loops_format.rs"]
mod engine_loops_format;
#[path = "engine_loops_matmul.rs"]
mod engine_loops_matmul;
#[path = "engine_numerics.rs"]
mod engine_numerics;
#[path = "engine_reduce.rs"]
mod engine_reduce;
#[path = "engine_reroll.rs"]
mod engine_reroll;
#[path = "engine_select.rs"]
mod engine_select;
#[path = "engine_trace.rs"]
mod engine_trace;
#[path = "program_text.rs"]
mod program_text;
#[path = "program_text_loops.rs"]
mod program_text_loops;
#[path = "reports.rs"]
mod reports;
#[path = "reserve_scan.rs"]
mod reserve_scan;
#[path = "tensor_matmul.rs"]
mod tensor_matmul;
