//! The execute fork (spec 000 §2) with its per-execution resources (§3).
//!
//! One execution resolves both tensor sets to I/O indices once (`bind.rs`), then either
//! enqueues (implicit async) or binds: each I/O index gets a device location — the caller's
//! device tensor, or a clone of a host tensor — and the driver runs the request. Copy-back
//! walks the same resolved tensors; no name is looked up after the first pass.

use super::Runtime;
use super::bind::{Resolved, SmallVec};
use crate::driver::{Binding, DeviceBuffer, Driver, DriverError, ExecRequest};
use crate::error::{Error, Result};
use crate::events::RuntimeEvent;
use crate::fmt::Level;
use crate::host::Host;
use crate::io::{IoTable, TensorUsage};
use crate::runtime::ModelHandle;
use crate::status::NrtStatus;
use crate::tensor::{DeviceMemory, Tensor, TensorSet};

/// `kmgr_exec_mode_t`. The synchronous path passes [`ExecMode::ExplicitAsync`] (1) and the
/// implicit-async path [`ExecMode::Async`] (0): the value is `async_workers == NULL`, the
/// inverted naming libnrt has.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExecMode {
    /// `KMGR_EXEC_MODE_ASYNC` — what the implicit-async fork passes.
    Async = 0,
    /// `KMGR_EXEC_MODE_EXPLICIT_ASYNC` — what the synchronous fork passes.
    ExplicitAsync = 1,
}

impl ExecMode {
    /// The mode `kmgr_exec` passes to `kmgr_exec_pre`: `(async_exec_workers == NULL)`.
    pub const fn for_fork(implicit_async: bool) -> Self {
        if implicit_async {
            ExecMode::Async
        } else {
            ExecMode::ExplicitAsync
        }
    }
}

/// The per-execution resources (`kmgr_exec_resources_t`): the device clones of host tensors
/// (in a table of the caller's frame) and the mode. Dropping it frees every clone exactly once,
/// on every edge.
struct ExecResources<'a, D: Driver, H: Host> {
    rt: &'a Runtime<D, H>,
    mode: ExecMode,
    clones: &'a mut SmallVec<DeviceBuffer>,
}

impl<D: Driver, H: Host> Drop for ExecResources<'_, D, H> {
    fn drop(&mut self) {
        for &c in self.clones.as_slice() {
            if let Err(e) = self.rt.driver.free_device(c) {
                self.rt.log(
                    Level::Error,
                    format_args!("Failed to free an execution clone: {e}"),
                );
            }
        }
    }
}

impl<D: Driver + Sync, H: Host + Sync> Runtime<D, H> {
    /// `nrt_execute`.
    pub fn execute(
        &self,
        h: ModelHandle,
        inputs: &TensorSet<'_>,
        outputs: &TensorSet<'_>,
    ) -> Result<()> {
        self.execute_repeat(h, inputs, outputs, 1)
    }

