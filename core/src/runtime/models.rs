//! The model registry facade of the runtime (spec 000 §1, §4, §5): register, resolve, unload,
//! and the I/O tensor metadata accessors. Every accessor brackets its work in resolve/release:
//! it holds a [`ModelRef`] for exactly as long as it reads the model.

use alloc::vec::Vec;

use super::Runtime;
use crate::driver::Driver;
use crate::error::{Error, Result};
use crate::fmt::Level;
use crate::host::{Host, Platform as _};
use crate::io::{TensorInfo, TensorUsage};
use crate::model::{MODEL_STATE_READY, Model};
use crate::registry::{Handle, InsertError, Ref};
use crate::status::NrtStatus;
use crate::sync::{Ordering, fence};

/// A model handle: the registry slot and the model's id. The id is unique within a runtime
/// (monotone, never reused), so a stale or forged handle never resolves.
pub type ModelHandle = Handle;

/// A held reference to a loaded model; dropping it releases the reference.
pub type ModelRef<'a> = Ref<'a, Model>;

impl<D: Driver, H: Host> Runtime<D, H> {
    #[cold]
    #[inline(never)]
    fn miss(&self, h: ModelHandle) -> Error {
        self.fail(err!(InvalidHandle, "Failed to find model: {}", h.id()))
    }

