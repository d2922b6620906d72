//! Each op family on the simulator against a plain reference computed here; shapes,
//! opset differences, folding.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::type_complexity
)]

mod common;

use common::{A, close, data, floats, ints, model, node, run};

#[test]
fn broadcasting_binary_ops_are_exact() {
    let x = data(2 * 3 * 4, 1);
    let b = data(3, 2);
    for (op, f) in [
        ("Add", (|a: f32, b: f32| a + b) as fn(f32, f32) -> f32),
        ("Sub", |a, b| a - b),
        ("Mul", |a, b| a * b),
        ("Div", |a, b| a / b),
        ("Max", f32::max),
        ("Min", f32::min),
    ] {
        let m = model(
            vec![node(op, &["x", "b"], &["y"], vec![])],
            &[("x", &[2, 3, 4]), ("b", &[3, 1])],
            &["y"],
            vec![],
            13,
        );
        let y = run(&m, &[("x", x.clone()), ("b", b.clone())]);
        let want: Vec<f32> = (0..24).map(|i| f(x[i], b[(i / 4) % 3])).collect();
        assert_eq!(y[0], want, "{op}");
    }
}

#[test]
fn a_scalar_constant_on_either_side_is_exact() {
    // `x op c` and `c op x` with a scalar constant become one activation (`x·s + b`); Mean
    // of two divides their sum by two (it once returned the sum).
    let x = data(2 * 3, 11);
    let c = 0.375f32;
    for (op, first, f) in [
        ("Add", true, (|x: f32, c: f32| x + c) as fn(f32, f32) -> f32),
        ("Add", false, |x, c| c + x),
        ("Mul", true, |x, c| x * c),
        ("Mul", false, |x, c| c * x),
        ("Sub", true, |x, c| x - c),
        ("Sub", false, |x, c| c - x),
        ("Sum", true, |x, c| x + c),
        ("Div", true, |x, c| x / c),
        ("Mean", true, |x, c| (x + c) / 2.0),
        ("Mean", false, |x, c| (c + x) / 2.0),
    ] {
        let ins: [&str; 2] = if first { ["x", "c"] } else { ["c", "x"] };
        let m = model(
            vec![node(op, &ins, &["y"], vec![])],
            &[("x", &[2, 3])],
            &["y"],
            vec![floats("c", &[], &[c])],
            13,
        );
        let y = run(&m, &[("x", x.clone())]);
        let want: Vec<f32> = x.iter().map(|&v| f(v, c)).collect();
        assert_eq!(y[0], want, "{op} {ins:?}");
    }
}

#[test]
fn mean_of_computed_inputs_divides_their_sum() {
    let (a, b, c) = (data(6, 12), data(6, 13), data(6, 14));
    let m2 = model(
        vec![node("Mean", &["a", "b"], &["y"], vec![])],
        &[("a", &[2, 3]), ("b", &[2, 3])],
        &["y"],
        vec![],
        13,
    );
    let y = run(&m2, &[("a", a.clone()), ("b", b.clone())]);
    let want: Vec<f32> = (0..6).map(|i| (a[i] + b[i]) / 2.0).collect();
    assert_eq!(y[0], want);
    let m3 = model(
        vec![node("Mean", &["a", "b", "c"], &["y"], vec![])],
        &[("a", &[2, 3]), ("b", &[2, 3]), ("c", &[2, 3])],
        &["y"],
        vec![],
        13,
    );
    let y = run(&m3, &[("a", a.clone()), ("b", b.clone()), ("c", c.clone())]);
    let want: Vec<f32> = (0..6).map(|i| (a[i] + b[i] + c[i]) / 3.0).collect();
    assert_eq!(y[0], want);
}

#[test]
fn variadic_ops_of_one_input_copy_it() {
    // Sum / Max / Min / Mean with a single input are that input (the ONNX backend node tests'
    // `*_one_input` cases; this once indexed a second input that is not there).
    let x = data(2 * 3, 7);
    for op in ["Sum", "Max", "Min", "Mean"] {
        let m = model(
            vec![node(op, &["x"], &["y"], vec![])],
            &[("x", &[2, 3])],
            &["y"],
            vec![],
            13,
        );
        let y = run(&m, &[("x", x.clone())]);
        assert_eq!(y[0], x, "{op}");
    }
}

