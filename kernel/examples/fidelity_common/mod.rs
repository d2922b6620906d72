//! What the two fidelity examples (`fidelity.rs`, trn1; `fidelity_trn2.rs`, trn2) share: the
//! published matmul's shape and tiles, the tile helpers both tutorials' kernels are written
//! with, and the deterministic random source of their inputs and sampled outputs.

use nrt_core::Error;
use nrt_kernel::{Kernel, NcMatmul, View};

/// Rows of the result (`lhsT` is `[K, M]`).
pub(crate) const M: usize = 4096;
/// The contraction dimension.
pub(crate) const K: usize = 8192;
/// Columns of the result (`rhs` is `[K, N]`).
pub(crate) const N: usize = 8192;
/// `nl.tile_size.gemm_stationary_fmax`.
pub(crate) const TILE_M: usize = 128;
/// `nl.tile_size.pmax`.
pub(crate) const TILE_K: usize = 128;
/// `nl.tile_size.gemm_moving_fmax`.
pub(crate) const TILE_N: usize = 512;
/// K tiles.
pub(crate) const KT: usize = K / TILE_K;

/// `v[r0.., c0..]`, `rows` × `cols`, of a 2-D view.
pub(crate) fn block(
    v: &View,
    r0: usize,
    rows: usize,
    c0: usize,
    cols: usize,
) -> Result<View, Error> {
    v.slice(0, r0..r0 + rows)?.slice(1, c0..c0 + cols)
}

/// `dst (+)= stationaryᵀ · moving`, overwriting when `first`.
pub(crate) fn matmul(
    k: &mut Kernel,
    dst: &View,
    st: &View,
    mv: &View,
    first: bool,
) -> Result<(), Error> {
    k.emit(NcMatmul {
        dst,
        stationary: st,
        moving: mv,
        accumulate: Some(!first),
    })
}

/// A xorshift64 generator: `next` gives the sequence from `seed` (made odd, so never 0).
pub(crate) struct Xorshift(u64);

impl Xorshift {
    /// The generator started from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Xorshift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next value.
    pub(crate) fn next(&mut self) -> u64 {
        let s = &mut self.0;
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }
}

/// `count` output positions `(row, column)` with rows below `rows`, the same on every run.
pub(crate) fn samples(count: usize, rows: usize) -> Vec<(usize, usize)> {
    let mut s = Xorshift(0x2545_F491_4F6C_DD1D);
    (0..count)
        .map(|_| {
            let v = s.next();
            ((v as usize) % rows, ((v >> 32) as usize) % N)
        })
        .collect()
}

/// `--trigger-latency-ns=N` among `args`: a DMA trigger-to-start latency of `N` ns for a
/// sensitivity study (`ExecOptions::dma_trigger_latency_ticks`; `None`: the generation's
/// figure, 0).
pub(crate) fn trigger_latency(args: &[String]) -> Result<Option<u64>, nrt_core::Error> {
    match args
        .iter()
        .find_map(|a| a.strip_prefix("--trigger-latency-ns="))
    {
        None => Ok(None),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&ns| ns <= 1_000_000)
            .map(|ns| Some(ns * 14 / 10))
            .ok_or_else(|| {
                nrt_core::err!(Invalid, "--trigger-latency-ns={v}: whole ns up to 1000000")
            }),
    }
}
