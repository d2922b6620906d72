//! From views to format-1.1 block DMA descriptors: element-wise copies that convert the
//! element type (`dma_copy` between views of different dtypes) and 2-D transposes
//! (`dma_transpose`).
//!
//! A block is `rows × cols` elements: on chip, consecutive partitions from one byte offset;
//! in HBM, rows `pitch` elements apart. A cast is cut into the runs contiguous on both sides
//! (as byte copies are), and consecutive runs of one length whose rows step regularly on both
//! sides become one block. A transpose `[R, C] → [C, R]` is cut along `R` into blocks, the
//! destination holding each one `transposed`.

use nrt_core::{Error, err};
use nrt_sim::engine::{DMA_ENGINES, DmaBlock, DmaDescriptor, DmaEndpoint, MemKind};

use crate::handle::Memory;
use crate::layout::{gcd, linear, run_length};
use crate::view::{View, shape_str};

/// An element's place: a tensor (HBM) or partition (on chip), and a byte offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pos {
    index: u32,
    byte: u64,
}

/// The place of the element at linear position `lin` of a view's base.
fn pos(v: &View, lin: usize) -> Option<Pos> {
    let es = v.dtype.size();
    match v.base.mem {
        Memory::Hbm => Some(Pos {
            index: v.base.id,
            byte: u64::try_from(lin.checked_mul(es)?).ok()?,
        }),
        Memory::Sbuf | Memory::Psum => {
            let pitch = v.base.pitch.max(1);
            Some(Pos {
                index: u32::try_from(v.base.placement.start_partition + lin / pitch).ok()?,
                byte: u64::try_from(v.base.placement.offset + (lin % pitch) * es).ok()?,
            })
        }
    }
}

fn mem_kind(m: Memory) -> MemKind {
    match m {
        Memory::Hbm => MemKind::Hbm,
        Memory::Sbuf => MemKind::Sbuf,
        Memory::Psum => MemKind::Psum,
    }
}

/// One side of a block under construction.
#[derive(Clone, Copy, Debug)]
struct Side {
    mem: Memory,
    es: u64,
    first: Pos,
    /// HBM: bytes from one row to the next (set by the second row).
    step: Option<u64>,
}

impl Side {
    /// Whether `p` can be row `rows` of a block of rows of `cols` elements.
    fn admits(&self, rows: u32, cols: u64, p: Pos) -> Option<Option<u64>> {
        match self.mem {
            Memory::Hbm => {
                if p.index != self.first.index {
                    return None;
                }
                let delta = p.byte.checked_sub(self.first.byte)?;
                match self.step {
                    Some(s) => (s.checked_mul(u64::from(rows))? == delta).then_some(Some(s)),
                    None => {
                        // The second row fixes the pitch: whole elements, at least a row.
                        let ok = delta % self.es == 0
                            && delta >= cols * self.es
                            && u32::try_from(delta / self.es).is_ok();
                        ok.then_some(Some(delta))
                    }
                }
            }
            Memory::Sbuf | Memory::Psum => {
                let next = self.first.index.checked_add(rows)?;
                (p.index == next && p.byte == self.first.byte).then_some(None)
            }
        }
    }

    fn block(&self, dtype: nrt_sim::engine::DType, rows: u32, cols: u32) -> DmaBlock {
        let pitch = match self.step {
            Some(s) => u32::try_from(s / self.es.max(1)).unwrap_or(u32::MAX),
            None => cols,
        };
        DmaBlock {
            mem: mem_kind(self.mem),
            index: self.first.index,
            offset: self.first.byte,
            dtype,
            rows,
            cols,
            pitch,
            transposed: false,
        }
    }
}

/// A block being grown row by row.
struct Growing {
    src: Side,
    dst: Side,
    cols: u64,
    rows: u32,
}

