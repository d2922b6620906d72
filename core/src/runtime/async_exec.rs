//! Asynchronous execution: the implicit-async mode (`NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`,
//! per-core queues behind plain `execute`) and the explicit async API (libnrt 2.31 `nrta_*` v3:
//! schedule on an execution unit's queue, a sequence id, a status written at completion).
//!
//! Queued work is plain data (a model handle and its bindings by I/O index, resolved when the
//! request was made), so any thread can run it: a host
//! runs [`Runtime::run_async_worker`] on threads of its own, and threads that must wait for
//! queued work (`drain`, `unload` of a model with queued executions, `close`) run it themselves
//! rather than block. Each queue completes its requests in order.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use super::bind::Resolved;
use super::queues::{
    AsyncExecCallback, AsyncState, CompletionHook, Job, XU_TYPES, Xu, seq_id, seq_number, seq_xu_id,
};
use super::{ModelHandle, ModelRef, Runtime};
use crate::driver::{Binding, Driver, DriverError, ExecRequest};
use crate::error::Result;
use crate::events::RuntimeEvent;
use crate::fmt::Level;
use crate::host::{Host, Platform as _};
use crate::io::TensorUsage;
use crate::model::QueuedCount;
use crate::status::NrtStatus;
use crate::tensor::TensorSet;

/// A job taken off a queue, to be run by the caller.
struct Taken {
    queue: usize,
    lnc: u32,
    implicit: bool,
    xu_id: u16,
    job: Job,
}

/// The device bindings of one resolved side; a host tensor is `NRT_INVALID` (async work keeps
/// no clones).
fn device_bindings(
    id: u32,
    m: &crate::model::Model,
    side: &Resolved<'_, '_>,
    usage: TensorUsage,
    what: &str,
) -> Result<Vec<Binding>> {
    let io = m.io();
    let mut out = Vec::with_capacity(io.len(usage));
    for (index, tensor) in side.iter() {
        let Some((buffer, offset)) = tensor.device_location() else {
            return Err(err!(
                Invalid,
                "{what} only supports device allocated tensors: tensor \"{}\" of model {id} is in host memory",
                io.get(usage, index).map_or("", |t| t.name.as_str())
            ));
        };
        out.push(Binding {
            index,
            buffer,
            offset,
            size: io.get(usage, index).map_or(0, |t| t.size),
        });
    }
    Ok(out)
}

impl<D: Driver, H: Host> Runtime<D, H> {
    /// Enqueues an execution of the model `m` refers to, with resolved I/O, on the queue
    /// `pick` chooses.
    fn enqueue(
        &self,
        m: &ModelRef<'_>,
        ins: &Resolved<'_, '_>,
        outs: &Resolved<'_, '_>,
        pick: impl FnOnce(&AsyncState, u32) -> Option<usize>,
        what: &str,
        hook: Option<CompletionHook>,
    ) -> Result<u64> {
        let h = m.handle();
        let id = h.id();
        let inputs =
            device_bindings(id, m, ins, TensorUsage::Input, what).map_err(|e| self.fail(e))?;
        let outputs =
            device_bindings(id, m, outs, TensorUsage::Output, what).map_err(|e| self.fail(e))?;
        let lnc = m.lnc();
        let mut state = self.async_state.lock();
        let Some(state) = state.as_mut() else {
            return Err(self.fail(err!(Closed, "NRT already closed")));
        };
        // Checked under the queue lock: `close` leaves INIT before it takes this lock to drain,
        // so a request either is queued before that drain (and runs) or is refused here.
        if !self.is_ready() {
            return Err(self.refused_at_commit());
        }
        let Some(q) = pick(state, lnc).and_then(|qi| state.queues.get_mut(qi)) else {
            return Err(self.fail(err!(Invalid, "No async queue for Neuron Core {lnc}")));
        };
        if q.pending.len() + usize::from(q.busy) >= q.capacity {
            return Err(err!(
                QueueFull,
                "The async queue of Neuron Core {lnc} is full ({} requests)",
                q.capacity
            ));
        }
        q.last_submitted += 1;
        let number = q.last_submitted;
        q.pending.push_back(Job {
            number,
            model: h,
            inputs,
            outputs,
            hook,
        });
        m.queued().increment();
        let seq = seq_id(q.xu_id, number);
        let lnc = crate::events::relative_core(self.published.topology(), lnc);
        self.events.emit(|| RuntimeEvent::ExecSubmitted {
            model: id,
            lnc,
            seq,
        });
        Ok(seq)
    }

