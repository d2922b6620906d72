//! The driver handle of one "process" on a [`SimMachine`] ([`SimDriver`]), its error type
//! ([`SimError`]) and its [`Driver`] implementation: core reservation and bring-up when the
//! machine emulates a kernel driver, device memory in the engine's HBM, staging (a NEFF's
//! simulator program loaded on its physical core) and execution (the program run on the
//! engine with the model's I/O bound to the caller's device tensors; plumbing mode for a NEFF
//! without a program).

mod run;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use nrt_core::bitmap::CoreBitmap;
use nrt_core::driver::{
    Binding, CompatRange, CoreInitParams, DeviceBuffer, DeviceInfo, Driver, DriverError,
    DriverVersion, ErrorKind, ExecRequest, HwRevision, Platform, Reservation, ReserveRequest,
    SoftIncompatCallback, StagedModel, SubgraphImage,
};
use nrt_core::io::TensorUsage;
use nrt_core::topology;

use crate::engine;
use crate::instance::{DriverEmulation, Instance, SimConfig};
use crate::machine::{CoreState, SimDevice, SimMachine, StagedState};

/// Errors of the simulated driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    kind: ErrorKind,
    what: &'static str,
    detail: Option<String>,
}

impl SimError {
    const fn new(kind: ErrorKind, what: &'static str) -> Self {
        Self {
            kind,
            what,
            detail: None,
        }
    }

    fn with_detail(kind: ErrorKind, what: &'static str, detail: &nrt_core::Error) -> Self {
        Self {
            kind,
            what,
            detail: Some(detail.message().to_string()),
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulated driver: {}", self.what)?;
        if let Some(d) = &self.detail {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SimError {}

impl DriverError for SimError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }

    fn unsupported(operation: &'static str) -> Self {
        Self::new(ErrorKind::Unsupported, operation)
    }
}

/// A driver handle onto a [`SimMachine`] — what one process's open of the device would be.
/// Dropping it gives back everything the handle holds, as closing the device file does: its
/// staged models (their programs unloaded), its device memory and its core reservations.
#[derive(Debug)]
pub struct SimDriver {
    machine: Arc<SimMachine>,
    owner: u64,
    soft_incompat: Mutex<Option<SoftIncompatCallback>>,
}

impl SimDriver {
    /// A funtime driver on a fresh machine of `device_count` devices of `instance`.
    pub fn new(instance: Instance, device_count: u32) -> Self {
        Self::attach(&SimMachine::new(SimConfig::funtime(instance, device_count)))
    }

    /// A driver on a fresh machine with `config`.
    pub fn with_config(config: SimConfig) -> Self {
        Self::attach(&SimMachine::new(config))
    }

    /// A new driver handle (a new "process") on an existing machine.
    pub fn attach(machine: &Arc<SimMachine>) -> Self {
        Self {
            machine: Arc::clone(machine),
            owner: machine.next_owner.fetch_add(1, Ordering::Relaxed),
            soft_incompat: Mutex::new(None),
        }
    }

    /// The machine.
    pub fn machine(&self) -> &Arc<SimMachine> {
        &self.machine
    }

    /// This handle's owner id in the reservation table.
    pub fn owner(&self) -> u64 {
        self.owner
    }

    /// Physical cores this handle holds.
    pub fn reserved(&self) -> CoreBitmap {
        let mut b = CoreBitmap::new();
        for (i, c) in self.machine.lock().iter().enumerate() {
            if c.owner == Some(self.owner) {
                b.insert(i as u32);
            }
        }
        b
    }

    fn emulation(&self) -> Result<DriverEmulation, SimError> {
        self.machine.config.emulate_driver.ok_or(SimError::new(
            ErrorKind::Unsupported,
            "funtime mode has no kernel driver",
        ))
    }

    /// Runs `f` on the process's physical cores of `p`, which this handle must have reserved.
    fn with_own_cores(
        &self,
        p: &CoreInitParams,
        f: impl FnOnce(&mut [CoreState]) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        self.emulation()?;
        let range = p.topology.pnc_range();
        let range = range.start as usize..range.end as usize;
        let mut cores = self.machine.lock();
        let Some(slice) = cores.get_mut(range) else {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "cores out of range",
            ));
        };
        if slice.iter().any(|c| c.owner != Some(self.owner)) {
            return Err(SimError::new(
                ErrorKind::PermissionDenied,
                "cores not reserved",
            ));
        }
        f(slice)
    }

