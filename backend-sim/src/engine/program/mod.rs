//! Programs: named HBM tensors, five instruction streams, a DMA descriptor table and initial
//! semaphore values; and their versioned binary format.
//!
//! `Program::from_bytes` validates everything and never panics: counts are checked against
//! the bytes that remain before anything is reserved, and every limit below is enforced.
//!
//! * `mod.rs` — the program types, the format's constants and [`Program::validate`];
//! * `descriptors.rs` — the rules of DMA descriptors;
//! * `stationary.rs` — the TensorE stationary/moving pairing, through loops;
//! * `loops.rs` — loops and dynamic terms: their rules and the executor's plan;
//! * `encode.rs`, `encode_instr.rs` — the writer ([`Program::to_bytes`]);
//! * `decode.rs`, `decode_instr.rs` — the reader ([`Program::from_bytes`]);
//! * `text/` — the text form ([`disassemble`], [`assemble`]).
//!
//! Versions: format 1.1 adds instructions, ALU operations, engine assignments, block DMA
//! descriptors, loops and dynamic terms to 1.0. [`Program::format_minor`] is the lowest
//! minor that can express a program; the writer writes it, and a 1.0 program is checked
//! under the 1.0 rules (exactly as before 1.1 existed), any other under the 1.1 rules (NKI's
//! engine assignment).

mod decode;
mod decode_instr;
mod descriptors;
mod encode;
mod encode_instr;
mod extent;
mod loops;
mod reroll;
mod stationary;
mod text;

use std::collections::BTreeSet;

use nrt_core::{Error, err};

use super::dtype::DType;
use super::isa::{DmaDescriptor, DynTerm, EngineId, Instr, check_engine, required_minor};
use super::memory::{DMA_ENGINES, DMA_QUEUES};
use descriptors::validate_descriptor;
pub(crate) use loops::{LoopPlan, check_instance};
pub use loops::{MAX_DYNAMIC_INSTRS, MAX_LOOP_COUNT, MAX_TERMS};
pub use reroll::reroll;
use stationary::Pairing;
pub use text::{assemble, disassemble};

/// The 8-byte magic that opens a serialized program.
pub const MAGIC: [u8; 8] = *b"NRTSIMPG";
/// Major version of the format this build writes and reads.
pub const FORMAT_MAJOR: u16 = 1;
/// Newest minor version of the format this build reads and writes (readers accept any minor
/// of their major; the writer writes the lowest minor that expresses the program,
/// [`Program::format_minor`]).
pub const FORMAT_MINOR: u16 = 1;
/// Most tensors in a program.
pub const MAX_TENSORS: usize = 4096;
/// Longest tensor or program name, bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Highest tensor rank.
pub const MAX_RANK: usize = 8;
/// Largest tensor, bytes (1 TiB; the device capacity applies at load).
pub const MAX_TENSOR_BYTES: u64 = 1 << 40;
/// Most instructions in one stream.
pub const MAX_STREAM_INSTRS: usize = 1 << 22;
/// Most DMA descriptors in a program.
pub const MAX_DESCRIPTORS: usize = 1 << 22;

const SEC_NAME: u32 = 1;
const SEC_TENSORS: u32 = 2;
const SEC_DESCRIPTORS: u32 = 3;
const SEC_SEM_INIT: u32 = 4;
/// Dynamic terms (format 1.1; written only when the program has some).
const SEC_TERMS: u32 = 5;
const SEC_STREAM_BASE: u32 = 0x10;
/// Sections whose tag has this bit set may be skipped by readers that do not know them.
const SEC_OPTIONAL: u32 = 0x8000_0000;

/// The role of an HBM tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// Written by the caller before execution.
    Input,
    /// Read by the caller after execution.
    Output,
    /// Initialised from the program's data at load.
    Const,
    /// Device scratch, zero at load.
    Scratch,
}

impl TensorKind {
    const fn code(self) -> u8 {
        match self {
            TensorKind::Input => 0,
            TensorKind::Output => 1,
            TensorKind::Const => 2,
            TensorKind::Scratch => 3,
        }
    }
    const fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(TensorKind::Input),
            1 => Some(TensorKind::Output),
            2 => Some(TensorKind::Const),
            3 => Some(TensorKind::Scratch),
            _ => None,
        }
    }
    /// Name.
    pub const fn name(self) -> &'static str {
        match self {
            TensorKind::Input => "input",
            TensorKind::Output => "output",
            TensorKind::Const => "const",
            TensorKind::Scratch => "scratch",
        }
    }
}

