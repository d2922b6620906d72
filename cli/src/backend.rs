//! The backend the CLI runs on (chosen by `nrt_backend::Selection` from the `NEURON_RT_*`
//! variables and the command's flags), the CLI's runtime host, and model loading.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use clap::ValueEnum;
use nrt_backend::{
    AnyDriver, BackendChoice, BackendKind, Flags, FrontEnd, NO_DEVICE_HINT, Selection,
};
use nrt_core::io::{TensorInfo, TensorUsage};
use nrt_core::neff::{self, Neff, ParseOptions, SIM_PROGRAM_MEMBER};
use nrt_core::{FrameworkType, Host, Level, Runtime};
use nrt_host::{EnvVars, StdHost, StdPlatform};
use nrt_sim::engine::Program;
use nrt_sim::{Instance, Reports};

use crate::error::{CliError, Context, Result, bail};
use crate::spec;

/// Which driver the runtime runs on (`--backend`; `NEURON_RT_BACKEND` when not given).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    /// The cycle-level simulator: no hardware needed.
    Sim,
    /// The Linux kernel driver (`/dev/neuron*`): discovery only for now.
    Linux,
}

impl Backend {
    fn choice(self) -> BackendChoice {
        match self {
            Backend::Sim => BackendChoice::Sim,
            Backend::Linux => BackendChoice::Linux,
        }
    }
}

/// A simulated instance family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum InstanceArg {
    /// Inferentia2: 2 NeuronCore-v2 per device.
    Inf2,
    /// Trainium1: 2 NeuronCore-v2 per device.
    Trn1,
    /// Trainium2: 8 physical NeuronCore-v3 per device, logical cores of 2.
    Trn2,
}

impl InstanceArg {
    pub(crate) fn instance(self) -> Instance {
        match self {
            InstanceArg::Inf2 => Instance::Inf2,
            InstanceArg::Trn1 => Instance::Trn1,
            InstanceArg::Trn2 => Instance::Trn2,
        }
    }
}

/// The backend a command runs on: the selection and the backend it resolved to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chosen {
    pub(crate) selection: Selection,
    pub(crate) kind: BackendKind,
}

/// Chooses the backend from the command's flags, then the `NEURON_RT_*` variables for what the
/// flags leave unset (the CLI's backend defaults to the simulator); the simulator keeps
/// `reports` of each execution.
pub(crate) fn choose(
    backend: Option<Backend>,
    instance: Option<InstanceArg>,
    devices: Option<u32>,
    reports: Reports,
) -> Result<Chosen> {
    let flags = Flags {
        backend: backend.map(Backend::choice),
        instance: instance.map(InstanceArg::instance),
        devices,
    };
    let selection = Selection::with_flags(FrontEnd::Cli, &EnvVars::capture(), flags)
        .map_err(|e| CliError::usage(e.message()))?
        .with_reports(reports);
    let Some(kind) = selection.resolve() else {
        bail!("{NO_DEVICE_HINT} (or pass --backend sim)");
    };
    if kind == BackendKind::Linux {
        if instance.is_some() {
            return Err(CliError::usage(
                "--instance applies to the sim backend only (the linux backend uses the machine's devices)",
            ));
        }
        if devices.is_some() {
            return Err(CliError::usage("--devices applies to the sim backend only"));
        }
    }
    Ok(Chosen { selection, kind })
}

impl Chosen {
    /// A driver of the chosen backend (the simulator: on a fresh machine).
    pub(crate) fn open(&self) -> AnyDriver {
        self.selection.open_kind(self.kind)
    }

    /// The backend's name for messages.
    pub(crate) fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// The summary's backend line for a model on logical core `vnc`.
    pub(crate) fn line(&self, vnc: u32) -> String {
        match self.kind {
            BackendKind::Sim => {
                let d = self.selection.devices;
                format!(
                    "sim: simulated {} ({d} device{}, funtime), model on logical core {vnc}",
                    self.selection.instance.name(),
                    if d == 1 { "" } else { "s" }
                )
            }
            BackendKind::Linux => format!("linux: /dev/neuron*, model on logical core {vnc}"),
        }
    }

    /// A hint for a NEFF that needs larger logical cores than the simulated instance has
    /// (empty when none applies), to append to a load error.
    pub(crate) fn lnc_hint(&self, model: &Model) -> String {
        nrt_backend::lnc_hint(
            FrontEnd::Cli,
            self.kind,
            self.selection.instance,
            model.neff.subgraphs.len(),
        )
        .map(|h| format!(" ({h})"))
        .unwrap_or_default()
    }
}

/// The runtime's host for the CLI: the std host, except that error records are kept instead
/// of printed — every failure the CLI reports is one line of its own, carrying the same
/// message. Records at other levels (only those `NEURON_RT_LOG_LEVEL` lets through) go to
/// stderr as usual.
#[derive(Debug, Default)]
pub(crate) struct CliHost {
    inner: StdHost,
    errors: Mutex<Vec<String>>,
}

impl CliHost {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The error records kept so far.
    pub(crate) fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut *self.errors.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Host for CliHost {
    type Platform = StdPlatform;

    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        if level == Level::Error {
            self.errors
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(args.to_string());
        } else {
            self.inner.log(level, args);
        }
    }
    fn platform(&self) -> &StdPlatform {
        &StdPlatform
    }
}

/// The CLI's runtime.
pub(crate) type Rt = Runtime<AnyDriver, Arc<CliHost>>;

/// `init` with the process environment's `NEURON_RT_*` variables.
pub(crate) fn init(rt: &Rt, backend: &str) -> Result<()> {
    rt.init(FrameworkType::NoFw, "", "", &EnvVars::capture())
        .map_err(|e| CliError::new(format!("{backend} runtime: {}", e.message())))
}

