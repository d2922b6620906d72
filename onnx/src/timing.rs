//! Per-node simulated time.
//!
//! **Markers.** Lowering records, before the first node and after every node, one marker
//! operation on each of ScalarE, VectorE and GpSimdE: a one-element `tensor_copy` of a tile
//! of that engine's own (allocated once, touched by nothing else, so no synchronisation is
//! ever attached to it). After `Kernel::build_unrolled`, each marker instruction (found as
//! the stream's instructions equal to its first marker) is replaced by `Notify { payload:
//! boundary }`, and the program is rerolled as `Kernel::build` would. So the program's data
//! path is exactly the unmarked kernel's; each engine, as it passes from one node's
//! instructions to the next's, appends `(tick, engine, boundary)` to the notification queue.
//!
//! **Attribution.** Node `i` ends at `end_i = max(end_{i−1}, max over the three engines of
//! the tick at which it passed boundary i + 1)`: when the last of them finished the node's
//! instructions. Its time is `end_i − end_{i−1}` (the last node also takes the tail up to
//! the end of the execution: its output stores), so the times add up to the total. TensorE
//! and the DMA queues carry no markers: their work for a node is consumed by the node's
//! evacuating and storing instructions on the marked engines, which cannot pass the
//! boundary first. The **bounding engine** is the unit busiest during the node's window
//! `[end_{i−1}, end_i)` in the event log (engine instructions; for "DMA", the time any
//! transfer is in flight), or, without an event log, the marked engine that passed the boundary last.

use nrt_kernel::{EngineId, Kernel, TensorCopy, Tile};
use nrt_sim::engine::{EventKind, ExecReport, Instr, Program, Track, reroll};

use crate::error::Result;
use crate::lower_ctx::kerr;

/// The engines that carry markers.
pub const MARKED: [EngineId; 3] = [EngineId::Scalar, EngineId::Vector, EngineId::GpSimd];

/// The marker tiles of a kernel.
#[derive(Debug)]
pub(crate) struct Markers {
    tiles: Vec<(EngineId, Tile)>,
    pub(crate) count: u32,
}

impl Markers {
    /// Allocates the marker tiles.
    pub(crate) fn new(k: &mut Kernel) -> Result<Markers> {
        let mut tiles = Vec::new();
        for e in MARKED {
            let t = k
                .sbuf_tile(
                    &format!("onnx_marker_{}", e.name()),
                    nrt_kernel::DType::F32,
                    &[1, 1],
                )
                .map_err(kerr)?;
            tiles.push((e, t));
        }
        Ok(Markers { tiles, count: 0 })
    }

    /// Records one boundary.
    pub(crate) fn mark(&mut self, k: &mut Kernel) -> Result<()> {
        for (e, t) in &self.tiles {
            k.emit(TensorCopy {
                dst: t,
                src: t,
                engine: Some(*e),
            })
            .map_err(kerr)?;
        }
        self.count += 1;
        Ok(())
    }
}

/// Replaces the markers of an unrolled program by notifications and rerolls it.
pub(crate) fn finish(mut p: Program, count: u32) -> Result<Program> {
    for e in MARKED {
        let s = &mut p.streams[e.index()];
        let template = s
            .iter()
            .copied()
            .find(|i| matches!(i, Instr::TensorCopy { .. }));
        let Some(template) = template else {
            return Err(crate::Error::Kernel(format!("no marker on {}", e.name())));
        };
        let mut n = 0;
        for i in s.iter_mut() {
            if *i == template {
                *i = Instr::Notify { payload: n };
                n += 1;
            }
        }
        if n != count {
            return Err(crate::Error::Kernel(format!(
                "{} markers found on {}, {count} recorded",
                n,
                e.name()
            )));
        }
    }
    Ok(reroll(&p))
}

/// One node's share of the simulated time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTime {
    /// Tick at which the node's window starts (the previous node's end).
    pub start: u64,
    /// Tick at which the last marked engine finished it.
    pub end: u64,
    /// The unit that bounds it.
    pub bound: &'static str,
}

/// Attributes the execution in `report` to `n` nodes (see the module documentation).
pub fn attribute(report: &ExecReport, n: usize) -> Vec<NodeTime> {
    let mut pass = vec![[None::<u64>; 3]; n + 1];
    for note in &report.notifications {
        let (Some(ei), Some(row)) = (
            MARKED.iter().position(|&e| e == note.engine),
            pass.get_mut(note.payload as usize),
        ) else {
            continue;
        };
        row[ei] = Some(note.tick);
    }
    let mut out = Vec::with_capacity(n);
    let mut prev = 0u64;
    for i in 0..n {
        let row = &pass[i + 1];
        let (mut end, mut last) = (prev, EngineId::Vector);
        for (ei, t) in row.iter().enumerate() {
            if let Some(t) = *t
                && t >= end
            {
                end = t;
                last = MARKED[ei];
            }
        }
        if i + 1 == n {
            end = end.max(report.ticks);
        }
        out.push(NodeTime {
            start: prev,
            end,
            bound: last.name(),
        });
        prev = end;
    }
    if !report.events.is_empty() {
        busiest(report, &mut out);
    }
    out
}

/// Sets each node's bounding unit to the one busiest in its window.
fn busiest(report: &ExecReport, nodes: &mut [NodeTime]) {
    // Busy ticks per node per unit: 5 engines, then DMA.
    let mut busy = vec![[0u64; 6]; nodes.len()];
    let ends: Vec<u64> = nodes.iter().map(|t| t.end).collect();
    let mut add = |unit: usize, mut s: u64, e: u64| {
        let mut i = ends.partition_point(|&x| x <= s);
        while s < e && i < busy.len() {
            let stop = e.min(ends[i]);
            busy[i][unit] += stop.saturating_sub(s);
            s = stop;
            i += 1;
        }
    };
    // DMA: the time during which any transfer is in flight (the union over the queues).
    let mut dma: Vec<(u64, u64)> = Vec::new();
    for ev in &report.events {
        match (ev.track, ev.kind) {
            (Track::Engine(e), EventKind::Instr { .. }) => {
                add(e.index(), ev.start, ev.start + ev.dur)
            }
            (Track::DmaQueue(..), EventKind::Transfer { .. }) => {
                dma.push((ev.start, ev.start + ev.dur))
            }
            _ => {}
        }
    }
    dma.sort_unstable();
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in dma {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                add(5, cs, ce);
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = cur {
        add(5, cs, ce);
    }
    for (t, b) in nodes.iter_mut().zip(busy) {
        if let Some((u, &v)) = b.iter().enumerate().max_by_key(|(_, v)| **v)
            && v > 0
        {
            t.bound = if u == 5 {
                "DMA"
            } else {
                EngineId::ALL.get(u).map_or("?", |e| e.name())
            };
        }
    }
}