    /// Frees a core this handle owns, keeping its reset count.
    fn free_if_owned(&self, c: &mut CoreState) {
        if c.owner == Some(self.owner) {
            *c = CoreState {
                resets: c.resets,
                ..CoreState::default()
            };
        }
    }
}

impl Drop for SimDriver {
    fn drop(&mut self) {
        let mine: Vec<StagedState> = {
            let mut table = self.machine.staged_table();
            let keys: Vec<u64> = table
                .iter()
                .filter(|(_, m)| m.owner == self.owner)
                .map(|(k, _)| *k)
                .collect();
            keys.iter().filter_map(|k| table.remove(k)).collect()
        };
        for state in mine {
            if let Some(lp) = state.loaded {
                if let Some(dev) = self.machine.device(self.device_of_pnc(state.pnc)) {
                    let _ = dev.engine.unload(lp);
                }
            }
        }
        for dev in &self.machine.devices {
            let mut owners = dev.owners();
            let mine: Vec<u64> = owners
                .iter()
                .filter(|(_, o)| **o == self.owner)
                .map(|(a, _)| *a)
                .collect();
            for a in mine {
                owners.remove(&a);
                let _ = dev.engine.hbm().free(a);
            }
        }
        for c in self.machine.lock().iter_mut() {
            self.free_if_owned(c);
        }
    }
}

impl Driver for SimDriver {
    type Error = SimError;

    fn is_funtime(&self) -> bool {
        self.machine.config.emulate_driver.is_none()
    }

    fn register_soft_incompat_callback(&self, cb: SoftIncompatCallback) -> Result<(), SimError> {
        *self.soft_incompat.lock().unwrap_or_else(|p| p.into_inner()) = Some(cb);
        Ok(())
    }

    fn discover(&self) -> Result<DeviceInfo, SimError> {
        let c = &self.machine.config;
        if c.device_count == 0 {
            return Err(SimError::new(ErrorKind::NotFound, "no simulated devices"));
        }
        Ok(DeviceInfo {
            device_count: c.device_count,
            cores_per_device: c.instance.cores_per_device(),
            arch: c.instance.arch(),
            platform: Platform::Simulator,
        })
    }

    fn override_hw_revision(&self, _revision: HwRevision) -> Result<(), SimError> {
        // The simulator models one revision; the override changes nothing.
        Ok(())
    }

    fn driver_version(&self) -> Result<DriverVersion, SimError> {
        self.emulation()?.version.ok_or(SimError::new(
            ErrorKind::NotFound,
            "driver version unreadable",
        ))
    }

    fn compatible_version(&self) -> Result<CompatRange, SimError> {
        self.emulation()?.compat.ok_or(SimError::new(
            ErrorKind::Io,
            "compatible version unreadable",
        ))
    }

