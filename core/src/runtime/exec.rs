//! Load (spec 000 §6, the stage seam), tensors, and the execute fork (§2) with its per-execution
//! resources (§3).

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use super::Runtime;
use crate::driver::{
    Binding, DeviceBuffer, Driver, DriverError, ExecRequest, StagedModel, SubgraphImage,
};
use crate::error::{Error, Result};
use crate::fmt::Level;
use crate::host::Host;
use crate::model::{IoTable, Model, TensorUsage};
use crate::neff::{self, Neff, ParseOptions, SIM_PROGRAM_MEMBER};
use crate::runtime::ModelHandle;
use crate::tensor::{DeviceMemory, Tensor, TensorPlacement, TensorSet};

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

/// Inline capacity of the per-execution tables (bindings, clones); models with more I/O
/// tensors than this spill to the heap.
const INLINE_IO: usize = 32;

/// A vector that stays on the stack up to [`INLINE_IO`] elements.
enum SmallVec<T> {
    Inline(heapless::Vec<T, INLINE_IO>),
    Heap(Vec<T>),
}

impl<T> SmallVec<T> {
    fn new() -> Self {
        SmallVec::Inline(heapless::Vec::new())
    }

    fn push(&mut self, v: T) {
        match self {
            SmallVec::Inline(inline) => {
                if let Err(v) = inline.push(v) {
                    let mut heap: Vec<T> = Vec::with_capacity(INLINE_IO * 2);
                    heap.extend(core::mem::take(inline));
                    heap.push(v);
                    *self = SmallVec::Heap(heap);
                }
            }
            SmallVec::Heap(heap) => heap.push(v),
        }
    }

    fn as_slice(&self) -> &[T] {
        match self {
            SmallVec::Inline(v) => v,
            SmallVec::Heap(v) => v,
        }
    }
}

/// The per-execution resources (`kmgr_exec_resources_t`): the device clones of host tensors
/// and the mode. Dropping it frees every clone exactly once, on every edge.
struct ExecResources<'a, D: Driver, H: Host> {
    rt: &'a Runtime<D, H>,
    mode: ExecMode,
    clones: SmallVec<DeviceBuffer>,
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

fn driver_error<E: DriverError>(e: &E, what: core::fmt::Arguments<'_>) -> Error {
    Error::new(e.status(), format_args!("{what}: {e}"))
}

impl<D: Driver + Sync, H: Host + Sync> DeviceMemory for Runtime<D, H> {
    fn free(&self, buffer: DeviceBuffer) {
        if let Err(e) = self.driver.free_device(buffer) {
            self.log(
                Level::Error,
                format_args!("Failed to free device memory: {e}"),
            );
        }
    }
    fn read(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<()> {
        self.driver.read_device(b, offset, out).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to read device memory"),
            ))
        })
    }
    fn write(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<()> {
        self.driver.write_device(b, offset, data).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to write device memory"),
            ))
        })
    }
    fn copy(&self, src: DeviceBuffer, so: u64, dst: DeviceBuffer, d: u64, len: u64) -> Result<()> {
        self.driver.copy_device(src, so, dst, d, len).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to copy device memory"),
            ))
        })
    }
    fn memset(&self, b: DeviceBuffer, offset: u64, value: u8, len: u64) -> Result<()> {
        self.driver
            .memset_device(b, offset, value, len)
            .map_err(|e| {
                self.fail(driver_error(
                    &e,
                    format_args!("Failed to set device memory"),
                ))
            })
    }
}

impl<D: Driver + Sync, H: Host + Sync> Runtime<D, H> {
    /// The relative logical core `vnc` as an absolute one; `NRT_INVALID` if not visible.
    pub(crate) fn absolute_lnc(&self, vnc: i32) -> Result<u32> {
        let count = self.exec_config.lnc_count.load(Ordering::Relaxed);
        match u32::try_from(vnc) {
            Ok(v) if v < count => Ok(self.exec_config.first_lnc.load(Ordering::Relaxed) + v),
            _ => Err(self.fail(err!(
                Invalid,
                "Logical Neuron Core {vnc} is not visible to this process (visible: 0-{})",
                count.saturating_sub(1)
            ))),
        }
    }

    /// The device holding absolute logical core `abs`.
    fn device_of(&self, abs: u32) -> u32 {
        let lnc = self.exec_config.lnc_size.load(Ordering::Relaxed).max(1);
        let per_device = self
            .exec_config
            .cores_per_device
            .load(Ordering::Relaxed)
            .max(1);
        abs.saturating_mul(lnc) / per_device
    }

