//! The cycle-level executor of one NeuronCore: five sequencers, 16 DMA engines × 16 queues,
//! 256 semaphores, SBUF/PSUM port arbitration, hazard detection, counters and an event log.
//!
//! Time advances event to event: between two events nothing observable changes, so the
//! executor jumps over idle ticks. Every change that can let a sequencer issue is an event (a
//! unit or port freeing up, a semaphore or queue change, the tick after an issue followed by a
//! loop instruction), so the schedule does not depend on which other events there are: waking
//! the executor at every tick, as a stepper would, gives the same report (tested on the
//! engine's kernels and DMA-bound programs: `engine::run_tests`),
//! which is what lets whole descriptors and runs of descriptors (`dma_run.rs`) drop events.
//!
//! The work per event is kept to what changed: a DMA data phase's progress is applied only when
//! its rate changes (exact integers), DMA counters are charged per phase interval, the issue
//! pass is skipped when no sequencer can issue, and the hazard detector's index (`shadow`)
//! visits only nearby records not ordered before the access.
//!
//! The executor ([`Executor`]) is one struct whose `impl` is spread over this module's files,
//! one concern each:
//!
//! * `mod.rs` — the executor's state, the entry point [`run_program`], the run loop and event
//!   scheduling (the next event, time accounting, timeout);
//! * `issue.rs` — issuing instructions: semaphores, DMA triggers, notifications, unit and port
//!   availability;
//! * `loops.rs` — loop instructions and the instances of instructions with dynamic terms
//!   (format 1.1), checked as they issue;
//! * `effects.rs` — the functional effects of data-path instructions on SBUF and PSUM, and
//!   the gather/scatter of access patterns; those of the format-1.1 instructions in
//!   `elementwise.rs` (chains, scans, reciprocal, activate), `reduce.rs` (reductions,
//!   statistics, top-8) and `select.rs` (selects, transposes);
//! * `dma.rs` — DMA engines: queue arbitration, descriptor phases, shared HBM rates, copies;
//!   `coupling.rs` — meeting the device's other executing cores at quantum boundaries;
//!   `dma_block.rs` — the copy of a block descriptor; `dma_run.rs` — a transfer's
//!   descriptors run back to back as one event (their boundaries replayed in order where
//!   hazards are checked);
//! * `hazards.rs` — hazard checks and access records (the glue to the `shadow` index);
//! * `cost.rs` — the timing model: published constants and instruction costs;
//! * `report.rs` — the public options and report types (independent of the executor).

pub(super) mod cost;
mod coupling;
mod dma;
mod dma_block;
mod dma_run;
mod effects;
mod elementwise;
mod hazards;
mod issue;
mod loops;
mod reduce;
pub(super) mod report;
mod rowops;
mod select;
#[cfg(test)]
pub(super) mod test_hooks;

use std::collections::VecDeque;
use std::rc::Rc;

use nrt_core::{NrtStatus, err};

use crate::engine::spec::CoreSpec;
pub use cost::{TICKS_PER_SECOND, TIMING_MODEL, VALIDATED_AGAINST_HW, timing};
pub use report::{
    Access, Actor, Counters, Event, EventKind, ExecOptions, ExecReport, Hazard, Notification, Track,
};

use super::isa::{DmaShift, EngineId, Instr, LOOP_REGS, Region, SemCmp};
use super::memory::{DMA_ENGINES, DMA_QUEUES, Hbm, OnChip, SEMAPHORES};
use super::program::{LoopPlan, Program};
use super::shadow::Shadow;
use super::share::CoreLink;
pub(crate) use hazards::HbmWrites;

// ---- internal state -------------------------------------------------------------------------

/// A vector clock: one entry per agent (the five sequencers, then each DMA queue the program
/// triggers, in queue order; queues it never uses need no entry).
type VClock = Vec<u32>;

#[inline]
fn join(a: &mut VClock, b: &VClock) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = (*x).max(*y);
    }
}

/// A loaded stationary operand, `[k, m]` row-major binary32.
struct Stationary {
    k: usize,
    m: usize,
    data: Vec<f32>,
}

