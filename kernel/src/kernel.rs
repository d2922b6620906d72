//! The [`Kernel`]: HBM tensor declarations, tile allocation (first fit, explicit placement,
//! `free` and scopes), the recorded engine streams and DMA descriptors, the synchronisation
//! state, and [`Kernel::build`]. Operations live in `ops/` and record themselves through the
//! crate-internal `emit_engine` / `emit_dma`.

use core::ops::Deref;
use std::sync::Arc;

use nrt_core::{Error, err};
use nrt_sim::engine::{
    DMA_ENGINES, DType, DmaDescriptor, DmaEndpoint, EngineId, Instr, MAX_DESCRIPTORS,
    MAX_NAME_BYTES, MAX_RANK, MAX_TENSOR_BYTES, PSUM_BANK_BYTES, Program, Space, TensorDecl,
    TensorKind, partition_start_ok,
};

use crate::alloc::Allocator;
use crate::handle::{Base, Memory, Placement, next_kernel_id};
use crate::stream::{Item, assemble};
use crate::sync::{Access, DmaChunk, MemKey, Rect, Sync};
use crate::view::{View, shape_str};

/// An HBM tensor of a kernel (a program tensor): dereferences to its full [`View`].
#[derive(Clone, Debug)]
pub struct Tensor {
    view: View,
    kind: TensorKind,
}

impl Tensor {
    /// Input, output, constant or scratch.
    pub fn kind(&self) -> TensorKind {
        self.kind
    }

    /// The full view.
    pub fn view(&self) -> &View {
        &self.view
    }
}

impl Deref for Tensor {
    type Target = View;
    fn deref(&self) -> &View {
        &self.view
    }
}

/// An SBUF or PSUM tile: dereferences to its full [`View`] (`[partitions, free...]`).
#[derive(Clone, Debug)]
pub struct Tile {
    view: View,
}

impl Tile {
    /// Where the tile sits.
    pub fn placement(&self) -> Placement {
        self.view.base.placement
    }

    /// Bytes it takes in each of its partitions.
    pub fn bytes_per_partition(&self) -> usize {
        self.view.base.pitch * self.view.dtype.size()
    }

    /// The full view.
    pub fn view(&self) -> &View {
        &self.view
    }
}

impl Deref for Tile {
    type Target = View;
    fn deref(&self) -> &View {
        &self.view
    }
}

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
    sbuf: Allocator,
    psum: Allocator,
    scopes: Vec<Vec<u32>>,
    pub(crate) sync: Sync,
    pub(crate) streams: [Vec<Item>; 5],
    pub(crate) descriptors: Vec<DmaDescriptor>,
    next_dma: usize,
    /// PSUM rectangles a matmul has started accumulating in (for `accumulate` inference).
    pub(crate) mm_started: Vec<Rect>,
}

