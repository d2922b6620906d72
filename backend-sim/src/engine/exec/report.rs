//! The executor's public vocabulary: [`ExecOptions`] in, [`ExecReport`] out, and what a report
//! holds: per-unit [`Counters`], [`Notification`]s, [`Hazard`]s between two [`Access`]es by
//! [`Actor`]s, and the event log ([`Event`] on a [`Track`], of an [`EventKind`]).
//!
//! Nothing here depends on the executor (only the tick rate comes from `cost`, itself a leaf),
//! so the hazard index (`shadow`) and the trace writer can name these types without importing
//! the executor.

use nrt_core::{Error, NrtStatus};

use super::cost::TICKS_PER_SECOND;
use crate::engine::isa::{EngineId, Region};
use crate::engine::memory::DMA_ENGINES;

/// Execution limits and recording switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecOptions {
    /// Stop with `NRT_TIMEOUT` when simulated time reaches this many ticks.
    pub max_ticks: u64,
    /// Record the event log (instruction slices, waits, DMA transfers) for traces.
    pub record_events: bool,
    /// With `record_events`, also record one event per DMA descriptor (the DMA engine tracks
    /// of a trace). Without it the log keeps instructions, waits and whole transfers — what
    /// per-node timing reads — and skips the most numerous kind of event.
    pub record_descriptors: bool,
    /// Most events recorded; later ones are dropped and `events_truncated` is set.
    pub max_events: usize,
    /// Most hazards recorded (the first one is always the error message).
    pub max_hazards: usize,
    /// Check for hazards even when an earlier execution of the same loaded program, with its
    /// tensors at the same HBM addresses, ran to completion without one. Without it such an
    /// execution skips the check: the schedule — and with it every access and the order the
    /// semaphores impose — is a function of the program and those addresses alone (no
    /// instruction's timing, address or control flow depends on data), so the check would
    /// find what it found then: nothing. See `docs/SIM_ISA.md`, "Hazards".
    pub recheck_hazards: bool,
    /// Overrides the generation's DMA trigger-to-start latency
    /// (`CoreSpec::dma_trigger_latency_ticks`, 0 on every generation: not modelled), for
    /// studies of its effect; `None`: the generation's figure. Any value is accepted; a
    /// transfer it would start after tick 2^63 never starts (the execution times out).
    pub dma_trigger_latency_ticks: Option<u64>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        Self {
            max_ticks: 10 * TICKS_PER_SECOND,
            record_events: true,
            record_descriptors: true,
            max_events: 1 << 20,
            max_hazards: 64,
            recheck_hazards: false,
            dma_trigger_latency_ticks: None,
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
    /// [`TIMING_MODEL`](crate::engine::TIMING_MODEL).
    pub timing_model: &'static str,
    /// [`VALIDATED_AGAINST_HW`](crate::engine::VALIDATED_AGAINST_HW) (`false`).
    pub validated_against_hw: bool,
    /// Counters of the five sequencers, by [`EngineId::index`].
    pub engines: [Counters; 5],
    /// Counters of the 16 DMA engines.
    pub dma_engines: [Counters; DMA_ENGINES],
    /// The notification queue.
    pub notifications: Vec<Notification>,
    /// Hazards found (at most `max_hazards`).
    pub hazards: Vec<Hazard>,
    /// Whether this execution ran the hazard check: `false` when an earlier execution of the
    /// same loaded program at the same tensor addresses completed without a hazard (see
    /// [`ExecOptions::recheck_hazards`]).
    pub hazards_checked: bool,
    /// The event log (when recorded).
    pub events: Vec<Event>,
    /// Whether events were dropped at `max_events`.
    pub events_truncated: bool,
    /// Final semaphore values.
    pub semaphores: Vec<u32>,
    /// The most DMA engines of the device's other cores seen moving HBM data at once while
    /// this execution ran (0: it shared HBM with nobody). Its DMA engines' `stall_bandwidth`
    /// is the time they ran below their peak because of them: [`ExecReport::bandwidth_stall`].
    pub peak_peer_hbm_engines: u32,
}

impl ExecReport {
    /// Ticks this core's DMA engines moved HBM data below their peak because the device's
    /// HBM bandwidth was shared with other cores' engines, summed over the engines (an
    /// engine alone is never HBM-bound: its peak is below the device's bandwidth).
    pub fn bandwidth_stall(&self) -> u64 {
        self.dma_engines.iter().map(|c| c.stall_bandwidth).sum()
    }

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