/// A runtime error as a CLI error: `what: message`.
pub(crate) fn rt_err(what: impl std::fmt::Display) -> impl FnOnce(nrt_core::Error) -> CliError {
    move |e| CliError::new(format!("{what}: {}", e.message()))
}

/// Where a model came from.
#[derive(Debug)]
pub(crate) enum Source {
    /// A NEFF file.
    Neff,
    /// A spec, built in memory.
    Spec {
        /// Which builder made it.
        kernel: String,
        /// Sample data for inputs with a seed or a file.
        samples: std::collections::BTreeMap<String, Vec<u8>>,
    },
}

/// A model ready to load: the NEFF bytes, the parsed NEFF and its simulator programs.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) path: PathBuf,
    pub(crate) bytes: Vec<u8>,
    pub(crate) neff: Neff,
    /// One per subgraph that carries a simulator program (none for compiler NEFFs).
    pub(crate) programs: Vec<Program>,
    pub(crate) source: Source,
}

impl Model {
    /// The I/O tensors of one direction, in name order.
    pub(crate) fn tensors(&self, usage: TensorUsage) -> Vec<TensorInfo> {
        self.neff
            .tensors_of(usage)
            .map(|t| TensorInfo {
                name: t.name.clone(),
                size: t.size,
                dtype: t.dtype,
                shape: t.shape.clone(),
            })
            .collect()
    }

    /// Whether the NEFF carries no simulator program (plumbing mode on the simulator).
    pub(crate) fn is_plumbing(&self) -> bool {
        self.programs.len() < self.neff.subgraphs.len()
    }
}

/// Whether `path` names a spec rather than a NEFF (by its `.toml` extension).
pub(crate) fn is_spec(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

/// Parses NEFF bytes and extracts the simulator programs.
pub(crate) fn parse_neff(path: &Path, bytes: &[u8]) -> Result<(Neff, Vec<Program>)> {
    let shown = path.display();
    // As the runtime's load: the simulator program carries the weights.
    let options = ParseOptions {
        max_member_size: neff::MAX_LOADED_MEMBER_BYTES,
        max_kept_bytes: neff::MAX_LOADED_MEMBER_BYTES,
        ..ParseOptions::default()
    };
    let neff = neff::parse(bytes, &options)
        .map_err(|e| CliError::new(format!("{shown}: {}", e.message())))?;
    let mut programs = Vec::new();
    for sg in &neff.subgraphs {
        if let Some(p) = sg.member(SIM_PROGRAM_MEMBER) {
            let p = Program::from_bytes(p).map_err(|e| {
                CliError::new(format!(
                    "{shown}: subgraph {}: invalid simulator program: {}",
                    sg.name,
                    e.message()
                ))
            })?;
            programs.push(p);
        }
    }
    Ok((neff, programs))
}

/// Reads a NEFF, or builds a `.toml` spec in memory.
pub(crate) fn load_model(path: &Path) -> Result<Model> {
    if is_spec(path) {
        let (_, built) = spec::build_file(path)?;
        let (neff, programs) = parse_neff(path, &built.neff)?;
        return Ok(Model {
            path: path.to_path_buf(),
            bytes: built.neff,
            neff,
            programs,
            source: Source::Spec {
                kernel: built.kernel,
                samples: built.sample_inputs,
            },
        });
    }
    let bytes = std::fs::read(path).context(|| format!("cannot read '{}'", path.display()))?;
    let (neff, programs) = parse_neff(path, &bytes)?;
    Ok(Model {
        path: path.to_path_buf(),
        bytes,
        neff,
        programs,
        source: Source::Neff,
    })
}

/// Parses `NAME=FILE` arguments, checking each name against the model's inputs.
pub(crate) fn input_args(
    model: &Model,
    args: &[String],
) -> Result<std::collections::BTreeMap<String, PathBuf>> {
    let inputs = model.tensors(TensorUsage::Input);
    let mut out = std::collections::BTreeMap::new();
    for a in args {
        let Some((name, file)) = a.split_once('=') else {
            return Err(CliError::usage(format!(
                "--input '{a}': expected NAME=FILE (for example --input x=x.npy)"
            )));
        };
        if !inputs.iter().any(|t| t.name == name) {
            let names: Vec<&str> = inputs.iter().map(|t| t.name.as_str()).collect();
            bail!(
                "model '{}' has no input named '{name}' (its inputs: {})",
                model.neff.name(),
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
        if out.insert(name.to_owned(), PathBuf::from(file)).is_some() {
            return Err(CliError::usage(format!("--input '{name}' is given twice")));
        }
    }
    Ok(out)
}

/// How an input's data was obtained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum InputSource {
    File(String),
    Sample,
    Zero,
}

/// The bytes of every input: from its file, the spec's sample data, or zeros.
pub(crate) fn gather_inputs(
    model: &Model,
    args: &[String],
) -> Result<Vec<(TensorInfo, Vec<u8>, InputSource)>> {
    let files = input_args(model, args)?;
    let mut out = Vec::new();
    for t in model.tensors(TensorUsage::Input) {
        let sample = match &model.source {
            Source::Spec { samples, .. } => samples.get(&t.name),
            Source::Neff => None,
        };
        let (bytes, src) = match (files.get(&t.name), sample) {
            (Some(path), _) => (
                crate::tensors::read_input(&t, path)?,
                InputSource::File(path.display().to_string()),
            ),
            (None, Some(s)) => (s.clone(), InputSource::Sample),
            (None, None) => {
                let n = usize::try_from(t.size)
                    .map_err(|_| CliError::new(format!("input '{}' is too large", t.name)))?;
                (vec![0u8; n], InputSource::Zero)
            }
        };
        out.push((t, bytes, src));
    }
    Ok(out)
}
