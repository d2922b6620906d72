//! Rotating tile pools: `bufs` buffers of one shape, handed out in turn, each time as a fresh
//! [`Tile`] at the next buffer's place — the multi-buffering NKI gets from a tile declared in
//! a loop body. Taking a buffer again frees the tile that held it; the synchronisation orders
//! the new tile's writes after every access to the old one, so a pool of 2 or 3 lets DMA,
//! TensorE, VectorE and ScalarE work on consecutive iterations at once.

use nrt_core::{Error, err};
use nrt_sim::engine::DType;

use crate::handle::{Memory, Placement};
use crate::kernel::Kernel;
use crate::tiles::Tile;

/// A pool of `bufs` same-shaped tiles used round robin (see [`Kernel::tile_pool`]).
#[derive(Debug)]
pub struct TilePool {
    kernel: u64,
    name: String,
    mem: Memory,
    dtype: DType,
    shape: Vec<usize>,
    places: Vec<Placement>,
    current: Vec<Option<Tile>>,
    next: usize,
    taken: usize,
}

impl Kernel {
    /// Allocates `bufs` (≥ 1) tiles of `shape` in `mem` (first fit, outside any scope) and
    /// returns a pool handing them out in turn with [`TilePool::next`].
    pub fn tile_pool(
        &mut self,
        name: &str,
        mem: Memory,
        dtype: DType,
        shape: &[usize],
        bufs: usize,
    ) -> Result<TilePool, Error> {
        if bufs == 0 {
            return Err(err!(
                Invalid,
                "tile pool '{name}': needs at least one buffer"
            ));
        }
        let mut current = Vec::with_capacity(bufs);
        let mut places = Vec::with_capacity(bufs);
        for i in 0..bufs {
            match self.tile_unscoped(&format!("{name}#{i}"), mem, dtype, shape, None) {
                Ok(t) => {
                    places.push(t.placement());
                    current.push(Some(t));
                }
                Err(e) => {
                    for t in current.iter().flatten() {
                        let _ = self.free(t);
                    }
                    return Err(e);
                }
            }
        }
        Ok(TilePool {
            kernel: self.id,
            name: name.to_owned(),
            mem,
            dtype,
            shape: shape.to_vec(),
            places,
            current,
            next: 0,
            taken: 0,
        })
    }
}

impl TilePool {
    /// Number of buffers.
    pub fn bufs(&self) -> usize {
        self.places.len()
    }

    /// The next buffer, as a fresh tile (`name#i`); the tile that held it before is freed.
    pub fn next(&mut self, k: &mut Kernel) -> Result<Tile, Error> {
        if k.id != self.kernel {
            return Err(err!(
                Invalid,
                "tile pool '{}' belongs to another kernel",
                self.name
            ));
        }
        let i = self.next;
        self.next = (i + 1) % self.places.len();
        let first_round = self.taken < self.places.len();
        self.taken = self.taken.saturating_add(1);
        let slot = self
            .current
            .get_mut(i)
            .ok_or_else(|| err!(Invalid, "tile pool '{}': no buffer {i}", self.name))?;
        if first_round {
            if let Some(t) = slot {
                return Ok(t.clone());
            }
        }
        if let Some(old) = slot.take() {
            let _ = k.free(&old);
        }
        let place = self.places.get(i).copied();
        let t = k.tile_unscoped(
            &format!("{}#{i}", self.name),
            self.mem,
            self.dtype,
            &self.shape,
            place,
        )?;
        *slot = Some(t.clone());
        Ok(t)
    }

    /// Frees the pool's tiles.
    pub fn free(self, k: &mut Kernel) -> Result<(), Error> {
        for t in self.current.iter().flatten() {
            if k.is_live(t) {
                k.free(t)?;
            }
        }
        Ok(())
    }
}
