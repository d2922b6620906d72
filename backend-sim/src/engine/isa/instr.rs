//! The five engines ([`EngineId`]), the instructions ([`Instr`]) with their ALU operations,
//! activation functions and semaphore comparisons, which engine runs each instruction, and the
//! operand rules every instruction must satisfy.

use core::fmt;

use nrt_core::{Error, err};

use super::pattern::{AccessPattern, Space};
use crate::engine::dtype::DType;
use crate::engine::memory::PSUM_BANK_BYTES;

/// One of the five instruction sequencers of a NeuronCore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineId {
    /// The Sync engine (SP): control instructions only, mostly DMA triggers.
    Sync = 0,
    /// TensorE: the 128×128 systolic array.
    Tensor = 1,
    /// VectorE.
    Vector = 2,
    /// ScalarE.
    Scalar = 3,
    /// GpSimdE.
    GpSimd = 4,
}

impl EngineId {
    /// The five engines in the simulator's fixed evaluation order.
    pub const ALL: [EngineId; 5] = [
        EngineId::Sync,
        EngineId::Tensor,
        EngineId::Vector,
        EngineId::Scalar,
        EngineId::GpSimd,
    ];

    /// Index in [`EngineId::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Display name (`"SyncE"`, `"TensorE"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            EngineId::Sync => "SyncE",
            EngineId::Tensor => "TensorE",
            EngineId::Vector => "VectorE",
            EngineId::Scalar => "ScalarE",
            EngineId::GpSimd => "GpSimdE",
        }
    }
}

impl fmt::Display for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a `SemWait` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemCmp {
    /// Proceed when the semaphore ≥ value.
    Ge,
    /// Proceed when the semaphore == value.
    Eq,
}

/// A binary ALU operation of `TensorTensor` / `TensorScalar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    /// a + b
    Add,
    /// a − b
    Sub,
    /// a × b
    Mul,
    /// max(a, b) (IEEE maxNum: a NaN operand yields the other)
    Max,
}

impl AluOp {
    /// Program-format code.
    pub const fn code(self) -> u8 {
        self as u8
    }
    /// From the program-format code.
    pub const fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(AluOp::Add),
            1 => Some(AluOp::Sub),
            2 => Some(AluOp::Mul),
            3 => Some(AluOp::Max),
            _ => None,
        }
    }
    /// Applies the operation to binary32 values.
    #[inline]
    pub fn apply_f32(self, a: f32, b: f32) -> f32 {
        match self {
            AluOp::Add => a + b,
            AluOp::Sub => a - b,
            AluOp::Mul => a * b,
            AluOp::Max => a.max(b),
        }
    }
    /// Applies the operation to int32 values (wrapping).
    #[inline]
    pub fn apply_i32(self, a: i32, b: i32) -> i32 {
        match self {
            AluOp::Add => a.wrapping_add(b),
            AluOp::Sub => a.wrapping_sub(b),
            AluOp::Mul => a.wrapping_mul(b),
            AluOp::Max => a.max(b),
        }
    }
}

/// The function of an `Activation`: `out = func(in * scale + bias)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFunc {
    /// x
    Identity,
    /// max(x, 0)
    Relu,
    /// eˣ
    Exp,
    /// tanh x
    Tanh,
    /// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    Gelu,
}

impl ActFunc {
    /// Program-format code.
    pub const fn code(self) -> u8 {
        self as u8
    }
    /// From the program-format code.
    pub const fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(ActFunc::Identity),
            1 => Some(ActFunc::Relu),
            2 => Some(ActFunc::Exp),
            3 => Some(ActFunc::Tanh),
            4 => Some(ActFunc::Gelu),
            _ => None,
        }
    }
    /// Name.
    pub const fn name(self) -> &'static str {
        match self {
            ActFunc::Identity => "identity",
            ActFunc::Relu => "relu",
            ActFunc::Exp => "exp",
            ActFunc::Tanh => "tanh",
            ActFunc::Gelu => "gelu",
        }
    }
}

