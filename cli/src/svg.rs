//! `nrt trace render`: a Chrome/Perfetto trace-event JSON (as `nrt run --trace` writes it) drawn
//! as an SVG timeline — one lane per engine, per DMA engine and optionally per DMA queue.
//!
//! Slices closer than a pixel are merged per lane and colour (a merged bar's tooltip says how
//! many slices it holds), so the picture stays small whatever the trace's length.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use crate::error::{CliError, Context, Result, bail};
use crate::out;

/// A slice on a lane, in microseconds.
#[derive(Clone, Debug)]
struct Slice {
    start: f64,
    dur: f64,
    name: String,
    cat: String,
}

/// A lane: a trace thread.
#[derive(Clone, Debug, Default)]
struct Lane {
    name: String,
    sort: i64,
    slices: Vec<Slice>,
    instants: Vec<(f64, String)>,
}

/// A parsed trace.
#[derive(Debug, Default)]
struct Trace {
    lanes: BTreeMap<i64, Lane>,
    /// From `otherData`.
    timing_model: Option<String>,
    validated: Option<bool>,
    ticks: Option<u64>,
    status: Option<String>,
    truncated: bool,
}

fn parse(text: &str) -> std::result::Result<Trace, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let (events, other) = match &v {
        Value::Array(a) => (a.as_slice(), None),
        Value::Object(o) => match o.get("traceEvents") {
            Some(Value::Array(a)) => (a.as_slice(), o.get("otherData")),
            _ => return Err("not a trace: no \"traceEvents\" array".into()),
        },
        _ => return Err("not a trace: expected an object with \"traceEvents\"".into()),
    };
    let mut t = Trace::default();
    if let Some(o) = other {
        t.timing_model = o
            .get("timing_model")
            .and_then(Value::as_str)
            .map(str::to_owned);
        t.validated = o.get("validated_against_hw").and_then(Value::as_bool);
        t.ticks = o.get("ticks").and_then(Value::as_u64);
        t.status = o.get("status").and_then(Value::as_str).map(str::to_owned);
        t.truncated = o
            .get("events_truncated")
            .and_then(Value::as_bool)
            .unwrap_or(false);
    }
    for e in events {
        let ph = e.get("ph").and_then(Value::as_str).unwrap_or("");
        let tid = e.get("tid").and_then(Value::as_i64).unwrap_or(0);
        let name = e
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let lane = t.lanes.entry(tid).or_insert_with(|| Lane {
            name: format!("thread {tid}"),
            sort: tid,
            ..Lane::default()
        });
        let args = e.get("args");
        match ph {
            "M" if name == "thread_name" => {
                if let Some(n) = args.and_then(|a| a.get("name")).and_then(Value::as_str) {
                    lane.name = n.to_owned();
                }
            }
            "M" if name == "thread_sort_index" => {
                if let Some(s) = args
                    .and_then(|a| a.get("sort_index"))
                    .and_then(Value::as_i64)
                {
                    lane.sort = s;
                }
            }
            "X" => {
                let start = e.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
                let dur = e.get("dur").and_then(Value::as_f64).unwrap_or(0.0);
                if start.is_finite() && dur.is_finite() && dur >= 0.0 {
                    lane.slices.push(Slice {
                        start,
                        dur,
                        name,
                        cat: e
                            .get("cat")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    });
                }
            }
            "i" | "I" => {
                let ts = e.get("ts").and_then(Value::as_f64).unwrap_or(0.0);
                lane.instants.push((ts, name));
            }
            _ => {}
        }
    }
    Ok(t)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Fill colour of a slice: instructions by mnemonic, the rest by category.
