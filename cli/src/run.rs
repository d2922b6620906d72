//! `nrt run`: load, execute through the runtime, summarise; on the simulator, the per-engine
//! counters, simulated time and timeline of the last execution, from the report the simulator
//! kept of it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nrt_backend::BackendKind;
use nrt_core::io::{TensorInfo, TensorUsage};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{ModelHandle, Runtime};
use nrt_sim::Reports;
use nrt_sim::engine::{
    self, Counters, EngineId, ExecReport, TICKS_PER_SECOND, TIMING_MODEL, trace,
};

use crate::args::RunArgs;
use crate::backend::{CliHost, InputSource, Model, Rt, Source, choose, init, rt_err};
use crate::error::{CliError, Context, Result, bail};
use crate::npy;
use crate::out::{self, Report};
use crate::tensors::{self, dtype_name, shape_str};

/// The runtime's tensors for one execution: inputs written, outputs allocated.
pub(crate) fn tensor_sets<'rt>(
    rt: &'rt Rt,
    inputs: &[(TensorInfo, Vec<u8>, InputSource)],
    outputs: &[TensorInfo],
) -> Result<(TensorSet<'rt>, TensorSet<'rt>)> {
    let mut is = TensorSet::new();
    for (t, bytes, _) in inputs {
        let x = rt
            .tensor_allocate(TensorPlacement::Device, 0, t.size, &t.name)
            .map_err(rt_err(format!("cannot allocate input '{}'", t.name)))?;
        x.write(0, bytes)
            .map_err(rt_err(format!("cannot write input '{}'", t.name)))?;
        is.add(&t.name, x);
    }
    let mut os = TensorSet::new();
    for t in outputs {
        let x = rt
            .tensor_allocate(TensorPlacement::Device, 0, t.size, &t.name)
            .map_err(rt_err(format!("cannot allocate output '{}'", t.name)))?;
        os.add(&t.name, x);
    }
    Ok((is, os))
}

/// What the simulator kept of the last execution of one subgraph of a model.
#[derive(Debug)]
pub(crate) struct SubgraphReport {
    /// The subgraph's index in the model.
    pub(crate) index: usize,
    /// The absolute physical core it is staged on.
    pub(crate) pnc: u32,
    /// The core's last report (`None` in plumbing mode, or when the machine keeps none).
    pub(crate) report: Option<Arc<ExecReport>>,
}

/// The reports of the last execution of model `h` on the physical cores of its subgraphs, as
/// the simulator kept them (empty on another backend). Call it while the model is loaded.
pub(crate) fn subgraph_reports(rt: &Rt, h: ModelHandle) -> Vec<SubgraphReport> {
    let Some(sim) = rt.driver().as_sim() else {
        return Vec::new();
    };
    let machine = sim.machine();
    let Ok(model) = rt.model(h) else {
        return Vec::new();
    };
    model
        .staged()
        .iter()
        .enumerate()
        .filter_map(|(index, s)| {
            let pnc = machine.staged_pnc(s.handle)?;
            Some(SubgraphReport {
                index,
                pnc,
                report: machine.last_report(pnc),
            })
        })
        .collect()
}

/// What a run through the runtime gave.
#[derive(Debug)]
pub(crate) struct RuntimeRun {
    pub(crate) load: Duration,
    pub(crate) exec: Vec<Duration>,
    pub(crate) outputs: Vec<(TensorInfo, Vec<u8>)>,
    pub(crate) plumbing: bool,
    pub(crate) vnc: u32,
    /// The simulator's reports of the last execution, per subgraph.
    pub(crate) reports: Vec<SubgraphReport>,
}

/// Runs `model` `repeat` times on an initialised-here runtime, then unloads and closes.
fn run_on(
    rt: &Rt,
    backend: &str,
    model: &Model,
    inputs: &[(TensorInfo, Vec<u8>, InputSource)],
    repeat: u32,
    hint: &str,
) -> Result<RuntimeRun> {
    init(rt, backend)?;
    let t = Instant::now();
    let h = rt.load(&model.bytes, 0, -1).map_err(|e| {
        CliError::new(format!(
            "cannot load {}: {}{hint}",
            model.path.display(),
            e.message()
        ))
    })?;
    let load = t.elapsed();
    let plumbing = rt.model(h).map(|m| m.is_plumbing()).unwrap_or(false);
    let vnc = rt.model_lnc(h).unwrap_or(0);
    let out_infos = model.tensors(TensorUsage::Output);
    let mut exec = Vec::new();
    let mut outputs = Vec::new();
    {
        let (is, os) = tensor_sets(rt, inputs, &out_infos)?;
        for _ in 0..repeat {
            let t = Instant::now();
            rt.execute(h, &is, &os)
                .map_err(rt_err("execution failed"))?;
            exec.push(t.elapsed());
        }
        for t in out_infos {
            let n = usize::try_from(t.size)
                .map_err(|_| CliError::new(format!("output '{}' is too large", t.name)))?;
            let mut buf = vec![0u8; n];
            os.get(&t.name)
                .and_then(|x| x.read(0, &mut buf))
                .map_err(rt_err(format!("cannot read output '{}'", t.name)))?;
            outputs.push((t, buf));
        }
    }
    let reports = subgraph_reports(rt, h);
    rt.unload(h).map_err(rt_err("cannot unload the model"))?;
    rt.close();
    for e in rt.host().take_errors() {
        eprintln!("warning: the runtime logged an error: {e}");
    }
    Ok(RuntimeRun {
        load,
        exec,
        outputs,
        plumbing,
        vnc,
        reports,
    })
}