    /// `nrt_execute_repeat`: the execute fork (`kmgr_exec`). Sync (default): host tensors are
    /// cloned to device memory, inputs copied in, the model run `repeat` times, outputs copied
    /// back. Implicit async mode refuses host tensors. The model reference is held throughout
    /// and released on every path; the execution's resources are freed exactly once.
    pub fn execute_repeat(
        &self,
        h: ModelHandle,
        inputs: &TensorSet<'_>,
        outputs: &TensorSet<'_>,
        repeat: i32,
    ) -> Result<()> {
        self.guard()?;
        if repeat < 1 {
            return Err(self.fail(err!(Invalid, "repeat count {repeat} must be at least 1")));
        }
        let m = self.model_ref_for_exec(h)?;
        let id = h.id();
        let io = m.io();
        // Each table is built in place in this frame (a tuple would be built, then moved).
        let mut ins = Resolved::new();
        let mut outs = Resolved::new();
        self.resolve_side(id, io, inputs, TensorUsage::Input, &mut ins)?;
        self.resolve_side(id, io, outputs, TensorUsage::Output, &mut outs)?;
        let implicit_async = self.published.implicit_async();
        if implicit_async {
            let host_resident = ins
                .iter()
                .chain(outs.iter())
                .filter(|(_, t)| t.is_host_resident())
                .count();
            if host_resident > 0 {
                return Err(self.fail(err!(
                    Invalid,
                    "Async exec mode only supports device allocated tensors: model {id} was given \
                     {host_resident} host tensor(s)"
                )));
            }
            for _ in 0..repeat {
                self.execute_implicit_async(&m, &ins, &outs)?;
            }
            return Ok(());
        }
        let mut clones = SmallVec::new();
        let mut res = ExecResources {
            rt: self,
            mode: ExecMode::for_fork(implicit_async),
            clones: &mut clones,
        };
        let device = self.published.topology().device_of_lnc(m.lnc());
        let mut in_bindings = SmallVec::new();
        let mut out_bindings = SmallVec::new();
        self.bind(
            &mut res,
            id,
            io,
            device,
            &ins,
            TensorUsage::Input,
            &mut in_bindings,
        )?;
        self.bind(
            &mut res,
            id,
            io,
            device,
            &outs,
            TensorUsage::Output,
            &mut out_bindings,
        )?;
        let request = ExecRequest {
            subgraphs: m.staged(),
            inputs: in_bindings.as_slice(),
            outputs: out_bindings.as_slice(),
            timeout_secs: self.published.timeout_secs(),
        };
        self.log(
            Level::Trace,
            format_args!("execute model {id}: exec mode {}", res.mode as u32),
        );
        let lnc = crate::events::relative_core(self.published.topology(), m.lnc());
        for _ in 0..repeat {
            let seq = self.events.next_sync_seq();
            self.events.emit(|| RuntimeEvent::ExecSubmitted {
                model: id,
                lnc,
                seq,
            });
            self.events.emit(|| RuntimeEvent::ExecStarted {
                model: id,
                lnc,
                seq,
                io,
                inputs: in_bindings.as_slice(),
            });
            let done = self.driver.submit(&request);
            self.events.emit(|| RuntimeEvent::ExecCompleted {
                model: id,
                lnc,
                seq,
                status: done
                    .as_ref()
                    .map_or_else(DriverError::status, |()| NrtStatus::Success),
                staged: m.staged(),
                io,
                outputs: out_bindings.as_slice(),
            });
            done.map_err(|e| {
                self.fail(Error::new(
                    e.status(),
                    format_args!("Execution of model {id} failed: {e}"),
                ))
            })?;
        }
        // Copy host outputs back from their clones.
        for (b, (_, tensor)) in out_bindings.as_slice().iter().zip(outs.iter()) {
            if tensor.is_host_resident() {
                self.copy_device_to_host(b.buffer, tensor)?;
            }
        }
        drop(res);
        Ok(())
    }

    /// The bindings of one side, into `bindings`: the caller's device tensors where they are,
    /// host tensors through device clones (inputs copied in) owned by `res`.
    #[allow(clippy::too_many_arguments)]
    fn bind(
        &self,
        res: &mut ExecResources<'_, D, H>,
        id: u32,
        io: &IoTable,
        device: u32,
        side: &Resolved<'_, '_>,
        usage: TensorUsage,
        bindings: &mut SmallVec<Binding>,
    ) -> Result<()> {
        for (index, tensor) in side.iter() {
            let size = io.get(usage, index).map_or(0, |t| t.size);
            let (buffer, offset) = match tensor.device_location() {
                Some(loc) => loc,
                None => {
                    let clone = self.driver.alloc_device(device, size).map_err(|e| {
                        self.fail(Error::new(
                            e.status(),
                            format_args!(
                                "Failed to create device {} tensor set for model {id}: {e}",
                                usage.as_str()
                            ),
                        ))
                    })?;
                    res.clones.push(clone);
                    if usage == TensorUsage::Input {
                        self.copy_host_to_device(tensor, clone)?;
                    }
                    (clone, 0)
                }
            };
            bindings.push(Binding {
                index,
                buffer,
                offset,
                size,
            });
        }
        Ok(())
    }

    fn copy_host_to_device(&self, src: &Tensor<'_>, dst: DeviceBuffer) -> Result<()> {
        let mut chunk = [0u8; 4096];
        let mut done = 0u64;
        while done < src.size() {
            let n = (src.size() - done).min(chunk.len() as u64) as usize;
            let buf = chunk.get_mut(..n).unwrap_or(&mut []);
            src.read(done, buf)?;
            DeviceMemory::write(self, dst, done, buf)?;
            done += n as u64;
        }
        Ok(())
    }

    fn copy_device_to_host(&self, src: DeviceBuffer, dst: &Tensor<'_>) -> Result<()> {
        let mut chunk = [0u8; 4096];
        let mut done = 0u64;
        while done < dst.size() {
            let n = (dst.size() - done).min(chunk.len() as u64) as usize;
            let buf = chunk.get_mut(..n).unwrap_or(&mut []);
            DeviceMemory::read(self, src, done, buf)?;
            dst.write(done, buf)?;
            done += n as u64;
        }
        Ok(())
    }
}
