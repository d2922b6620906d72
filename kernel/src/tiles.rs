//! SBUF and PSUM tiles: the [`Tile`] handle and the allocation of a [`Kernel`] — first fit
//! (`alloc.rs`), explicit placement, `free`, scopes — with the messages of every refusal.

use core::ops::Deref;
use std::sync::Arc;

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, PSUM_BANK_BYTES, Space, partition_start_ok};

use crate::handle::{Base, Memory, Placement};
use crate::kernel::{Kernel, TileRec};
use crate::sync::Rect;
use crate::view::{View, shape_str};

/// An SBUF or PSUM tile: dereferences to its full [`View`] (`[partitions, free...]`).
#[derive(Clone, Debug)]
pub struct Tile {
    pub(crate) view: View,
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

impl Kernel {
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
    /// Bytes per partition the kernel allocates in `space`.
    fn capacity(&self, space: Space) -> usize {
        if space == Space::Sbuf {
            self.sbuf.bytes()
        } else {
            self.psum.bytes()
        }
    }

    fn find_place(
        &self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
    ) -> Result<Placement, Error> {
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape, self.sbuf.bytes())?;
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
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape, self.sbuf.bytes())?;
        let (s, o) = (at.start_partition, at.offset);
        if s > space.partitions() || !partition_start_ok(s as u32, partitions as u32) {
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
        let capacity = self.capacity(space);
        if o.saturating_add(bytes) > capacity {
            return Err(err!(
                Invalid,
                "tile '{name}': bytes [{o}, {}) exceed the {capacity} bytes per partition of \
                 {mem}",
                o.saturating_add(bytes)
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
        let (space, partitions, bytes) = tile_shape(name, mem, dtype, shape, self.sbuf.bytes())?;
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
}

/// Validates a tile shape: `(space, partitions, bytes per partition)`.
fn tile_shape(
    name: &str,
    mem: Memory,
    dtype: DType,
    shape: &[usize],
    sbuf_bytes: usize,
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
    let capacity = if space == Space::Sbuf {
        sbuf_bytes
    } else {
        space.partition_bytes()
    };
    if bytes > capacity {
        return Err(err!(
            Invalid,
            "tile '{name}': {} {dtype} needs {bytes} bytes per partition; {mem} has \
             {capacity} per partition",
            shape_str(shape)
        ));
    }
    Ok((space, partitions, bytes))
}