fn counters_row(name: &str, c: &Counters, ticks: u64, count: u64) -> Vec<String> {
    vec![
        name.to_owned(),
        out::int(c.active),
        out::int(c.idle),
        out::int(c.stall_semaphore),
        out::int(c.stall_port),
        out::int(c.stall_dma),
        out::int(c.stall_bandwidth),
        out::pct(c.active, ticks),
        out::int(count),
    ]
}

/// The per-engine counter table of a report.
pub(crate) fn counters_table(r: &mut Report, report: &ExecReport) {
    let mut rows = Vec::new();
    for e in EngineId::ALL {
        let c = report.engine(e);
        rows.push(counters_row(e.name(), c, report.ticks, c.instructions));
    }
    let mut dma = Counters::default();
    let mut used = 0;
    for c in &report.dma_engines {
        if c.active > 0 {
            used += 1;
        }
        dma.active += c.active;
        dma.idle += c.idle;
        dma.stall_semaphore += c.stall_semaphore;
        dma.stall_port += c.stall_port;
        dma.stall_dma += c.stall_dma;
        dma.stall_bandwidth += c.stall_bandwidth;
        dma.instructions += c.instructions;
        dma.bytes += c.bytes;
    }
    let n = report.dma_engines.len() as u64;
    let mut row = counters_row(
        &format!("DMA ({used}/{n} used, mean)"),
        &Counters {
            active: dma.active / n.max(1),
            idle: dma.idle / n.max(1),
            stall_semaphore: dma.stall_semaphore / n.max(1),
            stall_port: dma.stall_port / n.max(1),
            stall_dma: dma.stall_dma / n.max(1),
            stall_bandwidth: dma.stall_bandwidth / n.max(1),
            ..Counters::default()
        },
        report.ticks,
        dma.instructions,
    );
    if let Some(last) = row.last_mut() {
        *last = format!(
            "{} desc, {}",
            out::int(dma.instructions),
            out::bytes(dma.bytes)
        );
    }
    rows.push(row);
    r.table(
        "  ",
        &[
            "unit",
            "active",
            "idle",
            "sem wait",
            "port wait",
            "dma wait",
            "bw stall",
            "busy",
            "instructions",
        ],
        &rows,
        "lrrrrrrrr",
    );
}

/// Simulated time of `ticks`.
pub(crate) fn sim_time(ticks: u64) -> String {
    format!(
        "{} ticks = {} (1 tick = 1 cycle at 1.4 GHz)",
        out::int(ticks),
        out::secs(ticks as f64 / TICKS_PER_SECOND as f64)
    )
}

