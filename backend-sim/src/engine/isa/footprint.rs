//! Exact footprints of accesses ([`Footprint`]): the bytes an access pattern or a DMA endpoint
//! touches, kept in their strided shape, with an exact overlap test (what the hazard detector
//! compares) and the bounding [`Region`] as its fast first test.

use core::fmt;

use super::dma::{DmaBlock, DmaEndpoint};
use super::overlap::{self, Lin, Pattern, Step};
use super::pattern::{AccessPattern, MAX_DIMS, MemKind, Region, Space};

/// Bytes at or beyond this position (2^62) are not described exactly: a footprint reaching
/// them is its bounding box instead (far beyond every memory).
const LIMIT: i128 = 1 << 62;

/// The exact set of bytes an access touches: partitions `p0, p0 + step, …` (below `p1`; HBM:
/// partition 0), and in each of them the same bytes `base + Σ k_d·stride_d + e` for
/// `k_d < count_d`, `e < run` — an access pattern's free dimensions with its element size as
/// the run, a DMA byte range as one run, a block in HBM as `rows` runs of a row's bytes
/// `pitch` apart.
///
/// Built normalised: negative strides are reflected, dimensions whose steps touch or overlap
/// the run are folded into it, and a dimension whose stride is a multiple `q ≤ count` of
/// another's is merged with it, so a dense access (every contiguous pattern, every row-major
/// tile view) is one run per partition and compares as fast as its bounding box.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Footprint {
    /// The bounding box: `b0` is the first byte, `p0` the first partition.
    region: Region,
    /// Partition step (1 when the partitions are contiguous or there is one).
    pstep: u32,
    /// Contiguous bytes of each run.
    run: u64,
    /// Dimensions in use, and the dimensions (count ≥ 2, stride > run), coarsest first.
    nd: u8,
    dims: [Step; MAX_DIMS],
    /// The GCD of the dimensions' strides (0: none): every byte's offset from `b0`, modulo
    /// it, is below `run`.
    gcd: u64,
}

impl From<Region> for Footprint {
    /// Every byte of the box.
    fn from(region: Region) -> Self {
        Self {
            region,
            pstep: 1,
            run: region.b1.saturating_sub(region.b0),
            nd: 0,
            dims: [Step::default(); MAX_DIMS],
            gcd: 0,
        }
    }
}

impl Footprint {
    /// The footprint of `mem`: partitions `start + i·step` for `i < count` (`(start, count,
    /// step)`; HBM: `(0, 1, 1)`), and in each the bytes `base + Σ k_d·stride_d + e` for
    /// `k_d < count_d`, `e < run`, over `dims` = `(count, stride in bytes)` (at most
    /// [`MAX_DIMS`]; strides may be 0 or negative). `None` when there are more dimensions, a
    /// byte falls below 0 or at or beyond 2^62, or a partition beyond `u32::MAX`. A count of 0
    /// or a run of 0 gives the empty footprint.
    pub fn new(
        mem: MemKind,
        partitions: (u32, u32, u32),
        base: u64,
        run: u64,
        dims: &[(u64, i64)],
    ) -> Option<Self> {
        let (p_start, mut p_count, mut p_step) = partitions;
        if dims.len() > MAX_DIMS {
            return None;
        }
        if p_count == 0 || run == 0 || dims.iter().any(|&(c, _)| c == 0) {
            return Some(Self::from(Region {
                mem,
                p0: 0,
                p1: 0,
                b0: 0,
                b1: 0,
            }));
        }
        if p_step == 0 {
            p_count = 1;
        }
        if p_count == 1 {
            p_step = 1;
        }
        let p_last = u64::from(p_start) + u64::from(p_count - 1) * u64::from(p_step);
        let p1 = u32::try_from(p_last + 1).ok()?;
        let mut lo = i128::from(base);
        let mut ext = i128::from(run);
        let mut v = [Step::default(); MAX_DIMS];
        let mut n = 0;
        for &(count, stride) in dims {
            if count == 1 || stride == 0 {
                continue;
            }
            let span = i128::from(count - 1) * i128::from(stride);
            if stride < 0 {
                lo += span;
            }
            ext += span.abs();
            if let Some(slot) = v.get_mut(n) {
                *slot = Step {
                    count,
                    stride: stride.unsigned_abs(),
                };
                n += 1;
            }
        }
        if lo < 0 || lo + ext > LIMIT {
            return None;
        }
        // Below 2^62 from here on: no arithmetic can overflow.
        let run = normalize(&mut v, &mut n, run);
        if let Some(d) = v.get_mut(..n) {
            d.sort_unstable_by(|a, b| b.stride.cmp(&a.stride).then(b.count.cmp(&a.count)));
        }
        let (b0, b1) = (lo as u64, (lo + ext) as u64);
        Some(Self {
            region: Region {
                mem,
                p0: p_start,
                p1,
                b0,
                b1,
            },
            pstep: p_step,
            run,
            nd: n as u8,
            dims: v,
            gcd: v.iter().take(n).fold(0, |g, d| gcd(g, d.stride)),
        })
    }

