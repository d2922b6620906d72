//! Device memory of the simulated machine: sparse HBM per device (pages materialise on first
//! write, reads of untouched bytes are zero) with capacity accounting.

use std::collections::BTreeMap;

const PAGE: u64 = 4096;

/// One device's HBM.
#[derive(Debug)]
pub(crate) struct DeviceHbm {
    capacity: u64,
    allocated: u64,
    next: u64,
    /// Allocation base → size.
    allocs: BTreeMap<u64, u64>,
    pages: BTreeMap<u64, Box<[u8]>>,
}

/// Why a device memory operation failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HbmError {
    /// Not enough capacity left.
    OutOfMemory,
    /// Address range outside an allocation.
    OutOfRange,
}

impl DeviceHbm {
    pub(crate) fn new(capacity: u64) -> Self {
        Self {
            capacity,
            allocated: 0,
            next: PAGE,
            allocs: BTreeMap::new(),
            pages: BTreeMap::new(),
        }
    }

    /// Bytes allocated.
    pub(crate) fn allocated(&self) -> u64 {
        self.allocated
    }

    /// Allocates `size` bytes (page-aligned, addresses never reused within a device).
    pub(crate) fn alloc(&mut self, size: u64) -> Result<u64, HbmError> {
        let rounded = size
            .max(1)
            .checked_next_multiple_of(PAGE)
            .ok_or(HbmError::OutOfMemory)?;
        if rounded > self.capacity.saturating_sub(self.allocated) {
            return Err(HbmError::OutOfMemory);
        }
        let base = self.next;
        self.next = self
            .next
            .checked_add(rounded)
            .ok_or(HbmError::OutOfMemory)?;
        self.allocs.insert(base, size);
        self.allocated += rounded;
        Ok(base)
    }

    /// Frees the allocation at `base` and drops its pages.
    pub(crate) fn free(&mut self, base: u64) -> Result<(), HbmError> {
        let size = self.allocs.remove(&base).ok_or(HbmError::OutOfRange)?;
        let rounded = size.max(1).next_multiple_of(PAGE);
        self.allocated -= rounded;
        let doomed: Vec<u64> = self
            .pages
            .range(base / PAGE..(base + rounded) / PAGE)
            .map(|(k, _)| *k)
            .collect();
        for k in doomed {
            self.pages.remove(&k);
        }
        Ok(())
    }

    fn check(&self, addr: u64, len: u64) -> Result<(), HbmError> {
        match self.allocs.range(..=addr).next_back() {
            Some((&base, &size)) if addr.checked_add(len).is_some_and(|end| end <= base + size) => {
                Ok(())
            }
            _ => Err(HbmError::OutOfRange),
        }
    }

    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), HbmError> {
        self.check(addr, out.len() as u64)?;
        let mut done = 0usize;
        while done < out.len() {
            let a = addr + done as u64;
            let off = (a % PAGE) as usize;
            let n = (PAGE as usize - off).min(out.len() - done);
            if let Some(dst) = out.get_mut(done..done + n) {
                match self
                    .pages
                    .get(&(a / PAGE))
                    .and_then(|p| p.get(off..off + n))
                {
                    Some(src) => dst.copy_from_slice(src),
                    None => dst.fill(0),
                }
            }
            done += n;
        }
        Ok(())
    }

    pub(crate) fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), HbmError> {
        self.check(addr, data.len() as u64)?;
        self.fill_with(addr, data.len() as u64, |dst, done| {
            if let Some(src) = data.get(done..done + dst.len()) {
                dst.copy_from_slice(src);
            }
        });
        Ok(())
    }

    pub(crate) fn memset(&mut self, addr: u64, value: u8, len: u64) -> Result<(), HbmError> {
        self.check(addr, len)?;
        self.fill_with(addr, len, |dst, _| dst.fill(value));
        Ok(())
    }

    fn fill_with(&mut self, addr: u64, len: u64, mut f: impl FnMut(&mut [u8], usize)) {
        let mut done = 0u64;
        while done < len {
            let a = addr + done;
            let off = (a % PAGE) as usize;
            let n = (PAGE - off as u64).min(len - done) as usize;
            let page = self
                .pages
                .entry(a / PAGE)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            if let Some(dst) = page.get_mut(off..off + n) {
                f(dst, done as usize);
            }
            done += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn sparse_accounted_and_bounds_checked() {
        let mut h = DeviceHbm::new(1 << 20);
        let a = h.alloc(10_000).unwrap();
        let mut buf = [9u8; 8];
        h.read(a + 100, &mut buf).unwrap();
        assert_eq!(buf, [0; 8]);
        h.write(a + 4090, &[7; 10]).unwrap();
        h.read(a + 4088, &mut buf).unwrap();
        assert_eq!(buf, [0, 0, 7, 7, 7, 7, 7, 7]);
        assert_eq!(h.write(a + 9_995, &[1; 8]), Err(HbmError::OutOfRange));
        assert_eq!(h.alloc(2 << 20), Err(HbmError::OutOfMemory));
        h.memset(a, 3, 10_000).unwrap();
        h.read(a + 9_992, &mut buf).unwrap();
        assert_eq!(buf, [3; 8]);
        h.free(a).unwrap();
        assert_eq!(h.allocated(), 0);
        assert_eq!(h.read(a, &mut buf), Err(HbmError::OutOfRange));
    }
}
