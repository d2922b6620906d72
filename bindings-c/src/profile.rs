//! `nrt_profile.h`, device profiles: `nrt_profile_start` / `nrt_profile_stop` (every execution
//! of one model between the two) and continuous profiling (the latest execution of each core,
//! written on request).
//!
//! A device profile on the simulator is what the engine recorded of each program run (its
//! report with the event log, which the machine keeps while a profile is on): the per-engine
//! timeline as Chrome/Perfetto trace-event JSON — the engine's own trace
//! ([`nrt_sim::engine::trace::chrome_trace_json`]) of each execution, placed one after the other
//! on one time axis, with an `executions` lane naming them — and a summary (simulated time,
//! per-engine busy share, DMA bytes of each execution) in the trace's `otherData.summary` and
//! in `<file>.summary.json`. `nrt trace render` draws the trace. The Linux backend cannot
//! execute, so these functions are unsupported there.

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nrt_core::events::RuntimeEvent;
use nrt_core::{Error, NrtStatus, err};
use nrt_sim::engine::trace::chrome_trace_json;
use nrt_sim::engine::{EngineId, ExecReport, TICKS_PER_SECOND};
use nrt_sim::{Reports, SimMachine};
use serde_json::Value;

use crate::ffi_util::logged;
use crate::handles::Objects;
use crate::sys_trace::{CONSUMER_PROFILE, inspect_device_profiles, set_active, set_listener};
use crate::trace_store::{json_str, now_ns};
use crate::{cstr, invalid, model_of, out, put, rt};

/// Simulated ticks left between two executions on a profile's time axis.
const GAP_TICKS: u64 = 1_400;
/// `tid` of the lane naming the executions: below 16, where `nrt trace render` draws the
/// engine lanes (the engines are 0–4).
const EXEC_LANE: i64 = 15;
/// `tid` offset of the second (third, …) physical core of a logical core (their lanes are
/// drawn by `nrt trace render` only with `--queues`; Perfetto shows them all).
const PNC_LANE_STRIDE: i64 = 10_000;

/// One profiled execution.
#[derive(Clone, Debug)]
pub(crate) struct ExecRecord {
    pub(crate) model: u32,
    pub(crate) nc: u32,
    pub(crate) seq: u64,
    pub(crate) status: NrtStatus,
    /// Host time at completion (ns since the Unix epoch).
    pub(crate) end_ns: u64,
    /// The report of each physical core that ran a program (none in plumbing mode).
    pub(crate) reports: Vec<(u32, Arc<ExecReport>)>,
}

// ---- the simulator's reports ---------------------------------------------------------------

/// The simulated machine, when the backend is the simulator; otherwise the log line and error
/// of an unsupported call.
pub(crate) fn sim_machine(function: &str) -> Result<Arc<SimMachine>, Error> {
    match crate::DRIVER.get().and_then(|d| d.as_sim()) {
        Some(sim) => Ok(Arc::clone(sim.machine())),
        None => Err(logged(err!(
            Failure,
            "{function} is not supported by nrt-rs on this backend: device profiles are the \
             simulator's execution reports, and only the simulator backend \
             (NEURON_RT_BACKEND=sim) executes models"
        ))),
    }
}

/// Reports kept before the first profiler turned them on (`None`: no profiler holds them).
static SAVED_REPORTS: Mutex<Option<(Reports, u32)>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Makes the machine keep event logs for one more profiler.
pub(crate) fn hold_reports(machine: &SimMachine) {
    let mut saved = lock(&SAVED_REPORTS);
    match saved.as_mut() {
        Some((_, n)) => *n += 1,
        None => {
            *saved = Some((machine.reports(), 1));
            machine.set_reports(Reports::Events);
        }
    }
}

/// Releases what [`hold_reports`] took; the last release restores the machine's setting.
pub(crate) fn release_reports(machine: &SimMachine) {
    let mut saved = lock(&SAVED_REPORTS);
    if let Some((prev, n)) = saved.as_mut() {
        *n -= 1;
        if *n == 0 {
            machine.set_reports(*prev);
            *saved = None;
        }
    }
}

