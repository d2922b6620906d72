//! Memory spaces ([`Space`]), access patterns ([`AccessPattern`]: a partition range and up to
//! [`MAX_DIMS`] strided free dimensions) with their validation, and the [`Region`]s they cover
//! (what the hazard detector compares).

use core::fmt;

use nrt_core::{Error, err};

use crate::engine::dtype::DType;
use crate::engine::memory::{
    PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITION_BYTES, SBUF_PARTITIONS,
};

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

    /// Bytes per partition on NeuronCore-v2, the size every generation has (what kernels and
    /// lowerings plan for).
    pub const fn partition_bytes(self) -> usize {
        match self {
            Space::Sbuf => SBUF_PARTITION_BYTES,
            Space::Psum => PSUM_PARTITION_BYTES,
        }
    }

    /// Bytes per partition on the generation with the most (NeuronCore-v3's 224 KiB of SBUF):
    /// the bound the program validator checks; a device checks a program against its own
    /// generation when it loads it.
    pub const fn max_partition_bytes(self) -> usize {
        match self {
            Space::Sbuf => crate::engine::MAX_SBUF_PARTITION_BYTES,
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
        if lo < 0 || hi > self.space.max_partition_bytes() as i64 {
            return Err(err!(
                Invalid,
                "{what}: bytes [{lo}, {hi}) fall outside the {} partition of {} bytes",
                self.space.name(),
                self.space.max_partition_bytes()
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
        self.for_each_run(|i, o, n, step| {
            for j in 0..n {
                f(i + j, (o as isize + j as isize * step) as usize);
            }
        });
    }

    /// [`for_each_offset`](Self::for_each_offset) by runs of the innermost dimension:
    /// `f(index, byte_offset, count, step)` for each of its runs: elements
    /// `index .. index + count` at bytes `byte_offset + j·step` (`step` the innermost stride
    /// in bytes, possibly 0 or negative). The same elements in the same order.
    pub(crate) fn for_each_run(&self, mut f: impl FnMut(usize, usize, usize, isize)) {
        let dims = self.used_dims();
        let Some((inner, outer)) = dims.split_last() else {
            // No free dimension (not a valid pattern): one element at the offset.
            f(0, self.offset as usize, 1, 0);
            return;
        };
        let es = self.dtype.size() as i64;
        let run = usize::from(inner.size);
        let step = (i64::from(inner.stride) * es) as isize;
        let mut sizes = [1i64; MAX_DIMS - 1];
        let mut strides = [0i64; MAX_DIMS - 1];
        let nd = outer.len();
        for (i, d) in outer.iter().enumerate() {
            sizes[MAX_DIMS - 1 - nd + i] = i64::from(d.size);
            strides[MAX_DIMS - 1 - nd + i] = i64::from(d.stride) * es;
        }
        let base = i64::from(self.offset);
        let mut idx = 0usize;
        for a in 0..sizes[0] {
            let oa = base + a * strides[0];
            for b in 0..sizes[1] {
                let ob = oa + b * strides[1];
                for c in 0..sizes[2] {
                    f(idx, (ob + c * strides[2]) as usize, run, step);
                    idx += run;
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
    fn runs_cover_the_offsets_in_order() {
        type Case = (DType, u32, &'static [(u16, i16)]);
        let cases: &[Case] = &[
            (DType::F32, 0, &[(7, 1)]),
            (DType::F32, 64, &[(3, 20), (5, 1)]),
            (DType::Bf16, 8, &[(2, 100), (3, 30), (4, 1)]),
            (DType::F32, 4, &[(2, 50), (2, 20), (3, 5), (6, 1)]),
            (DType::F32, 400, &[(3, -40), (4, 1)]),
            (DType::F32, 0, &[(3, 8), (4, 2)]),
            (DType::Bf16, 0, &[(5, 3), (1, 1)]),
            (DType::F32, 0, &[(4, 0), (2, 1)]),
            (DType::F32, 0, &[(4, 0), (2, 0)]),
            (DType::F32, 60, &[(3, 5), (4, -2)]),
        ];
        for &(dt, off, dims) in cases {
            let ap = AccessPattern::new(Space::Sbuf, dt, 0, 1, off, dims);
            let mut want = vec![];
            ap.for_each_offset(|i, o| want.push((i, o)));
            let mut got = vec![];
            ap.for_each_run(|i, o, n, step| {
                got.extend((0..n).map(|j| (i + j, (o as isize + j as isize * step) as usize)))
            });
            assert_eq!(got, want, "{dims:?}");
        }
    }
}
