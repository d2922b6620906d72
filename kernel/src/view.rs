//! Views: a strided window onto an HBM tensor or an on-chip tile — `offset + Σ iₖ·strideₖ`
//! in the base's linear element space — and the operations that make new views (slice, step,
//! select, reshape, permute, broadcast). A view never copies data; operations turn it into
//! access patterns or DMA descriptors.
//!
//! On-chip views keep the partition dimension first: a tile's linear space is
//! `partition × pitch + element`, so dimension 0 of a tile view has stride `pitch` (one
//! partition) and the others address elements inside a partition.

use core::fmt;
use core::ops::{Bound, RangeBounds};

use nrt_core::{Error, err};
use nrt_sim::engine::DType;

use crate::handle::{Base, Memory};

/// One dimension of a view: `size` elements `stride` elements apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dim {
    pub(crate) size: usize,
    pub(crate) stride: usize,
}

/// A strided view of an HBM tensor or an SBUF/PSUM tile: what operations read and write.
///
/// Made from a [`Tensor`](crate::Tensor) or [`Tile`](crate::Tile) (both dereference to their
/// full view) and narrowed with [`View::slice`], [`View::slice_step`], [`View::select`],
/// [`View::reshape`], [`View::permute`], [`View::broadcast`]. Each returns a new view or an
/// `NRT_INVALID` error naming the tensor or tile.
#[derive(Clone, Debug)]
pub struct View {
    pub(crate) base: Base,
    pub(crate) dtype: DType,
    /// First element, in the base's linear element space.
    pub(crate) offset: usize,
    pub(crate) dims: Vec<Dim>,
}

impl View {
    /// The row-major view of a whole base of `shape`.
    pub(crate) fn full(base: Base, dtype: DType, shape: &[usize]) -> View {
        let mut dims = vec![Dim { size: 0, stride: 0 }; shape.len()];
        let mut stride = 1usize;
        for (d, &s) in dims.iter_mut().zip(shape).rev() {
            *d = Dim { size: s, stride };
            stride = stride.saturating_mul(s);
        }
        if base.mem.is_on_chip() {
            if let Some(d) = dims.first_mut() {
                d.stride = base.pitch;
            }
        }
        View {
            base,
            dtype,
            offset: 0,
            dims,
        }
    }

    /// The shape (sizes of the dimensions, outermost first).
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().map(|d| d.size).collect()
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements (saturating).
    pub fn elems(&self) -> usize {
        self.dims
            .iter()
            .fold(1usize, |a, d| a.saturating_mul(d.size))
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The memory the view addresses.
    pub fn memory(&self) -> Memory {
        self.base.mem
    }

    /// Name of the tensor or tile.
    pub fn name(&self) -> &str {
        &self.base.name
    }

    /// On-chip views: partitions covered (the size of dimension 0). HBM views: the size of
    /// dimension 0 (1 for a scalar).
    pub fn partitions(&self) -> usize {
        self.dims.first().map_or(1, |d| d.size)
    }

    /// Elements per partition of an on-chip view (the product of the free dimensions); for
    /// an HBM view, the elements of one index of dimension 0.
    pub fn free_elems(&self) -> usize {
        self.dims
            .iter()
            .skip(1)
            .fold(1usize, |a, d| a.saturating_mul(d.size))
    }

    /// A description for messages: `SBUF tile 'x' [128, 512] fp32`.
    pub fn describe(&self) -> String {
        format!("{} {} {}", self.base, shape_str(&self.shape()), self.dtype)
    }

    fn dim_check(&self, dim: usize) -> Result<(), Error> {
        if dim >= self.dims.len() {
            return Err(err!(
                Invalid,
                "view of {}: dimension {dim} is out of range for rank {}",
                self.base,
                self.dims.len()
            ));
        }
        Ok(())
    }

    /// Elements `range` of dimension `dim` (the dimension keeps its stride).
    pub fn slice(&self, dim: usize, range: impl RangeBounds<usize>) -> Result<View, Error> {
        self.slice_step(dim, range, 1)
    }

    /// Every `step`-th element of `range` of dimension `dim` (`step` ≥ 1). Stepping the
    /// partition dimension of an on-chip view is refused (partitions are contiguous).
    pub fn slice_step(
        &self,
        dim: usize,
        range: impl RangeBounds<usize>,
        step: usize,
    ) -> Result<View, Error> {
        self.dim_check(dim)?;
        let size = self.dims.get(dim).map_or(0, |d| d.size);
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => size,
        };
        if start >= end || end > size {
            return Err(err!(
                Invalid,
                "view of {}: range {start}..{end} of dimension {dim} (size {size}) is empty or \
                 out of bounds",
                self.base
            ));
        }
        if step == 0 {
            return Err(err!(
                Invalid,
                "view of {}: step 0 on dimension {dim}",
                self.base
            ));
        }
        if step > 1 && dim == 0 && self.base.mem.is_on_chip() {
            return Err(err!(
                Invalid,
                "view of {}: the partition dimension cannot be stepped (step {step}); \
                 partitions of an access are contiguous",
                self.base
            ));
        }
        let mut v = self.clone();
        if let Some(d) = v.dims.get_mut(dim) {
            v.offset += start * d.stride;
            d.size = (end - start).div_ceil(step);
            d.stride *= step;
        }
        Ok(v)
    }

