//! The cycle-level executor of one NeuronCore: five sequencers, 16 DMA engines × 16 queues,
//! 256 semaphores, SBUF/PSUM port arbitration, hazard detection, counters and an event log.
//!
//! Time advances event to event: between two events nothing observable changes, so the
//! executor jumps over idle ticks. The model is defined on event ticks: a sequencer that issued
//! at tick t tries its next instruction at the next event of any kind (a completion, a DMA phase
//! change, a port release), not at t + 1, so the result is deterministic but is not what a
//! stepper that tried to issue on every tick would produce.
//!
//! The work per event is kept to what changed: a DMA data phase's progress is applied only when
//! its rate changes (exact integers), DMA counters are charged per phase interval, the issue
//! pass is skipped when no sequencer can issue, and the hazard detector's index (`shadow`)
//! visits only nearby records not ordered before the access.

use std::collections::VecDeque;
use std::rc::Rc;

use nrt_core::{Error, NrtStatus, err};

use super::dtype::{DType, load_f32, load_i32, store_f32, store_i32};
use super::isa::{
    AccessPattern, Bias, DmaDescriptor, DmaEndpoint, EngineId, Instr, MemKind, Region, SemCmp,
    Space,
};
use super::math::{activation, matmul_kmajor};
use super::memory::{DMA_ENGINES, DMA_QUEUES, Hbm, OnChip, SEMAPHORES};
use super::program::Program;
use super::shadow::Shadow;

/// Name of the timing model: every latency comes from the published NKI cost rules.
pub const TIMING_MODEL: &str = "nki-published-cost-rules-v2";
/// The timing model has not been validated against hardware.
pub const VALIDATED_AGAINST_HW: bool = false;
/// Ticks per second: one tick is one cycle of the 1.4 GHz SBUF/PSUM interface clock.
pub const TICKS_PER_SECOND: u64 = 1_400_000_000;

/// Published and derived timing constants.
pub mod timing {
    /// `MM_INIT_LATENCY`: the minimum MultiplyMoving initiation interval, PE cycles.
    pub const MM_INIT_LATENCY: u64 = 64;
    /// fp32 MultiplyMoving / LoadStationary cost multiplier.
    pub const FP32_MATMUL_FACTOR: u64 = 4;
    /// "Fast LoadStationary": up to 4× faster than an MM of the same free size.
    pub const LOAD_STATIONARY_SPEEDUP: u64 = 4;
    /// Static overhead of any tensor access, engine cycles.
    pub const ACCESS_OVERHEAD_CYCLES: u64 = 60;
    /// Extra static overhead of small (free size ≤ 128) or dependent back-to-back
    /// instructions, engine cycles.
    pub const SMALL_OR_DEPENDENT_CYCLES: u64 = 100;
    /// Free sizes up to this count as "small".
    pub const SMALL_FREE_SIZE: u64 = 128;
    /// DMA engine peak, bytes per second (27.2 GB/s).
    pub const DMA_ENGINE_BYTES_PER_SECOND: u64 = 27_200_000_000;
    /// HBM bandwidth available to one core, bytes per second: half of the device's
    /// 820 GB/s (the other core's half is reserved).
    pub const HBM_BYTES_PER_SECOND_PER_CORE: u64 = 410_000_000_000;
    /// Fixed cost of each DMA descriptor, ticks (calibration knob).
    pub const DMA_DESCRIPTOR_OVERHEAD_TICKS: u64 = 64;
    /// Fixed cost of each DMA transfer (one trigger), before its first descriptor, ticks.
    /// With [`DMA_DESCRIPTOR_OVERHEAD_TICKS`] this makes one 32 KiB single-descriptor
    /// transfer take 1,983 ticks = 1,416 ns, the published example.
    pub const DMA_TRANSFER_LATENCY_TICKS: u64 = 232;
    /// Transfers a DMA queue holds before a trigger stalls.
    pub const DMA_QUEUE_DEPTH: usize = 64;
    /// Control instructions take one tick.
    pub const CONTROL_TICKS: u64 = 1;
}

// Fluid DMA arithmetic in exact integers: one byte = BYTE units; rates in units per tick.
// 27.2 GB/s at 1.4 GHz = 136/7 B/tick; 410 GB/s = 2050/7 B/tick; 720720 = lcm(1..=16) makes
// an equal share of the HBM rate among up to 16 engines exact.
const LCM16: u64 = 720_720;
const BYTE: u64 = 7 * LCM16;
const ENGINE_RATE: u64 = 136 * LCM16;
const HBM_RATE: u64 = 2050 * LCM16;

/// Execution limits and recording switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// Stop with `NRT_TIMEOUT` when simulated time reaches this many ticks.
    pub max_ticks: u64,
    /// Record the event log (instruction slices, waits, DMA transfers) for traces.
    pub record_events: bool,
    /// Most events recorded; later ones are dropped and `events_truncated` is set.
    pub max_events: usize,
    /// Most hazards recorded (the first one is always the error message).
    pub max_hazards: usize,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            max_ticks: 10 * TICKS_PER_SECOND,
            record_events: true,
            max_events: 1 << 20,
            max_hazards: 64,
        }
    }
}

/// Per-unit time accounting, in ticks; `active + idle + stalls == ticks` for every unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Executing (a sequencer with an instruction in progress; a DMA engine moving data at
    /// full rate or paying descriptor overhead).
    pub active: u64,
    /// Nothing to do (halted, or an empty DMA engine).
    pub idle: u64,
    /// A sequencer blocked in `SemWait` on a semaphore no pending DMA transfer will update.
    pub stall_semaphore: u64,
    /// A sequencer blocked on the SBUF (VectorE/GpSimdE) or PSUM (VectorE/ScalarE) port.
    pub stall_port: u64,
    /// A sequencer blocked on DMA: a `SemWait` on a semaphore a pending transfer will
    /// update, or a `DmaTrigger` on a full queue.
    pub stall_dma: u64,
    /// A DMA engine moving data below its peak because HBM bandwidth is shared.
    pub stall_bandwidth: u64,
    /// Instructions retired (sequencers) or descriptors completed (DMA engines).
    pub instructions: u64,
    /// Bytes moved (DMA engines).
    pub bytes: u64,
}

