//! The rerolling pass's view of instructions: each one split into its *shape* (everything
//! dynamic terms cannot change, interned to a number) and its *fields* (what they can: access
//! pattern offsets and start partitions, the semaphore immediate, a trigger's first
//! descriptor and its descriptors' offsets relative to a canonical descriptor set).

use super::hash::FastMap;

use super::super::encode_instr::put_instr;
use crate::engine::isa::{Instr, TermSlot};

/// Field indices: offsets of pattern operands 0..6, their start partitions, the value, the
/// first descriptor, the source and destination shift of a trigger's descriptors.
pub(super) const OFFSET: usize = 0;
pub(super) const PARTITION: usize = 6;
pub(super) const VALUE: usize = 12;
pub(super) const FIRST: usize = 13;
pub(super) const SRC: usize = 14;
pub(super) const DST: usize = 15;
pub(super) const FIELDS: usize = 16;

/// Interned shapes: byte keys to dense ids.
#[derive(Default)]
pub(super) struct Shapes {
    ids: FastMap<Vec<u8>, u32>,
}

impl Shapes {
    pub(super) fn intern(&mut self, key: Vec<u8>) -> u32 {
        let next = self.ids.len() as u32;
        *self.ids.entry(key).or_insert(next)
    }
}

/// One instruction of a stream being rerolled.
#[derive(Clone, Debug)]
pub(super) struct Leaf {
    /// The instruction of the first repetition (the loop body's base).
    pub(super) ins: Instr,
    /// Its term-able fields (see the constants).
    pub(super) vals: [i64; FIELDS],
    /// DMA: the canonical descriptor set its descriptors are a shift of (`u32::MAX`: none).
    pub(super) canon: u32,
    /// Terms from the loops folded around it so far: `(slot, loop, step)`, the loop named by
    /// its distance from the leaf (0: the innermost loop enclosing it), so that equal
    /// repetitions have equal terms; registers are assigned when the stream is written.
    pub(super) terms: Vec<(TermSlot, u8, i64)>,
    /// The shape without terms.
    pub(super) base: u32,
    /// The shape with terms.
    pub(super) shape: u32,
}

impl Leaf {
    /// A leaf for `ins`; `dma`: `(canon, src shift, dst shift)` of a trigger.
    pub(super) fn new(ins: Instr, dma: Option<(u32, i64, i64)>, shapes: &mut Shapes) -> Leaf {
        let mut vals = [0i64; FIELDS];
        let mut zero = ins;
        let n = ins.pattern_count().min(6);
        for k in 0..n as u8 {
            if let Some(ap) = zero.pattern_mut(k) {
                vals[OFFSET + usize::from(k)] = i64::from(ap.offset);
                vals[PARTITION + usize::from(k)] = i64::from(ap.start_partition);
                ap.offset = 0;
                ap.start_partition = 0;
            }
        }
        match &mut zero {
            Instr::SemWait { value, .. }
            | Instr::SemInc { value, .. }
            | Instr::SemSet { value, .. }
            | Instr::Notify { payload: value } => {
                vals[VALUE] = i64::from(*value);
                *value = 0;
            }
            Instr::DmaTrigger { first, .. } => {
                vals[FIRST] = i64::from(*first);
                *first = 0;
            }
            _ => {}
        }
        let mut canon = u32::MAX;
        if let Some((c, s, d)) = dma {
            canon = c;
            vals[SRC] = s;
            vals[DST] = d;
        }
        let mut key = vec![0u8];
        put_instr(&mut key, &zero);
        let base = shapes.intern(key);
        Leaf {
            ins,
            vals,
            canon,
            terms: Vec::new(),
            base,
            shape: base,
        }
    }