    /// The bounding box (partition range × byte range) — what hazard reports show.
    pub fn region(&self) -> Region {
        self.region
    }

    /// Whether every byte of the bounding box belongs to the footprint.
    pub fn is_dense(&self) -> bool {
        self.nd == 0 && self.pstep == 1
    }

    /// Whether the footprint has no byte.
    pub fn is_empty(&self) -> bool {
        self.region.p1 <= self.region.p0 || self.region.b1 <= self.region.b0
    }

    /// Whether the two footprints share a byte (exact: same memory, a common partition and a
    /// common byte in it).
    pub fn overlaps(&self, o: &Footprint) -> bool {
        !self.is_empty()
            && !o.is_empty()
            && self.region.overlaps(&o.region)
            && self.overlaps_within_boxes(o)
    }

    /// [`Self::overlaps`] for two non-empty footprints whose bounding boxes overlap.
    pub(crate) fn overlaps_within_boxes(&self, o: &Footprint) -> bool {
        if (self.pstep > 1 || o.pstep > 1)
            && !overlap::meet_1d(self.partition_set(), o.partition_set())
        {
            return false;
        }
        if self.nd == 0 && o.nd == 0 {
            return true;
        }
        // Residues: modulo g, the GCD of both footprints' strides, the bytes of each lie in
        // `b0 + [0, run)`; two footprints whose residue intervals are apart share no byte
        // (even and odd columns, interleaved rows). A necessary condition only: the exact
        // test decides the rest.
        let g = gcd(self.gcd, o.gcd);
        if self.run + o.run <= g {
            let d = (o.region.b0 % g + g - self.region.b0 % g) % g;
            if d >= self.run && d + o.run <= g {
                return false;
            }
        }
        overlap::meet(self.pattern(), o.pattern())
    }

    fn partition_set(&self) -> Lin {
        let r = &self.region;
        Lin {
            base: u64::from(r.p0),
            count: u64::from(r.p1.saturating_sub(r.p0).saturating_sub(1) / self.pstep.max(1)) + 1,
            stride: u64::from(self.pstep.max(1)),
            run: 1,
        }
    }

    fn used(&self) -> &[Step] {
        self.dims.get(..usize::from(self.nd)).unwrap_or(&[])
    }

