//! The system trace's data: the event types, the capture configuration, captured events and
//! the per-core rings that hold them ([`EventStore`]), and the JSON they are handed out as.
//! `sys_trace.rs` keeps the capture of `nrt_sys_trace_start` in one; `inspect.rs` keeps its own.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

use nrt_core::events::RuntimeEvent;
use nrt_core::{Error, NrtStatus, err};

use crate::ffi_util::logged;

/// The event types, in the order `nrt_sys_trace_get_event_types` lists them.
pub(crate) const EVENT_TYPES: [&str; 9] = [
    "nrt_load",
    "nrt_unload",
    "nrt_exec_submit",
    "nrt_exec_start",
    "nrt_exec_complete",
    "nrt_tensor_read",
    "nrt_tensor_write",
    "nrt_tensor_copy",
    "nrt_error",
];

/// Ring capacity per core by default (libnrt's default).
pub(crate) const DEFAULT_MAX_EVENTS_PER_NC: u64 = 1_000_000;

// ---- configuration -------------------------------------------------------------------------------

/// `nrt_sys_trace_config_t`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TraceConfig {
    pub(crate) max_events_per_nc: u64,
    pub(crate) disabled_nc: BTreeSet<u32>,
    /// Only these cores are captured (`NEURON_RT_INSPECT_EVENT_FILTER_NC`); `None`: all.
    pub(crate) only_nc: Option<BTreeSet<u32>>,
    /// Bit `i`: [`EVENT_TYPES`]`[i]` is captured.
    pub(crate) types: u32,
}

/// Every event type's bit.
const ALL_TYPES: u32 = (1 << EVENT_TYPES.len()) - 1;
/// Most cores a core filter may list.
const MAX_FILTER_CORES: u32 = 4096;

impl Default for TraceConfig {
    fn default() -> Self {
        Self {
            max_events_per_nc: DEFAULT_MAX_EVENTS_PER_NC,
            disabled_nc: BTreeSet::new(),
            only_nc: None,
            types: ALL_TYPES,
        }
    }
}

impl TraceConfig {
    /// Turns capture of the named event type on or off; an unknown name is `NRT_INVALID`.
    pub(crate) fn set_type(&mut self, name: &str, on: bool) -> Result<(), Error> {
        let Some(i) = EVENT_TYPES.iter().position(|t| *t == name) else {
            return Err(logged(err!(
                Invalid,
                "Unknown system trace event type \"{name}\" (see nrt_sys_trace_get_event_types)"
            )));
        };
        if on {
            self.types |= 1 << i;
        } else {
            self.types &= !(1 << i);
        }
        Ok(())
    }

    /// Applies an event-type filter (`NEURON_RT_INSPECT_EVENT_FILTER_TYPE`): comma-separated
    /// type names and the groups `software` (every type here: all are the runtime's) and
    /// `hardware` (none: the simulator reports no device-side events); `^item` excludes. With no
    /// positive item the exclusions apply to every type.
    pub(crate) fn filter_types(&mut self, spec: &str) -> Result<(), String> {
        let (mut pos, mut neg, mut any_pos) = (0u32, 0u32, false);
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (exclude, name) = match item.strip_prefix('^') {
                Some(n) => (true, n.trim()),
                None => (false, item),
            };
            let bits = match name {
                "software" => ALL_TYPES,
                "hardware" => 0,
                _ => match EVENT_TYPES.iter().position(|t| *t == name) {
                    Some(i) => 1 << i,
                    None => return Err(format!("unknown event type or group \"{name}\"")),
                },
            };
            if exclude {
                neg |= bits;
            } else {
                pos |= bits;
                any_pos = true;
            }
        }
        self.types = if any_pos { pos } else { ALL_TYPES } & !neg;
        Ok(())
    }

    /// Applies a core filter (`NEURON_RT_INSPECT_EVENT_FILTER_NC`): comma-separated indices and
    /// ranges (`0,2,4`, `0-3`); only those cores are captured.
    pub(crate) fn filter_cores(&mut self, spec: &str) -> Result<(), String> {
        let mut only = BTreeSet::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let num = |s: &str| {
                s.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("\"{item}\" is not a core index or range"))
            };
            let (a, b) = match item.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(item)?, num(item)?),
            };
            if a > b || b - a >= MAX_FILTER_CORES || only.len() as u32 + (b - a) >= MAX_FILTER_CORES
            {
                return Err(format!(
                    "core range \"{item}\" is empty or longer than {MAX_FILTER_CORES} cores"
                ));
            }
            only.extend(a..=b);
        }
        self.only_nc = Some(only);
        Ok(())
    }

    pub(crate) fn enabled_types(&self) -> Vec<&'static str> {
        EVENT_TYPES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.types & (1 << i) != 0)
            .map(|(_, t)| *t)
            .collect()
    }
}

