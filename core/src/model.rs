//! The model record the registry holds.

use crate::sync::{AtomicU32, Ordering};
use alloc::string::String;
use alloc::vec::Vec;

use crate::driver::StagedModel;
use crate::io::IoTable;

/// The model state the loader sets on success (libnrt's `READY`, which the unload guard calls
/// "stopped"): settled, no transition in flight. The only state `unload` accepts.
pub const MODEL_STATE_READY: u32 = 4;

/// Counts a model's queued asynchronous executions, so `unload` can drain them first.
#[derive(Debug, Default)]
pub struct QueuedCount(AtomicU32);

impl QueuedCount {
    /// Executions queued and not yet completed.
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn increment(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn decrement(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A loaded model: what the registry holds for each handle.
#[derive(Debug)]
pub struct Model {
    name: String,
    lnc: u32,
    state: AtomicU32,
    io: IoTable,
    staged: Vec<StagedModel>,
    queued: QueuedCount,
}

impl Model {
    /// A model record in state READY on absolute logical core `lnc`. `staged` is what the
    /// backend staged for it, one entry per subgraph (empty for a record with nothing on the
    /// device) — the bridge between the model and its per-core device records.
    pub fn new(name: String, lnc: u32, io: IoTable, staged: Vec<StagedModel>) -> Self {
        Self {
            name,
            lnc,
            state: AtomicU32::new(MODEL_STATE_READY),
            io,
            staged,
            queued: QueuedCount::default(),
        }
    }

    /// The model's name (the NEFF's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The absolute logical core it is loaded on.
    pub fn lnc(&self) -> u32 {
        self.lnc
    }

    /// The model state (`MODEL_STATE_READY` when settled).
    pub fn state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// Sets the model state (transitions in flight, e.g. a stage or a stop in progress).
    pub fn set_state(&self, state: u32) {
        self.state.store(state, Ordering::Release);
    }

    /// The I/O tensors.
    pub fn io(&self) -> &IoTable {
        &self.io
    }

    /// What the backend staged, one entry per subgraph.
    pub fn staged(&self) -> &[StagedModel] {
        &self.staged
    }

    /// Its queued asynchronous executions.
    pub fn queued(&self) -> &QueuedCount {
        &self.queued
    }

    /// Whether the backend runs this model in plumbing mode (no computation).
    pub fn is_plumbing(&self) -> bool {
        self.staged.iter().any(|s| s.plumbing)
    }
}