    fn pattern(&self) -> Pattern<'_> {
        Pattern {
            base: self.region.b0,
            dims: self.used(),
            run: self.run,
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Folds dimensions into the run and merges commensurate dimensions (see [`Footprint`]);
/// returns the run. Exact: `[0, r) + {0..n}·s = [0, r + (n-1)·s)` when `s ≤ r`, and
/// `{0..n_i}·s + {0..n_j}·q·s = {0..(n_i-1) + (n_j-1)·q + 1}·s` when `q ≤ n_i`.
fn normalize(v: &mut [Step; MAX_DIMS], n: &mut usize, mut run: u64) -> u64 {
    let remove = |v: &mut [Step; MAX_DIMS], n: &mut usize, i: usize| {
        v.copy_within(i + 1..*n, i);
        *n -= 1;
    };
    'again: loop {
        for i in 0..*n {
            let d = v[i];
            if d.stride <= run {
                run += (d.count - 1) * d.stride;
                remove(v, n, i);
                continue 'again;
            }
        }
        for i in 0..*n {
            for j in 0..*n {
                let (di, dj) = (v[i], v[j]);
                if i != j && dj.stride % di.stride == 0 && dj.stride / di.stride <= di.count {
                    v[i].count = di.count + (dj.count - 1) * (dj.stride / di.stride);
                    remove(v, n, j);
                    continue 'again;
                }
            }
        }
        return run;
    }
}

impl fmt::Display for Footprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_dense() {
            return write!(f, "{}", self.region);
        }
        let r = &self.region;
        match r.mem {
            MemKind::Hbm => write!(f, "HBM {:#x}", r.b0)?,
            MemKind::Sbuf | MemKind::Psum => {
                write!(
                    f,
                    "{} partitions [{}, {})",
                    if r.mem == MemKind::Sbuf {
                        "SBUF"
                    } else {
                        "PSUM"
                    },
                    r.p0,
                    r.p1
                )?;
                if self.pstep > 1 {
                    write!(f, " step {}", self.pstep)?;
                }
                write!(f, " bytes {:#x}", r.b0)?;
            }
        }
        for d in self.used() {
            write!(f, " + {}x{:#x}", d.count, d.stride)?;
        }
        write!(
            f,
            " runs of {} (within [{:#x}, {:#x}))",
            self.run, r.b0, r.b1
        )
    }
}

impl AccessPattern {
    /// The exact footprint of this access (its [`Self::region`] when it is contiguous).
    pub fn footprint(&self) -> Footprint {
        if self.is_contiguous() {
            return Footprint::from(self.region());
        }
        let es = self.dtype.size() as i64;
        let mut dims = [(0u64, 0i64); MAX_DIMS];
        for (slot, d) in dims.iter_mut().zip(self.used_dims()) {
            *slot = (u64::from(d.size), i64::from(d.stride) * es);
        }
        let mem = match self.space {
            Space::Sbuf => MemKind::Sbuf,
            Space::Psum => MemKind::Psum,
        };
        let parts = (
            u32::from(self.start_partition),
            u32::from(self.partitions),
            1,
        );
        dims.get(..self.used_dims().len())
            .and_then(|d| Footprint::new(mem, parts, u64::from(self.offset), es as u64, d))
            .unwrap_or_else(|| Footprint::from(self.region()))
    }
}

impl DmaBlock {
    /// The exact footprint of this block, `tensor_base` the HBM address of its tensor (unused
    /// on chip): in HBM `rows` runs of a row's bytes, `pitch` elements apart; on chip the
    /// `rows` partitions from `index` × a row's bytes from `offset`.
    pub fn footprint(&self, tensor_base: u64) -> Footprint {
        let es = self.dtype.size() as u64;
        let exact = match self.mem {
            MemKind::Hbm => i64::try_from(u64::from(self.pitch) * es)
                .ok()
                .and_then(|pitch| {
                    Footprint::new(
                        MemKind::Hbm,
                        (0, 1, 1),
                        tensor_base.checked_add(self.offset)?,
                        self.row_bytes(),
                        &[(u64::from(self.rows), pitch)],
                    )
                }),
            MemKind::Sbuf | MemKind::Psum => Footprint::new(
                self.mem,
                (self.index, self.rows, 1),
                self.offset,
                self.row_bytes(),
                &[],
            ),
        };
        exact.unwrap_or_else(|| {
            // Beyond the exact range: the endpoint's bounding box (as `DmaEndpoint::region`).
            Footprint::from(match self.mem {
                MemKind::Hbm => {
                    let b0 = tensor_base.saturating_add(self.offset);
                    Region {
                        mem: MemKind::Hbm,
                        p0: 0,
                        p1: 1,
                        b0,
                        b1: b0.saturating_add(self.hbm_span().unwrap_or(0)),
                    }
                }
                MemKind::Sbuf | MemKind::Psum => Region {
                    mem: self.mem,
                    p0: self.index,
                    p1: self.index.saturating_add(self.rows),
                    b0: self.offset,
                    b1: self.offset.saturating_add(self.row_bytes()),
                },
            })
        })
    }
}

