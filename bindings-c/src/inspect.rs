//! `nrt_profile.h`, inspect capture: `nrt_inspect_*` and the `NEURON_RT_INSPECT_*` variables.
//!
//! While capture is on, each execution (`enable_inspect`, `NEURON_RT_INSPECT_ENABLE=1`) or each
//! failing execution (`enable_inspect_on_fail`, `NEURON_RT_INSPECT_ON_FAIL=1`) is written to
//! `<output dir>/sim_pid_<pid>/session_<id>_model<m>_nc<n>_seq<s>/`: `device_profile.json` (the
//! simulated per-engine timeline, as `nrt_profile_stop` writes it, with
//! `device_profile.json.summary.json`), `inputs/<name>.bin` and `outputs/<name>.bin` (the I/O
//! tensors' bytes before and after the execution) and `execution.json` (ids and status). The
//! system profile — the runtime's events since capture began, in the format of
//! `nrt_sys_trace_fetch_events` — is `<output dir>/sim_pid_<pid>/system_profile.json`, rewritten
//! after each execution written and at `nrt_inspect_stop`.
//!
//! `NEURON_RT_INSPECT_ENABLE=1` or `NEURON_RT_INSPECT_ON_FAIL=1` in the environment when the
//! library is loaded starts capture for the whole process, configured by the other
//! `NEURON_RT_INSPECT_*` variables (`nrt_inspect_begin` reads the same ones).

use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use nrt_core::driver::{Binding, Driver};
use nrt_core::events::RuntimeEvent;
use nrt_core::io::{IoTable, TensorUsage};
use nrt_core::{Error, NrtStatus, err};

use crate::c_strings::{c_string_array, free_c_string_array};
use crate::ffi_util::logged;
use crate::handles::Objects;
use crate::profile::{exec_record, hold_reports, quoted, release_reports, write_profile};
use crate::sys_trace::{CONSUMER_INSPECT, set_active, set_inspect_device_profiles, set_listener};
use crate::trace_store::{EventStore, TraceConfig, events_json};
use crate::{cstr, invalid, out, put, rt};

/// The activity types, in bit order.
const ACTIVITY_TYPES: [&str; 4] = [
    "system_profile",
    "device_profile",
    "host_memory",
    "cpu_util",
];
const SYSTEM_PROFILE: u8 = 1;
const DEVICE_PROFILE: u8 = 2;
const HOST_ACTIVITIES: u8 = 4 | 8;

/// `nrt_inspect_config_t`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InspectConfig {
    session_id: i32,
    output_dir: PathBuf,
    trace: TraceConfig,
    enable_inspect: bool,
    on_fail: bool,
    /// Bit `i`: [`ACTIVITY_TYPES`]`[i]`.
    activities: u8,
}

impl Default for InspectConfig {
    fn default() -> Self {
        Self {
            session_id: 1,
            output_dir: PathBuf::from("./output"),
            trace: TraceConfig::default(),
            enable_inspect: false,
            on_fail: false,
            activities: 0b1111,
        }
    }
}

fn env_flag(name: &str) -> Option<bool> {
    std::env::var(name).ok().map(|v| {
        let v = v.trim();
        v == "1"
            || v.eq_ignore_ascii_case("true")
            || v.eq_ignore_ascii_case("model")
            || v.eq_ignore_ascii_case("session")
    })
}

impl InspectConfig {
    /// The configuration the `NEURON_RT_INSPECT_*` variables give; `enable` is whether every
    /// execution is captured when `NEURON_RT_INSPECT_ENABLE` is not set.
    fn from_env(enable: bool) -> Self {
        let mut c = Self {
            enable_inspect: env_flag("NEURON_RT_INSPECT_ENABLE").unwrap_or(enable),
            on_fail: env_flag("NEURON_RT_INSPECT_ON_FAIL").unwrap_or(false),
            activities: SYSTEM_PROFILE | DEVICE_PROFILE,
            ..Self::default()
        };
        if let Ok(dir) = std::env::var("NEURON_RT_INSPECT_OUTPUT_DIR") {
            if !dir.is_empty() {
                c.output_dir = PathBuf::from(dir);
            }
        }
        if env_flag("NEURON_RT_INSPECT_SYSTEM_PROFILE") == Some(false) {
            c.activities &= !SYSTEM_PROFILE;
        }
        if env_flag("NEURON_RT_INSPECT_DEVICE_PROFILE") == Some(false) {
            c.activities &= !DEVICE_PROFILE;
        }
        if let Some(n) = std::env::var("NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC")
            .ok()
            .and_then(|v| v.trim().parse().ok())
        {
            c.trace.max_events_per_nc = n;
        }
        let filters: [(&str, Filter); 2] = [
            (
                "NEURON_RT_INSPECT_EVENT_FILTER_TYPE",
                TraceConfig::filter_types,
            ),
            (
                "NEURON_RT_INSPECT_EVENT_FILTER_NC",
                TraceConfig::filter_cores,
            ),
        ];
        for (var, apply) in filters {
            if let Ok(spec) = std::env::var(var) {
                if let Err(e) = apply(&mut c.trace, &spec) {
                    rt().log(
                        nrt_core::Level::Error,
                        format_args!("{var}={spec} is ignored: {e}"),
                    );
                }
            }
        }
        c
    }

