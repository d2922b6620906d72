//! A cycle-level NeuronCore simulator: device memories, the five engine sequencers, 256
//! semaphores, 16 DMA engines × 16 queues, the published NKI cost rules, deterministic
//! execution, hazard detection and timeline traces.
//!
//! Each core is modelled with its generation's published figures ([`CoreSpec`]):
//! NeuronCore-v2 on inf2 and trn1, NeuronCore-v3 (clocks, 28 MiB SBUF, DMA and HBM rates, no
//! shared engine ports) on trn2.
//!
//! * [`Program`] — a versioned, self-describing program ("NEFF-lite"): named HBM tensors, one
//!   instruction stream per engine, a DMA descriptor table, initial semaphores.
//!   [`Program::to_bytes`] / [`Program::from_bytes`]; the format and the ISA are documented in
//!   `docs/SIM_ISA.md`. Format 1.1 adds the instructions models need, named and behaving like
//!   `nki.isa` (chained tensor–scalar operations, reductions, `Activate` with the common
//!   activation functions, transposes, masks, layernorm statistics, scans, top-8, block DMA
//!   with casts and transposes), ALU operations ([`AluOp`]) and NKI's engine assignment; a
//!   program that uses none of it is a 1.0 program, written, checked and run exactly as before.
//! * [`ProgramBuilder`] and [`kernels`] — emit programs (tiled matmul, elementwise, bias +
//!   activation, two-layer MLP).
//! * [`Device`] — sparse HBM with capacity accounting and per-core SBUF/PSUM; load a program,
//!   write and read its tensors by name, or run it with tensors bound to other HBM addresses
//!   ([`Device::execute_bound`], how the simulator driver runs a model on the caller's
//!   tensors).
//! * [`ExecReport`] — status, ticks, per-unit [`Counters`], notifications, hazards and the
//!   event log; [`trace::chrome_trace_json`] turns it into a Chrome/Perfetto trace.
//!
//! Timing is the cost-rule model [`TIMING_MODEL`]; it is **not validated against hardware**
//! ([`VALIDATED_AGAINST_HW`] is `false`). Numerics are bit-reproducible on every machine.
//!
//! ```
//! use nrt_sim::Instance;
//! use nrt_sim::engine::{Device, ExecOptions, kernels, DType, encode_f32, decode_f32};
//!
//! let program = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
//! let dev = Device::new(Instance::Trn1);
//! let lp = dev.load(0, program).unwrap();
//! let a = encode_f32(DType::F32, &[1.0; 32]);
//! let b = encode_f32(DType::F32, &[2.0; 32]);
//! let (outs, report) = dev.run(&lp, &[("a", &a), ("b", &b)], &ExecOptions::default()).unwrap();
//! assert_eq!(decode_f32(DType::F32, &outs[0].1), vec![3.0; 32]);
//! assert!(report.ticks > 0 && !report.validated_against_hw);
//! ```

mod act;
mod builder;
mod device;
mod dtype;
mod exec;
mod isa;
pub mod kernels;
mod math;
mod memory;
mod nan;
mod program;
#[cfg(test)]
mod run_tests;
mod shadow;
pub mod share;
mod spec;
pub mod trace;
#[cfg(test)]
mod whole_tests;

pub use act::{
    erf_f64, erfc_f64, gelu_erf_f64, log_f64, log1p_f64, pow_f64, rsqrt_f64, sigmoid_f64, silu_f64,
    softplus_f64,
};
pub use builder::{DmaStep, LoopId, ProgramBuilder, SemAlloc};
pub use device::{CoreMemRef, Device, LoadedProgram, Outputs, program_runs};
pub use dtype::{
    DType, bf16_to_f32, decode_f32, encode_f32, f16_to_f32, f32_to_bf16, f32_to_f16, f32_to_i32,
    round_through,
};
pub use exec::{
    Access, Actor, Counters, Event, EventKind, ExecOptions, ExecReport, Hazard, Notification,
    TICKS_PER_SECOND, TIMING_MODEL, Track, VALIDATED_AGAINST_HW, timing,
};
pub use isa::{
    AccessPattern, ActFn, ActFunc, ActReduce, AluOp, BN_STATS_FMAX, Bias, Dim, DmaBlock,
    DmaDescriptor, DmaEndpoint, DynTerm, EngineId, Footprint, Instr, LOOP_REGS, MAX_DIMS, MemKind,
    Operand, Region, ScalarStep, SemCmp, Space, TOP8_FREE_RANGE, TermSlot, activate,
    partition_start_ok,
};
pub use math::{exp_f64, gelu_f64, gemm_whole_depth, tanh_f64, tensor_matmul};
pub use memory::{
    DMA_ENGINES, DMA_QUEUES, HBM_PAGE_BYTES, Hbm, OnChip, PSUM_BANK_BYTES, PSUM_BANKS,
    PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITION_BYTES, SBUF_PARTITIONS, SEMAPHORES,
};
pub use nan::CANONICAL_NAN;
pub use program::{
    FORMAT_MAJOR, FORMAT_MINOR, MAGIC, MAX_DESCRIPTORS, MAX_DYNAMIC_INSTRS, MAX_LOOP_COUNT,
    MAX_NAME_BYTES, MAX_RANK, MAX_STREAM_INSTRS, MAX_TENSOR_BYTES, MAX_TENSORS, MAX_TERMS, Program,
    TensorDecl, TensorKind, assemble, disassemble, reroll,
};
pub use spec::{CoreSpec, MAX_SBUF_PARTITION_BYTES, NEURONCORE_V2, NEURONCORE_V3, TICK_MHZ};