/// The bias of an `Activation`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bias {
    /// One value for every element.
    Imm(f32),
    /// One value per partition: a `[partitions, 1]` access with the same partitions as the
    /// input.
    PerPartition(AccessPattern),
}

/// One instruction of an engine stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    /// Blocks the sequencer until semaphore `sem` compares true against `value`.
    SemWait {
        /// Semaphore index.
        sem: u8,
        /// Comparison.
        cmp: SemCmp,
        /// Operand.
        value: u32,
    },
    /// Adds `value` to semaphore `sem` (wrapping).
    SemInc {
        /// Semaphore index.
        sem: u8,
        /// Increment.
        value: u32,
    },
    /// Sets semaphore `sem` to `value`.
    SemSet {
        /// Semaphore index.
        sem: u8,
        /// New value.
        value: u32,
    },
    /// Enqueues descriptors `[first, first + count)` of the program's descriptor table as one
    /// transfer on queue `queue` of DMA engine `dma`; when its last descriptor completes, the
    /// DMA engine adds `inc` to semaphore `sem`.
    DmaTrigger {
        /// DMA engine (0..16).
        dma: u8,
        /// Queue of that engine (0..16).
        queue: u8,
        /// First descriptor.
        first: u32,
        /// Number of descriptors (≥ 1).
        count: u32,
        /// Semaphore updated on completion.
        sem: u8,
        /// Increment applied on completion (0: none).
        inc: u32,
    },
    /// Appends `payload` to the notification queue.
    Notify {
        /// Payload.
        payload: u32,
    },
    /// Stops the sequencer once its in-flight work is done.
    Halt,
    /// TensorE: loads the stationary operand, `[K partitions, M free]` (M ≤ 128).
    LoadStationary {
        /// SBUF source.
        src: AccessPattern,
    },
    /// TensorE: `dst[m, n] (+)= Σ_k stationary[k, m] · moving[k, n]` in fp32 into one PSUM bank.
    MultiplyMoving {
        /// SBUF `[K partitions, N free]` (N ≤ 512), same K and dtype as the stationary.
        moving: AccessPattern,
        /// PSUM fp32 `[M partitions, N contiguous]` inside one bank.
        dst: AccessPattern,
        /// Accumulate onto the bank (`true`) or overwrite it (`false`).
        accumulate: bool,
    },
    /// VectorE/ScalarE: `out = a op b` elementwise.
    TensorTensor {
        /// Operation.
        op: AluOp,
        /// First input.
        a: AccessPattern,
        /// Second input.
        b: AccessPattern,
        /// Output.
        out: AccessPattern,
    },
    /// VectorE/ScalarE: `out = src op scalar` elementwise.
    TensorScalar {
        /// Operation.
        op: AluOp,
        /// Input.
        src: AccessPattern,
        /// Scalar operand.
        scalar: f32,
        /// Output.
        out: AccessPattern,
    },
    /// VectorE/ScalarE: `out = func(src * scale + bias)`.
    Activation {
        /// Function.
        func: ActFunc,
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// Scale.
        scale: f32,
        /// Bias.
        bias: Bias,
    },
    /// VectorE/ScalarE: copies with dtype conversion (RNE).
    TensorCopy {
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
    },
    /// GpSimdE: fills `out` with a value (raw bits: an `int32` for int32 outputs, a binary32
    /// otherwise, converted with RNE).
    Memset {
        /// Output.
        out: AccessPattern,
        /// Value bits.
        bits: u32,
    },
    /// GpSimdE: `out[p, i] = base + p·partition_step + i·free_step` (int32 arithmetic,
    /// wrapping; `p` counts from the access's first partition, `i` over the flattened free
    /// pattern), converted to the output dtype.
    Iota {
        /// Output.
        out: AccessPattern,
        /// Value at the first element.
        base: i32,
        /// Step per partition.
        partition_step: i32,
        /// Step per free element.
        free_step: i32,
    },
}