impl Counters {
    /// Sum of the stall buckets.
    pub fn stalled(&self) -> u64 {
        self.stall_semaphore + self.stall_port + self.stall_dma + self.stall_bandwidth
    }
}

/// Who performed an access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Actor {
    /// An instruction of a sequencer.
    Engine {
        /// Engine.
        engine: EngineId,
        /// Instruction index in its stream.
        pc: u32,
        /// Mnemonic.
        op: &'static str,
    },
    /// A DMA descriptor.
    Dma {
        /// DMA engine.
        engine: u8,
        /// Queue.
        queue: u8,
        /// Descriptor index in the program's table.
        desc: u32,
    },
}

impl core::fmt::Display for Actor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Actor::Engine { engine, pc, op } => write!(f, "{engine} pc {pc} ({op})"),
            Actor::Dma {
                engine,
                queue,
                desc,
            } => write!(f, "DMA engine {engine} queue {queue} descriptor {desc}"),
        }
    }
}

/// One side of a hazard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Who.
    pub actor: Actor,
    /// Where.
    pub region: Region,
    /// Whether it writes.
    pub write: bool,
    /// Tick the access was issued.
    pub tick: u64,
}

/// Two conflicting accesses with no semaphore edge between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hazard {
    /// The earlier access.
    pub first: Access,
    /// The later access, which found the conflict.
    pub second: Access,
}

impl core::fmt::Display for Hazard {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let verb = |w: bool| if w { "writes" } else { "reads" };
        write!(
            f,
            "unsynchronised hazard at tick {}: {} {} {} while {} (issued at tick {}) {} {} with \
             no semaphore edge between them",
            self.second.tick,
            self.second.actor,
            verb(self.second.write),
            self.second.region,
            self.first.actor,
            self.first.tick,
            verb(self.first.write),
            self.first.region
        )
    }
}

/// A track of the event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Track {
    /// A sequencer.
    Engine(EngineId),
    /// A DMA engine (descriptor slices).
    DmaEngine(u8),
    /// A DMA queue (transfer slices).
    DmaQueue(u8, u8),
}

/// What an event records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// An instruction executing.
    Instr {
        /// Index in the stream.
        pc: u32,
        /// Mnemonic.
        op: &'static str,
    },
    /// A `SemWait` blocked.
    SemWait {
        /// Index in the stream.
        pc: u32,
        /// Semaphore.
        sem: u8,
    },
    /// An instruction blocked on the SBUF or PSUM port.
    PortWait {
        /// Index in the stream.
        pc: u32,
    },
    /// A `DmaTrigger` blocked on a full queue.
    QueueWait {
        /// Index in the stream.
        pc: u32,
    },
    /// A DMA descriptor being processed (overhead and data).
    Descriptor {
        /// Queue.
        queue: u8,
        /// Index in the descriptor table.
        desc: u32,
        /// Bytes.
        bytes: u32,
    },
    /// A DMA transfer, from its first descriptor's start to its semaphore update.
    Transfer {
        /// First descriptor.
        first: u32,
        /// Descriptors.
        count: u32,
        /// Bytes.
        bytes: u64,
        /// Semaphore updated.
        sem: u8,
        /// Increment.
        inc: u32,
    },
    /// A `Notify`.
    Notify {
        /// Payload.
        payload: u32,
    },
}

/// One entry of the event log: a slice of `dur` ticks from `start` on `track`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// First tick.
    pub start: u64,
    /// Length in ticks (0 for instants).
    pub dur: u64,
    /// Track.
    pub track: Track,
    /// What.
    pub kind: EventKind,
}

/// An entry of the notification queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notification {
    /// Tick.
    pub tick: u64,
    /// Engine that executed the `Notify`.
    pub engine: EngineId,
    /// Payload.
    pub payload: u32,
}

/// The result of one execution: status, simulated time, counters and logs.
#[derive(Clone, Debug, PartialEq)]
pub struct ExecReport {
    /// `NRT_SUCCESS`, `NRT_EXEC_COMPLETED_WITH_ERR` (hazards) or `NRT_TIMEOUT`.
    pub status: NrtStatus,
    /// The error, with its message, when `status` is not success.
    pub error: Option<Error>,
    /// Simulated ticks until every unit finished (or the timeout).
    pub ticks: u64,
    /// [`TIMING_MODEL`].
    pub timing_model: &'static str,
    /// [`VALIDATED_AGAINST_HW`] (`false`).
    pub validated_against_hw: bool,
    /// Counters of the five sequencers, by [`EngineId::index`].
    pub engines: [Counters; 5],
    /// Counters of the 16 DMA engines.
    pub dma_engines: [Counters; DMA_ENGINES],
    /// The notification queue.
    pub notifications: Vec<Notification>,
    /// Hazards found (at most `max_hazards`).
    pub hazards: Vec<Hazard>,
    /// The event log (when recorded).
    pub events: Vec<Event>,
    /// Whether events were dropped at `max_events`.
    pub events_truncated: bool,
    /// Final semaphore values.
    pub semaphores: Vec<u32>,
}

impl ExecReport {
    /// Simulated time in nanoseconds.
    pub fn nanoseconds(&self) -> f64 {
        self.ticks as f64 * 1e9 / TICKS_PER_SECOND as f64
    }

    /// `Ok` on success, the error otherwise.
    pub fn result(&self) -> Result<(), Error> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(e.clone()),
        }
    }

    /// Counters of one sequencer.
    pub fn engine(&self, e: EngineId) -> &Counters {
        &self.engines[e.index()]
    }
}

