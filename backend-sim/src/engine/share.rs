//! How the cores of one device share its HBM bandwidth while they execute at the same time.
//!
//! Every DMA engine moving HBM data gets an equal share of the **device's** HBM bandwidth,
//! capped by its own peak (`exec::dma`, `update_rates`). Its share depends on how many engines
//! move HBM data on the other cores, which run on other host threads. Executors learn that
//! count at **quantum boundaries**: every [`QUANTUM_TICKS`] simulated ticks, and only while
//! another core of the device executes. In between, the other cores' count stays as it was
//! at the last boundary, so their effect lags by at most one quantum.
//!
//! Where the device's bandwidth covers all its engines at their peaks (NeuronCore-v3: 3 TB/s
//! for 8 × 16 engines at 23 GB/s), sharing can never slow an engine, and no core meets the
//! others at all. On NeuronCore-v2 (820 GB/s for 2 × 16 engines at 27.2 GB/s) it can.
//!
//! There are two ways to learn it:
//! * **The board** ([`HbmBoard`]). Each executing core publishes its count there, and reads
//!   the others' whenever it reaches one of its own boundaries. This serves executions that
//!   were started independently, from different host threads. Their simulated clocks are not
//!   aligned: each execution starts at its own tick 0. So the coupling is only as
//!   deterministic as the host's scheduling. An execution alone on its device never couples
//!   and is exactly reproducible.
//! * **Lock step** ([`Lockstep`]). The subgraphs of one model, for example the two physical
//!   cores of an LNC-2 logical core, start together at tick 0 and meet at every boundary.
//!   Each publishes its count for that boundary, waits until every other member has
//!   published it (or has finished), and then reads theirs. Their coupling is a function of
//!   the simulated state alone: deterministic.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};

/// Simulated ticks between two boundaries at which a core learns the other cores' HBM demand
/// (731 ns at 1.4 GHz, less than one 32 KiB descriptor on one engine: the lag of the
/// coupling).
pub const QUANTUM_TICKS: u64 = 1024;

/// One device's board: per core, the DMA engines it has moving HBM data now (0 when it does
/// not execute), and how many of its cores execute.
#[derive(Debug)]
pub struct HbmBoard {
    demand: Box<[AtomicU32]>,
    executing: AtomicU32,
    /// Whether sharing can ever hold an engine below its peak: the device's bandwidth is less
    /// than all its cores' engines at their peaks (v2: 820 GB/s against 2 × 16 × 27.2; not v3:
    /// 3 TB/s against 8 × 16 × 23 GB/s). When it cannot, no core ever meets the others.
    binds: bool,
}

impl HbmBoard {
    /// A board for `cores` cores, none executing; `binds`: whether the device's bandwidth is
    /// less than the sum of its engines' peaks.
    pub fn new(cores: u32, binds: bool) -> Self {
        Self {
            demand: (0..cores).map(|_| AtomicU32::new(0)).collect(),
            executing: AtomicU32::new(0),
            binds,
        }
    }

    /// Whether sharing can ever hold an engine of this device below its peak.
    pub fn binds(&self) -> bool {
        self.binds
    }

    /// How many cores execute now.
    pub fn executing(&self) -> u32 {
        self.executing.load(Ordering::Relaxed)
    }

    /// Marks core `core` executing until the returned guard drops (its demand is then
    /// cleared).
    pub(crate) fn enter(&self, core: u32) -> BoardEntry<'_> {
        self.executing.fetch_add(1, Ordering::Relaxed);
        BoardEntry { board: self, core }
    }

    /// Publishes core `core`'s count of engines moving HBM data.
    #[inline]
    pub(crate) fn publish(&self, core: u32, engines: u32) {
        if let Some(d) = self.demand.get(core as usize) {
            d.store(engines, Ordering::Relaxed);
        }
    }

    /// The engines moving HBM data on the cores outside `mask` (bit `c`: core `c`).
    pub(crate) fn others(&self, mask: u64) -> u32 {
        self.demand
            .iter()
            .enumerate()
            .filter(|(c, _)| *c >= 64 || mask & (1 << c) == 0)
            .map(|(_, d)| d.load(Ordering::Relaxed))
            .sum()
    }
}

/// A core's presence on its device's board: dropping it clears the core's demand.
pub(crate) struct BoardEntry<'b> {
    board: &'b HbmBoard,
    core: u32,
}