    /// Implicit-async `execute`: enqueues to the model's core queue (full: `NRT_QUEUE_FULL`).
    pub(super) fn execute_implicit_async(
        &self,
        m: &ModelRef<'_>,
        ins: &Resolved<'_, '_>,
        outs: &Resolved<'_, '_>,
    ) -> Result<()> {
        self.enqueue(
            m,
            ins,
            outs,
            |s, lnc| s.queues.iter().position(|q| q.implicit && q.lnc == lnc),
            "Async exec mode",
            None,
        )
        .map(|_| ())
    }

    /// `nrta_execute_schedule`: schedules an execution on the compute unit of the model's core
    /// (queue must be 0). Returns the sequence id; `hook` runs with the status at completion.
    /// Host tensors are `NRT_INVALID`; a full queue is `NRT_QUEUE_FULL`.
    pub fn execute_schedule(
        &self,
        h: ModelHandle,
        inputs: &TensorSet<'_>,
        outputs: &TensorSet<'_>,
        queue: i32,
        hook: Option<CompletionHook>,
    ) -> Result<u64> {
        self.guard()?;
        if queue != 0 {
            return Err(self.fail(err!(
                Invalid,
                "The compute execution unit has only queue 0, not {queue}"
            )));
        }
        let m = self.model_ref_for_exec(h)?;
        let id = h.id();
        let mut ins = Resolved::new();
        let mut outs = Resolved::new();
        self.resolve_side(id, m.io(), inputs, TensorUsage::Input, &mut ins)?;
        self.resolve_side(id, m.io(), outputs, TensorUsage::Output, &mut outs)?;
        let topology = self.published.topology();
        self.enqueue(
            &m,
            &ins,
            &outs,
            |s, lnc| {
                let rel = topology.relative_lnc(lnc)?;
                let xu = (rel * XU_TYPES + Xu::Compute as u32) as u16;
                s.queues.iter().position(|q| !q.implicit && q.xu_id == xu)
            },
            "Async APIs",
            hook,
        )
    }

    /// `nrta_is_completed`: whether the request `seq` has completed; an id that was never issued
    /// is `NRT_INVALID`.
    pub fn is_completed(&self, seq: u64) -> Result<bool> {
        self.guard()?;
        let state = self.async_state.lock();
        let q = state.as_ref().and_then(|s| {
            s.queues
                .iter()
                .find(|q| !q.implicit && q.xu_id == seq_xu_id(seq))
        });
        match q {
            Some(q) if seq_number(seq) >= 1 && seq_number(seq) <= q.last_submitted => {
                Ok(seq_number(seq) <= q.last_completed)
            }
            _ => Err(self.fail(err!(Invalid, "Invalid sequence id {seq:#x}"))),
        }
    }

    /// `nrta_get_sequence`: the last completed sequence id of execution unit `xu` of logical core
    /// `lnc` (process-relative), queue `queue`.
    pub fn last_completed_sequence(&self, lnc: u32, xu: Xu, queue: i32) -> Result<u64> {
        self.guard()?;
        if queue != 0 {
            return Err(self.fail(err!(
                Invalid,
                "Execution unit {xu:?} has only queue 0, not {queue}"
            )));
        }
        let id = lnc
            .checked_mul(XU_TYPES)
            .and_then(|v| v.checked_add(xu as u32))
            .and_then(|v| u16::try_from(v).ok());
        let state = self.async_state.lock();
        match (id, state.as_ref()) {
            (Some(id), Some(s)) => match s.queues.iter().find(|q| !q.implicit && q.xu_id == id) {
                Some(q) => Ok(seq_id(id, q.last_completed)),
                None => Err(self.fail(err!(
                    Invalid,
                    "Logical Neuron Core {lnc} is not visible to this process"
                ))),
            },
            _ => Err(self.fail(err!(
                Invalid,
                "Logical Neuron Core {lnc} is not visible to this process"
            ))),
        }
    }