    fn set_activity(&mut self, name: &str, on: bool) -> Result<(), Error> {
        let bits = match name {
            "all" => 0b1111,
            _ => match ACTIVITY_TYPES.iter().position(|a| *a == name) {
                Some(i) => 1u8 << i,
                None => {
                    return Err(logged(err!(
                        Invalid,
                        "Unknown activity type \"{name}\" (system_profile, device_profile, \
                         host_memory, cpu_util or all)"
                    )));
                }
            },
        };
        if on {
            self.activities |= bits;
        } else {
            self.activities &= !bits;
        }
        Ok(())
    }

    fn enabled_activities(&self) -> Vec<&'static str> {
        ACTIVITY_TYPES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.activities & (1 << i) != 0)
            .map(|(_, a)| *a)
            .collect()
    }
}

/// A filter of a capture configuration, from its environment variable's value.
type Filter = fn(&mut TraceConfig, &str) -> Result<(), String>;

static CONFIGS: Objects<InspectConfig> = Objects::new(1024, 6, "inspect options");

// ---- capture -----------------------------------------------------------------------------------

/// Tensor bytes by name.
type Tensors = Vec<(String, Vec<u8>)>;

#[derive(Debug)]
struct Inspect {
    config: InspectConfig,
    /// `<output dir>/sim_pid_<pid>`.
    dir: PathBuf,
    store: EventStore,
    /// Inputs read when an execution started, by (model, sequence id).
    inputs: BTreeMap<(u32, u64), Tensors>,
    reports_held: bool,
}

static INSPECT: Mutex<Option<Inspect>> = Mutex::new(None);

fn inspect() -> MutexGuard<'static, Option<Inspect>> {
    INSPECT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A file name made of the safe characters of `name`.
fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The bytes of each binding of one side, by tensor name.
fn read_side(io: &IoTable, usage: TensorUsage, side: &[Binding]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::with_capacity(side.len());
    for b in side {
        let name = io.get(usage, b.index).map_or_else(
            || format!("{}_{}", usage.as_str(), b.index),
            |t| t.name.clone(),
        );
        let mut bytes = vec![0u8; usize::try_from(b.size).unwrap_or(0)];
        if let Err(e) = rt().driver().read_device(b.buffer, b.offset, &mut bytes) {
            rt().log(
                nrt_core::Level::Error,
                format_args!(
                    "inspect: cannot read {} tensor \"{name}\": {e}",
                    usage.as_str()
                ),
            );
            continue;
        }
        out.push((name, bytes));
    }
    out
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| {
        logged(err!(
            Failure,
            "inspect: cannot create the output directory {}: {e}",
            dir.display()
        ))
    })
}

fn write_tensors(dir: &Path, tensors: &[(String, Vec<u8>)]) -> Result<(), Error> {
    create_dir(dir)?;
    for (name, bytes) in tensors {
        let path = dir.join(format!("{}.bin", file_name(name)));
        std::fs::write(&path, bytes).map_err(|e| {
            logged(err!(
                Failure,
                "inspect: cannot write {}: {e}",
                path.display()
            ))
        })?;
    }
    Ok(())
}

fn write_system_profile(i: &Inspect) -> Result<(), Error> {
    if i.config.activities & SYSTEM_PROFILE == 0 {
        return Ok(());
    }
    create_dir(&i.dir)?;
    let (events, dropped) = i.store.snapshot();
    let path = i.dir.join("system_profile.json");
    std::fs::write(&path, events_json(&events, dropped)).map_err(|e| {
        logged(err!(
            Failure,
            "inspect: cannot write {}: {e}",
            path.display()
        ))
    })
}