/// The record of a completed execution, with the reports its subgraphs left on the machine.
pub(crate) fn exec_record(e: &RuntimeEvent<'_>) -> Option<ExecRecord> {
    let RuntimeEvent::ExecCompleted {
        model,
        lnc,
        seq,
        status,
        staged,
        ..
    } = *e
    else {
        return None;
    };
    let machine = crate::DRIVER.get().and_then(|d| d.as_sim())?.machine();
    let reports = staged
        .iter()
        .filter_map(|s| machine.staged_pnc(s.handle))
        .filter_map(|pnc| machine.last_report(pnc).map(|r| (pnc, r)))
        .collect();
    Some(ExecRecord {
        model,
        nc: lnc,
        seq,
        status,
        end_ns: now_ns(),
        reports,
    })
}

// ---- writing a profile -------------------------------------------------------------------------

/// Simulated ticks of an execution: its longest program run.
fn exec_ticks(r: &ExecRecord) -> u64 {
    r.reports
        .iter()
        .map(|(_, rep)| rep.ticks)
        .max()
        .unwrap_or(0)
}

fn us(ticks: u64) -> f64 {
    ticks as f64 * 1e6 / TICKS_PER_SECOND as f64
}

/// The summary of one execution, as a JSON object.
fn exec_summary(out: &mut String, index: usize, r: &ExecRecord) {
    let ticks = exec_ticks(r);
    let _ = write!(
        out,
        "{{\"execution\":{index},\"model_id\":{},\"nc_idx\":{},\"nrt_sequence_id\":{},\
         \"status\":\"{}\",\"completed_at_ns\":{},\"ticks\":{ticks},\"simulated_ns\":{:.3},\
         \"cores\":[",
        r.model,
        r.nc,
        r.seq,
        r.status.name(),
        r.end_ns,
        ticks as f64 * 1e9 / TICKS_PER_SECOND as f64
    );
    for (k, (pnc, rep)) in r.reports.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"physical_core\":{pnc},\"ticks\":{},\"engine_busy_percent\":{{",
            rep.ticks
        );
        for (i, e) in EngineId::ALL.iter().enumerate() {
            let active = rep.engine(*e).active;
            let pct = if rep.ticks == 0 {
                0.0
            } else {
                active as f64 * 100.0 / rep.ticks as f64
            };
            let _ = write!(
                out,
                "{}\"{}\":{pct:.3}",
                if i > 0 { "," } else { "" },
                e.name()
            );
        }
        let dma: u64 = rep.dma_engines.iter().map(|c| c.bytes).sum();
        let _ = write!(
            out,
            "}},\"dma_bytes\":{dma},\"events_truncated\":{}}}",
            rep.events_truncated
        );
    }
    out.push_str("]}");
}

/// The summary document of `records`.
pub(crate) fn summary_json(records: &[ExecRecord]) -> String {
    let mut s = String::from("{\"executions\":[");
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        exec_summary(&mut s, i + 1, r);
    }
    let total: u64 = records.iter().map(exec_ticks).sum();
    let _ = write!(
        s,
        "],\"execution_count\":{},\"total_ticks\":{total},\"ticks_per_second\":{TICKS_PER_SECOND}}}",
        records.len()
    );
    s
}

