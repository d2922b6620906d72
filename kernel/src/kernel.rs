//! The [`Kernel`]: its tensor and tile tables, the allocators, the recorded engine streams
//! and DMA descriptors, the synchronisation state, the format in use, what operations record
//! themselves through (`check`, `record`, `emit_dma`), and [`Kernel::build`]. Tensor
//! declarations are in `tensors.rs`, tile allocation in `tiles.rs`, the operations in `ops/`.
//!
//! Footprints come from the instructions and descriptors themselves — `Instr::accesses` and
//! `DmaEndpoint::region`, what the engine executes and its hazard detector records — so the
//! synchronisation cannot disagree with what the engine checks.

use std::sync::Arc;

use nrt_core::{Error, err};
use nrt_sim::engine::{
    DMA_ENGINES, DmaBlock, DmaDescriptor, DmaEndpoint, EngineId, Instr, MAX_DESCRIPTORS, MemKind,
    Program, Space, TensorDecl, TensorKind, reroll,
};

use crate::alloc::Allocator;
use crate::format::FormatUse;
use crate::handle::{Memory, Placement, next_kernel_id};
use crate::loops::node::Node;
use crate::stream::{Item, assemble};
use crate::sync::{Access, Agent, DmaChunk, MemKey, Rect, Sync};
use crate::view::View;

/// A tile's allocation record.
#[derive(Clone, Debug)]
pub(crate) struct TileRec {
    pub(crate) name: Arc<str>,
    pub(crate) mem: Memory,
    pub(crate) placement: Placement,
    pub(crate) partitions: usize,
    pub(crate) bytes: usize,
    pub(crate) live: bool,
}

/// A kernel under construction: declare tensors, allocate tiles, call operations (in program
/// order, as in NKI), then [`build`](Kernel::build) the engine program. Synchronisation and
/// allocation are automatic; see the crate documentation.
#[derive(Debug)]
pub struct Kernel {
    pub(crate) id: u64,
    name: String,
    pub(crate) tensors: Vec<TensorDecl>,
    pub(crate) tiles: Vec<TileRec>,
    pub(crate) sbuf: Allocator,
    pub(crate) psum: Allocator,
    pub(crate) scopes: Vec<Vec<u32>>,
    pub(crate) sync: Sync,
    pub(crate) streams: [Vec<Item>; 5],
    pub(crate) descriptors: Vec<DmaDescriptor>,
    pub(crate) next_dma: usize,
    /// PSUM rectangles a matmul has started accumulating in (for `accumulate` inference).
    pub(crate) mm_started: Vec<Rect>,
    /// The program format the operations so far need.
    pub(crate) format: FormatUse,
    /// While a loop body is probed (`loops/`): the operations recorded, innermost loop last.
    pub(crate) capture: Vec<Vec<Node>>,
    /// While loops are emitted: the DMA triggers chosen in each loop's iteration 1, recorded
    /// and replayed in its template (`loops/emit.rs`).
    pub(crate) triggers: Vec<Triggers>,
}

/// The DMA triggers of a loop's iteration 1: recorded, then replayed by its template so
/// both trigger every transfer from the same engine.
#[derive(Clone, Debug, Default)]
pub(crate) struct Triggers {
    pub(crate) list: Vec<EngineId>,
    pub(crate) cursor: usize,
    pub(crate) replay: bool,
}

impl Kernel {
    /// An empty kernel for a core of generation `spec`: its SBUF tiles are placed in that
    /// generation's partitions (224 KiB on NeuronCore-v3), so the program loads only on such a
    /// core. [`Kernel::new`] plans for NeuronCore-v2's 192 KiB, which every generation has.
    pub fn for_core(name: &str, spec: &nrt_sim::engine::CoreSpec) -> Kernel {
        let mut k = Kernel::new(name);
        k.sbuf = Allocator::with_bytes(Space::Sbuf, spec.sbuf_partition_bytes);
        k
    }

