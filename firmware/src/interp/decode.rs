//! The decoder of the interpreter's subset: header, sections, instructions and access
//! patterns, checked against the format's rules and the firmware's memories.

use alloc::vec::Vec;

use super::{
    Ap, Desc, End, Instr, PSUM_BYTES, PSUM_PARTITIONS, Program, R, Refusal, SBUF_BYTES,
    SBUF_PARTITIONS, TensorDecl,
};

struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(Refusal::Invalid)?;
        let s = self.b.get(self.pos..end).ok_or(Refusal::Invalid)?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?.first().copied().unwrap_or(0))
    }
    fn arr<const N: usize>(&mut self) -> R<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u16(&mut self) -> R<u16> {
        Ok(u16::from_le_bytes(self.arr()?))
    }
    fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> R<u64> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    fn flag(&mut self) -> R<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Refusal::Invalid),
        }
    }
    /// A count of items of at least `min` bytes each, checked against what remains before
    /// anything is reserved.
    fn count(&mut self, max: u32, min: usize) -> R<usize> {
        let n = self.u32()?;
        let left = self.b.len().saturating_sub(self.pos);
        if n > max || (n as usize).saturating_mul(min) > left {
            return Err(Refusal::Invalid);
        }
        Ok(n as usize)
    }
    fn ap(&mut self) -> R<Ap> {
        let psum = match self.u8()? {
            0 => false,
            1 => true,
            _ => return Err(Refusal::Invalid),
        };
        if self.u8()? != 0 {
            return Err(Refusal::Unsupported); // fp32 only
        }
        let start = self.u8()?;
        let parts = self.u8()?;
        let offset = self.u32()?;
        let ndims = self.u8()?;
        if !(1..=4).contains(&ndims) {
            return Err(Refusal::Invalid);
        }
        let mut dims = [(1u16, 0i16); 4];
        for d in dims.iter_mut().take(usize::from(ndims)) {
            *d = (self.u16()?, self.u16()? as i16);
        }
        let ap = Ap {
            psum,
            start,
            parts,
            offset,
            ndims,
            dims,
        };
        ap.check()?;
        Ok(ap)
    }
    fn end(&mut self) -> R<End> {
        Ok(match self.u8()? {
            0 => End::Hbm {
                tensor: self.u32()?,
                offset: self.u64()?,
            },
            1 => End::Sbuf {
                partition: self.u8()?,
                offset: self.u32()?,
            },
            2 => End::Psum {
                partition: self.u8()?,
                offset: self.u32()?,
            },
            3 => return Err(Refusal::Unsupported),
            _ => return Err(Refusal::Invalid),
        })
    }
}

