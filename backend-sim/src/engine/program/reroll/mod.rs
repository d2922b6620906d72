//! The rerolling pass ([`reroll`]): turns repeated blocks of an unrolled program back into
//! loops with dynamic terms, so a program's instruction and descriptor counts become those of
//! its loop bodies.
//!
//! Each stream without loops is taken as a sequence of nodes (instructions, later loops too).
//! A pass scans it left to right; at each position it tries periods `p` (≤ [`MAX_PERIOD`]
//! nodes) whose following blocks of `p` nodes repeat the first *affinely*: the same nodes
//! except for the fields dynamic terms can change ([`TermSlot`]), each changing by a constant
//! step per repetition. Of the candidates, the longest run at each period is measured and the
//! one saving the most (instructions plus descriptors) becomes a loop whose body is the first
//! block with one term per changing field; the body is then rerolled in turn (inner loops).
//! Passes repeat on the result, so a sequence of identical loops that itself repeats affinely
//! nests, up to [`LOOP_REGS`] deep. While the pass runs a term names its loop by distance
//! (0: the innermost loop around the instruction), so equal repetitions have equal terms;
//! when the stream is written a loop's register is its nesting height minus one.
//!
//! Candidate periods are found by hashing: every node has an interned *shape* (the
//! instruction's encoding with its term-able fields zeroed, plus its terms; a loop's count,
//! height and body shapes) and a rolling hash over shapes compares two blocks in O(1); only
//! blocks of equal shapes are compared field by field, and at most [`MAX_TRIES`] of them per
//! position. A pass is O(n · `MAX_PERIOD`) in the worst case and close to linear on kernels.
//!
//! DMA: a trigger whose descriptors equal those of the first repetition shifted by constant
//! source and destination deltas gets `DmaSrc`/`DmaDst` terms over the first repetition's
//! descriptors; otherwise, if its first descriptor moves by a constant step (and its
//! descriptors do not already move with an inner loop), a `DmaFirst` term. Descriptors no
//! trigger references any more are dropped and the rest renumbered.
//!
//! Every instance the rerolled program issues is the instruction the unrolled program issued
//! at that point (same order, same operands, same descriptors), so outputs and hazards are
//! identical; only the loop instructions' sequencer ticks are added (docs/SIM_ISA.md, "Loops").

mod dma;
mod hash;
mod leaf;

use hash::FastMap;

use super::Program;
use super::loops::MAX_LOOP_COUNT;
use crate::engine::isa::{DynTerm, EngineId, Instr, LOOP_REGS, TermSlot};
use dma::{Canon, compact};
use leaf::{DST, FIELDS, FIRST, Leaf, Node, OFFSET, PARTITION, SRC, Shapes, VALUE};

/// Longest loop body the pass looks for, in nodes (instructions or already folded loops).
const MAX_PERIOD: usize = 256;
/// Candidate periods compared field by field per position, at most.
const MAX_TRIES: usize = 32;
/// Passes over a stream, at most (each may add one nesting level).
const MAX_PASSES: usize = 2 * LOOP_REGS;

/// Rerolls `program`: every stream that has no loops yet is rewritten with loops where its
/// instructions repeat affinely (see the module documentation), the terms added, unused
/// descriptors dropped. Streams that already have loops are kept as they are. The result is
/// checked with [`Program::validate`]; should it fail (it should not for a valid input), or
/// should the input not be valid, the input is returned unchanged. Never panics.
pub fn reroll(program: &Program) -> Program {
    let mut out = Program {
        name: program.name.clone(),
        tensors: program.tensors.clone(),
        streams: Default::default(),
        descriptors: program.descriptors.clone(),
        sem_init: program.sem_init.clone(),
        terms: Vec::new(),
    };
    let mut shapes = Shapes::default();
    let mut canon = Canon::default();
    let mut changed = false;
    for engine in EngineId::ALL {
        let stream = program.stream(engine);
        let own_terms: Vec<DynTerm> = program
            .terms
            .iter()
            .filter(|t| t.engine == engine)
            .copied()
            .collect();
        let body = match stream.split_last() {
            Some((Instr::Halt, body))
                if own_terms.is_empty() && !body.iter().any(Instr::is_loop) =>
            {
                body
            }
            _ => {
                if let Some(s) = out.streams.get_mut(engine.index()) {
                    *s = stream.to_vec();
                }
                out.terms.extend(own_terms);
                continue;
            }
        };
        let mut nodes: Vec<Node> = body
            .iter()
            .map(|&ins| {
                let dma = match ins {
                    Instr::DmaTrigger { first, count, .. } => program
                        .descriptors
                        .get(first as usize..(first as usize).saturating_add(count as usize))
                        .and_then(|d| canon.of(d)),
                    _ => None,
                };
                Node::Leaf(Leaf::new(ins, dma, &mut shapes))
            })
            .collect();
        let (next, folded) = passes(nodes, &mut shapes, LOOP_REGS as u8);
        nodes = next;
        changed |= folded;
        let mut instrs = Vec::with_capacity(nodes.iter().map(Node::size).sum::<usize>() + 1);
        emit(&nodes, engine, &mut Vec::new(), &mut instrs, &mut out.terms);
        instrs.push(Instr::Halt);
        if let Some(s) = out.streams.get_mut(engine.index()) {
            *s = instrs;
        }
    }
    if !changed {
        return program.clone();
    }
    compact(&mut out.streams, &out.terms, &mut out.descriptors);
    match out.validate() {
        Ok(()) => out,
        Err(_) => program.clone(),
    }
}