    /// Records a request that was carried out at once (the C library's tensor operations on
    /// the tensor-op unit): issues its sequence id on `xu` of process-relative core `lnc`,
    /// already completed.
    pub fn record_completed(&self, lnc: u32, xu: Xu) -> Result<u64> {
        self.guard()?;
        let id = lnc
            .checked_mul(XU_TYPES)
            .and_then(|v| v.checked_add(xu as u32))
            .and_then(|v| u16::try_from(v).ok());
        let mut state = self.async_state.lock();
        let q = id.and_then(|id| {
            state
                .as_mut()
                .and_then(|s| s.queues.iter_mut().find(|q| !q.implicit && q.xu_id == id))
        });
        match q {
            Some(q) if q.pending.is_empty() && !q.busy => {
                q.last_submitted += 1;
                q.last_completed = q.last_submitted;
                Ok(seq_id(q.xu_id, q.last_submitted))
            }
            Some(q) => Err(err!(
                QueueFull,
                "Execution unit {xu:?} of core {lnc} is busy ({} queued)",
                q.pending.len()
            )),
            None => Err(self.fail(err!(
                Invalid,
                "Logical Neuron Core {lnc} is not visible to this process"
            ))),
        }
    }

    /// `nrt_register_async_exec_callback`: called with every implicit-async completion.
    pub fn register_async_exec_callback(
        &self,
        callback: AsyncExecCallback,
        params: usize,
    ) -> Result<()> {
        self.guard()?;
        if let Some(s) = self.async_state.lock().as_mut() {
            s.callback = Some((callback, params));
        }
        Ok(())
    }

    /// Takes the next runnable job (round-robin over queues; one job per queue at a time, so
    /// each queue completes in order).
    fn take_job(&self, only: Option<(u32, bool)>) -> Option<Taken> {
        let mut state = self.async_state.lock();
        let s = state.as_mut()?;
        let n = s.queues.len();
        for k in 0..n {
            let qi = (s.next + k) % n;
            let Some(q) = s.queues.get_mut(qi) else {
                continue;
            };
            if q.busy || q.pending.is_empty() {
                continue;
            }
            if let Some((lnc, implicit)) = only {
                if q.lnc != lnc || q.implicit != implicit {
                    continue;
                }
            }
            let job = q.pending.pop_front()?;
            q.busy = true;
            q.running.clear();
            q.running.extend(
                job.inputs
                    .iter()
                    .chain(job.outputs.iter())
                    .map(|b| b.buffer),
            );
            s.next = qi + 1;
            return Some(Taken {
                queue: qi,
                lnc: q.lnc,
                implicit: q.implicit,
                xu_id: q.xu_id,
                job,
            });
        }
        None
    }

