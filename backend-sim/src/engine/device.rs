//! A simulated device: sparse HBM shared by its cores, per-core SBUF/PSUM, program loading,
//! I/O by tensor name and execution.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nrt_core::{Error, err};

use super::exec::{ExecEnv, ExecOptions, ExecReport, HbmWrites, run_program};
use super::memory::{DMA_ENGINES, Hbm, OnChip};
use super::program::{LoopPlan, Program, TensorKind};
use super::share::{CoreLink, HbmBoard, Lockstep};
use super::spec::{CoreSpec, MAX_SBUF_PARTITION_BYTES};
use crate::Instance;

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// Program runs started in this process, on every device.
static PROGRAM_RUNS: AtomicU64 = AtomicU64::new(0);

/// How many program runs the engine has started in this process, on every [`Device`] (each
/// `Device::execute`, `execute_bound` or `run` is one). A diagnostic: it tells how many times
/// a front end entered the engine.
pub fn program_runs() -> u64 {
    PROGRAM_RUNS.load(Ordering::Relaxed)
}

struct CoreMem {
    sbuf: OnChip,
    psum: OnChip,
}

/// A physical core's memories (`None` until its first execution).
type CoreSlot = Mutex<Option<CoreMem>>;

/// One simulated Neuron device (chip): HBM with the instance's capacity and its physical cores.
///
/// Shared by the threads driving its cores: every method takes `&self`. An execution locks
/// only its own core's memories (SBUF, PSUM) and copies through the device's HBM, which is
/// synchronised page by page ([`Hbm`]), so executions on different cores run at the same time
/// on different host threads. Two executions on one core take turns.
pub struct Device {
    id: u64,
    instance: Instance,
    hbm: Hbm,
    cores: Vec<CoreSlot>,
    next_load: AtomicU64,
    /// The figures its cores run with: the instance's generation, or a study's variant
    /// ([`Device::with_hbm_mbps`]).
    spec: CoreSpec,
    /// How the executing cores share the HBM bandwidth.
    board: HbmBoard,
}

/// One of a core's memories, borrowed from a [`Device`] ([`Device::sbuf`], [`Device::psum`]):
/// the core is locked while it is held.
pub struct CoreMemRef<'d> {
    guard: MutexGuard<'d, Option<CoreMem>>,
    psum: bool,
}

impl core::fmt::Debug for CoreMemRef<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

impl core::ops::Deref for CoreMemRef<'_> {
    type Target = OnChip;
    fn deref(&self) -> &OnChip {
        // Built only over a core that has its memories; they are never taken away.
        match (&*self.guard, self.psum) {
            (Some(c), false) => &c.sbuf,
            (Some(c), true) => &c.psum,
            (None, _) => OnChip::empty(),
        }
    }
}

impl core::fmt::Debug for Device {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("instance", &self.instance)
            .field("cores", &self.cores.len())
            .field("hbm", &self.hbm)
            .finish()
    }
}

/// Output tensors by name, in program order.
pub type Outputs = Vec<(String, Vec<u8>)>;

/// A program placed on one core of a [`Device`]: its tensors are allocated in HBM.
#[derive(Clone, Debug)]
pub struct LoadedProgram {
    device: u64,
    serial: u64,
    core: u32,
    program: Arc<Program>,
    /// The executor's plan when the program has loops.
    plan: Option<Arc<LoopPlan>>,
    /// The HBM ranges the program can write (the hazard detector's filter), per tensor.
    hbm_writes: Arc<HbmWrites>,
    bases: Vec<u64>,
    /// Tensor addresses at which an execution ran to completion without a hazard (the most
    /// recent [`CLEAN_BASES`]), shared by the clones of this load: an execution at one of
    /// them skips the hazard check unless `ExecOptions::recheck_hazards` is set.
    clean: Arc<Mutex<Vec<Vec<u64>>>>,
}

/// How many sets of tensor addresses a loaded program remembers as hazard-free.
const CLEAN_BASES: usize = 8;