    /// Recomputes the shape after terms were added.
    pub(super) fn reshape(&mut self, shapes: &mut Shapes) {
        let mut key = vec![1u8];
        key.extend_from_slice(&self.base.to_le_bytes());
        for &(slot, reg, step) in &self.terms {
            let (a, b) = slot.code();
            key.extend_from_slice(&[a, b, reg]);
            key.extend_from_slice(&step.to_le_bytes());
        }
        self.shape = shapes.intern(key);
    }

    /// Whether the leaf already has a `DmaFirst` term.
    pub(super) fn moves_first(&self) -> bool {
        self.terms.iter().any(|t| t.0 == TermSlot::DmaFirst)
    }

    /// Whether the leaf already has a `DmaSrc` or `DmaDst` term.
    pub(super) fn moves_descriptors(&self) -> bool {
        self.terms
            .iter()
            .any(|t| matches!(t.0, TermSlot::DmaSrc | TermSlot::DmaDst))
    }

    /// Whether the instruction is a `DmaTrigger`.
    pub(super) fn is_trigger(&self) -> bool {
        matches!(self.ins, Instr::DmaTrigger { .. })
    }
}

/// A node of a stream being rerolled: an instruction or a loop.
// Leaves are nearly every node; boxing them would cost an allocation per instruction.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub(super) enum Node {
    Leaf(Leaf),
    Loop {
        count: u32,
        body: Vec<Node>,
        /// Nesting height (1: no loop inside); the loop's register is `height - 1`.
        height: u8,
        /// Instructions it occupies in the stream (`LoopBegin`/`LoopEnd` included).
        size: usize,
        shape: u32,
    },
}

impl Node {
    pub(super) fn shape(&self) -> u32 {
        match self {
            Node::Leaf(l) => l.shape,
            Node::Loop { shape, .. } => *shape,
        }
    }
    pub(super) fn height(&self) -> u8 {
        match self {
            Node::Leaf(_) => 0,
            Node::Loop { height, .. } => *height,
        }
    }
    pub(super) fn size(&self) -> usize {
        match self {
            Node::Leaf(_) => 1,
            Node::Loop { size, .. } => *size,
        }
    }

    /// The leaves, in stream order.
    pub(super) fn leaves<'a>(&'a self, out: &mut Vec<&'a Leaf>) {
        match self {
            Node::Leaf(l) => out.push(l),
            Node::Loop { body, .. } => body.iter().for_each(|n| n.leaves(out)),
        }
    }

    /// The leaves, mutable, in stream order, each with the number of loops between it and
    /// this node's level (`depth` for this node).
    pub(super) fn leaves_mut<'a>(&'a mut self, depth: u8, out: &mut Vec<(&'a mut Leaf, u8)>) {
        match self {
            Node::Leaf(l) => out.push((l, depth)),
            Node::Loop { body, .. } => body
                .iter_mut()
                .for_each(|n| n.leaves_mut(depth.saturating_add(1), out)),
        }
    }

    /// Recomputes the shapes of a subtree bottom-up (after its leaves gained terms).
    pub(super) fn reshape(&mut self, shapes: &mut Shapes) {
        match self {
            Node::Leaf(l) => l.reshape(shapes),
            Node::Loop {
                count,
                body,
                shape,
                height,
                size,
            } => {
                body.iter_mut().for_each(|n| n.reshape(shapes));
                *height = 1 + body.iter().map(Node::height).max().unwrap_or(0);
                *size = body.iter().map(Node::size).sum::<usize>() + 2;
                *shape = loop_shape(*height, *count, body, shapes);
            }
        }
    }
}

/// The shape of a loop: its height, count and body shapes.
pub(super) fn loop_shape(height: u8, count: u32, body: &[Node], shapes: &mut Shapes) -> u32 {
    let mut key = Vec::with_capacity(6 + 4 * body.len());
    key.push(2u8);
    key.push(height);
    key.extend_from_slice(&count.to_le_bytes());
    for n in body {
        key.extend_from_slice(&n.shape().to_le_bytes());
    }
    shapes.intern(key)
}
