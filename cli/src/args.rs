//! The command line: clap's description of every subcommand and its arguments.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::{Backend, InstanceArg};
use crate::emulate::faults::{FailIoctl, parse_fail_ioctl};

#[derive(Debug, Parser)]
#[command(
    name = "nrt",
    version,
    about = "Run, inspect and benchmark Neuron models on the nrt-rs runtime (simulator by default: no hardware needed)"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Load a model (a NEFF, or a .toml spec built on the fly), execute it, summarise the results
    Run(RunArgs),
    /// Show a NEFF's header, subgraphs and I/O tensors (compiler NEFFs and ours)
    Info(InfoArgs),
    /// List the devices and cores of a backend, in the style of neuron-ls
    Ls(LsArgs),
    /// Compile a model spec (.toml) into a simulator NEFF
    Build(BuildArgs),
    /// Assemble simulator program texts (as `nrt info --program` prints them) into a NEFF
    Asm(AsmArgs),
    /// Measure execution latency (p50/p99) and throughput
    Bench(BenchArgs),
    /// Run a program against the device emulator: /dev/neuron* and their sysfs entries are
    /// simulated devices, answered at the system-call boundary (Linux: user namespaces and
    /// seccomp user notification)
    Emulate(EmulateArgs),
    /// Timeline traces
    Trace {
        #[command(subcommand)]
        cmd: TraceCmd,
    },
}

/// Where a model runs. Each flag given overrides its `NEURON_RT_*` variable (see
/// `nrt_backend`); the backend defaults to the simulator, the instance to trn1.
#[derive(Debug, Args)]
pub(crate) struct Target {
    /// Backend: the simulator, or the Linux driver (/dev/neuron*) [default: NEURON_RT_BACKEND, else sim]
    #[arg(long, value_enum)]
    pub(crate) backend: Option<Backend>,
    /// Simulated instance family [default: NEURON_RT_SIM_INSTANCE, else trn1] (sim backend only)
    #[arg(long, value_enum)]
    pub(crate) instance: Option<InstanceArg>,
}

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The model: a NEFF, a .toml spec or an .onnx model (built in memory)
    pub(crate) model: PathBuf,
    /// An input: NAME=FILE (.npy, shape and dtype checked; any other extension: raw bytes).
    /// Inputs not given come from the spec's seeds (ONNX: seeded random data), or are zero-filled
    #[arg(short, long = "input", value_name = "NAME=FILE")]
    pub(crate) input: Vec<String>,
    /// Write each output as DIR/NAME.npy
    #[arg(short, long, value_name = "DIR")]
    pub(crate) output_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) target: Target,
    /// Execute N times (the summary shows the last outputs and the mean host time)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) repeat: u32,
    /// Write the simulator's timeline as Chrome/Perfetto trace JSON
    #[arg(long, value_name = "FILE.json")]
    pub(crate) trace: Option<PathBuf>,
    /// Compute precision of an ONNX model (.onnx inputs only)
    #[arg(long, value_enum, default_value = "fp32")]
    pub(crate) dtype: crate::onnx::DtypeArg,
}

#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    /// The NEFF (or a .toml spec, built in memory)
    pub(crate) model: PathBuf,
    /// Print the disassembly of each subgraph's simulator program instead (the text `nrt asm`
    /// reads; docs/SIM_ISA.md, "Program text")
    #[arg(long)]
    pub(crate) program: bool,
}

#[derive(Debug, Args)]
pub(crate) struct AsmArgs {
    /// Program texts, one per subgraph (in order)
    #[arg(required = true, value_name = "PROGRAM.s")]
    pub(crate) files: Vec<PathBuf>,
    /// Where to write the NEFF
    #[arg(short, long, value_name = "MODEL.neff")]
    pub(crate) output: PathBuf,
    /// The model's name [default: the first program's name, else the file's stem]
    #[arg(long)]
    pub(crate) name: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct LsArgs {
    #[command(flatten)]
    pub(crate) target: Target,
    /// Simulated devices [default: NEURON_RT_SIM_DEVICES, else 1] (sim backend only)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) devices: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct BuildArgs {
    /// The model spec (.toml), or an ONNX model (.onnx)
    pub(crate) spec: PathBuf,
    /// Where to write the NEFF
    #[arg(short, long, value_name = "MODEL.neff")]
    pub(crate) output: PathBuf,
    /// Also write the spec's sample inputs (from seeds or files) as DIR/NAME.npy
    #[arg(long, value_name = "DIR")]
    pub(crate) inputs_dir: Option<PathBuf>,
    /// Compute precision of an ONNX model (.onnx inputs only)
    #[arg(long, value_enum, default_value = "fp32")]
    pub(crate) dtype: crate::onnx::DtypeArg,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// The model: a NEFF, a .toml spec or an .onnx model (built in memory)
    pub(crate) model: PathBuf,
    /// Timed executions, over all threads
    #[arg(short = 'n', long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) iterations: u32,
    /// Threads executing concurrently, each with its own tensors
    #[arg(short, long, value_name = "T", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) threads: u32,
    /// Untimed executions before the timed ones
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub(crate) warmup: u32,
    /// An input: NAME=FILE, as for `nrt run`
    #[arg(short, long = "input", value_name = "NAME=FILE")]
    pub(crate) input: Vec<String>,
    #[command(flatten)]
    pub(crate) target: Target,
    /// Compute precision of an ONNX model (.onnx inputs only)
    #[arg(long, value_enum, default_value = "fp32")]
    pub(crate) dtype: crate::onnx::DtypeArg,
}

#[derive(Debug, Args)]
pub(crate) struct EmulateArgs {
    /// Emulated instance family
    #[arg(long, value_enum, default_value = "trn1")]
    pub(crate) instance: InstanceArg,
    /// Emulated devices (/dev/neuron0 … /dev/neuron{N-1})
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) devices: u32,
    /// Fail the N-th driver ioctl (counted from 1 over all devices) with ERRNO (a number or a
    /// name such as ENOMEM) [default ERRNO: EIO]; repeatable
    #[arg(long, value_name = "N[:ERRNO]", value_parser = parse_fail_ioctl)]
    pub(crate) fail_ioctl: Vec<FailIoctl>,
    /// Also write the emulator's accounting (printed on stderr at the end) to FILE
    #[arg(long, value_name = "FILE")]
    pub(crate) report: Option<PathBuf>,
    /// The program and its arguments (after `--`)
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub(crate) command: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TraceCmd {
    /// Draw a trace's per-engine timeline as an SVG picture
    Render(RenderArgs),
}

#[derive(Debug, Args)]
pub(crate) struct RenderArgs {
    /// Trace JSON written by `nrt run --trace`
    pub(crate) file: PathBuf,
    /// The SVG file to write
    #[arg(short, long, value_name = "timeline.svg")]
    pub(crate) output: PathBuf,
    /// Also draw one track per DMA queue
    #[arg(long)]
    pub(crate) queues: bool,
    /// Picture width in pixels
    #[arg(long, default_value_t = 1400, value_parser = clap::value_parser!(u32).range(400..=20000))]
    pub(crate) width: u32,
}