struct Pending {
    /// The instruction as issued (with its dynamic terms applied).
    ins: Instr,
    stationary: Option<Rc<Stationary>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    None,
    Sem { since: u64, sem: u8 },
    Port { since: u64 },
    Queue { since: u64 },
}

struct Seq {
    engine: EngineId,
    pc: usize,
    halted: bool,
    main_until: u64,
    main_op: Option<Pending>,
    ls_until: u64,
    ls_op: Option<Pending>,
    wait: Wait,
    frac: u64,
    ls_frac: u64,
    last_write: Option<Region>,
    /// The engine cycles of its last data-path instruction (the static overheads of the next
    /// one depend on it: `cost::IssueCtx`).
    last_cycles: u64,
    clock: VClock,
    /// Iteration registers (format 1.1 loops).
    regs: [u32; LOOP_REGS],
    /// The semaphore and its value when the `SemWait` at `pc` last failed: while the value is
    /// the same, trying it again would fail the same way (the instance, its checks and the
    /// sequencer's free units cannot change while it waits), so the issue pass skips it.
    sem_block: Option<(u8, u32)>,
    /// Semaphore updates issued behind the matmul in flight, applied when it completes.
    post: Vec<PostSignal>,
}

/// A `SemInc` or `SemSet` that follows a `MultiplyMoving` in flight: it takes effect when the
/// matmul completes, as if issued then, while the sequencer goes on to issue the next
/// `LoadStationary` in the background.
struct PostSignal {
    sem: u8,
    value: u32,
    set: bool,
    /// The sequencer's clock at the signal (what a waiter learns).
    clock: VClock,
}

struct Transfer {
    first: u32,
    count: u32,
    next: u32,
    sem: u8,
    inc: u32,
    agent: usize,
    clock: VClock,
    start: Option<u64>,
    bytes: u64,
    /// Offsets the trigger's dynamic terms add to every descriptor (zero without terms).
    shift: DmaShift,
    /// The first tick its engine may start it: the trigger's tick plus the trigger-to-start
    /// latency (`CoreSpec::dma_trigger_latency_ticks`).
    ready: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Overhead {
        until: u64,
        queue: usize,
        start: u64,
    },
    Data {
        remaining: u64,
        queue: usize,
        hbm: bool,
        start: u64,
    },
    /// A descriptor whose data phase nothing can slow, scheduled as one event: the overhead
    /// phase until `data_from`, then `units` at the engine's peak. A transfer not touching HBM
    /// always runs this way; an HBM one while `Executor::whole_hbm` holds (see there). The
    /// same ticks as an overhead phase followed by a data phase, in half the events.
    Whole {
        data_from: u64,
        units: u64,
        queue: usize,
        hbm: bool,
        start: u64,
        /// Descriptors of the same transfer that follow it back to back in one event (a run:
        /// `dma_run.rs`), 0 for a lone descriptor; `dma_next` is the end of the last.
        more: u32,
    },
}

struct DmaEng {
    phase: Phase,
    /// Data rate (units per tick) of a data phase; 0 otherwise.
    rate: u64,
    /// The engine's peak (units per tick): a data phase below it is a bandwidth stall.
    peak: u64,
    rr: usize,
    /// Tick at which a data phase's `remaining` holds (progress is applied lazily, when the
    /// rate changes: `remaining - rate·(t - since)`, exact integers).
    since: u64,
    /// Counter bucket the engine's time currently goes to, and since when.
    acct: Acct,
    acct_since: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Acct {
    Idle,
    Active,
    Bandwidth,
}

impl DmaEng {
    #[inline]
    fn class(&self) -> Acct {
        match self.phase {
            Phase::Idle => Acct::Idle,
            Phase::Overhead { .. } | Phase::Whole { .. } => Acct::Active,
            Phase::Data { .. } if self.rate < self.peak => Acct::Bandwidth,
            Phase::Data { .. } => Acct::Active,
        }
    }
}

#[derive(Clone, Copy)]
struct PortState {
    until: u64,
}

/// Everything an execution touches.
pub(crate) struct ExecEnv<'a> {
    pub(crate) program: &'a Program,
    /// The loop plan of a program with loops (`None`: none, and nothing of the loop machinery
    /// runs).
    pub(crate) plan: Option<&'a LoopPlan>,
    /// HBM base address of each program tensor.
    pub(crate) bases: &'a [u64],
    /// The HBM ranges the program can write, relative to its tensors (from its load).
    pub(crate) hbm_writes: &'a HbmWrites,
    pub(crate) hbm: &'a Hbm,
    pub(crate) sbuf: &'a mut OnChip,
    pub(crate) psum: &'a mut OnChip,
    /// Run the hazard check (`false`: an earlier execution at these addresses proved it
    /// clean; see `ExecOptions::recheck_hazards`).
    pub(crate) check_hazards: bool,
    /// The generation's figures (clocks, DMA rates, ports).
    pub(crate) spec: &'a CoreSpec,
    /// How this core shares its device's HBM with the other cores (`None`: alone, with all
    /// of it).
    pub(crate) link: Option<CoreLink<'a>>,
}

