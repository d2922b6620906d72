//! Loops' dynamic operands (format 1.1): the iteration registers of a sequencer
//! ([`LOOP_REGS`]), and dynamic terms ([`DynTerm`]) — `slot += step · register` on one
//! instruction, kept in a table beside the instruction streams so the instructions and their
//! encodings stay as they are. An instruction's *instance* in an iteration is the instruction
//! with every slot's terms added ([`instance`]); the executor issues instances, so hazards,
//! costs and effects see concrete operands.

use core::fmt;

use nrt_core::{Error, err};

use super::dma::{DmaBlock, DmaDescriptor, DmaEndpoint};
use super::instr::{EngineId, Instr, MAX_ACCESSES};
use super::ops::{Bias, Operand};
use super::pattern::AccessPattern;

/// Iteration registers per sequencer: loops nest at most this deep. (NKI: each sequencer
/// has 64 32-bit scalar registers for loop bounds, conditions and addresses; the simulator
/// models only iteration registers, and 4 is a modelling choice.)
pub const LOOP_REGS: usize = 4;

/// What a dynamic term adds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TermSlot {
    /// The byte offset of access-pattern operand `k` (the instruction's access patterns
    /// numbered from 0 in encoding order, optional ones counted only when present).
    Offset(u8),
    /// The start partition of access-pattern operand `k`.
    Partition(u8),
    /// The 32-bit immediate of `SemWait`, `SemInc`, `SemSet` (value) or `Notify` (payload),
    /// wrapping like semaphore arithmetic.
    Value,
    /// `DmaTrigger`: added to the source offset of every descriptor of the transfer.
    DmaSrc,
    /// `DmaTrigger`: added to the destination offset of every descriptor of the transfer.
    DmaDst,
    /// `DmaTrigger`: added to the index of its first descriptor.
    DmaFirst,
}

impl TermSlot {
    /// The encoding: kind, operand.
    pub(crate) const fn code(self) -> (u8, u8) {
        match self {
            TermSlot::Offset(k) => (0, k),
            TermSlot::Partition(k) => (1, k),
            TermSlot::Value => (2, 0),
            TermSlot::DmaSrc => (3, 0),
            TermSlot::DmaDst => (4, 0),
            TermSlot::DmaFirst => (5, 0),
        }
    }

    /// From the encoding.
    pub(crate) const fn from_code(kind: u8, operand: u8) -> Option<Self> {
        match (kind, operand) {
            (0, k) => Some(TermSlot::Offset(k)),
            (1, k) => Some(TermSlot::Partition(k)),
            (2, 0) => Some(TermSlot::Value),
            (3, 0) => Some(TermSlot::DmaSrc),
            (4, 0) => Some(TermSlot::DmaDst),
            (5, 0) => Some(TermSlot::DmaFirst),
            _ => None,
        }
    }

    /// Whether `ins` has this slot.
    pub(crate) fn applies_to(self, ins: &Instr) -> bool {
        match self {
            TermSlot::Offset(k) | TermSlot::Partition(k) => usize::from(k) < ins.pattern_count(),
            TermSlot::Value => matches!(
                ins,
                Instr::SemWait { .. }
                    | Instr::SemInc { .. }
                    | Instr::SemSet { .. }
                    | Instr::Notify { .. }
            ),
            TermSlot::DmaSrc | TermSlot::DmaDst | TermSlot::DmaFirst => {
                matches!(ins, Instr::DmaTrigger { .. })
            }
        }
    }
}

impl fmt::Display for TermSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TermSlot::Offset(k) => write!(f, "the offset of pattern operand {k}"),
            TermSlot::Partition(k) => write!(f, "the start partition of pattern operand {k}"),
            TermSlot::Value => f.write_str("the value"),
            TermSlot::DmaSrc => f.write_str("the DMA source offset"),
            TermSlot::DmaDst => f.write_str("the DMA destination offset"),
            TermSlot::DmaFirst => f.write_str("the first descriptor"),
        }
    }
}

/// One dynamic term: in every execution of instruction `pc` of `engine`'s stream, `slot` is
/// increased by `step ×` the value of iteration register `reg` (which must belong to a loop
/// enclosing the instruction). A program's terms are sorted by engine, pc, slot and register,
/// each combination at most once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DynTerm {
    /// The stream.
    pub engine: EngineId,
    /// The instruction's index in the stream.
    pub pc: u32,
    /// What the term adds to.
    pub slot: TermSlot,
    /// The iteration register (0..[`LOOP_REGS`]).
    pub reg: u8,
    /// The amount per iteration.
    pub step: i64,
}

impl DynTerm {
    /// The sort key of the term table.
    pub(crate) fn key(&self) -> (usize, u32, TermSlot, u8) {
        (self.engine.index(), self.pc, self.slot, self.reg)
    }
}