#[test]
fn activations_match_their_definitions() {
    let x = data(60, 3);
    let cases: Vec<(&str, Vec<(&str, A)>, fn(f64) -> f64, f64)> = vec![
        ("Relu", vec![], |v| v.max(0.0), 0.0),
        ("Neg", vec![], |v| -v, 0.0),
        ("Abs", vec![], f64::abs, 0.0),
        (
            "LeakyRelu",
            vec![("alpha", A::F(0.25))],
            |v| if v < 0.0 { 0.25 * v } else { v },
            0.0,
        ),
        ("Sigmoid", vec![], |v| 1.0 / (1.0 + (-v).exp()), 1e-6),
        ("Tanh", vec![], f64::tanh, 1e-6),
        ("Exp", vec![], f64::exp, 1e-6),
        (
            "Elu",
            vec![],
            |v| if v < 0.0 { v.exp() - 1.0 } else { v },
            1e-6,
        ),
        (
            "HardSigmoid",
            vec![],
            |v| (0.2 * v + 0.5).clamp(0.0, 1.0),
            1e-7,
        ),
        (
            "Sign",
            vec![],
            |v| {
                if v > 0.0 {
                    1.0
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            },
            0.0,
        ),
    ];
    for (op, attrs, f, tol) in cases {
        let m = model(
            vec![node(op, &["x"], &["y"], attrs)],
            &[("x", &[3, 20])],
            &["y"],
            vec![],
            13,
        );
        let y = run(&m, &[("x", x.clone())]);
        let want: Vec<f64> = x.iter().map(|&v| f(f64::from(v))).collect();
        close(&y[0], &want, tol);
    }
}

#[test]
fn matmul_batched_and_broadcast() {
    let (a, b) = (data(2 * 3 * 4 * 5, 4), data(3 * 5 * 6, 5));
    let m = model(
        vec![node("MatMul", &["a", "b"], &["y"], vec![])],
        &[("a", &[2, 3, 4, 5]), ("b", &[3, 5, 6])],
        &["y"],
        vec![],
        13,
    );
    let y = run(&m, &[("a", a.clone()), ("b", b.clone())]);
    let mut want = Vec::new();
    for n in 0..2 {
        for c in 0..3 {
            for i in 0..4 {
                for j in 0..6 {
                    let s: f64 = (0..5)
                        .map(|k| {
                            f64::from(a[((n * 3 + c) * 4 + i) * 5 + k])
                                * f64::from(b[(c * 5 + k) * 6 + j])
                        })
                        .sum();
                    want.push(s);
                }
            }
        }
    }
    close(&y[0], &want, 1e-6);
}

#[test]
fn gemm_with_transposes_alpha_beta() {
    let a = data(5 * 4, 6);
    let bw = data(7 * 5, 7);
    let c = data(7, 8);
    let m = model(
        vec![node(
            "Gemm",
            &["a", "b", "c"],
            &["y"],
            vec![
                ("transA", A::I(1)),
                ("transB", A::I(1)),
                ("alpha", A::F(0.5)),
                ("beta", A::F(2.0)),
            ],
        )],
        &[("a", &[5, 4])],
        &["y"],
        vec![floats("b", &[7, 5], &bw), floats("c", &[7], &c)],
        13,
    );
    let y = run(&m, &[("a", a.clone())]);
    let mut want = Vec::new();
    for i in 0..4 {
        for j in 0..7 {
            let s: f64 = (0..5)
                .map(|k| f64::from(a[k * 4 + i]) * f64::from(bw[j * 5 + k]))
                .sum();
            want.push(0.5 * s + 2.0 * f64::from(c[j]));
        }
    }
    close(&y[0], &want, 1e-6);
}

/// A plain convolution reference (NCHW, OIHW, one group).
fn conv_ref(
    x: &[f32],
    xs: [usize; 4],
    w: &[f64],
    o: usize,
    k: usize,
    pad: usize,
    b: &[f64],
) -> Vec<f64> {
    let [n, c, h, wd] = xs;
    let (oh, ow) = (h + 2 * pad - k + 1, wd + 2 * pad - k + 1);
    let mut y = Vec::new();
    for ni in 0..n {
        for oi in 0..o {
            for r in 0..oh {
                for q in 0..ow {
                    let mut s = b[oi];
                    for ci in 0..c {
                        for kh in 0..k {
                            for kw in 0..k {
                                let (ih, iw) =
                                    ((r + kh) as i64 - pad as i64, (q + kw) as i64 - pad as i64);
                                if ih >= 0 && iw >= 0 && (ih as usize) < h && (iw as usize) < wd {
                                    s += f64::from(
                                        x[((ni * c + ci) * h + ih as usize) * wd + iw as usize],
                                    ) * w[((oi * c + ci) * k + kh) * k + kw];
                                }
                            }
                        }
                    }
                    y.push(s);
                }
            }
        }
    }
    y
}

#[test]
fn conv_with_batchnorm_folded_then_relu() {
    let x = data(2 * 3 * 6 * 5, 9);
    let w = data(4 * 3 * 3 * 3, 10);
    let (g, be, mu, var) = (
        data(4, 11),
        data(4, 12),
        data(4, 13),
        vec![0.5f32, 1.0, 1.5, 2.0],
    );
    let m = model(
        vec![
            node(
                "Conv",
                &["x", "w"],
                &["c"],
                vec![("pads", A::Is(vec![1, 1, 1, 1]))],
            ),
            node(
                "BatchNormalization",
                &["c", "g", "be", "mu", "var"],
                &["bn"],
                vec![],
            ),
            node("Relu", &["bn"], &["y"], vec![]),
        ],
        &[("x", &[2, 3, 6, 5])],
        &["y"],
        vec![
            floats("w", &[4, 3, 3, 3], &w),
            floats("g", &[4], &g),
            floats("be", &[4], &be),
            floats("mu", &[4], &mu),
            floats("var", &[4], &var),
        ],
        13,
    );
    let lw = nrt_onnx::import_and_compile(&m, nrt_onnx::Precision::Fp32).unwrap();
    assert_eq!(lw.fused, 1);
    assert_eq!(lw.nodes[0].op, "Conv+BatchNormalization");
    let y = run(&m, &[("x", x.clone())]);
    let wd: Vec<f64> = w.iter().map(|&v| f64::from(v)).collect();
    let conv = conv_ref(&x, [2, 3, 6, 5], &wd, 4, 3, 1, &[0.0; 4]);
    let want: Vec<f64> = conv
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let c = (i / 30) % 4;
            let s = f64::from(g[c]) / (f64::from(var[c]) + 1e-5).sqrt();
            ((v - f64::from(mu[c])) * s + f64::from(be[c])).max(0.0)
        })
        .collect();
    close(&y[0], &want, 1e-5);
}

