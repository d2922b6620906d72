//! The simulator's instruction set: engines, access patterns, instructions, DMA descriptors.
//! The binary encoding is in [`super::program`]; `docs/SIM_ISA.md` is the reference.

use core::fmt;

use nrt_core::{Error, err};

use super::dtype::DType;
use super::memory::{
    PSUM_BANK_BYTES, PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITION_BYTES, SBUF_PARTITIONS,
};

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

/// An on-chip memory an access pattern addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Space {
    /// The state buffer (128 × 192 KiB).
    Sbuf,
    /// The partial-sum buffer (128 × 16 KiB, 8 banks of 2 KiB per partition).
    Psum,
}

impl Space {
    /// Display name.
    pub const fn name(self) -> &'static str {
        match self {
            Space::Sbuf => "SBUF",
            Space::Psum => "PSUM",
        }
    }

    /// Partitions of this memory.
    pub const fn partitions(self) -> usize {
        match self {
            Space::Sbuf => SBUF_PARTITIONS,
            Space::Psum => PSUM_PARTITIONS,
        }
    }

    /// Bytes per partition.
    pub const fn partition_bytes(self) -> usize {
        match self {
            Space::Sbuf => SBUF_PARTITION_BYTES,
            Space::Psum => PSUM_PARTITION_BYTES,
        }
    }

    /// Largest free size (elements per partition) of one VectorE/ScalarE/GpSimdE access
    /// (64 Ki in SBUF, 4 Ki in PSUM).
    pub const fn max_free_elems(self) -> u64 {
        match self {
            Space::Sbuf => 64 * 1024,
            Space::Psum => 4 * 1024,
        }
    }
}

/// One free dimension of an access pattern: `size` elements `stride` elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Dim {
    /// Number of elements (≥ 1).
    pub size: u16,
    /// Distance between consecutive elements, in elements (may be 0 or negative).
    pub stride: i16,
}

/// Maximum free dimensions of an access pattern.
pub const MAX_DIMS: usize = 4;

/// A tensor access on SBUF or PSUM: contiguous partitions `[start_partition,
/// start_partition + partitions)`, and in each the same free pattern: from byte `offset`, up to
/// four dimensions (outermost first) of `size` elements at `stride` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccessPattern {
    /// Memory.
    pub space: Space,
    /// Element type.
    pub dtype: DType,
    /// First partition.
    pub start_partition: u8,
    /// Number of partitions (1..=128).
    pub partitions: u8,
    /// Byte offset of the first element inside each partition.
    pub offset: u32,
    /// Number of free dimensions in use (1..=4).
    pub ndims: u8,
    /// Free dimensions, outermost first; entries past `ndims` are ignored.
    pub dims: [Dim; MAX_DIMS],
}

/// A conservative footprint of an access: a partition range × a byte range in each partition
/// (or an address range of HBM, with partitions `0..1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Region {
    /// Which memory.
    pub mem: MemKind,
    /// First partition.
    pub p0: u32,
    /// One past the last partition.
    pub p1: u32,
    /// First byte (inside each partition, or HBM address).
    pub b0: u64,
    /// One past the last byte.
    pub b1: u64,
}

/// A memory a [`Region`] lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemKind {
    /// SBUF.
    Sbuf,
    /// PSUM.
    Psum,
    /// HBM of the device.
    Hbm,
}

impl Region {
    /// Whether the two footprints share a byte.
    pub fn overlaps(&self, o: &Region) -> bool {
        self.mem == o.mem && self.p0 < o.p1 && o.p0 < self.p1 && self.b0 < o.b1 && o.b0 < self.b1
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mem {
            MemKind::Hbm => write!(f, "HBM [{:#x}, {:#x})", self.b0, self.b1),
            MemKind::Sbuf | MemKind::Psum => write!(
                f,
                "{} partitions [{}, {}) bytes [{:#x}, {:#x})",
                if self.mem == MemKind::Sbuf {
                    "SBUF"
                } else {
                    "PSUM"
                },
                self.p0,
                self.p1,
                self.b0,
                self.b1
            ),
        }
    }
}

/// Whether `start` is a legal first partition for an access of `count` partitions (the
/// published rule: 65–128 partitions start at 0; 33–64 at 0 or 64; up to 32 at 0, 32, 64 or 96).
pub const fn partition_start_ok(start: u32, count: u32) -> bool {
    match count {
        0 => false,
        1..=32 => start % 32 == 0 && start + count <= 128,
        33..=64 => start % 64 == 0 && start + count <= 128,
        65..=128 => start == 0,
        _ => false,
    }
}

impl AccessPattern {
    /// An access of `partitions` partitions from `start_partition`, at byte `offset`, with the
    /// given `(size, stride)` free dimensions (outermost first; at most four are used).
    pub fn new(
        space: Space,
        dtype: DType,
        start_partition: u8,
        partitions: u8,
        offset: u32,
        dims: &[(u16, i16)],
    ) -> Self {
        let mut d = [Dim::default(); MAX_DIMS];
        for (slot, &(size, stride)) in d.iter_mut().zip(dims.iter()) {
            *slot = Dim { size, stride };
        }
        Self {
            space,
            dtype,
            start_partition,
            partitions,
            offset,
            ndims: dims.len().min(MAX_DIMS) as u8,
            dims: d,
        }
    }