/// The offsets a `DmaTrigger`'s terms add to every descriptor of its transfer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DmaShift {
    /// Added to each source offset.
    pub(crate) src: i64,
    /// Added to each destination offset.
    pub(crate) dst: i64,
}

impl DmaShift {
    /// Whether the shift moves nothing.
    #[inline]
    pub(crate) const fn is_zero(&self) -> bool {
        self.src == 0 && self.dst == 0
    }
}

fn op_pattern(o: &mut Operand) -> Option<&mut AccessPattern> {
    match o {
        Operand::PerPartition(ap) => Some(ap),
        Operand::Imm(_) | Operand::Int(_) => None,
    }
}

fn bias_pattern(b: &mut Bias) -> Option<&mut AccessPattern> {
    match b {
        Bias::PerPartition(ap) => Some(ap),
        Bias::Imm(_) => None,
    }
}

impl Instr {
    /// The access-pattern operands in encoding order (absent optional ones as `None`).
    fn pattern_slots(&mut self) -> [Option<&mut AccessPattern>; MAX_ACCESSES] {
        match self {
            Instr::LoadStationary { src } => [Some(src), None, None, None, None, None],
            Instr::MultiplyMoving { moving, dst, .. } => {
                [Some(moving), Some(dst), None, None, None, None]
            }
            Instr::TensorTensor { a, b, out, .. } => {
                [Some(a), Some(b), Some(out), None, None, None]
            }
            Instr::TensorScalar { src, out, .. }
            | Instr::TensorCopy { src, out }
            | Instr::TensorReduce { src, out, .. }
            | Instr::Reciprocal { src, out }
            | Instr::Transpose { src, out }
            | Instr::BnStats { src, out }
            | Instr::BnAggr { src, out }
            | Instr::Max8 { src, out } => [Some(src), Some(out), None, None, None, None],
            Instr::Activation { src, out, bias, .. } => {
                [Some(src), Some(out), bias_pattern(bias), None, None, None]
            }
            Instr::Memset { out, .. } | Instr::Iota { out, .. } => {
                [Some(out), None, None, None, None, None]
            }
            Instr::TensorScalarChain {
                src,
                out,
                first,
                second,
            } => [
                Some(src),
                Some(out),
                op_pattern(&mut first.operand),
                second.as_mut().and_then(|s| op_pattern(&mut s.operand)),
                None,
                None,
            ],
            Instr::ScalarTensorTensor {
                data,
                first,
                data2,
                out,
                ..
            } => [
                Some(data),
                op_pattern(&mut first.operand),
                Some(data2),
                Some(out),
                None,
                None,
            ],
            Instr::Activate {
                src,
                out,
                scale,
                bias,
                reduce,
                ..
            } => [
                Some(src),
                Some(out),
                op_pattern(scale),
                bias_pattern(bias),
                reduce.as_mut().map(|r| &mut r.out),
                None,
            ],
            Instr::AffineSelect { on_true, out, .. } => {
                [Some(on_true), Some(out), None, None, None, None]
            }
            Instr::RangeSelect {
                on_true,
                out,
                bound0,
                bound1,
                reduce_max,
                ..
            } => [
                Some(on_true),
                Some(out),
                Some(bound0),
                Some(bound1),
                reduce_max.as_mut(),
                None,
            ],
            Instr::TensorTensorScan {
                data0,
                data1,
                out,
                initial,
                ..
            } => [
                Some(data0),
                Some(data1),
                Some(out),
                op_pattern(initial),
                None,
                None,
            ],
            Instr::FindIndex8 { data, vals, out } => {
                [Some(data), Some(vals), Some(out), None, None, None]
            }
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt
            | Instr::LoopBegin { .. }
            | Instr::LoopEnd { .. } => [None, None, None, None, None, None],
        }
    }

    /// Access-pattern operand `k` in encoding order (the operand [`TermSlot::Offset`]`(k)` and
    /// [`TermSlot::Partition`]`(k)` name), mutable.
    pub fn pattern_mut(&mut self, k: u8) -> Option<&mut AccessPattern> {
        self.pattern_slots()
            .into_iter()
            .flatten()
            .nth(usize::from(k))
    }

    /// Number of access-pattern operands (the ones [`TermSlot::Offset`] numbers).
    pub fn pattern_count(&self) -> usize {
        let mut copy = *self;
        copy.pattern_slots().into_iter().flatten().count()
    }
}