/// The shadow is pruned when it holds this many records, or twice as many as the last prune
/// left, whichever is more (so a prune's cost, a walk over the live cells and the clocks of the
/// queued transfers, stays a constant per record filed). Lower keeps fewer records live and the
/// cells a check visits in the caches: measured, 1,024 against 4,096 took 7 % off a first
/// execution of a DMA-bound program, with no change beyond the host's noise on ResNet-50's and
/// the BERT layer's or with 16,384 transfers queued at once (docs/PERFORMANCE.md, stop 41).
const PRUNE_MIN: usize = 1024;

/// The executor of one program on one NeuronCore: sequencers, semaphores, DMA queues and
/// engines, ports, the hazard index and the report being built. (Not to be confused with
/// `SimMachine`, the simulated machine of the crate root.) Its `impl` is spread over this
/// module's files, one concern each.
struct Executor<'a, 'e> {
    env: &'e mut ExecEnv<'a>,
    opts: ExecOptions,
    t: u64,
    seqs: Vec<Seq>,
    sems: Vec<u32>,
    sem_clocks: Vec<VClock>,
    /// Agents (vector clock entries).
    n_agents: usize,
    /// Per DMA queue, its agent index (0 for queues the program never triggers).
    queue_agent: Vec<u16>,
    /// Per semaphore: transfers queued or in flight that will update it.
    sem_pending_dma: Vec<u32>,
    queues: Vec<VecDeque<Transfer>>,
    /// Per DMA engine, bit `q` set when its queue `q` is non-empty.
    queue_mask: [u16; DMA_ENGINES],
    queue_epoch: Vec<u32>,
    queue_clock: Vec<VClock>,
    /// Per DMA queue, the tick its last transfer started (`u64::MAX`: none yet), for
    /// `CoreSpec::dma_queue_interval_ticks` (empty when that is 0).
    queue_last_start: Vec<u64>,
    dma: Vec<DmaEng>,
    /// Per DMA engine, the tick of its next phase change (`u64::MAX` when idle or awaiting
    /// its rate).
    dma_next: [u64; DMA_ENGINES],
    /// DMA engines in a data phase that touches HBM (`Phase::Whole` ones not counted).
    n_hbm: u64,
    /// Whether HBM transfers start as `Phase::Whole`: the device's bandwidth covers all of
    /// this core's engines at their peaks beside the other cores' demand as last learnt
    /// (none while not coupled: `meet_others`, `hbm_room`), so a data phase's start or end
    /// changes no engine's rate. A boundary that leaves no room turns it off and splits the
    /// engines in flight into their exact phases (`split_whole_hbm`); one with room, or
    /// uncoupling, turns it back on. While it holds, `n_hbm` leaves the whole descriptors
    /// out and a coupled core publishes its demand at boundaries (`hbm_movers`).
    whole_hbm: bool,
    /// `whole_hbm` when not coupled: the bandwidth covers all engines at their peaks.
    hbm_covers_engines: bool,
    /// Whether any descriptor may run as `Phase::Whole` (false only in tests comparing
    /// against the two-phase schedule).
    whole_ok: bool,
    /// Whether a transfer's descriptors may run back to back as one event (`dma_run.rs`):
    /// not while descriptor events are recorded.
    runs_ok: bool,
    /// Runs while the hazard check runs: each member is finished and the next started (its
    /// accesses checked) at the next event, in the order of the schedule without runs
    /// (`dma_run.rs`, "Replayed boundaries").
    replay: bool,
    /// Per DMA engine: the end of the member in flight while the engine is in a run with
    /// members left (a boundary inside the run), `u64::MAX` otherwise; written wherever a
    /// phase changes (`run_boundary`), read while `replay`.
    run_mid: [u64; DMA_ENGINES],
    /// A boundary inside a run falls at this tick (found by `replay_runs_before`): its member
    /// finishes in `complete_dma_phases` and the next starts in `start_dma_engines`.
    mid_due: bool,
    /// Engines whose run member starting at this tick awaits its check in the start pass.
    mid_started: u16,
    /// The rate of each of them (they share HBM equally).
    hbm_rate: u64,
    /// An engine entered an HBM data phase and awaits its rate.
    rates_dirty: bool,
    /// DMA engines of the device's other cores moving HBM data, as of the last quantum
    /// boundary (`engine::share`).
    others: u64,
    /// The next quantum boundary (`u64::MAX` while not coupled to other cores).
    next_meet: u64,
    /// The count last published on the device's board.
    published: u64,
    /// An engine went idle or a transfer was queued since the last start pass.
    start_pending: bool,
    /// The earliest tick a queued transfer an idle engine passed over becomes ready
    /// (`u64::MAX`: none).
    dma_wake: u64,
    /// The next issue pass may issue something: a sequencer issued in the last one (it may
    /// issue again at the next event), or a semaphore or a queue changed since.
    wake: bool,
    ports: [PortState; 2],
    /// The tick after the last loop instruction: an event, so the sequencer that issued it
    /// goes on while its data path is busy.
    wake_at: u64,
    /// The instruction just issued lets its sequencer issue again in the same tick (a
    /// `MultiplyMoving`, or a semaphore instruction issued behind one).
    again: bool,
    /// An instruction instance failed its checks: the execution stops.
    stopped: bool,
    stationary: Option<Rc<Stationary>>,
    shadow: Shadow,
    /// The shadow's size at which it is next pruned ([`PRUNE_MIN`]).
    prune_at: usize,
    report: ExecReport,
    scratch: Vec<u8>,
    /// The reused destination buffer of a block descriptor's copy.
    block_out: Vec<u8>,
    /// Reused buffers of the MultiplyMoving functional model (moving operand, product).
    mm_moving: Vec<f32>,
    mm_out: Vec<f32>,
    /// What `mm_moving` holds, while it is valid: the moving access pattern, the generation
    /// of its memory when it was read (`OnChip::generation`) and the row stride. Consecutive
    /// matmuls of one moving tile against several stationaries reuse it.
    mm_moving_key: Option<(super::isa::AccessPattern, u64, usize)>,
    /// Reused operand buffers of the elementwise functional models.
    fbuf: [Vec<f32>; 2],
}

