//! `library::conv::conv2d_cio`: weights laid out input-channel major (`[C, KH, KW, O/groups]`)
//! give bit for bit the outputs of `conv2d` with the ONNX layout (`[O, C/groups, KH, KW]`),
//! the same operand values reaching TensorE in the same order, with fewer instructions
//! (no per-tap transposes); misuse is an error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, output, run};
use nrt_core::NrtStatus;
use nrt_kernel::library::conv::{Conv2dConfig, conv2d, conv2d_cio};
use nrt_kernel::{DType, Kernel, Program};
use nrt_sim::engine::{encode_f32, round_through};

/// `w [O, C/g, taps]` (row-major, taps = KH·KW) → `[C, taps, O/g]`.
fn to_cio(w: &[f32], o: usize, cig: usize, taps: usize, groups: usize) -> Vec<f32> {
    let cog = o / groups;
    let mut out = vec![0f32; w.len()];
    for g in 0..groups {
        for oc in 0..cog {
            for ci in 0..cig {
                for t in 0..taps {
                    out[((g * cig + ci) * taps + t) * cog + oc] =
                        w[(((g * cog + oc) * cig) + ci) * taps + t];
                }
            }
        }
    }
    out
}

/// Builds the convolution with `conv2d` (`cio = false`) or `conv2d_cio`; `x`, `w` are the
/// ONNX shapes (`w` 3-D for a 1-D convolution).
fn build(
    x: &[usize],
    w: &[usize],
    cfg: &Conv2dConfig,
    dt: DType,
    bias: bool,
    cio: bool,
) -> Program {
    let mut k = Kernel::new("conv_cio_test");
    let xv = k.input("x", dt, x).unwrap();
    let (o, cig) = (w[0], w[1]);
    let w_shape: Vec<usize> = if cio {
        let mut s = vec![cig * cfg.groups];
        s.extend_from_slice(&w[2..]);
        s.push(o / cfg.groups);
        s
    } else {
        w.to_vec()
    };
    let wv = k.input("w", dt, &w_shape).unwrap();
    let b = bias.then(|| k.input("b", dt, &[o]).unwrap());
    let (sp, ks): (Vec<usize>, Vec<usize>) = if x.len() == 3 {
        (vec![1, x[2]], vec![1, w[2]])
    } else {
        (x[2..].to_vec(), w[2..].to_vec())
    };
    let (oh, ow) = cfg.output_size((sp[0], sp[1]), (ks[0], ks[1])).unwrap();
    let ys: Vec<usize> = if x.len() == 3 {
        vec![x[0], o, ow]
    } else {
        vec![x[0], o, oh, ow]
    };
    let y = k.output("y", DType::F32, &ys).unwrap();
    if cio {
        conv2d_cio(&mut k, &y, &xv, &wv, b.as_deref(), cfg).unwrap();
    } else {
        conv2d(&mut k, &y, &xv, &wv, b.as_deref(), cfg).unwrap();
    }
    k.build().unwrap()
}

fn same_bits(x: &[usize], w: &[usize], cfg: Conv2dConfig, dt: DType, bias: bool, seed: u64) {
    let mut rng = Rng(seed);
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| round_through(dt, rng.unit())).collect() };
    let xs = draw(x.iter().product());
    let ws = draw(w.iter().product());
    let bs = draw(w[0]);
    let taps: usize = w[2..].iter().product();
    let wc = to_cio(&ws, w[0], w[1], taps, cfg.groups);
    let mut outs = Vec::new();
    for (cio, wdata) in [(false, &ws), (true, &wc)] {
        let p = build(x, w, &cfg, dt, bias, cio);
        let mut inputs = vec![("x", encode_f32(dt, &xs)), ("w", encode_f32(dt, wdata))];
        if bias {
            inputs.push(("b", encode_f32(dt, &bs)));
        }
        let (o, report) = run(&p, &inputs);
        outs.push((
            output(&o, "y").to_vec(),
            p.instruction_count(),
            report.ticks,
        ));
    }
    let ((a, ia, ta), (b, ib, tb)) = (&outs[0], &outs[1]);
    assert_eq!(a, b, "x {x:?} w {w:?} {cfg:?} {dt}: outputs differ");
    assert!(
        ib < ia,
        "x {x:?} w {w:?}: {ib} instructions with cio, {ia} without"
    );
    eprintln!("x {x:?} w {w:?} {dt}: {ia} -> {ib} instructions, {ta} -> {tb} ticks");
}

#[test]
fn cio_weights_give_conv2d_bits() {
    // Dense, padding, bias, fp32.
    same_bits(
        &[2, 3, 11, 9],
        &[5, 3, 3, 3],
        Conv2dConfig::new(1, 1, 1),
        DType::F32,
        true,
        1,
    );
    // Stride, asymmetric padding, dilation, a 3x2 kernel.
    let cfg = Conv2dConfig {
        stride: (2, 1),
        pads: [1, 0, 2, 1],
        dilation: (2, 3),
        groups: 1,
    };
    same_bits(&[1, 4, 13, 10], &[6, 4, 3, 2], cfg, DType::F32, false, 2);
    // More than 128 input and output channels (two chunks each), bf16.
    same_bits(
        &[1, 130, 5, 7],
        &[129, 130, 3, 3],
        Conv2dConfig::new(1, 1, 1),
        DType::Bf16,
        true,
        3,
    );
    // Two groups.
    same_bits(
        &[2, 6, 7, 5],
        &[4, 3, 3, 3],
        Conv2dConfig::new(1, 1, 2),
        DType::Bf16,
        true,
        4,
    );
    // 1-D.
    let c1 = Conv2dConfig {
        pads: [0, 2, 0, 1],
        ..Default::default()
    };
    same_bits(&[1, 4, 20], &[6, 4, 5], c1, DType::F32, true, 5);
}

#[test]
fn cio_misuse_is_an_error() {
    let mut k = Kernel::new("conv_cio_bad");
    let x = k.input("x", DType::F32, &[1, 4, 8, 8]).unwrap();
    let y = k.output("y", DType::F32, &[1, 4, 8, 8]).unwrap();
    // Depthwise (C/groups = 1) takes conv2d's layout.
    let dw = k.input("dw", DType::F32, &[4, 3, 3, 1]).unwrap();
    let e = conv2d_cio(&mut k, &y, &x, &dw, None, &Conv2dConfig::new(1, 1, 4)).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(e.message().contains("depthwise"), "{}", e.message());
    // C rows must match x's channels.
    let w = k.input("w", DType::F32, &[3, 3, 3, 4]).unwrap();
    let e = conv2d_cio(&mut k, &y, &x, &w, None, &Conv2dConfig::new(1, 1, 1)).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    // O/groups · groups must match y's channels.
    let w = k.input("w2", DType::F32, &[4, 3, 3, 5]).unwrap();
    let e = conv2d_cio(&mut k, &y, &x, &w, None, &Conv2dConfig::new(1, 1, 1)).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(
        e.message().contains("must be [1, 5, 8, 8]"),
        "{}",
        e.message()
    );
}
