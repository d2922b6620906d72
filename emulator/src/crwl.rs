//! Core reservation and per-core locks, ported from the driver's `neuron_crwl.c`.
//!
//! * [`RangeTable`]: `ncrwl_range_pids`, one owner (thread group) per global core
//!   (64 devices × 8), with the driver's first-fit scan — including its quirk: after a free run
//!   too short for the request the scan resumes two cores past the run's end, so on
//!   `[free, busy, free, free]` a request for two cores fails with `EBUSY` and
//!   `max_nc_available` = 1.
//! * [`CoreLock`]: the per-core model reader/writer lock of `CRWL_READER_*`/`CRWL_WRITER_*`.
//!   The driver sleeps up to 0.5 s (readers) or 2 s (writers) for a busy lock before giving up
//!   with `EBUSY`; the emulator serves one request at a time, so it gives up at once.

/// `MAX_NEURON_DEVICE_COUNT * MAX_NC_PER_DEVICE`.
pub(crate) const GLOBAL_CORES: usize = 64 * 8;

/// The machine-wide core owner table.
#[derive(Clone, Debug)]
pub(crate) struct RangeTable {
    pids: Vec<u32>,
}

impl Default for RangeTable {
    fn default() -> Self {
        Self {
            pids: vec![0; GLOBAL_CORES],
        }
    }
}

/// Bit `i` of a little-endian word bitmap.
pub(crate) fn test_bit(map: &[u64], i: usize) -> bool {
    map.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
}

fn set_bit(map: &mut [u64], i: usize) {
    if let Some(w) = map.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

/// `bitmap_shift_right` over the whole map.
pub(crate) fn shift_right(map: &[u64], by: usize) -> Vec<u64> {
    let bits = map.len() * 64;
    let mut out = vec![0u64; map.len()];
    for i in 0..bits {
        if test_bit(map, i) && i >= by {
            set_bit(&mut out, i - by);
        }
    }
    out
}

/// `bitmap_shift_left` over the whole map (bits shifted past the end are lost).
pub(crate) fn shift_left(map: &[u64], by: usize) -> Vec<u64> {
    let bits = map.len() * 64;
    let mut out = vec![0u64; map.len()];
    for i in 0..bits {
        if test_bit(map, i) && i + by < bits {
            set_bit(&mut out, i + by);
        }
    }
    out
}

/// Result of a mark.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Marked: the global bitmap (8 words) of the cores taken.
    Marked(Vec<u64>),
    /// `EBUSY`, with the longest free run seen (`max_nc_available`).
    Busy(u32),
    /// `EINVAL`: range out of bounds or reversed.
    Invalid,
}

impl RangeTable {
    /// `ncrwl_nc_range_mark` for process `tgid` over global cores `[start, end]`.
    pub(crate) fn mark(&mut self, tgid: u32, nc_count: u32, start: u32, end: u32) -> Mark {
        let limit = GLOBAL_CORES as u32;
        if start > end || start >= limit || end >= limit {
            return Mark::Invalid;
        }
        let mut max_range = 0u32;
        let mut i = start;
        // The C loop: `for (i = start; i <= end; i++)`, with `i = j + 1` inside.
        while i <= end {
            if self.owner(i) != 0 {
                i += 1;
                continue;
            }
            let mut range_len = 1u32;
            let mut j = i;
            while j <= end && j < i.wrapping_add(nc_count) {
                if self.owner(j) != 0 {
                    break;
                }
                range_len = j - i + 1;
                j += 1;
            }
            if range_len >= nc_count {
                let mut map = vec![0u64; 8];
                let mut k = i;
                while k <= end && k < i.wrapping_add(nc_count) {
                    if let Some(p) = self.pids.get_mut(k as usize) {
                        *p = tgid;
                    }
                    set_bit(&mut map, k as usize);
                    k += 1;
                }
                return Mark::Marked(map);
            }
            max_range = max_range.max(range_len);
            i = j + 1; // then the loop's own increment
            i += 1;
        }
        Mark::Busy(max_range)
    }

    /// `ncrwl_nc_range_unmark`: frees every core of the global bitmap `map` owned by `tgid`.
    pub(crate) fn unmark(&mut self, tgid: u32, map: &[u64]) {
        for (i, p) in self.pids.iter_mut().enumerate() {
            if test_bit(map, i) && *p == tgid {
                *p = 0;
            }
        }
    }

    /// Unmarks every core of `tgid` (the flush of an `O_WRONLY` fd).
    pub(crate) fn unmark_all(&mut self, tgid: u32) {
        self.unmark(tgid, &[u64::MAX; 8]);
    }

    fn owner(&self, core: u32) -> u32 {
        self.pids.get(core as usize).copied().unwrap_or(0)
    }

    /// Cores marked by anyone.
    pub(crate) fn marked(&self) -> u32 {
        self.pids.iter().filter(|&&p| p != 0).count() as u32
    }
}

/// One core's model lock (`struct neuron_crwl`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CoreLock {
    pub(crate) reader_count: u64,
    pub(crate) writer_acquired: bool,
    pub(crate) writer_pid: u32,
    pub(crate) uuid: [u8; 32],
}

impl CoreLock {
    fn validate(&self, tgid: u32, uuid: &[u8; 32]) -> Result<(), i32> {
        if &self.uuid != uuid || self.writer_pid != tgid {
            return Err(libc::ENOENT);
        }
        Ok(())
    }