impl Drop for BoardEntry<'_> {
    fn drop(&mut self) {
        self.board.publish(self.core, 0);
        self.board.executing.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
struct Member {
    /// The last boundary published (0: none yet).
    passed: AtomicU64,
    /// The count published at even and odd boundaries (a member can be one boundary ahead of
    /// another, never two).
    slots: [AtomicU32; 2],
    done: AtomicBool,
}

/// Spins of a member waiting at a boundary before it sleeps: the members run on their own
/// host threads at about the same pace, so the wait is usually short.
const SPINS: u32 = 1000;

/// The meeting point of the members of one lock-step group (the subgraphs of one model).
/// Members publish and look with atomics, spinning briefly; one that waits longer sleeps on a
/// condition variable until another member publishes.
#[derive(Debug)]
pub struct Lockstep {
    members: Box<[Member]>,
    sleepers: AtomicU32,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Lockstep {
    /// A group of `n` members, none at a boundary yet.
    pub fn new(n: usize) -> Self {
        Self {
            members: (0..n).map(|_| Member::default()).collect(),
            sleepers: AtomicU32::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    /// Wakes the members sleeping at a boundary (after a publication).
    fn wake(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
            self.cv.notify_all();
        }
    }

    /// Whether every member but `me` has published boundary `j` or finished.
    fn ready(&self, me: usize, j: u64) -> bool {
        self.members.iter().enumerate().all(|(i, o)| {
            i == me || o.passed.load(Ordering::SeqCst) >= j || o.done.load(Ordering::SeqCst)
        })
    }

    /// Member `me` reaches boundary `j` (≥ 1) with `engines` moving HBM data: waits until
    /// every other member has published boundary `j` or finished, and returns the sum of
    /// their counts at `j` (0 for a member that finished before it).
    pub(crate) fn meet(&self, me: usize, j: u64, engines: u32) -> u32 {
        let slot = (j % 2) as usize;
        if let Some(mine) = self.members.get(me) {
            mine.slots[slot].store(engines, Ordering::SeqCst);
            mine.passed.store(j, Ordering::SeqCst);
        }
        self.wake();
        let mut spins = 0;
        while !self.ready(me, j) {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            while !self.ready(me, j) {
                // The timeout only bounds a wait; the publisher's notification ends it.
                g = match self.cv.wait_timeout(g, std::time::Duration::from_millis(1)) {
                    Ok((g, _)) => g,
                    Err(e) => e.into_inner().0,
                };
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            break;
        }
        self.members
            .iter()
            .enumerate()
            .filter(|(i, o)| *i != me && o.passed.load(Ordering::SeqCst) >= j)
            .map(|(_, o)| o.slots[slot].load(Ordering::SeqCst))
            .sum()
    }

    /// Member `me`'s presence in the group: dropping it leaves the group, however the member's
    /// run ends (a member that never starts its program must not hold the others).
    pub(crate) fn member(&self, me: usize) -> MemberGuard<'_> {
        MemberGuard { group: self, me }
    }

    /// Member `me` finished: the others stop waiting for it (again: a no-op).
    pub(crate) fn leave(&self, me: usize) {
        if let Some(mine) = self.members.get(me) {
            mine.done.store(true, Ordering::SeqCst);
        }
        self.wake();
    }
}

/// A member of a [`Lockstep`] group; leaves it when dropped.
pub(crate) struct MemberGuard<'g> {
    group: &'g Lockstep,
    me: usize,
}

impl Drop for MemberGuard<'_> {
    fn drop(&mut self) {
        self.group.leave(self.me);
    }
}

/// What an executor needs to share its device's HBM: the board, its core, and its lock-step
/// group when it runs as one subgraph of several.
#[derive(Clone, Copy)]
pub(crate) struct CoreLink<'a> {
    pub(crate) board: &'a HbmBoard,
    pub(crate) core: u32,
    /// The group, this member's index in it, and the group's cores (bit `c`: core `c`),
    /// whose demand comes from the group rather than the board.
    pub(crate) group: Option<(&'a Lockstep, usize, u64)>,
}

impl CoreLink<'_> {
    /// Whether this executor must meet the others at boundaries now: sharing can bind on
    /// this device, and it is in a group or another core of the device executes.
    #[inline]
    pub(crate) fn coupled(&self) -> bool {
        self.board.binds && (self.group.is_some() || self.board.executing() > 1)
    }

    /// Boundary `j`: publishes `engines` and returns the other cores' count.
    pub(crate) fn meet(&self, j: u64, engines: u32) -> u32 {
        self.board.publish(self.core, engines);
        let (peers, mask) = match self.group {
            Some((g, me, mask)) => (g.meet(me, j, engines), mask),
            None => (0, 1u64.checked_shl(self.core).unwrap_or(0)),
        };
        peers + self.board.others(mask)
    }

    /// The executor finished: a group stops waiting for it.
    pub(crate) fn leave(&self) {
        if let Some((g, me, _)) = self.group {
            g.leave(me);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Two members meet at every boundary and read each other's count of that boundary; a
    /// member that left counts as zero.
    #[test]
    fn lockstep_members_read_each_others_boundary() {
        let g = Lockstep::new(2);
        let seen = std::thread::scope(|s| {
            let a = s.spawn(|| (1..=4).map(|j| g.meet(0, j, j as u32)).collect::<Vec<_>>());
            let b = s.spawn(|| {
                let v: Vec<u32> = (1..=2).map(|j| g.meet(1, j, 10 * j as u32)).collect();
                g.leave(1);
                v
            });
            (a.join().unwrap(), b.join().unwrap())
        });
        assert_eq!(seen.0, vec![10, 20, 0, 0]);
        assert_eq!(seen.1, vec![1, 2]);
    }

    /// The board sums the cores outside the mask and forgets a core whose entry dropped.
    #[test]
    fn board_counts_other_cores() {
        let b = HbmBoard::new(4, true);
        let e1 = b.enter(1);
        let _e2 = b.enter(2);
        b.publish(1, 3);
        b.publish(2, 5);
        assert_eq!(b.executing(), 2);
        assert_eq!(b.others(1 << 1), 5);
        assert_eq!(b.others(0), 8);
        drop(e1);
        assert_eq!(b.executing(), 1);
        assert_eq!(b.others(0), 5);
    }
}
