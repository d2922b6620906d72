//! The byte reader of the program format, and the reader of access patterns and
//! instructions (format 1.0's opcodes and 1.1's); never panics.

use nrt_core::{Error, err};

use super::{MAX_NAME_BYTES, op};
use crate::engine::dtype::DType;
use crate::engine::isa::{
    AccessPattern, ActFn, ActFunc, ActReduce, AluOp, Bias, Dim, Instr, MAX_DIMS, Operand,
    ScalarStep, SemCmp, Space,
};

pub(super) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    pub(super) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| err!(Invalid, "truncated at byte {}", self.pos))?;
        let s = self.buf.get(self.pos..end).unwrap_or(&[]);
        self.pos = end;
        Ok(s)
    }
    pub(super) fn arr<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub(super) fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.arr::<1>()?[0])
    }
    pub(super) fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    pub(super) fn i16(&mut self) -> Result<i16, Error> {
        Ok(i16::from_le_bytes(self.arr()?))
    }
    pub(super) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    pub(super) fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.arr()?))
    }
    pub(super) fn f32(&mut self) -> Result<f32, Error> {
        Ok(f32::from_bits(self.u32()?))
    }
    pub(super) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    /// A u32 element count, at most `max`, with at least `min_item` bytes left per element.
    pub(super) fn count(&mut self, max: usize, min_item: usize) -> Result<usize, Error> {
        let n = self.u32()? as usize;
        if n > max || n.saturating_mul(min_item) > self.remaining() {
            return Err(err!(
                Invalid,
                "count {n} exceeds the limit {max} or the {} bytes left",
                self.remaining()
            ));
        }
        Ok(n)
    }
    pub(super) fn string(&mut self) -> Result<String, Error> {
        let n = usize::from(self.u16()?);
        if n > MAX_NAME_BYTES {
            return Err(err!(
                Invalid,
                "name of {n} bytes (at most {MAX_NAME_BYTES})"
            ));
        }
        let b = self.take(n)?;
        core::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| err!(Invalid, "name is not UTF-8"))
    }
}

fn read_ap(s: &mut Reader<'_>) -> Result<AccessPattern, Error> {
    let space = match s.u8()? {
        0 => Space::Sbuf,
        1 => Space::Psum,
        k => return Err(err!(Invalid, "unknown memory space {k}")),
    };
    let dtype = DType::from_code(s.u8()?).ok_or_else(|| err!(Invalid, "unknown dtype"))?;
    let start_partition = s.u8()?;
    let partitions = s.u8()?;
    let offset = s.u32()?;
    let ndims = s.u8()?;
    if ndims == 0 || usize::from(ndims) > MAX_DIMS {
        return Err(err!(Invalid, "{ndims} free dimensions (1..=4)"));
    }
    let mut dims = [Dim::default(); MAX_DIMS];
    for d in dims.iter_mut().take(usize::from(ndims)) {
        d.size = s.u16()?;
        d.stride = s.i16()?;
    }
    Ok(AccessPattern {
        space,
        dtype,
        start_partition,
        partitions,
        offset,
        ndims,
        dims,
    })
}

