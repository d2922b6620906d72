//! DMA: 16 engines, each serving its 16 queues round-robin, one descriptor at a time (a fixed
//! overhead phase, then a data phase at the engine's peak or its share of HBM bandwidth, in
//! exact integers); a transfer's last descriptor updates its semaphore. Copies move the bytes.
//! A transfer whose trigger has dynamic terms moves each descriptor shifted by the trigger's
//! offsets (checked when it was triggered).

use super::cost::dma_units;
use super::report::{Actor, Event, EventKind, Track};
use super::{Acct, Executor, Phase, join};
use crate::engine::isa::{DmaDescriptor, DmaEndpoint, shift_descriptor};
use crate::engine::memory::{DMA_ENGINES, DMA_QUEUES, OnChip};

impl Executor<'_, '_> {
    pub(super) fn complete_dma_phases(&mut self) {
        let t = self.t;
        let mid_due = std::mem::take(&mut self.mid_due);
        if !mid_due && !self.dma_next.iter().any(|&n| n <= t) {
            return;
        }
        for e in 0..DMA_ENGINES {
            if self.dma_next[e] > t {
                // A boundary inside a run at this tick: its member finishes here, in its
                // engine's place; the next starts in the start pass.
                if mid_due && self.run_boundary(e) == t && self.next_member(e, t) {
                    self.mid_started |= 1 << e;
                    self.start_pending = true;
                }
                continue;
            }
            match self.dma[e].phase {
                Phase::Overhead {
                    until,
                    queue,
                    start,
                } if until <= t => {
                    let Some(tr) = self.queues[queue].front() else {
                        self.set_idle(e);
                        continue;
                    };
                    let idx = (tr.first + tr.next) as usize;
                    let Some(d) = self.env.program.descriptors.get(idx) else {
                        self.set_idle(e);
                        continue;
                    };
                    let hbm = d.touches_hbm();
                    let remaining = dma_units(d);
                    let de = &mut self.dma[e];
                    de.phase = Phase::Data {
                        remaining,
                        queue,
                        hbm,
                        start,
                    };
                    de.since = t;
                    if hbm {
                        // The rate depends on how many engines share HBM: `update_rates`.
                        de.rate = 0;
                        self.dma_next[e] = u64::MAX;
                        self.n_hbm += 1;
                        self.rates_dirty = true;
                    } else {
                        let peak = de.peak;
                        de.rate = peak;
                        self.dma_next[e] = t + remaining.div_ceil(peak).max(1);
                    }
                    self.reclass(e);
                }
                Phase::Whole { more: 1.., .. } => self.settle_run(e, t, u64::MAX),
                Phase::Data { queue, start, .. } | Phase::Whole { queue, start, .. } => {
                    self.finish_descriptor(e, queue, start)
                }
                _ => {}
            }
        }
    }

    /// Ticks engine `e` takes to move `units` at its peak (at least one).
    pub(super) fn data_ticks(&self, e: usize, units: u64) -> u64 {
        units.div_ceil(self.dma[e].peak.max(1)).max(1)
    }

    /// Puts engine `e` in the idle phase.
    pub(super) fn set_idle(&mut self, e: usize) {
        let d = &mut self.dma[e];
        if let Phase::Data { hbm: true, .. } = d.phase {
            self.n_hbm -= 1;
        }
        d.phase = Phase::Idle;
        d.rate = 0;
        self.dma_next[e] = u64::MAX;
        self.run_mid[e] = u64::MAX;
        self.start_pending = true;
        self.reclass(e);
    }

    /// Closes engine `e`'s accounting interval at the current tick.
    pub(super) fn charge_dma(&mut self, e: usize) {
        let t = self.t;
        let d = &mut self.dma[e];
        let dt = t.saturating_sub(d.acct_since);
        d.acct_since = t;
        let c = &mut self.report.dma_engines[e];
        match d.acct {
            Acct::Idle => c.idle += dt,
            Acct::Active => c.active += dt,
            Acct::Bandwidth => c.stall_bandwidth += dt,
        }
    }

