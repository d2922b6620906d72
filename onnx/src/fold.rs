//! Host arithmetic on constants: broadcasting, element-wise evaluation, index helpers.

use nrt_kernel::library::reduce::ReduceOp;
use nrt_sim::engine::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

use crate::tensor::{Data, Elem, HostTensor};

/// NumPy broadcasting of two shapes.
pub(crate) fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let db = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// For each element of `out` (row-major), the index of the element of `shape` it reads
/// under broadcasting.
pub(crate) fn broadcast_index(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let off = out.len() - shape.len();
    let st = strides(shape);
    let mut idx = vec![0usize; out.len()];
    let mut res = Vec::with_capacity(n);
    for _ in 0..n {
        let mut src = 0;
        for (d, &i) in idx.iter().enumerate().skip(off) {
            if shape[d - off] != 1 {
                src += i * st[d - off];
            }
        }
        res.push(src);
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    res
}

/// `a op b` with broadcasting, in f64 (float tensors) or i64 (when both are integer).
pub(crate) fn binary(
    a: &HostTensor,
    b: &HostTensor,
    f: impl Fn(f64, f64) -> f64,
    g: impl Fn(i64, i64) -> i64,
) -> Option<HostTensor> {
    let shape = broadcast(&a.shape, &b.shape)?;
    let ia = broadcast_index(&a.shape, &shape);
    let ib = broadcast_index(&b.shape, &shape);
    Some(match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) => HostTensor::ints(
            a.elem,
            shape,
            ia.iter().zip(&ib).map(|(&i, &j)| g(x[i], y[j])).collect(),
        ),
        _ => {
            let (x, y) = (a.as_f64(), b.as_f64());
            let elem = if a.elem.is_float() { a.elem } else { b.elem };
            HostTensor::floats(
                elem,
                shape,
                ia.iter().zip(&ib).map(|(&i, &j)| f(x[i], y[j])).collect(),
            )
        }
    })
}

/// Rounds `v` to the precision of `elem` (float types) or truncates (integer types).
pub(crate) fn cast(t: &HostTensor, to: Elem) -> HostTensor {
    let data = if to.is_float() {
        let v = t.as_f64();
        Data::F(match to {
            Elem::F32 => v.iter().map(|&x| f64::from(x as f32)).collect(),
            // Through fp32 (RNE both times), as the device converts.
            Elem::F16 => v
                .iter()
                .map(|&x| f64::from(f16_to_f32(f32_to_f16(x as f32))))
                .collect(),
            Elem::Bf16 => v
                .iter()
                .map(|&x| f64::from(bf16_to_f32(f32_to_bf16(x as f32))))
                .collect(),
            _ => v,
        })
    } else if to == Elem::Bool {
        Data::I(t.as_f64().iter().map(|&x| i64::from(x != 0.0)).collect())
    } else {
        Data::I(t.as_i64())
    };
    HostTensor {
        elem: to,
        shape: t.shape.clone(),
        data,
    }
}

/// Gathers `x` along `axis` at `idx` (already non-negative and in range).
pub(crate) fn gather(
    x: &HostTensor,
    axis: usize,
    idx: &[usize],
    idx_shape: &[usize],
) -> HostTensor {
    let outer: usize = x.shape[..axis].iter().product();
    let inner: usize = x.shape[axis + 1..].iter().product();
    let n = x.shape[axis];
    let mut shape = x.shape[..axis].to_vec();
    shape.extend_from_slice(idx_shape);
    shape.extend_from_slice(&x.shape[axis + 1..]);
    let pick = |o: usize, i: usize, k: usize| (o * n + i) * inner + k;
    let mut order = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &i in idx {
            for k in 0..inner {
                order.push(pick(o, i, k));
            }
        }
    }
    take(x, shape, &order)
}

/// A tensor of `shape` whose elements are `x`'s at `order`.
pub(crate) fn take(x: &HostTensor, shape: Vec<usize>, order: &[usize]) -> HostTensor {
    let data = match &x.data {
        Data::F(v) => Data::F(order.iter().map(|&i| v[i]).collect()),
        Data::I(v) => Data::I(order.iter().map(|&i| v[i]).collect()),
    };
    HostTensor {
        elem: x.elem,
        shape,
        data,
    }
}

/// The element order of `x` permuted by `perm` (output row-major).
pub(crate) fn permute_order(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let st = strides(shape);
    let n: usize = out.iter().product();
    let mut idx = vec![0usize; out.len()];
    let mut order = Vec::with_capacity(n);
    for _ in 0..n {
        order.push(idx.iter().zip(perm).map(|(&i, &p)| i * st[p]).sum());
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    (out, order)
}

/// Normalises a possibly negative axis against `rank`.
pub(crate) fn axis(a: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if a < 0 { a + r } else { a };
    (0..r).contains(&a).then_some(a as usize)
}

/// A reduction of `t` over `axes` (sorted, distinct) to the keep-dims shape, then `out_shape`
/// by `op`: in f64 rounded to the element type (floats) or in
/// i64 (integers, sums wrapping). An empty reduction gives the operation's identity: 0 for
/// a sum, NaN for a mean, −∞ / +∞ (the type's extremes for integers) for max / min.
pub(crate) fn reduce(
    t: &HostTensor,
    axes: &[usize],
    op: ReduceOp,
    out_shape: Vec<usize>,
) -> HostTensor {
    let keep: Vec<usize> = t
        .shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let n_out: usize = keep.iter().product();
    let (ks, is) = (strides(&keep), strides(&t.shape));
    let target = |flat: usize| -> usize {
        (0..t.shape.len())
            .filter(|i| !axes.contains(i))
            .map(|i| (flat / is[i]) % t.shape[i] * ks[i])
            .sum()
    };
    let count: usize = axes.iter().map(|&a| t.shape[a]).product();
    match &t.data {
        Data::I(v) => {
            let (lo, hi) = t.elem.int_range().unwrap_or((i64::MIN, i64::MAX));
            let init = match op {
                ReduceOp::Max => lo,
                ReduceOp::Min => hi,
                ReduceOp::Sum | ReduceOp::Mean => 0,
            };
            let mut acc = vec![init; n_out];
            for (flat, &x) in v.iter().enumerate() {
                let a = &mut acc[target(flat)];
                *a = match op {
                    ReduceOp::Max => (*a).max(x),
                    ReduceOp::Min => (*a).min(x),
                    ReduceOp::Sum | ReduceOp::Mean => a.wrapping_add(x),
                };
            }
            if op == ReduceOp::Mean {
                let c = count.max(1) as i64;
                acc.iter_mut().for_each(|a| *a /= c);
            }
            HostTensor::ints(t.elem, out_shape, acc)
        }
        Data::F(v) => {
            let init = match op {
                ReduceOp::Max => f64::NEG_INFINITY,
                ReduceOp::Min => f64::INFINITY,
                ReduceOp::Sum | ReduceOp::Mean => 0.0,
            };
            let mut acc = vec![init; n_out];
            for (flat, &x) in v.iter().enumerate() {
                let a = &mut acc[target(flat)];
                *a = match op {
                    ReduceOp::Max if x.is_nan() || x > *a => x,
                    ReduceOp::Min if x.is_nan() || x < *a => x,
                    ReduceOp::Max | ReduceOp::Min => *a,
                    ReduceOp::Sum | ReduceOp::Mean => *a + x,
                };
            }
            if op == ReduceOp::Mean {
                acc.iter_mut().for_each(|a| *a /= count as f64);
            }
            cast(&HostTensor::floats(t.elem, out_shape, acc), t.elem)
        }
    }
}
