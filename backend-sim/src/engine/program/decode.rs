//! The reader of the binary program format: every count is checked against the bytes that
//! remain before anything is reserved, every field against its limit; never panics.

use std::collections::BTreeSet;

use nrt_core::{Error, err};

use super::{
    FORMAT_MAJOR, MAGIC, MAX_DESCRIPTORS, MAX_NAME_BYTES, MAX_RANK, MAX_STREAM_INSTRS, MAX_TENSORS,
    Program, SEC_DESCRIPTORS, SEC_NAME, SEC_OPTIONAL, SEC_SEM_INIT, SEC_STREAM_BASE, SEC_TENSORS,
    TensorDecl, TensorKind, op,
};
use crate::engine::dtype::DType;
use crate::engine::isa::{
    AccessPattern, ActFunc, AluOp, Bias, Dim, DmaDescriptor, DmaEndpoint, Instr, MAX_DIMS, SemCmp,
    Space,
};

impl Program {
    /// Parses and validates a serialized program. Any defect is `NRT_INVALID` (an unknown
    /// major version: `NRT_UNSUPPORTED_NEFF_VERSION`); never panics.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        let magic = r.take(8)?;
        if magic != MAGIC {
            return Err(err!(Invalid, "not a simulator program (bad magic)"));
        }
        let major = r.u16()?;
        let minor = r.u16()?;
        if major != FORMAT_MAJOR {
            return Err(err!(
                UnsupportedNeffVersion,
                "simulator program format {major}.{minor} is not supported (this build reads \
                 {FORMAT_MAJOR}.x)"
            ));
        }
        let flags = r.u32()?;
        if flags != 0 {
            return Err(err!(Invalid, "unknown program flags {flags:#x}"));
        }
        let nsec = r.u32()?;
        if nsec > 64 {
            return Err(err!(Invalid, "{nsec} sections (at most 64)"));
        }
        let mut p = Program::default();
        let mut seen = BTreeSet::new();
        for _ in 0..nsec {
            let tag = r.u32()?;
            let len = r.u64()?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= r.remaining())
                .ok_or_else(|| err!(Invalid, "section {tag:#x}: length {len} past the end"))?;
            let body = r.take(len)?;
            if !seen.insert(tag) {
                return Err(err!(Invalid, "section {tag:#x} appears twice"));
            }
            let mut s = Reader::new(body);
            match tag {
                SEC_NAME => p.name = s.string()?,
                SEC_TENSORS => p.tensors = read_tensors(&mut s)?,
                SEC_DESCRIPTORS => {
                    let n = s.count(MAX_DESCRIPTORS, 11)?;
                    let mut v = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        let src = read_endpoint(&mut s)?;
                        let dst = read_endpoint(&mut s)?;
                        let len = s.u32()?;
                        v.push(DmaDescriptor { src, dst, len });
                    }
                    p.descriptors = v;
                }
                SEC_SEM_INIT => {
                    let n = s.count(256, 5)?;
                    let mut v = Vec::with_capacity(n.min(1024));
                    for _ in 0..n {
                        v.push((s.u8()?, s.u32()?));
                    }
                    p.sem_init = v;
                }
                t if (SEC_STREAM_BASE..SEC_STREAM_BASE + 5).contains(&t) => {
                    let n = s.count(MAX_STREAM_INSTRS, 1)?;
                    let mut v = Vec::with_capacity(n.min(1024));
                    for i in 0..n {
                        v.push(
                            read_instr(&mut s)
                                .map_err(|e| err!(Invalid, "instruction {i}: {}", e.message()))?,
                        );
                    }
                    if let Some(slot) = p.streams.get_mut((t - SEC_STREAM_BASE) as usize) {
                        *slot = v;
                    }
                }
                t if t & SEC_OPTIONAL != 0 => continue,
                t => return Err(err!(Invalid, "unknown required section {t:#x}")),
            }
            if s.remaining() != 0 {
                return Err(err!(
                    Invalid,
                    "section {tag:#x}: {} trailing bytes",
                    s.remaining()
                ));
            }
        }
        if r.remaining() != 0 {
            return Err(err!(Invalid, "{} trailing bytes", r.remaining()));
        }
        p.validate()?;
        Ok(p)
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| err!(Invalid, "truncated at byte {}", self.pos))?;
        let s = self.buf.get(self.pos..end).unwrap_or(&[]);
        self.pos = end;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let s = self.take(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.arr::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    fn i16(&mut self) -> Result<i16, Error> {
        Ok(i16::from_le_bytes(self.arr()?))
    }
    fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.arr()?))
    }
    fn f32(&mut self) -> Result<f32, Error> {
        Ok(f32::from_bits(self.u32()?))
    }
    fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    /// A u32 element count, at most `max`, with at least `min_item` bytes left per element.
    fn count(&mut self, max: usize, min_item: usize) -> Result<usize, Error> {
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
    fn string(&mut self) -> Result<String, Error> {
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

fn read_tensors(s: &mut Reader<'_>) -> Result<Vec<TensorDecl>, Error> {
    let n = s.count(MAX_TENSORS, 14)?;
    let mut v = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let name = s.string()?;
        let kind = TensorKind::from_code(s.u8()?)
            .ok_or_else(|| err!(Invalid, "tensor {i}: unknown kind"))?;
        let dtype =
            DType::from_code(s.u8()?).ok_or_else(|| err!(Invalid, "tensor {i}: unknown dtype"))?;
        let rank = usize::from(s.u8()?);
        if rank > MAX_RANK {
            return Err(err!(Invalid, "tensor {i}: rank {rank} above {MAX_RANK}"));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(s.u64()?);
        }
        let dlen = s.u64()?;
        let dlen = usize::try_from(dlen)
            .ok()
            .filter(|&l| l <= s.remaining())
            .ok_or_else(|| err!(Invalid, "tensor {i}: data length {dlen} past the end"))?;
        let data = s.take(dlen)?.to_vec();
        v.push(TensorDecl {
            name,
            kind,
            dtype,
            shape,
            data,
        });
    }
    Ok(v)
}

fn read_endpoint(s: &mut Reader<'_>) -> Result<DmaEndpoint, Error> {
    match s.u8()? {
        0 => Ok(DmaEndpoint::Hbm {
            tensor: s.u32()?,
            offset: s.u64()?,
        }),
        1 => Ok(DmaEndpoint::Sbuf {
            partition: s.u8()?,
            offset: s.u32()?,
        }),
        2 => Ok(DmaEndpoint::Psum {
            partition: s.u8()?,
            offset: s.u32()?,
        }),
        k => Err(err!(Invalid, "unknown DMA endpoint kind {k}")),
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

fn read_instr(s: &mut Reader<'_>) -> Result<Instr, Error> {
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
            let bias = match s.u8()? {
                0 => Bias::Imm(s.f32()?),
                1 => Bias::PerPartition(read_ap(s)?),
                k => return Err(err!(Invalid, "unknown bias kind {k}")),
            };
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
        c => return Err(err!(Invalid, "unknown opcode {c:#04x}")),
    })
}

fn alu(c: u8) -> Result<AluOp, Error> {
    AluOp::from_code(c).ok_or_else(|| err!(Invalid, "unknown ALU operation {c}"))
}