    /// Re-files engine `e`'s time after a change of phase or rate.
    fn reclass(&mut self, e: usize) {
        let class = self.dma[e].class();
        if class != self.dma[e].acct {
            self.charge_dma(e);
            self.dma[e].acct = class;
        }
    }

    fn finish_descriptor(&mut self, e: usize, queue: usize, start: u64) {
        self.set_idle(e);
        self.retire(e, queue, start, self.t);
    }

    /// The descriptor `queue`'s front transfer has next, started on engine `e` at `start`,
    /// ended at `end`: its copy, counters and events; the transfer's last updates its
    /// semaphore.
    pub(super) fn retire(&mut self, e: usize, queue: usize, start: u64, end: u64) {
        let t = end;
        let Some(tr) = self.queues[queue].front_mut() else {
            return;
        };
        let idx = tr.first + tr.next;
        tr.next += 1;
        let done = tr.next >= tr.count;
        let shift = tr.shift;
        let Some(d) = self
            .env
            .program
            .descriptors
            .get(idx as usize)
            .and_then(|d| shift_descriptor(d, shift))
        else {
            return;
        };
        self.copy(&d);
        let c = &mut self.report.dma_engines[e];
        c.instructions += 1;
        c.bytes += u64::from(d.len);
        if self.opts.record_descriptors {
            self.push_event(Event {
                start,
                dur: t - start,
                track: Track::DmaEngine(e as u8),
                kind: EventKind::Descriptor {
                    queue: (queue % DMA_QUEUES) as u8,
                    desc: idx,
                    bytes: d.len,
                },
            });
        }
        if done {
            let Some(tr) = self.queues[queue].pop_front() else {
                return;
            };
            if self.queues[queue].is_empty() {
                self.queue_mask[queue / DMA_QUEUES] &= !(1 << (queue % DMA_QUEUES));
            }
            self.wake = true;
            let s = usize::from(tr.sem);
            self.sems[s] = self.sems[s].wrapping_add(tr.inc);
            join(&mut self.sem_clocks[s], &tr.clock);
            self.sem_pending_dma[s] = self.sem_pending_dma[s].saturating_sub(1);
            let st = tr.start.unwrap_or(start);
            self.push_event(Event {
                start: st,
                dur: t - st,
                track: Track::DmaQueue((queue / DMA_QUEUES) as u8, (queue % DMA_QUEUES) as u8),
                kind: EventKind::Transfer {
                    first: tr.first,
                    count: tr.count,
                    bytes: tr.bytes,
                    sem: tr.sem,
                    inc: tr.inc,
                },
            });
        }
    }

