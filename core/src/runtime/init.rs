//! `init` and `close`: libnrt 2.31 `nrt_init` step by step (see `docs/ARCHITECTURE.md`) and its
//! inverse. Every failure after a resource was taken gives it back, so a failed `init` leaves
//! the runtime in START with nothing reserved and a corrected retry succeeds.

use core::sync::atomic::Ordering;

use super::{FrameworkInfo, FrameworkType, Runtime, Session, encode_level};
use crate::bitmap::CoreBitmap;
use crate::config::{Config, VarSource};
use crate::driver::{
    CoreInitParams, DeviceInfo, Driver, DriverError, HwRevision, Platform, Reservation,
};
use crate::error::{Error, Result};
use crate::fmt::Level;
use crate::host::{Host, Platform as _};
use crate::state::InitState;
use crate::topology::{self, Allocation};
use crate::version::{GIT_HASH, IMPLEMENTATION, RT_VERSION};

/// First of the two troubleshooting links printed when no device is found.
pub const TROUBLESHOOT_URL: &str =
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrt-troubleshoot.html";
/// Second troubleshooting link.
pub const SETUP_URL: &str =
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/setup/index.html";

/// Packages named when the runtime is older than the driver accepts.
pub const RUNTIME_PACKAGES: &str = "aws-neuronx-runtime-lib and aws-neuronx-collectives";
/// Package named when the driver is older than the runtime needs.
pub const DRIVER_PACKAGE: &str = "aws-neuronx-dkms";

fn soft_incompat_warning(msg: &str) {
    crate::fmt::forward(
        Level::Warning,
        format_args!("Neuron driver soft incompatibility: {msg}"),
    );
}

fn truncated<const N: usize>(s: &str) -> heapless::String<N> {
    let mut cut = s.len().min(N);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = heapless::String::new();
    let _ = out.push_str(s.get(..cut).unwrap_or(""));
    out
}

