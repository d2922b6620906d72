//! [`Selection`]: which backend a front end runs on and how the simulator is configured, from
//! one set of `NEURON_RT_*` variables and the front end's flags.

use nrt_core::config::VarSource;
use nrt_core::{Error, err};
use nrt_linux::LinuxDriver;
use nrt_sim::{Instance, Reports, SimConfig, SimDriver, SimMachine};

use crate::any::{AnyDriver, BackendKind};

/// The backend: `auto`, `sim` or `linux`.
pub const BACKEND_VAR: &str = "NEURON_RT_BACKEND";
/// The simulated instance family: `inf2`, `trn1` or `trn2`.
pub const SIM_INSTANCE_VAR: &str = "NEURON_RT_SIM_INSTANCE";
/// The simulated device count, 1 to 64.
pub const SIM_DEVICES_VAR: &str = "NEURON_RT_SIM_DEVICES";
/// `0`: the simulator refuses NEFFs without a simulator program (plumbing mode off).
pub const PLUMBING_VAR: &str = "NEURON_RT_SIM_PLUMBING";

/// What a front end says when `auto` finds no Neuron device.
pub const NO_DEVICE_HINT: &str =
    "No /dev/neuron0: set NEURON_RT_BACKEND=sim to run on the simulator";

/// The backend asked for (`NEURON_RT_BACKEND`, or a front end's flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The Linux driver when `/dev/neuron0` exists; otherwise no backend.
    Auto,
    /// The simulator.
    Sim,
    /// The Linux driver.
    Linux,
}

impl BackendChoice {
    /// The variable's spelling (`auto`, `sim`, `linux`).
    pub const fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Sim => "sim",
            BackendChoice::Linux => "linux",
        }
    }

    /// Parses [`BackendChoice::name`]'s spelling.
    pub fn from_name(s: &str) -> Option<Self> {
        [
            BackendChoice::Auto,
            BackendChoice::Sim,
            BackendChoice::Linux,
        ]
        .into_iter()
        .find(|b| b.name() == s)
    }
}

/// A front end: what it runs on when `NEURON_RT_BACKEND` is not set, and how it spells the
/// simulated-instance setting in hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrontEnd {
    /// The `nrt` command: the simulator's front end.
    Cli,
    /// The C library (`libnrt.so`): it stands in for libnrt, so it runs on hardware unless
    /// asked for the simulator.
    CLibrary,
}

impl FrontEnd {
    /// The backend when `NEURON_RT_BACKEND` is not set (and no flag says otherwise): `sim` for
    /// the CLI, `auto` for the C library.
    pub const fn default_backend(self) -> BackendChoice {
        match self {
            FrontEnd::Cli => BackendChoice::Sim,
            FrontEnd::CLibrary => BackendChoice::Auto,
        }
    }

    /// How the front end's user sets the simulated instance to `instance`.
    fn spell_instance(self, instance: Instance) -> String {
        match self {
            FrontEnd::Cli => format!("--instance {}", instance.name()),
            FrontEnd::CLibrary => format!("{SIM_INSTANCE_VAR}={}", instance.name()),
        }
    }
}

/// A front end's flags; each one given overrides its variable (which is then not read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// Overrides `NEURON_RT_BACKEND`.
    pub backend: Option<BackendChoice>,
    /// Overrides `NEURON_RT_SIM_INSTANCE`.
    pub instance: Option<Instance>,
    /// Overrides `NEURON_RT_SIM_DEVICES`.
    pub devices: Option<u32>,
}

/// Which backend to run on and how to configure the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The backend asked for.
    pub backend: BackendChoice,
    /// The simulated instance family.
    pub instance: Instance,
    /// Simulated devices.
    pub devices: u32,
    /// Whether the simulator runs NEFFs without a simulator program in plumbing mode (`false`:
    /// it refuses to stage them).
    pub plumbing: bool,
    /// What the simulator keeps of each execution's report.
    pub reports: Reports,
}

impl Selection {
    /// The simulated instance when `NEURON_RT_SIM_INSTANCE` is not set: trn1.
    pub const DEFAULT_INSTANCE: Instance = Instance::Trn1;
    /// Simulated devices when `NEURON_RT_SIM_DEVICES` is not set.
    pub const DEFAULT_DEVICES: u32 = 1;
    /// The most simulated devices.
    pub const MAX_DEVICES: u32 = 64;

    /// The selection of `front` with no variable set and no flag.
    pub const fn defaults(front: FrontEnd) -> Self {
        Self {
            backend: front.default_backend(),
            instance: Self::DEFAULT_INSTANCE,
            devices: Self::DEFAULT_DEVICES,
            plumbing: true,
            reports: Reports::Off,
        }
    }