// ---- capture -----------------------------------------------------------------------------------

/// One captured event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub(crate) id: u64,
    /// Index into [`EVENT_TYPES`].
    pub(crate) kind: usize,
    pub(crate) timestamp_ns: u64,
    pub(crate) thread_id: i64,
    pub(crate) nc: Option<u32>,
    pub(crate) model: Option<u32>,
    pub(crate) seq: Option<u64>,
    pub(crate) status: Option<NrtStatus>,
    pub(crate) bytes: Option<u64>,
    pub(crate) text: Option<String>,
}

#[derive(Debug, Default)]
struct Ring {
    events: VecDeque<Recorded>,
    dropped: u64,
}

/// Captured events: a ring per core (and one for events of no core), filtered by a
/// configuration.
#[derive(Debug, Default)]
pub(crate) struct EventStore {
    config: TraceConfig,
    /// Per core; `None`: events of no core.
    rings: BTreeMap<Option<u32>, Ring>,
    next_id: u64,
}

/// Nanoseconds since the Unix epoch (the host clock the events are stamped with).
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

pub(crate) fn thread_id() -> i64 {
    // SAFETY: gettid takes no arguments and cannot fail.
    i64::from(unsafe { libc::syscall(libc::SYS_gettid) } as i32)
}

/// The type index and fields of a runtime event.
fn describe(e: &RuntimeEvent<'_>) -> Recorded {
    let mut r = Recorded {
        id: 0,
        kind: 0,
        timestamp_ns: now_ns(),
        thread_id: thread_id(),
        nc: None,
        model: None,
        seq: None,
        status: None,
        bytes: None,
        text: None,
    };
    match *e {
        RuntimeEvent::ModelLoaded { model, lnc, name } => {
            (r.kind, r.nc, r.model, r.text) = (0, Some(lnc), Some(model), Some(name.to_owned()));
        }
        RuntimeEvent::ModelUnloaded { model, lnc } => {
            (r.kind, r.nc, r.model) = (1, Some(lnc), Some(model));
        }
        RuntimeEvent::ExecSubmitted { model, lnc, seq } => {
            (r.kind, r.nc, r.model, r.seq) = (2, Some(lnc), Some(model), Some(seq));
        }
        RuntimeEvent::ExecStarted {
            model, lnc, seq, ..
        } => {
            (r.kind, r.nc, r.model, r.seq) = (3, Some(lnc), Some(model), Some(seq));
        }
        RuntimeEvent::ExecCompleted {
            model,
            lnc,
            seq,
            status,
            ..
        } => {
            (r.kind, r.nc, r.model, r.seq, r.status) =
                (4, Some(lnc), Some(model), Some(seq), Some(status));
        }
        RuntimeEvent::TensorRead { nc, bytes } => (r.kind, r.nc, r.bytes) = (5, nc, Some(bytes)),
        RuntimeEvent::TensorWrite { nc, bytes } => (r.kind, r.nc, r.bytes) = (6, nc, Some(bytes)),
        RuntimeEvent::TensorCopy { nc, bytes } => (r.kind, r.nc, r.bytes) = (7, nc, Some(bytes)),
        RuntimeEvent::Error { status, message } => {
            (r.kind, r.status, r.text) = (8, Some(status), Some(message.to_owned()));
        }
    }
    r
}

impl EventStore {
    /// An empty store capturing what `config` selects.
    pub(crate) fn new(config: TraceConfig) -> Self {
        Self {
            config,
            ..Self::default()
        }
    }

    /// Captures `e` if the configuration selects its type and core; a full ring drops its
    /// oldest event.
    pub(crate) fn record(&mut self, e: &RuntimeEvent<'_>) {
        let mut r = describe(e);
        if self.config.types & (1 << r.kind) == 0 {
            return;
        }
        if let Some(nc) = r.nc {
            let filtered = self
                .config
                .only_nc
                .as_ref()
                .is_some_and(|o| !o.contains(&nc));
            if filtered || self.config.disabled_nc.contains(&nc) {
                return;
            }
        }
        self.next_id += 1;
        r.id = self.next_id;
        let cap = self.config.max_events_per_nc;
        let ring = self.rings.entry(r.nc).or_default();
        if cap == 0 {
            ring.dropped += 1;
            return;
        }
        while ring.events.len() as u64 >= cap {
            ring.events.pop_front();
            ring.dropped += 1;
        }
        ring.events.push_back(r);
    }

    /// Every event held, ordered by id, and the count dropped (nothing is removed).
    pub(crate) fn snapshot(&self) -> (Vec<Recorded>, u64) {
        let mut events: Vec<Recorded> = self
            .rings
            .values()
            .flat_map(|r| r.events.iter().cloned())
            .collect();
        events.sort_by_key(|e| e.id);
        (events, self.rings.values().map(|r| r.dropped).sum())
    }