fn colour(s: &Slice) -> &'static str {
    match s.cat.as_str() {
        "instr" => match s.name.as_str() {
            "MultiplyMoving" => "#1f77b4",
            "LoadStationary" => "#9ecae1",
            "Activation" => "#d62728",
            "TensorTensor" => "#9467bd",
            "TensorScalar" => "#c5b0d5",
            "TensorCopy" => "#e377c2",
            "Memset" | "Iota" => "#8c564b",
            "DmaTrigger" => "#ff7f0e",
            _ => "#7f7f7f",
        },
        "sem_wait" => "#c7c7c7",
        "port_wait" => "#fdd0a2",
        "queue_wait" => "#f4a6a6",
        "dma_desc" => "#2ca02c",
        "dma_transfer" => "#17becf",
        _ => "#bcbd22",
    }
}

/// Legend label of a colour key.
fn legend_label(s: &Slice) -> String {
    match s.cat.as_str() {
        "instr" => match s.name.as_str() {
            "MultiplyMoving" | "LoadStationary" | "Activation" | "TensorTensor"
            | "TensorScalar" | "TensorCopy" | "DmaTrigger" => s.name.clone(),
            "Memset" | "Iota" => "Memset / Iota".into(),
            _ => "control (SemInc, Halt, …)".into(),
        },
        "sem_wait" => "waiting on a semaphore".into(),
        "port_wait" => "waiting for an SBUF/PSUM port".into(),
        "queue_wait" => "waiting: DMA queue full".into(),
        "dma_desc" => "DMA descriptor".into(),
        "dma_transfer" => "DMA transfer (queue)".into(),
        other => other.to_owned(),
    }
}

fn is_wait(cat: &str) -> bool {
    cat.ends_with("_wait")
}

