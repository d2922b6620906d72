//! The simulator's instruction set: engines, access patterns, instructions, DMA descriptors.
//! The binary encoding is in [`super::program`]; `docs/SIM_ISA.md` is the reference.
//!
//! * `pattern.rs` — memory spaces, access patterns and the regions they cover;
//! * `alu.rs` — the ALU operations and their exact semantics;
//! * `actfunc.rs`, `ops.rs` — activation functions (1.0's, 1.1's and their evaluation) and
//!   scalar operands;
//! * `instr.rs` — the five engines, the instructions and their memory accesses;
//! * `validate.rs` — the operand rules of every instruction;
//! * `rules.rs` — engine assignment and format versions;
//! * `dma.rs` — DMA endpoints, blocks and descriptors, and the region an endpoint covers;
//! * `terms.rs` — loops' iteration registers and dynamic terms, and the instance of an
//!   instruction in one iteration.

mod actfunc;
mod alu;
mod dma;
mod instr;
mod ops;
mod pattern;
mod rules;
mod terms;
mod validate;

pub use actfunc::ActFunc;
pub use alu::AluOp;
pub(crate) use alu::max_num;
pub use dma::{DmaBlock, DmaDescriptor, DmaEndpoint};
pub use instr::{EngineId, Instr, SemCmp};
pub use ops::{ActFn, ActReduce, Bias, Operand, ScalarStep, activate};
pub use pattern::{AccessPattern, Dim, MAX_DIMS, MemKind, Region, Space, partition_start_ok};
pub(crate) use rules::{check_engine, required_minor};
pub(crate) use terms::{DmaShift, instance, regs_text, shift_descriptor};
pub use terms::{DynTerm, LOOP_REGS, TermSlot};
pub use validate::{BN_STATS_FMAX, TOP8_FREE_RANGE};
