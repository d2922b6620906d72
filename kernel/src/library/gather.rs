//! ONNX `Gather` with indices known only at run time (an int32 HBM tensor; an int64 index
//! tensor can be passed as the strided int32 view of its low words — `[T, 2]` int32, column
//! 0, little-endian — which is staged through SBUF; indices then must be below 2³¹). The ISA has no indirect DMA, so the rows are selected by TensorE: for `data`
//! viewed as `[A, V, B]` (`V` the gathered axis) and `T` indices,
//! `out[a, t, :] = Σ_v onehot[v, t] · data[a, v, :]`, the one-hot matrix built on chip.
//! (Indices known when the kernel is built are plain copies:
//! [`data::gather_const`](super::data::gather_const).)
//!
//! # Algorithm
//!
//! Per block of 128 indices: the indices are loaded once onto every partition (a DMA whose
//! partitions all read the same row), converted to fp32 and wrapped (`i + V·(i < 0)`). Per
//! 128 rows of `V`: `onehot[v, t] = (index[t] == v₀ + v)` (GpSimdE `iota` of the row numbers,
//! one VectorE comparison), the data rows `[128, B-block]` loaded, and one matmul per 512
//! columns accumulates into PSUM; after the last block of `V` the PSUM tiles are evacuated
//! and stored as `out[a, t-block, B-block]`.
//!
//! # Numerics and limits
//!
//! A finite value comes through exactly (`x·1` is `x`, the other products are ±0 and add
//! nothing), except that −0 becomes +0. An infinite or NaN value anywhere in the *column* of
//! `data` makes that column's results NaN (`0·∞`). An index outside `[−V, V)` selects
//! nothing: its row of `out` is 0 (ONNX leaves it undefined). `V < 2²⁴` (indices are exact
//! in fp32). Cost: `⌈V/128⌉·⌈B/512⌉` matmuls and all of `data` read per 128 indices — meant
//! for moderate tables; an embedding of 30 000 rows reads the whole table.

use nrt_core::{Error, err};
use nrt_sim::engine::{AluOp, DType, EngineId};

use super::util::{P, blocks, float, hbm, hbm_out};
use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::ops::{NcMatmul, TensorCopy};
use crate::view::View;

/// Columns of `data` per pass (four PSUM banks).
const B_CHUNK: usize = 2048;