    /// Index `index` of dimension `dim`. HBM views drop the dimension. On-chip views stay at
    /// least two-dimensional, as in NKI: selecting a partition keeps dimension 0 at size 1,
    /// and selecting in the only free dimension keeps it at size 1.
    pub fn select(&self, dim: usize, index: usize) -> Result<View, Error> {
        let v = self.slice(dim, index..=index)?;
        let keep = v.base.mem.is_on_chip() && (dim == 0 || v.dims.len() <= 2);
        let mut v = v;
        if !keep {
            v.dims.remove(dim);
        }
        Ok(v)
    }

    /// The same elements in another row-major shape. The view must be contiguous (on-chip:
    /// contiguous inside each partition, and the partition dimension is kept as
    /// `shape[0]`).
    pub fn reshape(&self, shape: &[usize]) -> Result<View, Error> {
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(self.elems()) {
            return Err(err!(
                Invalid,
                "view of {}: {} elements cannot take shape {}",
                self.base,
                self.elems(),
                shape_str(shape)
            ));
        }
        let on_chip = self.base.mem.is_on_chip();
        let (fixed, rest, new_rest) = if on_chip {
            if shape.first() != Some(&self.partitions()) || shape.len() < 2 {
                return Err(err!(
                    Invalid,
                    "view of {}: reshape to {} must keep the partition dimension {} first and \
                     at least one free dimension",
                    self.base,
                    shape_str(shape),
                    self.partitions()
                ));
            }
            (1, &self.dims[1..], &shape[1..])
        } else {
            (0, &self.dims[..], shape)
        };
        // Contiguous: every dimension of size > 1 steps by the product of the sizes inside it.
        let mut expect = 1usize;
        for d in rest.iter().rev() {
            if d.size > 1 && d.stride != expect {
                return Err(err!(
                    Invalid,
                    "view of {}: reshape needs a contiguous view{}",
                    self.base,
                    if on_chip {
                        " inside each partition"
                    } else {
                        ""
                    }
                ));
            }
            expect = expect.saturating_mul(d.size);
        }
        let mut dims: Vec<Dim> = self.dims.iter().take(fixed).copied().collect();
        let mut tail = vec![Dim { size: 0, stride: 0 }; new_rest.len()];
        let mut stride = 1usize;
        for (d, &s) in tail.iter_mut().zip(new_rest).rev() {
            *d = Dim { size: s, stride };
            stride = stride.saturating_mul(s);
        }
        dims.extend(tail);
        Ok(View {
            base: self.base.clone(),
            dtype: self.dtype,
            offset: self.offset,
            dims,
        })
    }

    /// The dimensions in the order `order` (a permutation of `0..rank`). On-chip views keep
    /// the partition dimension first.
    pub fn permute(&self, order: &[usize]) -> Result<View, Error> {
        let r = self.dims.len();
        let mut seen = vec![false; r];
        let ok = order.len() == r
            && order.iter().all(|&i| {
                let fresh = seen.get(i).is_some_and(|s| !s);
                if let Some(s) = seen.get_mut(i) {
                    *s = true;
                }
                fresh
            });
        if !ok {
            return Err(err!(
                Invalid,
                "view of {}: {order:?} is not a permutation of the {r} dimensions",
                self.base
            ));
        }
        if self.base.mem.is_on_chip() && order.first() != Some(&0) {
            return Err(err!(
                Invalid,
                "view of {}: the partition dimension must stay first",
                self.base
            ));
        }
        let mut v = self.clone();
        v.dims = order
            .iter()
            .filter_map(|&i| self.dims.get(i).copied())
            .collect();
        Ok(v)
    }

