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
    pattern_of(v, merge(free_dims(v)))
}

/// The access pattern of an on-chip view whose free dimensions `1..split` and `split..` are
/// merged separately, the second group innermost, and the number of pattern dimensions of
/// that group (at least 1: a group of size-1 dimensions becomes one dimension of size 1).
/// What `TensorReduce` needs: its reduced axes are the innermost pattern dimensions.
pub(crate) fn access_pattern_split(v: &View, split: usize) -> Result<(AccessPattern, u8), Error> {
    let free = free_dims(v);
    let cut = split.saturating_sub(1).min(free.len());
    let (outer, inner) = free.split_at(cut);
    let mut dims = merge(outer);
    let mut tail = merge(inner);
    if tail.is_empty() {
        tail.push(Dim { size: 1, stride: 1 });
    }
    let n = tail.len();
    dims.extend(tail);
    let ap = pattern_of(v, dims)?;
    Ok((ap, n as u8))
}

/// The access pattern of an on-chip view addressed as free dimensions of `sizes` (outermost
/// first; their product is the view's elements per partition), iterating its elements in
/// the same order — a reshape of the free part that copies nothing. Size-1 entries of
/// `sizes` are dropped; returns the pattern and the indices into `sizes` of the dimensions
/// it kept. `None` when the view's layout cannot be split that way (a dimension of `sizes`
/// would straddle two of the view's that do not step contiguously).
pub(crate) fn access_pattern_shaped(
    v: &View,
    sizes: &[usize],
) -> Result<Option<(AccessPattern, Vec<usize>)>, Error> {
    let Some(strides) = restride(&merge(free_dims(v)), sizes) else {
        return Ok(None);
    };
    let kept: Vec<usize> = (0..sizes.len())
        .filter(|&i| sizes.get(i).is_some_and(|&s| s != 1))
        .collect();
    let dims = kept
        .iter()
        .filter_map(|&i| {
            Some(Dim {
                size: *sizes.get(i)?,
                stride: *strides.get(i)?,
            })
        })
        .collect();
    Ok(Some((pattern_of(v, dims)?, kept)))
}

/// The free dimensions of an on-chip view (all but the partition dimension).
fn free_dims(v: &View) -> &[Dim] {
    &v.dims[1.min(v.dims.len())..]
}

/// The strides giving dimensions of `sizes` over the elements of `dims` (merged, no size-1
/// dimension) in the same row-major order; size-1 entries get stride 0. `None` when not
/// expressible (or the element counts differ).
fn restride(dims: &[Dim], sizes: &[usize]) -> Option<Vec<usize>> {
    let total: usize = dims.iter().map(|d| d.size).product();
    if sizes.iter().try_fold(1usize, |a, &s| a.checked_mul(s)) != Some(total) {
        return None;
    }
    let mut strides = vec![0usize; sizes.len()];
    // Walk both lists from the innermost end: each view dimension is consumed by a run of
    // target dimensions that divide it exactly.
    let mut t = sizes.len();
    for d in dims.iter().rev() {
        let mut left = d.size;
        let mut stride = d.stride;
        while left > 1 {
            t = t.checked_sub(1)?;
            let s = *sizes.get(t)?;
            if s == 1 {
                continue;
            }
            if left % s != 0 {
                return None;
            }
            *strides.get_mut(t)? = stride;
            stride = stride.checked_mul(s)?;
            left /= s;
        }
    }
    // Whatever remains of `sizes` (outermost) must be size 1.
    sizes.get(..t)?.iter().all(|&s| s == 1).then_some(strides)
}

/// The access pattern of an on-chip view with the given free dimensions.
fn pattern_of(v: &View, free: Vec<Dim>) -> Result<AccessPattern, Error> {
    let Some(space) = v.base.mem.space() else {
        return Err(err!(Invalid, "{} is not in SBUF or PSUM", v.base));
    };
    let pitch = v.base.pitch.max(1);
    let partitions = v.partitions();
    let start = v.base.placement.start_partition + v.offset / pitch;
    let elem = v.offset % pitch;
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
pub(crate) fn run_length(v: &View, dims: &[Dim]) -> usize {
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
pub(crate) fn linear(v: &View, dims: &[Dim], mut index: usize) -> usize {
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

pub(crate) fn gcd(a: usize, b: usize) -> usize {
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
