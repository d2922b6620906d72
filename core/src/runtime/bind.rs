//! Resolving a caller's tensor sets against a model's I/O table, once per call.
//!
//! [`Runtime::resolve_side`] makes one pass over a tensor set, turning each name into its I/O
//! index, then checks the side in libnrt's order — for each model tensor in I/O order, missing
//! or of the wrong size; then names the model does not have — and yields the caller's tensor
//! for every I/O index. Everything below (bindings, clones, copy-back, async jobs, the driver)
//! works on indices; no name is looked up again.

use super::Runtime;
use crate::driver::Driver;
use crate::error::Result;
use crate::host::Host;
use crate::io::{IoTable, TensorUsage};
use crate::tensor::{Tensor, TensorSet};

/// Inline capacity of the per-execution tables (bindings, clones, resolved tensors); models
/// with more I/O tensors than this spill to the heap.
pub(super) const INLINE_IO: usize = 32;

/// A vector that stays on the stack (uninitialised until pushed) up to [`INLINE_IO`] elements.
pub(super) type SmallVec<T> = smallvec::SmallVec<[T; INLINE_IO]>;

/// One side of an execution's I/O: the caller's tensor for every I/O index of the side, in
/// I/O order (complete once [`Runtime::resolve_side`] accepted it). Filled in place by the
/// caller's frame: it holds [`INLINE_IO`] references inline.
pub(super) struct Resolved<'s, 'rt> {
    tensors: SmallVec<Option<&'s Tensor<'rt>>>,
}

impl<'s, 'rt> Resolved<'s, 'rt> {
    #[inline]
    pub(super) fn new() -> Self {
        Self {
            tensors: SmallVec::new(),
        }
    }

    /// `(I/O index, tensor)` in I/O order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, &'s Tensor<'rt>)> + '_ {
        self.tensors
            .as_slice()
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (i as u32, t)))
    }
}

impl<D: Driver, H: Host> Runtime<D, H> {
    /// Resolves the `usage` side of model `id` (I/O table `io`) against `set` into `out`:
    /// every model tensor present with its exact size, no unknown names (`NRT_INVALID` naming
    /// the tensor).
    pub(super) fn resolve_side<'s, 'rt>(
        &self,
        id: u32,
        io: &IoTable,
        set: &'s TensorSet<'rt>,
        usage: TensorUsage,
        out: &mut Resolved<'s, 'rt>,
    ) -> Result<()> {
        let what = usage.as_str();
        let slots = &mut out.tensors;
        for _ in 0..io.len(usage) {
            slots.push(None);
        }
        let mut unknown = None;
        for (name, tensor) in set.iter() {
            match io
                .index_of(usage, name)
                .and_then(|i| slots.as_mut_slice().get_mut(i as usize))
            {
                Some(slot) => *slot = Some(tensor),
                None => {
                    if unknown.is_none() {
                        unknown = Some(name);
                    }
                }
            }
        }
        for (t, slot) in io.tensors(usage).iter().zip(slots.as_slice()) {
            match slot {
                None => {
                    return Err(self.fail(err!(
                        Invalid,
                        "Missing {what} tensor \"{}\" for model {id}",
                        t.name
                    )));
                }
                Some(x) if x.size() != t.size => {
                    return Err(self.fail(err!(
                        Invalid,
                        "The {what} tensor \"{}\" has {} bytes, model {id} expects {}",
                        t.name,
                        x.size(),
                        t.size
                    )));
                }
                Some(_) => {}
            }
        }
        if let Some(name) = unknown {
            return Err(self.fail(err!(
                Invalid,
                "Unknown {what} tensor \"{name}\" for model {id}"
            )));
        }
        Ok(())
    }
}