/// Appends the engine trace of one report to `events`, shifted by `offset` ticks, its lanes
/// moved by `lane` (and named after the physical core when `lane` is not 0).
fn append_report(
    events: &mut Vec<Value>,
    report: &ExecReport,
    offset: u64,
    lane: i64,
    exec: usize,
) -> Result<(), Error> {
    let doc: Value = serde_json::from_str(&chrome_trace_json(report))
        .map_err(|e| logged(err!(Failure, "The engine trace is not JSON: {e}")))?;
    let Some(list) = doc.get("traceEvents").and_then(Value::as_array) else {
        return Err(logged(err!(Failure, "The engine trace has no traceEvents")));
    };
    for ev in list {
        let Some(mut ev) = ev.as_object().cloned() else {
            continue;
        };
        let is_meta = ev.get("ph").and_then(Value::as_str) == Some("M");
        if is_meta && exec > 1 {
            continue;
        }
        if let Some(tid) = ev.get("tid").and_then(Value::as_i64) {
            ev.insert("tid".into(), Value::from(tid.saturating_add(lane)));
        }
        let ts = ev.get("ts").and_then(Value::as_f64);
        if let Some(ts) = ts {
            ev.insert("ts".into(), Value::from(ts + us(offset)));
        }
        if let Some(args) = ev.get_mut("args").and_then(Value::as_object_mut) {
            if ts.is_some() {
                args.insert("execution".into(), Value::from(exec));
            }
            if is_meta && lane != 0 {
                if let Some(name) = args.get("name").and_then(Value::as_str) {
                    let renamed = format!("pcore +{}: {name}", lane / PNC_LANE_STRIDE);
                    args.insert("name".into(), Value::from(renamed));
                }
            }
        }
        events.push(Value::Object(ev));
    }
    Ok(())
}

/// The trace document of `records`: the executions one after the other on one time axis.
pub(crate) fn trace_json(records: &[ExecRecord]) -> Result<String, Error> {
    let mut events = vec![
        serde_json::json!({"ph": "M", "name": "thread_name", "pid": 0, "tid": EXEC_LANE,
            "args": {"name": "executions"}}),
        serde_json::json!({"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": EXEC_LANE,
            "args": {"sort_index": -1}}),
    ];
    let mut offset = 0u64;
    for (i, r) in records.iter().enumerate() {
        let ticks = exec_ticks(r);
        events.push(serde_json::json!({
            "ph": "X", "cat": "execution", "pid": 0, "tid": EXEC_LANE,
            "name": format!("model {} execution {} ({})", r.model, i + 1, r.status.name()),
            "ts": us(offset), "dur": us(ticks),
            "args": {"execution": i + 1, "model_id": r.model, "nc_idx": r.nc,
                     "nrt_sequence_id": r.seq, "ticks": ticks}
        }));
        for (k, (_, rep)) in r.reports.iter().enumerate() {
            append_report(&mut events, rep, offset, k as i64 * PNC_LANE_STRIDE, i + 1)?;
        }
        offset += ticks + GAP_TICKS;
    }
    let summary: Value = serde_json::from_str(&summary_json(records))
        .map_err(|e| logged(err!(Failure, "The profile summary is not JSON: {e}")))?;
    let truncated = records
        .iter()
        .flat_map(|r| r.reports.iter())
        .any(|(_, rep)| rep.events_truncated);
    let doc = serde_json::json!({
        "displayTimeUnit": "ns",
        "otherData": {
            "timing_model": nrt_sim::engine::TIMING_MODEL,
            "validated_against_hw": nrt_sim::engine::VALIDATED_AGAINST_HW,
            "ticks": offset.saturating_sub(GAP_TICKS),
            "status": records.iter().map(|r| r.status).find(|s| *s != NrtStatus::Success)
                .unwrap_or(NrtStatus::Success).name(),
            "events_truncated": truncated,
            "summary": summary,
        },
        "traceEvents": events,
    });
    Ok(doc.to_string())
}

fn write_file(path: &Path, text: &str) -> Result<(), Error> {
    std::fs::write(path, text).map_err(|e| {
        logged(err!(
            Failure,
            "Failed to write the profile {}: {e}",
            path.display()
        ))
    })
}

/// Writes the trace of `records` to `path` and their summary to `<path>.summary.json`.
pub(crate) fn write_profile(path: &Path, records: &[ExecRecord]) -> Result<(), Error> {
    write_file(path, &trace_json(records)?)?;
    let mut summary = path.as_os_str().to_owned();
    summary.push(".summary.json");
    write_file(Path::new(&summary), &summary_json(records))
}

// ---- nrt_profile_start / stop ----------------------------------------------------------------

#[derive(Debug)]
struct Session {
    filename: String,
    model: u32,
    records: Vec<ExecRecord>,
}