    /// The kernel driver's scan (`ncrwl_nc_range_mark`), ported step for step: from each free
    /// core it counts free cores up to `count`; a short run raises `max_nc_available` and the
    /// scan resumes two cores past where the run stopped (the driver sets `i = j + 1` and its
    /// loop adds one more), so a free core right after a busy one is never a run's start once
    /// a run has been cut there. `count` = 0 marks nothing and succeeds at the first free
    /// core. The range is checked against this machine's cores rather than the driver's 512.
    fn reserve_cores(&self, r: ReserveRequest) -> Result<Reservation, SimError> {
        self.emulation()?;
        let mut cores = self.machine.lock();
        let n = cores.len() as u64;
        let (count, start, end) = (u64::from(r.count), u64::from(r.start), u64::from(r.end));
        if start > end || end >= n {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "reservation range out of bounds",
            ));
        }
        let free = |c: &[CoreState], k: u64| c.get(k as usize).is_some_and(|c| c.owner.is_none());
        let mut max_range = 0u64;
        let mut i = start;
        while i <= end {
            if !free(&cores, i) {
                i += 1;
                continue;
            }
            let mut range_len = 1u64;
            let mut j = i;
            while j <= end && j < i + count {
                if !free(&cores, j) {
                    break;
                }
                range_len = j - i + 1;
                j += 1;
            }
            if range_len >= count {
                let mut b = CoreBitmap::new();
                let mut k = i;
                while k <= end && k < i + count {
                    if let Some(c) = cores.get_mut(k as usize) {
                        c.owner = Some(self.owner);
                    }
                    b.insert(k as u32);
                    k += 1;
                }
                return Ok(Reservation::Reserved(b));
            }
            max_range = max_range.max(range_len);
            // `i = j + 1;` then the for loop's `i++`.
            i = j + 2;
        }
        Ok(Reservation::Unavailable {
            available: max_range as u32,
        })
    }

    fn release_cores(&self, bitmap: &CoreBitmap) -> Result<(), SimError> {
        self.emulation()?;
        let mut cores = self.machine.lock();
        for i in bitmap.iter() {
            if let Some(c) = cores.get_mut(i as usize) {
                self.free_if_owned(c);
            }
        }
        Ok(())
    }

    fn init_cores(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            for c in cores {
                if p.reset_cores {
                    c.resets = c.resets.saturating_add(1);
                }
                c.initialized = true;
            }
            Ok(())
        })
    }

    fn start_exec_ready(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            if cores.iter().any(|c| !c.initialized) {
                return Err(SimError::new(
                    ErrorKind::InvalidArgument,
                    "cores not initialized",
                ));
            }
            for c in cores {
                c.exec_ready = true;
            }
            Ok(())
        })
    }

    fn shutdown_cores(&self, p: &CoreInitParams) -> Result<(), SimError> {
        self.with_own_cores(p, |cores| {
            for c in cores {
                c.initialized = false;
                c.exec_ready = false;
            }
            Ok(())
        })
    }

    fn stop_model(&self, model: StagedModel) -> Result<(), SimError> {
        let mut table = self.machine.staged_table();
        match table.get_mut(&model.handle) {
            Some(m) if m.owner == self.owner && m.lnc == model.lnc => {
                m.stopped = true;
                Ok(())
            }
            _ => Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such staged model",
            )),
        }
    }

    fn unstage_model(&self, model: StagedModel) -> Result<(), SimError> {
        let removed = {
            let mut table = self.machine.staged_table();
            match table.get(&model.handle) {
                // Unstaging frees the model whether or not its stop succeeded.
                Some(m) if m.owner == self.owner && m.lnc == model.lnc => {
                    table.remove(&model.handle)
                }
                _ => None,
            }
        };
        let Some(state) = removed else {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such staged model",
            ));
        };
        if let Some(lp) = state.loaded {
            let device = self.device_of_pnc(state.pnc);
            if let Some(dev) = self.machine.device(device) {
                dev.engine
                    .unload(lp)
                    .map_err(|e| SimError::with_detail(ErrorKind::Other, "unload failed", &e))?;
            }
        }
        Ok(())
    }

    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, SimError> {
        if image.pnc >= self.machine.config.total_cores() {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "no such physical core",
            ));
        }
        let loaded = match image.program {
            None if self.machine.config.refuse_plumbing => {
                return Err(SimError::new(
                    ErrorKind::Unsupported,
                    "this NEFF carries no simulator program and plumbing mode is disabled \
                     (NEURON_RT_SIM_PLUMBING=0)",
                ));
            }
            None => None,
            Some(bytes) => {
                let program = engine::Program::from_bytes(bytes).map_err(|e| {
                    SimError::with_detail(
                        ErrorKind::InvalidArgument,
                        "invalid simulator program",
                        &e,
                    )
                })?;
                let dev = self
                    .machine
                    .device(self.device_of_pnc(image.pnc))
                    .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
                let lp = dev
                    .engine
                    .load(self.locate_pnc(image.pnc).1, program)
                    .map_err(|e| {
                        let kind = if e.status() == nrt_core::NrtStatus::Resource {
                            ErrorKind::OutOfMemory
                        } else {
                            ErrorKind::InvalidArgument
                        };
                        SimError::with_detail(kind, "cannot load the simulator program", &e)
                    })?;
                Some(lp)
            }
        };
        let handle = self.machine.next_model.fetch_add(1, Ordering::Relaxed);
        let plumbing = loaded.is_none();
        // Each I/O index of the model → the program tensor of that name (by kind), once.
        let slots = |usage: TensorUsage, kind: engine::TensorKind| -> Vec<Option<usize>> {
            image
                .io
                .tensors(usage)
                .iter()
                .map(|t| {
                    let program = loaded.as_ref()?.program();
                    program
                        .tensors
                        .iter()
                        .position(|p| p.kind == kind && p.name == t.name)
                })
                .collect()
        };
        let input_slots = slots(TensorUsage::Input, engine::TensorKind::Input);
        let output_slots = slots(TensorUsage::Output, engine::TensorKind::Output);
        self.machine.staged_table().insert(
            handle,
            StagedState {
                owner: self.owner,
                lnc: image.lnc,
                pnc: image.pnc,
                stopped: false,
                loaded,
                input_slots,
                output_slots,
            },
        );
        Ok(StagedModel {
            lnc: image.lnc,
            handle,
            plumbing,
        })
    }

    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, SimError> {
        let dev = self
            .machine
            .device(device)
            .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))?;
        // The owners table is locked first, so no one sees the allocation without its owner.
        let mut owners = dev.owners();
        let addr = dev
            .engine
            .hbm()
            .alloc(size)
            .map_err(|_| SimError::new(ErrorKind::OutOfMemory, "device memory exhausted"))?;
        owners.insert(addr, self.owner);
        Ok(DeviceBuffer { device, addr, size })
    }

    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), SimError> {
        let dev = self.device_of_buffer(buffer)?;
        let mut owners = dev.owners();
        if owners.get(&buffer.addr) != Some(&self.owner) {
            return Err(not_ours());
        }
        owners.remove(&buffer.addr);
        dev.engine
            .hbm()
            .free(buffer.addr)
            .map_err(|_| SimError::new(ErrorKind::InvalidArgument, "not allocated"))
    }

    fn write_device(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), SimError> {
        let dev = self.own_buffer(b)?;
        let addr = range(b, offset, data.len() as u64)?;
        dev.hbm().write(addr, data).map_err(|_| out_of_range())
    }

    fn read_device(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<(), SimError> {
        let dev = self.own_buffer(b)?;
        let addr = range(b, offset, out.len() as u64)?;
        dev.hbm().read(addr, out).map_err(|_| out_of_range())
    }

    fn copy_device(
        &self,
        src: DeviceBuffer,
        src_offset: u64,
        dst: DeviceBuffer,
        dst_offset: u64,
        len: u64,
    ) -> Result<(), SimError> {
        let from = range(src, src_offset, len)?;
        let to = range(dst, dst_offset, len)?;
        // Chunked through a bounce buffer so buffers on different devices work too.
        let mut chunk = [0u8; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            let buf = chunk.get_mut(..n).unwrap_or(&mut []);
            self.own_buffer(src)?
                .hbm()
                .read(from + done, buf)
                .map_err(|_| out_of_range())?;
            self.own_buffer(dst)?
                .hbm()
                .write(to + done, buf)
                .map_err(|_| out_of_range())?;
            done += n as u64;
        }
        Ok(())
    }

    fn memset_device(
        &self,
        b: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), SimError> {
        let dev = self.own_buffer(b)?;
        let addr = range(b, offset, len)?;
        if value == 0 {
            // Zero pages read as zero: drop them instead of writing (no allocation).
            dev.hbm().zero_range(addr, len);
            return Ok(());
        }
        let chunk = [value; 4096];
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(chunk.len() as u64) as usize;
            dev.hbm()
                .write(addr + done, chunk.get(..n).unwrap_or(&[]))
                .map_err(|_| out_of_range())?;
            done += n as u64;
        }
        Ok(())
    }

    fn submit(&self, request: &ExecRequest<'_>) -> Result<(), SimError> {
        let mut plumbing = false;
        // Take what is needed out of the table: the programs run without it locked.
        // Empty until a subgraph has a program: a plumbing-mode execution allocates nothing.
        let mut runs = Vec::new();
        {
            let table = self.machine.staged_table();
            for s in request.subgraphs {
                match table.get(&s.handle) {
                    Some(m) if m.owner == self.owner && !m.stopped => match &m.loaded {
                        None => {
                            plumbing = true;
                            // Nothing runs on the core: an earlier report must not pass for
                            // this one.
                            self.machine.record_report(m.pnc, None);
                        }
                        Some(lp) => runs.push((m.pnc, lp.clone(), self.bind(m, lp, request)?)),
                    },
                    _ => {
                        return Err(SimError::new(
                            ErrorKind::InvalidArgument,
                            "model not staged",
                        ));
                    }
                }
            }
        }
        let one_device = runs
            .windows(2)
            .all(|w| self.device_of_pnc(w[0].0) == self.device_of_pnc(w[1].0));
        if runs.len() > 1 && one_device {
            // The subgraphs of one model (an LNC-2 logical core's physical cores) run
            // together, in lock step.
            self.run_group(&runs, request)?;
        } else {
            for (pnc, lp, bound) in &runs {
                self.run_program(*pnc, lp, bound, request)?;
            }
        }
        if plumbing {
            // Plumbing mode (no program): outputs are zero-filled, inputs are not read.
            for o in request.outputs {
                self.memset_device(o.buffer, o.offset, 0, o.size)?;
            }
        }
        self.machine.executions.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl SimDriver {
    /// Physical core `pnc` as (device, core within the device).
    fn locate_pnc(&self, pnc: u32) -> (u32, u32) {
        topology::locate_pnc(pnc, self.machine.config.instance.cores_per_device())
    }

    fn device_of_pnc(&self, pnc: u32) -> u32 {
        self.locate_pnc(pnc).0
    }

    /// The program tensors `request` binds, with the HBM address of each: every binding whose
    /// I/O index maps to a tensor of this subgraph's program (the map was built at stage time).
    fn bind(
        &self,
        staged: &StagedState,
        lp: &engine::LoadedProgram,
        request: &ExecRequest<'_>,
    ) -> Result<Vec<(usize, u64)>, SimError> {
        let device = self.device_of_pnc(staged.pnc);
        let mut bound = Vec::with_capacity(request.inputs.len() + request.outputs.len());
        for (slots, bindings) in [
            (&staged.input_slots, request.inputs),
            (&staged.output_slots, request.outputs),
        ] {
            for b in bindings {
                let Some(&Some(i)) = slots.get(b.index as usize) else {
                    continue;
                };
                bound.push((i, self.bound_address(lp, i, b, device)?));
            }
        }
        Ok(bound)
    }

    /// The address of binding `b` of program tensor `i`, checked against the device and the
    /// program's size for the tensor.
    fn bound_address(
        &self,
        lp: &engine::LoadedProgram,
        i: usize,
        b: &Binding,
        device: u32,
    ) -> Result<u64, SimError> {
        if b.buffer.device != device {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "tensor on another device than the model",
            ));
        }
        let size = lp.program().tensors.get(i).and_then(|t| t.size_bytes());
        if Some(b.size) != size {
            return Err(SimError::new(
                ErrorKind::InvalidArgument,
                "tensor size differs from the program's",
            ));
        }
        range(b.buffer, b.offset, b.size)
    }
}