    /// Takes a reference to a model without the state guard (for `close`'s sweep).
    #[inline]
    fn resolve_unguarded(&self, h: ModelHandle) -> Result<ModelRef<'_>> {
        self.models
            .resolve(h, self.host.platform().reader_id())
            .ok_or_else(|| self.miss(h))
    }

    /// Takes a reference without logging a miss (internal scans).
    pub(super) fn resolve_unguarded_quiet(
        &self,
        h: ModelHandle,
    ) -> core::result::Result<ModelRef<'_>, ()> {
        self.models
            .resolve(h, self.host.platform().reader_id())
            .ok_or(())
    }

    /// Takes the reference an execution holds (`db_get_nn_ref_count`); a miss is
    /// `NRT_INVALID_HANDLE` "Failed to find model: %u".
    pub(super) fn model_ref_for_exec(&self, h: ModelHandle) -> Result<ModelRef<'_>> {
        self.resolve_unguarded(h)
    }

    /// Takes a reference to the model of `h` (guarded). A miss is `NRT_INVALID_HANDLE`,
    /// "Failed to find model: %u".
    #[inline]
    pub fn model(&self, h: ModelHandle) -> Result<ModelRef<'_>> {
        self.guard()?;
        self.resolve_unguarded(h)
    }

    /// Publishes a loaded model under a fresh id: the load pipeline's last step. Fails with
    /// `NRT_RESOURCE` when the registry is full (capacity [`super::RuntimeOptions::max_models`])
    /// or the id space is used up; nothing is allocated here.
    ///
    /// A registration is announced before its guard, and `close` leaves INIT before it waits
    /// for announced registrations to finish and sweeps the registry (a store, a sequentially
    /// consistent fence and a load on each side): so a model registered concurrently with `close`
    /// is either refused here (the guard's status) or unloaded by the sweep, never left behind.
    pub fn register_model(&self, model: Model) -> Result<ModelHandle> {
        self.registering.fetch_add(1, Ordering::SeqCst);
        // With `close`'s fence after it closes the gate, this fence makes the two store-load
        // pairs a Dekker handshake: the gate test below is the guard's own.
        fence(Ordering::SeqCst);
        let r = if self.is_ready() {
            self.insert_model(model)
        } else {
            Err(self.refused_at_commit())
        };
        self.registering.fetch_sub(1, Ordering::SeqCst);
        r
    }

    fn insert_model(&self, model: Model) -> Result<ModelHandle> {
        self.models.insert(model).map_err(|e| {
            self.fail(match e {
                InsertError::Full => err!(
                    Resource,
                    "Too many models loaded: the registry holds {} models",
                    self.models.capacity()
                ),
                InsertError::IdsExhausted => err!(Resource, "Model ids exhausted"),
            })
        })
    }

    /// Handles of every loaded model (a snapshot; guarded).
    pub fn loaded_models(&self) -> Result<Vec<ModelHandle>> {
        self.guard()?;
        Ok(self.models.live_handles())
    }

    /// `nrt_unload`: erase-then-drain. Probe the handle; the model must be READY (4); erase it
    /// so no new reference can be taken; wait — without a timeout — until every reference taken
    /// before the erase is released; stop it on its engine; unstage it; free the record.
    pub fn unload(&self, h: ModelHandle) -> Result<()> {
        self.guard()?;
        self.unload_model(h, false)
    }

    /// The unload state machine (`kmgr_unload_nn`). `sweep` (from `close`) unloads a model in
    /// any state instead of refusing it, so no model outlives the runtime.
    fn unload_model(&self, h: ModelHandle, sweep: bool) -> Result<()> {
        let id = h.id();
        self.log(Level::Debug, format_args!("Unloading {id}"));
        let probe = self.resolve_unguarded(h)?;
        if probe.references() > 1 {
            self.log(
                Level::Warning,
                format_args!(
                    "Execution requests on model {id} have not been drained before unloading"
                ),
            );
        }
        let state = probe.state();
        if state != MODEL_STATE_READY {
            if !sweep {
                return Err(self.fail(err!(
                    Invalid,
                    "DLR {id} state {state}, must be stopped before unloading"
                )));
            }
            self.log(
                Level::Warning,
                format_args!("DLR {id} state {state}, unloading it anyway at close"),
            );
        }
        // Model-stop of the async modes: its queued executions run first (they hold the handle,
        // not a reference, so they would otherwise miss after the erase).
        self.drain_model(probe.queued());
        // Erase: from here new resolutions miss.
        let erased = probe.erase().map_err(|_| self.miss(h))?;
        // Drain, unlocked and without a timeout; never free early.
        let warn_every = self.options.unload_warn_every.max(1);
        let drained = erased.wait(|n| {
            if n % warn_every == 0 {
                self.log(
                    Level::Warning,
                    format_args!("still waiting for model[{id}] ref count 0"),
                );
            }
            self.host.platform().relax();
        });
        // Exclusive from here: stop on the engine, unstage, free.
        let model = drained.take();
        let mut result = Ok(());
        for &staged in model.staged() {
            if let Err(e) = self.driver.stop_model(staged) {
                self.log(Level::Error, format_args!("Failed to stop model {id}: {e}"));
            }
        }
        for &staged in model.staged() {
            if let Err(e) = self.driver.unstage_model(staged) {
                self.unstage_retry.lock().push(staged);
                if result.is_ok() {
                    result = Err(self.fail(Error::new(
                        crate::driver::DriverError::status(&e),
                        format_args!("Failed to unstage model: {id} ({e})"),
                    )));
                }
            }
        }
        let lnc = crate::events::relative_core(self.published.topology(), model.lnc());
        drop(model);
        if result.is_ok() {
            self.log(Level::Info, format_args!("Unloaded NN: {id}"));
            self.events
                .emit(|| crate::events::RuntimeEvent::ModelUnloaded { model: id, lnc });
        }
        result
    }

    /// `kmgr_unload_all_nns` for `close`: snapshot the ids and unload each, until none is left;
    /// then retry the unstages that failed earlier.
    pub(super) fn unload_all_models(&self) {
        self.unload_every_model();
        let retry = core::mem::take(&mut *self.unstage_retry.lock());
        for staged in retry {
            if let Err(e) = self.driver.unstage_model(staged) {
                self.log(
                    Level::Error,
                    format_args!("close: failed to unstage a model again: {e}"),
                );
            }
        }
    }

    fn unload_every_model(&self) {
        // Each pass empties the snapshot; a model registered concurrently with close (its
        // caller passed the guard just before CLOSED) is caught by the next pass.
        for _ in 0..=self.models.capacity() {
            let handles = self.models.live_handles();
            if handles.is_empty() {
                return;
            }
            for h in handles {
                if let Err(e) = self.unload_model(h, true) {
                    if e.status() != NrtStatus::InvalidHandle {
                        self.log(Level::Error, format_args!("close: {}", e.message()));
                    }
                }
            }
        }
    }

    /// `kmgr_get_io_tensor_count`: (inputs, outputs).
    pub fn io_tensor_count(&self, h: ModelHandle) -> Result<(u32, u32)> {
        let m = self.model(h)?;
        let io = m.io();
        Ok((
            io.len(TensorUsage::Input) as u32,
            io.len(TensorUsage::Output) as u32,
        ))
    }

    /// `kmgr_get_ifmap_count`: the number of inputs.
    pub fn input_count(&self, h: ModelHandle) -> Result<u32> {
        let m = self.model(h)?;
        Ok(m.io().len(TensorUsage::Input) as u32)
    }

    /// `kmgr_get_io_tensor_info`: the `index`-th input or output, in name order.
    pub fn io_tensor_info(
        &self,
        h: ModelHandle,
        usage: TensorUsage,
        index: u32,
    ) -> Result<TensorInfo> {
        let m = self.model(h)?;
        let side = m.io().tensors(usage);
        match side.get(index as usize) {
            Some(t) => Ok(t.clone()),
            None => Err(self.fail(err!(
                Invalid,
                "Tensor index {index} out of range: model {} has {} {} tensor(s)",
                h.id(),
                side.len(),
                usage.as_str()
            ))),
        }
    }

    /// Every input then every output, each in name order (what `nrt_get_model_tensor_info`
    /// returns).
    pub fn model_tensor_info(&self, h: ModelHandle) -> Result<Vec<(TensorUsage, TensorInfo)>> {
        let m = self.model(h)?;
        let io = m.io();
        Ok(TensorUsage::BOTH
            .into_iter()
            .flat_map(|u| io.tensors(u).iter().map(move |t| (u, t.clone())))
            .collect())
    }

    /// `kmgr_is_valid_ifmap`: whether the model has an input called `name`. A missing name
    /// (`None`, a NULL from C) is `NRT_INVALID`, not a crash.
    pub fn is_valid_input_name(&self, h: ModelHandle, name: Option<&str>) -> Result<bool> {
        let m = self.model(h)?;
        let Some(name) = name else {
            return Err(self.fail(err!(Invalid, "Input tensor name is NULL")));
        };
        Ok(m.io().input(name).is_some())
    }

    /// `nrt_get_model_nc_count`: the physical cores a model runs on, the size of its logical
    /// core (guarded; one model resolution, no lock).
    #[inline]
    pub fn model_core_count(&self, h: ModelHandle) -> Result<u32> {
        let _m = self.model(h)?;
        Ok(self.published.topology().lnc_size())
    }

    /// The process-relative logical core a model is loaded on (`nrt_get_model_info`).
    pub fn model_lnc(&self, h: ModelHandle) -> Result<u32> {
        let m = self.model(h)?;
        Ok(self.published.topology().relative_lnc(m.lnc()).unwrap_or(0))
    }

    /// The physical core count of [`Runtime::model_core_count`] when the model is live, without
    /// taking a reference or building an [`Error`] (the C hot path), for a caller that already
    /// found the hot-path gate open ([`Runtime::is_ready`], or its
    /// [`RuntimeOptions::ready_mirror`](super::RuntimeOptions::ready_mirror)): `None` when the
    /// model is not live. Without that check the answer may come from a runtime that is not
    /// INIT.
    #[inline]
    pub fn model_core_count_if_live(&self, h: ModelHandle) -> Option<u32> {
        // The answer reads nothing of the model, so no reference is taken: the model is
        // checked live at one instant (`Registry::is_live`), and the count is the session's.
        self.models.is_live(h).then(|| self.published.lnc_size())
    }
}