// ---- internal state -------------------------------------------------------------------------

/// A vector clock: one entry per agent (the five sequencers, then each DMA queue the program
/// triggers, in queue order; queues it never uses need no entry).
type VClock = Vec<u32>;

fn join(a: &mut VClock, b: &VClock) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = (*x).max(*y);
    }
}

struct Stationary {
    k: usize,
    m: usize,
    dtype: DType,
    data: Vec<f32>,
}

struct Pending {
    pc: usize,
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
}

struct DmaEng {
    phase: Phase,
    /// Data rate (units per tick) of a data phase; 0 otherwise.
    rate: u64,
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
    fn class(&self) -> Acct {
        match self.phase {
            Phase::Idle => Acct::Idle,
            Phase::Overhead { .. } => Acct::Active,
            Phase::Data { .. } if self.rate < ENGINE_RATE => Acct::Bandwidth,
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
    /// HBM base address of each program tensor.
    pub(crate) bases: &'a [u64],
    pub(crate) hbm: &'a mut Hbm,
    pub(crate) sbuf: &'a mut OnChip,
    pub(crate) psum: &'a mut OnChip,
}

struct Machine<'a, 'e> {
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
    dma: Vec<DmaEng>,
    /// Per DMA engine, the tick of its next phase change (`u64::MAX` when idle or awaiting
    /// its rate).
    dma_next: [u64; DMA_ENGINES],
    /// DMA engines in a data phase that touches HBM.
    n_hbm: u64,
    /// The rate of each of them (they share HBM equally).
    hbm_rate: u64,
    /// An engine entered an HBM data phase and awaits its rate.
    rates_dirty: bool,
    /// An engine went idle or a transfer was queued since the last start pass.
    start_pending: bool,
    /// The next issue pass may issue something: a sequencer issued in the last one (it may
    /// issue again at the next event), or a semaphore or a queue changed since.
    wake: bool,
    ports: [PortState; 2],
    stationary: Option<Rc<Stationary>>,
    shadow: Shadow,
    prune_at: usize,
    report: ExecReport,
    scratch: Vec<u8>,
    /// Reused buffers of the MultiplyMoving functional model (moving operand, product).
    mm_moving: Vec<f32>,
    mm_out: Vec<f32>,
    /// Reused operand buffers of the elementwise functional models.
    fbuf: [Vec<f32>; 2],
}

const PORT_SBUF_VG: usize = 0;
const PORT_PSUM_VS: usize = 1;

/// Runs `env.program` to completion (or timeout) and reports.
pub(crate) fn execute(env: &mut ExecEnv<'_>, opts: &ExecOptions) -> ExecReport {
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
                clock,
            }
        })
        .collect();
    let hbm_writes = env
        .program
        .descriptors
        .iter()
        .filter(|d| matches!(d.dst, DmaEndpoint::Hbm { .. }))
        .map(|d| endpoint_region(env.bases, &d.dst, d.len))
        .collect();
    let mut m = Machine {
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
        dma: (0..DMA_ENGINES)
            .map(|_| DmaEng {
                phase: Phase::Idle,
                rate: 0,
                rr: 0,
                since: 0,
                acct: Acct::Idle,
                acct_since: 0,
            })
            .collect(),
        dma_next: [u64::MAX; DMA_ENGINES],
        n_hbm: 0,
        hbm_rate: ENGINE_RATE,
        rates_dirty: false,
        start_pending: false,
        wake: true,
        ports: [PortState { until: 0 }; 2],
        stationary: None,
        shadow: Shadow::new(hbm_writes),
        prune_at: 4096,
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
            events: Vec::new(),
            events_truncated: false,
            semaphores: Vec::new(),
        },
        scratch: Vec::new(),
        mm_moving: Vec::new(),
        mm_out: Vec::new(),
        fbuf: [Vec::new(), Vec::new()],
    };
    m.run();
    for e in 0..DMA_ENGINES {
        m.charge_dma(e);
    }
    m.report.semaphores = m.sems.clone();
    m.report
}