/// The continuous profiler: the latest execution of each core.
#[derive(Debug, Default)]
struct Continuous {
    latest: BTreeMap<u32, ExecRecord>,
    saved: u64,
}

static SESSIONS: Mutex<Vec<Session>> = Mutex::new(Vec::new());
static CONTINUOUS: Mutex<Option<Continuous>> = Mutex::new(None);

fn on_event(e: &RuntimeEvent<'_>) {
    let RuntimeEvent::ExecCompleted { model, lnc, .. } = *e else {
        return;
    };
    let wanted = lock(&SESSIONS).iter().any(|s| s.model == model) || lock(&CONTINUOUS).is_some();
    if !wanted {
        return;
    }
    let Some(record) = exec_record(e) else { return };
    for s in lock(&SESSIONS).iter_mut().filter(|s| s.model == model) {
        s.records.push(record.clone());
    }
    if let Some(c) = lock(&CONTINUOUS).as_mut() {
        c.latest.insert(lnc, record);
    }
}

fn update_active() {
    let on = !lock(&SESSIONS).is_empty() || lock(&CONTINUOUS).is_some();
    set_listener(CONSUMER_PROFILE, on_event);
    set_active(CONSUMER_PROFILE, on);
}

fn filename_arg(filename: *const c_char) -> Result<String, Error> {
    // SAFETY: the exported functions' contract: NULL or NUL-terminated.
    match unsafe { cstr(filename) } {
        Some(f) if !f.is_empty() => Ok(f.into_owned()),
        Some(_) => Err(logged(err!(Invalid, "The profile filename is empty"))),
        None => Err(invalid("filename")),
    }
}

/// `nrt_profile_start`: records every execution of `model` until `nrt_profile_stop(filename)`.
///
/// # Safety
///
/// `filename` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_profile_start(model: *mut c_void, filename: *const c_char) -> u32 {
    api!("nrt_profile_start", {
        if crate::DRIVER.get().is_some_and(|d| d.as_sim().is_none()) {
            sim_machine("nrt_profile_start")?;
        }
        let h = model_of(model)?;
        rt().model_lnc(h)?;
        let filename = filename_arg(filename)?;
        let machine = sim_machine("nrt_profile_start")?;
        {
            let mut sessions = lock(&SESSIONS);
            if sessions.iter().any(|s| s.filename == filename) {
                return Err(logged(err!(
                    Invalid,
                    "A profile into \"{filename}\" is already started"
                )));
            }
            sessions.push(Session {
                filename,
                model: h.id(),
                records: Vec::new(),
            });
        }
        hold_reports(&machine);
        update_active();
        Ok(())
    })
}

/// `nrt_profile_stop`: writes the executions recorded since `nrt_profile_start(…, filename)`.
///
/// # Safety
///
/// `filename` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_profile_stop(filename: *const c_char) -> u32 {
    api!("nrt_profile_stop", {
        let filename = filename_arg(filename)?;
        let session = {
            let mut sessions = lock(&SESSIONS);
            match sessions.iter().position(|s| s.filename == filename) {
                Some(i) => sessions.remove(i),
                None => {
                    return Err(logged(err!(
                        Invalid,
                        "No profile into \"{filename}\" is started (nrt_profile_start)"
                    )));
                }
            }
        };
        update_active();
        if let Ok(machine) = sim_machine("nrt_profile_stop") {
            release_reports(&machine);
        }
        write_profile(Path::new(&filename), &session.records)
    })
}

// ---- continuous profiling ----------------------------------------------------------------------

/// `nrt_profile_continuous_options_t`.
#[derive(Clone, Debug)]
struct ContinuousOptions {
    output_dir: PathBuf,
}

impl Default for ContinuousOptions {
    fn default() -> Self {
        Self {
            output_dir: PathBuf::from("./output"),
        }
    }
}

static CONTINUOUS_OPTIONS: Objects<ContinuousOptions> =
    Objects::new(1024, 5, "continuous profiling options");