    /// A contiguous `[partitions, n]` access.
    pub fn contiguous(
        space: Space,
        dtype: DType,
        start_partition: u8,
        partitions: u8,
        offset: u32,
        n: u16,
    ) -> Self {
        Self::new(space, dtype, start_partition, partitions, offset, &[(n, 1)])
    }

    /// A contiguous SBUF access.
    pub fn sbuf(dtype: DType, start_partition: u8, partitions: u8, offset: u32, n: u16) -> Self {
        Self::contiguous(Space::Sbuf, dtype, start_partition, partitions, offset, n)
    }

    /// A contiguous PSUM access.
    pub fn psum(dtype: DType, start_partition: u8, partitions: u8, offset: u32, n: u16) -> Self {
        Self::contiguous(Space::Psum, dtype, start_partition, partitions, offset, n)
    }

    /// The free dimensions in use.
    pub fn used_dims(&self) -> &[Dim] {
        self.dims.get(..usize::from(self.ndims)).unwrap_or(&[])
    }

    /// Elements per partition (product of the free sizes).
    pub fn free_elems(&self) -> u64 {
        self.used_dims().iter().map(|d| u64::from(d.size)).product()
    }

    /// Byte range `[lo, hi)` touched inside each partition.
    pub fn byte_range(&self) -> (i64, i64) {
        let es = self.dtype.size() as i64;
        let mut lo = i64::from(self.offset);
        let mut hi = lo;
        for d in self.used_dims() {
            let span = (i64::from(d.size) - 1).max(0) * i64::from(d.stride) * es;
            if span < 0 {
                lo += span;
            } else {
                hi += span;
            }
        }
        (lo, hi + es)
    }

    /// Whether the innermost free dimension steps by more than 16 bytes (half bandwidth).
    pub fn innermost_strided(&self) -> bool {
        match self.used_dims().last() {
            Some(d) => d.size > 1 && i64::from(d.stride).abs() * self.dtype.size() as i64 > 16,
            None => false,
        }
    }

    /// The footprint of this access.
    pub fn region(&self) -> Region {
        let (lo, hi) = self.byte_range();
        Region {
            mem: match self.space {
                Space::Sbuf => MemKind::Sbuf,
                Space::Psum => MemKind::Psum,
            },
            p0: u32::from(self.start_partition),
            p1: u32::from(self.start_partition) + u32::from(self.partitions),
            b0: lo.max(0) as u64,
            b1: hi.max(0) as u64,
        }
    }

    /// Checks the published partition rules, the free-pattern limits and the bounds of the
    /// memory. `what` names the operand in the message.
    pub fn validate(&self, what: &str) -> Result<(), Error> {
        let start = u32::from(self.start_partition);
        let count = u32::from(self.partitions);
        if count == 0 || count as usize > self.space.partitions() {
            return Err(err!(
                Invalid,
                "{what}: partition count {count} is outside 1..=128"
            ));
        }
        if !partition_start_ok(start, count) {
            return Err(err!(
                Invalid,
                "{what}: an access of {count} partitions cannot start at partition {start} \
                 (65-128 partitions start at 0, 33-64 at 0 or 64, up to 32 at 0/32/64/96)"
            ));
        }
        if self.ndims == 0 || usize::from(self.ndims) > MAX_DIMS {
            return Err(err!(
                Invalid,
                "{what}: {} free dimensions (1..=4 allowed)",
                self.ndims
            ));
        }
        if self.used_dims().iter().any(|d| d.size == 0) {
            return Err(err!(Invalid, "{what}: a free dimension has size 0"));
        }
        let n = self.free_elems();
        let max = self.space.max_free_elems();
        if n > max {
            return Err(err!(
                Invalid,
                "{what}: free size {n} exceeds the {} limit of {max} elements",
                self.space.name()
            ));
        }
        let (lo, hi) = self.byte_range();
        if lo < 0 || hi > self.space.partition_bytes() as i64 {
            return Err(err!(
                Invalid,
                "{what}: bytes [{lo}, {hi}) fall outside the {} partition of {} bytes",
                self.space.name(),
                self.space.partition_bytes()
            ));
        }
        if i64::from(self.offset) % self.dtype.size() as i64 != 0 {
            return Err(err!(
                Invalid,
                "{what}: offset {} is not aligned to the {} element size",
                self.offset,
                self.dtype
            ));
        }
        Ok(())
    }

