//! A whole matrix product computed the way the engine computes a tiled TensorE matmul: the
//! same per-tile kernel, the same PSUM accumulation, the same bits.

use nrt_core::{Error, err};

use super::fast::gemm;
use super::matmul::{
    canon_rows, cpu_has_fma, matmul_stationary_any_nan, matmul_store_fast_any_nan,
};

/// Partitions of one stationary tile: the contraction depth of one `MultiplyMoving`.
const TILE_K: usize = 128;
/// Rows and columns of the output blocks computed one after another. The bits depend only on
/// the K tiling (each element's sum runs over the K tiles in order whatever the M and N
/// tiling), so the blocks are as large as the GEMM runs fastest on: whole matrices up to 2048
/// (about 1.1× the speed of TensorE's own 128 × 512 output tiles at 2048³ here).
const BLOCK: usize = 2048;

/// `out[m][n] = lhs_t[k][m]ᵀ · rhs[k][n]` (all row-major binary32), computed as TensorE
/// computes [`kernels::matmul`](crate::engine::kernels::matmul): each 128 × 512 output tile
/// is accumulated over 128-deep K tiles in increasing k, each K tile's product by the engine's
/// matmul rule (a fused multiply-add per step in increasing k from +0.0, `docs/SIM_ISA.md`,
/// "Numerics") and added to the tile's running sum with one rounding, as PSUM accumulates it
/// (the first K tile stores its product). NaN results are the canonical NaN.
///
/// The result has the same bits as the engine's output of `kernels::matmul(m, k, n, F32,
/// F32)` on the same operands, on every CPU. It runs the engine's kernel (the `gemm` crate
/// where the CPU has FMA and the probes pass, the rule's own kernels otherwise) once per K
/// tile over a whole output block, straight on these slices: only where a block is narrower
/// than the matrix, or a tile leaves the crate's main path, is the stationary operand
/// copied. It is the host reference a test of a simulated matmul can compare bits with, and
/// the functional GEMM the engine benchmark sets against numpy.
///
/// Errors (`NRT_INVALID`): a dimension of 0, or a slice whose length is not its shape's.
pub fn tensor_matmul(
    lhs_t: &[f32],
    rhs: &[f32],
    out: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), Error> {
    check_shapes("tensor_matmul", lhs_t, rhs, out, m, k, n)?;
    let mut gathered = Vec::new();
    let mut product = Vec::new();
    for m0 in (0..m).step_by(BLOCK) {
        let mw = BLOCK.min(m - m0);
        for n0 in (0..n).step_by(BLOCK) {
            let nw = BLOCK.min(n - n0);
            // One output block, accumulated over every K tile; the operands are read in
            // place through slices that start at the blocks' first elements (stationary rows
            // `m` apart, moving and output rows `n` apart).
            let c = &mut out[m0 * n + n0..];
            for k0 in (0..k).step_by(TILE_K) {
                let kh = TILE_K.min(k - k0);
                let b = &rhs[k0 * n + n0..];
                let accumulate = k0 > 0;
                // The kernels take the stationary operand `[kh][mw]` contiguous: in place when
                // the block spans every column, copied otherwise.
                let a: &[f32] = if mw == m {
                    &lhs_t[k0 * m..(k0 + kh) * m]
                } else {
                    gathered.clear();
                    for row in lhs_t[k0 * m..].chunks(m).take(kh) {
                        gathered.extend_from_slice(&row[m0..m0 + mw]);
                    }
                    &gathered
                };
                if matmul_store_fast_any_nan(a, b, n, c, n, kh, mw, nw, accumulate) {
                    continue;
                }
                product.resize(mw * nw, 0.0);
                matmul_stationary_any_nan(a, b, n, &mut product, kh, mw, nw);
                for (row, cells) in product.chunks_exact(nw).zip(c.chunks_mut(n)) {
                    for (x, &p) in cells.iter_mut().zip(row) {
                        *x = if accumulate { *x + p } else { p };
                    }
                }
            }
            // A NaN stays a NaN through every later addition: canonical once, at the end.
            canon_rows(c, n, mw, nw);
        }
    }
    Ok(())
}

/// `out = lhs_tᵀ · rhs` as the `gemm` crate computes it in one call over the whole depth (its
/// own K blocking: **not** TensorE's numerics, whose 128-deep K tiles [`tensor_matmul`]
/// keeps). The engine benchmark prints its speed beside `tensor_matmul`'s: the ceiling the
/// crate sets on this CPU. Shapes and errors as [`tensor_matmul`]'s; `NRT_FAILURE` where
/// the crate's FMA micro-kernel would not compute it (a CPU without FMA, `K < 3`, `M` or `N`
/// below 2).
pub fn gemm_whole_depth(
    lhs_t: &[f32],
    rhs: &[f32],
    out: &mut [f32],
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), Error> {
    check_shapes("gemm_whole_depth", lhs_t, rhs, out, m, k, n)?;
    if !(cpu_has_fma() && k >= 3 && m >= 2 && n >= 2) {
        return Err(err!(
            Failure,
            "gemm_whole_depth: the gemm crate's FMA micro-kernel does not compute a \
             {m} x {k} x {n} product on this CPU"
        ));
    }
    // The shapes were checked, so the crate's bounds hold.
    gemm(lhs_t, rhs, n, out, k, m, n);
    Ok(())
}

/// `NRT_INVALID` for a dimension of 0 or a slice whose length is not its shape's.
fn check_shapes(
    name: &str,
    lhs_t: &[f32],
    rhs: &[f32],
    out: &[f32],
    m: usize,
    k: usize,
    n: usize,
) -> Result<(), Error> {
    if m == 0 || k == 0 || n == 0 {
        return Err(err!(
            Invalid,
            "{name}: M = {m}, K = {k}, N = {n}: every dimension must be at least 1"
        ));
    }
    for (what, len, rows, cols) in [
        ("lhs_t", lhs_t.len(), k, m),
        ("rhs", rhs.len(), k, n),
        ("out", out.len(), m, n),
    ] {
        if rows.checked_mul(cols) != Some(len) {
            return Err(err!(
                Invalid,
                "{name}: {what} holds {len} elements, its shape [{rows}, {cols}] needs {}",
                rows.saturating_mul(cols)
            ));
        }
    }
    Ok(())
}