impl LoadedProgram {
    /// The program.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The physical core it runs on.
    pub fn core(&self) -> u32 {
        self.core
    }

    /// HBM address of tensor `index`.
    pub fn tensor_address(&self, index: usize) -> Option<u64> {
        self.bases.get(index).copied()
    }
}

impl Device {
    /// A device of `instance` with its full HBM capacity.
    pub fn new(instance: Instance) -> Self {
        Self::with_hbm_capacity(instance, instance.hbm_bytes_per_device())
    }

    /// A device with a chosen HBM capacity (for tests of capacity limits).
    pub fn with_hbm_capacity(instance: Instance, hbm_bytes: u64) -> Self {
        Self::build(instance, hbm_bytes, *instance.core_spec())
    }

    /// A device of `instance` whose HBM bandwidth is `hbm_mbps` MB/s instead of its
    /// generation's published figure, for studies of contention (a trn2 device's published
    /// 3 TB/s covers all its cores' DMA engines, so they never contend there: docs/SIM_ISA.md,
    /// "HBM shared by the cores"). As [`Device::with_core_spec`] with that one figure changed.
    pub fn with_hbm_mbps(instance: Instance, hbm_mbps: u64) -> Result<Self, Error> {
        Self::with_core_spec(
            instance,
            CoreSpec {
                hbm_mbps_per_device: hbm_mbps,
                ..*instance.core_spec()
            },
        )
    }

    /// A device of `instance` whose cores run with `spec`'s figures instead of their
    /// generation's: for studies of hardware that differs from the published figures (every
    /// report then still names the timing model, and the figures are the caller's).
    /// `NRT_INVALID` unless every rate is a whole number of 200 MB/s steps from 200 MB/s to
    /// 100 TB/s (the DMA arithmetic is exact integers), every clock is 1–100,000 MHz, the SBUF
    /// partition is 1 byte to the largest generation's, and every DMA or DGE cost is at most
    /// 10^9 ticks.
    pub fn with_core_spec(instance: Instance, spec: CoreSpec) -> Result<Self, Error> {
        for (what, mbps) in [
            ("HBM bandwidth", spec.hbm_mbps_per_device),
            ("DMA engine rate", spec.dma_engine_mbps),
        ] {
            if mbps == 0 || mbps % 200 != 0 || mbps > 100_000_000 {
                return Err(err!(
                    Invalid,
                    "{what} {mbps} MB/s: must be a multiple of 200 MB/s from 200 to 100,000,000"
                ));
            }
        }
        for (what, mhz) in [
            ("TensorE", spec.tensor_mhz),
            ("VectorE", spec.vector_mhz),
            ("ScalarE", spec.scalar_mhz),
            ("GpSimdE", spec.gpsimd_mhz),
        ] {
            if !(1..=100_000).contains(&mhz) {
                return Err(err!(
                    Invalid,
                    "{what} clock {mhz} MHz: must be 1 to 100,000"
                ));
            }
        }
        if !(1..=MAX_SBUF_PARTITION_BYTES).contains(&spec.sbuf_partition_bytes) {
            return Err(err!(
                Invalid,
                "SBUF partition of {} bytes: must be 1 to {MAX_SBUF_PARTITION_BYTES}",
                spec.sbuf_partition_bytes
            ));
        }
        for (what, ticks) in [
            ("DMA descriptor cost", spec.dma_descriptor_ticks),
            ("DMA transfer cost", spec.dma_transfer_ticks),
            ("DMA trigger latency", spec.dma_trigger_latency_ticks),
            ("DMA queue interval", spec.dma_queue_interval_ticks),
            ("DGE time", spec.dge_ticks_per_128_descriptors),
        ] {
            if ticks > 1_000_000_000 {
                return Err(err!(
                    Invalid,
                    "{what} {ticks} ticks: must be at most 1,000,000,000"
                ));
            }
        }
        Ok(Self::build(instance, instance.hbm_bytes_per_device(), spec))
    }

