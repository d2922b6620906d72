//! `nrt run`: load, execute through the runtime, summarise; on the simulator, per-engine
//! counters and the timeline from a second run of the same program on the engine.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nrt_core::io::{TensorInfo, TensorUsage};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{Driver, Runtime};
use nrt_linux::LinuxDriver;
use nrt_sim::engine::{
    Counters, Device, EngineId, ExecOptions, ExecReport, TICKS_PER_SECOND, TIMING_MODEL,
    TensorKind, trace,
};
use nrt_sim::{Instance, SimDriver};

use crate::backend::{
    Backend, CliHost, InputSource, Model, Rt, Source, gather_inputs, init, lnc_hint, load_model,
    rt_err,
};
use crate::error::{CliError, Context, Result, bail};
use crate::out::{self, Report};
use crate::tensors::{self, dtype_name, shape_str};
use crate::{RunArgs, npy};

/// The runtime's tensors for one execution: inputs written, outputs allocated.
pub(crate) fn tensor_sets<'rt, D: Driver + Sync>(
    rt: &'rt Rt<D>,
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

/// What a run through the runtime gave.
#[derive(Debug)]
pub(crate) struct RuntimeRun {
    pub(crate) load: Duration,
    pub(crate) exec: Vec<Duration>,
    pub(crate) outputs: Vec<(TensorInfo, Vec<u8>)>,
    pub(crate) plumbing: bool,
    pub(crate) vnc: u32,
}

/// Runs `model` `repeat` times on an initialised-here runtime, then unloads and closes.
fn run_on<D: Driver + Sync>(
    rt: &Rt<D>,
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
    })
}

/// A run of one subgraph's program directly on a simulated device.
#[derive(Debug)]
pub(crate) struct EngineRun {
    pub(crate) report: ExecReport,
    pub(crate) outputs: Vec<(String, Vec<u8>)>,
    pub(crate) host: Duration,
}

/// Runs each program of `model` on a fresh simulated device of `instance` (subgraph `i` on
/// physical core `i`), with the same inputs.
pub(crate) fn engine_runs(
    instance: Instance,
    model: &Model,
    inputs: &[(TensorInfo, Vec<u8>, InputSource)],
    record_events: bool,
) -> Result<Vec<EngineRun>> {
    let mut runs = Vec::new();
    let mut dev = Device::new(instance);
    for (i, program) in model.programs.iter().enumerate() {
        let core = i as u32 % instance.cores_per_device().max(1);
        let lp = dev
            .load(core, program.clone())
            .map_err(|e| CliError::new(format!("simulator: {}", e.message())))?;
        let refs: Vec<(&str, &[u8])> = program
            .tensors
            .iter()
            .filter(|t| t.kind == TensorKind::Input)
            .filter_map(|t| {
                inputs
                    .iter()
                    .find(|(info, _, _)| info.name == t.name)
                    .map(|(info, b, _)| (info.name.as_str(), b.as_slice()))
            })
            .collect();
        let opts = ExecOptions {
            record_events,
            ..ExecOptions::default()
        };
        let t = Instant::now();
        let (outputs, report) = dev
            .run(&lp, &refs, &opts)
            .map_err(|e| CliError::new(format!("simulator: {}", e.message())))?;
        let host = t.elapsed();
        runs.push(EngineRun {
            report,
            outputs,
            host,
        });
    }
    Ok(runs)
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
pub(crate) fn inputs_table(r: &mut Report, inputs: &[(TensorInfo, Vec<u8>, InputSource)]) {
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
                    InputSource::Sample => "sample data from the spec".into(),
                    InputSource::Zero => "not given: zero-filled".into(),
                },
            ]
        })
        .collect();
    r.table("  ", &["name", "dtype", "shape", "data"], &rows, "llll");
}

