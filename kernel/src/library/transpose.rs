//! 2-D transpose of an HBM tensor of any shape and dtype: `out[C, R] = x[R, C]ᵀ`, bit-exact
//! (bits move unchanged, NaN payloads included).
//!
//! Tiling: `out`'s rows in blocks of 128 (a tile's partitions) and its columns in blocks of
//! [`COLS`]; each block is one transposing DMA (`dma_transpose`, HBM → SBUF) and one copy
//! back (SBUF → HBM), through a pool of three tiles so the loads of one block overlap the
//! stores of the previous ones.

use nrt_core::{Error, err};
use nrt_sim::engine::Program;

use super::util::{P, blocks, build_with, hbm, hbm_out, release};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{DmaCopy, DmaTranspose};
use crate::view::View;

/// Elements of `x`'s rows (columns of `out`) per block.
pub const COLS: usize = 2048;

/// `out = xᵀ` for 2-D HBM views of the same dtype (`x` `[R, C]`, `out` `[C, R]`).
pub fn transpose(k: &mut Kernel, out: &View, x: &View) -> Result<(), Error> {
    let f = "transpose";
    hbm(k, x, f, "x")?;
    hbm_out(k, out, f, "out")?;
    let (xs, os) = (x.shape(), out.shape());
    if xs.len() != 2 || os != [xs.get(1).copied().unwrap_or(0), xs[0]] {
        return Err(err!(
            Invalid,
            "{f}: out {} must be the transpose of the 2-D x {}",
            out.describe(),
            x.describe()
        ));
    }
    if out.dtype() != x.dtype() {
        return Err(err!(
            Invalid,
            "{f}: out {} and x {} differ in dtype",
            out.describe(),
            x.describe()
        ));
    }
    let (r, c) = (xs[0], xs[1]);
    let cols = COLS.min(r);
    let mut pool = k.tile_pool("transpose", Memory::Sbuf, x.dtype(), &[P.min(c), cols], 3)?;
    let r = (|| -> Result<(), Error> {
        for (c0, cn) in blocks(c, P) {
            for (r0, rn) in blocks(r, cols) {
                let t = pool.next(k)?;
                let tv = t.slice(0, 0..cn)?.slice(1, 0..rn)?;
                let src = x.slice(0, r0..r0 + rn)?.slice(1, c0..c0 + cn)?;
                k.emit(DmaTranspose::new(&tv, &src))?;
                let dst = out.slice(0, c0..c0 + cn)?.slice(1, r0..r0 + rn)?;
                k.emit(DmaCopy::new(&dst, &tv))?;
            }
        }
        Ok(())
    })();
    release(k, [pool], r)
}

/// A kernel `transpose` with input `x` `[r, c]` and output `out` `[c, r]` of `dtype`.
pub fn build(r: usize, c: usize, dtype: nrt_sim::engine::DType) -> Result<Program, Error> {
    build_with(
        "transpose",
        &[("x", dtype, &[r, c])],
        ("out", dtype, &[c, r]),
        |k, o, ins| transpose(k, o, &ins[0]),
    )
}