impl Instr {
    /// The mnemonic.
    pub const fn name(&self) -> &'static str {
        match self {
            Instr::SemWait { .. } => "SemWait",
            Instr::SemInc { .. } => "SemInc",
            Instr::SemSet { .. } => "SemSet",
            Instr::DmaTrigger { .. } => "DmaTrigger",
            Instr::Notify { .. } => "Notify",
            Instr::Halt => "Halt",
            Instr::LoadStationary { .. } => "LoadStationary",
            Instr::MultiplyMoving { .. } => "MultiplyMoving",
            Instr::TensorTensor { .. } => "TensorTensor",
            Instr::TensorScalar { .. } => "TensorScalar",
            Instr::Activation { .. } => "Activation",
            Instr::TensorCopy { .. } => "TensorCopy",
            Instr::Memset { .. } => "Memset",
            Instr::Iota { .. } => "Iota",
        }
    }

    /// Whether this is a control instruction (runs on any sequencer in one tick).
    pub const fn is_control(&self) -> bool {
        matches!(
            self,
            Instr::SemWait { .. }
                | Instr::SemInc { .. }
                | Instr::SemSet { .. }
                | Instr::DmaTrigger { .. }
                | Instr::Notify { .. }
                | Instr::Halt
        )
    }

    /// Whether `engine` can execute this instruction.
    pub const fn runs_on(&self, engine: EngineId) -> bool {
        match self {
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt => true,
            Instr::LoadStationary { .. } | Instr::MultiplyMoving { .. } => {
                matches!(engine, EngineId::Tensor)
            }
            Instr::TensorTensor { .. }
            | Instr::TensorScalar { .. }
            | Instr::Activation { .. }
            | Instr::TensorCopy { .. } => matches!(engine, EngineId::Vector | EngineId::Scalar),
            Instr::Memset { .. } | Instr::Iota { .. } => matches!(engine, EngineId::GpSimd),
        }
    }

    /// Validates the operands of a data-path instruction (partition rules, bounds, shapes,
    /// dtypes). Control instructions are checked against the program in
    /// [`Program::validate`](crate::engine::Program::validate).
    pub fn validate_operands(&self) -> Result<(), Error> {
        match self {
            Instr::LoadStationary { src } => {
                src.validate("LoadStationary source")?;
                require_space(src, Space::Sbuf, "LoadStationary source")?;
                require_float(src, "LoadStationary source")?;
                if src.free_elems() > 128 {
                    return Err(err!(
                        Invalid,
                        "LoadStationary: stationary free size {} exceeds 128",
                        src.free_elems()
                    ));
                }
                Ok(())
            }
            Instr::MultiplyMoving { moving, dst, .. } => {
                moving.validate("MultiplyMoving moving")?;
                dst.validate("MultiplyMoving destination")?;
                require_space(moving, Space::Sbuf, "MultiplyMoving moving")?;
                require_float(moving, "MultiplyMoving moving")?;
                require_space(dst, Space::Psum, "MultiplyMoving destination")?;
                if dst.dtype != DType::F32 {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving destination: PSUM accumulation is fp32, not {}",
                        dst.dtype
                    ));
                }
                if moving.free_elems() > 512 {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving: moving free size {} exceeds 512",
                        moving.free_elems()
                    ));
                }
                if !dst.is_contiguous() || dst.free_elems() != moving.free_elems() {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving destination: must be {} contiguous fp32 per partition",
                        moving.free_elems()
                    ));
                }
                let (lo, hi) = dst.byte_range();
                if lo / PSUM_BANK_BYTES as i64 != (hi - 1) / PSUM_BANK_BYTES as i64 {
                    return Err(err!(
                        Invalid,
                        "MultiplyMoving destination: bytes [{lo}, {hi}) cross a 2 KiB PSUM bank"
                    ));
                }
                Ok(())
            }
            Instr::TensorTensor { a, b, out, .. } => {
                a.validate("TensorTensor input a")?;
                b.validate("TensorTensor input b")?;
                out.validate("TensorTensor output")?;
                same_shape(a, out, "TensorTensor input a")?;
                same_shape(b, out, "TensorTensor input b")
            }
            Instr::TensorScalar { src, out, .. } => {
                src.validate("TensorScalar input")?;
                out.validate("TensorScalar output")?;
                same_shape(src, out, "TensorScalar input")
            }
            Instr::Activation { src, out, bias, .. } => {
                src.validate("Activation input")?;
                out.validate("Activation output")?;
                same_shape(src, out, "Activation input")?;
                require_float(src, "Activation input")?;
                require_float(out, "Activation output")?;
                if let Bias::PerPartition(b) = bias {
                    b.validate("Activation bias")?;
                    if b.partitions != out.partitions || b.free_elems() != 1 {
                        return Err(err!(
                            Invalid,
                            "Activation bias: must be [{}, 1], got [{}, {}]",
                            out.partitions,
                            b.partitions,
                            b.free_elems()
                        ));
                    }
                    require_float(b, "Activation bias")?;
                }
                Ok(())
            }
            Instr::TensorCopy { src, out } => {
                src.validate("TensorCopy input")?;
                out.validate("TensorCopy output")?;
                same_shape(src, out, "TensorCopy input")
            }
            Instr::Memset { out, .. } => out.validate("Memset output"),
            Instr::Iota { out, .. } => out.validate("Iota output"),
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt => Ok(()),
        }
    }

    /// The accesses of a data-path instruction: `(pattern, is_write)`.
    pub(crate) fn accesses(&self) -> ([Option<(AccessPattern, bool)>; 3], usize) {
        let mut out = [None; 3];
        let mut n = 0;
        let mut push = |ap: AccessPattern, w: bool| {
            if let Some(slot) = out.get_mut(n) {
                *slot = Some((ap, w));
                n += 1;
            }
        };
        match *self {
            Instr::LoadStationary { src } => push(src, false),
            Instr::MultiplyMoving { moving, dst, .. } => {
                push(moving, false);
                push(dst, true);
            }
            Instr::TensorTensor { a, b, out, .. } => {
                push(a, false);
                push(b, false);
                push(out, true);
            }
            Instr::TensorScalar { src, out, .. } | Instr::TensorCopy { src, out } => {
                push(src, false);
                push(out, true);
            }
            Instr::Activation { src, out, bias, .. } => {
                push(src, false);
                if let Bias::PerPartition(b) = bias {
                    push(b, false);
                }
                push(out, true);
            }
            Instr::Memset { out, .. } | Instr::Iota { out, .. } => push(out, true),
            _ => {}
        }
        (out, n)
    }
}