/// A named HBM tensor of a program (row-major, little-endian elements).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorDecl {
    /// Unique name; I/O binds by it.
    pub name: String,
    /// Role.
    pub kind: TensorKind,
    /// Element type.
    pub dtype: DType,
    /// Shape (rank 0..=8).
    pub shape: Vec<u64>,
    /// Initial contents of a `Const` tensor (exactly its size); empty otherwise.
    pub data: Vec<u8>,
}

impl TensorDecl {
    /// Elements (product of the shape; `None` on overflow).
    pub fn elems(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Size in bytes (`None` on overflow).
    pub fn size_bytes(&self) -> Option<u64> {
        self.elems()?.checked_mul(self.dtype.size() as u64)
    }
}

/// A simulator program ("NEFF-lite").
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// Free-form name.
    pub name: String,
    /// HBM tensors.
    pub tensors: Vec<TensorDecl>,
    /// One instruction stream per engine, indexed by [`EngineId::index`].
    pub streams: [Vec<Instr>; 5],
    /// DMA descriptors referenced by `DmaTrigger`.
    pub descriptors: Vec<DmaDescriptor>,
    /// Initial semaphore values (unlisted semaphores start at 0).
    pub sem_init: Vec<(u8, u32)>,
    /// Dynamic terms of instructions inside loops (format 1.1), sorted by engine, pc, slot
    /// and register.
    pub terms: Vec<DynTerm>,
}

impl Program {
    /// The stream of `engine`.
    pub fn stream(&self, engine: EngineId) -> &[Instr] {
        self.streams
            .get(engine.index())
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Index of the tensor called `name`.
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// Total instructions over all streams.
    pub fn instruction_count(&self) -> usize {
        self.streams.iter().map(Vec::len).sum()
    }

    /// The lowest format minor that can express this program: 0 when it uses only what
    /// format 1.0 has (its instructions, ALU operation codes, engine assignments and byte
    /// descriptors; no loops, no dynamic terms), 1 otherwise.
    pub fn format_minor(&self) -> u16 {
        let streams = EngineId::ALL.iter().any(|&engine| {
            self.stream(engine)
                .iter()
                .any(|ins| required_minor(ins, engine) > 0)
        });
        u16::from(
            streams
                || !self.terms.is_empty()
                || self.descriptors.iter().any(DmaDescriptor::is_block),
        )
    }

    /// Checks every rule of the format: names, sizes, engines, operands (partition rules and
    /// bounds), DMA descriptors and triggers, and the TensorE stationary/moving pairing, under
    /// the rules of [`Program::format_minor`]. Failures are `NRT_INVALID` with a message
    /// naming the offending item.
    pub fn validate(&self) -> Result<(), Error> {
        self.validate_as(self.format_minor())
    }

    /// [`Program::validate`] under the rules of format minor `minor` (1.0's engine
    /// assignments for 0, NKI's for 1 and above).
    pub(crate) fn validate_as(&self, minor: u16) -> Result<(), Error> {
        if self.name.len() > MAX_NAME_BYTES {
            return Err(err!(
                Invalid,
                "program name longer than {MAX_NAME_BYTES} bytes"
            ));
        }
        if self.tensors.len() > MAX_TENSORS {
            return Err(err!(Invalid, "more than {MAX_TENSORS} tensors"));
        }
        let mut names = BTreeSet::new();
        let mut sizes = Vec::with_capacity(self.tensors.len());
        for (i, t) in self.tensors.iter().enumerate() {
            if t.name.is_empty() || t.name.len() > MAX_NAME_BYTES {
                return Err(err!(
                    Invalid,
                    "tensor {i}: name must be 1..={MAX_NAME_BYTES} bytes"
                ));
            }
            if !names.insert(t.name.as_str()) {
                return Err(err!(Invalid, "tensor {i}: duplicate name '{}'", t.name));
            }
            if t.shape.len() > MAX_RANK {
                return Err(err!(Invalid, "tensor '{}': rank above {MAX_RANK}", t.name));
            }
            let size = match t.size_bytes() {
                Some(s) if s <= MAX_TENSOR_BYTES => s,
                _ => {
                    return Err(err!(
                        Invalid,
                        "tensor '{}': size exceeds {MAX_TENSOR_BYTES} bytes",
                        t.name
                    ));
                }
            };
            if t.kind == TensorKind::Const {
                if t.data.len() as u64 != size {
                    return Err(err!(
                        Invalid,
                        "tensor '{}': constant data is {} bytes, the tensor {size}",
                        t.name,
                        t.data.len()
                    ));
                }
            } else if !t.data.is_empty() {
                return Err(err!(
                    Invalid,
                    "tensor '{}': only constants carry data",
                    t.name
                ));
            }
            sizes.push(size);
        }
        if self.descriptors.len() > MAX_DESCRIPTORS {
            return Err(err!(Invalid, "more than {MAX_DESCRIPTORS} DMA descriptors"));
        }
        for (i, d) in self.descriptors.iter().enumerate() {
            validate_descriptor(d, &sizes)
                .map_err(|e| err!(Invalid, "DMA descriptor {i}: {}", e.message()))?;
        }
        let mut sems = BTreeSet::new();
        for &(s, _) in &self.sem_init {
            if !sems.insert(s) {
                return Err(err!(Invalid, "semaphore {s} initialised twice"));
            }
        }
        for engine in EngineId::ALL {
            let stream = self.stream(engine);
            if stream.len() > MAX_STREAM_INSTRS {
                return Err(err!(
                    Invalid,
                    "{engine}: more than {MAX_STREAM_INSTRS} instructions"
                ));
            }
            match stream.last() {
                Some(Instr::Halt) => {}
                _ => {
                    return Err(err!(Invalid, "{engine}: the stream must end with Halt"));
                }
            }
            // The stationary pairing of a stream with loops is checked through its loops
            // (`validate_loops`), after the loop structure.
            let looped = stream.iter().any(Instr::is_loop);
            let mut pairing = Pairing::default();
            for (pc, ins) in stream.iter().enumerate() {
                let ctx = |e: Error| {
                    err!(
                        Invalid,
                        "{engine} pc {pc} ({}): {}",
                        ins.name(),
                        e.message()
                    )
                };
                check_engine(ins, engine, minor)
                    .map_err(|e| err!(Invalid, "{engine} pc {pc}: {}", e.message()))?;
                if matches!(ins, Instr::Halt) && pc + 1 != stream.len() {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: Halt must be the last instruction"
                    ));
                }
                ins.validate_operands().map_err(ctx)?;
                if let Instr::DmaTrigger {
                    dma,
                    queue,
                    first,
                    count,
                    ..
                } = *ins
                {
                    if usize::from(dma) >= DMA_ENGINES || usize::from(queue) >= DMA_QUEUES {
                        return Err(err!(
                            Invalid,
                            "{engine} pc {pc}: DMA engine {dma} queue {queue} does not exist \
                             (16 engines x 16 queues)"
                        ));
                    }
                    if count == 0
                        || u64::from(first) + u64::from(count) > self.descriptors.len() as u64
                    {
                        return Err(err!(
                            Invalid,
                            "{engine} pc {pc}: descriptors [{first}, {first}+{count}) are not \
                             in the table of {}",
                            self.descriptors.len()
                        ));
                    }
                }
                if !looped {
                    pairing.step(engine, pc, ins)?;
                }
            }
        }
        self.validate_loops(minor, &sizes)?;
        Ok(())
    }
}

