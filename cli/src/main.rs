//! `nrt`: run, inspect, list, build and benchmark Neuron models — on the cycle-level simulator
//! by default, so everything works without hardware.
//!
//! ```text
//! nrt run examples/mlp.toml                       # build a spec in memory, run it, summarise
//! nrt run MODEL.neff --input x=x.npy -o out/      # run a NEFF, save the outputs as .npy
//! nrt info MODEL.neff                             # header, subgraphs, I/O tensors
//! nrt info --program MODEL.neff > p.s             # its simulator program as text
//! nrt asm p.s -o EDITED.neff                      # a (hand-edited) program text into a NEFF
//! nrt ls                                          # devices and cores (like neuron-ls)
//! nrt build SPEC.toml -o MODEL.neff               # compile a spec into a simulator NEFF
//! nrt bench MODEL.neff --iterations 200           # latency p50/p99, throughput
//! nrt emulate --devices 2 -- ./app                # a program against emulated /dev/neuron*
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

mod args;
mod asm;
mod backend;
mod bench;
mod build;
mod emulate;
mod error;
mod graph;
mod info;
mod ls;
mod npy;
mod onnx;
mod out;
mod run;
mod spec;
mod svg;
mod tensors;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Cmd, TraceCmd};
use error::Result;

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

fn dispatch(cli: Cli) -> Result<ExitCode> {
    let done = match cli.cmd {
        // `emulate` exits with the program's status, not just success or failure.
        Cmd::Emulate(a) => return Ok(emulate::emulate(&a)),
        Cmd::Run(a) => run::run(&a),
        Cmd::Info(a) if a.program => asm::print_programs(&a.model),
        Cmd::Info(a) => info::info(&a.model),
        Cmd::Asm(a) => asm::asm(&a.files, &a.output, a.name.as_deref()),
        Cmd::Ls(a) => ls::ls(&a),
        Cmd::Build(a) if onnx::is_onnx(&a.spec) => onnx::build(&a.spec, &a.output, a.dtype),
        Cmd::Build(a) => build::build(&a.spec, &a.output, a.inputs_dir.as_deref()),
        Cmd::Bench(a) => bench::bench(&a),
        Cmd::Trace {
            cmd: TraceCmd::Render(a),
        } => svg::render_file(&a.file, &a.output, a.queues, a.width),
    };
    done.map(|()| ExitCode::SUCCESS)
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
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("error: {}", e.one_line());
            ExitCode::from(e.code())
        }
        Err(_) => ExitCode::from(101),
    }
}