fn require_space(ap: &AccessPattern, space: Space, what: &str) -> Result<(), Error> {
    if ap.space != space {
        return Err(err!(
            Invalid,
            "{what}: must be in {}, not {}",
            space.name(),
            ap.space.name()
        ));
    }
    Ok(())
}

fn require_float(ap: &AccessPattern, what: &str) -> Result<(), Error> {
    if !ap.dtype.is_float() {
        return Err(err!(Invalid, "{what}: {} is not a float type", ap.dtype));
    }
    Ok(())
}

fn same_shape(a: &AccessPattern, out: &AccessPattern, what: &str) -> Result<(), Error> {
    if a.partitions != out.partitions || a.free_elems() != out.free_elems() {
        return Err(err!(
            Invalid,
            "{what}: shape [{}, {}] does not match the output's [{}, {}]",
            a.partitions,
            a.free_elems(),
            out.partitions,
            out.free_elems()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn mm_destination_stays_in_one_bank() {
        let mm = Instr::MultiplyMoving {
            moving: AccessPattern::sbuf(DType::Bf16, 0, 128, 0, 512),
            dst: AccessPattern::psum(DType::F32, 0, 128, 1024, 512),
            accumulate: false,
        };
        assert!(
            mm.validate_operands()
                .unwrap_err()
                .message()
                .contains("bank")
        );
    }
}