    /// Performs a descriptor's copy: the bytes move as if through a buffer (a source out of
    /// range reads as zeros, a destination out of range is not written); the common
    /// directions copy straight from source to destination.
    fn copy(&mut self, d: &DmaDescriptor) {
        if let (DmaEndpoint::Block(src), DmaEndpoint::Block(dst)) = (d.src, d.dst) {
            self.copy_block(&src, &dst);
            return;
        }
        let len = d.len as usize;
        let env = &mut *self.env;
        let hbm_addr =
            |tensor: u32, offset: u64| env.bases.get(tensor as usize).map(|&b| b + offset);
        match (d.src, d.dst) {
            (
                DmaEndpoint::Hbm { tensor, offset },
                dst @ (DmaEndpoint::Sbuf { .. } | DmaEndpoint::Psum { .. }),
            ) => {
                let addr = hbm_addr(tensor, offset);
                let (m, p, off) = onchip_endpoint(env.sbuf, env.psum, dst);
                let out = m.write(p, off, len);
                if out.len() == len {
                    match addr {
                        Some(a) => env.hbm.read_unchecked(a, out),
                        None => out.fill(0),
                    }
                }
            }
            (
                src @ (DmaEndpoint::Sbuf { .. } | DmaEndpoint::Psum { .. }),
                DmaEndpoint::Hbm { tensor, offset },
            ) => {
                let Some(addr) = hbm_addr(tensor, offset) else {
                    return;
                };
                let (m, p, off) = onchip_endpoint(env.sbuf, env.psum, src);
                let data = m.read(p, off, len);
                if data.len() == len {
                    env.hbm.write_unchecked(addr, data);
                } else {
                    let mut buf = std::mem::take(&mut self.scratch);
                    buf.clear();
                    buf.resize(len, 0);
                    self.env.hbm.write_unchecked(addr, &buf);
                    self.scratch = buf;
                }
            }
            (
                DmaEndpoint::Sbuf {
                    partition: sp,
                    offset: so,
                },
                DmaEndpoint::Sbuf {
                    partition: dp,
                    offset: doff,
                },
            ) => env.sbuf.copy_within(
                usize::from(sp),
                so as usize,
                usize::from(dp),
                doff as usize,
                len,
            ),
            (
                DmaEndpoint::Psum {
                    partition: sp,
                    offset: so,
                },
                DmaEndpoint::Psum {
                    partition: dp,
                    offset: doff,
                },
            ) => env.psum.copy_within(
                usize::from(sp),
                so as usize,
                usize::from(dp),
                doff as usize,
                len,
            ),
            (
                DmaEndpoint::Psum {
                    partition: sp,
                    offset: so,
                },
                DmaEndpoint::Sbuf {
                    partition: dp,
                    offset: doff,
                },
            ) => copy_between(env.psum, env.sbuf, sp, so, dp, doff, len),
            (
                DmaEndpoint::Sbuf {
                    partition: sp,
                    offset: so,
                },
                DmaEndpoint::Psum {
                    partition: dp,
                    offset: doff,
                },
            ) => copy_between(env.sbuf, env.psum, sp, so, dp, doff, len),
            (
                DmaEndpoint::Hbm {
                    tensor: st,
                    offset: so,
                },
                DmaEndpoint::Hbm {
                    tensor: dt,
                    offset: doff,
                },
            ) => {
                let mut buf = std::mem::take(&mut self.scratch);
                buf.clear();
                buf.resize(len, 0);
                if let Some(a) = hbm_addr(st, so) {
                    self.env.hbm.read_unchecked(a, &mut buf);
                }
                if let Some(a) = self.env.bases.get(dt as usize).map(|&b| b + doff) {
                    self.env.hbm.write_unchecked(a, &buf);
                }
                self.scratch = buf;
            }
            // A block endpoint opposite a byte endpoint: refused at load.
            (DmaEndpoint::Block(_), _) | (_, DmaEndpoint::Block(_)) => {}
        }
    }

    /// The earliest tick a transfer queued now on queue `q` may start under
    /// `CoreSpec::dma_queue_interval_ticks` (0 when it is 0 or the queue never started one).
    pub(super) fn queue_interval_floor(&self, q: usize) -> u64 {
        match self.queue_last_start.get(q) {
            Some(&last) if last != u64::MAX => {
                last.saturating_add(self.env.spec.dma_queue_interval_ticks)
            }
            _ => 0,
        }
    }

    /// A transfer on queue `q` started at `t`: the next one queued behind it may start no
    /// earlier than the interval after (`CoreSpec::dma_queue_interval_ticks`).
    fn queue_started(&mut self, q: usize, t: u64) {
        let interval = self.env.spec.dma_queue_interval_ticks;
        let Some(last) = self.queue_last_start.get_mut(q) else {
            return;
        };
        *last = t;
        if let Some(next) = self.queues[q].get_mut(1) {
            next.ready = next.ready.max(t.saturating_add(interval));
        }
    }

