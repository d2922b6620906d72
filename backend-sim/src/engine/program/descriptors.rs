//! The rules of DMA descriptors: directions, bounds, and — for the block descriptors of
//! format 1.1 — matching shapes, the byte count and the transpose/cast combination.

use nrt_core::{Error, err};

use crate::engine::isa::{DmaBlock, DmaDescriptor, DmaEndpoint, MemKind};
use crate::engine::memory::{PSUM_PARTITION_BYTES, PSUM_PARTITIONS, SBUF_PARTITIONS};
use crate::engine::spec::MAX_SBUF_PARTITION_BYTES;

/// Checks one descriptor against the program's tensor sizes.
pub(super) fn validate_descriptor(d: &DmaDescriptor, sizes: &[u64]) -> Result<(), Error> {
    if d.len == 0 {
        return Err(err!(Invalid, "zero length"));
    }
    let ok_dir = matches!(
        (d.src.mem(), d.dst.mem()),
        (MemKind::Hbm, MemKind::Sbuf)
            | (MemKind::Sbuf, MemKind::Hbm)
            | (MemKind::Sbuf, MemKind::Sbuf)
            | (MemKind::Psum, MemKind::Sbuf)
    );
    if !ok_dir {
        return Err(err!(
            Invalid,
            "{}->{} is not a supported direction (HBM<->SBUF, SBUF->SBUF, PSUM->SBUF)",
            d.src.mem_name(),
            d.dst.mem_name()
        ));
    }
    if d.is_block() {
        return validate_block_descriptor(d, sizes);
    }
    for e in [&d.src, &d.dst] {
        match *e {
            DmaEndpoint::Hbm { tensor, offset } => {
                let size = sizes
                    .get(tensor as usize)
                    .copied()
                    .ok_or_else(|| err!(Invalid, "tensor {tensor} does not exist"))?;
                if offset
                    .checked_add(u64::from(d.len))
                    .is_none_or(|e| e > size)
                {
                    return Err(err!(
                        Invalid,
                        "bytes [{offset}, +{}) outside tensor {tensor} of {size} bytes",
                        d.len
                    ));
                }
            }
            DmaEndpoint::Sbuf { partition, offset } => {
                if usize::from(partition) >= SBUF_PARTITIONS
                    || offset as usize + d.len as usize > MAX_SBUF_PARTITION_BYTES
                {
                    return Err(err!(
                        Invalid,
                        "SBUF partition {partition} bytes [{offset}, +{}) out of range",
                        d.len
                    ));
                }
            }
            DmaEndpoint::Psum { partition, offset } => {
                if usize::from(partition) >= PSUM_PARTITIONS
                    || offset as usize + d.len as usize > PSUM_PARTITION_BYTES
                {
                    return Err(err!(
                        Invalid,
                        "PSUM partition {partition} bytes [{offset}, +{}) out of range",
                        d.len
                    ));
                }
            }
            DmaEndpoint::Block(_) => {}
        }
    }
    Ok(())
}

fn validate_block_descriptor(d: &DmaDescriptor, sizes: &[u64]) -> Result<(), Error> {
    let (DmaEndpoint::Block(src), DmaEndpoint::Block(dst)) = (d.src, d.dst) else {
        return Err(err!(
            Invalid,
            "a block descriptor needs block endpoints at both ends"
        ));
    };
    for (b, what) in [(&src, "source"), (&dst, "destination")] {
        validate_block(b, sizes).map_err(|e| err!(Invalid, "{what} block: {}", e.message()))?;
    }
    if src.logical_shape() != dst.logical_shape() {
        let (sr, sc) = src.logical_shape();
        let (dr, dc) = dst.logical_shape();
        return Err(err!(
            Invalid,
            "the source block holds a [{sr}, {sc}] transfer, the destination a [{dr}, {dc}] one"
        ));
    }
    if src.transposed != dst.transposed && src.dtype != dst.dtype {
        return Err(err!(
            Invalid,
            "a transposing descriptor keeps the element type (NKI dma_transpose), {} -> {} casts",
            src.dtype,
            dst.dtype
        ));
    }
    if u64::from(d.len) != src.bytes() {
        return Err(err!(
            Invalid,
            "len {} is not the source block's {} bytes",
            d.len,
            src.bytes()
        ));
    }
    Ok(())
}

fn validate_block(b: &DmaBlock, sizes: &[u64]) -> Result<(), Error> {
    if b.rows == 0 || b.cols == 0 {
        return Err(err!(Invalid, "[{}, {}] is empty", b.rows, b.cols));
    }
    match b.mem {
        MemKind::Hbm => {
            let size = sizes
                .get(b.index as usize)
                .copied()
                .ok_or_else(|| err!(Invalid, "tensor {} does not exist", b.index))?;
            if b.rows > 1 && b.pitch < b.cols {
                return Err(err!(
                    Invalid,
                    "row pitch {} is below the row length {}",
                    b.pitch,
                    b.cols
                ));
            }
            let end = b.hbm_span().and_then(|s| s.checked_add(b.offset));
            if end.is_none_or(|e| e > size) {
                return Err(err!(
                    Invalid,
                    "[{}, {}] {} at byte {} (pitch {}) outside tensor {} of {size} bytes",
                    b.rows,
                    b.cols,
                    b.dtype,
                    b.offset,
                    b.pitch,
                    b.index
                ));
            }
        }
        MemKind::Sbuf | MemKind::Psum => {
            let (parts, bytes) = if b.mem == MemKind::Sbuf {
                (SBUF_PARTITIONS, MAX_SBUF_PARTITION_BYTES)
            } else {
                (PSUM_PARTITIONS, PSUM_PARTITION_BYTES)
            };
            let end = b.offset.checked_add(b.row_bytes());
            if u64::from(b.index) + u64::from(b.rows) > parts as u64
                || end.is_none_or(|e| e > bytes as u64)
            {
                return Err(err!(
                    Invalid,
                    "partitions [{}, +{}) bytes [{}, +{}) out of range",
                    b.index,
                    b.rows,
                    b.offset,
                    b.row_bytes()
                ));
            }
        }
    }
    Ok(())
}