impl Machine<'_, '_> {
    fn run(&mut self) {
        loop {
            self.complete_seq_ops();
            self.complete_dma_phases();
            // Issue to a fixpoint: a semaphore update may release a sequencer evaluated
            // earlier in the same tick; each sequencer issues at most one instruction a tick,
            // so one that issued tries again at the next event. One that could not issue stays
            // blocked until a semaphore or a queue changes or one of its units or ports frees
            // up; when none of that happened and nobody issued last time, the pass would
            // change nothing and is skipped.
            if self.wake || self.timer_due() {
                let mut issued = [false; 5];
                loop {
                    let mut any = false;
                    for (i, done) in issued.iter_mut().enumerate() {
                        if !*done && self.try_issue(i) {
                            *done = true;
                            any = true;
                        }
                    }
                    if !any {
                        break;
                    }
                }
                self.wake = issued.iter().any(|&x| x);
            }
            if self.start_pending {
                self.start_pending = false;
                self.start_dma_engines();
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
                    let tn = n.min(limit);
                    self.account(tn);
                    self.t = tn;
                }
            }
        }
    }

    fn timeout(&mut self, deadlock: bool) {
        self.report.ticks = self.t;
        let mut msg = String::new();
        for s in &self.seqs {
            if let Wait::Sem { sem, .. } = s.wait {
                let v = self.sems.get(usize::from(sem)).copied().unwrap_or(0);
                let want = match self.env.program.stream(s.engine).get(s.pc) {
                    Some(Instr::SemWait { cmp, value, .. }) => {
                        format!("{} {value}", if *cmp == SemCmp::Ge { ">=" } else { "==" })
                    }
                    _ => String::new(),
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

    // ---- sequencers ---------------------------------------------------------------------

    fn complete_seq_ops(&mut self) {
        for i in 0..5 {
            let t = self.t;
            let s = &mut self.seqs[i];
            let ls = if s.ls_op.is_some() && s.ls_until <= t {
                s.ls_op.take()
            } else {
                None
            };
            let main = if s.main_op.is_some() && s.main_until <= t {
                s.main_op.take()
            } else {
                None
            };
            let engine = s.engine;
            if let Some(p) = ls {
                self.apply(engine, p);
            }
            if let Some(p) = main {
                self.apply(engine, p);
            }
        }
    }

    fn try_issue(&mut self, i: usize) -> bool {
        let t = self.t;
        let (engine, pc) = {
            let s = &self.seqs[i];
            if s.halted {
                return false;
            }
            (s.engine, s.pc)
        };
        let program = self.env.program;
        let Some(ins) = program.stream(engine).get(pc).copied() else {
            self.seqs[i].halted = true;
            return false;
        };
        // Unit availability.
        {
            let s = &self.seqs[i];
            let ok = match ins {
                Instr::LoadStationary { .. } => s.ls_until <= t && s.ls_op.is_none(),
                _ => {
                    s.main_until <= t && s.ls_until <= t && s.main_op.is_none() && s.ls_op.is_none()
                }
            };
            if !ok {
                return false;
            }
        }
        match ins {
            Instr::SemWait { sem, cmp, value } => {
                let v = self.sems[usize::from(sem)];
                let pass = match cmp {
                    SemCmp::Ge => v >= value,
                    SemCmp::Eq => v == value,
                };
                if !pass {
                    if self.seqs[i].wait == Wait::None {
                        self.seqs[i].wait = Wait::Sem { since: t, sem };
                    }
                    return false;
                }
                join(&mut self.seqs[i].clock, &self.sem_clocks[usize::from(sem)]);
                self.end_wait(i, pc);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::SemInc { sem, value } => {
                let s = usize::from(sem);
                self.sems[s] = self.sems[s].wrapping_add(value);
                self.release(i, s);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::SemSet { sem, value } => {
                let s = usize::from(sem);
                self.sems[s] = value;
                self.release(i, s);
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::DmaTrigger {
                dma,
                queue,
                first,
                count,
                sem,
                inc,
            } => {
                let q = usize::from(dma) * DMA_QUEUES + usize::from(queue);
                if self.queues[q].len() >= timing::DMA_QUEUE_DEPTH {
                    if self.seqs[i].wait == Wait::None {
                        self.seqs[i].wait = Wait::Queue { since: t };
                    }
                    return false;
                }
                self.end_wait(i, pc);
                let agent = usize::from(self.queue_agent[q]);
                self.queue_epoch[q] += 1;
                let epoch = self.queue_epoch[q];
                let mut clock = self.seqs[i].clock.clone();
                join(&mut clock, &self.queue_clock[q]);
                clock[agent] = epoch;
                self.queue_clock[q].clone_from(&clock);
                let own = self.seqs[i].engine.index();
                self.seqs[i].clock[own] += 1;
                let bytes = program
                    .descriptors
                    .get(first as usize..(first as usize + count as usize))
                    .map(|d| d.iter().map(|x| u64::from(x.len)).sum())
                    .unwrap_or(0);
                self.sem_pending_dma[usize::from(sem)] += 1;
                self.queue_mask[usize::from(dma)] |= 1 << queue;
                self.start_pending = true;
                self.queues[q].push_back(Transfer {
                    first,
                    count,
                    next: 0,
                    sem,
                    inc,
                    agent,
                    clock,
                    start: None,
                    bytes,
                });
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::Notify { payload } => {
                self.report.notifications.push(Notification {
                    tick: t,
                    engine,
                    payload,
                });
                self.push_event(Event {
                    start: t,
                    dur: 0,
                    track: Track::Engine(engine),
                    kind: EventKind::Notify { payload },
                });
                self.retire_control(i, pc, ins.name());
                true
            }
            Instr::Halt => {
                self.retire_control(i, pc, ins.name());
                self.seqs[i].halted = true;
                true
            }
            _ => self.issue_data(i, pc, ins),
        }
    }

    fn end_wait(&mut self, i: usize, pc: usize) {
        let t = self.t;
        let w = self.seqs[i].wait;
        let engine = self.seqs[i].engine;
        let kind = match w {
            Wait::None => return,
            Wait::Sem { since, sem } => (since, EventKind::SemWait { pc: pc as u32, sem }),
            Wait::Port { since } => (since, EventKind::PortWait { pc: pc as u32 }),
            Wait::Queue { since } => (since, EventKind::QueueWait { pc: pc as u32 }),
        };
        self.seqs[i].wait = Wait::None;
        if t > kind.0 {
            self.push_event(Event {
                start: kind.0,
                dur: t - kind.0,
                track: Track::Engine(engine),
                kind: kind.1,
            });
        }
    }

    fn release(&mut self, i: usize, sem: usize) {
        let own = self.seqs[i].engine.index();
        join(&mut self.sem_clocks[sem], &self.seqs[i].clock);
        self.seqs[i].clock[own] += 1;
    }

    fn retire_control(&mut self, i: usize, pc: usize, name: &'static str) {
        let t = self.t;
        let s = &mut self.seqs[i];
        s.pc += 1;
        s.main_until = t + timing::CONTROL_TICKS;
        let engine = s.engine;
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur: timing::CONTROL_TICKS,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: name,
            },
        });
    }

    fn ports_needed(engine: EngineId, ins: &Instr) -> [bool; 2] {
        let (acc, n) = ins.accesses();
        let mut sbuf = false;
        let mut psum = false;
        for (ap, _) in acc.iter().take(n).flatten() {
            match ap.space {
                Space::Sbuf => sbuf = true,
                Space::Psum => psum = true,
            }
        }
        let mut need = [false; 2];
        match engine {
            EngineId::Vector => {
                need[PORT_SBUF_VG] = sbuf;
                need[PORT_PSUM_VS] = psum;
            }
            EngineId::GpSimd => need[PORT_SBUF_VG] = sbuf,
            EngineId::Scalar => need[PORT_PSUM_VS] = psum,
            _ => {}
        }
        need
    }

    fn issue_data(&mut self, i: usize, pc: usize, ins: Instr) -> bool {
        let t = self.t;
        let engine = self.seqs[i].engine;
        let need = Self::ports_needed(engine, &ins);
        let blocked = need
            .iter()
            .zip(self.ports.iter())
            .any(|(&n, p)| n && p.until > t);
        if blocked {
            if self.seqs[i].wait == Wait::None {
                self.seqs[i].wait = Wait::Port { since: t };
            }
            return false;
        }
        self.end_wait(i, pc);
        // Hazard check and access records.
        let (acc, n) = ins.accesses();
        let actor = Actor::Engine {
            engine,
            pc: pc as u32,
            op: ins.name(),
        };
        let mut dependent = false;
        for (ap, w) in acc.iter().take(n).flatten() {
            let region = ap.region();
            if !*w {
                if let Some(lw) = &self.seqs[i].last_write {
                    dependent |= lw.overlaps(&region);
                }
            }
            let clock = std::mem::take(&mut self.seqs[i].clock);
            self.check_and_record(region, *w, engine.index(), &clock, actor);
            self.seqs[i].clock = clock;
        }
        let cycles = op_cycles(&ins, dependent);
        let s = &mut self.seqs[i];
        let (num, den) = clock_ratio(engine);
        let is_ls = matches!(ins, Instr::LoadStationary { .. });
        let frac = if is_ls { &mut s.ls_frac } else { &mut s.frac };
        let total = *frac + cycles * den;
        let ticks = (total / num).max(1);
        *frac = total % num;
        let end = t + ticks;
        let pending = Pending {
            pc,
            stationary: if matches!(ins, Instr::MultiplyMoving { .. }) {
                self.stationary.clone()
            } else {
                None
            },
        };
        if is_ls {
            s.ls_until = end;
            s.ls_op = Some(pending);
        } else {
            s.main_until = end;
            s.main_op = Some(pending);
        }
        s.pc += 1;
        s.last_write = acc
            .iter()
            .take(n)
            .flatten()
            .find(|(_, w)| *w)
            .map(|(ap, _)| ap.region());
        for (k, &nd) in need.iter().enumerate() {
            if nd {
                self.ports[k].until = end;
            }
        }
        self.report.engines[engine.index()].instructions += 1;
        self.push_event(Event {
            start: t,
            dur: ticks,
            track: Track::Engine(engine),
            kind: EventKind::Instr {
                pc: pc as u32,
                op: ins.name(),
            },
        });
        true
    }

    // ---- hazards ------------------------------------------------------------------------

    fn check_and_record(
        &mut self,
        region: Region,
        write: bool,
        agent: usize,
        clock: &VClock,
        actor: Actor,
    ) {
        let t = self.t;
        if !self.shadow.relevant(&region, write) {
            return;
        }
        if let Some(r) = self.shadow.find_conflict(&region, write, agent, clock) {
            let h = Hazard {
                first: Access {
                    actor: r.actor,
                    region: r.region,
                    write: r.write,
                    tick: r.tick,
                },
                second: Access {
                    actor,
                    region,
                    write,
                    tick: t,
                },
            };
            if self.report.error.is_none() {
                self.report.status = NrtStatus::ExecCompletedWithErr;
                self.report.error = Some(err!(ExecCompletedWithErr, "{h}"));
            }
            if self.report.hazards.len() < self.opts.max_hazards {
                self.report.hazards.push(h);
            }
        }
        let epoch = clock.get(agent).copied().unwrap_or(0);
        self.shadow.insert(region, write, agent, epoch, actor, t);
        if self.shadow.len() >= self.prune_at {
            self.prune(clock);
        }
    }

    /// Drops records that every future access is ordered after: a future access comes from a
    /// running sequencer (whose clock only grows), from a queued transfer, or from a transfer
    /// a running sequencer has yet to trigger (whose clock covers the sequencer's), so the
    /// frontier is the element-wise minimum of those clocks. `current` is the clock of the
    /// access being recorded, whose owner (a sequencer or a queued transfer) has lent it out
    /// and holds an empty clock meanwhile.
    fn prune(&mut self, current: &VClock) {
        let mut frontier = vec![u32::MAX; self.n_agents];
        let observers = self
            .seqs
            .iter()
            .filter(|s| !s.halted)
            .map(|s| &s.clock)
            .chain(
                self.queues
                    .iter()
                    .flat_map(|q| q.iter().map(|tr| &tr.clock)),
            )
            .filter(|c| !c.is_empty())
            .chain(std::iter::once(current));
        for c in observers {
            for (f, &x) in frontier.iter_mut().zip(c.iter()) {
                *f = (*f).min(x);
            }
        }
        self.shadow.retire(&frontier);
        self.prune_at = (self.shadow.len() * 2).max(4096);
    }

    // ---- functional effects -------------------------------------------------------------

    fn apply(&mut self, engine: EngineId, p: Pending) {
        let Some(ins) = self.env.program.stream(engine).get(p.pc).copied() else {
            return;
        };
        let sbuf = &mut *self.env.sbuf;
        let psum = &mut *self.env.psum;
        match ins {
            Instr::LoadStationary { src } => {
                let mut data = Vec::new();
                gather_f32(mem(sbuf, psum, src.space), &src, &mut data);
                self.stationary = Some(Rc::new(Stationary {
                    k: usize::from(src.partitions),
                    m: src.free_elems() as usize,
                    dtype: src.dtype,
                    data,
                }));
            }
            Instr::MultiplyMoving {
                moving,
                dst,
                accumulate,
            } => {
                let Some(st) = p.stationary else { return };
                let mut mv = std::mem::take(&mut self.mm_moving);
                gather_f32(mem(sbuf, psum, moving.space), &moving, &mut mv);
                let n = moving.free_elems() as usize;
                let k = st.k.min(usize::from(moving.partitions));
                // Every element of the product is written (β = 0), so the buffer is reused
                // without clearing.
                let mut c = std::mem::take(&mut self.mm_out);
                if c.len() < st.m * n {
                    c.resize(st.m * n, 0.0);
                }
                let c_used = &mut c[..st.m * n];
                matmul_kmajor(&st.data, &mv, c_used, k, st.m, n, st.dtype);
                let off = dst.offset as usize;
                for (row, p) in c_used
                    .chunks_exact(n)
                    .zip(usize::from(dst.start_partition)..)
                {
                    let cell = psum.write(p, off, n * 4);
                    if accumulate {
                        for (b, &v) in cell.chunks_exact_mut(4).zip(row) {
                            let nv = f32::from_le_bytes([b[0], b[1], b[2], b[3]]) + v;
                            b.copy_from_slice(&nv.to_le_bytes());
                        }
                    } else {
                        for (b, &v) in cell.chunks_exact_mut(4).zip(row) {
                            b.copy_from_slice(&v.to_le_bytes());
                        }
                    }
                }
                self.mm_moving = mv;
                self.mm_out = c;
            }
            Instr::TensorTensor { op, a, b, out } => {
                if all_int(&[a.dtype, b.dtype, out.dtype]) {
                    let (mut x, mut y) = (Vec::new(), Vec::new());
                    gather_i32(mem(sbuf, psum, a.space), &a, &mut x);
                    gather_i32(mem(sbuf, psum, b.space), &b, &mut y);
                    for (u, v) in x.iter_mut().zip(&y) {
                        *u = op.apply_i32(*u, *v);
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    let mut y = std::mem::take(&mut self.fbuf[1]);
                    gather_f32(mem(sbuf, psum, a.space), &a, &mut x);
                    gather_f32(mem(sbuf, psum, b.space), &b, &mut y);
                    for (u, v) in x.iter_mut().zip(&y) {
                        *u = op.apply_f32(*u, *v);
                    }
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf = [x, y];
                }
            }
            Instr::TensorScalar {
                op,
                src,
                scalar,
                out,
            } => {
                if all_int(&[src.dtype, out.dtype]) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    let s = super::dtype::f32_to_i32(scalar);
                    for u in x.iter_mut() {
                        *u = op.apply_i32(*u, s);
                    }
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    for u in x.iter_mut() {
                        *u = op.apply_f32(*u, scalar);
                    }
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf[0] = x;
                }
            }
            Instr::Activation {
                func,
                src,
                out,
                scale,
                bias,
            } => {
                let mut x = std::mem::take(&mut self.fbuf[0]);
                gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                let per_part = match bias {
                    Bias::Imm(_) => None,
                    Bias::PerPartition(b) => {
                        let mut v = Vec::new();
                        gather_f32(mem(sbuf, psum, b.space), &b, &mut v);
                        Some(v)
                    }
                };
                let f = src.free_elems() as usize;
                for (p, row) in x.chunks_mut(f.max(1)).enumerate() {
                    let bv = match (&per_part, bias) {
                        (Some(v), _) => v.get(p).copied().unwrap_or(0.0),
                        (None, Bias::Imm(b)) => b,
                        (None, Bias::PerPartition(_)) => 0.0,
                    };
                    for u in row.iter_mut() {
                        *u = activation(func, *u * scale + bv);
                    }
                }
                scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                self.fbuf[0] = x;
            }
            Instr::TensorCopy { src, out } => {
                if all_int(&[src.dtype, out.dtype]) {
                    let mut x = Vec::new();
                    gather_i32(mem(sbuf, psum, src.space), &src, &mut x);
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &x);
                } else {
                    let mut x = std::mem::take(&mut self.fbuf[0]);
                    gather_f32(mem(sbuf, psum, src.space), &src, &mut x);
                    scatter_f32(mem_mut(sbuf, psum, out.space), &out, &x);
                    self.fbuf[0] = x;
                }
            }
            Instr::Memset { out, bits } => {
                let n = usize::from(out.partitions) * out.free_elems() as usize;
                if out.dtype == DType::I32 {
                    scatter_i32(mem_mut(sbuf, psum, out.space), &out, &vec![bits as i32; n]);
                } else {
                    scatter_f32(
                        mem_mut(sbuf, psum, out.space),
                        &out,
                        &vec![f32::from_bits(bits); n],
                    );
                }
            }
            Instr::Iota {
                out,
                base,
                partition_step,
                free_step,
            } => {
                let f = out.free_elems() as usize;
                let mut v = Vec::with_capacity(usize::from(out.partitions) * f);
                for p in 0..i32::from(out.partitions) {
                    let row = base.wrapping_add(p.wrapping_mul(partition_step));
                    for j in 0..f {
                        v.push(row.wrapping_add((j as i32).wrapping_mul(free_step)));
                    }
                }
                scatter_i32(mem_mut(sbuf, psum, out.space), &out, &v);
            }
            _ => {}
        }
    }

    // ---- DMA ------------------------------------------------------------------------------

    fn complete_dma_phases(&mut self) {
        let t = self.t;
        if !self.dma_next.iter().any(|&n| n <= t) {
            return;
        }
        for e in 0..DMA_ENGINES {
            if self.dma_next[e] > t {
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
                    let remaining = u64::from(d.len) * BYTE;
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
                        de.rate = ENGINE_RATE;
                        self.dma_next[e] = t + remaining.div_ceil(ENGINE_RATE).max(1);
                    }
                    self.reclass(e);
                }
                Phase::Data { queue, start, .. } => self.finish_descriptor(e, queue, start),
                _ => {}
            }
        }
    }

    /// Puts engine `e` in the idle phase.
    fn set_idle(&mut self, e: usize) {
        let d = &mut self.dma[e];
        if let Phase::Data { hbm: true, .. } = d.phase {
            self.n_hbm -= 1;
        }
        d.phase = Phase::Idle;
        d.rate = 0;
        self.dma_next[e] = u64::MAX;
        self.start_pending = true;
        self.reclass(e);
    }

    /// Closes engine `e`'s accounting interval at the current tick.
    fn charge_dma(&mut self, e: usize) {
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
        let t = self.t;
        self.set_idle(e);
        let Some(tr) = self.queues[queue].front_mut() else {
            return;
        };
        let idx = tr.first + tr.next;
        tr.next += 1;
        let done = tr.next >= tr.count;
        let Some(d) = self.env.program.descriptors.get(idx as usize).copied() else {
            return;
        };
        self.copy(&d);
        let c = &mut self.report.dma_engines[e];
        c.instructions += 1;
        c.bytes += u64::from(d.len);
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
        }
    }

    fn endpoint_region(&self, e: &DmaEndpoint, len: u32) -> Region {
        endpoint_region(self.env.bases, e, len)
    }

    fn start_dma_engines(&mut self) {
        let t = self.t;
        for e in 0..DMA_ENGINES {
            if self.dma[e].phase != Phase::Idle {
                continue;
            }
            // Round-robin over this engine's non-empty queues.
            let mask = self.queue_mask[e];
            if mask == 0 {
                continue;
            }
            let rr = self.dma[e].rr;
            let qi = (rr + mask.rotate_right(rr as u32).trailing_zeros() as usize) % DMA_QUEUES;
            self.dma[e].rr = (qi + 1) % DMA_QUEUES;
            let q = e * DMA_QUEUES + qi;
            let Some(tr) = self.queues[q].front_mut() else {
                continue;
            };
            let first_desc = tr.next == 0;
            if first_desc {
                tr.start = Some(t);
            }
            let idx = tr.first + tr.next;
            let agent = tr.agent;
            let clock = std::mem::take(&mut tr.clock);
            let Some(d) = self.env.program.descriptors.get(idx as usize).copied() else {
                if let Some(tr) = self.queues[q].front_mut() {
                    tr.clock = clock;
                }
                continue;
            };
            let actor = Actor::Dma {
                engine: e as u8,
                queue: qi as u8,
                desc: idx,
            };
            let rs = self.endpoint_region(&d.src, d.len);
            let rd = self.endpoint_region(&d.dst, d.len);
            self.check_and_record(rs, false, agent, &clock, actor);
            self.check_and_record(rd, true, agent, &clock, actor);
            if let Some(tr) = self.queues[q].front_mut() {
                tr.clock = clock;
            }
            let overhead = timing::DMA_DESCRIPTOR_OVERHEAD_TICKS
                + if first_desc {
                    timing::DMA_TRANSFER_LATENCY_TICKS
                } else {
                    0
                };
            let de = &mut self.dma[e];
            de.phase = Phase::Overhead {
                until: t + overhead,
                queue: q,
                start: t,
            };
            self.dma_next[e] = t + overhead;
            self.reclass(e);
        }
    }

    /// Gives every engine moving HBM data its share of the bandwidth. Progress made at the
    /// old rate is applied first, so the result equals stepping every tick.
    fn update_rates(&mut self) {
        let share = HBM_RATE.checked_div(self.n_hbm).unwrap_or(HBM_RATE);
        let rate = ENGINE_RATE.min(share);
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

/// The footprint of a descriptor endpoint (an HBM tensor missing from `bases` counts from 0).
fn endpoint_region(bases: &[u64], e: &DmaEndpoint, len: u32) -> Region {
    match *e {
        DmaEndpoint::Hbm { tensor, offset } => {
            let base = bases.get(tensor as usize).copied().unwrap_or(0);
            Region {
                mem: MemKind::Hbm,
                p0: 0,
                p1: 1,
                b0: base + offset,
                b1: base + offset + u64::from(len),
            }
        }
        DmaEndpoint::Sbuf { partition, offset } | DmaEndpoint::Psum { partition, offset } => {
            Region {
                mem: if matches!(e, DmaEndpoint::Sbuf { .. }) {
                    MemKind::Sbuf
                } else {
                    MemKind::Psum
                },
                p0: u32::from(partition),
                p1: u32::from(partition) + 1,
                b0: u64::from(offset),
                b1: u64::from(offset) + u64::from(len),
            }
        }
    }
}

/// The on-chip memory, partition and offset of an SBUF or PSUM endpoint (for HBM, which callers
/// exclude, an offset out of every partition).
fn onchip_endpoint<'m>(
    sbuf: &'m mut OnChip,
    psum: &'m mut OnChip,
    e: DmaEndpoint,
) -> (&'m mut OnChip, usize, usize) {
    match e {
        DmaEndpoint::Psum { partition, offset } => (psum, usize::from(partition), offset as usize),
        DmaEndpoint::Sbuf { partition, offset } => (sbuf, usize::from(partition), offset as usize),
        DmaEndpoint::Hbm { .. } => (sbuf, 0, usize::MAX),
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

fn all_int(d: &[DType]) -> bool {
    d.iter().all(|&x| x == DType::I32)
}

fn mem<'m>(sbuf: &'m OnChip, psum: &'m OnChip, s: Space) -> &'m OnChip {
    match s {
        Space::Sbuf => sbuf,
        Space::Psum => psum,
    }
}

fn mem_mut<'m>(sbuf: &'m mut OnChip, psum: &'m mut OnChip, s: Space) -> &'m mut OnChip {
    match s {
        Space::Sbuf => sbuf,
        Space::Psum => psum,
    }
}

/// Engine cycles per tick as `num / den` ticks... expressed as (cycles-per-tick numerator,
/// tick multiplier): ticks = cycles × den / num.
const fn clock_ratio(e: EngineId) -> (u64, u64) {
    match e {
        EngineId::Tensor => (2, 1), // 2.8 GHz: 2 PE cycles per tick
        EngineId::Vector => (4, 5), // 1.12 GHz: 0.8 cycles per tick
        EngineId::Scalar | EngineId::GpSimd | EngineId::Sync => (1, 1),
    }
}

/// The published cost of a data-path instruction, in its engine's cycles.
pub(crate) fn op_cycles(ins: &Instr, dependent: bool) -> u64 {
    use timing::*;
    let fp32 = |ap: &AccessPattern| ap.dtype == DType::F32;
    match ins {
        Instr::LoadStationary { src } => {
            let base = src
                .free_elems()
                .max(MM_INIT_LATENCY)
                .div_ceil(LOAD_STATIONARY_SPEEDUP);
            if fp32(src) {
                base * FP32_MATMUL_FACTOR
            } else {
                base
            }
        }
        Instr::MultiplyMoving { moving, .. } => {
            let base = moving.free_elems().max(MM_INIT_LATENCY);
            if fp32(moving) {
                base * FP32_MATMUL_FACTOR
            } else {
                base
            }
        }
        _ => {
            let (acc, n) = ins.accesses();
            let mut free = 0u64;
            let mut inputs = 0u64;
            let mut strided = false;
            for (ap, w) in acc.iter().take(n).flatten() {
                strided |= ap.innermost_strided();
                if *w {
                    free = ap.free_elems();
                } else if ap.free_elems() > 1 || !matches!(ins, Instr::Activation { .. }) {
                    inputs += 1;
                }
            }
            let mut c = free * inputs.max(1);
            if strided {
                c *= 2;
            }
            c += ACCESS_OVERHEAD_CYCLES;
            if dependent || free <= SMALL_FREE_SIZE {
                c += SMALL_OR_DEPENDENT_CYCLES;
            }
            c
        }
    }
}

/// Reads `ap` as binary32, `[partitions, free]` row-major, into `out` (an element whose bytes
/// lie outside the partition reads as 0). `out`'s previous contents are overwritten, not
/// cleared first.
fn gather_f32(m: &OnChip, ap: &AccessPattern, out: &mut Vec<f32>) {
    let f = ap.free_elems() as usize;
    let parts = usize::from(ap.partitions);
    out.truncate(parts * f);
    out.resize(parts * f, 0.0);
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let contiguous = ap.is_contiguous();
    for (pi, row) in out.chunks_exact_mut(f.max(1)).enumerate() {
        let part = m.partition(usize::from(ap.start_partition) + pi);
        if contiguous {
            let off = ap.offset as usize;
            if let Some(src) = part.get(off..off + f * es) {
                if dt == DType::F32 {
                    for (o, c) in row.iter_mut().zip(src.chunks_exact(4)) {
                        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                    }
                } else if dt == DType::Bf16 {
                    for (o, c) in row.iter_mut().zip(src.chunks_exact(2)) {
                        *o = f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16);
                    }
                } else {
                    for (o, c) in row.iter_mut().zip(src.chunks_exact(es)) {
                        *o = load_f32(dt, c);
                    }
                }
            } else {
                row.fill(0.0);
            }
        } else {
            row.fill(0.0);
            ap.for_each_offset(|i, o| {
                if let (Some(dst), Some(src)) = (row.get_mut(i), part.get(o..o + es)) {
                    *dst = load_f32(dt, src);
                }
            });
        }
    }
}

fn gather_i32(m: &OnChip, ap: &AccessPattern, out: &mut Vec<i32>) {
    let f = ap.free_elems() as usize;
    let parts = usize::from(ap.partitions);
    out.clear();
    out.resize(parts * f, 0);
    for (pi, row) in out.chunks_exact_mut(f.max(1)).enumerate() {
        let part = m.partition(usize::from(ap.start_partition) + pi);
        ap.for_each_offset(|i, o| {
            if let (Some(dst), Some(src)) = (row.get_mut(i), part.get(o..o + 4)) {
                *dst = load_i32(src);
            }
        });
    }
}

fn scatter_f32(m: &mut OnChip, ap: &AccessPattern, vals: &[f32]) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let (_, hi) = ap.byte_range();
    let contiguous = ap.is_contiguous();
    for (pi, row) in vals.chunks_exact(f.max(1)).enumerate() {
        let p = usize::from(ap.start_partition) + pi;
        m.touch(p, hi.max(0) as usize);
        let part = m.partition_mut(p);
        if contiguous {
            let off = ap.offset as usize;
            if let Some(dst) = part.get_mut(off..off + f * es) {
                if dt == DType::F32 {
                    for (c, &v) in dst.chunks_exact_mut(4).zip(row) {
                        c.copy_from_slice(&v.to_le_bytes());
                    }
                } else {
                    for (c, &v) in dst.chunks_exact_mut(es).zip(row) {
                        store_f32(dt, v, c);
                    }
                }
            }
        } else {
            ap.for_each_offset(|i, o| {
                if let (Some(&v), Some(dst)) = (row.get(i), part.get_mut(o..o + es)) {
                    store_f32(dt, v, dst);
                }
            });
        }
    }
}

fn scatter_i32(m: &mut OnChip, ap: &AccessPattern, vals: &[i32]) {
    let f = ap.free_elems() as usize;
    let es = ap.dtype.size();
    let dt = ap.dtype;
    let (_, hi) = ap.byte_range();
    for (pi, row) in vals.chunks_exact(f.max(1)).enumerate() {
        let p = usize::from(ap.start_partition) + pi;
        m.touch(p, hi.max(0) as usize);
        let part = m.partition_mut(p);
        ap.for_each_offset(|i, o| {
            if let (Some(&v), Some(dst)) = (row.get(i), part.get_mut(o..o + es)) {
                store_i32(dt, v, dst);
            }
        });
    }
}