/// Checks the header and decodes every section; refuses what is outside the subset.
pub fn decode(bytes: &[u8]) -> Result<Program, Refusal> {
    let mut r = Rd { b: bytes, pos: 0 };
    if r.take(8)? != b"NRTSIMPG" {
        return Err(Refusal::Invalid);
    }
    if r.u16()? != 1 {
        return Err(Refusal::Unsupported);
    }
    if r.u16()? != 0 {
        return Err(Refusal::Unsupported); // 1.1 (loops, new instructions)
    }
    if r.u32()? != 0 {
        return Err(Refusal::Invalid);
    }
    let sections = r.u32()?;
    if sections > 64 {
        return Err(Refusal::Invalid);
    }
    let mut p = Program {
        tensors: Vec::new(),
        descs: Vec::new(),
        sems: Vec::new(),
        streams: Default::default(),
    };
    let mut seen = 0u64;
    for _ in 0..sections {
        let tag = r.u32()?;
        let len = usize::try_from(r.u64()?).map_err(|_| Refusal::Invalid)?;
        let body = r.take(len)?;
        let base = r.pos - len;
        let bit = match tag {
            1..=5 => tag,
            0x10..=0x14 => tag - 0x10 + 6,
            t if t & 0x8000_0000 != 0 => continue,
            _ => return Err(Refusal::Invalid),
        };
        if seen & (1 << bit) != 0 {
            return Err(Refusal::Invalid);
        }
        seen |= 1 << bit;
        let mut s = Rd { b: body, pos: 0 };
        match tag {
            1 => {
                let n = s.u16()?;
                s.take(usize::from(n))?;
            }
            2 => {
                let n = s.count(4096, 4)?;
                p.tensors
                    .try_reserve_exact(n)
                    .map_err(|_| Refusal::TooLarge)?;
                for _ in 0..n {
                    let nl = s.u16()?;
                    let name = ((base + s.pos) as u32, nl);
                    s.take(usize::from(nl))?;
                    let kind = s.u8()?;
                    let dtype = s.u8()?;
                    if kind > 3 || dtype > 3 {
                        return Err(Refusal::Invalid);
                    }
                    let rank = s.u8()?;
                    if rank > 8 {
                        return Err(Refusal::Invalid);
                    }
                    let mut elems: u64 = 1;
                    for _ in 0..rank {
                        elems = elems.checked_mul(s.u64()?).ok_or(Refusal::Invalid)?;
                    }
                    let es = if dtype == 1 || dtype == 2 { 2 } else { 4 };
                    let size = elems.checked_mul(es).and_then(|v| u32::try_from(v).ok());
                    let size = size.ok_or(Refusal::TooLarge)?;
                    let dl = s.u64()?;
                    let start = base + s.pos;
                    let dl32 = u32::try_from(dl).map_err(|_| Refusal::Invalid)?;
                    s.take(dl32 as usize)?;
                    if (kind == 2 && dl32 != size) || (kind != 2 && dl32 != 0) {
                        return Err(Refusal::Invalid);
                    }
                    p.tensors.push(TensorDecl {
                        kind,
                        size,
                        name,
                        data: (start as u32, dl32),
                    });
                }
            }
            3 => {
                let n = s.count(1 << 22, 11)?;
                p.descs
                    .try_reserve_exact(n)
                    .map_err(|_| Refusal::TooLarge)?;
                for _ in 0..n {
                    let (src, dst) = (s.end()?, s.end()?);
                    let len = s.u32()?;
                    p.descs.push(Desc { src, dst, len });
                }
            }
            4 => {
                let n = s.count(256, 5)?;
                for _ in 0..n {
                    let (sem, v) = (s.u8()?, s.u32()?);
                    if p.sems.iter().any(|&(x, _)| x == sem) {
                        return Err(Refusal::Invalid);
                    }
                    p.sems.try_reserve(1).map_err(|_| Refusal::TooLarge)?;
                    p.sems.push((sem, v));
                }
            }
            5 => return Err(Refusal::Unsupported),
            _ => {
                let e = (tag - 0x10) as usize;
                let n = s.count(1 << 22, 1)?;
                let mut v = Vec::new();
                v.try_reserve_exact(n).map_err(|_| Refusal::TooLarge)?;
                for _ in 0..n {
                    v.push(instr(&mut s, e)?);
                }
                if !matches!(v.last(), Some(Instr::Halt)) {
                    return Err(Refusal::Invalid);
                }
                if let Some(slot) = p.streams.get_mut(e) {
                    *slot = v;
                }
            }
        }
        if s.pos != body.len() {
            return Err(Refusal::Invalid);
        }
    }
    if r.pos != bytes.len() {
        return Err(Refusal::Invalid);
    }
    p.check_descs()?;
    Ok(p)
}