#[test]
fn softmax_axis_semantics_differ_before_opset_13() {
    let x = data(2 * 3 * 4, 14);
    for (opset, group) in [(11, 12), (13, 4)] {
        let m = model(
            vec![node("Softmax", &["x"], &["y"], vec![("axis", A::I(1))])],
            &[("x", &[2, 3, 4])],
            &["y"],
            vec![],
            opset,
        );
        let y = run(&m, &[("x", x.clone())]);
        let mut want = vec![0.0; 24];
        if opset == 11 {
            for r in 0..2 {
                let row = &x[r * group..(r + 1) * group];
                let mx = row
                    .iter()
                    .fold(f64::NEG_INFINITY, |a, &v| a.max(f64::from(v)));
                let s: f64 = row.iter().map(|&v| (f64::from(v) - mx).exp()).sum();
                for (i, &v) in row.iter().enumerate() {
                    want[r * group + i] = (f64::from(v) - mx).exp() / s;
                }
            }
        } else {
            for n in 0..2 {
                for j in 0..4 {
                    let idx = |c: usize| (n * 3 + c) * 4 + j;
                    let s: f64 = (0..3).map(|c| f64::from(x[idx(c)]).exp()).sum();
                    for c in 0..3 {
                        want[idx(c)] = f64::from(x[idx(c)]).exp() / s;
                    }
                }
            }
        }
        close(&y[0], &want, 1e-6);
    }
}

#[test]
fn reduce_axes_as_attribute_or_input() {
    let x = data(2 * 3 * 4, 15);
    let want: Vec<f64> = (0..2)
        .flat_map(|n| (0..4).map(move |j| (n, j)))
        .map(|(n, j)| (0..3).map(|c| f64::from(x[(n * 3 + c) * 4 + j])).sum())
        .collect();
    let old = model(
        vec![node(
            "ReduceSum",
            &["x"],
            &["y"],
            vec![("axes", A::Is(vec![1])), ("keepdims", A::I(0))],
        )],
        &[("x", &[2, 3, 4])],
        &["y"],
        vec![],
        11,
    );
    let new = model(
        vec![node(
            "ReduceSum",
            &["x", "ax"],
            &["y"],
            vec![("keepdims", A::I(0))],
        )],
        &[("x", &[2, 3, 4])],
        &["y"],
        vec![ints("ax", &[1], &[1])],
        13,
    );
    for m in [old, new] {
        let y = run(&m, &[("x", x.clone())]);
        close(&y[0], &want, 1e-6);
    }
}

