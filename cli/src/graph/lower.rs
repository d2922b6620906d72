//! Lowering one graph op into the kernel through `nrt_kernel::library` (matmul, transpose,
//! element-wise binary ops, activations, softmax, layer/RMS norm, reductions, attention,
//! conv2d, pooling, and the copy a reshaped model output needs). Every op reads its inputs
//! from HBM views and writes its output to an HBM view (a kernel output or scratch tensor);
//! the kernel orders them.

use nrt_core::{Error, err};
use nrt_kernel::library::activation::{activation, copy};
use nrt_kernel::library::attention::{AttentionConfig, multi_head_attention};
use nrt_kernel::library::conv::conv2d;
use nrt_kernel::library::elementwise::binary;
use nrt_kernel::library::matmul::{MatmulOpts, matmul};
use nrt_kernel::library::norm::{layernorm, rmsnorm};
use nrt_kernel::library::pool::{Pool2dConfig, PoolKind, pool2d};
use nrt_kernel::library::reduce::reduce;
use nrt_kernel::library::softmax::softmax;
use nrt_kernel::library::transpose::transpose;
use nrt_kernel::{AluOp, Kernel, View};

use super::ops::{Op, axis_index};

/// Emits `out = op(ins)`; the shapes were inferred by `Op::infer`.
pub(crate) fn lower(k: &mut Kernel, op: &Op, out: &View, ins: &[View]) -> Result<(), Error> {
    let x = ins
        .first()
        .ok_or_else(|| err!(Invalid, "the op has no input"))?;
    let second = || {
        ins.get(1)
            .ok_or_else(|| err!(Invalid, "the op needs a second input"))
    };
    match op {
        Op::Matmul { ta, tb } => {
            let b = second()?;
            let opts = MatmulOpts {
                a_transposed: *ta,
                ..MatmulOpts::default()
            };
            if *tb {
                // The library's matmul takes b as [K, N]: transpose it into scratch first.
                let s = b.shape();
                let shape = [
                    s.get(1).copied().unwrap_or(1),
                    s.first().copied().unwrap_or(1),
                ];
                let bt = k.scratch(&format!("{}.b_t", out.name()), b.dtype(), &shape)?;
                transpose(k, &bt, b)?;
                matmul(k, out, x, &bt, &opts)
            } else {
                matmul(k, out, x, b, &opts)
            }
        }
        Op::Binary(alu) => binary(k, out, x, second()?, *alu),
        Op::BiasAdd => binary(k, out, x, second()?, AluOp::Add),
        Op::Act(f) => activation(k, out, x, *f),
        Op::Softmax => softmax(k, out, x),
        Op::LayerNorm { eps } => layernorm(k, out, x, ins.get(1), ins.get(2), *eps),
        Op::RmsNorm { eps } => rmsnorm(k, out, x, ins.get(1), *eps),
        Op::Reduce { op, axis, keepdims } => {
            let axis = axis_index(*axis, x.rank())
                .ok_or_else(|| err!(Invalid, "axis {axis} is not a dimension of the input"))?;
            reduce(k, out, x, axis, *op, *keepdims)
        }
        Op::Transpose => transpose(k, out, x),
        Op::Attention {
            heads,
            causal,
            scale,
        } => {
            // [S, H·d] → [H, S, d]: a view, the heads strided in each row.
            let split = |v: &View| -> Result<View, Error> {
                let s = v.shape();
                let (rows, width) = (s.first().copied().unwrap_or(0), s.get(1).copied());
                let d = width.unwrap_or(0) / heads;
                v.reshape(&[rows, *heads, d])?.permute(&[1, 0, 2])
            };
            let cfg = AttentionConfig {
                causal: *causal,
                scale: *scale,
            };
            let (key, v) = (second()?, ins.get(2).unwrap_or(x));
            multi_head_attention(k, &split(out)?, &split(x)?, &split(key)?, &split(v)?, &cfg)
        }
        Op::Conv2d(cfg) => conv2d(k, out, x, second()?, ins.get(2), cfg),
        Op::Pool(cfg) => pool2d(k, out, x, cfg),
        Op::GlobalAvgPool => {
            let s = x.shape();
            let hw = (
                s.get(2).copied().unwrap_or(1),
                s.get(3).copied().unwrap_or(1),
            );
            let cfg = Pool2dConfig {
                kind: PoolKind::AVERAGE,
                kernel: hw,
                stride: hw,
                pads: [0; 4],
            };
            pool2d(k, out, x, &cfg)
        }
        Op::Reshape(_) | Op::Flatten { .. } => copy(k, out, &x.reshape(&out.shape())?),
    }
}