fn out_of_range() -> SimError {
    SimError::new(
        ErrorKind::InvalidArgument,
        "device memory access out of range",
    )
}

/// The device address of `[offset, offset + len)` of `b`, checked against the buffer.
fn range(b: DeviceBuffer, offset: u64, len: u64) -> Result<u64, SimError> {
    match offset.checked_add(len) {
        Some(end) if end <= b.size => Ok(b.addr + offset),
        _ => Err(out_of_range()),
    }
}

impl SimDriver {
    /// The device `b` lies on.
    fn device_of_buffer(&self, b: DeviceBuffer) -> Result<&SimDevice, SimError> {
        self.machine
            .device(b.device)
            .ok_or(SimError::new(ErrorKind::InvalidArgument, "no such device"))
    }

    /// The engine device of `b`, if `b` is an allocation of this handle. The owners table is
    /// not held afterwards: a buffer freed by another thread of the same process while it is
    /// read or written gives an out-of-range error, as freed memory does.
    fn own_buffer(&self, b: DeviceBuffer) -> Result<&engine::Device, SimError> {
        let dev = self.device_of_buffer(b)?;
        if dev.owners().get(&b.addr) != Some(&self.owner) {
            return Err(not_ours());
        }
        Ok(&dev.engine)
    }
}

fn not_ours() -> SimError {
    SimError::new(
        ErrorKind::InvalidArgument,
        "not an allocation of this process",
    )
}