pub(super) fn read_instr(s: &mut Reader<'_>) -> Result<Instr, Error> {
    let code = s.u8()?;
    Ok(match code {
        op::SEM_WAIT => {
            let sem = s.u8()?;
            let cmp = match s.u8()? {
                0 => SemCmp::Ge,
                1 => SemCmp::Eq,
                c => return Err(err!(Invalid, "unknown SemWait comparison {c}")),
            };
            Instr::SemWait {
                sem,
                cmp,
                value: s.u32()?,
            }
        }
        op::SEM_INC => Instr::SemInc {
            sem: s.u8()?,
            value: s.u32()?,
        },
        op::SEM_SET => Instr::SemSet {
            sem: s.u8()?,
            value: s.u32()?,
        },
        op::DMA_TRIGGER => Instr::DmaTrigger {
            dma: s.u8()?,
            queue: s.u8()?,
            first: s.u32()?,
            count: s.u32()?,
            sem: s.u8()?,
            inc: s.u32()?,
        },
        op::NOTIFY => Instr::Notify { payload: s.u32()? },
        op::HALT => Instr::Halt,
        op::LOOP_BEGIN => Instr::LoopBegin {
            reg: s.u8()?,
            count: s.u32()?,
        },
        op::LOOP_END => Instr::LoopEnd { reg: s.u8()? },
        op::LOAD_STATIONARY => Instr::LoadStationary { src: read_ap(s)? },
        op::MULTIPLY_MOVING => Instr::MultiplyMoving {
            moving: read_ap(s)?,
            dst: read_ap(s)?,
            accumulate: match s.u8()? {
                0 => false,
                1 => true,
                v => return Err(err!(Invalid, "accumulate flag {v}")),
            },
        },
        op::TENSOR_TENSOR => Instr::TensorTensor {
            op: alu(s.u8()?)?,
            a: read_ap(s)?,
            b: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::TENSOR_SCALAR => Instr::TensorScalar {
            op: alu(s.u8()?)?,
            src: read_ap(s)?,
            scalar: s.f32()?,
            out: read_ap(s)?,
        },
        op::ACTIVATION => {
            let func = ActFunc::from_code(s.u8()?)
                .ok_or_else(|| err!(Invalid, "unknown activation function"))?;
            let src = read_ap(s)?;
            let out = read_ap(s)?;
            let scale = s.f32()?;
            let bias = read_bias(s)?;
            Instr::Activation {
                func,
                src,
                out,
                scale,
                bias,
            }
        }
        op::TENSOR_COPY => Instr::TensorCopy {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::MEMSET => Instr::Memset {
            out: read_ap(s)?,
            bits: s.u32()?,
        },
        op::IOTA => Instr::Iota {
            out: read_ap(s)?,
            base: s.i32()?,
            partition_step: s.i32()?,
            free_step: s.i32()?,
        },
        c => return read_instr_1_1(s, c),
    })
}

/// The format-1.1 instructions.
fn read_instr_1_1(s: &mut Reader<'_>, code: u8) -> Result<Instr, Error> {
    Ok(match code {
        op::TENSOR_SCALAR_CHAIN => Instr::TensorScalarChain {
            src: read_ap(s)?,
            out: read_ap(s)?,
            first: read_step(s)?,
            second: if flag(s, "second step")? {
                Some(read_step(s)?)
            } else {
                None
            },
        },
        op::SCALAR_TENSOR_TENSOR => Instr::ScalarTensorTensor {
            data: read_ap(s)?,
            first: read_step(s)?,
            op1: alu(s.u8()?)?,
            data2: read_ap(s)?,
            reverse1: flag(s, "reverse1")?,
            out: read_ap(s)?,
        },
        op::TENSOR_REDUCE => Instr::TensorReduce {
            op: alu(s.u8()?)?,
            src: read_ap(s)?,
            out: read_ap(s)?,
            axes: s.u8()?,
            negate: flag(s, "negate")?,
        },
        op::ACTIVATE => Instr::Activate {
            func: ActFn::from_code(s.u8()?)
                .ok_or_else(|| err!(Invalid, "unknown activation function"))?,
            src: read_ap(s)?,
            out: read_ap(s)?,
            scale: read_operand(s)?,
            bias: read_bias(s)?,
            reduce: if flag(s, "reduce")? {
                Some(ActReduce {
                    op: alu(s.u8()?)?,
                    out: read_ap(s)?,
                })
            } else {
                None
            },
        },
        op::RECIPROCAL => Instr::Reciprocal {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::TRANSPOSE => Instr::Transpose {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::AFFINE_SELECT => Instr::AffineSelect {
            on_true: read_ap(s)?,
            out: read_ap(s)?,
            on_false: s.f32()?,
            cmp: alu(s.u8()?)?,
            offset: s.i32()?,
            channel_multiplier: s.i32()?,
            steps: [s.i32()?, s.i32()?, s.i32()?, s.i32()?],
        },
        op::RANGE_SELECT => Instr::RangeSelect {
            on_true: read_ap(s)?,
            out: read_ap(s)?,
            cmp0: alu(s.u8()?)?,
            bound0: read_ap(s)?,
            cmp1: alu(s.u8()?)?,
            bound1: read_ap(s)?,
            range_start: s.i32()?,
            on_false: s.f32()?,
            reduce_max: if flag(s, "reduce")? {
                Some(read_ap(s)?)
            } else {
                None
            },
        },
        op::BN_STATS => Instr::BnStats {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::BN_AGGR => Instr::BnAggr {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::TENSOR_TENSOR_SCAN => Instr::TensorTensorScan {
            data0: read_ap(s)?,
            data1: read_ap(s)?,
            out: read_ap(s)?,
            initial: read_operand(s)?,
            op0: alu(s.u8()?)?,
            op1: alu(s.u8()?)?,
            reverse0: flag(s, "reverse0")?,
            reverse1: flag(s, "reverse1")?,
        },
        op::MAX8 => Instr::Max8 {
            src: read_ap(s)?,
            out: read_ap(s)?,
        },
        op::FIND_INDEX8 => Instr::FindIndex8 {
            data: read_ap(s)?,
            vals: read_ap(s)?,
            out: read_ap(s)?,
        },
        c => return Err(err!(Invalid, "unknown opcode {c:#04x}")),
    })
}

fn flag(s: &mut Reader<'_>, what: &str) -> Result<bool, Error> {
    match s.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(err!(Invalid, "{what} flag {v}")),
    }
}

fn read_bias(s: &mut Reader<'_>) -> Result<Bias, Error> {
    match s.u8()? {
        0 => Ok(Bias::Imm(s.f32()?)),
        1 => Ok(Bias::PerPartition(read_ap(s)?)),
        k => Err(err!(Invalid, "unknown bias kind {k}")),
    }
}

fn read_operand(s: &mut Reader<'_>) -> Result<Operand, Error> {
    match s.u8()? {
        0 => Ok(Operand::Imm(s.f32()?)),
        1 => Ok(Operand::PerPartition(read_ap(s)?)),
        2 => Ok(Operand::Int(s.i32()?)),
        k => Err(err!(Invalid, "unknown operand kind {k}")),
    }
}

fn read_step(s: &mut Reader<'_>) -> Result<ScalarStep, Error> {
    Ok(ScalarStep {
        op: alu(s.u8()?)?,
        operand: read_operand(s)?,
        reverse: flag(s, "reverse")?,
    })
}

fn alu(c: u8) -> Result<AluOp, Error> {
    AluOp::from_code(c).ok_or_else(|| err!(Invalid, "unknown ALU operation {c}"))
}