/// Writes `nodes` as instructions and terms; `regs`: the registers of the enclosing loops,
/// outermost first. A loop's register is its height minus one, so nested loops differ.
fn emit(
    nodes: &[Node],
    engine: EngineId,
    regs: &mut Vec<u8>,
    out: &mut Vec<Instr>,
    terms: &mut Vec<DynTerm>,
) {
    for n in nodes {
        match n {
            Node::Leaf(l) => {
                let pc = out.len() as u32;
                out.push(l.ins);
                let mut ts: Vec<(TermSlot, u8, i64)> = l
                    .terms
                    .iter()
                    .filter_map(|&(slot, up, step)| {
                        let at = regs.len().checked_sub(1 + usize::from(up))?;
                        regs.get(at).map(|&reg| (slot, reg, step))
                    })
                    .collect();
                ts.sort_unstable_by_key(|t| (t.0, t.1));
                terms.extend(ts.into_iter().map(|(slot, reg, step)| DynTerm {
                    engine,
                    pc,
                    slot,
                    reg,
                    step,
                }));
            }
            Node::Loop {
                count,
                body,
                height,
                ..
            } => {
                let reg = height.saturating_sub(1);
                out.push(Instr::LoopBegin { reg, count: *count });
                regs.push(reg);
                emit(body, engine, regs, out, terms);
                regs.pop();
                out.push(Instr::LoopEnd { reg });
            }
        }
    }
}

/// A run found at a position: `k` repetitions of `p` nodes, the step of every field of every
/// leaf of the block, and whether each trigger moves its descriptors (`DmaSrc`/`DmaDst`) or
/// its first descriptor (`DmaFirst`).
struct Run {
    p: usize,
    k: usize,
    /// Instructions and descriptors saved (a descriptor weighs as an instruction).
    saving: usize,
    steps: Vec<[i64; FIELDS]>,
    shift_mode: Vec<bool>,
}

impl Run {
    /// Whether a trigger of the body moves its first descriptor.
    fn uses_first(&self) -> bool {
        self.steps
            .iter()
            .zip(&self.shift_mode)
            .any(|(st, &shift)| !shift && st[FIRST] != 0)
    }
}

const NONE: usize = usize::MAX;
const HASH_MUL: u64 = 0x0000_0100_0000_01b3;