const PORT_SBUF_VG: usize = 0;
const PORT_PSUM_VS: usize = 1;

/// One program run: `env.program` on one core, to completion (or timeout), and its report.
pub(crate) fn run_program(env: &mut ExecEnv<'_>, opts: &ExecOptions) -> ExecReport {
    let mut sems = vec![0u32; SEMAPHORES];
    for &(s, v) in &env.program.sem_init {
        if let Some(x) = sems.get_mut(usize::from(s)) {
            *x = v;
        }
    }
    // Agents: the sequencers, then the DMA queues the program triggers, in queue order.
    let mut queue_agent = vec![0u16; DMA_ENGINES * DMA_QUEUES];
    for &engine in &EngineId::ALL {
        for ins in env.program.stream(engine) {
            if let Instr::DmaTrigger { dma, queue, .. } = *ins {
                if let Some(a) =
                    queue_agent.get_mut(usize::from(dma) * DMA_QUEUES + usize::from(queue))
                {
                    *a = 1;
                }
            }
        }
    }
    let mut n_agents = EngineId::ALL.len();
    for a in &mut queue_agent {
        if *a != 0 {
            *a = n_agents as u16;
            n_agents += 1;
        }
    }
    let seqs = EngineId::ALL
        .iter()
        .map(|&engine| {
            let mut clock = vec![0u32; n_agents];
            clock[engine.index()] = 1;
            Seq {
                engine,
                pc: 0,
                halted: false,
                main_until: 0,
                main_op: None,
                ls_until: 0,
                ls_op: None,
                wait: Wait::None,
                frac: 0,
                ls_frac: 0,
                last_write: None,
                last_cycles: 0,
                clock,
                regs: [0; LOOP_REGS],
                sem_block: None,
                post: Vec::new(),
            }
        })
        .collect();
    let check_hazards = env.check_hazards;
    let hbm_writes = if check_hazards {
        env.hbm_writes.absolute(env.bases)
    } else {
        Vec::new()
    };
    let peak = env.spec.engine_rate();
    // Every engine of the core at its peak within the device's bandwidth: while no other core
    // shares it, the share `hbm / n` (n ≤ DMA_ENGINES) never falls below the peak.
    let hbm_covers_engines = env.spec.hbm_rate() / DMA_ENGINES as u64 >= peak;
    // Tests compare against every descriptor run as two phases (`engine::whole_tests`).
    #[cfg(test)]
    let (hbm_covers_engines, whole_ok) = {
        let split = test_hooks::SPLIT_PHASES.with(std::cell::Cell::get);
        (hbm_covers_engines && !split, !split)
    };
    #[cfg(not(test))]
    let whole_ok = true;
    let runs_ok = whole_ok && !(opts.record_events && opts.record_descriptors);
    #[cfg(test)]
    let runs_ok = runs_ok && !test_hooks::NO_RUNS.with(std::cell::Cell::get);
    let interval = env.spec.dma_queue_interval_ticks;
    let mut m = Executor {
        env,
        opts: *opts,
        t: 0,
        seqs,
        sems,
        sem_clocks: vec![vec![0u32; n_agents]; SEMAPHORES],
        n_agents,
        queue_agent,
        sem_pending_dma: vec![0; SEMAPHORES],
        queues: (0..DMA_ENGINES * DMA_QUEUES)
            .map(|_| VecDeque::new())
            .collect(),
        queue_mask: [0; DMA_ENGINES],
        queue_epoch: vec![0; DMA_ENGINES * DMA_QUEUES],
        queue_clock: vec![Vec::new(); DMA_ENGINES * DMA_QUEUES],
        queue_last_start: if interval > 0 {
            vec![u64::MAX; DMA_ENGINES * DMA_QUEUES]
        } else {
            Vec::new()
        },
        dma: (0..DMA_ENGINES)
            .map(|_| DmaEng {
                phase: Phase::Idle,
                rate: 0,
                peak,
                rr: 0,
                since: 0,
                acct: Acct::Idle,
                acct_since: 0,
            })
            .collect(),
        dma_next: [u64::MAX; DMA_ENGINES],
        n_hbm: 0,
        whole_hbm: hbm_covers_engines,
        hbm_covers_engines,
        whole_ok,
        runs_ok,
        replay: runs_ok && check_hazards,
        run_mid: [u64::MAX; DMA_ENGINES],
        mid_due: false,
        mid_started: 0,
        hbm_rate: peak,
        rates_dirty: false,
        others: 0,
        next_meet: u64::MAX,
        published: 0,
        start_pending: false,
        dma_wake: u64::MAX,
        wake: true,
        ports: [PortState { until: 0 }; 2],
        wake_at: 0,
        again: false,
        stopped: false,
        stationary: None,
        shadow: Shadow::new(hbm_writes),
        prune_at: PRUNE_MIN,
        report: ExecReport {
            status: NrtStatus::Success,
            error: None,
            ticks: 0,
            timing_model: TIMING_MODEL,
            validated_against_hw: VALIDATED_AGAINST_HW,
            engines: [Counters::default(); 5],
            dma_engines: [Counters::default(); DMA_ENGINES],
            notifications: Vec::new(),
            hazards: Vec::new(),
            hazards_checked: check_hazards,
            events: Vec::new(),
            events_truncated: false,
            semaphores: Vec::new(),
            peak_peer_hbm_engines: 0,
        },
        scratch: Vec::new(),
        block_out: Vec::new(),
        mm_moving: Vec::new(),
        mm_out: Vec::new(),
        mm_moving_key: None,
        fbuf: [Vec::new(), Vec::new()],
    };
    m.run();
    // Descriptors of runs in flight that ended by now (a timeout or a failed check).
    m.settle_runs();
    // A lock-step group stops waiting for this member as soon as its program ends (the device
    // also leaves it for the member however its run ends: `share::MemberGuard`).
    if let Some(link) = m.env.link {
        link.leave();
    }
    for e in 0..DMA_ENGINES {
        m.charge_dma(e);
    }
    m.report.semaphores = m.sems.clone();
    m.report
}

