//! From views to the engine's addressing: an on-chip view becomes an [`AccessPattern`]
//! (partition range + up to four merged free dimensions), any view becomes DMA endpoints, and
//! a pair of views becomes the contiguous DMA descriptors that copy one into the other.

use nrt_core::{Error, err};
use nrt_sim::engine::{AccessPattern, DmaDescriptor, DmaEndpoint, MAX_DIMS};

use crate::handle::Memory;
use crate::view::{Dim, View, shape_str};

/// The access pattern of an on-chip view (validated against the ISA's rules: partition
/// start, free-size limits, bounds). The message names the view.
pub(crate) fn access_pattern(v: &View) -> Result<AccessPattern, Error> {
    let Some(space) = v.base.mem.space() else {
        return Err(err!(Invalid, "{} is not in SBUF or PSUM", v.base));
    };
    let pitch = v.base.pitch.max(1);
    let partitions = v.partitions();
    let start = v.base.placement.start_partition + v.offset / pitch;
    let elem = v.offset % pitch;
    let free = merge(&v.dims[1.min(v.dims.len())..]);
    if free.len() > MAX_DIMS {
        return Err(err!(
            Invalid,
            "{} needs {} free dimensions after merging; an access pattern has at most \
             {MAX_DIMS}",
            v.base,
            free.len()
        ));
    }
    let mut dims = Vec::with_capacity(free.len().max(1));
    for d in &free {
        let size = u16::try_from(d.size).map_err(|_| {
            err!(
                Invalid,
                "{}: a free dimension of {} elements exceeds 65535",
                v.base,
                d.size
            )
        })?;
        let stride = i16::try_from(d.stride).map_err(|_| {
            err!(
                Invalid,
                "{}: a stride of {} elements exceeds 32767",
                v.base,
                d.stride
            )
        })?;
        dims.push((size, stride));
    }
    if dims.is_empty() {
        dims.push((1, 1));
    }
    let offset = v.base.placement.offset + elem * v.dtype.size();
    let (Ok(start), Ok(parts), Ok(offset)) = (
        u8::try_from(start),
        u8::try_from(partitions),
        u32::try_from(offset),
    ) else {
        return Err(err!(
            Invalid,
            "{}: partitions [{start}, {}) or byte offset {offset} out of range",
            v.base,
            start + partitions
        ));
    };
    let ap = AccessPattern::new(space, v.dtype, start, parts, offset, &dims);
    ap.validate(&v.describe())?;
    Ok(ap)
}

/// Merges adjacent dimensions that step contiguously (`outer.stride == inner.size ×
/// inner.stride`) and drops dimensions of size 1.
fn merge(dims: &[Dim]) -> Vec<Dim> {
    let mut out: Vec<Dim> = Vec::new();
    for d in dims.iter().filter(|d| d.size > 1) {
        match out.last_mut() {
            Some(o) if o.stride == d.size * d.stride => {
                o.size *= d.size;
                o.stride = d.stride;
            }
            _ => out.push(*d),
        }
    }
    out
}

/// The DMA endpoint of the element at linear position `lin` of a view's base.
fn endpoint(v: &View, lin: usize) -> Option<DmaEndpoint> {
    let es = v.dtype.size();
    match v.base.mem {
        Memory::Hbm => Some(DmaEndpoint::Hbm {
            tensor: v.base.id,
            offset: (lin * es) as u64,
        }),
        Memory::Sbuf | Memory::Psum => {
            let pitch = v.base.pitch.max(1);
            let partition = u8::try_from(v.base.placement.start_partition + lin / pitch).ok()?;
            let offset = u32::try_from(v.base.placement.offset + (lin % pitch) * es).ok()?;
            Some(if v.base.mem == Memory::Sbuf {
                DmaEndpoint::Sbuf { partition, offset }
            } else {
                DmaEndpoint::Psum { partition, offset }
            })
        }
    }
}

/// Elements that follow each other in memory at the innermost end of the (squeezed)
/// dimensions: the longest contiguous run every run of the view is a multiple of. On-chip
/// runs never cross a partition.
fn run_length(v: &View, dims: &[Dim]) -> usize {
    let mut run = 1usize;
    for d in dims.iter().rev() {
        let is_partition = v.base.mem.is_on_chip() && d.stride == v.base.pitch && d.stride > 0;
        if is_partition || d.stride != run {
            break;
        }
        run *= d.size;
    }
    run
}

/// The linear position of element `index` (row-major over `dims`) of a view.
fn linear(v: &View, dims: &[Dim], mut index: usize) -> usize {
    let mut lin = v.offset;
    for d in dims.iter().rev() {
        lin += (index % d.size) * d.stride;
        index /= d.size;
    }
    lin
}