    /// An empty kernel; `name` becomes the program's name. Its SBUF tiles are placed in
    /// NeuronCore-v2's 192 KiB partitions, so the program runs on every generation.
    pub fn new(name: &str) -> Kernel {
        Kernel {
            id: next_kernel_id(),
            name: name.to_owned(),
            tensors: Vec::new(),
            tiles: Vec::new(),
            sbuf: Allocator::new(Space::Sbuf),
            psum: Allocator::new(Space::Psum),
            scopes: Vec::new(),
            sync: Sync::default(),
            streams: Default::default(),
            descriptors: Vec::new(),
            next_dma: 0,
            mm_started: Vec::new(),
            format: FormatUse::default(),
            capture: Vec::new(),
            triggers: Vec::new(),
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    // ---- what operations use ----------------------------------------------------------

    /// Checks that `v` belongs to this kernel and, for a tile, that it is live.
    pub(crate) fn check(&self, v: &View, op: &str, role: &str) -> Result<(), Error> {
        let b = &v.base;
        if b.kernel != self.id {
            return Err(err!(Invalid, "{op}: {role} {b} belongs to another kernel"));
        }
        if b.mem.is_on_chip() && !self.tiles.get(b.id as usize).is_some_and(|r| r.live) {
            return Err(err!(Invalid, "{op}: {role} {b} was freed"));
        }
        Ok(())
    }

    /// The kind of HBM tensor `id`.
    pub(crate) fn tensor_kind(&self, id: u32) -> Option<TensorKind> {
        self.tensors.get(id as usize).map(|t| t.kind)
    }

    /// Records operation `op` of engine `e`, made of `instrs`, after checking each
    /// instruction against the ISA (its operand rules, and its engine rules in the format the
    /// kernel uses: see `format.rs`); nothing is recorded on error. The footprints are the
    /// instructions' own accesses; a write to PSUM by anything but a matmul restarts
    /// accumulation there.
    pub(crate) fn record(&mut self, op: &str, e: EngineId, instrs: &[Instr]) -> Result<(), Error> {
        let need = self.format.check(op, e, instrs)?;
        self.format.commit(need);
        let mut accesses = Vec::new();
        for ins in instrs {
            let (acc, n) = ins.accesses();
            for (ap, write) in acc.iter().take(n).flatten() {
                if *write && ap.space == Space::Psum && !matches!(ins, Instr::MultiplyMoving { .. })
                {
                    let r = Rect::of_region(&ap.region());
                    self.mm_started.retain(|m| !m.overlaps(&r));
                }
                accesses.push(Access::of_pattern(ap, *write));
            }
        }
        if let Some(buf) = self.capture.last_mut() {
            buf.push(Node::engine(op, e, instrs));
            return Ok(());
        }
        self.emit_engine(e, instrs, &accesses);
        Ok(())
    }

    /// Records an operation of engine `e`: its waits, its instructions, its end.
    fn emit_engine(&mut self, e: EngineId, instrs: &[Instr], accesses: &[Access]) {
        let items = instrs.iter().copied().map(Item::Instr).collect();
        self.emit_engine_items(e, items, accesses);
    }

    /// [`Kernel::emit_engine`] with the instructions as stream items (inside loops: with
    /// their dynamic terms).
    pub(crate) fn emit_engine_items(&mut self, e: EngineId, items: Vec<Item>, accesses: &[Access]) {
        let waits = self.sync.engine_op(e, accesses);
        let pos = self.sync.position(Agent::engine(e));
        if let Some(s) = self.streams.get_mut(e.index()) {
            s.extend(waits.into_iter().map(Item::Wait));
            s.extend(items);
            s.push(Item::OpEnd(pos));
        }
    }

    /// Records a DMA operation: `descs` in up to `spread` transfers on consecutive DMA
    /// engines (round robin over the 16), triggered by `trigger` or the engine the
    /// synchronisation chooses. Fails, changing nothing, past the descriptor limit.
    pub(crate) fn emit_dma(
        &mut self,
        op: &str,
        trigger: Option<EngineId>,
        descs: &[DmaDescriptor],
        spread: usize,
    ) -> Result<(), Error> {
        if descs.is_empty() {
            return Ok(());
        }
        if self.descriptors.len() + descs.len() > MAX_DESCRIPTORS {
            return Err(err!(
                Invalid,
                "{op}: the kernel would need more than {MAX_DESCRIPTORS} DMA descriptors"
            ));
        }
        let need = self
            .format
            .check_dma(op, descs.iter().any(DmaDescriptor::is_block))?;
        self.format.commit(need);
        if let Some(buf) = self.capture.last_mut() {
            buf.push(Node::dma(op, trigger, descs, spread));
            return Ok(());
        }
        let accesses = Kernel::dma_groups(descs, spread)
            .into_iter()
            .map(|g| self.dma_accesses(g))
            .collect();
        self.emit_dma_shifted(trigger, descs, spread, &[], accesses);
        Ok(())
    }

    /// The groups of `descs` spread over up to `spread` DMA engines.
    pub(crate) fn dma_groups(descs: &[DmaDescriptor], spread: usize) -> Vec<&[DmaDescriptor]> {
        let k = spread.clamp(1, DMA_ENGINES).min(descs.len()).max(1);
        let per = descs.len().div_ceil(k).max(1);
        descs.chunks(per).collect()
    }

    /// Records a DMA operation's transfers (see [`Kernel::emit_dma`]): `shifts` are the
    /// dynamic terms of its triggers inside loops, `accesses` the footprints of each group
    /// ([`Kernel::dma_groups`]).
    pub(crate) fn emit_dma_shifted(
        &mut self,
        trigger: Option<EngineId>,
        descs: &[DmaDescriptor],
        spread: usize,
        shifts: &[(u8, i64, i64)],
        accesses: Vec<Vec<Access>>,
    ) {
        let groups = Kernel::dma_groups(descs, spread);
        let chunks: Vec<DmaChunk> = accesses
            .into_iter()
            .enumerate()
            .map(|(i, a)| DmaChunk {
                dma: ((self.next_dma + i) % DMA_ENGINES) as u8,
                accesses: a,
            })
            .collect();
        self.next_dma = (self.next_dma + groups.len()) % DMA_ENGINES;
        let forced = self
            .triggers
            .iter()
            .find(|f| f.replay)
            .and_then(|f| f.list.get(f.cursor).copied());
        let plan = self.sync.dma_plan(forced.or(trigger), &chunks);
        for f in &mut self.triggers {
            if f.replay {
                f.cursor += 1;
            } else {
                f.list.push(plan.trigger);
            }
        }
        let transfers = self.sync.dma_op(&plan, &chunks);
        let mut items: Vec<Item> = plan.waits.iter().copied().map(Item::Wait).collect();
        for (g, (queue, _)) in groups.iter().zip(transfers) {
            let first = self.descriptors.len() as u32;
            self.descriptors.extend_from_slice(g);
            items.push(Item::Trigger {
                queue,
                first,
                count: g.len() as u32,
                shifts: shifts.to_vec(),
            });
        }
        if let Some(s) = self.streams.get_mut(plan.trigger.index()) {
            s.extend(items);
        }
    }

    /// Whether HBM tensor `tensor` is never written (an input or a constant): reading it
    /// orders nothing and is not tracked.
    fn read_only(&self, tensor: u32) -> bool {
        matches!(
            self.tensor_kind(tensor),
            Some(TensorKind::Input | TensorKind::Const)
        )
    }

    /// The footprints of a group of descriptors: each end's region (`DmaEndpoint::region`,
    /// HBM offsets inside the tensor), grouped by memory and direction. HBM inputs and
    /// constants are never written, so reading them orders nothing and is not tracked.
    pub(crate) fn dma_accesses(&self, descs: &[DmaDescriptor]) -> Vec<Access> {
        let mut by: Vec<((MemKey, bool), Vec<Rect>)> = Vec::new();
        for d in descs {
            for (ep, write) in [(d.src, false), (d.dst, true)] {
                let key = match ep {
                    DmaEndpoint::Hbm { tensor, .. }
                    | DmaEndpoint::Block(DmaBlock {
                        mem: MemKind::Hbm,
                        index: tensor,
                        ..
                    }) => {
                        if !write && self.read_only(tensor) {
                            continue;
                        }
                        MemKey::Hbm(tensor)
                    }
                    _ => match ep.mem() {
                        MemKind::Psum => MemKey::Psum,
                        MemKind::Sbuf | MemKind::Hbm => MemKey::Sbuf,
                    },
                };
                let r = Rect::of_region(&ep.region(&[], d.len));
                match by.iter_mut().find(|(k, _)| *k == (key, write)) {
                    Some((_, v)) => v.push(r),
                    None => by.push(((key, write), vec![r])),
                }
            }
        }
        by.into_iter()
            .map(|((mem, write), rects)| Access::of_rects(mem, write, rects))
            .collect()
    }

    /// Assembles the engine program: semaphores assigned, waits and signals resolved, every
    /// stream ended with `Halt`, the whole validated (`nrt_sim::neff::neff_from_programs`
    /// turns it into a NEFF), then *rerolled* ([`nrt_sim::engine::reroll`]): blocks of
    /// instructions that repeat with affinely changing addresses, semaphore values and DMA
    /// offsets become loops with dynamic terms, so the instruction and descriptor counts are
    /// those of the loop bodies. The rerolled program issues exactly the instructions the
    /// unrolled one does (bit-identical outputs, same hazards), plus the loop instructions
    /// (one sequencer tick per `LoopBegin` and per iteration).
    /// [`build_unrolled`](Kernel::build_unrolled) keeps the streams as recorded.
    pub fn build(self) -> Result<Program, Error> {
        let program = self.build_unrolled()?;
        Ok(reroll(&program))
    }

    /// [`build`](Kernel::build) without rerolling: every operation's instructions as
    /// recorded, one per iteration of the kernel's Python-style loops.
    pub fn build_unrolled(self) -> Result<Program, Error> {
        assemble(
            &self.name,
            self.tensors,
            &self.streams,
            self.descriptors,
            &self.sync,
        )
    }
}
