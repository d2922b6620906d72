//! What a loop body's probe captures: the operations it records, as [`Node`]s.

use nrt_sim::engine::{DmaDescriptor, EngineId, Instr};

/// An operation captured while a loop body is probed.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    /// An engine operation: its instructions and, inside loops, their terms
    /// `(instruction, slot, loop depth, step)`.
    Engine {
        op: String,
        engine: EngineId,
        instrs: Vec<Instr>,
        terms: Vec<(usize, nrt_sim::engine::TermSlot, u8, i64)>,
    },
    /// A DMA operation: its descriptors and, inside loops, the source and destination
    /// offset steps `(loop depth, source, destination)` of every descriptor.
    Dma {
        op: String,
        trigger: Option<EngineId>,
        spread: usize,
        descs: Vec<DmaDescriptor>,
        shifts: Vec<(u8, i64, i64)>,
    },
    /// A loop of `count ≥ 4` iterations at nesting `depth` (its iteration register):
    /// iteration 0, and the template — iteration 2, whose steps per iteration are its terms
    /// of `depth` (iteration 1 is the template one step back).
    Loop {
        depth: u8,
        count: usize,
        first: Vec<Node>,
        body: Vec<Node>,
    },
}

impl Node {
    pub(crate) fn engine(op: &str, engine: EngineId, instrs: &[Instr]) -> Node {
        Node::Engine {
            op: op.to_owned(),
            engine,
            instrs: instrs.to_vec(),
            terms: Vec::new(),
        }
    }

    pub(crate) fn dma(
        op: &str,
        trigger: Option<EngineId>,
        descs: &[DmaDescriptor],
        spread: usize,
    ) -> Node {
        Node::Dma {
            op: op.to_owned(),
            trigger,
            spread,
            descs: descs.to_vec(),
            shifts: Vec::new(),
        }
    }

    /// The descriptors emitting these nodes appends.
    pub(super) fn descriptors(nodes: &[Node]) -> usize {
        nodes
            .iter()
            .map(|n| match n {
                Node::Engine { .. } => 0,
                Node::Dma { descs, .. } => descs.len(),
                Node::Loop { first, body, .. } => Node::descriptors(first)
                    .saturating_add(Node::descriptors(body).saturating_mul(2)),
            })
            .fold(0, usize::saturating_add)
    }
}
