//! Loops and dynamic terms of a program (format 1.1): their load-time rules, the check of one
//! instruction instance (shared with the executor), and the executor's plan of a program with
//! loops ([`LoopPlan`]).
//!
//! Rules: `LoopBegin`/`LoopEnd` nest properly (at most [`LOOP_REGS`] deep), name an existing
//! iteration register not used by an enclosing loop, and close before `Halt`; a trip count is
//! in `1..=`[`MAX_LOOP_COUNT`]; a stream executes at most
//! [`MAX_DYNAMIC_INSTRS`] instructions counting every iteration; the term table is sorted,
//! each term names an instruction that has its slot and the register of an enclosing loop.
//! Every instruction with terms is checked, with all its rules, in the iterations at the
//! corners of its registers' ranges (first and last iteration of each): an error there is an
//! error of a reachable iteration, refused at load. The other iterations are checked as they
//! issue (an error stops the execution with `NRT_EXEC_OOB`). The DMA triggers with terms
//! cover at most [`MAX_DESCRIPTORS`] descriptors in all, which bounds the load-time checks.

use nrt_core::{Error, err};

use super::descriptors::validate_descriptor;
use super::stationary::check_looped;
use super::{MAX_DESCRIPTORS, Program};
use crate::engine::isa::{
    DmaDescriptor, DmaShift, DynTerm, EngineId, Instr, LOOP_REGS, TermSlot, check_engine, instance,
    regs_text, shift_descriptor,
};

/// Most dynamic terms in a program.
pub const MAX_TERMS: usize = 1 << 22;
/// Most iterations of one loop (`LoopBegin` counts are `1..=MAX_LOOP_COUNT`): 2^24, far above
/// any tiling's trip count (an 8192^3 matmul's largest is 31) and small enough that a loop's
/// register, scaled by any term, is checked at its extreme iterations in exact arithmetic.
pub const MAX_LOOP_COUNT: u32 = 1 << 24;
/// Most instructions one stream executes, every loop iteration counted (loop instructions
/// included): a bound on a program's work independent of the tick limit.
pub const MAX_DYNAMIC_INSTRS: u64 = 1 << 32;

/// An open loop during a walk of a stream.
#[derive(Clone, Copy)]
pub(super) struct Open {
    reg: u8,
    count: u32,
    pc: usize,
}

/// The terms of instruction `pc` of `engine` in a table sorted by engine and pc, read from
/// `*next` on (a cursor that a walk over the streams in order advances past them).
pub(super) fn terms_at<'t>(
    terms: &'t [DynTerm],
    next: &mut usize,
    engine: EngineId,
    pc: usize,
) -> &'t [DynTerm] {
    let start = *next;
    while terms
        .get(*next)
        .is_some_and(|t| t.engine == engine && t.pc as usize == pc)
    {
        *next += 1;
    }
    terms.get(start..*next).unwrap_or(&[])
}

/// Walks `stream` checking its loop structure; calls `f` on every instruction with the
/// loops enclosing it (innermost last). Returns the dynamic instruction count (saturating).
pub(super) fn walk(
    engine: EngineId,
    stream: &[Instr],
    mut f: impl FnMut(usize, &Instr, &[Open]) -> Result<(), Error>,
) -> Result<u64, Error> {
    let mut stack: Vec<Open> = Vec::new();
    let mut dynamic = 0u64;
    let mult = |s: &[Open]| {
        s.iter()
            .fold(1u64, |a, o| a.saturating_mul(u64::from(o.count)))
    };
    for (pc, ins) in stream.iter().enumerate() {
        match *ins {
            Instr::LoopBegin { reg, count } => {
                if usize::from(reg) >= LOOP_REGS {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopBegin: iteration register {reg} does not exist \
                         (registers 0-{})",
                        LOOP_REGS - 1
                    ));
                }
                if count == 0 || count > MAX_LOOP_COUNT {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopBegin: trip count {count} is outside \
                         1..={MAX_LOOP_COUNT}"
                    ));
                }
                if stack.len() >= LOOP_REGS {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopBegin: loops nest at most {LOOP_REGS} deep"
                    ));
                }
                if let Some(o) = stack.iter().find(|o| o.reg == reg) {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopBegin: register {reg} is the iteration register \
                         of the enclosing loop opened at pc {}",
                        o.pc
                    ));
                }
                dynamic = dynamic.saturating_add(mult(&stack));
                f(pc, ins, &stack)?;
                stack.push(Open { reg, count, pc });
            }
            Instr::LoopEnd { reg } => {
                let Some(top) = stack.last().copied() else {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopEnd without an open loop"
                    ));
                };
                if top.reg != reg {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: LoopEnd of register {reg} does not close the \
                         innermost loop (register {}, opened at pc {})",
                        top.reg,
                        top.pc
                    ));
                }
                dynamic = dynamic.saturating_add(mult(&stack));
                f(pc, ins, &stack)?;
                stack.pop();
            }
            Instr::Halt => {
                if let Some(o) = stack.last() {
                    return Err(err!(
                        Invalid,
                        "{engine} pc {pc}: the loop of register {} opened at pc {} is not \
                         closed before Halt",
                        o.reg,
                        o.pc
                    ));
                }
                dynamic = dynamic.saturating_add(1);
                f(pc, ins, &stack)?;
            }
            _ => {
                dynamic = dynamic.saturating_add(mult(&stack));
                f(pc, ins, &stack)?;
            }
        }
    }
    Ok(dynamic)
}

