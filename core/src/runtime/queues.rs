//! The data of asynchronous execution: execution units, sequence ids, the in-order queues and
//! their jobs. Plain data with no reference to the runtime, so the runtime value can hold it
//! (`runtime/async_exec.rs` operates on it).

use alloc::collections::VecDeque;
use alloc::vec::Vec;

use crate::driver::{Binding, DeviceBuffer};
use crate::registry::Handle as ModelHandle;
use crate::status::NrtStatus;
use crate::topology::Topology;

/// `nrta_xu_t` (v3): the execution units of a logical core.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xu {
    /// `NRTA_XU_TENSOR_OP`.
    TensorOp = 0,
    /// `NRTA_XU_COMPUTE`.
    Compute = 1,
    /// `NRTA_XU_COLLECTIVES`.
    Collectives = 2,
}

/// `NRTA_XU_TYPE_NUM`.
pub const XU_TYPES: u32 = 3;
/// `NRTA_SEQ_NUM_MAX`.
pub const SEQ_NUM_MAX: u64 = (1 << 48) - 1;
/// Requests one explicit-async queue holds before `NRT_QUEUE_FULL`.
pub const EXPLICIT_QUEUE_DEPTH: usize = 64;

/// Builds a sequence id: the execution unit id in the top 16 bits, the number in the low 48.
pub const fn seq_id(xu_id: u16, number: u64) -> u64 {
    ((xu_id as u64) << 48) | (number & SEQ_NUM_MAX)
}

/// The execution unit id of a sequence id (`NRTA_SEQ_GET_XU_ID`).
pub const fn seq_xu_id(seq: u64) -> u16 {
    (seq >> 48) as u16
}

/// The number of a sequence id (`NRTA_SEQ_GET_SEQ_NUM`).
pub const fn seq_number(seq: u64) -> u64 {
    seq & SEQ_NUM_MAX
}

/// Called once when a request completes, with its context word and status — how the C layer
/// writes the caller's `NRT_STATUS *exec_ret`.
#[derive(Clone, Copy, Debug)]
pub struct CompletionHook {
    /// The function.
    pub call: fn(ctx: usize, seq: u64, status: NrtStatus),
    /// Its context.
    pub ctx: usize,
}

/// The implicit-async completion callback (`nrt_register_async_exec_callback`): params, model
/// id, logical core, job id, status.
pub type AsyncExecCallback =
    fn(params: usize, model_id: u32, lnc: u32, job_id: u64, status: NrtStatus);

/// One queued execution: plain data, so any thread can run it.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) number: u64,
    pub(super) model: ModelHandle,
    pub(super) inputs: Vec<Binding>,
    pub(super) outputs: Vec<Binding>,
    pub(super) hook: Option<CompletionHook>,
}

/// One in-order queue: an execution unit of a logical core, or a core's implicit-async queue.
#[derive(Debug)]
pub(super) struct Queue {
    pub(super) xu_id: u16,
    /// Absolute logical core.
    pub(super) lnc: u32,
    pub(super) implicit: bool,
    pub(super) capacity: usize,
    pub(super) pending: VecDeque<Job>,
    pub(super) busy: bool,
    /// The device buffers of the job running now (while `busy`).
    pub(super) running: Vec<DeviceBuffer>,
    pub(super) last_submitted: u64,
    pub(super) last_completed: u64,
}

/// The async state of an initialised runtime: one queue per execution unit of every visible
/// logical core, plus one implicit-async queue per core when that mode is on.
#[derive(Debug, Default)]
pub(crate) struct AsyncState {
    pub(super) queues: Vec<Queue>,
    pub(super) callback: Option<(AsyncExecCallback, usize)>,
    /// Where the round-robin scan of runnable queues starts next.
    pub(super) next: usize,
    /// Device buffers whose tensors were freed while an execution using them was queued or
    /// running: freed when the last such execution completes (or at `close`).
    pub(super) deferred_frees: Vec<DeviceBuffer>,
}

impl AsyncState {
    /// Builds the queues for the logical cores of `topology`.
    pub(crate) fn new(topology: Topology, implicit_depth: u32) -> Self {
        let mut queues = Vec::new();
        for rel in 0..topology.lnc_count() {
            for xu in 0..XU_TYPES {
                queues.push(Queue {
                    xu_id: (rel * XU_TYPES + xu) as u16,
                    lnc: topology.first_lnc() + rel,
                    implicit: false,
                    capacity: EXPLICIT_QUEUE_DEPTH,
                    pending: VecDeque::new(),
                    busy: false,
                    running: Vec::new(),
                    last_submitted: 0,
                    last_completed: 0,
                });
            }
        }
        if implicit_depth > 0 {
            for rel in 0..topology.lnc_count() {
                queues.push(Queue {
                    xu_id: u16::MAX,
                    lnc: topology.first_lnc() + rel,
                    implicit: true,
                    capacity: implicit_depth as usize,
                    pending: VecDeque::new(),
                    busy: false,
                    running: Vec::new(),
                    last_submitted: 0,
                    last_completed: 0,
                });
            }
        }
        Self {
            queues,
            callback: None,
            next: 0,
            deferred_frees: Vec::new(),
        }
    }

    /// Whether a queued or running execution uses `buffer`.
    pub(super) fn uses(&self, buffer: DeviceBuffer) -> bool {
        self.queues.iter().any(|q| {
            q.running.contains(&buffer)
                || q.pending.iter().any(|j| {
                    j.inputs
                        .iter()
                        .chain(j.outputs.iter())
                        .any(|b| b.buffer == buffer)
                })
        })
    }

    /// Takes the deferred frees that no queued or running execution uses any more.
    pub(super) fn take_unused_frees(&mut self) -> Vec<DeviceBuffer> {
        let deferred = core::mem::take(&mut self.deferred_frees);
        let (still_used, ready): (Vec<_>, Vec<_>) =
            deferred.into_iter().partition(|b| self.uses(*b));
        self.deferred_frees = still_used;
        ready
    }

    pub(super) fn pending_total(&self) -> usize {
        self.queues
            .iter()
            .map(|q| q.pending.len() + usize::from(q.busy))
            .sum()
    }
}
