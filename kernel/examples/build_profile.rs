//! Builds one library kernel at the benchmark's full size and prints its instruction count
//! and a hash of its disassembly: a harness for profiling the build (`valgrind
//! --tool=callgrind target/release/examples/build_profile matmul`) and for checking that a
//! change to the synchronisation or the reroll pass leaves the emitted program unchanged.
//!
//! `cargo run --release -p nrt-kernel --example build_profile -- <matmul|attention8|all>`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use nrt_kernel::library::{attention, matmul, softmax, transpose};
use nrt_kernel::{DType, Program};
use nrt_sim::engine::disassemble;

fn report(name: &str, p: &Program) {
    let mut h = DefaultHasher::new();
    disassemble(p).hash(&mut h);
    println!(
        "{name}: {} instructions, disassembly hash {:016x}",
        p.instruction_count(),
        h.finish()
    );
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let all = which == "all";
    if all || which == "matmul" {
        let p = matmul::build(
            2048,
            2048,
            2048,
            DType::Bf16,
            DType::F32,
            &matmul::MatmulOpts::default(),
        )
        .unwrap();
        report("matmul 2048³", &p);
    }
    if all || which == "attention8" {
        report(
            "attention 8 heads",
            &attention::build_attention(8, 2048, 128, DType::Bf16, false).unwrap(),
        );
    }
    if all {
        report(
            "attention 8 heads causal",
            &attention::build_attention(8, 2048, 128, DType::Bf16, true).unwrap(),
        );
        report(
            "attention 1 head",
            &attention::build_attention(1, 2048, 128, DType::Bf16, false).unwrap(),
        );
        report(
            "softmax 4096²",
            &softmax::build(4096, 4096, DType::F32, DType::F32).unwrap(),
        );
        report(
            "transpose 4096²",
            &transpose::build(4096, 4096, DType::F32).unwrap(),
        );
    }
}
