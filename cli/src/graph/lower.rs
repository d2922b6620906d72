//! Lowering one graph op into the kernel: the library routines where the kernel library has
//! them (`nrt_kernel::library`: attention, conv2d, pooling), the row-wise routines of
//! `rows.rs` for the others. Every op reads its inputs from HBM views and writes its output
//! to an HBM view (a kernel output or scratch tensor); the kernel orders them.

use nrt_core::{Error, err};
use nrt_kernel::library::attention::{AttentionConfig, multi_head_attention};
use nrt_kernel::library::conv::conv2d;
use nrt_kernel::library::pool::{Pool2dConfig, PoolKind, pool2d};
use nrt_kernel::{Kernel, View};

use super::ops::Op;
use super::rows;

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
        Op::Matmul { ta, tb } => rows::matmul(k, out, x, second()?, *ta, *tb),
        Op::Binary(alu) => rows::binary(k, out, x, second()?, *alu),
        Op::BiasAdd => {
            let b = second()?;
            let c = b.shape().first().copied().unwrap_or(1);
            let lead = vec![1; x.rank().saturating_sub(1)];
            let b = b.reshape(&[lead, vec![c]].concat())?;
            rows::binary(k, out, x, &b, nrt_kernel::AluOp::Add)
        }
        Op::Act(f) => rows::activation(k, out, x, *f),
        Op::Softmax => rows::softmax(k, out, x),
        Op::LayerNorm { eps } => rows::norm(k, out, x, ins.get(1), ins.get(2), *eps, false),
        Op::RmsNorm { eps } => rows::norm(k, out, x, ins.get(1), None, *eps, true),
        Op::Reduce { op, .. } => rows::reduce(k, out, x, *op),
        Op::Transpose => rows::transpose(k, out, x),
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
        Op::Reshape(_) | Op::Flatten { .. } => rows::copy(k, out, &x.reshape(&out.shape())?),
    }
}