    /// The descriptor `queue`'s front transfer has next, shifted by its trigger's offsets,
    /// starting on engine `e` at tick `t`: its source and destination checked against earlier
    /// accesses and recorded (when the execution checks hazards). `None` when there is none.
    pub(super) fn check_next_descriptor(
        &mut self,
        e: usize,
        queue: usize,
        t: u64,
    ) -> Option<DmaDescriptor> {
        let tr = self.queues[queue].front_mut()?;
        let idx = tr.first + tr.next;
        let d = self
            .env
            .program
            .descriptors
            .get(idx as usize)
            .and_then(|d| shift_descriptor(d, tr.shift))?;
        if self.env.check_hazards {
            let agent = tr.agent;
            let clock = std::mem::take(&mut tr.clock);
            let actor = Actor::Dma {
                engine: e as u8,
                queue: (queue % DMA_QUEUES) as u8,
                desc: idx,
            };
            let rs = d.src.footprint(self.env.bases, d.len);
            let rd = d.dst.footprint(self.env.bases, d.len);
            self.check_and_record(rs, false, agent, &clock, actor, t);
            self.check_and_record(rd, true, agent, &clock, actor, t);
            if let Some(tr) = self.queues[queue].front_mut() {
                tr.clock = clock;
            }
        }
        Some(d)
    }

    pub(super) fn start_dma_engines(&mut self) {
        let t = self.t;
        for e in 0..DMA_ENGINES {
            // A run member that starts at this tick (`dma_run.rs`, replayed boundaries) is
            // checked here, in its engine's place, as a descriptor starting now would be.
            if self.mid_started & (1 << e) != 0 {
                self.mid_started &= !(1 << e);
                if let Phase::Whole { queue, .. } = self.dma[e].phase {
                    self.check_next_descriptor(e, queue, t);
                }
                continue;
            }
            if self.dma[e].phase != Phase::Idle {
                continue;
            }
            // Round-robin over this engine's non-empty queues whose front transfer is ready.
            let mask = self.queue_mask[e];
            if mask == 0 {
                continue;
            }
            let rr = self.dma[e].rr;
            let mut left = mask.rotate_right(rr as u32);
            let mut chosen = None;
            while left != 0 {
                let qi = (rr + left.trailing_zeros() as usize) % DMA_QUEUES;
                left &= left - 1;
                let ready = self.queues[e * DMA_QUEUES + qi]
                    .front()
                    .map_or(u64::MAX, |tr| tr.ready);
                if ready <= t {
                    chosen = Some(qi);
                    break;
                }
                self.dma_wake = self.dma_wake.min(ready);
            }
            let Some(qi) = chosen else {
                continue;
            };
            self.dma[e].rr = (qi + 1) % DMA_QUEUES;
            let q = e * DMA_QUEUES + qi;
            let Some(tr) = self.queues[q].front_mut() else {
                continue;
            };
            let first_desc = tr.next == 0;
            if first_desc {
                tr.start = Some(t);
                self.queue_started(q, t);
            }
            let Some(d) = self.check_next_descriptor(e, q, t) else {
                continue;
            };
            let spec = self.env.spec;
            let fixed = if first_desc {
                spec.dma_transfer_ticks
            } else {
                0
            };
            let overhead = (spec.dma_descriptor_ticks + fixed).max(1);
            let hbm = d.touches_hbm();
            let whole = self.whole_ok && (!hbm || self.whole_hbm);
            if whole {
                // Its data phase will run at the peak: one event at its end, or at the end of
                // the run it starts (`dma_run.rs`).
                let units = dma_units(&d);
                let first_end = t + overhead + self.data_ticks(e, units);
                let (more, end) = if self.runs_ok && mask == 1 << qi {
                    self.plan_run(e, q, first_end)
                } else {
                    (0, first_end)
                };
                self.run_mid[e] = if more > 0 { first_end } else { u64::MAX };
                let de = &mut self.dma[e];
                de.phase = Phase::Whole {
                    data_from: t + overhead,
                    units,
                    queue: q,
                    hbm,
                    start: t,
                    more,
                };
                de.rate = de.peak;
                self.dma_next[e] = end;
            } else {
                let de = &mut self.dma[e];
                de.phase = Phase::Overhead {
                    until: t + overhead,
                    queue: q,
                    start: t,
                };
                self.dma_next[e] = t + overhead;
            }
            self.reclass(e);
        }
    }