/// Block descriptors copying every element of `src` to the element of `dst` at the same
/// position (row-major over the shapes without size-1 dimensions, which must be equal),
/// converting `src`'s dtype to `dst`'s; at most `ceil(runs / spread)` rows per block so the
/// copy still spreads over `spread` DMA engines.
pub(crate) fn cast_descriptors(
    dst: &View,
    src: &View,
    spread: usize,
) -> Result<Vec<DmaDescriptor>, Error> {
    let (dd, sd) = (dst.squeezed(), src.squeezed());
    let (dshape, sshape) = (dst.squeezed_shape(), src.squeezed_shape());
    if dshape != sshape {
        return Err(err!(
            Invalid,
            "dst {} and src {} have different shapes ({} and {} without size-1 dimensions)",
            dst.describe(),
            src.describe(),
            shape_str(&dshape),
            shape_str(&sshape)
        ));
    }
    let outside = || {
        err!(
            Invalid,
            "dst {} or src {} addresses outside its memory",
            dst.describe(),
            src.describe()
        )
    };
    let (ses, des) = (src.dtype.size() as u64, dst.dtype.size() as u64);
    // Runs contiguous on both sides: (src place, dst place, elements).
    let total = dst.elems();
    let chunk = gcd(run_length(dst, &dd), run_length(src, &sd)).max(1);
    let mut runs: Vec<(Pos, Pos, u64)> = Vec::new();
    let mut e = 0usize;
    while e < total {
        let (Some(s), Some(d)) = (pos(src, linear(src, &sd, e)), pos(dst, linear(dst, &dd, e)))
        else {
            return Err(outside());
        };
        let n = chunk as u64;
        match runs.last_mut() {
            Some((ps, pd, m))
                if ps.index == s.index
                    && ps.byte + *m * ses == s.byte
                    && pd.index == d.index
                    && pd.byte + *m * des == d.byte
                    && u32::try_from(*m + n).is_ok() =>
            {
                *m += n;
            }
            _ => runs.push((s, d, n)),
        }
        e += chunk;
    }
    let max_rows = runs
        .len()
        .div_ceil(spread.clamp(1, DMA_ENGINES))
        .clamp(1, 128);
    let mut out = Vec::new();
    let mut cur: Option<Growing> = None;
    let finish = |g: &Growing, out: &mut Vec<DmaDescriptor>| -> Result<(), Error> {
        let cols = u32::try_from(g.cols).map_err(|_| outside())?;
        let sb = g.src.block(src.dtype, g.rows, cols);
        let len = u32::try_from(sb.bytes()).map_err(|_| {
            err!(
                Invalid,
                "a block of {} bytes is too long for one descriptor",
                sb.bytes()
            )
        })?;
        out.push(DmaDescriptor {
            src: DmaEndpoint::Block(sb),
            dst: DmaEndpoint::Block(g.dst.block(dst.dtype, g.rows, cols)),
            len,
        });
        Ok(())
    };
    for (s, d, n) in runs {
        if let Some(g) = cur.as_mut() {
            if g.cols == n && (g.rows as usize) < max_rows {
                if let (Some(a), Some(b)) = (g.src.admits(g.rows, n, s), g.dst.admits(g.rows, n, d))
                {
                    g.src.step = a;
                    g.dst.step = b;
                    g.rows += 1;
                    continue;
                }
            }
            finish(g, &mut out)?;
        }
        cur = Some(Growing {
            src: Side {
                mem: src.base.mem,
                es: ses,
                first: s,
                step: None,
            },
            dst: Side {
                mem: dst.base.mem,
                es: des,
                first: d,
                step: None,
            },
            cols: n,
            rows: 1,
        });
    }
    if let Some(g) = &cur {
        finish(g, &mut out)?;
    }
    Ok(out)
}