/// Writes one captured execution's directory.
fn write_execution(
    i: &Inspect,
    e: &RuntimeEvent<'_>,
    inputs: &[(String, Vec<u8>)],
) -> Result<(), Error> {
    let RuntimeEvent::ExecCompleted {
        model,
        lnc,
        seq,
        status,
        io,
        outputs,
        ..
    } = *e
    else {
        return Ok(());
    };
    let dir = i.dir.join(format!(
        "session_{}_model{model}_nc{lnc}_seq{seq}",
        i.config.session_id
    ));
    create_dir(&dir)?;
    if i.config.activities & DEVICE_PROFILE != 0 {
        if let Some(record) = exec_record(e) {
            write_profile(&dir.join("device_profile.json"), &[record])?;
        }
    }
    write_tensors(&dir.join("inputs"), inputs)?;
    write_tensors(
        &dir.join("outputs"),
        &read_side(io, TensorUsage::Output, outputs),
    )?;
    let info = format!(
        "{{\"model_id\":{model},\"nc_idx\":{lnc},\"nrt_sequence_id\":{seq},\"status\":{},\
         \"status_name\":{}}}\n",
        status.code(),
        quoted(status.name())
    );
    let path = dir.join("execution.json");
    std::fs::write(&path, info).map_err(|e| {
        logged(err!(
            Failure,
            "inspect: cannot write {}: {e}",
            path.display()
        ))
    })
}

fn on_event(e: &RuntimeEvent<'_>) {
    let mut guard = inspect();
    let Some(i) = guard.as_mut() else { return };
    if !i.reports_held && i.config.activities & DEVICE_PROFILE != 0 {
        if let Some(sim) = crate::DRIVER.get().and_then(|d| d.as_sim()) {
            hold_reports(sim.machine());
            i.reports_held = true;
        }
    }
    if i.config.activities & SYSTEM_PROFILE != 0 {
        i.store.record(e);
    }
    let wanted = i.config.enable_inspect || i.config.on_fail;
    match *e {
        RuntimeEvent::ExecStarted {
            model,
            seq,
            io,
            inputs,
            ..
        } if wanted => {
            let bytes = read_side(io, TensorUsage::Input, inputs);
            i.inputs.insert((model, seq), bytes);
        }
        RuntimeEvent::ExecCompleted {
            model, seq, status, ..
        } if wanted => {
            let inputs = i.inputs.remove(&(model, seq)).unwrap_or_default();
            let capture =
                i.config.enable_inspect || (i.config.on_fail && status != NrtStatus::Success);
            if capture && write_execution(i, e, &inputs).is_ok() {
                let _ = write_system_profile(i);
            }
        }
        _ => {}
    }
}

/// Starts capture with `config` (already on: `NRT_INVALID`).
fn begin(config: InspectConfig, function: &str) -> Result<(), Error> {
    if config.activities & DEVICE_PROFILE != 0 {
        if let Some(d) = crate::DRIVER.get() {
            if d.as_sim().is_none() {
                return Err(logged(err!(
                    Failure,
                    "{function} is not supported by nrt-rs on this backend: device \
                     profiles are the simulator's execution reports (turn the device_profile \
                     activity off to capture the system profile only)"
                )));
            }
        }
    }
    if config.activities & HOST_ACTIVITIES != 0 {
        rt().log(
            nrt_core::Level::Warning,
            format_args!(
                "nrt_inspect: the host_memory and cpu_util activities are not captured by nrt-rs"
            ),
        );
    }
    let device = config.activities & DEVICE_PROFILE != 0;
    let dir = config
        .output_dir
        .join(format!("sim_pid_{}", std::process::id()));
    {
        let mut g = inspect();
        if g.is_some() {
            return Err(logged(err!(
                Invalid,
                "Inspect capture is already on (nrt_inspect_stop ends it)"
            )));
        }
        *g = Some(Inspect {
            store: EventStore::new(config.trace.clone()),
            config,
            dir,
            inputs: BTreeMap::new(),
            reports_held: false,
        });
    }
    set_listener(CONSUMER_INSPECT, on_event);
    set_inspect_device_profiles(device);
    set_active(CONSUMER_INSPECT, true);
    Ok(())
}