    /// Repeats dimension `dim` (of size 1) `size` times with stride 0. Not for the partition
    /// dimension of an on-chip view; a broadcast view can be read, not written.
    pub fn broadcast(&self, dim: usize, size: usize) -> Result<View, Error> {
        self.dim_check(dim)?;
        let others = self.elems();
        if self.dims.get(dim).map(|d| d.size) != Some(1)
            || size == 0
            || others.checked_mul(size).is_none_or(|n| n > 1 << 40)
        {
            return Err(err!(
                Invalid,
                "view of {}: only a dimension of size 1 can be broadcast, to at least 1 and at \
                 most 2^40 elements in all (dimension {dim} has size {}, to {size})",
                self.base,
                self.dims.get(dim).map_or(0, |d| d.size)
            ));
        }
        if dim == 0 && self.base.mem.is_on_chip() {
            return Err(err!(
                Invalid,
                "view of {}: the partition dimension cannot be broadcast",
                self.base
            ));
        }
        let mut v = self.clone();
        if let Some(d) = v.dims.get_mut(dim) {
            *d = Dim { size, stride: 0 };
        }
        Ok(v)
    }

    /// Dimensions of size other than 1 (a view's element order does not depend on the
    /// others; a size-0 dimension stays, so empty views keep an empty shape).
    pub(crate) fn squeezed(&self) -> Vec<Dim> {
        self.dims.iter().copied().filter(|d| d.size != 1).collect()
    }

    /// The shape without its size-1 dimensions.
    pub(crate) fn squeezed_shape(&self) -> Vec<usize> {
        self.squeezed().iter().map(|d| d.size).collect()
    }

    /// Whether some element is addressed twice (a zero stride on a dimension of size > 1, or
    /// overlapping strides).
    pub(crate) fn has_repeats(&self) -> bool {
        if self.elems() == 0 {
            return false;
        }
        let mut dims = self.squeezed();
        dims.sort_by_key(|d| d.stride);
        let mut span = 1usize;
        for d in dims {
            if d.stride < span {
                return true;
            }
            span = d.stride.saturating_mul(d.size - 1).saturating_add(span);
        }
        false
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl From<&View> for View {
    fn from(v: &View) -> View {
        v.clone()
    }
}

/// `[128, 512]`.
pub(crate) fn shape_str(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::handle::Placement;
    use std::sync::Arc;

    fn tile(shape: &[usize]) -> View {
        let pitch = shape[1..].iter().product();
        View::full(
            Base {
                kernel: 1,
                mem: Memory::Sbuf,
                id: 0,
                name: Arc::from("t"),
                pitch,
                placement: Placement::default(),
            },
            DType::F32,
            shape,
        )
    }

    fn hbm(shape: &[usize]) -> View {
        View::full(
            Base {
                kernel: 1,
                mem: Memory::Hbm,
                id: 0,
                name: Arc::from("a"),
                pitch: 0,
                placement: Placement::default(),
            },
            DType::F32,
            shape,
        )
    }

    #[test]
    fn slicing_and_selecting() {
        let t = tile(&[128, 4, 64]);
        assert_eq!(t.dims[0].stride, 256);
        let u = t.select(1, 2).unwrap();
        assert_eq!(u.shape(), vec![128, 64]);
        assert_eq!(u.offset, 128);
        let w = u.select(1, 3).unwrap();
        assert_eq!(w.shape(), vec![128, 1]);
        let p = t.select(0, 5).unwrap();
        assert_eq!(p.shape(), vec![1, 4, 64]);
        assert_eq!(p.offset, 5 * 256);
        let s = t.slice_step(2, 1..64, 2).unwrap();
        assert_eq!(s.shape(), vec![128, 4, 32]);
        assert_eq!(s.dims[2].stride, 2);
        let e = t.slice(0, 0..129).unwrap_err();
        assert_eq!(
            e.message(),
            "view of SBUF tile 't': range 0..129 of dimension 0 (size 128) is empty or out of \
             bounds"
        );
        assert!(t.slice_step(0, .., 2).is_err());
        assert!(t.slice(3, ..).is_err());
    }

    #[test]
    fn reshape_permute_broadcast() {
        let a = hbm(&[6, 8]);
        let r = a.reshape(&[3, 16]).unwrap();
        assert_eq!(r.shape(), vec![3, 16]);
        assert!(a.slice(1, 0..4).unwrap().reshape(&[24]).is_err());
        let t = a.permute(&[1, 0]).unwrap();
        assert_eq!(
            t.dims,
            vec![Dim { size: 8, stride: 1 }, Dim { size: 6, stride: 8 }]
        );
        assert!(a.permute(&[0, 0]).is_err());
        let v = hbm(&[1, 8]).broadcast(0, 4).unwrap();
        assert!(v.has_repeats());
        assert!(!a.has_repeats());
        assert!(!t.has_repeats());
        let tt = tile(&[128, 8, 2]);
        assert_eq!(tt.reshape(&[128, 16]).unwrap().shape(), vec![128, 16]);
        assert!(tt.reshape(&[64, 32]).is_err());
        assert!(tt.permute(&[1, 0, 2]).is_err());
        assert!(tt.broadcast(0, 2).is_err());
    }
}
