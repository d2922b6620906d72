//! Emitting a captured loop: iteration 0, iteration 1 and the template (iterations 2..n as a
//! `LoopBegin`/`LoopEnd` body with dynamic terms), each operation synchronised on the box of
//! its accesses over the iterations it stands for (`sync/loops.rs`).

use nrt_core::{Error, err};
use nrt_sim::engine::{DmaDescriptor, DmaEndpoint, Instr, TermSlot};

use super::node::Node;
use crate::kernel::{Kernel, Triggers};
use crate::stream::Item;
use crate::sync::Access;

/// An enclosing loop while nodes are emitted: its register ranges over `lo..=hi`; the
/// instance emitted is at `at`; `term`: the register is live (the template), so the
/// instructions get terms for it.
#[derive(Clone, Copy, Debug)]
struct Frame {
    depth: u8,
    lo: i64,
    hi: i64,
    at: i64,
    term: bool,
}

/// Every combination of each frame's `lo` and `hi` (the corners: accesses are affine, so
/// their extremes are there), as a register value per depth.
fn corners(frames: &[Frame]) -> Vec<[i64; 4]> {
    let mut out = vec![[0i64; 4]];
    for f in frames {
        let mut next = Vec::with_capacity(out.len() * 2);
        for c in &out {
            for v in [f.lo, f.hi] {
                let mut c = *c;
                if let Some(x) = c.get_mut(usize::from(f.depth)) {
                    *x = v;
                }
                next.push(c);
            }
        }
        out = next;
    }
    out
}