fn stop() -> Result<(), Error> {
    let Some(i) = inspect().take() else {
        return Err(logged(err!(
            Invalid,
            "Inspect capture is not on (nrt_inspect_begin starts it)"
        )));
    };
    set_active(CONSUMER_INSPECT, false);
    set_inspect_device_profiles(false);
    if i.reports_held {
        if let Some(sim) = crate::DRIVER.get().and_then(|d| d.as_sim()) {
            release_reports(sim.machine());
        }
    }
    write_system_profile(&i)
}

/// Starts capture for the whole process when the environment asks for it at load time.
extern "C" fn inspect_from_env() {
    let on = env_flag("NEURON_RT_INSPECT_ENABLE") == Some(true)
        || env_flag("NEURON_RT_INSPECT_ON_FAIL") == Some(true);
    if on {
        let _ = begin(InspectConfig::from_env(false), "NEURON_RT_INSPECT_ENABLE");
    }
}

#[used]
#[unsafe(link_section = ".init_array")]
static INSPECT_FROM_ENV: extern "C" fn() = inspect_from_env;

// ---- exported functions ------------------------------------------------------------------------

/// `nrt_inspect_begin`: capture configured by the `NEURON_RT_INSPECT_*` variables; every
/// execution is captured unless `NEURON_RT_INSPECT_ENABLE=0`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_begin() -> u32 {
    api!(
        "nrt_inspect_begin",
        begin(InspectConfig::from_env(true), "nrt_inspect_begin")
    )
}

/// `nrt_inspect_stop`: ends capture and writes the system profile.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_stop() -> u32 {
    api!("nrt_inspect_stop", stop())
}

/// `nrt_inspect_begin_with_options`: capture with `options` (NULL: the defaults).
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_begin_with_options(options: *mut c_void) -> u32 {
    api!("nrt_inspect_begin_with_options", {
        let config = if options.is_null() {
            InspectConfig::default()
        } else {
            CONFIGS.with(options, |c| c.clone())?
        };
        begin(config, "nrt_inspect_begin_with_options")
    })
}

/// `nrt_inspect_config_allocate`.
///
/// # Safety
///
/// `options` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_allocate(options: *mut *mut c_void) -> u32 {
    api!("nrt_inspect_config_allocate", {
        let p = out(options, "options")?;
        let h = CONFIGS.insert(InspectConfig::default())?;
        // SAFETY: checked non-NULL.
        unsafe { put(p, h) };
        Ok(())
    })
}

/// `nrt_inspect_config_set_defaults`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_defaults(options: *mut c_void) -> u32 {
    api!("nrt_inspect_config_set_defaults", {
        CONFIGS.with(options, |c| *c = InspectConfig::default())
    })
}

/// `nrt_inspect_config_free`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_free(options: *mut c_void) -> u32 {
    api!("nrt_inspect_config_free", {
        CONFIGS.remove(options).map(drop)
    })
}

/// `nrt_inspect_config_set_session_id`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_session_id(options: *mut c_void, session_id: i32) -> u32 {
    api!("nrt_inspect_config_set_session_id", {
        CONFIGS.with(options, |c| c.session_id = session_id)
    })
}

/// `nrt_inspect_config_set_output_dir`.
///
/// # Safety
///
/// `output_dir` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_set_output_dir(
    options: *mut c_void,
    output_dir: *const c_char,
) -> u32 {
    api!("nrt_inspect_config_set_output_dir", {
        // SAFETY: the caller's contract.
        let dir = match unsafe { cstr(output_dir) } {
            Some(d) if !d.is_empty() => PathBuf::from(d.into_owned()),
            Some(_) => return Err(logged(err!(Invalid, "The output directory is empty"))),
            None => return Err(invalid("output_dir")),
        };
        CONFIGS.with(options, |c| c.output_dir = dir)
    })
}

/// `nrt_inspect_config_set_sys_trace_max_events_per_nc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_sys_trace_max_events_per_nc(
    options: *mut c_void,
    max: u64,
) -> u32 {
    api!("nrt_inspect_config_set_sys_trace_max_events_per_nc", {
        CONFIGS.with(options, |c| {
            c.trace.max_events_per_nc = max;
        })
    })
}

