//! Programs: named HBM tensors, five instruction streams, a DMA descriptor table and initial
//! semaphore values; and their versioned binary format.
//!
//! `Program::from_bytes` validates everything and never panics: counts are checked against
//! the bytes that remain before anything is reserved, and every limit below is enforced.

use std::collections::BTreeSet;

use nrt_core::{Error, err};

use super::dtype::DType;
use super::isa::{
    AccessPattern, ActFunc, AluOp, Bias, Dim, DmaDescriptor, DmaEndpoint, EngineId, Instr,
    MAX_DIMS, SemCmp, Space,
};
use super::memory::{
    DMA_ENGINES, DMA_QUEUES, PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITION_BYTES,
    SBUF_PARTITIONS,
};

/// The 8-byte magic that opens a serialized program.
pub const MAGIC: [u8; 8] = *b"NRTSIMPG";
/// Major version of the format this build writes and reads.
pub const FORMAT_MAJOR: u16 = 1;
/// Minor version of the format this build writes (readers accept any minor of their major).
pub const FORMAT_MINOR: u16 = 0;
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

    /// Checks every rule of the format: names, sizes, engines, operands (partition rules and
    /// bounds), DMA descriptors and triggers, and the TensorE stationary/moving pairing.
    /// Failures are `NRT_INVALID` with a message naming the offending item.
    pub fn validate(&self) -> Result<(), Error> {
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
            let mut stationary: Option<(u8, u64, DType)> = None;
            for (pc, ins) in stream.iter().enumerate() {
                let ctx = |e: Error| {
                    err!(
                        Invalid,
                        "{engine} pc {pc} ({}): {}",
                        ins.name(),
                        e.message()
                    )
                };
                if !ins.runs_on(engine) {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: {} cannot run on {engine}",
                        ins.name()
                    ));
                }
                if matches!(ins, Instr::Halt) && pc + 1 != stream.len() {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: Halt must be the last instruction"
                    ));
                }
                ins.validate_operands().map_err(ctx)?;
                match *ins {
                    Instr::DmaTrigger {
                        dma,
                        queue,
                        first,
                        count,
                        ..
                    } => {
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
                    Instr::LoadStationary { src } => {
                        stationary = Some((src.partitions, src.free_elems(), src.dtype));
                    }
                    Instr::MultiplyMoving { moving, dst, .. } => {
                        let Some((k, m, dt)) = stationary else {
                            return Err(err!(
                                Invalid,
                                "{engine} pc {pc}: MultiplyMoving before any LoadStationary"
                            ));
                        };
                        if moving.partitions != k || moving.dtype != dt {
                            return Err(err!(
                                Invalid,
                                "{engine} pc {pc}: moving [{} partitions, {}] does not match the \
                                 stationary [{k} partitions, {dt}]",
                                moving.partitions,
                                moving.dtype
                            ));
                        }
                        if u64::from(dst.partitions) != m {
                            return Err(err!(
                                Invalid,
                                "{engine} pc {pc}: destination has {} partitions, the stationary \
                                 free size is {m}",
                                dst.partitions
                            ));
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Serializes the program (format version [`FORMAT_MAJOR`].[`FORMAT_MINOR`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend_from_slice(&MAGIC);
        put_u16(&mut w, FORMAT_MAJOR);
        put_u16(&mut w, FORMAT_MINOR);
        put_u32(&mut w, 0); // flags
        put_u32(&mut w, 4 + 5); // sections
        section(&mut w, SEC_NAME, |s| put_str(s, &self.name));
        section(&mut w, SEC_TENSORS, |s| {
            put_u32(s, self.tensors.len() as u32);
            for t in &self.tensors {
                put_str(s, &t.name);
                s.push(t.kind.code());
                s.push(t.dtype.code());
                s.push(t.shape.len() as u8);
                for &d in &t.shape {
                    put_u64(s, d);
                }
                put_u64(s, t.data.len() as u64);
                s.extend_from_slice(&t.data);
            }
        });
        section(&mut w, SEC_DESCRIPTORS, |s| {
            put_u32(s, self.descriptors.len() as u32);
            for d in &self.descriptors {
                put_endpoint(s, &d.src);
                put_endpoint(s, &d.dst);
                put_u32(s, d.len);
            }
        });
        section(&mut w, SEC_SEM_INIT, |s| {
            put_u32(s, self.sem_init.len() as u32);
            for &(sem, v) in &self.sem_init {
                s.push(sem);
                put_u32(s, v);
            }
        });
        for engine in EngineId::ALL {
            section(&mut w, SEC_STREAM_BASE + engine.index() as u32, |s| {
                let stream = self.stream(engine);
                put_u32(s, stream.len() as u32);
                for ins in stream {
                    put_instr(s, ins);
                }
            });
        }
        w
    }

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

fn validate_descriptor(d: &DmaDescriptor, sizes: &[u64]) -> Result<(), Error> {
    if d.len == 0 {
        return Err(err!(Invalid, "zero length"));
    }
    let ok_dir = matches!(
        (d.src, d.dst),
        (DmaEndpoint::Hbm { .. }, DmaEndpoint::Sbuf { .. })
            | (DmaEndpoint::Sbuf { .. }, DmaEndpoint::Hbm { .. })
            | (DmaEndpoint::Sbuf { .. }, DmaEndpoint::Sbuf { .. })
            | (DmaEndpoint::Psum { .. }, DmaEndpoint::Sbuf { .. })
    );
    if !ok_dir {
        return Err(err!(
            Invalid,
            "{}->{} is not a supported direction (HBM<->SBUF, SBUF->SBUF, PSUM->SBUF)",
            d.src.mem_name(),
            d.dst.mem_name()
        ));
    }
    for e in [&d.src, &d.dst] {
        match *e {
            DmaEndpoint::Hbm { tensor, offset } => {
                let size = sizes
                    .get(tensor as usize)
                    .copied()
                    .ok_or_else(|| err!(Invalid, "tensor {tensor} does not exist"))?;
                if offset
                    .checked_add(u64::from(d.len))
                    .is_none_or(|e| e > size)
                {
                    return Err(err!(
                        Invalid,
                        "bytes [{offset}, +{}) outside tensor {tensor} of {size} bytes",
                        d.len
                    ));
                }
            }
            DmaEndpoint::Sbuf { partition, offset } => {
                if usize::from(partition) >= SBUF_PARTITIONS
                    || offset as usize + d.len as usize > SBUF_PARTITION_BYTES
                {
                    return Err(err!(
                        Invalid,
                        "SBUF partition {partition} bytes [{offset}, +{}) out of range",
                        d.len
                    ));
                }
            }
            DmaEndpoint::Psum { partition, offset } => {
                if usize::from(partition) >= PSUM_PARTITIONS
                    || offset as usize + d.len as usize > PSUM_PARTITION_BYTES
                {
                    return Err(err!(
                        Invalid,
                        "PSUM partition {partition} bytes [{offset}, +{}) out of range",
                        d.len
                    ));
                }
            }
        }
    }
    Ok(())
}

// ---- writer ---------------------------------------------------------------------------------

fn put_u16(w: &mut Vec<u8>, v: u16) {
    w.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
}
fn put_str(w: &mut Vec<u8>, s: &str) {
    put_u16(w, s.len().min(usize::from(u16::MAX)) as u16);
    w.extend_from_slice(
        s.as_bytes()
            .get(..usize::from(u16::MAX))
            .unwrap_or(s.as_bytes()),
    );
}
fn section(w: &mut Vec<u8>, tag: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut body = Vec::new();
    f(&mut body);
    put_u32(w, tag);
    put_u64(w, body.len() as u64);
    w.extend_from_slice(&body);
}
fn put_endpoint(w: &mut Vec<u8>, e: &DmaEndpoint) {
    match *e {
        DmaEndpoint::Hbm { tensor, offset } => {
            w.push(0);
            put_u32(w, tensor);
            put_u64(w, offset);
        }
        DmaEndpoint::Sbuf { partition, offset } => {
            w.push(1);
            w.push(partition);
            put_u32(w, offset);
        }
        DmaEndpoint::Psum { partition, offset } => {
            w.push(2);
            w.push(partition);
            put_u32(w, offset);
        }
    }
}
fn put_ap(w: &mut Vec<u8>, ap: &AccessPattern) {
    w.push(match ap.space {
        Space::Sbuf => 0,
        Space::Psum => 1,
    });
    w.push(ap.dtype.code());
    w.push(ap.start_partition);
    w.push(ap.partitions);
    put_u32(w, ap.offset);
    w.push(ap.ndims);
    for d in ap.used_dims() {
        put_u16(w, d.size);
        w.extend_from_slice(&d.stride.to_le_bytes());
    }
}

mod op {
    pub(super) const SEM_WAIT: u8 = 0x01;
    pub(super) const SEM_INC: u8 = 0x02;
    pub(super) const SEM_SET: u8 = 0x03;
    pub(super) const DMA_TRIGGER: u8 = 0x04;
    pub(super) const NOTIFY: u8 = 0x05;
    pub(super) const HALT: u8 = 0x06;
    pub(super) const LOAD_STATIONARY: u8 = 0x10;
    pub(super) const MULTIPLY_MOVING: u8 = 0x11;
    pub(super) const TENSOR_TENSOR: u8 = 0x20;
    pub(super) const TENSOR_SCALAR: u8 = 0x21;
    pub(super) const ACTIVATION: u8 = 0x22;
    pub(super) const TENSOR_COPY: u8 = 0x23;
    pub(super) const MEMSET: u8 = 0x30;
    pub(super) const IOTA: u8 = 0x31;
}

fn put_instr(w: &mut Vec<u8>, ins: &Instr) {
    match *ins {
        Instr::SemWait { sem, cmp, value } => {
            w.push(op::SEM_WAIT);
            w.push(sem);
            w.push(match cmp {
                SemCmp::Ge => 0,
                SemCmp::Eq => 1,
            });
            put_u32(w, value);
        }
        Instr::SemInc { sem, value } => {
            w.push(op::SEM_INC);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::SemSet { sem, value } => {
            w.push(op::SEM_SET);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::DmaTrigger {
            dma,
            queue,
            first,
            count,
            sem,
            inc,
        } => {
            w.push(op::DMA_TRIGGER);
            w.push(dma);
            w.push(queue);
            put_u32(w, first);
            put_u32(w, count);
            w.push(sem);
            put_u32(w, inc);
        }
        Instr::Notify { payload } => {
            w.push(op::NOTIFY);
            put_u32(w, payload);
        }
        Instr::Halt => w.push(op::HALT),
        Instr::LoadStationary { src } => {
            w.push(op::LOAD_STATIONARY);
            put_ap(w, &src);
        }
        Instr::MultiplyMoving {
            moving,
            dst,
            accumulate,
        } => {
            w.push(op::MULTIPLY_MOVING);
            put_ap(w, &moving);
            put_ap(w, &dst);
            w.push(u8::from(accumulate));
        }
        Instr::TensorTensor { op: o, a, b, out } => {
            w.push(op::TENSOR_TENSOR);
            w.push(o.code());
            put_ap(w, &a);
            put_ap(w, &b);
            put_ap(w, &out);
        }
        Instr::TensorScalar {
            op: o,
            src,
            scalar,
            out,
        } => {
            w.push(op::TENSOR_SCALAR);
            w.push(o.code());
            put_ap(w, &src);
            put_u32(w, scalar.to_bits());
            put_ap(w, &out);
        }
        Instr::Activation {
            func,
            src,
            out,
            scale,
            bias,
        } => {
            w.push(op::ACTIVATION);
            w.push(func.code());
            put_ap(w, &src);
            put_ap(w, &out);
            put_u32(w, scale.to_bits());
            match bias {
                Bias::Imm(v) => {
                    w.push(0);
                    put_u32(w, v.to_bits());
                }
                Bias::PerPartition(ap) => {
                    w.push(1);
                    put_ap(w, &ap);
                }
            }
        }
        Instr::TensorCopy { src, out } => {
            w.push(op::TENSOR_COPY);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::Memset { out, bits } => {
            w.push(op::MEMSET);
            put_ap(w, &out);
            put_u32(w, bits);
        }
        Instr::Iota {
            out,
            base,
            partition_step,
            free_step,
        } => {
            w.push(op::IOTA);
            put_ap(w, &out);
            w.extend_from_slice(&base.to_le_bytes());
            w.extend_from_slice(&partition_step.to_le_bytes());
            w.extend_from_slice(&free_step.to_le_bytes());
        }
    }
}

// ---- reader ---------------------------------------------------------------------------------

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