    /// Turns the HBM descriptors scheduled whole into the phase each is in at this tick: an
    /// overhead phase, or a data phase at the peak with the units left (the arithmetic of
    /// `update_rates`, so the split changes no tick).
    pub(super) fn split_whole_hbm(&mut self) {
        let t = self.t;
        for e in 0..DMA_ENGINES {
            // A run ends with the descriptor in flight: later ones start as two phases.
            if matches!(self.dma[e].phase, Phase::Whole { more: 1.., .. }) {
                self.settle_run(e, t, t + 1);
            }
            let d = &mut self.dma[e];
            let Phase::Whole {
                data_from,
                units,
                queue,
                hbm: true,
                start,
                ..
            } = d.phase
            else {
                continue;
            };
            if t < data_from {
                d.phase = Phase::Overhead {
                    until: data_from,
                    queue,
                    start,
                };
                d.rate = 0;
                self.dma_next[e] = data_from;
            } else {
                // Its end (`dma_next`) stays: `data_from + ⌈units / peak⌉`.
                d.phase = Phase::Data {
                    remaining: units.saturating_sub(d.peak.saturating_mul(t - data_from)),
                    queue,
                    hbm: true,
                    start,
                };
                d.since = t;
                self.n_hbm += 1;
                self.rates_dirty = true;
            }
        }
    }

    /// Gives every engine moving HBM data its share of the device's bandwidth (shared with
    /// the other cores' engines as last seen: `engine::share`), capped by its peak. Progress
    /// made at the old rate is applied first, so the result equals stepping every tick.
    pub(super) fn update_rates(&mut self) {
        // While HBM descriptors run whole, `n_hbm` leaves them out and their data phases
        // begin without an event: the board then gets this core's demand at its boundaries
        // (`hbm_movers`), as a lock-step group does.
        if let Some(link) = self.env.link {
            if !self.whole_hbm && self.n_hbm != self.published {
                self.published = self.n_hbm;
                link.board.publish(link.core, self.n_hbm as u32);
            }
        }
        let (peak, hbm) = (self.env.spec.engine_rate(), self.env.spec.hbm_rate());
        let share = hbm.checked_div(self.n_hbm + self.others).unwrap_or(hbm);
        let rate = peak.min(share);
        if rate == self.hbm_rate && !self.rates_dirty {
            return;
        }
        self.hbm_rate = rate;
        self.rates_dirty = false;
        let t = self.t;
        for e in 0..DMA_ENGINES {
            let d = &mut self.dma[e];
            if d.rate == rate {
                continue;
            }
            if let Phase::Data {
                remaining,
                hbm: true,
                ..
            } = &mut d.phase
            {
                *remaining = remaining.saturating_sub(d.rate.saturating_mul(t - d.since));
                d.since = t;
                d.rate = rate;
                self.dma_next[e] = t + remaining.div_ceil(rate).max(1);
                self.reclass(e);
            }
        }
    }
}

/// The on-chip memory, partition and offset of an SBUF or PSUM endpoint (for HBM or a block,
/// which callers exclude, an offset out of every partition).
fn onchip_endpoint<'m>(
    sbuf: &'m mut OnChip,
    psum: &'m mut OnChip,
    e: DmaEndpoint,
) -> (&'m mut OnChip, usize, usize) {
    match e {
        DmaEndpoint::Psum { partition, offset } => (psum, usize::from(partition), offset as usize),
        DmaEndpoint::Sbuf { partition, offset } => (sbuf, usize::from(partition), offset as usize),
        DmaEndpoint::Hbm { .. } | DmaEndpoint::Block(_) => (sbuf, 0, usize::MAX),
    }
}

/// A descriptor's copy between two on-chip memories (a source out of range copies zeros).
fn copy_between(src: &OnChip, dst: &mut OnChip, sp: u8, so: u32, dp: u8, doff: u32, len: usize) {
    let data = src.read(usize::from(sp), so as usize, len);
    let out = dst.write(usize::from(dp), doff as usize, len);
    if out.len() == len {
        if data.len() == len {
            out.copy_from_slice(data);
        } else {
            out.fill(0);
        }
    }
}