impl DmaEndpoint {
    /// The exact footprint of `len` bytes at this endpoint (of the whole block for a block),
    /// given the HBM base address of each program tensor (as [`Self::region`]).
    #[inline]
    pub(crate) fn footprint(&self, bases: &[u64], len: u32) -> Footprint {
        match self {
            DmaEndpoint::Block(b) => {
                let base = match b.mem {
                    MemKind::Hbm => bases.get(b.index as usize).copied().unwrap_or(0),
                    MemKind::Sbuf | MemKind::Psum => 0,
                };
                b.footprint(base)
            }
            _ => Footprint::from(self.region(bases, len)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::engine::dtype::DType;

    #[test]
    fn dense_patterns_normalise_to_their_box() {
        let ap = AccessPattern::new(Space::Sbuf, DType::F32, 0, 128, 64, &[(8, 16), (16, 1)]);
        let fp = ap.footprint();
        assert!(fp.is_dense(), "{fp}");
        assert_eq!(fp.region(), ap.region());
        // A window (stride 1 and 1 again) merges too, and a negative stride reflects.
        let ap = AccessPattern::new(Space::Sbuf, DType::Bf16, 0, 4, 64, &[(6, 1), (3, 1)]);
        assert!(ap.footprint().is_dense());
        let ap = AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 60, &[(16, -1)]);
        assert!(ap.footprint().is_dense());
        assert_eq!(ap.footprint().region(), ap.region());
        // Even columns: one dimension of 8-byte steps, 4-byte runs.
        let ap = AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 0, &[(16, 2)]);
        let fp = ap.footprint();
        assert!(!fp.is_dense());
        assert_eq!(fp.region(), ap.region());
        assert_eq!(
            fp.to_string(),
            "SBUF partitions [0, 4) bytes 0x0 + 16x0x8 runs of 4 (within [0x0, 0x7c))"
        );
    }

    #[test]
    fn residues_and_the_exact_test() {
        let fp = |base, run, dims: &[(u64, i64)]| {
            Footprint::new(MemKind::Hbm, (0, 1, 1), base, run, dims).unwrap()
        };
        // Even and odd f32 columns of 4 rows: strides 256 and 8, residues mod 8 apart.
        let even = fp(0, 4, &[(4, 256), (32, 8)]);
        let odd = fp(4, 4, &[(4, 256), (32, 8)]);
        assert_eq!(even.gcd, 8);
        assert!(even.region().overlaps(&odd.region()));
        assert!(!even.overlaps(&odd) && !odd.overlaps(&even));
        // A dense run between them meets both.
        assert!(even.overlaps(&fp(6, 4, &[])) && odd.overlaps(&fp(6, 4, &[])));
        // Residues mod 4 meet (runs of 4), but {0..4, 8..12} and {4..8, 16..20} do not.
        let a = fp(0, 4, &[(2, 8)]);
        assert!(!a.overlaps(&fp(4, 4, &[(2, 12)])));
        assert!(a.overlaps(&fp(4, 4, &[(2, 4)])), "8..12");
    }
}