/// Calls `f` with the registers of every corner of the ranges of the registers `terms` use
/// (each at its first or last iteration; the others 0) and the bit set of those registers.
/// Nothing when an enclosing loop never runs.
pub(super) fn for_each_corner(
    terms: &[DynTerm],
    stack: &[Open],
    mut f: impl FnMut(&[u32; LOOP_REGS], u8) -> Result<(), Error>,
) -> Result<(), Error> {
    if stack.iter().any(|o| o.count == 0) {
        return Ok(());
    }
    let mut last = [0u32; LOOP_REGS];
    let mut used = 0u8;
    for t in terms {
        if let Some(o) = stack.iter().find(|o| o.reg == t.reg) {
            if let Some(l) = last.get_mut(usize::from(t.reg)) {
                *l = o.count - 1;
                used |= 1 << t.reg;
            }
        }
    }
    for mask in 0u8..(1 << LOOP_REGS) {
        // Subsets of `used` only, each once; a register with one iteration has one value.
        if mask & !used != 0 || (0..LOOP_REGS).any(|r| mask & (1 << r) != 0 && last[r] == 0) {
            continue;
        }
        let mut regs = [0u32; LOOP_REGS];
        for (r, v) in regs.iter_mut().enumerate() {
            if mask & (1 << r) != 0 {
                *v = last[r];
            }
        }
        f(&regs, used)?;
    }
    Ok(())
}

/// Checks one instance of an instruction: a data-path instruction's operand and engine rules;
/// a `DmaTrigger`'s descriptors, shifted, against the table and the tensors. The message does
/// not name the instruction (callers do).
pub(crate) fn check_instance(
    ins: &Instr,
    shift: DmaShift,
    engine: EngineId,
    minor: u16,
    descriptors: &[DmaDescriptor],
    sizes: &[u64],
) -> Result<(), Error> {
    if let Instr::DmaTrigger { first, count, .. } = *ins {
        let range = first as usize..(first as usize).saturating_add(count as usize);
        let Some(descs) = descriptors.get(range) else {
            return Err(err!(
                Invalid,
                "descriptors [{first}, {first}+{count}) are not in the table of {}",
                descriptors.len()
            ));
        };
        for (i, d) in descs.iter().enumerate() {
            let idx = first as usize + i;
            let shifted = shift_descriptor(d, shift).ok_or_else(|| {
                err!(
                    Invalid,
                    "DMA descriptor {idx} shifted by (source {}, destination {}) leaves its \
                     offset field",
                    shift.src,
                    shift.dst
                )
            })?;
            validate_descriptor(&shifted, sizes).map_err(|e| {
                err!(
                    Invalid,
                    "DMA descriptor {idx} shifted by (source {}, destination {}): {}",
                    shift.src,
                    shift.dst,
                    e.message()
                )
            })?;
        }
        return Ok(());
    }
    if ins.is_control() {
        return Ok(());
    }
    ins.validate_operands()?;
    check_engine(ins, engine, minor)
}