/// The instance of `ins` when the iteration registers hold `regs`: every slot increased by its
/// terms (`terms`: the instruction's terms, grouped by slot as the table sorts them), and the
/// DMA shift of a `DmaTrigger`. An offset, partition or descriptor index that leaves its
/// field's range is an error naming the slot; bounds are left to the instruction's rules.
pub(crate) fn instance(
    ins: &Instr,
    terms: &[DynTerm],
    regs: &[u32; LOOP_REGS],
) -> Result<(Instr, DmaShift), Error> {
    let mut out = *ins;
    let mut shift = DmaShift::default();
    let mut rest = terms;
    while let Some(first) = rest.first() {
        let slot = first.slot;
        let n = rest.iter().take_while(|t| t.slot == slot).count();
        let (group, tail) = rest.split_at(n);
        rest = tail;
        let delta: i128 = group
            .iter()
            .map(|t| {
                let r = regs.get(usize::from(t.reg)).copied().unwrap_or(0);
                i128::from(t.step) * i128::from(r)
            })
            .sum();
        apply(&mut out, &mut shift, slot, delta)?;
    }
    Ok((out, shift))
}

fn out_of_range(slot: TermSlot, base: impl fmt::Display, delta: i128, range: &str) -> Error {
    err!(Invalid, "{slot} would be {base} + {delta}, outside {range}")
}

fn apply(ins: &mut Instr, shift: &mut DmaShift, slot: TermSlot, delta: i128) -> Result<(), Error> {
    match slot {
        TermSlot::Offset(k) => {
            let ap = ins
                .pattern_mut(k)
                .ok_or_else(|| err!(Invalid, "{slot}: no such operand"))?;
            let v = i128::from(ap.offset) + delta;
            ap.offset = u32::try_from(v)
                .map_err(|_| out_of_range(slot, ap.offset, delta, "0..=4294967295"))?;
        }
        TermSlot::Partition(k) => {
            let ap = ins
                .pattern_mut(k)
                .ok_or_else(|| err!(Invalid, "{slot}: no such operand"))?;
            let v = i128::from(ap.start_partition) + delta;
            ap.start_partition = u8::try_from(v)
                .map_err(|_| out_of_range(slot, ap.start_partition, delta, "0..=255"))?;
        }
        TermSlot::Value => {
            // Semaphore arithmetic wraps: the value is taken modulo 2^32.
            let d = delta.rem_euclid(1 << 32) as u32;
            match ins {
                Instr::SemWait { value, .. }
                | Instr::SemInc { value, .. }
                | Instr::SemSet { value, .. }
                | Instr::Notify { payload: value } => *value = value.wrapping_add(d),
                _ => return Err(err!(Invalid, "{slot}: the instruction has none")),
            }
        }
        TermSlot::DmaSrc | TermSlot::DmaDst => {
            let d = i64::try_from(delta)
                .map_err(|_| out_of_range(slot, 0, delta, "a 64-bit offset"))?;
            if slot == TermSlot::DmaSrc {
                shift.src = d;
            } else {
                shift.dst = d;
            }
        }
        TermSlot::DmaFirst => match ins {
            Instr::DmaTrigger { first, .. } => {
                let v = i128::from(*first) + delta;
                *first = u32::try_from(v)
                    .map_err(|_| out_of_range(slot, *first, delta, "0..=4294967295"))?;
            }
            _ => return Err(err!(Invalid, "{slot}: the instruction is not a DmaTrigger")),
        },
    }
    Ok(())
}

/// `e` with `delta` added to its byte offset (`None` when the offset leaves its field).
fn shift_endpoint(e: DmaEndpoint, delta: i64) -> Option<DmaEndpoint> {
    Some(match e {
        DmaEndpoint::Hbm { tensor, offset } => DmaEndpoint::Hbm {
            tensor,
            offset: offset.checked_add_signed(delta)?,
        },
        DmaEndpoint::Sbuf { partition, offset } => DmaEndpoint::Sbuf {
            partition,
            offset: u32::try_from(i64::from(offset).checked_add(delta)?).ok()?,
        },
        DmaEndpoint::Psum { partition, offset } => DmaEndpoint::Psum {
            partition,
            offset: u32::try_from(i64::from(offset).checked_add(delta)?).ok()?,
        },
        DmaEndpoint::Block(b) => DmaEndpoint::Block(DmaBlock {
            offset: b.offset.checked_add_signed(delta)?,
            ..b
        }),
    })
}

/// Descriptor `d` as a transfer shifted by `s` moves it (`None` when an offset leaves its
/// field).
#[inline]
pub(crate) fn shift_descriptor(d: &DmaDescriptor, s: DmaShift) -> Option<DmaDescriptor> {
    if s.is_zero() {
        return Some(*d);
    }
    Some(DmaDescriptor {
        src: shift_endpoint(d.src, s.src)?,
        dst: shift_endpoint(d.dst, s.dst)?,
        len: d.len,
    })
}

/// `[r0=…, r1=…]` for messages: the registers `used` (a bit per register).
pub(crate) fn regs_text(regs: &[u32; LOOP_REGS], used: u8) -> String {
    let parts: Vec<String> = regs
        .iter()
        .enumerate()
        .filter(|(r, _)| used & (1 << r) != 0)
        .map(|(r, v)| format!("r{r}={v}"))
        .collect();
    format!("[{}]", parts.join(", "))
}