    fn run_job(&self, t: Taken) {
        let id = t.job.model.id();
        let status = match self.resolve_unguarded_quiet(t.job.model) {
            Err(()) => NrtStatus::InvalidHandle,
            Ok(m) => {
                let request = ExecRequest {
                    subgraphs: m.staged(),
                    inputs: &t.job.inputs,
                    outputs: &t.job.outputs,
                    timeout_secs: self.published.timeout_secs(),
                };
                let seq = seq_id(t.xu_id, t.job.number);
                self.events.emit(|| RuntimeEvent::ExecStarted {
                    model: id,
                    lnc: crate::events::relative_core(self.published.topology(), t.lnc),
                    seq,
                    io: m.io(),
                    inputs: &t.job.inputs,
                });
                let status = match self.driver.submit(&request) {
                    Ok(()) => NrtStatus::Success,
                    Err(e) => {
                        self.log(
                            Level::Error,
                            format_args!("Async execution of model {id} failed: {e}"),
                        );
                        e.status()
                    }
                };
                self.events.emit(|| RuntimeEvent::ExecCompleted {
                    model: id,
                    lnc: crate::events::relative_core(self.published.topology(), t.lnc),
                    seq,
                    status,
                    staged: m.staged(),
                    io: m.io(),
                    outputs: &t.job.outputs,
                });
                m.queued().decrement();
                status
            }
        };
        // The status is stored before the request reads as completed: a caller that saw the
        // completion (`nrta_is_completed`) finds its `*ret` written.
        if let Some(hook) = t.job.hook {
            (hook.call)(hook.ctx, seq_id(t.xu_id, t.job.number), status);
        }
        let (callback, frees) = {
            let mut state = self.async_state.lock();
            match state.as_mut() {
                Some(s) => {
                    if let Some(q) = s.queues.get_mut(t.queue) {
                        q.busy = false;
                        q.running.clear();
                        q.last_completed = t.job.number;
                    }
                    (s.callback, s.take_unused_frees())
                }
                None => (None, Vec::new()),
            }
        };
        // Storage freed while this execution was queued is released now that it is done.
        for buffer in frees {
            self.free_now(buffer);
        }
        if t.implicit {
            if let Some((cb, params)) = callback {
                let rel = self.published.topology().relative_lnc(t.lnc).unwrap_or(0);
                cb(params, id, rel, t.job.number, status);
            }
        }
    }

    /// Runs queued work until none is runnable; returns how many requests ran.
    pub fn process_async(&self) -> usize {
        let mut n = 0;
        while let Some(t) = self.take_job(None) {
            self.run_job(t);
            n += 1;
        }
        n
    }

    /// A worker loop for host threads: runs queued work, relaxing through the host when idle,
    /// until `stop` is set and nothing is left.
    pub fn run_async_worker(&self, stop: &AtomicBool) {
        loop {
            if self.process_async() == 0 {
                if stop.load(Ordering::Acquire) && self.async_pending() == 0 {
                    return;
                }
                self.host.platform().relax();
            }
        }
    }

    /// Requests queued or running.
    pub fn async_pending(&self) -> usize {
        self.async_state
            .lock()
            .as_ref()
            .map_or(0, AsyncState::pending_total)
    }

    /// `nrt_async_drain_queued_execs`: runs or waits for every queued implicit-async execution of
    /// (process-relative) logical core `lnc`.
    pub fn async_drain(&self, lnc: i32) -> Result<()> {
        self.guard()?;
        let abs = self.resolve_lnc(lnc.into())?;
        loop {
            let pending = self.async_state.lock().as_ref().map_or(0, |s| {
                s.queues
                    .iter()
                    .filter(|q| q.lnc == abs)
                    .map(|q| q.pending.len() + usize::from(q.busy))
                    .sum()
            });
            if pending == 0 {
                return Ok(());
            }
            match self
                .take_job(Some((abs, true)))
                .or_else(|| self.take_job(Some((abs, false))))
            {
                Some(t) => self.run_job(t),
                None => self.host.platform().relax(),
            }
        }
    }

    /// Runs or waits for the queued executions of a model (its model-stop in async mode).
    pub(super) fn drain_model(&self, queued: &QueuedCount) {
        while queued.get() > 0 {
            match self.take_job(None) {
                Some(t) => self.run_job(t),
                None => self.host.platform().relax(),
            }
        }
    }

    /// Runs everything still queued (used by `close`).
    pub(super) fn drain_all_async(&self) {
        while self.async_pending() > 0 {
            if self.process_async() == 0 {
                self.host.platform().relax();
            }
        }
    }
}