    /// The selection of `front` from the variables of `vars`.
    pub fn from_vars(front: FrontEnd, vars: &(impl VarSource + ?Sized)) -> Result<Self, Error> {
        Self::with_flags(front, vars, Flags::default())
    }

    /// The selection of `front` from `flags`, then the variables of `vars` for what the flags
    /// leave unset. A variable a flag overrides is not read, so its value does not matter.
    pub fn with_flags(
        front: FrontEnd,
        vars: &(impl VarSource + ?Sized),
        flags: Flags,
    ) -> Result<Self, Error> {
        let mut s = Self::defaults(front);
        s.backend = match (flags.backend, vars.var(BACKEND_VAR)) {
            (Some(b), _) => b,
            (None, None) => s.backend,
            (None, Some(v)) => BackendChoice::from_name(v).ok_or_else(|| {
                err!(
                    Invalid,
                    "Invalid value for NEURON_RT_BACKEND: \"{v}\": expected auto, sim or linux"
                )
            })?,
        };
        s.instance = match (flags.instance, vars.var(SIM_INSTANCE_VAR)) {
            (Some(i), _) => i,
            (None, None) => s.instance,
            (None, Some(v)) => Instance::from_name(v).ok_or_else(|| {
                err!(
                    Invalid,
                    "Invalid value for NEURON_RT_SIM_INSTANCE: \"{v}\": expected trn1, inf2 or trn2"
                )
            })?,
        };
        s.devices = match (flags.devices, vars.var(SIM_DEVICES_VAR)) {
            (Some(d), _) if (1..=Self::MAX_DEVICES).contains(&d) => d,
            (Some(d), _) => {
                return Err(err!(
                    Invalid,
                    "Invalid simulated device count {d}: expected 1 to 64"
                ));
            }
            (None, None) => s.devices,
            (None, Some(v)) => v
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=Self::MAX_DEVICES).contains(d))
                .ok_or_else(|| {
                    err!(
                        Invalid,
                        "Invalid value for NEURON_RT_SIM_DEVICES: \"{v}\": expected 1 to 64"
                    )
                })?,
        };
        s.plumbing = match vars.var(PLUMBING_VAR) {
            None | Some("1") => true,
            Some("0") => false,
            Some(v) => {
                return Err(err!(
                    Invalid,
                    "Invalid value for NEURON_RT_SIM_PLUMBING: \"{v}\": expected 0 or 1"
                ));
            }
        };
        Ok(s)
    }

    /// The same selection keeping `reports` of the simulator's executions.
    pub const fn with_reports(mut self, reports: Reports) -> Self {
        self.reports = reports;
        self
    }

    /// The backend to run on: `auto` is the Linux driver when `linux_device` (a Neuron device
    /// exists), otherwise `None`.
    pub const fn resolve_with(&self, linux_device: bool) -> Option<BackendKind> {
        match self.backend {
            BackendChoice::Sim => Some(BackendKind::Sim),
            BackendChoice::Linux => Some(BackendKind::Linux),
            BackendChoice::Auto if linux_device => Some(BackendKind::Linux),
            BackendChoice::Auto => None,
        }
    }

    /// [`Selection::resolve_with`] on this machine ([`linux_device_present`]).
    pub fn resolve(&self) -> Option<BackendKind> {
        self.resolve_with(linux_device_present())
    }

    /// The simulated machine's configuration: funtime mode, [`Selection::instance`] ×
    /// [`Selection::devices`], plumbing as [`Selection::plumbing`] says.
    pub const fn sim_config(&self) -> SimConfig {
        let mut c = SimConfig::funtime(self.instance, self.devices);
        c.refuse_plumbing = !self.plumbing;
        c
    }

    /// A driver on a fresh simulated machine of [`Selection::sim_config`] keeping
    /// [`Selection::reports`].
    pub fn open_sim(&self) -> SimDriver {
        SimDriver::attach(&SimMachine::with_reports(self.sim_config(), self.reports))
    }

    /// The driver of `kind` as this selection configures it.
    pub fn open_kind(&self, kind: BackendKind) -> AnyDriver {
        match kind {
            BackendKind::Sim => AnyDriver::Sim(self.open_sim()),
            BackendKind::Linux => AnyDriver::Linux(LinuxDriver::new()),
        }
    }

    /// The driver this selection names ([`Selection::resolve`]); `None` when `auto` finds no
    /// Neuron device (a front end then says [`NO_DEVICE_HINT`]).
    pub fn open(&self) -> Option<AnyDriver> {
        self.resolve().map(|k| self.open_kind(k))
    }
}

/// Whether this machine has a Neuron device (`/dev/neuron0`), which `auto` chooses.
pub fn linux_device_present() -> bool {
    std::path::Path::new(nrt_linux::DEFAULT_DEV_DIR)
        .join("neuron0")
        .exists()
}