    /// `nrt_tensor_allocate`: a tensor of `size` bytes in device memory of the (process-
    /// relative) logical core `vnc`, or in host memory. Device memory exhaustion is
    /// `NRT_RESOURCE`.
    pub fn tensor_allocate(
        &self,
        placement: TensorPlacement,
        vnc: i32,
        size: u64,
        name: &str,
    ) -> Result<Tensor<'_>> {
        self.guard()?;
        match placement {
            TensorPlacement::Device => {
                let abs = self.absolute_lnc(vnc)?;
                let device = self.device_of(abs);
                let buffer = self.driver.alloc_device(device, size).map_err(|e| {
                    self.fail(Error::new(
                        e.status(),
                        format_args!(
                            "Failed to allocate {size} bytes of device memory for tensor \
                             \"{name}\" on Neuron Core {vnc}: {e}"
                        ),
                    ))
                })?;
                Ok(Tensor::device(String::from(name), buffer, self))
            }
            TensorPlacement::Host => {
                Tensor::host(String::from(name), size).map_err(|e| self.fail(e))
            }
            TensorPlacement::Virtual => Ok(Tensor::empty(name)),
        }
    }

    /// `nrt_load`: parse, choose the logical core (`vnc = -1`: the visible core with the fewest
    /// models), stage, publish. Every failure after staging began unstages everything.
    pub fn load(&self, neff_bytes: &[u8], vnc: i32, vnc_count: i32) -> Result<ModelHandle> {
        self.guard()?;
        let validate_hash = self.with_session(|s| s.config.validate_hash)?;
        let neff = neff::parse(
            neff_bytes,
            &ParseOptions {
                validate_hash,
                ..Default::default()
            },
        )
        .map_err(|e| self.fail(e))?;
        for w in &neff.warnings {
            self.log(Level::Warning, format_args!("{}: {w}", neff.name()));
        }
        if vnc_count != -1 && vnc_count != 1 {
            self.log(
                Level::Warning,
                format_args!(
                    "vnc_count {vnc_count} is deprecated and ignored: loading on one core"
                ),
            );
        }
        let abs = if vnc < 0 {
            self.least_loaded_lnc()
        } else {
            self.absolute_lnc(vnc)?
        };
        let io = IoTable::from_neff(&neff).map_err(|e| self.fail(e))?;
        let staged = self.stage(&neff, abs)?;
        let plumbing = staged.iter().any(|s| s.plumbing);
        let model = Model::new(String::from(neff.name()), abs, io, staged.clone());
        match self.register_model(model) {
            Ok(h) => {
                if plumbing {
                    self.log(
                        Level::Warning,
                        format_args!(
                            "Model {} ({}) carries no simulator program: its executions run in \
                             plumbing mode and zero-fill the outputs, computing nothing",
                            h.id(),
                            neff.name()
                        ),
                    );
                }
                self.log(
                    Level::Info,
                    format_args!(
                        "Loaded model {} ({}) on Neuron Core {abs}",
                        h.id(),
                        neff.name()
                    ),
                );
                Ok(h)
            }
            Err(e) => {
                self.unstage_all(&staged);
                Err(e)
            }
        }
    }

    /// The visible logical core with the fewest models (the lowest on a tie).
    fn least_loaded_lnc(&self) -> u32 {
        let first = self.exec_config.first_lnc.load(Ordering::Relaxed);
        let count = self.exec_config.lnc_count.load(Ordering::Relaxed);
        let mut load: Vec<u32> = alloc::vec![0; count as usize];
        for h in self.models.live_handles() {
            if let Ok(m) = self.resolve_unguarded_quiet(h) {
                if let Some(c) = load.get_mut(m.vnc().saturating_sub(first) as usize) {
                    *c += 1;
                }
            }
        }
        let best = load
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| **c)
            .map_or(0, |(i, _)| i);
        first + best as u32
    }

    /// The stage seam (`dlr_kelf_stage`): one subgraph inline, several in parallel through the
    /// host, any failure unstaging the ones that succeeded.
    fn stage(&self, neff: &Neff, abs: u32) -> Result<Vec<StagedModel>> {
        let required = neff.subgraphs.len() as u32;
        let lnc_size = self.exec_config.lnc_size.load(Ordering::Relaxed);
        if lnc_size < required {
            return Err(self.fail(err!(
                Invalid,
                "Insufficient number of pncs, required {required}, available {lnc_size}"
            )));
        }
        if required != 1 && required != lnc_size {
            return Err(self.fail(err!(
                Invalid,
                "NEFF has {required} subgraphs: it needs 1 or exactly the logical core size {lnc_size}"
            )));
        }
        let first_pcore = abs.saturating_mul(lnc_size);
        let image = |i: usize| {
            let sg = neff.subgraphs.get(i);
            SubgraphImage {
                vnc: abs,
                index: i as u32,
                pcore: first_pcore + i as u32,
                name: sg.map_or("", |s| s.name.as_str()),
                model: neff.name(),
                program: sg.and_then(|s| s.member(SIM_PROGRAM_MEMBER)),
            }
        };
        let stage_one = |i: usize| {
            self.driver.stage_subgraph(&image(i)).map_err(|e| {
                Error::new(
                    e.status(),
                    format_args!(
                        "Failed to stage subgraph {} of {} on Neuron Core {abs}: {e}",
                        image(i).name,
                        neff.name()
                    ),
                )
            })
        };
        let results: Vec<Result<StagedModel>> = if required == 1 {
            alloc::vec![stage_one(0)]
        } else {
            let slots: Vec<spin::Mutex<Option<Result<StagedModel>>>> =
                (0..required).map(|_| spin::Mutex::new(None)).collect();
            self.host.run_parallel(required as usize, &|i| {
                if let Some(slot) = slots.get(i) {
                    *slot.lock() = Some(stage_one(i));
                }
            });
            slots
                .into_iter()
                .map(|s| {
                    s.into_inner()
                        .unwrap_or_else(|| Err(err!(Failure, "A staging task did not run")))
                })
                .collect()
        };
        let mut staged = Vec::with_capacity(results.len());
        let mut first_error = None;
        for r in results {
            match r {
                Ok(s) => staged.push(s),
                Err(e) => {
                    if first_error.is_none() {
                        first_error = Some(e);
                    }
                }
            }
        }
        match first_error {
            None => Ok(staged),
            Some(e) => {
                self.unstage_all(&staged);
                Err(self.fail(e))
            }
        }
    }

    fn unstage_all(&self, staged: &[StagedModel]) {
        for &s in staged {
            if let Err(e) = self.driver.stop_model(s) {
                self.log(
                    Level::Error,
                    format_args!("Failed to stop a staged subgraph: {e}"),
                );
            }
            if let Err(e) = self.driver.unstage_model(s) {
                self.log(
                    Level::Error,
                    format_args!("Failed to roll back a staged subgraph: {e}"),
                );
            }
        }
    }

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
        self.validate_io(id, io, inputs, TensorUsage::Input)?;
        self.validate_io(id, io, outputs, TensorUsage::Output)?;
        let implicit_async = self.exec_config.implicit_async.load(Ordering::Relaxed);
        let host_resident = inputs
            .iter()
            .chain(outputs.iter())
            .filter(|(_, t)| t.is_host_resident())
            .count();
        if implicit_async {
            if host_resident > 0 {
                return Err(self.fail(err!(
                    Invalid,
                    "Async exec mode only supports device allocated tensors: model {id} was given \
                     {host_resident} host tensor(s)"
                )));
            }
            drop(m);
            for _ in 0..repeat {
                self.execute_implicit_async(h, inputs, outputs)?;
            }
            return Ok(());
        }
        let mut res = ExecResources {
            rt: self,
            mode: ExecMode::for_fork(implicit_async),
            clones: SmallVec::new(),
        };
        let device = self.device_of(m.vnc());
        let mut in_bindings: SmallVec<Binding<'_>> = SmallVec::new();
        let mut out_bindings: SmallVec<Binding<'_>> = SmallVec::new();
        for (usage, set, bindings) in [
            (TensorUsage::Input, inputs, &mut in_bindings),
            (TensorUsage::Output, outputs, &mut out_bindings),
        ] {
            for t in io.tensors(usage) {
                let Some(tensor) = set.find(&t.name) else {
                    continue;
                };
                let (buffer, offset) = match tensor.device_location() {
                    Some(loc) => loc,
                    None => {
                        let clone = self.driver.alloc_device(device, t.size).map_err(|e| {
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
                    name: &t.name,
                    buffer,
                    offset,
                    size: t.size,
                });
            }
        }
        let timeout = self.exec_config.timeout_secs.load(Ordering::Relaxed);
        let request = ExecRequest {
            subgraphs: m.staged(),
            inputs: in_bindings.as_slice(),
            outputs: out_bindings.as_slice(),
            timeout_secs: (timeout > 0).then_some(timeout),
        };
        self.log(
            Level::Trace,
            format_args!("execute model {id}: exec mode {}", res.mode as u32),
        );
        for _ in 0..repeat {
            self.driver.execute(&request).map_err(|e| {
                self.fail(Error::new(
                    e.status(),
                    format_args!("Execution of model {id} failed: {e}"),
                ))
            })?;
        }
        // Copy host outputs back from their clones.
        for b in out_bindings.as_slice() {
            let Some(tensor) = outputs.find(b.name) else {
                continue;
            };
            if tensor.is_host_resident() {
                self.copy_device_to_host(b.buffer, tensor)?;
            }
        }
        drop(res);
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

    /// The process-relative logical core a model is loaded on (`nrt_get_model_info`).
    pub fn model_vnc(&self, h: ModelHandle) -> Result<u32> {
        let m = self.model(h)?;
        Ok(m.vnc()
            .saturating_sub(self.exec_config.first_lnc.load(Ordering::Relaxed)))
    }
}