fn mix(x: u32) -> u64 {
    let mut z = u64::from(x).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Passes over `nodes` until one folds nothing (at most `MAX_PASSES`), new loops at most
/// `max_height` high.
fn passes(mut nodes: Vec<Node>, shapes: &mut Shapes, max_height: u8) -> (Vec<Node>, bool) {
    let mut changed = false;
    for _ in 0..MAX_PASSES {
        let (next, folded) = pass(nodes, shapes, max_height);
        nodes = next;
        changed |= folded;
        if !folded {
            break;
        }
    }
    (nodes, changed)
}

/// One pass over a stream's nodes; returns them with the runs found folded, and whether any.
/// At each position, of the candidate runs the one saving the most instructions is taken and
/// its body rerolled in turn (inner loops inside the outer one).
fn pass(nodes: Vec<Node>, shapes: &mut Shapes, max_height: u8) -> (Vec<Node>, bool) {
    let n = nodes.len();
    let h: Vec<u32> = nodes.iter().map(Node::shape).collect();
    let mut pre = vec![0u64; n + 1];
    let mut pw = vec![1u64; n + 1];
    for i in 0..n {
        pre[i + 1] = pre[i].wrapping_mul(HASH_MUL).wrapping_add(mix(h[i]));
        pw[i + 1] = pw[i].wrapping_mul(HASH_MUL);
    }
    let seg = |a: usize, len: usize| pre[a + len].wrapping_sub(pre[a].wrapping_mul(pw[len]));
    let mut next = vec![NONE; n];
    let mut last: FastMap<u32, usize> = FastMap::default();
    for i in (0..n).rev() {
        if let Some(&j) = last.get(&h[i]) {
            next[i] = j;
        }
        last.insert(h[i], i);
    }
    let mut out = Vec::with_capacity(n);
    let mut folded = false;
    let mut i = 0;
    while i < n {
        let mut found: Option<Run> = None;
        let mut tries = 0;
        let mut j = next[i];
        while j != NONE && j - i <= MAX_PERIOD && j + (j - i) <= n && tries < MAX_TRIES {
            let p = j - i;
            if seg(i, p) == seg(j, p) {
                tries += 1;
                if let Some(run) = find_run(&nodes, &h, i, p, max_height) {
                    let run = prefer_shifts(&nodes, &h, i, run, max_height);
                    if found.as_ref().is_none_or(|f| run.saving > f.saving) {
                        found = Some(run);
                    }
                }
            }
            j = next[j];
        }
        match found {
            Some(run) => {
                let span = run.p * run.k;
                out.push(fold(&nodes[i..i + run.p], &run, shapes, max_height));
                i += span;
                folded = true;
            }
            None => {
                out.push(nodes[i].clone());
                i += 1;
            }
        }
    }
    (out, folded)
}

/// `run`, or — when some trigger of it needs a `DmaFirst` term (its descriptors are not one
/// shifted set, typically a double-buffered destination alternating between slots) — the
/// run over 2–4 times its period at the same position (up to 4 × [`MAX_PERIOD`]) that
/// saves the most, counting descriptors: a longer body, but one descriptor set per trigger
/// instead of one per repetition.
fn prefer_shifts(nodes: &[Node], h: &[u32], i: usize, run: Run, max_height: u8) -> Run {
    if !run.uses_first() {
        return run;
    }
    let mut best = run;
    let base = best.p;
    for m in 2..=4 {
        let p = base * m;
        if p > 4 * MAX_PERIOD || i + 2 * p > nodes.len() {
            break;
        }
        if let Some(r) = find_run(nodes, h, i, p, max_height) {
            if r.saving > best.saving {
                best = r;
            }
        }
    }
    best
}

/// The leaves of `nodes`, in order.
fn leaves_of(nodes: &[Node]) -> Vec<&Leaf> {
    let mut v = Vec::new();
    nodes.iter().for_each(|n| n.leaves(&mut v));
    v
}

/// `b - a` for a field (the semaphore value wraps modulo 2^32).
fn field_step(f: usize, a: i64, b: i64) -> Option<i64> {
    if f == VALUE {
        Some(i64::from((b as u32).wrapping_sub(a as u32) as i32))
    } else {
        b.checked_sub(a)
    }
}

/// Whether field `f` of repetition `r` is `a + r · step`.
fn field_at(f: usize, a: i64, step: i64, r: usize, v: i64) -> bool {
    let d = i128::from(step) * r as i128;
    if f == VALUE {
        (a as u32).wrapping_add(d.rem_euclid(1 << 32) as u32) == v as u32
    } else {
        i128::from(a) + d == i128::from(v)
    }
}

/// The longest affine run of blocks of `p` nodes at `i`, if it saves instructions.
fn find_run(nodes: &[Node], h: &[u32], i: usize, p: usize, max_height: u8) -> Option<Run> {
    let block = nodes.get(i..i + p)?;
    let height = 1 + block.iter().map(Node::height).max().unwrap_or(0);
    if height > max_height {
        return None;
    }
    let same = |a: usize, b: usize| h.get(a..a + p) == h.get(b..b + p);
    if !same(i, i + p) {
        return None;
    }
    let l0 = leaves_of(block);
    let l1 = leaves_of(nodes.get(i + p..i + 2 * p)?);
    let mut steps = Vec::with_capacity(l0.len());
    let mut shift_ok = Vec::with_capacity(l0.len());
    for (a, b) in l0.iter().zip(&l1) {
        let mut st = [0i64; FIELDS];
        for (f, s) in st.iter_mut().enumerate() {
            *s = field_step(f, a.vals[f], b.vals[f])?;
        }
        let shift = a.is_trigger() && a.canon != u32::MAX && a.canon == b.canon && !a.moves_first();
        steps.push(st);
        shift_ok.push(shift);
    }
    // A trigger whose descriptors already move with an inner loop gets no `DmaFirst` term:
    // the table would have to keep every descriptor between its instances' sets.
    let mut first_ok: Vec<bool> = l0.iter().map(|l| !l.moves_descriptors()).collect();
    if l0
        .iter()
        .zip(shift_ok.iter().zip(&first_ok))
        .any(|(l, (s, f))| l.is_trigger() && !s && !f)
    {
        return None;
    }
    let mut k = 2usize;
    while i + (k + 1) * p <= nodes.len() && k < MAX_LOOP_COUNT as usize && same(i, i + k * p) {
        let Some(lr) = nodes.get(i + k * p..i + (k + 1) * p).map(leaves_of) else {
            break;
        };
        let mut new_shift = shift_ok.clone();
        let mut new_first = first_ok.clone();
        let ok = l0.iter().zip(&lr).enumerate().all(|(j, (a, b))| {
            let st = &steps[j];
            let plain = (OFFSET..FIRST).all(|f| field_at(f, a.vals[f], st[f], k, b.vals[f]));
            if !plain {
                return false;
            }
            if !a.is_trigger() {
                return true;
            }
            new_shift[j] &= a.canon == b.canon
                && field_at(SRC, a.vals[SRC], st[SRC], k, b.vals[SRC])
                && field_at(DST, a.vals[DST], st[DST], k, b.vals[DST]);
            new_first[j] &= field_at(FIRST, a.vals[FIRST], st[FIRST], k, b.vals[FIRST]);
            new_shift[j] || new_first[j]
        });
        if !ok {
            break;
        }
        shift_ok = new_shift;
        first_ok = new_first;
        k += 1;
    }
    let size: usize = block.iter().map(Node::size).sum();
    let saving = (size * (k - 1)).checked_sub(2).filter(|&s| s > 0)?;
    // Descriptors the repetitions after the first no longer need (shifted triggers).
    let descs: usize = l0
        .iter()
        .zip(&shift_ok)
        .filter(|(_, s)| **s)
        .map(|(l, _)| match l.ins {
            Instr::DmaTrigger { count, .. } => count as usize * (k - 1),
            _ => 0,
        })
        .sum();
    let saving = saving.saturating_add(descs);
    // Repetition 1 was compared for the shift mode only through the canonical set; the
    // first-descriptor mode needs nothing more (its step is defined by repetition 1).
    Some(Run {
        p,
        k,
        saving,
        steps,
        shift_mode: shift_ok,
    })
}

/// The loop of `run` over `block` (its first repetition), its body rerolled in turn.
fn fold(block: &[Node], run: &Run, shapes: &mut Shapes, max_height: u8) -> Node {
    let mut body = block.to_vec();
    {
        let mut leaves = Vec::new();
        body.iter_mut().for_each(|n| n.leaves_mut(0, &mut leaves));
        for (j, (l, m)) in leaves.into_iter().enumerate() {
            // Terms of loops outside the block now have one more loop in between.
            for t in &mut l.terms {
                if t.1 >= m {
                    t.1 = t.1.saturating_add(1);
                }
            }
            let (Some(st), Some(&shift)) = (run.steps.get(j), run.shift_mode.get(j)) else {
                continue;
            };
            let n = l.ins.pattern_count().min(6);
            for k in 0..n {
                if st[OFFSET + k] != 0 {
                    l.terms.push((TermSlot::Offset(k as u8), m, st[OFFSET + k]));
                }
                if st[PARTITION + k] != 0 {
                    l.terms
                        .push((TermSlot::Partition(k as u8), m, st[PARTITION + k]));
                }
            }
            if st[VALUE] != 0 {
                l.terms.push((TermSlot::Value, m, st[VALUE]));
            }
            if l.is_trigger() {
                if shift {
                    if st[SRC] != 0 {
                        l.terms.push((TermSlot::DmaSrc, m, st[SRC]));
                    }
                    if st[DST] != 0 {
                        l.terms.push((TermSlot::DmaDst, m, st[DST]));
                    }
                } else if st[FIRST] != 0 {
                    l.terms.push((TermSlot::DmaFirst, m, st[FIRST]));
                }
            }
        }
    }
    body.iter_mut().for_each(|n| n.reshape(shapes));
    let (body, _) = passes(body, shapes, max_height.saturating_sub(1));
    let mut node = Node::Loop {
        count: run.k as u32,
        body,
        height: 0,
        size: 0,
        shape: 0,
    };
    node.reshape(shapes);
    node
}