/// `nrt_inspect_config_set_capture_enabled_for_nc`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_capture_enabled_for_nc(
    options: *mut c_void,
    nc_idx: u32,
    enabled: bool,
) -> u32 {
    api!("nrt_inspect_config_set_capture_enabled_for_nc", {
        CONFIGS.with(options, |c| {
            if enabled {
                c.trace.disabled_nc.remove(&nc_idx);
            } else {
                c.trace.disabled_nc.insert(nc_idx);
            }
        })
    })
}

/// `nrt_inspect_config_set_capture_enabled_for_event_type_string`.
///
/// # Safety
///
/// `event_type` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_set_capture_enabled_for_event_type_string(
    options: *mut c_void,
    event_type: *const c_char,
    enabled: bool,
) -> u32 {
    api!(
        "nrt_inspect_config_set_capture_enabled_for_event_type_string",
        {
            // SAFETY: the caller's contract.
            let Some(name) = (unsafe { cstr(event_type) }) else {
                return Err(invalid("event_type"));
            };
            CONFIGS.with(options, |c| c.trace.set_type(&name, enabled))?
        }
    )
}

/// `nrt_inspect_config_set_enable_inspect`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_enable_inspect(options: *mut c_void, on: bool) -> u32 {
    api!("nrt_inspect_config_set_enable_inspect", {
        CONFIGS.with(options, |c| c.enable_inspect = on)
    })
}

/// `nrt_inspect_config_set_enable_inspect_on_fail`.
#[unsafe(no_mangle)]
pub extern "C" fn nrt_inspect_config_set_enable_inspect_on_fail(
    options: *mut c_void,
    on: bool,
) -> u32 {
    api!("nrt_inspect_config_set_enable_inspect_on_fail", {
        CONFIGS.with(options, |c| c.on_fail = on)
    })
}

/// `nrt_inspect_config_get_all_activity_types`.
///
/// # Safety
///
/// `activity_types` and `count` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_get_all_activity_types(
    activity_types: *mut *mut *const c_char,
    count: *mut usize,
) -> u32 {
    api!("nrt_inspect_config_get_all_activity_types", {
        let (p, n) = (out(activity_types, "activity_types")?, out(count, "count")?);
        // SAFETY: both checked non-NULL.
        unsafe { c_string_array(&ACTIVITY_TYPES, p, n) }
    })
}

/// `nrt_inspect_config_get_enabled_activity_types`.
///
/// # Safety
///
/// `activity_types` and `count` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_get_enabled_activity_types(
    options: *mut c_void,
    activity_types: *mut *mut *const c_char,
    count: *mut usize,
) -> u32 {
    api!("nrt_inspect_config_get_enabled_activity_types", {
        let (p, n) = (out(activity_types, "activity_types")?, out(count, "count")?);
        let names = CONFIGS.with(options, |c| c.enabled_activities())?;
        // SAFETY: both checked non-NULL.
        unsafe { c_string_array(&names, p, n) }
    })
}

/// `nrt_inspect_config_free_activity_types`.
///
/// # Safety
///
/// `activity_types` is NULL or an array returned by this library with `count` names.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_free_activity_types(
    activity_types: *mut *const c_char,
    count: usize,
) {
    // SAFETY: the caller's contract.
    unsafe { free_c_string_array(activity_types, count) };
}

/// `nrt_inspect_config_set_activity`.
///
/// # Safety
///
/// `activity_type` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nrt_inspect_config_set_activity(
    options: *mut c_void,
    activity_type: *const c_char,
    enabled: bool,
) -> u32 {
    api!("nrt_inspect_config_set_activity", {
        // SAFETY: the caller's contract.
        let Some(name) = (unsafe { cstr(activity_type) }) else {
            return Err(invalid("activity_type"));
        };
        CONFIGS.with(options, |c| c.set_activity(&name, enabled))?
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn activities_toggle_by_name_and_all() {
        let mut c = InspectConfig::default();
        assert_eq!(c.enabled_activities(), ACTIVITY_TYPES.to_vec());
        c.set_activity("all", false).unwrap();
        assert!(c.enabled_activities().is_empty());
        c.set_activity("device_profile", true).unwrap();
        assert_eq!(c.enabled_activities(), vec!["device_profile"]);
        assert!(c.set_activity("gpu_util", true).is_err());
    }

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(file_name("a/b c.d-e_f"), "a_b_c.d-e_f");
    }
}