impl Executor<'_, '_> {
    fn run(&mut self) {
        loop {
            if self.replay {
                self.replay_runs_before(self.t);
            }
            self.complete_seq_ops();
            self.complete_dma_phases();
            // Issue to a fixpoint: a semaphore update may release a sequencer evaluated
            // earlier in the same tick; each sequencer issues at most one instruction a tick,
            // so one that issued tries again at the next event. One that could not issue stays
            // blocked until a semaphore or a queue changes or one of its units or ports frees
            // up; when none of that happened and nobody issued last time, the pass would
            // change nothing and is skipped.
            if self.wake || self.timer_due() {
                let mut done = [false; 5];
                let mut issued = false;
                loop {
                    let mut any = false;
                    for (i, done) in done.iter_mut().enumerate() {
                        if !*done && self.try_issue(i) {
                            // A matmul, or a semaphore instruction behind one, lets its
                            // sequencer go on issuing in this tick.
                            *done = !std::mem::take(&mut self.again);
                            any = true;
                            self.wake_for_loop(i);
                        }
                    }
                    if !any {
                        break;
                    }
                    issued = true;
                }
                self.wake = issued;
                if self.stopped {
                    self.report.ticks = self.t;
                    return;
                }
            }
            if self.t >= self.dma_wake {
                self.dma_wake = u64::MAX;
                self.start_pending = true;
            }
            if self.start_pending {
                self.start_pending = false;
                self.start_dma_engines();
            }
            self.meet_others();
            // Tests couple and uncouple the core at chosen ticks, with a chosen demand of
            // other cores, as `meet_others` does when other cores execute.
            #[cfg(test)]
            if let Some(others) = test_hooks::coupling_due(self.t) {
                self.others = others;
                self.rates_dirty = true;
                self.set_coupled(others != 0);
            }
            self.update_rates();
            if self.finished() {
                self.report.ticks = self.t;
                return;
            }
            let limit = self.opts.max_ticks;
            if self.t >= limit {
                self.timeout(false);
                return;
            }
            match self.next_event() {
                None => {
                    // Nothing will ever change again: the program can never halt. Time runs
                    // (idle-skipped) to the limit, as it would on a device.
                    self.account(limit);
                    self.t = limit;
                    self.timeout(true);
                    return;
                }
                Some(n) => {
                    // A quantum boundary is an event only while there is something to wait
                    // for: a program that can never halt times out at once, as alone.
                    let tn = n.min(self.next_meet).min(limit);
                    self.account(tn);
                    self.t = tn;
                }
            }
        }
    }