impl Program {
    /// The loop and term rules (see the module documentation); `sizes` are the tensors' byte
    /// sizes. Called by `Program::validate_as` after the per-instruction checks.
    pub(super) fn validate_loops(&self, minor: u16, sizes: &[u64]) -> Result<(), Error> {
        let p = self;
        if p.terms.len() > MAX_TERMS {
            return Err(err!(Invalid, "more than {MAX_TERMS} dynamic terms"));
        }
        for (i, w) in p.terms.windows(2).enumerate() {
            if let [a, b] = w {
                if a.key() >= b.key() {
                    return Err(err!(
                        Invalid,
                        "dynamic term {}: the table must be sorted by engine, pc, slot and register, \
                     each combination at most once",
                        i + 1
                    ));
                }
            }
        }
        let mut dma_budget = 0u64;
        let mut next = 0usize;
        for engine in EngineId::ALL {
            let stream = p.stream(engine);
            let mut has_loops = false;
            let dynamic = walk(engine, stream, |pc, ins, stack| {
                has_loops |= ins.is_loop();
                let terms = terms_at(&p.terms, &mut next, engine, pc);
                if terms.is_empty() {
                    return Ok(());
                }
                check_terms(
                    p,
                    engine,
                    pc,
                    ins,
                    terms,
                    stack,
                    minor,
                    sizes,
                    &mut dma_budget,
                )
            })?;
            if let Some(t) = p.terms.get(next).filter(|t| t.engine == engine) {
                return Err(err!(
                    Invalid,
                    "dynamic term {next}: {engine} has no instruction {} (the stream has {})",
                    t.pc,
                    stream.len()
                ));
            }
            if dynamic > MAX_DYNAMIC_INSTRS {
                return Err(err!(
                    Invalid,
                    "{engine}: the stream's loops execute more than {MAX_DYNAMIC_INSTRS} instructions"
                ));
            }
            if has_loops {
                check_looped(engine, stream, &partners(stream))?;
            }
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn check_terms(
    p: &Program,
    engine: EngineId,
    pc: usize,
    ins: &Instr,
    terms: &[DynTerm],
    stack: &[Open],
    minor: u16,
    sizes: &[u64],
    dma_budget: &mut u64,
) -> Result<(), Error> {
    let name = ins.name();
    for t in terms {
        let at = || format!("dynamic term on {engine} pc {pc} ({name})");
        if !stack.iter().any(|o| o.reg == t.reg) {
            return Err(err!(
                Invalid,
                "{}: register {} is not the iteration register of an enclosing loop",
                at(),
                t.reg
            ));
        }
        if !t.slot.applies_to(ins) {
            return Err(match t.slot {
                TermSlot::Offset(k) | TermSlot::Partition(k) => err!(
                    Invalid,
                    "{}: pattern operand {k} does not exist ({name} has {})",
                    at(),
                    ins.pattern_count()
                ),
                TermSlot::Value => err!(Invalid, "{}: {name} has no immediate value", at()),
                TermSlot::DmaSrc | TermSlot::DmaDst | TermSlot::DmaFirst => {
                    err!(Invalid, "{}: {} applies to DmaTrigger only", at(), t.slot)
                }
            });
        }
    }
    if let Instr::DmaTrigger { count, .. } = *ins {
        *dma_budget = dma_budget.saturating_add(u64::from(count));
        if *dma_budget > MAX_DESCRIPTORS as u64 {
            return Err(err!(
                Invalid,
                "{engine} pc {pc}: the DMA triggers with dynamic terms cover more than \
                 {MAX_DESCRIPTORS} descriptors in all"
            ));
        }
    }
    for_each_corner(terms, stack, |regs, used| {
        let ctx = |e: Error| {
            err!(
                Invalid,
                "{engine} pc {pc} ({name}) in iteration {}: {}",
                regs_text(regs, used),
                e.message()
            )
        };
        let (inst, shift) = instance(ins, terms, regs).map_err(ctx)?;
        check_instance(&inst, shift, engine, minor, &p.descriptors, sizes).map_err(ctx)
    })
}

/// `(pc, partner)` of every loop instruction of a validated stream, sorted by pc.
fn partners(stream: &[Instr]) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut open = Vec::new();
    for (pc, ins) in stream.iter().enumerate() {
        match ins {
            Instr::LoopBegin { .. } => open.push(pc),
            Instr::LoopEnd { .. } => {
                if let Some(b) = open.pop() {
                    out.push((b as u32, pc as u32));
                    out.push((pc as u32, b as u32));
                }
            }
            _ => {}
        }
    }
    out.sort_unstable();
    out
}

/// What the executor needs of a validated program with loops: where each loop instruction
/// jumps, each instruction's terms, and what checking an instance needs.
#[derive(Debug)]
pub(crate) struct LoopPlan {
    /// Per stream, `(pc, partner pc)` of every loop instruction, sorted.
    partners: [Vec<(u32, u32)>; 5],
    /// Per stream (empty when the program has no terms), `stream.len() + 1` indices: the
    /// terms of instruction `pc` are `terms[index[pc]..index[pc + 1]]`.
    index: [Vec<u32>; 5],
    /// The program's format minor (the engine rules of instances).
    pub(crate) minor: u16,
    /// Tensor sizes in bytes (the bounds of DMA instances).
    pub(crate) sizes: Vec<u64>,
    /// Descriptors `[first, end)` whose HBM destination a transfer may shift by
    /// `[min, max]` bytes: `(first, end, min, max)`.
    pub(crate) dst_spans: Vec<(u32, u32, i64, i64)>,
}

impl LoopPlan {
    /// The pc a loop instruction at `pc` pairs with.
    #[inline]
    pub(crate) fn partner(&self, engine: EngineId, pc: usize) -> Option<usize> {
        let v = self.partners.get(engine.index())?;
        let i = v.binary_search_by_key(&(pc as u32), |&(p, _)| p).ok()?;
        v.get(i).map(|&(_, q)| q as usize)
    }

    /// The terms of instruction `pc` of `engine` in `p` (the planned program).
    #[inline]
    pub(crate) fn terms<'p>(&self, p: &'p Program, engine: EngineId, pc: usize) -> &'p [DynTerm] {
        let Some(ix) = self.index.get(engine.index()) else {
            return &[];
        };
        match (ix.get(pc), ix.get(pc + 1)) {
            (Some(&a), Some(&b)) if a < b => p.terms.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

impl Program {
    /// The executor's plan of this (validated) program, `None` when it has no loops.
    pub(crate) fn loop_plan(&self) -> Option<LoopPlan> {
        if !self.streams.iter().flatten().any(Instr::is_loop) {
            return None;
        }
        let partners = EngineId::ALL.map(|e| partners(self.stream(e)));
        let index = EngineId::ALL.map(|e| {
            if self.terms.is_empty() {
                return Vec::new();
            }
            let n = self.stream(e).len();
            let mut ix = Vec::with_capacity(n + 1);
            let mut k = self.terms.partition_point(|t| t.engine.index() < e.index());
            for pc in 0..=n {
                while self
                    .terms
                    .get(k)
                    .is_some_and(|t| t.engine == e && (t.pc as usize) < pc)
                {
                    k += 1;
                }
                ix.push(k as u32);
            }
            ix
        });
        let sizes = self
            .tensors
            .iter()
            .map(|t| t.size_bytes().unwrap_or(0))
            .collect();
        let mut dst_spans = Vec::new();
        for engine in EngineId::ALL {
            let mut next = self
                .terms
                .partition_point(|t| t.engine.index() < engine.index());
            let _ = walk(engine, self.stream(engine), |pc, ins, stack| {
                let start = next;
                while self
                    .terms
                    .get(next)
                    .is_some_and(|t| t.engine == engine && t.pc as usize == pc)
                {
                    next += 1;
                }
                let terms = self.terms.get(start..next).unwrap_or(&[]);
                if let Instr::DmaTrigger { count, .. } = *ins {
                    if terms
                        .iter()
                        .any(|t| matches!(t.slot, TermSlot::DmaDst | TermSlot::DmaFirst))
                    {
                        let mut span: Option<(u32, u32, i64, i64)> = None;
                        let _ = for_each_corner(terms, stack, |regs, _| {
                            if let Ok((Instr::DmaTrigger { first, .. }, s)) =
                                instance(ins, terms, regs)
                            {
                                let end = first.saturating_add(count);
                                span = Some(match span {
                                    None => (first, end, s.dst, s.dst),
                                    Some((a, b, lo, hi)) => {
                                        (a.min(first), b.max(end), lo.min(s.dst), hi.max(s.dst))
                                    }
                                });
                            }
                            Ok(())
                        });
                        dst_spans.extend(span);
                    }
                }
                Ok(())
            });
        }
        Some(LoopPlan {
            partners,
            index,
            minor: self.format_minor(),
            sizes,
            dst_spans,
        })
    }
}