/// A "nice" axis step (1, 2 or 5 × 10ⁿ) giving about `target` intervals over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / target;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// An axis label for a time in microseconds.
fn time_label(us: f64, span: f64) -> String {
    if span < 1.0 {
        format!("{:.0} ns", us * 1e3)
    } else if span < 1e3 {
        let s = format!("{us:.2}");
        format!("{} µs", s.trim_end_matches('0').trim_end_matches('.'))
    } else {
        let s = format!("{:.3}", us / 1e3);
        format!("{} ms", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// Lane groups, in drawing order.
fn group_of(tid: i64) -> (u8, &'static str) {
    if tid < 16 {
        (0, "engines")
    } else if tid < 100 {
        (1, "DMA engines")
    } else {
        (2, "DMA queues")
    }
}

/// Renders `trace` as SVG text.
fn render(t: &Trace, width: u32, queues: bool) -> String {
    let mut lanes: Vec<(i64, &Lane)> = t
        .lanes
        .iter()
        .filter(|(tid, l)| {
            let (g, _) = group_of(**tid);
            (g == 0 || !l.slices.is_empty() || !l.instants.is_empty()) && (queues || g != 2)
        })
        .map(|(tid, l)| (*tid, l))
        .collect();
    lanes.sort_by_key(|(tid, l)| (group_of(*tid).0, l.sort, *tid));
    let hidden_queues = if queues {
        0
    } else {
        t.lanes
            .iter()
            .filter(|(tid, l)| group_of(**tid).0 == 2 && !l.slices.is_empty())
            .count()
    };

    let end = t
        .lanes
        .values()
        .flat_map(|l| l.slices.iter().map(|s| s.start + s.dur))
        .fold(0.0f64, f64::max)
        .max(t.ticks.map_or(0.0, |k| k as f64 / 1400.0));
    let span = if end > 0.0 { end } else { 1.0 };

    let w = f64::from(width);
    let (left, right) = (200.0, 70.0);
    let plot_w = w - left - right;
    let x = |us: f64| left + us / span * plot_w;
    let lane_h = 18.0;
    let pitch = 22.0;
    let top = 86.0;
    let mut group_breaks = 0;
    let mut prev_group = None;
    for (tid, _) in &lanes {
        let g = group_of(*tid).0;
        if prev_group.is_some_and(|p| p != g) {
            group_breaks += 1;
        }
        prev_group = Some(g);
    }
    let lanes_h = lanes.len() as f64 * pitch + group_breaks as f64 * 16.0;

    // Legend entries present in the drawn lanes.
    let mut legend: BTreeMap<String, &'static str> = BTreeMap::new();
    for (_, l) in &lanes {
        for s in &l.slices {
            legend.entry(legend_label(s)).or_insert(colour(s));
        }
    }
    let legend_cols = ((w - 40.0) / 230.0).floor().max(1.0) as usize;
    let legend_rows = legend.len().div_ceil(legend_cols);
    let height = top + lanes_h + 40.0 + legend_rows as f64 * 20.0 + 40.0;

    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {w} {height:.0}\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" \
         font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
    );
    // Title.
    let title = match t.ticks {
        Some(k) => format!(
            "NeuronCore timeline (simulated): {} ticks = {}",
            out::int(k),
            out::secs(k as f64 / 1.4e9)
        ),
        None => format!("Timeline: {}", out::secs(span / 1e6)),
    };
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"26\" font-size=\"17\" font-weight=\"bold\">{}</text>",
        esc(&title)
    );
    let mut sub = Vec::new();
    if let Some(m) = &t.timing_model {
        sub.push(format!("timing model {m}"));
    }
    match t.validated {
        Some(false) => sub.push("not validated against hardware".into()),
        Some(true) => sub.push("validated against hardware".into()),
        None => {}
    }
    if let Some(st) = &t.status {
        sub.push(format!("status {st}"));
    }
    if t.truncated {
        sub.push("EVENTS TRUNCATED: the trace ends early".into());
    }
    if hidden_queues > 0 {
        sub.push(format!(
            "{hidden_queues} DMA queue lanes hidden (--queues shows them)"
        ));
    }
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"46\" fill=\"#555555\">{}</text>",
        esc(&sub.join(" · "))
    );

    // Axis and grid.
    let step = nice_step(span, (plot_w / 110.0).max(2.0));
    let axis_y = top - 12.0;
    let _ = writeln!(
        s,
        "<line x1=\"{left}\" y1=\"{axis_y}\" x2=\"{:.1}\" y2=\"{axis_y}\" stroke=\"#333333\"/>",
        left + plot_w
    );
    let mut tick = 0.0;
    let mut i = 0u32;
    while tick <= span * 1.000_001 && i < 1000 {
        let px = x(tick);
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#e6e6e6\"/>\
             <line x1=\"{px:.1}\" y1=\"{axis_y}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#333333\"/>\
             <text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#333333\">{}</text>",
            axis_y,
            top + lanes_h,
            axis_y - 4.0,
            axis_y - 8.0,
            esc(&time_label(tick, span))
        );
        i += 1;
        tick = step * f64::from(i);
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555555\">busy</text>",
        w - 14.0,
        axis_y - 8.0
    );

    // Lanes.
    let px_us = span / plot_w; // microseconds per pixel
    let mut y = top;
    let mut prev_group = None;
    for (tid, lane) in &lanes {
        let (g, gname) = group_of(*tid);
        if prev_group != Some(g) {
            if prev_group.is_some() {
                y += 16.0;
            }
            let _ = writeln!(
                s,
                "<text x=\"12\" y=\"{:.1}\" font-size=\"10\" fill=\"#888888\">{}</text>",
                y - 2.0,
                esc(&gname.to_uppercase())
            );
            prev_group = Some(g);
        }
        let band = if (y - top) as i64 / pitch as i64 % 2 == 0 {
            "#f7f7f7"
        } else {
            "#ffffff"
        };
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{y:.1}\" width=\"{plot_w:.1}\" height=\"{lane_h}\" fill=\"{band}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + 13.0,
            esc(&lane.name)
        );
        // Busy: time in instructions / descriptors / transfers.
        let busy: f64 = lane
            .slices
            .iter()
            .filter(|sl| !is_wait(&sl.cat))
            .map(|sl| sl.dur)
            .sum();
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#333333\">{:.0}%</text>",
            w - 14.0,
            y + 13.0,
            (busy / span * 100.0).min(100.0)
        );
        // Merge slices closer than a pixel, per colour.
        let mut by_colour: BTreeMap<&str, Vec<&Slice>> = BTreeMap::new();
        for sl in &lane.slices {
            by_colour.entry(colour(sl)).or_default().push(sl);
        }
        // Waits first, so work is drawn over them.
        let mut keys: Vec<&str> = by_colour.keys().copied().collect();
        keys.sort_by_key(|k| {
            by_colour
                .get(k)
                .and_then(|v| v.first())
                .is_none_or(|sl| !is_wait(&sl.cat))
        });
        for key in keys {
            let Some(list) = by_colour.get_mut(key) else {
                continue;
            };
            list.sort_by(|a, b| a.start.total_cmp(&b.start));
            let wait = list.first().is_some_and(|sl| is_wait(&sl.cat));
            let (bar_y, bar_h) = if wait {
                (y + lane_h * 0.3, lane_h * 0.4)
            } else {
                (y + 1.0, lane_h - 2.0)
            };
            let mut k = 0;
            while k < list.len() {
                let Some(first) = list.get(k) else { break };
                let (start, mut stop, mut n) = (first.start, first.start + first.dur, 1usize);
                while let Some(next) = list.get(k + n) {
                    if next.start - stop > px_us {
                        break;
                    }
                    stop = stop.max(next.start + next.dur);
                    n += 1;
                }
                let x0 = x(start);
                let wpx = (x(stop) - x0).max(0.8);
                let tip = if n == 1 {
                    format!(
                        "{} — {} at {}",
                        first.name,
                        out::secs(first.dur / 1e6),
                        out::secs(first.start / 1e6)
                    )
                } else {
                    format!(
                        "{n} slices ({}) from {} to {}",
                        legend_label(first),
                        out::secs(start / 1e6),
                        out::secs(stop / 1e6)
                    )
                };
                let _ = writeln!(
                    s,
                    "<rect x=\"{x0:.2}\" y=\"{bar_y:.1}\" width=\"{wpx:.2}\" height=\"{bar_h:.1}\" \
                     fill=\"{key}\"><title>{}</title></rect>",
                    esc(&tip)
                );
                k += n;
            }
        }
        for (ts, name) in &lane.instants {
            let px = x(*ts);
            let _ = writeln!(
                s,
                "<path d=\"M{px:.1} {:.1} l4 6 l-4 6 l-4 -6 z\" fill=\"#000000\"><title>{}</title></path>",
                y + 3.0,
                esc(name)
            );
        }
        y += pitch;
    }

    // Legend.
    let mut ly = top + lanes_h + 30.0;
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"{ly:.1}\" font-weight=\"bold\">Legend</text>"
    );
    ly += 8.0;
    for (idx, (label, col)) in legend.iter().enumerate() {
        let cx = 20.0 + (idx % legend_cols) as f64 * 230.0;
        let cy = ly + (idx / legend_cols) as f64 * 20.0;
        let _ = writeln!(
            s,
            "<rect x=\"{cx:.1}\" y=\"{cy:.1}\" width=\"14\" height=\"12\" fill=\"{col}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            cx + 20.0,
            cy + 10.5,
            esc(label)
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"20\" y=\"{:.1}\" fill=\"#555555\">Thin bars are waits; bars closer than one \
         pixel are merged (hover for details). busy = share of the run spent executing.</text>",
        height - 14.0
    );
    s.push_str("</svg>\n");
    s
}