    /// `ncrwl_reader_enter`.
    pub(crate) fn reader_enter(&mut self, tgid: u32, uuid: &[u8; 32]) -> Result<(), i32> {
        if self.writer_acquired {
            return Err(libc::EBUSY);
        }
        self.validate(tgid, uuid)?;
        self.reader_count += 1;
        Ok(())
    }

    /// `ncrwl_reader_exit`.
    pub(crate) fn reader_exit(&mut self, tgid: u32, uuid: &[u8; 32]) -> Result<(), i32> {
        self.validate(tgid, uuid)?;
        if self.reader_count == 0 {
            return Err(libc::EINVAL);
        }
        self.reader_count -= 1;
        Ok(())
    }

    /// `ncrwl_writer_enter` (`EALREADY`: the process already switched the core to `uuid`).
    pub(crate) fn writer_enter(&mut self, tgid: u32, uuid: &[u8; 32]) -> Result<(), i32> {
        if self.writer_acquired || self.reader_count != 0 {
            return Err(libc::EBUSY);
        }
        self.writer_acquired = true;
        if self.writer_pid == tgid && &self.uuid == uuid {
            return Err(libc::EALREADY);
        }
        self.writer_pid = tgid;
        self.uuid = *uuid;
        Ok(())
    }

    /// `ncrwl_writer_downgrade`.
    pub(crate) fn writer_downgrade(&mut self, tgid: u32, uuid: &[u8; 32]) -> Result<(), i32> {
        if !self.writer_acquired {
            return Err(libc::EINVAL);
        }
        self.validate(tgid, uuid)?;
        self.writer_acquired = false;
        self.reader_count = 1;
        Ok(())
    }

    /// `ncrwl_release_current_process`.
    pub(crate) fn release(&mut self, tgid: u32) {
        if self.writer_pid == tgid {
            *self = CoreLock::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(busy: &[u32]) -> RangeTable {
        let mut t = RangeTable::default();
        for &b in busy {
            t.pids[b as usize] = 99;
        }
        t
    }

    fn bits(map: &[u64]) -> Vec<usize> {
        (0..512).filter(|&i| test_bit(map, i)).collect()
    }

    #[test]
    fn first_fit_marks_and_records_owner() {
        let mut t = table(&[]);
        let Mark::Marked(m) = t.mark(7, 2, 0, 3) else {
            unreachable!()
        };
        assert_eq!(bits(&m), vec![0, 1]);
        let Mark::Marked(m) = t.mark(8, 2, 0, 3) else {
            unreachable!()
        };
        assert_eq!(bits(&m), vec![2, 3]);
        assert_eq!(t.mark(9, 1, 0, 3), Mark::Busy(0));
        assert_eq!(t.marked(), 4);
        // Only the owner's cores are freed.
        t.unmark(7, &[0b1111, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(t.marked(), 2);
        t.unmark_all(8);
        assert_eq!(t.marked(), 0);
    }

    #[test]
    fn the_scan_skips_past_a_short_run() {
        // [free, busy, free, free]: the driver resumes at core 3 and finds no run of 2.
        let mut t = table(&[1]);
        assert_eq!(t.mark(7, 2, 0, 3), Mark::Busy(1));
        // A run starting right after the busy core is found when the scan starts there.
        assert!(matches!(t.mark(7, 2, 2, 3), Mark::Marked(_)));
    }

    #[test]
    fn bounds_and_zero_count() {
        let mut t = table(&[]);
        assert_eq!(t.mark(7, 1, 3, 2), Mark::Invalid);
        assert_eq!(t.mark(7, 1, 0, 512), Mark::Invalid);
        assert_eq!(t.mark(7, 0, 0, 3), Mark::Marked(vec![0; 8]));
        assert_eq!(t.mark(7, 5, 0, 3), Mark::Busy(4));
    }

    #[test]
    fn shifts() {
        let m = vec![0b110, 0, 0, 0, 0, 0, 0, 1 << 63];
        assert_eq!(bits(&shift_right(&m, 1)), vec![0, 1, 510]);
        assert_eq!(bits(&shift_left(&m, 2)), vec![3, 4]);
    }

    #[test]
    fn locks() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let mut l = CoreLock::default();
        assert_eq!(l.reader_enter(5, &a), Err(libc::ENOENT));
        assert_eq!(l.writer_enter(5, &a), Ok(()));
        assert_eq!(l.reader_enter(5, &a), Err(libc::EBUSY));
        assert_eq!(l.writer_downgrade(5, &b), Err(libc::ENOENT));
        assert_eq!(l.writer_downgrade(5, &a), Ok(()));
        assert_eq!(l.reader_count, 1);
        assert_eq!(l.reader_enter(5, &a), Ok(()));
        assert_eq!(l.writer_enter(6, &b), Err(libc::EBUSY));
        assert_eq!(l.reader_exit(5, &a), Ok(()));
        assert_eq!(l.reader_exit(5, &a), Ok(()));
        assert_eq!(l.reader_exit(5, &a), Err(libc::EINVAL));
        assert_eq!(l.writer_enter(5, &a), Err(libc::EALREADY));
        l.release(5);
        assert_eq!(l, CoreLock::default());
    }
}