impl Kernel {
    /// An empty kernel; `name` becomes the program's name.
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
        }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    // ---- HBM tensors ------------------------------------------------------------------

    /// Declares an HBM tensor of `kind`. Constants take their bytes from `data`
    /// (little-endian elements, exactly the tensor's size); other kinds take none.
    pub fn tensor(
        &mut self,
        name: &str,
        kind: TensorKind,
        dtype: DType,
        shape: &[usize],
        data: Vec<u8>,
    ) -> Result<Tensor, Error> {
        if name.is_empty() || name.len() > MAX_NAME_BYTES {
            return Err(err!(
                Invalid,
                "tensor name '{name}' must be 1..={MAX_NAME_BYTES} bytes"
            ));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(err!(Invalid, "tensor '{name}' is already declared"));
        }
        if shape.len() > MAX_RANK {
            return Err(err!(
                Invalid,
                "tensor '{name}': rank {} exceeds {MAX_RANK}",
                shape.len()
            ));
        }
        let size = shape
            .iter()
            .try_fold(dtype.size() as u64, |a, &d| a.checked_mul(d as u64))
            .filter(|&s| s <= MAX_TENSOR_BYTES)
            .ok_or_else(|| {
                err!(
                    Invalid,
                    "tensor '{name}': size exceeds {MAX_TENSOR_BYTES} bytes"
                )
            })?;
        let is_const = kind == TensorKind::Const;
        if is_const && data.len() as u64 != size {
            return Err(err!(
                Invalid,
                "tensor '{name}': constant data is {} bytes, the shape {} of {dtype} needs {size}",
                data.len(),
                shape_str(shape)
            ));
        }
        if !is_const && !data.is_empty() {
            return Err(err!(Invalid, "tensor '{name}': only constants carry data"));
        }
        let id = u32::try_from(self.tensors.len())
            .map_err(|_| err!(Invalid, "tensor '{name}': too many tensors"))?;
        self.tensors.push(TensorDecl {
            name: name.to_owned(),
            kind,
            dtype,
            shape: shape.iter().map(|&d| d as u64).collect(),
            data,
        });
        let base = Base {
            kernel: self.id,
            mem: Memory::Hbm,
            id,
            name: Arc::from(name),
            pitch: 0,
            placement: Placement::default(),
        };
        Ok(Tensor {
            view: View::full(base, dtype, shape),
            kind,
        })
    }

    /// An input tensor (written by the caller before execution).
    pub fn input(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Input, dtype, shape, Vec::new())
    }

    /// An output tensor (zeroed before each execution, read by the caller after).
    pub fn output(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Output, dtype, shape, Vec::new())
    }

    /// A constant tensor with its bytes.
    pub fn constant(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        data: Vec<u8>,
    ) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Const, dtype, shape, data)
    }

    /// A scratch tensor (device memory, zeroed before each execution).
    pub fn scratch(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tensor, Error> {
        self.tensor(name, TensorKind::Scratch, dtype, shape, Vec::new())
    }

    // ---- tiles ------------------------------------------------------------------------

    /// An SBUF tile `[partitions, free...]`, placed first fit.
    pub fn sbuf_tile(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tile, Error> {
        self.tile(name, Memory::Sbuf, dtype, shape)
    }

    /// A PSUM tile `[partitions, free...]`, placed first fit (inside one bank when it fits
    /// one, else from a bank boundary).
    pub fn psum_tile(&mut self, name: &str, dtype: DType, shape: &[usize]) -> Result<Tile, Error> {
        self.tile(name, Memory::Psum, dtype, shape)
    }

    /// A tile in `mem` (SBUF or PSUM), placed first fit.
    pub fn tile(
        &mut self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Tile, Error> {
        let at = self.find_place(name, mem, dtype, shape)?;
        self.place(name, mem, dtype, shape, at, true)
    }

    /// A tile outside any scope (for pools): at `at` (checked) or first fit.
    pub(crate) fn tile_unscoped(
        &mut self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
        at: Option<Placement>,
    ) -> Result<Tile, Error> {
        let at = match at {
            Some(at) => {
                self.check_place(name, mem, dtype, shape, at)?;
                at
            }
            None => self.find_place(name, mem, dtype, shape)?,
        };
        self.place(name, mem, dtype, shape, at, false)
    }

    /// Whether `tile` is a live tile of this kernel.
    pub fn is_live(&self, tile: &Tile) -> bool {
        let b = &tile.view.base;
        b.kernel == self.id && self.tiles.get(b.id as usize).is_some_and(|r| r.live)
    }

    /// First fit, or the "full" error naming the tile and the space left.
    fn find_place(
        &self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Placement, Error> {
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape)?;
        let alloc = if space == Space::Sbuf {
            &self.sbuf
        } else {
            &self.psum
        };
        let Some((start, offset)) = alloc.find(partitions, bytes) else {
            let s = alloc.shortfall(partitions);
            let what = format!(
                "no room for tile '{name}' {} {dtype} ({bytes} bytes per partition on \
                 {partitions} partitions",
                shape_str(shape)
            );
            return Err(if space == Space::Sbuf {
                err!(
                    Resource,
                    "SBUF full: {what}); the largest free block for {partitions} partitions is \
                     {} bytes",
                    s.largest
                )
            } else {
                err!(
                    Resource,
                    "PSUM full: {what}, {}); the largest free block for {partitions} partitions \
                     is {} bytes, {} of 8 banks empty",
                    if bytes <= PSUM_BANK_BYTES {
                        "inside one 2 KiB bank"
                    } else {
                        "from a bank boundary"
                    },
                    s.largest,
                    s.empty_banks
                )
            });
        };
        Ok(Placement {
            start_partition: start,
            offset,
        })
    }

    /// A tile at an explicit placement. The placement must obey the partition-start rule,
    /// the element alignment, the bounds of a partition, the PSUM bank rule, and not overlap
    /// a live tile.
    pub fn tile_at(
        &mut self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
        at: Placement,
    ) -> Result<Tile, Error> {
        self.check_place(name, mem, dtype, shape, at)?;
        self.place(name, mem, dtype, shape, at, true)
    }

    /// The checks of an explicit placement.
    fn check_place(
        &self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
        at: Placement,
    ) -> Result<(), Error> {
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape)?;
        let (s, o) = (at.start_partition, at.offset);
        if !partition_start_ok(s as u32, partitions as u32) {
            return Err(err!(
                Invalid,
                "tile '{name}': {partitions} partitions cannot start at partition {s} (65-128 \
                 partitions start at 0, 33-64 at 0 or 64, up to 32 at 0/32/64/96)"
            ));
        }
        if o % dtype.size() != 0 {
            return Err(err!(
                Invalid,
                "tile '{name}': offset {o} is not a multiple of the {dtype} element size"
            ));
        }
        if o + bytes > space.partition_bytes() {
            return Err(err!(
                Invalid,
                "tile '{name}': bytes [{o}, {}) exceed the {} bytes per partition of {mem}",
                o + bytes,
                space.partition_bytes()
            ));
        }
        let bank = PSUM_BANK_BYTES;
        let bank_ok = (bytes <= bank && o / bank == (o + bytes - 1) / bank) || o % bank == 0;
        if space == Space::Psum && !bank_ok {
            return Err(err!(
                Invalid,
                "tile '{name}': bytes [{o}, {}) break the PSUM bank rule (a tile of up to one \
                 2 KiB bank stays in one bank, a larger one starts at a bank boundary)",
                o + bytes
            ));
        }
        let alloc = if space == Space::Sbuf {
            &self.sbuf
        } else {
            &self.psum
        };
        if let Some(t) = alloc.occupant(s, partitions, o, bytes) {
            let other = self.tiles.get(t as usize).map_or("?", |r| &*r.name);
            return Err(err!(
                Invalid,
                "tile '{name}' at partitions [{s}, {}) bytes [{o}, {}) overlaps tile '{other}'",
                s + partitions,
                o + bytes
            ));
        }
        Ok(())
    }

    fn place(
        &mut self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
        at: Placement,
        scoped: bool,
    ) -> Result<Tile, Error> {
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape)?;
        let id = u32::try_from(self.tiles.len())
            .map_err(|_| err!(Invalid, "tile '{name}': too many tiles"))?;
        let alloc = if space == Space::Sbuf {
            &mut self.sbuf
        } else {
            &mut self.psum
        };
        alloc.reserve(id, at.start_partition, partitions, at.offset, bytes);
        let rec = TileRec {
            name: Arc::from(name),
            mem,
            placement: at,
            partitions,
            bytes,
            live: true,
        };
        self.forget_matmuls(&rec);
        self.tiles.push(rec);
        if let Some(scope) = self.scopes.last_mut().filter(|_| scoped) {
            scope.push(id);
        }
        let base = Base {
            kernel: self.id,
            mem,
            id,
            name: Arc::from(name),
            pitch: shape.iter().skip(1).product(),
            placement: at,
        };
        Ok(Tile {
            view: View::full(base, dtype, shape),
        })
    }

    /// Frees a tile: its space can be allocated again (operations that later reuse it are
    /// ordered after every access to the freed tile). Using the tile afterwards is an error.
    pub fn free(&mut self, tile: &Tile) -> Result<(), Error> {
        let b = &tile.view.base;
        if b.kernel != self.id {
            return Err(err!(Invalid, "{b} belongs to another kernel"));
        }
        match self.tiles.get(b.id as usize) {
            Some(r) if r.live => {
                self.release(b.id);
                Ok(())
            }
            _ => Err(err!(Invalid, "{b} is already freed")),
        }
    }

    fn release(&mut self, id: u32) {
        let Some(rec) = self.tiles.get_mut(id as usize) else {
            return;
        };
        if !rec.live {
            return;
        }
        rec.live = false;
        let rec = rec.clone();
        match rec.mem {
            Memory::Psum => self.psum.release(id),
            _ => self.sbuf.release(id),
        }
        self.forget_matmuls(&rec);
    }

    /// Drops matmul accumulation starts inside a tile's area (a new tile starts fresh).
    fn forget_matmuls(&mut self, rec: &TileRec) {
        if rec.mem != Memory::Psum {
            return;
        }
        let area = Rect {
            p0: rec.placement.start_partition as u32,
            p1: (rec.placement.start_partition + rec.partitions) as u32,
            b0: rec.placement.offset as u64,
            b1: (rec.placement.offset + rec.bytes) as u64,
        };
        self.mm_started.retain(|r| !r.overlaps(&area));
    }

    /// Runs `f`; every tile allocated inside it and still live is freed when it returns
    /// (also on error).
    pub fn scope<T>(
        &mut self,
        f: impl FnOnce(&mut Kernel) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.scopes.push(Vec::new());
        let r = f(self);
        if let Some(ids) = self.scopes.pop() {
            for id in ids {
                self.release(id);
            }
        }
        r
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

    /// Records an operation of engine `e`: its waits, its instructions, its end.
    pub(crate) fn emit_engine(&mut self, e: EngineId, instrs: &[Instr], accesses: &[Access]) {
        let waits = self.sync.engine_op(e, accesses);
        let pos = self.sync.position(crate::sync::Agent::engine(e));
        if let Some(s) = self.streams.get_mut(e.index()) {
            s.extend(waits.into_iter().map(Item::Wait));
            s.extend(instrs.iter().copied().map(Item::Instr));
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
        let k = spread.clamp(1, DMA_ENGINES).min(descs.len());
        let per = descs.len().div_ceil(k);
        let groups: Vec<&[DmaDescriptor]> = descs.chunks(per).collect();
        let chunks: Vec<DmaChunk> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| DmaChunk {
                dma: ((self.next_dma + i) % DMA_ENGINES) as u8,
                accesses: self.dma_accesses(g),
            })
            .collect();
        self.next_dma = (self.next_dma + groups.len()) % DMA_ENGINES;
        let plan = self.sync.dma_plan(trigger, &chunks);
        let transfers = self.sync.dma_op(&plan, &chunks);
        let mut items: Vec<Item> = plan.waits.iter().copied().map(Item::Wait).collect();
        for (g, (queue, _)) in groups.iter().zip(transfers) {
            let first = self.descriptors.len() as u32;
            self.descriptors.extend_from_slice(g);
            items.push(Item::Trigger {
                queue,
                first,
                count: g.len() as u32,
            });
        }
        if let Some(s) = self.streams.get_mut(plan.trigger.index()) {
            s.extend(items);
        }
        Ok(())
    }

    /// The footprints of a group of descriptors (HBM inputs and constants are never written,
    /// so reading them orders nothing and is not tracked).
    fn dma_accesses(&self, descs: &[DmaDescriptor]) -> Vec<Access> {
        let mut by: Vec<((MemKey, bool), Vec<Rect>)> = Vec::new();
        for d in descs {
            for (ep, write) in [(d.src, false), (d.dst, true)] {
                let (key, rect) = match ep {
                    DmaEndpoint::Hbm { tensor, offset } => {
                        let ro = matches!(
                            self.tensor_kind(tensor),
                            Some(TensorKind::Input | TensorKind::Const)
                        );
                        if ro && !write {
                            continue;
                        }
                        (MemKey::Hbm(tensor), (0, offset))
                    }
                    DmaEndpoint::Sbuf { partition, offset } => {
                        (MemKey::Sbuf, (u32::from(partition), u64::from(offset)))
                    }
                    DmaEndpoint::Psum { partition, offset } => {
                        (MemKey::Psum, (u32::from(partition), u64::from(offset)))
                    }
                };
                let r = Rect {
                    p0: rect.0,
                    p1: rect.0 + 1,
                    b0: rect.1,
                    b1: rect.1 + u64::from(d.len),
                };
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
    /// turns it into a NEFF).
    pub fn build(self) -> Result<Program, Error> {
        assemble(
            &self.name,
            self.tensors,
            &self.streams,
            self.descriptors,
            &self.sync,
        )
    }
}

/// Validates a tile shape: `(space, partitions, bytes per partition)`.
fn tile_shape(
    name: &str,
    mem: Memory,
    dtype: DType,
    shape: &[usize],
) -> Result<(Space, usize, usize), Error> {
    let Some(space) = mem.space() else {
        return Err(err!(
            Invalid,
            "tile '{name}': tiles live in SBUF or PSUM; declare HBM tensors with input, output, \
             constant or scratch"
        ));
    };
    let (Some(&partitions), true) = (shape.first(), shape.len() >= 2) else {
        return Err(err!(
            Invalid,
            "tile '{name}': shape {} needs a partition dimension and at least one free \
             dimension",
            shape_str(shape)
        ));
    };
    if partitions == 0 || partitions > space.partitions() {
        return Err(err!(
            Invalid,
            "tile '{name}': partition dimension {partitions} is outside 1..={}",
            space.partitions()
        ));
    }
    if shape.contains(&0) {
        return Err(err!(
            Invalid,
            "tile '{name}': shape {} has an empty dimension",
            shape_str(shape)
        ));
    }
    let bytes = shape
        .iter()
        .skip(1)
        .try_fold(dtype.size(), |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX);
    if bytes > space.partition_bytes() {
        return Err(err!(
            Invalid,
            "tile '{name}': {} {dtype} needs {bytes} bytes per partition; {mem} has {} per \
             partition",
            shape_str(shape),
            space.partition_bytes()
        ));
    }
    Ok((space, partitions, bytes))
}