/// The instance of `ins` (instruction `idx` of an operation with `terms`) when the
/// registers hold `regs`.
fn instance(
    op: &str,
    ins: &Instr,
    idx: usize,
    terms: &[(usize, TermSlot, u8, i64)],
    regs: &[i64; 4],
) -> Result<Instr, Error> {
    let mut out = *ins;
    for &(i, slot, d, step) in terms.iter().filter(|t| t.0 == idx) {
        let r = regs.get(usize::from(d)).copied().unwrap_or(0);
        let delta = i128::from(step) * i128::from(r);
        let bad = || {
            err!(
                Invalid,
                "for_range: {op}: {slot} of instruction {i} leaves its field"
            )
        };
        match slot {
            TermSlot::Offset(k) | TermSlot::Partition(k) => {
                let ap = out.pattern_mut(k).ok_or_else(bad)?;
                if matches!(slot, TermSlot::Offset(_)) {
                    ap.offset = u32::try_from(i128::from(ap.offset) + delta).map_err(|_| bad())?;
                } else {
                    ap.start_partition =
                        u8::try_from(i128::from(ap.start_partition) + delta).map_err(|_| bad())?;
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// `e` with its byte offset moved by `delta`.
fn shift_endpoint(e: DmaEndpoint, delta: i128) -> Option<DmaEndpoint> {
    Some(match e {
        DmaEndpoint::Hbm { tensor, offset } => DmaEndpoint::Hbm {
            tensor,
            offset: u64::try_from(i128::from(offset) + delta).ok()?,
        },
        DmaEndpoint::Sbuf { partition, offset } => DmaEndpoint::Sbuf {
            partition,
            offset: u32::try_from(i128::from(offset) + delta).ok()?,
        },
        DmaEndpoint::Psum { partition, offset } => DmaEndpoint::Psum {
            partition,
            offset: u32::try_from(i128::from(offset) + delta).ok()?,
        },
        DmaEndpoint::Block(mut b) => {
            b.offset = u64::try_from(i128::from(b.offset) + delta).ok()?;
            DmaEndpoint::Block(b)
        }
    })
}

/// `descs` moved by the shifts at `regs`.
fn shifted(
    op: &str,
    descs: &[DmaDescriptor],
    shifts: &[(u8, i64, i64)],
    regs: &[i64; 4],
) -> Result<Vec<DmaDescriptor>, Error> {
    let (mut s, mut d) = (0i128, 0i128);
    for &(depth, src, dst) in shifts {
        let r = i128::from(regs.get(usize::from(depth)).copied().unwrap_or(0));
        s += i128::from(src) * r;
        d += i128::from(dst) * r;
    }
    descs
        .iter()
        .map(|x| {
            Some(DmaDescriptor {
                src: shift_endpoint(x.src, s)?,
                dst: shift_endpoint(x.dst, d)?,
                len: x.len,
            })
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| err!(Invalid, "for_range: {op}: a DMA offset leaves its field"))
}

/// One box per (memory, direction) over several accesses.
fn boxes(all: impl IntoIterator<Item = Access>) -> Vec<Access> {
    let mut out: Vec<Access> = Vec::new();
    for a in all {
        let Some(bb) = a.rects.iter().copied().reduce(|x, y| x.hull(&y)) else {
            continue;
        };
        match out
            .iter_mut()
            .find(|o| o.mem == a.mem && o.write == a.write)
        {
            Some(o) => {
                if let Some(r) = o.rects.first_mut() {
                    *r = r.hull(&bb);
                }
            }
            None => out.push(Access {
                mem: a.mem,
                write: a.write,
                rects: vec![bb],
            }),
        }
    }
    out
}

/// The register values of the instance emitted.
fn at(frames: &[Frame]) -> [i64; 4] {
    let mut regs = [0i64; 4];
    for f in frames {
        if let Some(x) = regs.get_mut(usize::from(f.depth)) {
            *x = f.at;
        }
    }
    regs
}

impl Kernel {
    /// Emits a captured top-level loop.
    pub(super) fn emit_node(&mut self, node: &Node) -> Result<(), Error> {
        self.emit_nodes(std::slice::from_ref(node), &[])
    }

    fn emit_nodes(&mut self, nodes: &[Node], frames: &[Frame]) -> Result<(), Error> {
        let live = |d: u8| frames.iter().any(|f| f.term && f.depth == d);
        let regs = at(frames);
        let cs = corners(frames);
        for n in nodes {
            match n {
                Node::Engine {
                    op,
                    engine,
                    instrs,
                    terms,
                } => {
                    let mut items = Vec::with_capacity(instrs.len());
                    for (idx, ins) in instrs.iter().enumerate() {
                        let i = instance(op, ins, idx, terms, &regs)?;
                        let ts: Vec<_> = terms
                            .iter()
                            .filter(|t| t.0 == idx && live(t.2))
                            .map(|&(_, slot, d, step)| (slot, d, step))
                            .collect();
                        items.push(if ts.is_empty() {
                            Item::Instr(i)
                        } else {
                            Item::Looped(i, ts)
                        });
                    }
                    let mut accs = Vec::new();
                    for c in &cs {
                        for (idx, ins) in instrs.iter().enumerate() {
                            let i = instance(op, ins, idx, terms, c)?;
                            let (acc, k) = i.accesses();
                            for (ap, write) in acc.iter().take(k).flatten() {
                                accs.push(Access::of_pattern(ap, *write));
                            }
                        }
                    }
                    self.emit_engine_items(*engine, items, &boxes(accs));
                }
                Node::Dma {
                    op,
                    trigger,
                    spread,
                    descs,
                    shifts,
                } => {
                    let base = shifted(op, descs, shifts, &regs)?;
                    let groups = Kernel::dma_groups(&base, *spread).len();
                    let mut accesses: Vec<Vec<Access>> = vec![Vec::new(); groups];
                    for c in &cs {
                        let moved = shifted(op, descs, shifts, c)?;
                        for (g, acc) in Kernel::dma_groups(&moved, *spread)
                            .into_iter()
                            .zip(accesses.iter_mut())
                        {
                            acc.extend(self.dma_accesses(g));
                        }
                    }
                    let accesses = accesses.into_iter().map(boxes).collect();
                    let ts: Vec<_> = shifts.iter().copied().filter(|s| live(s.0)).collect();
                    self.emit_dma_shifted(*trigger, &base, *spread, &ts, accesses);
                }
                Node::Loop {
                    depth,
                    count,
                    first,
                    body,
                } => self.emit_loop(*depth, *count, first, body, frames)?,
            }
        }
        Ok(())
    }

    /// Iteration 0, iteration 1, then the loop over iterations 2..count.
    fn emit_loop(
        &mut self,
        depth: u8,
        count: usize,
        first: &[Node],
        body: &[Node],
        frames: &[Frame],
    ) -> Result<(), Error> {
        self.emit_nodes(first, frames)?;
        let iters = u32::try_from(count - 2)
            .map_err(|_| err!(Invalid, "for_range: {count} iterations are too many"))?;
        let hi = i64::from(iters) - 1;
        let id = self.sync.loop_begin()?;
        let dma = self.next_dma;
        let mut f = frames.to_vec();
        f.push(Frame {
            depth,
            lo: -1,
            hi,
            at: -1,
            term: false,
        });
        self.triggers.push(Triggers::default());
        let r = self.emit_nodes(body, &f);
        let mut trig = self.triggers.pop().unwrap_or_default();
        r?;
        // Iteration 1 and the template use the same DMA engines and triggers.
        self.next_dma = dma;
        trig.replay = true;
        self.triggers.push(trig);
        self.sync.loop_template(id, depth, iters);
        for s in &mut self.streams {
            s.push(Item::LoopBegin {
                reg: depth,
                count: iters,
            });
        }
        if let Some(last) = f.last_mut() {
            *last = Frame {
                depth,
                lo: 0,
                hi,
                at: 0,
                term: true,
            };
        }
        let r = self.emit_nodes(body, &f);
        self.triggers.pop();
        r?;
        for s in &mut self.streams {
            s.push(Item::LoopEnd { reg: depth });
        }
        self.sync.loop_end(id)
    }
}
