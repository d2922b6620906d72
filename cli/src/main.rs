//! `nrt`: run, inspect, list, build and benchmark Neuron models — on the cycle-level simulator
//! by default, so everything works without hardware.
//!
//! ```text
//! nrt run examples/mlp.toml                       # build a spec in memory, run it, summarise
//! nrt run MODEL.neff --input x=x.npy -o out/      # run a NEFF, save the outputs as .npy
//! nrt info MODEL.neff                             # header, subgraphs, I/O tensors
//! nrt ls                                          # devices and cores (like neuron-ls)
//! nrt build SPEC.toml -o MODEL.neff               # compile a spec into a simulator NEFF
//! nrt bench MODEL.neff --iterations 200           # latency p50/p99, throughput
//! nrt run MODEL.neff --trace t.json && nrt trace render t.json -o timeline.svg
//! ```
//!
//! The backend and the simulated machine come from `--backend`, `--instance` and (for `ls`)
//! `--devices`, or, for what they leave unset, from the `NEURON_RT_*` variables the C library
//! reads (`nrt_backend::Selection`); the command's backend defaults to the simulator, the
//! machine to trn1 × 1.
//!
//! Every failure is one line on stderr (`error: …`) and a non-zero exit status: 1 for a
//! failure, 2 for a usage error.

mod backend;
mod bench;
mod build;
mod error;
mod info;
mod ls;
mod npy;
mod out;
mod run;
mod spec;
mod svg;
mod tensors;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use backend::{Backend, InstanceArg};
use error::Result;

#[derive(Debug, Parser)]
#[command(
    name = "nrt",
    version,
    about = "Run, inspect and benchmark Neuron models on the nrt-rs runtime (simulator by default: no hardware needed)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Load a model (a NEFF, or a .toml spec built on the fly), execute it, summarise the results
    Run(RunArgs),
    /// Show a NEFF's header, subgraphs and I/O tensors (compiler NEFFs and ours)
    Info(InfoArgs),
    /// List the devices and cores of a backend, in the style of neuron-ls
    Ls(LsArgs),
    /// Compile a model spec (.toml) into a simulator NEFF
    Build(BuildArgs),
    /// Measure execution latency (p50/p99) and throughput
    Bench(BenchArgs),
    /// Timeline traces
    Trace {
        #[command(subcommand)]
        cmd: TraceCmd,
    },
}

/// Where a model runs. Each flag given overrides its `NEURON_RT_*` variable (see
/// `nrt_backend`); the backend defaults to the simulator, the instance to trn1.
#[derive(Debug, Args)]
struct Target {
    /// Backend: the simulator, or the Linux driver (/dev/neuron*) [default: NEURON_RT_BACKEND, else sim]
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// Simulated instance family [default: NEURON_RT_SIM_INSTANCE, else trn1] (sim backend only)
    #[arg(long, value_enum)]
    instance: Option<InstanceArg>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The model: a NEFF, or a .toml spec (built in memory)
    model: PathBuf,
    /// An input: NAME=FILE (.npy, shape and dtype checked; any other extension: raw bytes).
    /// Inputs not given come from the spec's seeds, or are zero-filled
    #[arg(short, long = "input", value_name = "NAME=FILE")]
    input: Vec<String>,
    /// Write each output as DIR/NAME.npy
    #[arg(short, long, value_name = "DIR")]
    output_dir: Option<PathBuf>,
    #[command(flatten)]
    target: Target,
    /// Execute N times (the summary shows the last outputs and the mean host time)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Write the simulator's timeline as Chrome/Perfetto trace JSON
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct InfoArgs {
    /// The NEFF (or a .toml spec, built in memory)
    model: PathBuf,
}

#[derive(Debug, Args)]
struct LsArgs {
    #[command(flatten)]
    target: Target,
    /// Simulated devices [default: NEURON_RT_SIM_DEVICES, else 1] (sim backend only)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    devices: Option<u32>,
}

#[derive(Debug, Args)]
struct BuildArgs {
    /// The model spec (.toml)
    spec: PathBuf,
    /// Where to write the NEFF
    #[arg(short, long, value_name = "MODEL.neff")]
    output: PathBuf,
    /// Also write the spec's sample inputs (from seeds or files) as DIR/NAME.npy
    #[arg(long, value_name = "DIR")]
    inputs_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// The model: a NEFF, or a .toml spec (built in memory)
    model: PathBuf,
    /// Timed executions, over all threads
    #[arg(short = 'n', long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    iterations: u32,
    /// Threads executing concurrently, each with its own tensors
    #[arg(short, long, value_name = "T", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    threads: u32,
    /// Untimed executions before the timed ones
    #[arg(long, value_name = "N", default_value_t = 3)]
    warmup: u32,
    /// An input: NAME=FILE, as for `nrt run`
    #[arg(short, long = "input", value_name = "NAME=FILE")]
    input: Vec<String>,
    #[command(flatten)]
    target: Target,
}

#[derive(Debug, Subcommand)]
enum TraceCmd {
    /// Draw a trace's per-engine timeline as an SVG picture
    Render(RenderArgs),
}

#[derive(Debug, Args)]
struct RenderArgs {
    /// Trace JSON written by `nrt run --trace`
    file: PathBuf,
    /// The SVG file to write
    #[arg(short, long, value_name = "timeline.svg")]
    output: PathBuf,
    /// Also draw one track per DMA queue
    #[arg(long)]
    queues: bool,
    /// Picture width in pixels
    #[arg(long, default_value_t = 1400, value_parser = clap::value_parser!(u32).range(400..=20000))]
    width: u32,
}

/// A clap error on one line: its message, the possible values or tip if any, no usage block.
fn clap_one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:")
        })
        .collect();
    let line = kept.join(" ");
    if line.starts_with("error:") {
        line
    } else {
        format!("error: {line}")
    }
}

fn dispatch(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Run(a) => run::run(&a),
        Cmd::Info(a) => info::info(&a.model),
        Cmd::Ls(a) => ls::ls(&a),
        Cmd::Build(a) => build::build(&a.spec, &a.output, a.inputs_dir.as_deref()),
        Cmd::Bench(a) => bench::bench(&a),
        Cmd::Trace {
            cmd: TraceCmd::Render(a),
        } => svg::render_file(&a.file, &a.output, a.queues, a.width),
    }
}

fn main() -> ExitCode {
    // A bug must still end in one line, not a panic message and a backtrace hint.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        eprintln!("error: internal error (please report): {msg}");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = e.print();
                    ExitCode::SUCCESS
                }
                ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    let _ = e.print();
                    ExitCode::from(2)
                }
                _ => {
                    eprintln!("{}", clap_one_line(&e));
                    ExitCode::from(2)
                }
            };
        }
    };
    match std::panic::catch_unwind(|| dispatch(cli)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {}", e.one_line());
            ExitCode::from(e.code())
        }
        Err(_) => ExitCode::from(101),
    }
}
