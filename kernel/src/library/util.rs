//! Shared checks and tiling helpers of the library kernels.

use nrt_core::{Error, err};
use nrt_sim::engine::{DType, Program, TensorKind};

use crate::handle::Memory;
use crate::kernel::Kernel;
use crate::pool::TilePool;
use crate::tensors::Tensor;
use crate::view::View;

/// Partitions of an on-chip tile.
pub(crate) const P: usize = 128;

/// Requires `v` to be a view of an HBM tensor of `k`.
pub(crate) fn hbm(k: &Kernel, v: &View, f: &str, role: &str) -> Result<(), Error> {
    k.check(v, f, role)?;
    if v.base.mem != Memory::Hbm {
        return Err(err!(
            Invalid,
            "{f}: {role} must be a view of an HBM tensor, not {}",
            v.base
        ));
    }
    Ok(())
}

/// Requires `v` to be a view of an HBM output or scratch tensor of `k`.
pub(crate) fn hbm_out(k: &Kernel, v: &View, f: &str, role: &str) -> Result<(), Error> {
    hbm(k, v, f, role)?;
    match k.tensor_kind(v.base.id) {
        Some(TensorKind::Output | TensorKind::Scratch) => Ok(()),
        _ => Err(err!(
            Invalid,
            "{f}: {role} {} must be an output or scratch tensor",
            v.base
        )),
    }
}

/// Requires a float dtype.
pub(crate) fn float(v: &View, f: &str, role: &str) -> Result<(), Error> {
    if !v.dtype.is_float() {
        return Err(err!(
            Invalid,
            "{f}: {role} {} must have a float dtype",
            v.describe()
        ));
    }
    Ok(())
}

/// `v` (rank ≥ 1, contiguous) as `[rows, last dimension]`.
pub(crate) fn as_rows(v: &View, f: &str, role: &str) -> Result<View, Error> {
    let shape = v.shape();
    let Some((&c, lead)) = shape.split_last() else {
        return Err(err!(Invalid, "{f}: {role} {} has rank 0", v.describe()));
    };
    let r: usize = lead.iter().product();
    v.reshape(&[r, c]).map_err(|e| {
        err!(
            Invalid,
            "{f}: {role} {} must be contiguous (its rows are read as [{r}, {c}]): {}",
            v.describe(),
            e.message()
        )
    })
}

/// `(start, len)` of the blocks of at most `step` covering `0..n`.
pub(crate) fn blocks(n: usize, step: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n)
        .step_by(step.max(1))
        .map(move |s| (s, step.min(n - s)))
}

/// A kernel `name` with inputs `(name, dtype, shape)` and one output `out`, filled by `f`
/// (given the output tensor and the inputs in order), built.
pub(crate) fn build_with(
    name: &str,
    inputs: &[(&str, DType, &[usize])],
    out: (&str, DType, &[usize]),
    f: impl FnOnce(&mut Kernel, &Tensor, &[Tensor]) -> Result<(), Error>,
) -> Result<Program, Error> {
    let mut k = Kernel::new(name);
    let ins = inputs
        .iter()
        .map(|(n, d, s)| k.input(n, *d, s))
        .collect::<Result<Vec<_>, _>>()?;
    let o = k.output(out.0, out.1, out.2)?;
    f(&mut k, &o, &ins)?;
    k.build()
}

/// Frees `pools` (allocated outside any scope) and returns `r`, or the first error freeing.
pub(crate) fn release<T, const N: usize>(
    k: &mut Kernel,
    pools: [TilePool; N],
    r: Result<T, Error>,
) -> Result<T, Error> {
    let mut freed = Ok(());
    for p in pools {
        let f = p.free(k);
        if freed.is_ok() {
            freed = f;
        }
    }
    let v = r?;
    freed.map(|()| v)
}