    /// Calls `f(element_index, byte_offset)` for every element of one partition, in the
    /// pattern's order (outermost dimension slowest). The pattern must be valid.
    pub(crate) fn for_each_offset(&self, mut f: impl FnMut(usize, usize)) {
        let es = self.dtype.size() as i64;
        let mut sizes = [1i64; MAX_DIMS];
        let mut strides = [0i64; MAX_DIMS];
        let nd = self.used_dims().len();
        // Right-align the used dims so index 3 is innermost.
        for (i, d) in self.used_dims().iter().enumerate() {
            sizes[MAX_DIMS - nd + i] = i64::from(d.size);
            strides[MAX_DIMS - nd + i] = i64::from(d.stride) * es;
        }
        let base = i64::from(self.offset);
        let mut idx = 0usize;
        for a in 0..sizes[0] {
            let oa = base + a * strides[0];
            for b in 0..sizes[1] {
                let ob = oa + b * strides[1];
                for c in 0..sizes[2] {
                    let oc = ob + c * strides[2];
                    for d in 0..sizes[3] {
                        f(idx, (oc + d * strides[3]) as usize);
                        idx += 1;
                    }
                }
            }
        }
    }

    /// Whether the pattern is one contiguous run per partition.
    pub(crate) fn is_contiguous(&self) -> bool {
        let mut expect = 1i64;
        for d in self.used_dims().iter().rev() {
            if d.size > 1 && i64::from(d.stride) != expect {
                return false;
            }
            expect *= i64::from(d.size);
        }
        true
    }
}

impl fmt::Display for AccessPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}:{}]+{:#x} {}",
            self.space.name(),
            self.start_partition,
            u32::from(self.start_partition) + u32::from(self.partitions),
            self.offset,
            self.dtype
        )?;
        for d in self.used_dims() {
            write!(f, " [{}x{}]", d.size, d.stride)?;
        }
        Ok(())
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
    /// [`super::program::Program::validate`].
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

/// One end of a DMA descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaEndpoint {
    /// Bytes of a program tensor in HBM.
    Hbm {
        /// Index of the tensor in the program's tensor table.
        tensor: u32,
        /// Byte offset inside the tensor.
        offset: u64,
    },
    /// Bytes of one SBUF partition.
    Sbuf {
        /// Partition.
        partition: u8,
        /// Byte offset in the partition.
        offset: u32,
    },
    /// Bytes of one PSUM partition.
    Psum {
        /// Partition.
        partition: u8,
        /// Byte offset in the partition.
        offset: u32,
    },
}

impl DmaEndpoint {
    /// Short name of the memory.
    pub const fn mem_name(&self) -> &'static str {
        match self {
            DmaEndpoint::Hbm { .. } => "HBM",
            DmaEndpoint::Sbuf { .. } => "SBUF",
            DmaEndpoint::Psum { .. } => "PSUM",
        }
    }
}

/// One contiguous copy of `len` bytes from `src` to `dst` (the shape of a udma descriptor).
/// Allowed directions: HBM→SBUF, SBUF→HBM, SBUF→SBUF, PSUM→SBUF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DmaDescriptor {
    /// Source.
    pub src: DmaEndpoint,
    /// Destination.
    pub dst: DmaEndpoint,
    /// Bytes (≥ 1).
    pub len: u32,
}

impl DmaDescriptor {
    /// Whether either end is HBM (the transfer consumes HBM bandwidth).
    pub const fn touches_hbm(&self) -> bool {
        matches!(self.src, DmaEndpoint::Hbm { .. }) || matches!(self.dst, DmaEndpoint::Hbm { .. })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use nrt_core::NrtStatus;

    #[test]
    fn partition_rules() {
        assert!(partition_start_ok(0, 128));
        assert!(!partition_start_ok(32, 96));
        assert!(partition_start_ok(64, 64));
        assert!(!partition_start_ok(32, 64));
        assert!(partition_start_ok(96, 32));
        assert!(!partition_start_ok(16, 16));
        assert!(!partition_start_ok(0, 0));
        let ap = AccessPattern::sbuf(DType::F32, 32, 64, 0, 16);
        let e = ap.validate("x").unwrap_err();
        assert_eq!(e.status(), NrtStatus::Invalid);
        assert!(e.message().contains("cannot start at partition 32"), "{e}");
    }

    #[test]
    fn bounds_and_strides() {
        let ap = AccessPattern::new(Space::Sbuf, DType::F32, 0, 128, 8, &[(4, -2)]);
        let e = ap.validate("neg").unwrap_err();
        assert!(e.message().contains("outside"), "{e}");
        let ap = AccessPattern::new(Space::Sbuf, DType::F32, 0, 128, 24, &[(4, -2)]);
        ap.validate("neg").unwrap();
        assert_eq!(ap.byte_range(), (0, 28));
        let mut offs = vec![];
        ap.for_each_offset(|i, o| offs.push((i, o)));
        assert_eq!(offs, vec![(0, 24), (1, 16), (2, 8), (3, 0)]);
        assert!(!ap.innermost_strided());
        let ap = AccessPattern::new(Space::Psum, DType::F32, 0, 1, 0, &[(4097, 1)]);
        assert!(ap.validate("big").is_err());
        let ap = AccessPattern::new(Space::Sbuf, DType::Bf16, 0, 1, 0, &[(2, 16), (8, 9)]);
        assert!(ap.innermost_strided());
        assert!(!ap.is_contiguous());
        assert!(
            AccessPattern::new(Space::Sbuf, DType::F32, 0, 1, 0, &[(2, 8), (8, 1)]).is_contiguous()
        );
    }

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
