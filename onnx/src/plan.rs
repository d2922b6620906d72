//! Device-memory planning: every intermediate buffer gets an offset in one scratch arena,
//! from liveness over the step order (first fit, freed space reused), so the arena is the
//! peak of simultaneously live buffers (plus fragmentation), not their sum.

use std::collections::BTreeMap;

/// Offsets are multiples of this many elements (64 bytes of fp32).
pub(crate) const ALIGN: usize = 16;

/// A first-fit allocator over element offsets.
#[derive(Debug, Default)]
pub(crate) struct Arena {
    /// Free ranges: start → length.
    free: BTreeMap<usize, usize>,
    /// End of the used region.
    top: usize,
    /// Largest `top` reached.
    pub(crate) peak: usize,
}

impl Arena {
    /// Allocates `n` elements (rounded up to [`ALIGN`]); returns the offset.
    pub(crate) fn alloc(&mut self, n: usize) -> usize {
        let n = n.max(1).div_ceil(ALIGN) * ALIGN;
        let hit = self
            .free
            .iter()
            .find(|(_, len)| **len >= n)
            .map(|(&s, &l)| (s, l));
        if let Some((s, l)) = hit {
            self.free.remove(&s);
            if l > n {
                self.free.insert(s + n, l - n);
            }
            return s;
        }
        // Grow, absorbing a free range that ends at the top.
        let start = match self.free.iter().next_back().map(|(&s, &l)| (s, l)) {
            Some((s, l)) if s + l == self.top => {
                self.free.remove(&s);
                s
            }
            _ => self.top,
        };
        self.top = start + n;
        self.peak = self.peak.max(self.top);
        start
    }

    /// Frees the `n` elements at `off` (as allocated), merging neighbours.
    pub(crate) fn free(&mut self, off: usize, n: usize) {
        let mut s = off;
        let mut l = n.max(1).div_ceil(ALIGN) * ALIGN;
        if let Some((&ps, &pl)) = self.free.range(..s).next_back()
            && ps + pl == s
        {
            self.free.remove(&ps);
            s = ps;
            l += pl;
        }
        if let Some(&nl) = self.free.get(&(s + l)) {
            self.free.remove(&(s + l));
            l += nl;
        }
        self.free.insert(s, l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_space_is_reused_and_merged() {
        let mut a = Arena::default();
        let x = a.alloc(10);
        let y = a.alloc(20);
        assert_eq!((x, y), (0, 16));
        a.free(x, 10);
        assert_eq!(a.alloc(16), 0);
        a.free(0, 16);
        a.free(y, 20);
        assert_eq!(a.alloc(48), 0);
        assert_eq!(a.peak, 48);
    }
}
