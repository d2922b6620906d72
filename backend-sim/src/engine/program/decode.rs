//! The reader of the binary program format: every count is checked against the bytes that
//! remain before anything is reserved, every field against its limit; never panics.
//! Instructions, access patterns and the byte reader are in `decode_instr.rs`.
//!
//! Versions: a program is checked under the rules of its header's minor or of what it uses,
//! whichever is newer; one that uses format-1.1 features under a 1.0 header is refused.

use std::collections::BTreeSet;

use nrt_core::{Error, err};

use super::decode_instr::{Reader, read_instr};
use super::{
    FORMAT_MAJOR, FORMAT_MINOR, MAGIC, MAX_DESCRIPTORS, MAX_RANK, MAX_STREAM_INSTRS, MAX_TENSORS,
    MAX_TERMS, Program, SEC_DESCRIPTORS, SEC_NAME, SEC_OPTIONAL, SEC_SEM_INIT, SEC_STREAM_BASE,
    SEC_TENSORS, SEC_TERMS, TensorDecl, TensorKind,
};
use crate::engine::dtype::DType;
use crate::engine::isa::{
    DmaBlock, DmaDescriptor, DmaEndpoint, DynTerm, EngineId, MemKind, TermSlot, required_minor,
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
                SEC_TERMS => p.terms = read_terms(&mut s)?,
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
        p.check_versioned(minor)?;
        Ok(p)
    }

    /// The checks of a program read with header minor `minor` (binary or text): validated
    /// under the rules of that minor or of what the program uses, whichever is newer; a
    /// program that uses more than its header says is refused.
    pub(super) fn check_versioned(&self, minor: u16) -> Result<(), Error> {
        let uses = self.format_minor();
        self.validate_as(uses.max(minor.min(FORMAT_MINOR)))?;
        if uses > minor {
            return Err(err!(
                Invalid,
                "{} needs format {FORMAT_MAJOR}.{uses}; the program's header says \
                 {FORMAT_MAJOR}.{minor}",
                first_1_1_feature(self)
            ));
        }
        Ok(())
    }
}

/// Names the first item of `p` that format 1.0 does not have.
fn first_1_1_feature(p: &Program) -> String {
    for engine in EngineId::ALL {
        for (pc, ins) in p.stream(engine).iter().enumerate() {
            if required_minor(ins, engine) > 0 {
                return format!("{engine} pc {pc} ({} on {engine})", ins.name());
            }
        }
    }
    match p.descriptors.iter().position(DmaDescriptor::is_block) {
        Some(i) => format!("DMA descriptor {i} (block endpoints)"),
        None if !p.terms.is_empty() => "the dynamic terms".to_owned(),
        None => "the program".to_owned(),
    }
}

fn read_terms(s: &mut Reader<'_>) -> Result<Vec<DynTerm>, Error> {
    let n = s.count(MAX_TERMS, 16)?;
    let mut v = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let engine = *EngineId::ALL
            .get(usize::from(s.u8()?))
            .ok_or_else(|| err!(Invalid, "dynamic term {i}: unknown engine"))?;
        let pc = s.u32()?;
        let (kind, operand) = (s.u8()?, s.u8()?);
        let slot = TermSlot::from_code(kind, operand)
            .ok_or_else(|| err!(Invalid, "dynamic term {i}: unknown slot {kind}.{operand}"))?;
        let reg = s.u8()?;
        let step = s.u64()? as i64;
        v.push(DynTerm {
            engine,
            pc,
            slot,
            reg,
            step,
        });
    }
    Ok(v)
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
        3 => Ok(DmaEndpoint::Block(DmaBlock {
            mem: match s.u8()? {
                0 => MemKind::Hbm,
                1 => MemKind::Sbuf,
                2 => MemKind::Psum,
                m => return Err(err!(Invalid, "unknown DMA block memory {m}")),
            },
            index: s.u32()?,
            offset: s.u64()?,
            dtype: DType::from_code(s.u8()?)
                .ok_or_else(|| err!(Invalid, "unknown DMA block dtype"))?,
            rows: s.u32()?,
            cols: s.u32()?,
            pitch: s.u32()?,
            transposed: match s.u8()? {
                0 => false,
                1 => true,
                v => return Err(err!(Invalid, "DMA block transposed flag {v}")),
            },
        })),
        k => Err(err!(Invalid, "unknown DMA endpoint kind {k}")),
    }
}