#[test]
fn shape_arithmetic_folds_to_a_reshape() {
    let x = data(2 * 3 * 4, 16);
    let m = model(
        vec![
            node("Shape", &["x"], &["s"], vec![]),
            node("Gather", &["s", "zero"], &["d0"], vec![]),
            node("Unsqueeze", &["d0", "ax0"], &["d"], vec![]),
            node("Concat", &["d", "m1"], &["shape"], vec![("axis", A::I(0))]),
            node("Reshape", &["x", "shape"], &["r"], vec![]),
            node("Transpose", &["r"], &["y"], vec![]),
        ],
        &[("x", &[2, 3, 4])],
        &["y"],
        vec![
            ints("zero", &[], &[0]),
            ints("ax0", &[1], &[0]),
            ints("m1", &[1], &[-1]),
        ],
        13,
    );
    let lw = nrt_onnx::import_and_compile(&m, nrt_onnx::Precision::Fp32).unwrap();
    assert_eq!(lw.folded, 4);
    assert_eq!(lw.outputs[0].shape, vec![12, 2]);
    let y = run(&m, &[("x", x.clone())]);
    let want: Vec<f32> = (0..24).map(|i| x[(i % 2) * 12 + i / 2]).collect();
    assert_eq!(y[0], want);
}

#[test]
fn data_movement_ops_are_exact() {
    let x = data(2 * 3 * 4, 17);
    let m = model(
        vec![
            node("Slice", &["x", "st", "en", "ax", "sp"], &["s"], vec![]),
            node("Concat", &["s", "s"], &["c"], vec![("axis", A::I(2))]),
            node("Gather", &["c", "idx"], &["y"], vec![("axis", A::I(1))]),
        ],
        &[("x", &[2, 3, 4])],
        &["y"],
        vec![
            ints("st", &[1], &[1]),
            ints("en", &[1], &[4]),
            ints("ax", &[1], &[2]),
            ints("sp", &[1], &[2]),
            ints("idx", &[2], &[2, 0]),
        ],
        13,
    );
    let y = run(&m, &[("x", x.clone())]);
    // s = x[:, :, 1::2] ([2, 3, 2]); c = [s, s] on axis 2 ([2, 3, 4]); y = c[:, [2, 0], :].
    let mut want = Vec::new();
    for n in 0..2 {
        for &ch in &[2usize, 0] {
            for j in 0..4 {
                want.push(x[(n * 3 + ch) * 4 + 1 + 2 * (j % 2)]);
            }
        }
    }
    assert_eq!(y[0], want);
}

#[test]
fn pad_wrap_and_reflect_are_exact() {
    // x [2, 3]; pads: 2 before / 1 after along the last axis, 1 before along the first.
    let x: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    for (mode, rows) in [
        // wrap: row [a b c] -> [b c a b c a]; the extra first row wraps to the last.
        (
            "wrap",
            [
                [5.0, 6.0, 4.0, 5.0, 6.0, 4.0],
                [2.0, 3.0, 1.0, 2.0, 3.0, 1.0],
                [5.0, 6.0, 4.0, 5.0, 6.0, 4.0],
            ],
        ),
        // reflect: [a b c] -> [c b a b c b]; the extra first row reflects to the second.
        (
            "reflect",
            [
                [6.0, 5.0, 4.0, 5.0, 6.0, 5.0],
                [3.0, 2.0, 1.0, 2.0, 3.0, 2.0],
                [6.0, 5.0, 4.0, 5.0, 6.0, 5.0],
            ],
        ),
    ] {
        let m = model(
            vec![node(
                "Pad",
                &["x", "pads"],
                &["y"],
                vec![("mode", A::S(mode))],
            )],
            &[("x", &[2, 3])],
            &["y"],
            vec![ints("pads", &[4], &[1, 2, 0, 1])],
            19,
        );
        let y = run(&m, &[("x", x.clone())]);
        let want: Vec<f32> = rows.iter().flatten().copied().collect();
        assert_eq!(y[0], want, "{mode}");
    }
}

#[test]
fn bf16_compute_stays_within_its_precision() {
    let x = data(4 * 32, 18);
    let w = data(32 * 16, 19);
    let m = model(
        vec![node("MatMul", &["x", "w"], &["y"], vec![])],
        &[("x", &[4, 32])],
        &["y"],
        vec![floats("w", &[32, 16], &w)],
        13,
    );
    let y = common::run_with(&m, &[("x", x.clone())], nrt_onnx::Precision::Bf16);
    let want: Vec<f64> = (0..4)
        .flat_map(|i| (0..16).map(move |j| (i, j)))
        .map(|(i, j)| {
            (0..32)
                .map(|k| f64::from(x[i * 32 + k]) * f64::from(w[k * 16 + j]))
                .sum()
        })
        .collect();
    // Operands rounded to bf16 (8 bits): |error| ≤ 2·2⁻⁸·Σ|a·b| ≤ 32·2⁻⁷ here.
    close(&y[0], &want, 0.25);
}
