//! The core bitmap: a set of core indices, physical or logical.
//!
//! Reservations are bitmaps over physical cores, at most [`MAX_CORES`] of them (the driver's
//! reservation namespace: 64 devices × 8). A leaf module: configuration, topology and the driver
//! all speak it.

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

    /// The cores in both sets.
    pub fn intersection(&self, other: &Self) -> Self {
        let mut out = *self;
        for (a, b) in out.words.iter_mut().zip(other.words.iter()) {
            *a &= *b;
        }
        out
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

/// The compact list form `0-3,6` (empty for the empty set), as `NEURON_RT_VISIBLE_CORES` and
/// the runtime's messages write core sets.
impl fmt::Display for CoreBitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut iter = self.iter().peekable();
        while let Some(start) = iter.next() {
            let mut end = start;
            while iter.peek() == Some(&(end + 1)) {
                end += 1;
                iter.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
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
    fn bitmap_displays_as_a_compact_list() {
        let mut b = CoreBitmap::range(0, 4);
        b.insert(6);
        assert_eq!(alloc_free_string(&b), "0-3,6");
        assert_eq!(alloc_free_string(&CoreBitmap::range(5, 1)), "5");
        assert_eq!(alloc_free_string(&CoreBitmap::new()), "");
        let mut c = CoreBitmap::new();
        for i in [0, 2, 3] {
            c.insert(i);
        }
        assert_eq!(alloc_free_string(&c), "0,2-3");
    }

    fn alloc_free_string(b: &CoreBitmap) -> heapless::String<64> {
        use core::fmt::Write;
        let mut s = heapless::String::new();
        write!(s, "{b}").unwrap();
        s
    }
}
