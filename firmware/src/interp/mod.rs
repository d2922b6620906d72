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

mod decode;
pub use decode::decode;

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

/// A decoder step: the value, or why the program is refused.
type R<T> = Result<T, Refusal>;

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
