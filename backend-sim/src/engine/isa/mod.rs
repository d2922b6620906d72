//! The simulator's instruction set: engines, access patterns, instructions, DMA descriptors.
//! The binary encoding is in [`super::program`]; `docs/SIM_ISA.md` is the reference.
//!
//! * `pattern.rs` — memory spaces, access patterns and the regions they cover;
//! * `instr.rs` — the five engines, the instructions and their operand rules;
//! * `dma.rs` — DMA endpoints and descriptors, and the region an endpoint covers.

mod dma;
mod instr;
mod pattern;

pub use dma::{DmaDescriptor, DmaEndpoint};
pub use instr::{ActFunc, AluOp, Bias, EngineId, Instr, SemCmp};
pub use pattern::{AccessPattern, Dim, MAX_DIMS, MemKind, Region, Space, partition_start_ok};