    /// Removes the events `opts` selects (the oldest of each ring first) and returns them
    /// ordered by id, with the count the selected rings dropped since the last take.
    pub(crate) fn take(&mut self, opts: FetchOptions) -> (Vec<Recorded>, u64) {
        let mut events = Vec::new();
        let mut dropped = 0;
        for (nc, ring) in &mut self.rings {
            let selected = match (opts.nc, nc) {
                (None, _) => true,
                (Some(want), Some(nc)) => u64::from(*nc) == want,
                (Some(_), None) => false,
            };
            if !selected {
                continue;
            }
            let n = opts
                .max_events_per_nc
                .map_or(ring.events.len(), |m| ring.events.len().min(m as usize));
            events.extend(ring.events.drain(..n));
            dropped += std::mem::take(&mut ring.dropped);
        }
        events.sort_by_key(|e| e.id);
        (events, dropped)
    }
}

// ---- fetch -------------------------------------------------------------------------------------

/// `nrt_sys_trace_fetch_options_t`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FetchOptions {
    pub(crate) max_events_per_nc: Option<u64>,
    pub(crate) nc: Option<u64>,
}

/// `s` as a JSON string literal.
pub(crate) fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One event as a JSON object.
pub(crate) fn event_json(out: &mut String, e: &Recorded, pid: u32) {
    let name = EVENT_TYPES.get(e.kind).copied().unwrap_or("unknown");
    let _ = write!(
        out,
        "{{\"id\":{},\"name\":\"{name}\",\"trace_event_source\":\"neuron_rt\",\
         \"timestamp_ns\":{},\"process_id\":{pid},\"thread_id\":{}",
        e.id, e.timestamp_ns, e.thread_id
    );
    if let Some(nc) = e.nc {
        let _ = write!(out, ",\"nc_idx\":{nc}");
    }
    if let Some(m) = e.model {
        let _ = write!(out, ",\"model_id\":{m}");
    }
    if let Some(s) = e.seq {
        let _ = write!(out, ",\"nrt_sequence_id\":{s}");
    }
    if let Some(s) = e.status {
        let _ = write!(
            out,
            ",\"status\":{},\"status_name\":\"{}\"",
            s.code(),
            s.name()
        );
    }
    if let Some(b) = e.bytes {
        let _ = write!(out, ",\"bytes\":{b}");
    }
    if let Some(t) = &e.text {
        out.push_str(if e.kind == 0 {
            ",\"model_name\":"
        } else {
            ",\"message\":"
        });
        json_str(out, t);
    }
    out.push('}');
}

/// The fetch document: `{"events":[…],"dropped_events":N}`.
pub(crate) fn events_json(events: &[Recorded], dropped: u64) -> String {
    let pid = std::process::id();
    let mut s = String::from("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        event_json(&mut s, e, pid);
    }
    let _ = write!(s, "],\"dropped_events\":{dropped}}}");
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        let mut s = String::new();
        json_str(&mut s, "a\"b\\c\nd");
        assert_eq!(s, "\"a\\\"b\\\\c\\u000ad\"");
    }

    #[test]
    fn event_type_filters_toggle_exactly_one_type() {
        let mut c = TraceConfig::default();
        assert_eq!(c.enabled_types().len(), EVENT_TYPES.len());
        c.set_type("nrt_tensor_read", false).unwrap();
        assert_eq!(c.types, 0b1_1101_1111);
        assert!(c.set_type("no_such_type", false).is_err());
        c.set_type("nrt_tensor_read", true).unwrap();
        assert_eq!(c.types, 0b1_1111_1111);
    }

    #[test]
    fn environment_filters_select_types_groups_and_cores() {
        let mut c = TraceConfig::default();
        c.filter_types("nrt_load, nrt_exec_complete").unwrap();
        assert_eq!(c.enabled_types(), ["nrt_load", "nrt_exec_complete"]);
        c.filter_types("software,^nrt_error,^nrt_tensor_read")
            .unwrap();
        assert_eq!(c.types, 0b0_1101_1111);
        c.filter_types("^nrt_unload").unwrap();
        assert_eq!(c.types, 0b1_1111_1101);
        c.filter_types("hardware").unwrap();
        assert!(c.enabled_types().is_empty());
        assert!(c.filter_types("nrt_nothing").is_err());
        c.filter_cores("0, 2-4,7").unwrap();
        assert_eq!(
            c.only_nc.clone().unwrap().into_iter().collect::<Vec<_>>(),
            [0, 2, 3, 4, 7]
        );
        assert!(c.filter_cores("3-1").is_err());
        assert!(c.filter_cores("x").is_err());
        assert!(c.filter_cores("0-4294967295").is_err());
    }
}