impl<D: Driver, H: Host> Runtime<D, H> {
    /// `nrt_init`: brings the runtime from START to INIT. Idempotent while INIT.
    ///
    /// `vars` supplies the `NEURON_RT_*` configuration (the process environment on a std host).
    pub fn init(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<()> {
        self.observe_fork();
        // (0) Idempotent fast path.
        if self.state.get() == InitState::Init {
            self.log(
                Level::Debug,
                format_args!("API:IN: nrt_init (already initialized)"),
            );
            self.log(Level::Debug, format_args!("API:OUT: (ret=0)"));
            return Ok(());
        }
        let r = self.init_slow(framework, fw_version, fal_version, vars);
        let code = r.as_ref().err().map_or(0, |e| e.status().code());
        self.log(Level::Debug, format_args!("API:OUT: (ret={code})"));
        r
    }

    /// The init guard: only START may proceed. Returns `Ok(true)` when another `init` finished
    /// first (the idempotent case).
    fn init_state_guard(&self) -> Result<bool> {
        match self.state.get() {
            InitState::Start => Ok(false),
            InitState::Init => Ok(true),
            InitState::Closed => {
                let e = err!(Closed, "NRT already closed");
                self.log(Level::Warning, format_args!("{}", e.message()));
                Err(e.mark_logged())
            }
            s => Err(self.fail(err!(Failure, "Incompatible runtime state: {}", s.name()))),
        }
    }

    fn init_slow(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<()> {
        // (1) Soft-incompatibility callback.
        if self
            .driver
            .register_soft_incompat_callback(soft_incompat_warning)
            .is_err()
        {
            return Err(self.fail(err!(
                Invalid,
                "Failed to register nrt_soft_incompat_callback"
            )));
        }
        // (2) State guard, before waiting for the lifecycle lock (so an init racing a close
        // sees CLOSED), and again under it (so two racing inits bring the runtime up once).
        if self.init_state_guard()? {
            return Ok(());
        }
        let mut session = self.session.lock();
        if self.init_state_guard()? {
            return Ok(());
        }
        let s = self.bring_up(framework, fw_version, fal_version, vars)?;
        self.published.publish(s.core_params.topology, &s.config);
        #[cfg(feature = "alloc")]
        {
            *self.async_state.lock() = Some(super::queues::AsyncState::new(
                s.core_params.topology,
                s.config.async_exec_max_inflight,
            ));
        }
        *session = Some(s);
        self.set_state(InitState::Init);
        Ok(())
    }

    /// Steps (3)-(9) of `init`, run under the lifecycle lock.
    fn bring_up(
        &self,
        framework: FrameworkType,
        fw_version: &str,
        fal_version: &str,
        vars: &dyn VarSource,
    ) -> Result<Session> {
        // (3) Device discovery.
        let device = match self.driver.discover() {
            Ok(d) if d.arch.is_supported() && d.device_count > 0 && d.cores_per_device > 0 => d,
            _ => {
                return Err(self.fail(err!(
                    Invalid,
                    "Cannot find Neuron devices. Please make sure the Neuron driver \
                     (aws-neuronx-dkms) is installed and loaded, and that this is an inf2 or trn1 \
                     instance. Troubleshooting: {} Setup: {}",
                    TROUBLESHOOT_URL,
                    SETUP_URL
                )));
            }
        };

        // (4) Configuration.
        let config = Config::parse(vars).map_err(|e| self.fail(e))?;
        self.log_level
            .store(encode_level(config.log_level), Ordering::Relaxed);

        // (5) Hardware-revision override off real hardware.
        if device.platform != Platform::Hardware {
            if let Err(e) = self.driver.override_hw_revision(HwRevision::A) {
                self.log(
                    Level::Warning,
                    format_args!("Failed to override hw revision: {e}"),
                );
            }
        }

        // (6) Configuration copy, with the DMA packet-size clamp.
        if config.dbg_cc_dma_packet_size_ignored > 0 {
            self.log(
                Level::Warning,
                format_args!(
                    "NEURON_RT_DBG_CC_DMA_PACKET_SIZE has more items than the maximum of {} \
                     (4 streams x 4 architectures), ignoring extra {} item(s)",
                    crate::config::MAX_DMA_PACKET_SIZES,
                    config.dbg_cc_dma_packet_size_ignored
                ),
            );
        }
        self.log(
            Level::Info,
            format_args!("Neuron Runtime {RT_VERSION} ({IMPLEMENTATION}, git {GIT_HASH})"),
        );

        // (7) Driver compatibility, skipped in funtime.
        let funtime = self.driver.is_funtime();
        if !funtime {
            self.negotiate_driver(&device)?;
        }

        // (8) Logical-core allocation.
        let allocation = self.allocate_cores(&device, &config, funtime)?;

        // (9) Subsystems, in order; undo the reservation on any failure.
        let core_params = CoreInitParams {
            topology: allocation.topology,
            reset_cores: config.reset_cores,
            implicit_async: config.implicit_async(),
            async_max_inflight: config.async_exec_max_inflight,
        };
        let framework = FrameworkInfo {
            kind: framework,
            version: truncated(fw_version),
            fal_version: truncated(fal_version),
        };
        if let Err(e) = self.start_subsystems(&core_params, funtime) {
            self.release_allocation(&allocation);
            return Err(e);
        }
        Ok(Session {
            config,
            device,
            allocation,
            core_params,
            framework,
        })
    }

    /// Step (7): driver version and the compatibility-id range test.
    fn negotiate_driver(&self, device: &DeviceInfo) -> Result<()> {
        let version = self.driver.driver_version().map_err(|e| {
            self.fail(err!(
                Invalid,
                "Unable to determine Neuron Driver version ({e}). Please check that the \
                 aws-neuronx-dkms package is installed."
            ))
        })?;
        self.log(
            Level::Info,
            format_args!("Found neuron driver: {}.{}", version.major, version.minor),
        );
        if version.major <= 1 {
            return Err(self.fail(err!(
                Invalid,
                "Neuron Runtime 2.x requires Neuron driver(aws-neuron-dkms) version 2.1 or above."
            )));
        }
        let (vtpb, v25) = device.arch.compat_ids();
        let range = self.driver.compatible_version().map_err(|e| {
            self.fail(err!(
                Invalid,
                "Unable to read compatible Driver version ({e}). Please update the \
                 aws-neuronx-dkms package."
            ))
        })?;
        if vtpb < range.min {
            return Err(self.fail(compat_error(vtpb, range.min, range.max, RUNTIME_PACKAGES)));
        }
        if range.max < v25 {
            return Err(self.fail(compat_error(v25, range.min, range.max, DRIVER_PACKAGE)));
        }
        Ok(())
    }

    /// Step (8): logical-core allocation, implicit (`NEURON_RT_NUM_CORES`) or explicit
    /// (`NEURON_RT_VISIBLE_CORES`): plan (`topology::plan`), reserve through the driver or mark
    /// locally in funtime, check what was reserved.
    fn allocate_cores(
        &self,
        device: &DeviceInfo,
        config: &Config,
        funtime: bool,
    ) -> Result<Allocation> {
        self.log(
            Level::Info,
            format_args!(
                "Instance info:: device count:{} cores per device:{} architecture:TRN",
                device.device_count, device.cores_per_device
            ),
        );
        if config.visible_cores.is_some() && config.num_cores != 0 {
            self.log(
                Level::Warning,
                format_args!(
                    "Using NEURON_RT_VISIBLE_CORES to allocate Logical Neuron Cores; \
                     NEURON_RT_NUM_CORES={} is ignored",
                    config.num_cores
                ),
            );
        }
        let plan = topology::plan(device, config).map_err(|e| self.fail(e))?;
        let (reserved, driver_reserved) = if funtime {
            (plan.funtime_reservation().map_err(|e| self.fail(e))?, false)
        } else {
            match self.driver.reserve_cores(plan.request()) {
                Ok(Reservation::Reserved(b)) => (b, true),
                Ok(Reservation::Unavailable { available }) => {
                    return Err(self.fail(plan.unavailable(available)));
                }
                Err(e) => {
                    self.log(Level::Error, format_args!("Core reservation failed: {e}"));
                    return Err(self.fail(plan.unavailable(0)));
                }
            }
        };
        let allocation = plan.accept(reserved, driver_reserved).map_err(|e| {
            if driver_reserved {
                self.release_bitmap(&reserved);
            }
            self.fail(e)
        })?;
        if config.visible_cores.is_some() {
            let (t, r) = (allocation.topology, plan.request());
            self.log(
                Level::Info,
                format_args!(
                    "LNC info: first lnc {} last lnc {} first pnc {} last pnc {}",
                    t.first_lnc(),
                    t.last_lnc(),
                    r.start,
                    r.end
                ),
            );
        }
        Ok(allocation)
    }

    /// Step (9): per-core bring-up, fork handlers, exec-ready. Undoes its own steps on failure
    /// (the caller releases the reservation).
    fn start_subsystems(&self, params: &CoreInitParams, funtime: bool) -> Result<()> {
        if !funtime {
            if let Err(e) = self.driver.init_cores(params) {
                let status = e.status();
                return Err(self.fail(Error::new(
                    status,
                    format_args!(
                        "Failed to initialize devices, error:{} ({e})",
                        status.code()
                    ),
                )));
            }
        }
        let undo_cores = |rt: &Self| {
            if !funtime {
                if let Err(e) = rt.driver.shutdown_cores(params) {
                    rt.log(Level::Error, format_args!("Failed to shut down cores: {e}"));
                }
            }
        };
        match self.host.platform().register_fork_handlers() {
            Ok(()) => {
                if !self.fork_handlers_registered.load(Ordering::Acquire) {
                    self.fork_generation_at_registration
                        .store(self.host.platform().fork_generation(), Ordering::Release);
                    self.fork_handlers_registered.store(true, Ordering::Release);
                }
            }
            Err(ret) => {
                undo_cores(self);
                return Err(self.fail(err!(Failure, "Failed to set atfork handlers, ret={ret}")));
            }
        }
        if funtime {
            return Ok(());
        }
        if let Err(e) = self.driver.start_exec_ready(params) {
            undo_cores(self);
            let status = e.status();
            return Err(self.fail(Error::new(
                status,
                format_args!("Failed to start the exec-ready program: {e}"),
            )));
        }
        Ok(())
    }

    fn release_bitmap(&self, bitmap: &CoreBitmap) {
        if let Err(e) = self.driver.release_cores(bitmap) {
            self.log(
                Level::Error,
                format_args!("Failed to release NeuronCores {bitmap:?}: {e}"),
            );
        }
    }

    /// Releases exactly the physical cores of the allocation's logical range (what `nrt_close`
    /// rebuilds), if the driver reserved them.
    fn release_allocation(&self, allocation: &Allocation) {
        if allocation.driver_reserved {
            self.release_bitmap(&allocation.topology.physical_cores());
        }
    }

    /// `nrt_close`: tears down everything `init` brought up and returns to START. Does nothing
    /// unless the runtime is INIT.
    pub fn close(&self) {
        self.observe_fork();
        self.log(Level::Debug, format_args!("API:IN: nrt_close()"));
        let mut session = self.session.lock();
        if self.state.get() != InitState::Init {
            self.log(
                Level::Debug,
                format_args!("API:OUT: nrt_close() (not initialized)"),
            );
            return;
        }
        // CLOSED before the heavy teardown: concurrent entries see a deterministic non-INIT.
        self.set_state(InitState::Closed);
        #[cfg(feature = "alloc")]
        {
            // A registration that passed its guard before CLOSED finishes before the sweep
            // (see `register_model`); one that starts now sees CLOSED.
            crate::sync::fence(Ordering::SeqCst);
            while self.registering.load(Ordering::SeqCst) > 0 {
                self.host.platform().relax();
            }
            self.drain_all_async();
        }
        self.unload_all_models();
        #[cfg(feature = "alloc")]
        {
            // Everything ran: frees still deferred (none expected) are done now.
            let left = self.async_state.lock().take();
            for buffer in left.map(|s| s.deferred_frees).unwrap_or_default() {
                self.free_now(buffer);
            }
        }
        if let Some(s) = session.take() {
            if !self.driver.is_funtime() {
                if let Err(e) = self.driver.shutdown_cores(&s.core_params) {
                    self.log(Level::Error, format_args!("Failed to shut down cores: {e}"));
                }
            }
            self.release_allocation(&s.allocation);
        }
        self.set_state(InitState::Start);
        self.log(Level::Debug, format_args!("API:OUT: nrt_close()"));
    }

    /// Without the `alloc` feature there is no model registry, so nothing to unload.
    #[cfg(not(feature = "alloc"))]
    fn unload_all_models(&self) {}
}

/// `nrt_display_compat_msg`: the message for a compatibility id outside the driver's range.
fn compat_error(id: u32, min: u32, max: u32, packages: &str) -> Error {
    err!(
        Invalid,
        "Neuron Runtime compatibility id {id} is not within the range [{min}, {max}] supported \
         by the installed Neuron driver. Please update {packages}."
    )
}