    /// A loop instruction runs in the sequencer whatever its data path does, so one that
    /// follows an instruction issued at this tick issues at the next tick: an event then,
    /// as after a loop instruction (`wake_at`). Without it the sequencer would try at
    /// whatever event came next, and the schedule would depend on which events the DMA
    /// engines happen to have.
    fn wake_for_loop(&mut self, i: usize) {
        if self.env.plan.is_none() {
            return;
        }
        let s = &self.seqs[i];
        let stream = self.env.program.stream(s.engine);
        if stream.get(s.pc).is_some_and(Instr::is_loop) {
            self.wake_at = self.t + timing::CONTROL_TICKS;
        }
    }

    fn timeout(&mut self, deadlock: bool) {
        self.report.ticks = self.t;
        let mut msg = String::new();
        for s in &self.seqs {
            if let Wait::Sem { sem, .. } = s.wait {
                let v = self.sems.get(usize::from(sem)).copied().unwrap_or(0);
                let want = match self.wait_target(s) {
                    Some((cmp, value)) => {
                        format!("{} {value}", if cmp == SemCmp::Ge { ">=" } else { "==" })
                    }
                    None => String::new(),
                };
                msg.push_str(&format!(
                    "; {} pc {} waits for semaphore {sem} {want} (value {v})",
                    s.engine, s.pc
                ));
            }
        }
        let e = if deadlock {
            err!(
                Timeout,
                "execution timed out after {} ticks: the program can never halt (deadlock){msg}",
                self.t
            )
        } else {
            err!(
                Timeout,
                "execution timed out after {} ticks (limit {}){msg}",
                self.t,
                self.opts.max_ticks
            )
        };
        self.report.status = NrtStatus::Timeout;
        self.report.error = Some(e);
    }