/// Instruction opcodes of the binary format.
mod op {
    pub(super) const SEM_WAIT: u8 = 0x01;
    pub(super) const SEM_INC: u8 = 0x02;
    pub(super) const SEM_SET: u8 = 0x03;
    pub(super) const DMA_TRIGGER: u8 = 0x04;
    pub(super) const NOTIFY: u8 = 0x05;
    pub(super) const HALT: u8 = 0x06;
    // Format 1.1 control.
    pub(super) const LOOP_BEGIN: u8 = 0x07;
    pub(super) const LOOP_END: u8 = 0x08;
    pub(super) const LOAD_STATIONARY: u8 = 0x10;
    pub(super) const MULTIPLY_MOVING: u8 = 0x11;
    pub(super) const TENSOR_TENSOR: u8 = 0x20;
    pub(super) const TENSOR_SCALAR: u8 = 0x21;
    pub(super) const ACTIVATION: u8 = 0x22;
    pub(super) const TENSOR_COPY: u8 = 0x23;
    pub(super) const MEMSET: u8 = 0x30;
    pub(super) const IOTA: u8 = 0x31;
    // Format 1.1.
    pub(super) const TENSOR_SCALAR_CHAIN: u8 = 0x24;
    pub(super) const SCALAR_TENSOR_TENSOR: u8 = 0x25;
    pub(super) const TENSOR_REDUCE: u8 = 0x26;
    pub(super) const ACTIVATE: u8 = 0x27;
    pub(super) const RECIPROCAL: u8 = 0x28;
    pub(super) const TRANSPOSE: u8 = 0x29;
    pub(super) const RANGE_SELECT: u8 = 0x2A;
    pub(super) const BN_STATS: u8 = 0x2B;
    pub(super) const BN_AGGR: u8 = 0x2C;
    pub(super) const TENSOR_TENSOR_SCAN: u8 = 0x2D;
    pub(super) const MAX8: u8 = 0x2E;
    pub(super) const FIND_INDEX8: u8 = 0x2F;
    pub(super) const AFFINE_SELECT: u8 = 0x32;
}