/// The hint a front end adds to a failed load of a NEFF of `subgraphs` subgraphs on the
/// simulated `instance`: a NEFF has one subgraph per physical core of its logical core, so it
/// needs an instance whose logical cores are that large. Names the smallest such instance, as
/// `front` spells the setting; `None` when the NEFF fits, the backend is not the simulator, or
/// no instance fits.
pub fn lnc_hint(
    front: FrontEnd,
    kind: BackendKind,
    instance: Instance,
    subgraphs: usize,
) -> Option<String> {
    let n = u32::try_from(subgraphs).ok()?;
    if kind != BackendKind::Sim || n <= instance.arch().default_lnc_size() {
        return None;
    }
    let fits = [Instance::Inf2, Instance::Trn1, Instance::Trn2]
        .into_iter()
        .find(|i| i.arch().default_lnc_size() >= n)?;
    Some(format!(
        "this NEFF has {n} subgraphs, one per physical core of a logical core of {n}: try {}",
        front.spell_instance(fits)
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use nrt_core::NrtStatus;

    use super::*;

    fn sel(front: FrontEnd, vars: &[(&str, &str)]) -> Result<Selection, Error> {
        Selection::from_vars(front, vars)
    }

    fn fails(vars: &[(&str, &str)], message: &str) {
        for front in [FrontEnd::Cli, FrontEnd::CLibrary] {
            let e = sel(front, vars).unwrap_err();
            assert_eq!(e.status(), NrtStatus::Invalid, "{vars:?}");
            assert_eq!(e.message(), message, "{vars:?}");
        }
    }

    #[test]
    fn defaults_are_one_instance_and_device_count_with_a_backend_per_front_end() {
        let cli = sel(FrontEnd::Cli, &[]).unwrap();
        let c = sel(FrontEnd::CLibrary, &[]).unwrap();
        assert_eq!(cli, Selection::defaults(FrontEnd::Cli));
        assert_eq!(c, Selection::defaults(FrontEnd::CLibrary));
        assert_eq!(cli.backend, BackendChoice::Sim);
        assert_eq!(c.backend, BackendChoice::Auto);
        for s in [cli, c] {
            assert_eq!(s.instance, Instance::Trn1);
            assert_eq!(s.devices, 1);
            assert!(s.plumbing);
            assert_eq!(s.reports, Reports::Off);
            assert_eq!(s.sim_config(), SimConfig::funtime(Instance::Trn1, 1));
        }
    }

    #[test]
    fn each_variable_is_read() {
        for (v, want) in [
            ("auto", BackendChoice::Auto),
            ("sim", BackendChoice::Sim),
            ("linux", BackendChoice::Linux),
        ] {
            for front in [FrontEnd::Cli, FrontEnd::CLibrary] {
                assert_eq!(sel(front, &[(BACKEND_VAR, v)]).unwrap().backend, want);
            }
        }
        for i in [Instance::Inf2, Instance::Trn1, Instance::Trn2] {
            let s = sel(FrontEnd::Cli, &[(SIM_INSTANCE_VAR, i.name())]).unwrap();
            assert_eq!(s.instance, i);
        }
        for d in ["1", "2", "64"] {
            let s = sel(FrontEnd::CLibrary, &[(SIM_DEVICES_VAR, d)]).unwrap();
            assert_eq!(s.devices.to_string(), d);
        }
        let s = sel(FrontEnd::Cli, &[(PLUMBING_VAR, "0")]).unwrap();
        assert!(!s.plumbing && s.sim_config().refuse_plumbing);
        assert!(sel(FrontEnd::Cli, &[(PLUMBING_VAR, "1")]).unwrap().plumbing);
        let s = sel(
            FrontEnd::CLibrary,
            &[
                (BACKEND_VAR, "sim"),
                (SIM_INSTANCE_VAR, "trn2"),
                (SIM_DEVICES_VAR, "2"),
            ],
        )
        .unwrap();
        assert_eq!(s.sim_config(), SimConfig::funtime(Instance::Trn2, 2));
    }

    #[test]
    fn invalid_values_are_errors_with_the_exact_messages() {
        fails(
            &[(BACKEND_VAR, "tpu")],
            "Invalid value for NEURON_RT_BACKEND: \"tpu\": expected auto, sim or linux",
        );
        fails(
            &[(BACKEND_VAR, "SIM")],
            "Invalid value for NEURON_RT_BACKEND: \"SIM\": expected auto, sim or linux",
        );
        fails(
            &[(SIM_INSTANCE_VAR, "trn9")],
            "Invalid value for NEURON_RT_SIM_INSTANCE: \"trn9\": expected trn1, inf2 or trn2",
        );
        for d in ["0", "65", "-1", "two", ""] {
            fails(
                &[(SIM_DEVICES_VAR, d)],
                &format!("Invalid value for NEURON_RT_SIM_DEVICES: \"{d}\": expected 1 to 64"),
            );
        }
        for p in ["2", "no", ""] {
            fails(
                &[(PLUMBING_VAR, p)],
                &format!("Invalid value for NEURON_RT_SIM_PLUMBING: \"{p}\": expected 0 or 1"),
            );
        }
        // Invalid simulator settings are errors whichever backend is asked for.
        fails(
            &[(BACKEND_VAR, "linux"), (SIM_INSTANCE_VAR, "x")],
            "Invalid value for NEURON_RT_SIM_INSTANCE: \"x\": expected trn1, inf2 or trn2",
        );
    }

    #[test]
    fn flags_override_the_variables() {
        let vars = [
            (BACKEND_VAR, "linux"),
            (SIM_INSTANCE_VAR, "inf2"),
            (SIM_DEVICES_VAR, "3"),
        ];
        let flags = Flags {
            backend: Some(BackendChoice::Sim),
            instance: Some(Instance::Trn2),
            devices: Some(2),
        };
        let s = Selection::with_flags(FrontEnd::Cli, &vars, flags).unwrap();
        assert_eq!(
            (s.backend, s.instance, s.devices),
            (BackendChoice::Sim, Instance::Trn2, 2)
        );
        // Unset flags leave the variables in charge.
        let s = Selection::with_flags(FrontEnd::Cli, &vars, Flags::default()).unwrap();
        assert_eq!(
            (s.backend, s.instance, s.devices),
            (BackendChoice::Linux, Instance::Inf2, 3)
        );
        // A variable a flag overrides is not read.
        let bad = [
            (BACKEND_VAR, "tpu"),
            (SIM_INSTANCE_VAR, "x"),
            (SIM_DEVICES_VAR, "0"),
        ];
        let s = Selection::with_flags(FrontEnd::Cli, &bad, flags).unwrap();
        assert_eq!(s.instance, Instance::Trn2);
        // An out-of-range device flag is refused.
        for d in [0, 65] {
            let flags = Flags {
                devices: Some(d),
                ..Flags::default()
            };
            let e = Selection::with_flags(FrontEnd::Cli, &[], flags).unwrap_err();
            assert_eq!(
                e.message(),
                format!("Invalid simulated device count {d}: expected 1 to 64")
            );
        }
    }

    #[test]
    fn auto_is_linux_only_with_a_device() {
        let auto = Selection::defaults(FrontEnd::CLibrary);
        assert_eq!(auto.resolve_with(true), Some(BackendKind::Linux));
        assert_eq!(auto.resolve_with(false), None);
        let sim = Selection::defaults(FrontEnd::Cli);
        assert_eq!(sim.resolve_with(true), Some(BackendKind::Sim));
        assert_eq!(sim.resolve_with(false), Some(BackendKind::Sim));
        let linux = Selection {
            backend: BackendChoice::Linux,
            ..sim
        };
        assert_eq!(linux.resolve_with(false), Some(BackendKind::Linux));
    }

    #[test]
    fn the_simulator_opens_with_its_configuration_and_reports() {
        let s = sel(
            FrontEnd::Cli,
            &[(SIM_INSTANCE_VAR, "trn2"), (PLUMBING_VAR, "0")],
        )
        .unwrap()
        .with_reports(Reports::Events);
        let d = s.open().unwrap();
        let sim = d.as_sim().unwrap();
        assert_eq!(sim.machine().config().instance, Instance::Trn2);
        assert!(sim.machine().config().refuse_plumbing);
        assert_eq!(sim.machine().reports(), Reports::Events);
        assert_eq!(d.kind(), BackendKind::Sim);
    }

    #[test]
    fn the_lnc_hint_names_an_instance_that_fits() {
        let hint = lnc_hint(FrontEnd::Cli, BackendKind::Sim, Instance::Trn1, 2).unwrap();
        assert_eq!(
            hint,
            "this NEFF has 2 subgraphs, one per physical core of a logical core of 2: try \
             --instance trn2"
        );
        let hint = lnc_hint(FrontEnd::CLibrary, BackendKind::Sim, Instance::Inf2, 2).unwrap();
        assert!(hint.ends_with("try NEURON_RT_SIM_INSTANCE=trn2"), "{hint}");
        assert_eq!(
            lnc_hint(FrontEnd::Cli, BackendKind::Sim, Instance::Trn2, 2),
            None
        );
        assert_eq!(
            lnc_hint(FrontEnd::Cli, BackendKind::Sim, Instance::Trn1, 1),
            None
        );
        assert_eq!(
            lnc_hint(FrontEnd::Cli, BackendKind::Linux, Instance::Trn1, 2),
            None
        );
        assert_eq!(
            lnc_hint(FrontEnd::Cli, BackendKind::Sim, Instance::Trn1, 4),
            None
        );
    }
}