/// `nrt_profile_continuous_options_allocate`.
///
/// # Safety
///
/// `options` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_profile_continuous_options_allocate(options: *mut *mut c_void) -> u32 {
    api!("nrt_profile_continuous_options_allocate", {
        let p = out(options, "options")?;
        let h = CONTINUOUS_OPTIONS.insert(ContinuousOptions::default())?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, h) };
        Ok(())
    })
}

/// `nrt_profile_continuous_options_free`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_profile_continuous_options_free(options: *mut c_void) -> u32 {
    api!("nrt_profile_continuous_options_free", {
        CONTINUOUS_OPTIONS.remove(options).map(drop)
    })
}

/// `nrt_profile_continuous_options_set_output_dir`.
///
/// # Safety
///
/// `output_dir` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_profile_continuous_options_set_output_dir(
    options: *mut c_void,
    output_dir: *const c_char,
) -> u32 {
    api!("nrt_profile_continuous_options_set_output_dir", {
        // SAFETY: the caller's contract.
        let dir = match unsafe { cstr(output_dir) } {
            Some(d) if !d.is_empty() => PathBuf::from(d.into_owned()),
            Some(_) => return Err(logged(err!(Invalid, "The output directory is empty"))),
            None => return Err(invalid("output_dir")),
        };
        CONTINUOUS_OPTIONS.with(options, |o| {
            o.output_dir = dir;
        })
    })
}

/// `nrt_profile_continuous_start`: profiles every execution, keeping the latest per core.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_profile_continuous_start(options: *mut c_void) -> u32 {
    api!("nrt_profile_continuous_start", {
        CONTINUOUS_OPTIONS.with(options, |_| ())?;
        let machine = sim_machine("nrt_profile_continuous_start")?;
        if inspect_device_profiles() {
            return Err(logged(err!(
                Invalid,
                "Continuous profiling cannot start while inspect device profiling is on"
            )));
        }
        if rt().config().is_ok_and(|c| c.implicit_async()) {
            return Err(logged(err!(
                Invalid,
                "Continuous profiling cannot start while asynchronous execution is on \
                 (NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS)"
            )));
        }
        {
            let mut c = lock(&CONTINUOUS);
            if c.is_some() {
                return Err(logged(err!(
                    Invalid,
                    "Continuous profiling is already started"
                )));
            }
            *c = Some(Continuous::default());
        }
        hold_reports(&machine);
        update_active();
        Ok(())
    })
}

/// `nrt_profile_continuous_save`: writes the latest execution of core `vnc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_profile_continuous_save(vnc: u32, options: *mut c_void) -> u32 {
    api!("nrt_profile_continuous_save", {
        let dir = CONTINUOUS_OPTIONS.with(options, |o| o.output_dir.clone())?;
        let (record, n) = {
            let mut c = lock(&CONTINUOUS);
            let Some(c) = c.as_mut() else {
                return Err(logged(err!(Invalid, "Continuous profiling is not started")));
            };
            let Some(r) = c.latest.get(&vnc).cloned() else {
                return Err(logged(err!(
                    Invalid,
                    "No execution on Neuron Core {vnc} was profiled since continuous profiling \
                     started"
                )));
            };
            c.saved += 1;
            (r, c.saved)
        };
        std::fs::create_dir_all(&dir).map_err(|e| {
            logged(err!(
                Failure,
                "Failed to create the output directory {}: {e}",
                dir.display()
            ))
        })?;
        let name = format!(
            "profile_pid{}_vnc{vnc}_model{}_save{n}.json",
            std::process::id(),
            record.model
        );
        write_profile(&dir.join(name), &[record])
    })
}

/// `nrt_profile_continuous_stop`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_profile_continuous_stop() -> u32 {
    api!("nrt_profile_continuous_stop", {
        if lock(&CONTINUOUS).take().is_none() {
            return Err(logged(err!(Invalid, "Continuous profiling is not started")));
        }
        update_active();
        if let Ok(machine) = sim_machine("nrt_profile_continuous_stop") {
            release_reports(&machine);
        }
        Ok(())
    })
}

/// A JSON string literal of `s` (for the inspect writer).
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::new();
    json_str(&mut out, s);
    out
}