    fn build(instance: Instance, hbm_bytes: u64, spec: CoreSpec) -> Self {
        let engines = u64::from(instance.cores_per_device()) * DMA_ENGINES as u64;
        let binds = engines.saturating_mul(spec.engine_rate()) > spec.hbm_rate();
        Self {
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            instance,
            hbm: Hbm::new(hbm_bytes),
            cores: (0..instance.cores_per_device())
                .map(|_| Mutex::new(None))
                .collect(),
            next_load: AtomicU64::new(1),
            spec,
            board: HbmBoard::new(instance.cores_per_device(), binds),
        }
    }

    /// `count` devices of `instance`: a machine.
    pub fn machine(instance: Instance, count: u32) -> Vec<Device> {
        (0..count).map(|_| Device::new(instance)).collect()
    }

    /// The instance family.
    pub fn instance(&self) -> Instance {
        self.instance
    }

    /// The figures its cores run with (the instance's generation unless a study changed one).
    pub fn core_spec(&self) -> &CoreSpec {
        &self.spec
    }

    /// Physical cores.
    pub fn core_count(&self) -> u32 {
        self.cores.len() as u32
    }

    /// The device's HBM.
    pub fn hbm(&self) -> &Hbm {
        &self.hbm
    }

    /// The SBUF of physical core `core` as the last execution left it (`None` before the
    /// core's first execution).
    pub fn sbuf(&self, core: u32) -> Option<CoreMemRef<'_>> {
        self.core_mem(core, false)
    }

    /// The PSUM of physical core `core` as the last execution left it.
    pub fn psum(&self, core: u32) -> Option<CoreMemRef<'_>> {
        self.core_mem(core, true)
    }

    fn core_mem(&self, core: u32, psum: bool) -> Option<CoreMemRef<'_>> {
        let guard = lock(self.cores.get(core as usize)?);
        guard.is_some().then_some(CoreMemRef { guard, psum })
    }

    /// Validates `program` and places it on physical core `core`: allocates every tensor
    /// (beyond capacity: `NRT_RESOURCE`, nothing kept) and writes the constants.
    pub fn load(&self, core: u32, program: Program) -> Result<LoadedProgram, Error> {
        if core >= self.core_count() {
            return Err(err!(
                Invalid,
                "core {core} does not exist ({} cores per {} device)",
                self.core_count(),
                self.instance.name()
            ));
        }
        program.validate()?;
        let spec = &self.spec;
        let extent = program.sbuf_extent();
        if extent > spec.sbuf_partition_bytes as u64 {
            return Err(err!(
                Invalid,
                "program '{}' uses SBUF bytes up to {extent} of each partition; a {} partition \
                 has {} ({} device)",
                program.name,
                spec.name,
                spec.sbuf_partition_bytes,
                self.instance.name()
            ));
        }
        let mut bases = Vec::with_capacity(program.tensors.len());
        for t in &program.tensors {
            let size = t.size_bytes().unwrap_or(u64::MAX);
            match self.hbm.alloc(size) {
                Ok(a) => bases.push(a),
                Err(e) => {
                    for &b in &bases {
                        let _ = self.hbm.free(b);
                    }
                    return Err(err!(
                        Resource,
                        "loading '{}': tensor '{}': {}",
                        program.name,
                        t.name,
                        e.message()
                    ));
                }
            }
        }
        for (t, &b) in program.tensors.iter().zip(&bases) {
            if t.kind == TensorKind::Const {
                self.hbm.write_unchecked(b, &t.data);
            }
        }
        let serial = self.next_load.fetch_add(1, Ordering::Relaxed);
        let plan = program.loop_plan().map(Arc::new);
        Ok(LoadedProgram {
            device: self.id,
            serial,
            core,
            hbm_writes: Arc::new(HbmWrites::of(&program, plan.as_deref())),
            plan,
            program: Arc::new(program),
            bases,
            clean: Arc::default(),
        })
    }

    fn check_owner(&self, lp: &LoadedProgram) -> Result<(), Error> {
        if lp.device != self.id {
            return Err(err!(
                InvalidHandle,
                "program {} was loaded on another device",
                lp.serial
            ));
        }
        Ok(())
    }

    /// Frees the program's tensors.
    pub fn unload(&self, lp: LoadedProgram) -> Result<(), Error> {
        self.check_owner(&lp)?;
        for &b in &lp.bases {
            self.hbm.free(b)?;
        }
        Ok(())
    }

    fn tensor<'p>(
        lp: &'p LoadedProgram,
        name: &str,
    ) -> Result<(usize, &'p super::program::TensorDecl), Error> {
        lp.program
            .tensors
            .iter()
            .enumerate()
            .find(|(_, t)| t.name == name)
            .ok_or_else(|| err!(Invalid, "no tensor named '{name}' in '{}'", lp.program.name))
    }

    /// Writes a tensor's bytes (its exact size, `NRT_INVALID` otherwise).
    pub fn write_tensor(&self, lp: &LoadedProgram, name: &str, data: &[u8]) -> Result<(), Error> {
        self.check_owner(lp)?;
        let (i, t) = Self::tensor(lp, name)?;
        let size = t.size_bytes().unwrap_or(0);
        if data.len() as u64 != size {
            return Err(err!(
                Invalid,
                "tensor '{name}' is {size} bytes, {} given",
                data.len()
            ));
        }
        let base = lp.bases.get(i).copied().unwrap_or(0);
        self.hbm.write(base, data)
    }

    /// Reads a tensor's bytes.
    pub fn read_tensor(&self, lp: &LoadedProgram, name: &str) -> Result<Vec<u8>, Error> {
        self.check_owner(lp)?;
        let (i, t) = Self::tensor(lp, name)?;
        let size = usize::try_from(t.size_bytes().unwrap_or(0))
            .map_err(|_| err!(Resource, "tensor '{name}' is too large to read at once"))?;
        let mut out = vec![0u8; size];
        let base = lp.bases.get(i).copied().unwrap_or(0);
        self.hbm.read(base, &mut out)?;
        Ok(out)
    }

    /// Executes a loaded program on its core. Before it starts, the core's SBUF and PSUM and
    /// the program's output and scratch tensors are zeroed, so the result depends only on the
    /// program and its inputs.
    pub fn execute(&self, lp: &LoadedProgram, opts: &ExecOptions) -> Result<ExecReport, Error> {
        self.execute_bound(lp, &[], opts)
    }

    /// Executes a loaded program with some of its tensors bound to other HBM addresses of this
    /// device (`bound`: tensor index → address): how a runtime runs a model on the caller's
    /// device tensors without copying them. Bound tensors must lie inside allocations of this
    /// device's HBM; bound outputs are zeroed before the run like the program's own.
    ///
    /// Executions on different cores run at the same time (from different host threads) and
    /// share the device's HBM bandwidth (`engine::share`); two on one core take turns.
    pub fn execute_bound(
        &self,
        lp: &LoadedProgram,
        bound: &[(usize, u64)],
        opts: &ExecOptions,
    ) -> Result<ExecReport, Error> {
        let bases = self.bases(lp, bound)?;
        self.zero_outputs(lp, &bases);
        let mut slot = self.lock_core(lp.core)?;
        Ok(self.run_on(&mut slot, lp, &bases, opts, None))
    }

    /// Executes several loaded programs together, each on its own core of this device, as the
    /// subgraphs of one model (the physical cores of an LNC-2 logical core): every output is
    /// zeroed first, then the programs start at the same tick on their own host threads and
    /// run in lock step, sharing the device's HBM bandwidth deterministically
    /// (`engine::share`). `runs`: each program with its bound tensors, as
    /// [`Device::execute_bound`] takes them. Two programs on one core: `NRT_INVALID`. The
    /// reports come back in the order of `runs`.
    pub fn execute_group(
        &self,
        runs: &[(&LoadedProgram, &[(usize, u64)])],
        opts: &ExecOptions,
    ) -> Result<Vec<ExecReport>, Error> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let mut cores: Vec<u32> = runs.iter().map(|(lp, _)| lp.core).collect();
        cores.sort_unstable();
        if cores.windows(2).any(|w| w[0] == w[1]) {
            return Err(err!(
                Invalid,
                "a group of programs runs each on its own core; cores {cores:?} repeat one"
            ));
        }
        let bases = runs
            .iter()
            .map(|(lp, bound)| self.bases(lp, bound))
            .collect::<Result<Vec<_>, Error>>()?;
        for ((lp, _), b) in runs.iter().zip(&bases) {
            self.zero_outputs(lp, b);
        }
        if let [(lp, _)] = runs {
            let mut slot = self.lock_core(lp.core)?;
            return Ok(vec![self.run_on(&mut slot, lp, &bases[0], opts, None)]);
        }
        // Every core is locked before any program starts, in core order, so two groups (or a
        // group and a single execution) never hold one core each while waiting for the other.
        let mut locked = Vec::with_capacity(runs.len());
        for &c in &cores {
            locked.push((c, self.lock_core(c)?));
        }
        let mut mask = 0u64;
        for &c in &cores {
            mask |= 1u64.checked_shl(c).unwrap_or(0);
        }
        let group = Lockstep::new(runs.len());
        // Each run's core memories, borrowed from the guards this thread keeps.
        let mut mems: Vec<Option<&mut Option<CoreMem>>> = runs.iter().map(|_| None).collect();
        for (c, guard) in &mut locked {
            if let Some(i) = runs.iter().position(|(lp, _)| lp.core == *c) {
                mems[i] = Some(&mut **guard);
            }
        }
        std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(runs.len());
            for (i, ((lp, _), mem)) in runs.iter().zip(mems.iter_mut()).enumerate().skip(1) {
                let (bases, group) = (&bases[i], &group);
                let Some(slot) = mem.take() else {
                    group.leave(i);
                    handles.push(Err(err!(Invalid, "core {} is not locked", lp.core)));
                    continue;
                };
                #[cfg(test)]
                let hooks = super::exec::test_hooks::Inherited::take();
                let spawned = std::thread::Builder::new()
                    .name(format!("nrt-sim-core{}", lp.core))
                    .spawn_scoped(s, move || {
                        #[cfg(test)]
                        hooks.apply();
                        self.run_on(slot, lp, bases, opts, Some((group, i, mask)))
                    });
                handles.push(spawned.map_err(|e| {
                    group.leave(i);
                    err!(
                        Resource,
                        "cannot start a host thread for core {}: {e}",
                        lp.core
                    )
                }));
            }
            let first = match (runs.first(), mems.first_mut().and_then(Option::take)) {
                (Some((lp, _)), Some(slot)) => {
                    Ok(self.run_on(slot, lp, &bases[0], opts, Some((&group, 0, mask))))
                }
                _ => {
                    group.leave(0);
                    Err(err!(Invalid, "the group's first core is not locked"))
                }
            };
            let mut reports = vec![first];
            for h in handles {
                reports.push(h.and_then(|h| {
                    h.join()
                        .map_err(|_| err!(Failure, "a core's simulation thread panicked"))
                }));
            }
            reports.into_iter().collect()
        })
    }

    /// The address of each of `lp`'s tensors, with `bound` applied (checked: each bound
    /// tensor lies inside an allocation of this device).
    fn bases(&self, lp: &LoadedProgram, bound: &[(usize, u64)]) -> Result<Vec<u64>, Error> {
        self.check_owner(lp)?;
        let mut bases = lp.bases.clone();
        for &(i, addr) in bound {
            let (Some(slot), Some(t)) = (bases.get_mut(i), lp.program.tensors.get(i)) else {
                return Err(err!(Invalid, "no tensor {i} in '{}'", lp.program.name));
            };
            let size = t.size_bytes().unwrap_or(u64::MAX);
            if !self.hbm.is_allocated(addr, size) {
                return Err(err!(
                    Invalid,
                    "tensor '{}' ({size} bytes) bound to {addr:#x}, outside any allocation",
                    t.name
                ));
            }
            *slot = addr;
        }
        Ok(bases)
    }

    /// Zeroes `lp`'s output and scratch tensors at `bases`.
    fn zero_outputs(&self, lp: &LoadedProgram, bases: &[u64]) {
        for (t, &b) in lp.program.tensors.iter().zip(bases) {
            if matches!(t.kind, TensorKind::Output | TensorKind::Scratch) {
                self.hbm.zero_range(b, t.size_bytes().unwrap_or(0));
            }
        }
    }

    /// Physical core `core`'s memories, locked.
    fn lock_core(&self, core: u32) -> Result<MutexGuard<'_, Option<CoreMem>>, Error> {
        Ok(lock(self.cores.get(core as usize).ok_or_else(|| {
            err!(Invalid, "core {core} does not exist")
        })?))
    }

    /// Runs `lp` with its tensors at `bases` (outputs already zeroed) on its core, whose
    /// memories `slot` holds locked: clears the core's SBUF and PSUM, then executes, sharing
    /// HBM with the device's other cores (`group`: the lock-step group, this member's index in
    /// it, and the group's cores).
    fn run_on(
        &self,
        slot: &mut Option<CoreMem>,
        lp: &LoadedProgram,
        bases: &[u64],
        opts: &ExecOptions,
        group: Option<(&Lockstep, usize, u64)>,
    ) -> ExecReport {
        // Out of the group however this ends (the executor itself leaves as it finishes).
        let _member = group.map(|(g, me, _)| g.member(me));
        let spec = &self.spec;
        let core = slot.get_or_insert_with(|| CoreMem {
            sbuf: OnChip::sbuf_of(spec),
            psum: OnChip::psum(),
        });
        core.sbuf.clear();
        core.psum.clear();
        PROGRAM_RUNS.fetch_add(1, Ordering::Relaxed);
        // A poisoned lock only means a panic elsewhere; the list itself is always whole.
        let clean = || lp.clean.lock().unwrap_or_else(|e| e.into_inner());
        let check_hazards = opts.recheck_hazards || !clean().iter().any(|b| b == bases);
        let _entry = self.board.enter(lp.core);
        let mut env = ExecEnv {
            program: &lp.program,
            plan: lp.plan.as_deref(),
            bases,
            hbm_writes: &lp.hbm_writes,
            hbm: &self.hbm,
            sbuf: &mut core.sbuf,
            psum: &mut core.psum,
            check_hazards,
            spec,
            link: Some(CoreLink {
                board: &self.board,
                core: lp.core,
                group,
            }),
        };
        let report = run_program(&mut env, opts);
        // Only a complete run proves the schedule clean: a timeout or a stopped instance
        // leaves part of it unchecked.
        if check_hazards && report.error.is_none() && report.hazards.is_empty() {
            let mut list = clean();
            if !list.iter().any(|b| b == bases) {
                if list.len() == CLEAN_BASES {
                    list.remove(0);
                }
                list.push(bases.to_vec());
            }
        }
        report
    }

    /// Writes `inputs` by name, executes, and returns every output tensor by name with the
    /// report; an execution error (hazard, timeout) is returned as the error.
    pub fn run(
        &self,
        lp: &LoadedProgram,
        inputs: &[(&str, &[u8])],
        opts: &ExecOptions,
    ) -> Result<(Outputs, ExecReport), Error> {
        for (name, data) in inputs {
            self.write_tensor(lp, name, data)?;
        }
        let report = self.execute(lp, opts)?;
        report.result()?;
        let mut outs = Vec::new();
        for t in &lp.program.tensors {
            if t.kind == TensorKind::Output {
                outs.push((t.name.clone(), self.read_tensor(lp, &t.name)?));
            }
        }
        Ok((outs, report))
    }
}

/// Locks `m`, taking over a poisoned lock: a core's memories are cleared before each run.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