fn write_outputs(dir: &Path, outputs: &[(TensorInfo, Vec<u8>)]) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).context(|| format!("cannot create '{}'", dir.display()))?;
    let mut written = Vec::new();
    for (t, bytes) in outputs {
        let file: String = t
            .name
            .chars()
            .map(|c| {
                if c.is_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file}.npy"));
        let data = npy::to_bytes(&tensors::to_npy(t, bytes)).map_err(CliError::new)?;
        std::fs::write(&path, data).context(|| format!("cannot write '{}'", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

pub(crate) fn run(a: &RunArgs) -> Result<()> {
    let instance = a.target.instance()?;
    let model = load_model(&a.model)?;
    let inputs = gather_inputs(&model, &a.input)?;
    let hint = lnc_hint(&model, a.target.backend, instance);
    let (rr, backend_line, runtime_ticks) = match a.target.backend {
        Backend::Sim => {
            let driver = SimDriver::new(instance, 1);
            let machine = Arc::clone(driver.machine());
            let rt = Runtime::with_host(driver, CliHost::new());
            let rr = run_on(&rt, "sim", &model, &inputs, a.repeat, &hint)?;
            let line = format!(
                "sim: simulated {} (1 device, funtime), model on logical core {}",
                instance.name(),
                rr.vnc
            );
            (rr, line, Some(machine.last_ticks()))
        }
        Backend::Linux => {
            let rt = Runtime::with_host(LinuxDriver::new(), CliHost::new());
            let rr = run_on(&rt, "linux", &model, &inputs, a.repeat, &hint)?;
            let line = format!("linux: /dev/neuron*, model on logical core {}", rr.vnc);
            (rr, line, None)
        }
    };

    let mut r = Report::new();
    r.field("model", model_line(&model));
    r.field("backend", backend_line);
    if rr.plumbing {
        r.field(
            "mode",
            "PLUMBING — this NEFF carries no simulator program (compiler output): the runtime \
             loaded and executed it, but nothing was computed. The outputs are zero-filled; there \
             are no counters, simulated time or trace.",
        );
    }
    inputs_table(&mut r, &inputs);
    r.line("outputs");
    let rows: Vec<Vec<String>> = rr
        .outputs
        .iter()
        .map(|(t, b)| {
            vec![
                t.name.clone(),
                dtype_name(t.dtype).into(),
                shape_str(&t.shape),
                tensors::summary(t.dtype, b, 6),
            ]
        })
        .collect();
    r.table("  ", &["name", "dtype", "shape", "values"], &rows, "llll");
    if let Some(dir) = &a.output_dir {
        let written = write_outputs(dir, &rr.outputs)?;
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
    let mut engine = String::new();
    if rr.plumbing {
        if a.trace.is_some() {
            eprintln!("warning: no trace written: nothing executes in plumbing mode");
        }
    } else if let Some(ticks) = runtime_ticks {
        let runs = engine_runs(instance, &model, &inputs, a.trace.is_some())?;
        let same = runs.iter().all(|er| {
            er.outputs.iter().all(|(name, bytes)| {
                rr.outputs
                    .iter()
                    .find(|(t, _)| &t.name == name)
                    .is_none_or(|(_, b)| b == bytes)
            })
        });
        let report_ticks = runs.iter().map(|er| er.report.ticks).max().unwrap_or(0);
        let engine_host: Duration = runs.iter().map(|er| er.host).sum();
        engine = format!(", engine re-run {}", out::secs(engine_host.as_secs_f64()));
        r.line("");
        r.field(
            "simulated",
            format!(
                "{} — timing model {TIMING_MODEL}, not validated against hardware",
                sim_time(ticks)
            ),
        );
        for (i, er) in runs.iter().enumerate() {
            if runs.len() > 1 {
                r.line(format!(
                    "engines of subgraph {i} (physical core {i}), in ticks"
                ));
            } else {
                r.line(format!(
                    "engines (ticks; active + idle + waits = {} for every unit)",
                    out::int(er.report.ticks)
                ));
            }
            counters_table(&mut r, &er.report);
        }
        r.field(
            "counters",
            format!(
                "from re-running the program on the simulator engine with the same inputs (the \
                 runtime's execute path does not return them): outputs {}, {} ticks",
                if same {
                    "bit-identical to the runtime's"
                } else {
                    "DIFFER from the runtime's (please report)"
                },
                if report_ticks == ticks {
                    "same".to_owned()
                } else {
                    out::int(report_ticks)
                }
            ),
        );
        if let (Some(path), Some(er)) = (&a.trace, runs.first()) {
            let json = trace::chrome_trace_json(&er.report);
            std::fs::write(path, json).context(|| format!("cannot write '{}'", path.display()))?;
            trace_written = Some((
                path.display().to_string(),
                er.report.events.len(),
                er.report.events_truncated,
            ));
        }
        if !same {
            r.print();
            bail!("the engine re-run's outputs differ from the runtime's");
        }
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
            "load {}, execute {}{repeat}{engine}",
            out::secs(rr.load.as_secs_f64()),
            out::secs(mean)
        ),
    );
    if let Some((path, events, truncated)) = trace_written {
        r.field(
            "trace",
            format!(
                "{path} ({} events{}); draw it with: nrt trace render {path} -o timeline.svg",
                out::int(events as u64),
                if truncated { ", truncated" } else { "" }
            ),
        );
    }
    r.print();
    Ok(())
}