/// Descriptors copying every element of `src` to the element of `dst` at the same position
/// (row-major over the shapes without their size-1 dimensions, which must be equal), merged
/// into maximal contiguous runs. The dtypes must be equal (checked by the caller).
pub(crate) fn copy_descriptors(dst: &View, src: &View) -> Result<Vec<DmaDescriptor>, Error> {
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
    let total = dst.elems();
    let es = dst.dtype.size();
    let chunk = gcd(run_length(dst, &dd), run_length(src, &sd)).max(1);
    let mut out: Vec<DmaDescriptor> = Vec::new();
    let mut e = 0usize;
    while e < total {
        let (Some(s), Some(d)) = (
            endpoint(src, linear(src, &sd, e)),
            endpoint(dst, linear(dst, &dd, e)),
        ) else {
            return Err(err!(
                Invalid,
                "dst {} or src {} addresses outside its memory",
                dst.describe(),
                src.describe()
            ));
        };
        let len = u32::try_from(chunk * es).map_err(|_| {
            err!(
                Invalid,
                "a contiguous run of {} bytes is too long",
                chunk * es
            )
        })?;
        match out.last_mut() {
            Some(prev) if follows(&prev.src, prev.len, &s) && follows(&prev.dst, prev.len, &d) => {
                match prev.len.checked_add(len) {
                    Some(l) => prev.len = l,
                    None => out.push(DmaDescriptor {
                        src: s,
                        dst: d,
                        len,
                    }),
                }
            }
            _ => out.push(DmaDescriptor {
                src: s,
                dst: d,
                len,
            }),
        }
        e += chunk;
    }
    Ok(out)
}

/// Whether `next` starts right where `len` bytes from `prev` end (same tensor or partition).
fn follows(prev: &DmaEndpoint, len: u32, next: &DmaEndpoint) -> bool {
    match (*prev, *next) {
        (
            DmaEndpoint::Hbm { tensor, offset },
            DmaEndpoint::Hbm {
                tensor: t2,
                offset: o2,
            },
        ) => tensor == t2 && offset + u64::from(len) == o2,
        (
            DmaEndpoint::Sbuf { partition, offset },
            DmaEndpoint::Sbuf {
                partition: p2,
                offset: o2,
            },
        )
        | (
            DmaEndpoint::Psum { partition, offset },
            DmaEndpoint::Psum {
                partition: p2,
                offset: o2,
            },
        ) => partition == p2 && u64::from(offset) + u64::from(len) == u64::from(o2),
        _ => false,
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::handle::{Base, Placement};
    use nrt_sim::engine::{DType, Space};
    use std::sync::Arc;

    fn base(mem: Memory, pitch: usize, placement: Placement) -> Base {
        Base {
            kernel: 1,
            mem,
            id: 3,
            name: Arc::from("x"),
            pitch,
            placement,
        }
    }

    #[test]
    fn tile_views_become_access_patterns() {
        let p = Placement {
            start_partition: 0,
            offset: 1024,
        };
        let t = View::full(base(Memory::Sbuf, 512, p), DType::F32, &[128, 4, 128]);
        let ap = access_pattern(&t).unwrap();
        assert_eq!(ap, AccessPattern::sbuf(DType::F32, 0, 128, 1024, 512));
        let s = t.slice(0, 64..96).unwrap().slice(2, 8..16).unwrap();
        let ap = access_pattern(&s).unwrap();
        assert_eq!(
            ap,
            AccessPattern::new(
                Space::Sbuf,
                DType::F32,
                64,
                32,
                1024 + 32,
                &[(4, 128), (8, 1)]
            )
        );
        let bad = t.slice(0, 16..48).unwrap();
        assert!(access_pattern(&bad).is_err());
    }

    #[test]
    fn descriptors_merge_runs() {
        let t = View::full(
            base(Memory::Sbuf, 64, Placement::default()),
            DType::F32,
            &[4, 64],
        );
        let h = View::full(
            base(Memory::Hbm, 0, Placement::default()),
            DType::F32,
            &[4, 64],
        );
        let d = copy_descriptors(&t, &h).unwrap();
        assert_eq!(d.len(), 4);
        assert_eq!(d[1].len, 256);
        assert_eq!(
            d[1].src,
            DmaEndpoint::Hbm {
                tensor: 3,
                offset: 256
            }
        );
        assert_eq!(
            d[1].dst,
            DmaEndpoint::Sbuf {
                partition: 1,
                offset: 0
            }
        );
        // A transposed HBM view: one element per descriptor.
        let ht = View::full(
            base(Memory::Hbm, 0, Placement::default()),
            DType::F32,
            &[64, 4],
        )
        .permute(&[1, 0])
        .unwrap();
        let d = copy_descriptors(&t, &ht).unwrap();
        assert_eq!(d.len(), 256);
        // HBM -> HBM contiguous merges into one descriptor.
        let d = copy_descriptors(&h, &h).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].len, 1024);
    }
}