/// `nrt trace render FILE -o OUT.svg`.
pub(crate) fn render_file(file: &Path, output: &Path, queues: bool, width: u32) -> Result<()> {
    let ext = output
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if ext != "svg" {
        return Err(CliError::usage(format!(
            "-o {}: only SVG output is built in (name it .svg; convert with e.g. rsvg-convert)",
            output.display()
        )));
    }
    let shown = file.display().to_string();
    let bytes = std::fs::read(file).context(|| format!("cannot read '{shown}'"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError::new(format!("{shown}: not a trace (not UTF-8 text)")))?;
    let trace = parse(&text).map_err(|e| CliError::new(format!("{shown}: {e}")))?;
    let slices: usize = trace.lanes.values().map(|l| l.slices.len()).sum();
    if slices == 0 {
        bail!("{shown}: the trace has no slices to draw");
    }
    let svg = render(&trace, width, queues);
    std::fs::write(output, &svg).context(|| format!("cannot write '{}'", output.display()))?;
    let mut r = out::Report::new();
    r.field(
        "wrote",
        format!(
            "{} ({}): {} lanes, {} slices",
            output.display(),
            out::bytes(svg.len() as u64),
            trace.lanes.len(),
            out::int(slices as u64)
        ),
    );
    r.print();
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    const TRACE: &str = r#"{"otherData":{"timing_model":"m","validated_against_hw":false,"ticks":1400,"status":"NRT_SUCCESS","events_truncated":false},
      "traceEvents":[
        {"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"TensorE"}},
        {"ph":"M","name":"thread_name","pid":0,"tid":16,"args":{"name":"DMA engine 0"}},
        {"ph":"M","name":"thread_name","pid":0,"tid":100,"args":{"name":"DMA queue 0.0"}},
        {"ph":"X","name":"MultiplyMoving","cat":"instr","pid":0,"tid":1,"ts":0.1,"dur":0.2},
        {"ph":"X","name":"MultiplyMoving","cat":"instr","pid":0,"tid":1,"ts":0.3,"dur":0.2},
        {"ph":"X","name":"SemWait sem 1","cat":"sem_wait","pid":0,"tid":1,"ts":0.5,"dur":0.1},
        {"ph":"X","name":"desc 0","cat":"dma_desc","pid":0,"tid":16,"ts":0.0,"dur":0.1},
        {"ph":"X","name":"transfer <64> B","cat":"dma_transfer","pid":0,"tid":100,"ts":0.0,"dur":0.1},
        {"ph":"i","s":"t","name":"Notify","cat":"notify","pid":0,"tid":1,"ts":0.9}
      ]}"#;

    #[test]
    fn parses_and_draws_lanes_legend_and_axis() {
        let t = parse(TRACE).unwrap();
        assert_eq!(t.ticks, Some(1400));
        assert_eq!(t.lanes.len(), 3);
        let svg = render(&t, 800, false);
        assert!(svg.starts_with("<svg "));
        assert!(svg.contains(">TensorE</text>"));
        assert!(svg.contains(">DMA engine 0</text>"));
        assert!(
            !svg.contains(">DMA queue 0.0</text>"),
            "queues hidden by default"
        );
        assert!(svg.contains("1 DMA queue lanes hidden"));
        assert!(svg.contains("not validated against hardware"));
        assert!(svg.contains(">waiting on a semaphore</text>"));
        // Adjacent MultiplyMoving slices merge into one bar.
        assert!(svg.contains("2 slices (MultiplyMoving)"));
        assert!(svg.contains("&lt;64&gt;") || !svg.contains("<64>"));
        assert!(svg.ends_with("</svg>\n"));
        let with_q = render(&t, 800, true);
        assert!(with_q.contains(">DMA queue 0.0</text>"));
    }

    #[test]
    fn refuses_non_traces() {
        assert!(parse("{").unwrap_err().starts_with("not JSON"));
        assert!(parse("{\"a\":1}").unwrap_err().contains("traceEvents"));
        assert!(parse("3").is_err());
    }

    #[test]
    fn picks_nice_steps() {
        assert_eq!(nice_step(10.0, 10.0), 1.0);
        assert_eq!(nice_step(7.0, 10.0), 0.5);
        assert_eq!(nice_step(230.0, 10.0), 20.0);
        assert_eq!(time_label(0.5, 0.9), "500 ns");
        assert_eq!(time_label(2.5, 10.0), "2.5 µs");
        assert_eq!(time_label(1500.0, 3000.0), "1.5 ms");
    }
}
