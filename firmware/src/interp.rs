//! A minimal interpreter of the simulator program format (`docs/SIM_ISA.md`), for the target.
//!
//! The subset: format 1.0 programs (no loops, no dynamic terms) whose data path is fp32 —
//! `SemWait`, `SemInc`, `SemSet`, `DmaTrigger` (byte descriptors), `Notify`, `Halt`,
//! `LoadStationary`, `MultiplyMoving`, and `Activation` with `identity` or `relu` (immediate or
//! per-partition bias). Anything else is refused when the program is decoded (at load), with
//! [`Refusal::Unsupported`]; a program that does not fit this firmware's on-chip memories
//! ([`SBUF_PARTITIONS`] × [`SBUF_BYTES`], [`PSUM_PARTITIONS`] × [`PSUM_BYTES`]) with
//! [`Refusal::TooLarge`].
//!
//! Semantics are the simulator's (numerics bit for bit: fused multiply-add in increasing k from
//! +0.0, canonical NaN). Timing is not modelled: the streams run round-robin, each until it
//! halts or waits on a semaphore, and a DMA transfer completes when it is triggered. For a
//! program whose every cross-engine dependency goes through a semaphore (the kernel library's
//! programs, which the simulator's hazard detector checks) the results are the simulator's.

use alloc::vec::Vec;

/// SBUF partitions of this firmware.
pub const SBUF_PARTITIONS: usize = 16;
/// SBUF bytes per partition.
pub const SBUF_BYTES: usize = 512;
/// PSUM partitions.
pub const PSUM_PARTITIONS: usize = 16;
/// PSUM bytes per partition (two 2 KiB banks).
pub const PSUM_BYTES: usize = 4096;
/// Largest stationary (K partitions × M ≤ 128 elements).
pub const STATIONARY_MAX: usize = SBUF_PARTITIONS * 128;

const CANONICAL_NAN: u32 = 0x7FC0_0000;

/// Why a program is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub enum Refusal {
    /// Malformed bytes or a rule of the format broken.
    Invalid,
    /// Outside the interpreter's subset.
    Unsupported,
    /// Needs more on-chip memory than this firmware has.
    TooLarge,
}

/// Why an execution failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, defmt::Format)]
pub enum Fault {
    /// Every unhalted stream waits on a semaphore nothing will change.
    Deadlock,
    /// A `MultiplyMoving` with no (or a mismatched) stationary.
    NoStationary,
    /// A bound I/O tensor or device address is missing or too small.
    Binding,
}