/// The model line of a summary.
pub(crate) fn model_line(model: &Model) -> String {
    let n = model.neff.subgraphs.len();
    match &model.source {
        Source::Spec { kernel, .. } => format!(
            "{} (built in memory from {}: {kernel}; {} NEFF, {n} subgraph{})",
            model.neff.name(),
            model.path.display(),
            out::bytes(model.bytes.len() as u64),
            if n == 1 { "" } else { "s" }
        ),
        Source::Neff => format!(
            "{} ({}, {}, {n} subgraph{})",
            model.neff.name(),
            model.path.display(),
            out::bytes(model.bytes.len() as u64),
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// The input table of a summary.
pub(crate) fn inputs_table(
    r: &mut Report,
    inputs: &[(TensorInfo, Vec<u8>, InputSource)],
    onnx: bool,
) {
    if inputs.is_empty() {
        r.field("inputs", "none");
        return;
    }
    r.line("inputs");
    let rows: Vec<Vec<String>> = inputs
        .iter()
        .map(|(t, _, src)| {
            vec![
                t.name.clone(),
                dtype_name(t.dtype).into(),
                shape_str(&t.shape),
                match src {
                    InputSource::File(f) => format!("from {f}"),
                    InputSource::Sample if onnx => {
                        "not given: seeded random data, uniform in [-1, 1)".into()
                    }
                    InputSource::Sample => "sample data from the spec".into(),
                    InputSource::Zero => "not given: zero-filled".into(),
                },
            ]
        })
        .collect();
    r.table("  ", &["name", "dtype", "shape", "data"], &rows, "llll");
}

fn write_outputs(
    dir: &Path,
    outputs: &[(TensorInfo, Vec<u8>)],
    imported: Option<&crate::onnx::Imported>,
) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).context(|| format!("cannot create '{}'", dir.display()))?;
    let mut written = Vec::new();
    let arrays = outputs
        .iter()
        .map(|(t, bytes)| (t.name.clone(), crate::onnx::output_npy(imported, t, bytes)))
        .chain(imported.map(crate::onnx::empty_outputs).unwrap_or_default());
    for (name, array) in arrays {
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file}.npy"));
        let data = npy::to_bytes(&array).map_err(CliError::new)?;
        std::fs::write(&path, data).context(|| format!("cannot write '{}'", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

/// The `counters` line: which execution the counters are from.
fn counters_source(repeat: u32, reports: &[SubgraphReport]) -> String {
    let which = if repeat == 1 {
        "the execution above".to_owned()
    } else {
        format!("the last of the {repeat} executions above")
    };
    let cores: Vec<String> = reports.iter().map(|s| s.pnc.to_string()).collect();
    format!(
        "from the report the simulator kept of {which}, made through the runtime (physical core{} {})",
        if cores.len() == 1 { "" } else { "s" },
        cores.join(", ")
    )
}

/// The `engine` line: how many program runs the engine made in this process, and what they
/// were (one per subgraph program of each execution).
pub(crate) fn program_runs_line(runs: u64, executions: u64, programs: u64) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        if n == 1 {
            format!("{n} {one}")
        } else {
            format!("{n} {many}")
        }
    };
    let what = plural(runs, "program run", "program runs");
    let executions_above = if executions == 1 {
        "the execution above".to_owned()
    } else {
        format!("the {executions} executions above")
    };
    if programs == 0 {
        format!("{what} in this process (plumbing mode: nothing runs on the engine)")
    } else if runs == executions.saturating_mul(programs) {
        if programs == 1 {
            format!("{what} in this process ({executions_above})")
        } else {
            format!("{what} in this process ({programs} subgraph programs × {executions_above})")
        }
    } else {
        format!("{what} in this process")
    }
}

pub(crate) fn run(a: &RunArgs) -> Result<()> {
    // The simulator keeps each core's last report: counters always, the event log for a trace
    // (every DMA descriptor too), the log without descriptors for an ONNX model's per-node
    // timing.
    let reports = if a.trace.is_some() {
        Reports::Events
    } else if crate::onnx::is_onnx(&a.model) {
        Reports::Transfers
    } else {
        Reports::Counters
    };
    let chosen = choose(a.target.backend, a.target.instance, None, reports)?;
    let (model, imported, inputs) = crate::onnx::load_with_inputs(&a.model, &a.input, a.dtype)?;
    let hint = chosen.lnc_hint(&model);
    let rt = Runtime::with_host(chosen.open(), CliHost::new());
    let rr = run_on(&rt, chosen.name(), &model, &inputs, a.repeat, &hint)?;
    let sim = chosen.kind == BackendKind::Sim;

    let mut r = Report::new();
    r.field("model", model_line(&model));
    r.field("backend", chosen.line(rr.vnc));
    if rr.plumbing {
        r.field(
            "mode",
            "PLUMBING — this NEFF carries no simulator program (compiler output): the runtime \
             loaded and executed it, but nothing was computed. The outputs are zero-filled; there \
             are no counters, simulated time or trace.",
        );
    }
    inputs_table(&mut r, &inputs, imported.is_some());
    if let Some(imp) = &imported {
        imp.bound_field(&mut r);
        imp.folded_field(&mut r);
    }
    r.line("outputs");
    let rows: Vec<Vec<String>> = rr
        .outputs
        .iter()
        .map(|(t, b)| {
            // NEFFs have no boolean type: a bool graph output is a uint8 tensor.
            let is_bool = imported.as_ref().is_some_and(|i| {
                i.outputs
                    .iter()
                    .any(|o| o.name == t.name && o.elem == nrt_onnx::Elem::Bool)
            });
            vec![
                t.name.clone(),
                if is_bool {
                    "bool (uint8)".into()
                } else {
                    dtype_name(t.dtype).into()
                },
                shape_str(&t.shape),
                tensors::summary(t.dtype, b, 6),
            ]
        })
        .collect();
    r.table("  ", &["name", "dtype", "shape", "values"], &rows, "llll");
    if let Some(dir) = &a.output_dir {
        let written = write_outputs(dir, &rr.outputs, imported.as_ref())?;
        let bf16 = rr
            .outputs
            .iter()
            .any(|(t, _)| t.dtype == nrt_core::io::Dtype::Bfloat16);
        r.field(
            "saved",
            format!(
                "{}{}",
                written.join(", "),
                if bf16 {
                    " (bf16 saved as float32, exactly)"
                } else {
                    ""
                }
            ),
        );
    }

    let mut trace_written = None;
    if rr.plumbing {
        if a.trace.is_some() {
            eprintln!("warning: no trace written: nothing executes in plumbing mode");
        }
    } else if sim {
        let recorded: Vec<(&SubgraphReport, &ExecReport)> = rr
            .reports
            .iter()
            .filter_map(|s| s.report.as_deref().map(|report| (s, report)))
            .collect();
        if recorded.is_empty() || recorded.len() != rr.reports.len() {
            r.print();
            bail!("the simulator kept no report of the execution (please report)");
        }
        // The logical core is done when its slowest subgraph is.
        let ticks = recorded.iter().map(|(_, x)| x.ticks).max().unwrap_or(0);
        r.line("");
        r.field(
            "simulated",
            format!(
                "{}{} — timing model {TIMING_MODEL}, not validated against hardware",
                sim_time(ticks),
                if recorded.len() > 1 {
                    format!(" (the slowest of {} subgraphs)", recorded.len())
                } else {
                    String::new()
                }
            ),
        );
        for (s, report) in &recorded {
            if recorded.len() > 1 {
                r.line(format!(
                    "engines of subgraph {} (physical core {}), in ticks",
                    s.index, s.pnc
                ));
            } else {
                r.line(format!(
                    "engines (ticks; active + idle + waits = {} for every unit)",
                    out::int(report.ticks)
                ));
            }
            counters_table(&mut r, report);
        }
        r.field("counters", counters_source(a.repeat, &rr.reports));
        let mut node_times = Vec::new();
        if let (Some(imp), Some((_, report))) = (&imported, recorded.first()) {
            node_times = crate::onnx::node_table(&mut r, imp, report);
        }
        if let (Some(path), Some((s, report))) = (&a.trace, recorded.first()) {
            let mut json = trace::chrome_trace_json(report);
            if let Some(imp) = &imported {
                json = crate::onnx::trace_with_nodes(json, imp, &node_times);
            }
            std::fs::write(path, json).context(|| format!("cannot write '{}'", path.display()))?;
            trace_written = Some((
                path.display().to_string(),
                report.events.len(),
                report.events_truncated,
                (recorded.len() > 1).then_some(s.index),
            ));
        }
    }
    if sim {
        r.field(
            "engine",
            program_runs_line(
                engine::program_runs(),
                u64::from(a.repeat),
                model.programs.len() as u64,
            ),
        );
    }
    let exec_total: Duration = rr.exec.iter().sum();
    let n = rr.exec.len().max(1) as u32;
    let mean = (exec_total / n).as_secs_f64();
    let repeat = if n == 1 {
        String::new()
    } else {
        format!(" (mean of {n})")
    };
    r.field(
        "host time",
        format!(
            "load {}, execute {}{repeat}",
            out::secs(rr.load.as_secs_f64()),
            out::secs(mean)
        ),
    );
    if let Some((path, events, truncated, subgraph)) = trace_written {
        r.field(
            "trace",
            format!(
                "{path} ({} events{}{}); draw it with: nrt trace render {path} -o timeline.svg",
                out::int(events as u64),
                if truncated { ", truncated" } else { "" },
                subgraph.map_or(String::new(), |i| format!(", subgraph {i}"))
            ),
        );
    }
    r.print();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_line_says_what_ran() {
        assert_eq!(
            program_runs_line(1, 1, 1),
            "1 program run in this process (the execution above)"
        );
        assert_eq!(
            program_runs_line(3, 3, 1),
            "3 program runs in this process (the 3 executions above)"
        );
        assert_eq!(
            program_runs_line(4, 2, 2),
            "4 program runs in this process (2 subgraph programs × the 2 executions above)"
        );
        assert_eq!(
            program_runs_line(0, 1, 0),
            "0 program runs in this process (plumbing mode: nothing runs on the engine)"
        );
        assert_eq!(program_runs_line(5, 1, 1), "5 program runs in this process");
    }
}