/// Emits `out = Gather(data, indices, axis)` (see the module documentation): `data` float,
/// `indices` int32 of any shape, `out` of `data`'s dtype and shape
/// `data.shape[..axis] + indices.shape + data.shape[axis + 1..]`, all contiguous.
pub fn gather(
    k: &mut Kernel,
    out: &View,
    data: &View,
    indices: &View,
    axis: usize,
) -> Result<(), Error> {
    let f = "gather";
    hbm(k, data, f, "data")?;
    hbm(k, indices, f, "indices")?;
    hbm_out(k, out, f, "out")?;
    float(data, f, "data")?;
    let ds = data.shape();
    if axis >= ds.len() || indices.dtype() != DType::I32 || out.dtype() != data.dtype() {
        return Err(err!(
            Invalid,
            "{f}: axis {axis} must be a dimension of data {}, indices {} int32, out {} of \
             data's dtype",
            data.describe(),
            indices.describe(),
            out.describe()
        ));
    }
    let mut want: Vec<usize> = ds[..axis].to_vec();
    want.extend(indices.shape());
    want.extend(&ds[axis + 1..]);
    if out.shape() != want {
        return Err(err!(
            Invalid,
            "{f}: out {} must have shape {want:?}",
            out.describe()
        ));
    }
    let a: usize = ds[..axis].iter().product();
    let v = ds[axis];
    let b: usize = ds[axis + 1..].iter().product();
    let t = indices.elems();
    if v >= 1 << 24 {
        return Err(err!(
            Invalid,
            "{f}: axis of {v} rows; at most 2^24 − 1 (indices compare in fp32)"
        ));
    }
    let contiguous = |x: &View, s: &[usize]| {
        x.reshape(s).map_err(|e| {
            err!(
                Invalid,
                "{f}: {} must be contiguous: {}",
                x.describe(),
                e.message()
            )
        })
    };
    let d3 = contiguous(data, &[a, v, b])?;
    let o3 = contiguous(out, &[a, t, b])?;
    // The indices as one row [1, T]; a strided rank-1 view (an int64 tensor's low words,
    // `[T, 2]` column 0) is staged through SBUF once per block instead.
    let (idx, staged) = match indices.reshape(&[1, t]) {
        Ok(v) => (v, false),
        Err(_) if indices.rank() == 1 => {
            let mut v = indices.clone();
            v.dims.insert(0, crate::view::Dim { size: 1, stride: 0 });
            (v, true)
        }
        Err(e) => {
            return Err(err!(
                Invalid,
                "{f}: indices {} must be contiguous or 1-D: {}",
                indices.describe(),
                e.message()
            ));
        }
    };
    if out.elems() == 0 {
        return Ok(());
    }
    let dt = data.dtype();
    let (tp, vp, bc) = (P.min(t), P.min(v), B_CHUNK.min(b));
    k.scope(|k| {
        let idx_i = k.sbuf_tile("gather_idx_i", DType::I32, &[vp, tp])?;
        let idx_f = k.sbuf_tile("gather_idx", DType::F32, &[vp, tp])?;
        let idx_b = k.sbuf_tile("gather_idx_b", DType::I32, &[vp, tp])?;
        let wrap = k.sbuf_tile("gather_wrap", DType::F32, &[vp, tp])?;
        let rows = k.sbuf_tile("gather_rows", DType::F32, &[vp, 1])?;
        let mut ohs = k.tile_pool("gather_onehot", Memory::Sbuf, dt, &[vp, tp], 2)?;
        let mut dts = k.tile_pool("gather_data", Memory::Sbuf, dt, &[vp, bc], 2)?;
        let mut pss = k.tile_pool("gather_psum", Memory::Psum, DType::F32, &[tp, 512], 4)?;
        let mut ots = k.tile_pool("gather_out", Memory::Sbuf, dt, &[tp, bc], 2)?;
        for (t0, tn) in blocks(t, P) {
            let ii = idx_i.slice(1, 0..tn)?;
            let fi = idx_f.slice(1, 0..tn)?;
            let wr = wrap.slice(1, 0..tn)?;
            let row = idx.slice(1, t0..t0 + tn)?;
            if staged {
                // HBM → partition 0 (one descriptor per index), then partition 0 → every
                // partition (a DMA whose source partition stride is 0).
                let first = ii.slice(0, 0..1)?;
                k.dma_copy(&first, &row)?;
                let mut all = first.clone();
                all.dims[0] = crate::view::Dim {
                    size: vp,
                    stride: 0,
                };
                let rest = idx_b.slice(1, 0..tn)?;
                k.dma_copy(&rest, &all)?;
                k.tensor_copy(&fi, &rest)?;
            } else {
                k.dma_copy(&ii, &row.broadcast(0, vp)?)?;
                k.tensor_copy(&fi, &ii)?;
            }
            k.tensor_scalar_chain(&wr, &fi, AluOp::Less, 0.0, AluOp::Mul, v as f32)?;
            k.tensor_tensor(&fi, &fi, &wr, AluOp::Add)?;
            for ai in 0..a {
                for (b0, bn) in blocks(b, bc) {
                    let banks: Vec<(usize, usize)> = blocks(bn, 512).collect();
                    let accs: Vec<View> = banks
                        .iter()
                        .map(|&(_, nn)| pss.next(k)?.slice(0, 0..tn)?.slice(1, 0..nn))
                        .collect::<Result<_, Error>>()?;
                    for (vi, (v0, vn)) in blocks(v, P).enumerate() {
                        let rv = rows.slice(0, 0..vn)?;
                        k.iota(&rv, i32::try_from(v0).unwrap_or(i32::MAX), 1, 0)?;
                        let oh = ohs.next(k)?.slice(0, 0..vn)?.slice(1, 0..tn)?;
                        k.tensor_scalar(&oh, &fi.slice(0, 0..vn)?, AluOp::Equal, &rv)?;
                        let dv = dts.next(k)?.slice(0, 0..vn)?.slice(1, 0..bn)?;
                        let src = d3
                            .select(0, ai)?
                            .slice(0, v0..v0 + vn)?
                            .slice(1, b0..b0 + bn)?;
                        k.dma_copy(&dv, &src)?;
                        for (acc, &(c0, nn)) in accs.iter().zip(&banks) {
                            k.emit(NcMatmul {
                                dst: acc,
                                stationary: &oh,
                                moving: &dv.slice(1, c0..c0 + nn)?,
                                accumulate: Some(vi > 0),
                            })?;
                        }
                    }
                    let ot = ots.next(k)?.slice(0, 0..tn)?.slice(1, 0..bn)?;
                    for (j, (acc, &(c0, nn))) in accs.iter().zip(&banks).enumerate() {
                        k.emit(TensorCopy {
                            dst: &ot.slice(1, c0..c0 + nn)?,
                            src: acc,
                            engine: Some(if j % 2 == 0 {
                                EngineId::Vector
                            } else {
                                EngineId::Scalar
                            }),
                        })?;
                    }
                    let dst = o3
                        .select(0, ai)?
                        .slice(0, t0..t0 + tn)?
                        .slice(1, b0..b0 + bn)?;
                    k.dma_copy(&dst, &ot)?;
                }
            }
        }
        for p in [ohs, dts, pss, ots] {
            p.free(k)?;
        }
        Ok(())
    })
}