/// A program tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorDecl {
    /// 0 input, 1 output, 2 const, 3 scratch.
    pub kind: u8,
    /// Bytes.
    pub size: u32,
    /// Name: byte range in the program.
    pub name: (u32, u16),
    /// Constant data: byte range in the program.
    pub data: (u32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ap {
    psum: bool,
    start: u8,
    parts: u8,
    offset: u32,
    ndims: u8,
    dims: [(u16, i16); 4],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Hbm { tensor: u32, offset: u64 },
    Sbuf { partition: u8, offset: u32 },
    Psum { partition: u8, offset: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Desc {
    src: End,
    dst: End,
    len: u32,
}

#[derive(Clone, Copy, Debug)]
enum Instr {
    SemWait {
        sem: u8,
        eq: bool,
        value: u32,
    },
    SemInc {
        sem: u8,
        value: u32,
    },
    SemSet {
        sem: u8,
        value: u32,
    },
    Dma {
        first: u32,
        count: u32,
        sem: u8,
        inc: u32,
    },
    Notify,
    Halt,
    Load {
        src: Ap,
    },
    Multiply {
        moving: Ap,
        dst: Ap,
        accumulate: bool,
    },
    Act {
        relu: bool,
        src: Ap,
        out: Ap,
        scale: f32,
        bias: Option<Ap>,
        imm: f32,
    },
}

/// A decoded program.
#[derive(Debug)]
pub struct Program {
    /// Its tensors.
    pub tensors: Vec<TensorDecl>,
    descs: Vec<Desc>,
    sems: Vec<(u8, u32)>,
    streams: [Vec<Instr>; 5],
}

struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
}

type R<T> = Result<T, Refusal>;

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

impl Ap {
    fn free(&self) -> usize {
        self.dims
            .iter()
            .take(usize::from(self.ndims))
            .map(|d| usize::from(d.0))
            .product()
    }
    fn limits(&self) -> (usize, usize) {
        if self.psum {
            (PSUM_PARTITIONS, PSUM_BYTES)
        } else {
            (SBUF_PARTITIONS, SBUF_BYTES)
        }
    }
    /// The bytes `[lo, hi)` of a partition the pattern touches.
    fn bytes(&self) -> (i64, i64) {
        let (mut lo, mut hi) = (i64::from(self.offset), i64::from(self.offset));
        for d in self.dims.iter().take(usize::from(self.ndims)) {
            let span = (i64::from(d.0) - 1) * i64::from(d.1) * 4;
            if span < 0 { lo += span } else { hi += span }
        }
        (lo, hi + 4)
    }

    /// The format's rules, then this firmware's memories.
    fn check(&self) -> R<()> {
        let (p, s) = (usize::from(self.start), usize::from(self.parts));
        let ok_start = match s {
            65..=128 => p == 0,
            33..=64 => p == 0 || p == 64,
            1..=32 => p % 32 == 0 && p < 128,
            _ => false,
        };
        let dims = self.dims.get(..usize::from(self.ndims)).unwrap_or(&[]);
        if !ok_start || dims.iter().any(|d| d.0 == 0) || self.offset % 4 != 0 {
            return Err(Refusal::Invalid);
        }
        let (lo, hi) = self.bytes();
        let (parts, bytes) = self.limits();
        if lo < 0 || p + s > parts || hi > bytes as i64 {
            return Err(Refusal::TooLarge);
        }
        Ok(())
    }
    /// Byte offset in its partition of free element `i`.
    fn at(&self, mut i: usize) -> usize {
        let mut off = i64::from(self.offset);
        for d in self.dims.iter().take(usize::from(self.ndims)).rev() {
            let n = usize::from(d.0);
            off += (i % n) as i64 * i64::from(d.1) * 4;
            i /= n;
        }
        off as usize
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
            let ok = match (d.src, d.dst) {
                (End::Hbm { .. }, End::Sbuf { .. }) | (End::Sbuf { .. }, End::Hbm { .. }) => true,
                (End::Sbuf { .. } | End::Psum { .. }, End::Sbuf { .. }) => true,
                _ => false,
            };
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

/// The on-chip memories of one core and the stationary buffer, zeroed before each execution.
#[derive(Debug)]
pub struct OnChip {
    sbuf: [u8; SBUF_PARTITIONS * SBUF_BYTES],
    psum: [u8; PSUM_PARTITIONS * PSUM_BYTES],
    stat: [f32; STATIONARY_MAX],
    stat_km: Option<(usize, usize)>,
}

impl OnChip {
    /// Zeroed memories.
    pub const fn new() -> Self {
        Self {
            sbuf: [0; SBUF_PARTITIONS * SBUF_BYTES],
            psum: [0; PSUM_PARTITIONS * PSUM_BYTES],
            stat: [0.0; STATIONARY_MAX],
            stat_km: None,
        }
    }

    fn mem(&self, psum: bool) -> (&[u8], usize) {
        if psum {
            (&self.psum, PSUM_BYTES)
        } else {
            (&self.sbuf, SBUF_BYTES)
        }
    }

    fn get(&self, ap: &Ap, p: usize, i: usize) -> f32 {
        let (m, pb) = self.mem(ap.psum);
        let at = (usize::from(ap.start) + p) * pb + ap.at(i);
        m.get(at..at + 4)
            .map_or(0.0, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn set(&mut self, ap: &Ap, p: usize, i: usize, v: f32) {
        let pb = if ap.psum { PSUM_BYTES } else { SBUF_BYTES };
        let at = (usize::from(ap.start) + p) * pb + ap.at(i);
        let m: &mut [u8] = if ap.psum {
            &mut self.psum
        } else {
            &mut self.sbuf
        };
        if let Some(b) = m.get_mut(at..at + 4) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    fn bytes(&mut self, psum: bool, partition: u8, offset: u32, len: u32) -> Option<&mut [u8]> {
        let (m, pb): (&mut [u8], usize) = if psum {
            (&mut self.psum, PSUM_BYTES)
        } else {
            (&mut self.sbuf, SBUF_BYTES)
        };
        let at = usize::from(partition) * pb + offset as usize;
        m.get_mut(at..at + len as usize)
    }
}

impl Default for OnChip {
    fn default() -> Self {
        Self::new()
    }
}

fn canon(v: f32) -> f32 {
    if v.is_nan() {
        f32::from_bits(CANONICAL_NAN)
    } else {
        v
    }
}

/// Where each program tensor lives in device memory: `(offset in the arena, bytes)`.
pub type Placement = (usize, usize);

/// Runs `p` to completion: `hbm` is the device arena, `places[t]` program tensor `t`'s bytes
/// in it. Deterministic; allocates nothing.
pub fn run(
    p: &Program,
    chip: &mut OnChip,
    hbm: &mut [u8],
    places: &[Placement],
) -> Result<(), Fault> {
    chip.sbuf.fill(0);
    chip.psum.fill(0);
    chip.stat_km = None;
    let mut sems = [0u32; 256];
    for &(s, v) in &p.sems {
        if let Some(x) = sems.get_mut(usize::from(s)) {
            *x = v;
        }
    }
    let mut pcs = [0usize; 5];
    loop {
        let mut progress = false;
        let mut halted = 0;
        for (e, stream) in p.streams.iter().enumerate() {
            let pc = &mut pcs[e];
            while let Some(ins) = stream.get(*pc) {
                match *ins {
                    Instr::SemWait { sem, eq, value } => {
                        let v = sems.get(usize::from(sem)).copied().unwrap_or(0);
                        if !(if eq { v == value } else { v >= value }) {
                            break;
                        }
                    }
                    Instr::SemInc { sem, value } => bump(&mut sems, sem, value, false),
                    Instr::SemSet { sem, value } => bump(&mut sems, sem, value, true),
                    Instr::Dma {
                        first,
                        count,
                        sem,
                        inc,
                    } => {
                        for d in p
                            .descs
                            .get(first as usize..(first + count) as usize)
                            .unwrap_or(&[])
                        {
                            dma(d, chip, hbm, places)?;
                        }
                        bump(&mut sems, sem, inc, false);
                    }
                    Instr::Notify => {}
                    Instr::Halt => {
                        halted += 1;
                        break;
                    }
                    Instr::Load { src } => {
                        let (k, m) = (usize::from(src.parts), src.free());
                        if k * m > STATIONARY_MAX {
                            return Err(Fault::NoStationary);
                        }
                        for kk in 0..k {
                            for mm in 0..m {
                                let v = chip.get(&src, kk, mm);
                                if let Some(x) = chip.stat.get_mut(kk * m + mm) {
                                    *x = v;
                                }
                            }
                        }
                        chip.stat_km = Some((k, m));
                    }
                    Instr::Multiply {
                        moving,
                        dst,
                        accumulate,
                    } => multiply(chip, &moving, &dst, accumulate)?,
                    Instr::Act {
                        relu,
                        src,
                        out,
                        scale,
                        bias,
                        imm,
                    } => {
                        for part in 0..usize::from(out.parts) {
                            let b = bias.map_or(imm, |b| chip.get(&b, part, 0));
                            for i in 0..out.free() {
                                let t = chip.get(&src, part, i) * scale + b;
                                let v = if relu && !(t > 0.0 || t.is_nan()) {
                                    0.0
                                } else {
                                    t
                                };
                                chip.set(&out, part, i, canon(v));
                            }
                        }
                    }
                }
                *pc += 1;
                progress = true;
            }
        }
        if halted == p.streams.len() {
            return Ok(());
        }
        if !progress {
            return Err(Fault::Deadlock);
        }
    }
}

fn bump(sems: &mut [u32; 256], sem: u8, value: u32, set: bool) {
    if let Some(s) = sems.get_mut(usize::from(sem)) {
        *s = if set { value } else { s.wrapping_add(value) };
    }
}

fn multiply(chip: &mut OnChip, moving: &Ap, dst: &Ap, accumulate: bool) -> Result<(), Fault> {
    let Some((k, m)) = chip.stat_km else {
        return Err(Fault::NoStationary);
    };
    let n = moving.free();
    if usize::from(moving.parts) != k || usize::from(dst.parts) != m || dst.free() != n {
        return Err(Fault::NoStationary);
    }
    for mm in 0..m {
        for nn in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                let a = chip.stat.get(kk * m + mm).copied().unwrap_or(0.0);
                acc = libm::fmaf(a, chip.get(moving, kk, nn), acc);
            }
            let v = if accumulate {
                chip.get(dst, mm, nn) + acc
            } else {
                acc
            };
            chip.set(dst, mm, nn, canon(v));
        }
    }
    Ok(())
}

fn dma(d: &Desc, chip: &mut OnChip, hbm: &mut [u8], places: &[Placement]) -> Result<(), Fault> {
    let len = d.len as usize;
    let hbm_range = |tensor: u32, offset: u64| -> Result<usize, Fault> {
        let &(at, size) = places.get(tensor as usize).ok_or(Fault::Binding)?;
        let off = usize::try_from(offset).map_err(|_| Fault::Binding)?;
        if off + len > size {
            return Err(Fault::Binding);
        }
        Ok(at + off)
    };
    let mut tmp = [0u8; 64];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(tmp.len());
        let buf = tmp.get_mut(..n).ok_or(Fault::Binding)?;
        match d.src {
            End::Hbm { tensor, offset } => {
                let at = hbm_range(tensor, offset)? + done;
                buf.copy_from_slice(hbm.get(at..at + n).ok_or(Fault::Binding)?);
            }
            End::Sbuf { partition, offset } | End::Psum { partition, offset } => {
                let psum = matches!(d.src, End::Psum { .. });
                let src = chip
                    .bytes(psum, partition, offset + done as u32, n as u32)
                    .ok_or(Fault::Binding)?;
                buf.copy_from_slice(src);
            }
        }
        match d.dst {
            End::Hbm { tensor, offset } => {
                let at = hbm_range(tensor, offset)? + done;
                hbm.get_mut(at..at + n)
                    .ok_or(Fault::Binding)?
                    .copy_from_slice(buf);
            }
            End::Sbuf { partition, offset } | End::Psum { partition, offset } => {
                let psum = matches!(d.dst, End::Psum { .. });
                chip.bytes(psum, partition, offset + done as u32, n as u32)
                    .ok_or(Fault::Binding)?
                    .copy_from_slice(buf);
            }
        }
        done += n;
    }
    Ok(())
}