fn instr(s: &mut Rd<'_>, engine: usize) -> R<Instr> {
    let op = s.u8()?;
    let i = match op {
        0x01 => {
            let sem = s.u8()?;
            let eq = match s.u8()? {
                0 => false,
                1 => true,
                _ => return Err(Refusal::Invalid),
            };
            Instr::SemWait {
                sem,
                eq,
                value: s.u32()?,
            }
        }
        0x02 => Instr::SemInc {
            sem: s.u8()?,
            value: s.u32()?,
        },
        0x03 => Instr::SemSet {
            sem: s.u8()?,
            value: s.u32()?,
        },
        0x04 => {
            let (dma, queue) = (s.u8()?, s.u8()?);
            if dma >= 16 || queue >= 16 {
                return Err(Refusal::Invalid);
            }
            Instr::Dma {
                first: s.u32()?,
                count: s.u32()?,
                sem: s.u8()?,
                inc: s.u32()?,
            }
        }
        0x05 => {
            s.u32()?;
            Instr::Notify
        }
        0x06 => Instr::Halt,
        0x10 if engine == 1 => Instr::Load { src: s.ap()? },
        0x11 if engine == 1 => Instr::Multiply {
            moving: s.ap()?,
            dst: s.ap()?,
            accumulate: s.flag()?,
        },
        0x22 if engine == 2 || engine == 3 => {
            let relu = match s.u8()? {
                0 => false,
                1 => true,
                2..=4 => return Err(Refusal::Unsupported),
                _ => return Err(Refusal::Invalid),
            };
            let (src, out) = (s.ap()?, s.ap()?);
            let scale = f32::from_bits(s.u32()?);
            let (bias, imm) = match s.u8()? {
                0 => (None, f32::from_bits(s.u32()?)),
                1 => (Some(s.ap()?), 0.0),
                _ => return Err(Refusal::Invalid),
            };
            if src.parts != out.parts || src.free() != out.free() {
                return Err(Refusal::Invalid);
            }
            if let Some(b) = bias {
                if b.parts != out.parts || b.free() != 1 {
                    return Err(Refusal::Invalid);
                }
            }
            // Element by element is the simulator's gather-then-scatter only when the output
            // overlaps no input except element for element.
            if overlaps(&out, &src) && out != src || bias.is_some_and(|b| overlaps(&out, &b)) {
                return Err(Refusal::Unsupported);
            }
            Instr::Act {
                relu,
                src,
                out,
                scale,
                bias,
                imm,
            }
        }
        _ => return Err(Refusal::Unsupported),
    };
    Ok(i)
}

/// Whether two patterns may touch a common byte (same memory, common partitions, and
/// intersecting byte ranges in a partition).
fn overlaps(a: &Ap, b: &Ap) -> bool {
    let (alo, ahi) = a.bytes();
    let (blo, bhi) = b.bytes();
    a.psum == b.psum
        && a.start < b.start.saturating_add(b.parts)
        && b.start < a.start.saturating_add(a.parts)
        && alo < bhi
        && blo < ahi
}

impl Program {
    fn check_descs(&self) -> R<()> {
        for d in &self.descs {
            // HBM→SBUF, SBUF→HBM, SBUF→SBUF, PSUM→SBUF.
            let ok = matches!(
                (d.src, d.dst),
                (End::Hbm { .. }, End::Sbuf { .. })
                    | (End::Sbuf { .. }, End::Hbm { .. })
                    | (End::Sbuf { .. } | End::Psum { .. }, End::Sbuf { .. })
            );
            if !ok || d.len == 0 {
                return Err(Refusal::Invalid);
            }
            for e in [d.src, d.dst] {
                match e {
                    End::Hbm { tensor, offset } => {
                        let t = self.tensors.get(tensor as usize).ok_or(Refusal::Invalid)?;
                        if offset
                            .checked_add(u64::from(d.len))
                            .is_none_or(|x| x > u64::from(t.size))
                        {
                            return Err(Refusal::Invalid);
                        }
                    }
                    End::Sbuf { partition, offset } => {
                        on_chip(partition, offset, d.len, SBUF_PARTITIONS, SBUF_BYTES)?
                    }
                    End::Psum { partition, offset } => {
                        on_chip(partition, offset, d.len, PSUM_PARTITIONS, PSUM_BYTES)?
                    }
                }
            }
        }
        for (e, st) in self.streams.iter().enumerate() {
            if st.is_empty() {
                return Err(Refusal::Invalid); // every stream ends with Halt
            }
            for i in st {
                if let Instr::Dma { first, count, .. } = *i {
                    let end = first.checked_add(count).ok_or(Refusal::Invalid)?;
                    if count == 0 || end as usize > self.descs.len() {
                        return Err(Refusal::Invalid);
                    }
                }
                let _ = e;
            }
        }
        Ok(())
    }
}

fn on_chip(partition: u8, offset: u32, len: u32, parts: usize, bytes: usize) -> R<()> {
    if usize::from(partition) >= 128 {
        return Err(Refusal::Invalid);
    }
    match offset.checked_add(len) {
        Some(end) if usize::from(partition) < parts && end as usize <= bytes => Ok(()),
        _ => Err(Refusal::TooLarge),
    }
}
