//! Logical NeuronCore (LNC) arithmetic and the core bitmap.
//!
//! A logical core groups `lnc_size` consecutive physical cores; logical core `l` covers
//! physical cores `[l * lnc_size, (l + 1) * lnc_size)`. Reservations are bitmaps over physical
//! cores, at most [`MAX_CORES`] of them (the driver's reservation namespace: 64 devices × 8).

use core::fmt;

/// Largest number of cores (physical or logical) the runtime tracks.
pub const MAX_CORES: u32 = 512;

const WORDS: usize = (MAX_CORES / 64) as usize;

/// A set of core indices below [`MAX_CORES`], kept sorted and deduplicated by construction.
#[derive(Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct CoreBitmap {
    words: [u64; WORDS],
}

impl CoreBitmap {
    /// The empty set.
    pub const fn new() -> Self {
        Self { words: [0; WORDS] }
    }

    /// The set `[first, first + count)`, clipped to [`MAX_CORES`].
    pub fn range(first: u32, count: u32) -> Self {
        let mut b = Self::new();
        let end = first.saturating_add(count).min(MAX_CORES);
        for i in first..end {
            b.insert(i);
        }
        b
    }

    /// The raw 64-bit words (bit `i % 64` of word `i / 64` is core `i`), as the driver's
    /// `crwl_nc_map_ext.bitmap` carries them.
    pub const fn words(&self) -> &[u64; WORDS] {
        &self.words
    }

    /// Builds a set from raw words.
    pub const fn from_words(words: [u64; WORDS]) -> Self {
        Self { words }
    }

    /// Adds `core`; returns `false` (and changes nothing) if it is not below [`MAX_CORES`].
    pub fn insert(&mut self, core: u32) -> bool {
        match self.words.get_mut((core / 64) as usize) {
            Some(w) => {
                *w |= 1u64 << (core % 64);
                true
            }
            None => false,
        }
    }

    /// Removes `core`.
    pub fn remove(&mut self, core: u32) {
        if let Some(w) = self.words.get_mut((core / 64) as usize) {
            *w &= !(1u64 << (core % 64));
        }
    }

    /// Whether `core` is in the set.
    pub fn contains(&self, core: u32) -> bool {
        self.words
            .get((core / 64) as usize)
            .is_some_and(|w| w & (1u64 << (core % 64)) != 0)
    }

    /// Number of cores in the set.
    pub fn len(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// Lowest core in the set (the runtime's `tzcnt` sweep).
    pub fn first(&self) -> Option<u32> {
        let mut base = 0u32;
        for &w in &self.words {
            if w != 0 {
                return Some(base + w.trailing_zeros());
            }
            base += 64;
        }
        None
    }

    /// Highest core in the set.
    pub fn last(&self) -> Option<u32> {
        let mut base = MAX_CORES;
        for &w in self.words.iter().rev() {
            base -= 64;
            if w != 0 {
                return Some(base + 63 - w.leading_zeros());
            }
        }
        None
    }

    /// Whether the set is one run of consecutive cores (true for the empty set).
    pub fn is_contiguous(&self) -> bool {
        match (self.first(), self.last()) {
            (Some(f), Some(l)) => l - f + 1 == self.len(),
            _ => true,
        }
    }

    /// The cores in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        (0..MAX_CORES).filter(move |&c| self.contains(c))
    }

    /// The union of two sets.
    pub fn union(&self, other: &Self) -> Self {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a |= *b;
        }
        out
    }

    /// Whether the two sets share a core.
    pub fn intersects(&self, other: &Self) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// `self` without the cores of `other`.
    pub fn difference(&self, other: &Self) -> Self {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a &= !*b;
        }
        out
    }
}

impl fmt::Debug for CoreBitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for CoreBitmap {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "CoreBitmap({=[?]})", &self.words[..])
    }
}

/// The logical cores a runtime owns and the physical cores reserved for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Allocation {
    /// Physical cores per logical core.
    pub lnc_size: u32,
    /// First logical core (absolute index; callers see it as 0).
    pub first_lnc: u32,
    /// Number of logical cores.
    pub lnc_count: u32,
    /// The physical cores reserved.
    pub reserved: CoreBitmap,
    /// Whether the reservation was made through the driver (and must be released there) or
    /// marked locally (funtime).
    pub driver_reserved: bool,
}

impl Allocation {
    /// First physical core.
    pub fn first_pnc(&self) -> u32 {
        self.first_lnc.saturating_mul(self.lnc_size)
    }

    /// Last logical core (absolute).
    pub fn last_lnc(&self) -> u32 {
        (self.first_lnc + self.lnc_count).saturating_sub(1)
    }

    /// The absolute logical core for a process-relative index, if the process owns it.
    pub fn absolute_lnc(&self, relative: u32) -> Option<u32> {
        (relative < self.lnc_count).then(|| self.first_lnc + relative)
    }

    /// The physical cores of the process's logical cores, rebuilt from the logical range the way
    /// `nrt_close` rebuilds them.
    pub fn physical_cores(&self) -> CoreBitmap {
        CoreBitmap::range(
            self.first_pnc(),
            self.lnc_count.saturating_mul(self.lnc_size),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmap_first_last_and_contiguity() {
        let mut b = CoreBitmap::new();
        assert_eq!(b.first(), None);
        assert!(b.is_contiguous());
        for c in [3, 4, 5, 6] {
            assert!(b.insert(c));
        }
        assert_eq!((b.first(), b.last(), b.len()), (Some(3), Some(6), 4));
        assert!(b.is_contiguous());
        b.insert(300);
        assert!(!b.is_contiguous());
        assert_eq!(b.last(), Some(300));
        assert!(!b.insert(MAX_CORES));
        assert!(b.insert(MAX_CORES - 1));
        assert_eq!(b.last(), Some(MAX_CORES - 1));
    }

    #[test]
    fn allocation_maps_relative_to_absolute() {
        let a = Allocation {
            lnc_size: 2,
            first_lnc: 3,
            lnc_count: 2,
            reserved: CoreBitmap::range(6, 4),
            driver_reserved: true,
        };
        assert_eq!(a.absolute_lnc(0), Some(3));
        assert_eq!(a.absolute_lnc(1), Some(4));
        assert_eq!(a.absolute_lnc(2), None);
        assert_eq!(a.physical_cores(), a.reserved);
        assert_eq!(a.last_lnc(), 4);
    }
}