/// The rows of a 2-D view `[R, C]` as a block: its first element's place, the row pitch in
/// elements (HBM) and whether its layout is a block at all (columns contiguous; on chip the
/// rows are the partitions).
fn as_block(v: &View) -> Option<(Pos, u32)> {
    let [r, c] = v.dims.as_slice() else {
        return None;
    };
    if c.size > 1 && c.stride != 1 {
        return None;
    }
    let first = pos(v, v.offset)?;
    match v.base.mem {
        Memory::Hbm => {
            let pitch = if r.size > 1 { r.stride } else { c.size };
            (pitch >= c.size).then_some(())?;
            Some((first, u32::try_from(pitch).ok()?))
        }
        // Dimension 0 of a tile view is its partition dimension.
        Memory::Sbuf | Memory::Psum => Some((first, u32::try_from(c.size).ok()?)),
    }
}

/// Descriptors transposing the 2-D view `src` `[R, C]` into `dst` `[C, R]` (same dtype;
/// `dst` on chip), cut along `R` into up to `spread` blocks.
pub(crate) fn transpose_descriptors(
    op: &str,
    dst: &View,
    src: &View,
    spread: usize,
) -> Result<Vec<DmaDescriptor>, Error> {
    let (ss, ds) = (src.shape(), dst.shape());
    let (&[r, c], &[dc, dr]) = (ss.as_slice(), ds.as_slice()) else {
        return Err(err!(
            Invalid,
            "{op}: only 2-D transposes ([R, C] -> [C, R]); src {} and dst {}",
            src.describe(),
            dst.describe()
        ));
    };
    if (dc, dr) != (c, r) {
        return Err(err!(
            Invalid,
            "{op}: dst {} must be [{c}, {r}], the transpose of src {}",
            dst.describe(),
            src.describe()
        ));
    }
    let Some((s0, pitch)) = as_block(src) else {
        return Err(err!(
            Invalid,
            "{op}: src {} is not a block the DMA can read: its last dimension must be \
             contiguous{}",
            src.describe(),
            if src.base.mem == Memory::Hbm {
                " and its rows at least a row apart"
            } else {
                ""
            }
        ));
    };
    let Some((d0, _)) = as_block(dst) else {
        return Err(err!(
            Invalid,
            "{op}: dst {} is not a block the DMA can write: its last dimension must be \
             contiguous",
            dst.describe()
        ));
    };
    let es = src.dtype.size() as u64;
    let (Ok(rows), Ok(cols)) = (u32::try_from(r), u32::try_from(c)) else {
        return Err(err!(Invalid, "{op}: src {} is too large", src.describe()));
    };
    let per = rows.div_ceil(spread.clamp(1, DMA_ENGINES) as u32).max(1);
    let mut out = Vec::new();
    let mut r0 = 0u32;
    while r0 < rows {
        let n = per.min(rows - r0);
        let sb = match src.base.mem {
            Memory::Hbm => DmaBlock {
                mem: MemKind::Hbm,
                index: s0.index,
                offset: s0.byte + u64::from(r0) * u64::from(pitch) * es,
                dtype: src.dtype,
                rows: n,
                cols,
                pitch,
                transposed: false,
            },
            Memory::Sbuf | Memory::Psum => DmaBlock {
                mem: mem_kind(src.base.mem),
                index: s0.index + r0,
                offset: s0.byte,
                dtype: src.dtype,
                rows: n,
                cols,
                pitch: cols,
                transposed: false,
            },
        };
        let db = DmaBlock {
            mem: mem_kind(dst.base.mem),
            index: d0.index,
            offset: d0.byte + u64::from(r0) * es,
            dtype: dst.dtype,
            rows: cols,
            cols: n,
            pitch: n,
            transposed: true,
        };
        let len = u32::try_from(sb.bytes())
            .map_err(|_| err!(Invalid, "{op}: src {} is too large", src.describe()))?;
        out.push(DmaDescriptor {
            src: DmaEndpoint::Block(sb),
            dst: DmaEndpoint::Block(db),
            len,
        });
        r0 += n;
    }
    Ok(out)
}
