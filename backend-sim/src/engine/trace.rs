//! Chrome / Perfetto trace-event JSON of an execution.
//!
//! One process (the core); a track (thread) per sequencer (`tid` 0–4, in [`EngineId`]
//! order), per DMA engine that processed descriptors (`tid` 16 + engine) and per DMA queue
//! that carried transfers (`tid` 100 + 16·engine + queue). Slices (`ph: "X"`) have `cat`:
//! `instr` (an instruction executing), `sem_wait`, `port_wait`, `queue_wait` (a sequencer
//! blocked), `dma_desc` (a descriptor on a DMA engine), `dma_transfer` (a transfer on its
//! queue); `Notify` is an instant (`ph: "i"`, `cat: "notify"`). Times are microseconds; every
//! event also carries its exact `tick` and `ticks` in `args`.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::exec::cost::TICKS_PER_SECOND;
use super::exec::report::{EventKind, ExecReport, Track};
use super::isa::EngineId;

/// The `tid` of a track.
pub fn track_tid(t: Track) -> u32 {
    match t {
        Track::Engine(e) => e.index() as u32,
        Track::DmaEngine(d) => 16 + u32::from(d),
        Track::DmaQueue(d, q) => 100 + 16 * u32::from(d) + u32::from(q),
    }
}

fn track_name(t: Track) -> String {
    match t {
        Track::Engine(e) => e.name().to_owned(),
        Track::DmaEngine(d) => format!("DMA engine {d}"),
        Track::DmaQueue(d, q) => format!("DMA queue {d}.{q}"),
    }
}

fn us(ticks: u64) -> f64 {
    ticks as f64 * 1e6 / TICKS_PER_SECOND as f64
}

/// Writes the report's event log as trace-event JSON (deterministic: same report, same bytes).
pub fn chrome_trace_json(report: &ExecReport) -> String {
    let mut tracks: BTreeSet<Track> = EngineId::ALL.iter().map(|&e| Track::Engine(e)).collect();
    for e in &report.events {
        tracks.insert(e.track);
    }
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"timing_model\":\"{}\",\
         \"validated_against_hw\":{},\"ticks\":{},\"status\":\"{}\",\"events_truncated\":{}}},\
         \"traceEvents\":[",
        report.timing_model,
        report.validated_against_hw,
        report.ticks,
        report.status.name(),
        report.events_truncated
    );
    let _ = write!(
        s,
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"tid\":0,\
         \"args\":{{\"name\":\"NeuronCore (simulated, v2 cost rules)\"}}}}"
    );
    for t in &tracks {
        let tid = track_tid(*t);
        let _ = write!(
            s,
            ",{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{tid},\
             \"args\":{{\"name\":\"{}\"}}}},{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\
             \"pid\":0,\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}",
            track_name(*t)
        );
    }
    for e in &report.events {
        let tid = track_tid(e.track);
        let (name, cat, extra) = match e.kind {
            EventKind::Instr { pc, op } => (op.to_owned(), "instr", format!(",\"pc\":{pc}")),
            EventKind::SemWait { pc, sem } => (
                format!("SemWait sem {sem}"),
                "sem_wait",
                format!(",\"pc\":{pc},\"sem\":{sem}"),
            ),
            EventKind::PortWait { pc } => {
                ("port wait".to_owned(), "port_wait", format!(",\"pc\":{pc}"))
            }
            EventKind::QueueWait { pc } => (
                "DMA queue full".to_owned(),
                "queue_wait",
                format!(",\"pc\":{pc}"),
            ),
            EventKind::Descriptor { queue, desc, bytes } => (
                format!("desc {desc}"),
                "dma_desc",
                format!(",\"queue\":{queue},\"desc\":{desc},\"bytes\":{bytes}"),
            ),
            EventKind::Transfer {
                first,
                count,
                bytes,
                sem,
                inc,
            } => (
                format!("transfer {bytes} B"),
                "dma_transfer",
                format!(
                    ",\"first\":{first},\"count\":{count},\"bytes\":{bytes},\"sem\":{sem},\
                     \"inc\":{inc}"
                ),
            ),
            EventKind::Notify { payload } => {
                let _ = write!(
                    s,
                    ",{{\"ph\":\"i\",\"s\":\"t\",\"name\":\"Notify\",\"cat\":\"notify\",\
                     \"pid\":0,\"tid\":{tid},\"ts\":{:.6},\"args\":{{\"tick\":{},\
                     \"payload\":{payload}}}}}",
                    us(e.start),
                    e.start
                );
                continue;
            }
        };
        let _ = write!(
            s,
            ",{{\"ph\":\"X\",\"name\":\"{name}\",\"cat\":\"{cat}\",\"pid\":0,\"tid\":{tid},\
             \"ts\":{:.6},\"dur\":{:.6},\"args\":{{\"tick\":{},\"ticks\":{}{extra}}}}}",
            us(e.start),
            us(e.dur),
            e.start,
            e.dur
        );
    }
    s.push_str("]}");
    s
}
