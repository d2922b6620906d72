//! `nrt bench`: execution latency (p50/p99) and throughput through the runtime, with the
//! simulated time of one execution (from the report the simulator kept of the last one).

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use nrt_backend::BackendKind;
use nrt_core::Runtime;
use nrt_core::io::{TensorInfo, TensorUsage};
use nrt_sim::Reports;
use nrt_sim::engine::{self, TICKS_PER_SECOND, TIMING_MODEL};

use crate::args::BenchArgs;
use crate::backend::{CliHost, InputSource, Model, Rt, choose, init, rt_err};
use crate::error::{CliError, Result};
use crate::out::{self, Report};
use crate::run::{
    inputs_table, model_line, program_runs_line, sim_time, subgraph_reports, tensor_sets,
};

/// Timed executions at least this many get a progress bar (shown only on a terminal).
const PROGRESS_FROM: u32 = 20;

#[derive(Debug)]
struct BenchResult {
    latencies: Vec<Duration>,
    wall: Duration,
    plumbing: bool,
    vnc: u32,
    /// Simulated ticks of the last execution (its slowest subgraph), from the simulator's
    /// report; `None` off the simulator or in plumbing mode.
    ticks: Option<u64>,
    /// The simulator's report of the last execution (first subgraph).
    report: Option<std::sync::Arc<nrt_sim::engine::ExecReport>>,
}

/// The nearest-rank percentile `p` (0–100) of sorted values.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .copied()
        .unwrap_or_default()
}

fn bench_on(
    rt: &Rt,
    backend: &str,
    model: &Model,
    inputs: &[(TensorInfo, Vec<u8>, InputSource)],
    a: &BenchArgs,
    hint: &str,
) -> Result<BenchResult> {
    init(rt, backend)?;
    let h = rt.load(&model.bytes, 0, -1).map_err(|e| {
        CliError::new(format!(
            "cannot load {}: {}{hint}",
            model.path.display(),
            e.message()
        ))
    })?;
    let plumbing = rt.model(h).map(|m| m.is_plumbing()).unwrap_or(false);
    let vnc = rt.model_lnc(h).unwrap_or(0);
    let outs = model.tensors(TensorUsage::Output);
    {
        let (is, os) = tensor_sets(rt, inputs, &outs)?;
        for _ in 0..a.warmup {
            rt.execute(h, &is, &os)
                .map_err(rt_err("execution failed"))?;
        }
    }
    let pb = if a.iterations >= PROGRESS_FROM {
        ProgressBar::new(u64::from(a.iterations))
    } else {
        ProgressBar::hidden()
    };
    if let Ok(style) = ProgressStyle::with_template(
        "{bar:40.cyan/blue} {pos}/{len} executions  {per_sec}  eta {eta}",
    ) {
        pb.set_style(style);
    }
    let t0 = Instant::now();
    let per_thread: Vec<Result<Vec<Duration>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads)
            .map(|i| {
                let n = a.iterations / a.threads + u32::from(i < a.iterations % a.threads);
                let (outs, pb) = (&outs, &pb);
                s.spawn(move || -> Result<Vec<Duration>> {
                    let (is, os) = tensor_sets(rt, inputs, outs)?;
                    let mut v = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let t = Instant::now();
                        rt.execute(h, &is, &os)
                            .map_err(rt_err("execution failed"))?;
                        v.push(t.elapsed());
                        pb.inc(1);
                    }
                    Ok(v)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::new("a benchmark thread panicked")))
            })
            .collect()
    });
    let wall = t0.elapsed();
    pb.finish_and_clear();
    let mut latencies = Vec::new();
    for r in per_thread {
        latencies.extend(r?);
    }
    let reports = subgraph_reports(rt, h);
    let ticks = reports
        .iter()
        .filter_map(|s| s.report.as_ref().map(|x| x.ticks))
        .max();
    let report = reports.first().and_then(|s| s.report.clone());
    rt.unload(h).map_err(rt_err("cannot unload the model"))?;
    rt.close();
    for e in rt.host().take_errors() {
        eprintln!("warning: the runtime logged an error: {e}");
    }
    Ok(BenchResult {
        latencies,
        wall,
        plumbing,
        vnc,
        ticks,
        report,
    })
}

pub(crate) fn bench(a: &BenchArgs) -> Result<()> {
    let chosen = choose(a.target.backend, a.target.instance, None, Reports::Counters)?;
    let (model, imported, inputs) = crate::onnx::load_with_inputs(&a.model, &a.input, a.dtype)?;
    let hint = chosen.lnc_hint(&model);
    let rt = Runtime::with_host(chosen.open(), CliHost::new());
    let res = bench_on(&rt, chosen.name(), &model, &inputs, a, &hint)?;
    let ticks = res.ticks;
    let mut sorted = res.latencies.clone();
    sorted.sort();
    let n = sorted.len().max(1) as u32;
    let mean = sorted.iter().sum::<Duration>() / n;
    let ms = |d: Duration| out::secs(d.as_secs_f64());

    let mut r = Report::new();
    r.field("model", model_line(&model));
    r.field("backend", chosen.line(res.vnc));
    inputs_table(&mut r, &inputs, imported.is_some());
    if let Some(imp) = &imported {
        imp.bound_field(&mut r);
    }
    r.field(
        "runs",
        format!(
            "{} timed executions on {} thread{} (+{} warm-up); each thread has its own tensors",
            out::int(sorted.len() as u64),
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            a.warmup
        ),
    );
    r.field(
        "latency",
        format!(
            "p50 {}  p99 {}  (mean {}, min {}, max {}) — host wall-clock per execute call",
            ms(percentile(&sorted, 50.0)),
            ms(percentile(&sorted, 99.0)),
            ms(mean),
            ms(sorted.first().copied().unwrap_or_default()),
            ms(sorted.last().copied().unwrap_or_default())
        ),
    );
    let secs = res.wall.as_secs_f64();
    r.field(
        "throughput",
        format!(
            "{} executions/s on the host ({} executions in {})",
            out::rate(if secs > 0.0 {
                sorted.len() as f64 / secs
            } else {
                0.0
            }),
            out::int(sorted.len() as u64),
            out::secs(secs)
        ),
    );
    match ticks {
        _ if res.plumbing => r.field(
            "simulated",
            "none: PLUMBING MODE — this NEFF carries no simulator program (compiler output); \
             executions compute nothing and zero-fill the outputs",
        ),
        Some(t) if t > 0 => {
            r.field(
                "simulated",
                format!(
                    "{} per execution → {} executions/s on one NeuronCore (the simulator's \
                     report of the last execution; timing model {TIMING_MODEL}, not validated \
                     against hardware)",
                    sim_time(t),
                    out::rate(TICKS_PER_SECOND as f64 / t as f64)
                ),
            );
            r.field(
                "note",
                "host times measure the simulator on this machine, not the device; threads share \
                 one simulated device, which runs one execution at a time; the first clean \
                 execution at a set of tensor addresses checks for hazards, later ones there \
                 skip the check (docs/SIM_ISA.md)",
            );
            if let (Some(imp), Some(report)) = (&imported, &res.report) {
                crate::onnx::node_table(&mut r, imp, report);
            }
        }
        _ => {}
    }
    if chosen.kind == BackendKind::Sim {
        r.field(
            "engine",
            program_runs_line(
                engine::program_runs(),
                u64::from(a.warmup) + u64::from(a.iterations),
                model.programs.len() as u64,
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
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&v[..1], 99.0), Duration::from_millis(1));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }
}