    /// Whether a sequencer's unit or a port frees up now.
    fn timer_due(&self) -> bool {
        let t = self.t;
        self.seqs
            .iter()
            .any(|s| s.main_until == t || s.ls_until == t)
            || self.ports.iter().any(|p| p.until == t)
    }

    fn finished(&self) -> bool {
        self.seqs
            .iter()
            .all(|s| s.halted && s.main_until <= self.t && s.ls_until <= self.t)
            && self.dma.iter().all(|d| d.phase == Phase::Idle)
            && self.queue_mask.iter().all(|&m| m == 0)
    }

    #[inline]
    fn push_event(&mut self, ev: Event) {
        if !self.opts.record_events {
            return;
        }
        if self.report.events.len() >= self.opts.max_events {
            self.report.events_truncated = true;
            return;
        }
        self.report.events.push(ev);
    }

    fn next_event(&self) -> Option<u64> {
        let t = self.t;
        // The earliest of the tick values after `t` (`u64::MAX`: none).
        let after = |x: u64| if x > t { x } else { u64::MAX };
        let mut best = u64::MAX;
        for s in &self.seqs {
            best = best.min(after(s.main_until)).min(after(s.ls_until));
        }
        for p in &self.ports {
            best = best.min(after(p.until));
        }
        best = best.min(after(self.wake_at)).min(after(self.dma_wake));
        // Tests' coupling changes happen at exact ticks, whatever else happens then.
        #[cfg(test)]
        {
            best = best.min(after(test_hooks::next_coupling_change()));
            let every = test_hooks::EXTRA_EVENTS.with(std::cell::Cell::get);
            if let Some(n) = t.checked_div(every) {
                best = best.min((n + 1) * every);
            }
        }
        // Every pending DMA phase change lies after `t` (due ones were processed).
        for &n in &self.dma_next {
            best = best.min(after(n));
        }
        (best != u64::MAX).then_some(best)
    }

    fn account(&mut self, tn: u64) {
        let t = self.t;
        let dt = tn.saturating_sub(t);
        if dt == 0 {
            return;
        }
        for s in &self.seqs {
            let c = &mut self.report.engines[s.engine.index()];
            if s.main_until > t || s.ls_until > t {
                c.active += dt;
            } else if s.halted {
                c.idle += dt;
            } else {
                match s.wait {
                    Wait::Sem { sem, .. } => {
                        if self.sem_pending_dma[usize::from(sem)] > 0 {
                            c.stall_dma += dt;
                        } else {
                            c.stall_semaphore += dt;
                        }
                    }
                    Wait::Port { .. } => c.stall_port += dt,
                    Wait::Queue { .. } => c.stall_dma += dt,
                    Wait::None => c.idle += dt,
                }
            }
        }
    }
}
