//! Fusions (`fuse.rs`): which chains become one step, what the per-node table calls them,
//! that a chain whose intermediate is read elsewhere stays as it is, and that the fused
//! program computes what the unfused one does (bit for bit where the fusion is exact).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use common::{A, close, data, floats, model, node, run};
use nrt_onnx::{Lowered, Precision};

fn compile(bytes: &[u8]) -> Lowered {
    let m = nrt_onnx::import(bytes).expect("import");
    nrt_onnx::compile(&m, &HashMap::new(), Precision::Fp32).expect("compile")
}

/// `(name, op)` of every row of the per-node table.
fn rows(lw: &Lowered) -> Vec<(String, String)> {
    lw.nodes
        .iter()
        .map(|n| (n.name.clone(), n.op.clone()))
        .collect()
}

fn row(name: &str, op: &str) -> (String, String) {
    (name.to_owned(), op.to_owned())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

const M: usize = 8;
const K: usize = 24;
const N: usize = 40;

/// `x[M, K] · w[K, N] + b[bshape]`, then `act` (when given) into `y`; `extra` graph outputs.
fn linear(bshape: &[usize], act: Option<&str>, extra: &[&str]) -> Vec<u8> {
    let mut nodes = vec![
        node("MatMul", &["x", "w"], &["h"], vec![]),
        node("Add", &["h", "b"], &["z"], vec![]),
    ];
    let last = match act {
        Some(op) => {
            nodes.push(node(op, &["z"], &["y"], vec![]));
            "y"
        }
        None => "z",
    };
    let mut outs = vec![last];
    outs.extend_from_slice(extra);
    let nb: usize = bshape.iter().product();
    model(
        nodes,
        &[("x", &[M, K])],
        &outs,
        vec![
            floats("w", &[K, N], &data(K * N, 1)),
            floats("b", bshape, &data(nb, 2)),
        ],
        13,
    )
}

#[test]
fn bias_and_activation_join_the_matmul_bit_for_bit() {
    let x = data(M * K, 3);
    let fused = linear(&[N], Some("Relu"), &[]);
    let lw = compile(&fused);
    assert_eq!(rows(&lw), [row("MatMul_h", "MatMul+Add+Relu")]);
    assert_eq!(lw.merged, 2);
    // The same graph with the sum also a graph output: nothing fuses past it.
    let apart = linear(&[N], Some("Relu"), &["z"]);
    let lw2 = compile(&apart);
    assert_eq!(
        rows(&lw2),
        [row("MatMul_h", "MatMul+Add"), row("Relu_y", "Relu")]
    );
    assert_eq!(lw2.merged, 1);
    let a = run(&fused, &[("x", x.clone())]);
    let b = run(&apart, &[("x", x)]);
    assert_eq!(bits(&a[0]), bits(&b[0]));
    assert!(a[0].iter().any(|&v| v > 0.0) && a[0].iter().all(|&v| v >= 0.0));
}

#[test]
fn a_bias_per_element_or_per_row_stays_an_add() {
    for shape in [[M, N], [M, 1]] {
        let lw = compile(&linear(&shape, None, &[]));
        assert_eq!(
            rows(&lw),
            [row("MatMul_h", "MatMul"), row("Add_z", "Add")],
            "{shape:?}"
        );
        assert_eq!(lw.merged, 0);
    }
    // A [1, N] bias is a row vector: fused.
    let lw = compile(&linear(&[1, N], None, &[]));
    assert_eq!(rows(&lw), [row("MatMul_h", "MatMul+Add")]);
}

/// Exact GELU as PyTorch exports it: `((x · (1 + erf(x / √2))) · 0.5`.
fn gelu_torch(extra: &[&str]) -> Vec<u8> {
    let mut outs = vec!["y"];
    outs.extend_from_slice(extra);
    model(
        vec![
            node("Div", &["x", "sqrt2"], &["u"], vec![]),
            node("Erf", &["u"], &["e"], vec![]),
            node("Add", &["e", "one"], &["p"], vec![]),
            node("Mul", &["x", "p"], &["q"], vec![]),
            node("Mul", &["q", "half"], &["y"], vec![]),
        ],
        &[("x", &[4, 96])],
        &outs,
        vec![
            floats("sqrt2", &[], &[std::f32::consts::SQRT_2]),
            floats("one", &[], &[1.0]),
            floats("half", &[], &[0.5]),
        ],
        13,
    )
}

/// GELU values spread over [−6, 6].
fn gelu_input() -> Vec<f32> {
    data(4 * 96, 7).iter().map(|v| v * 6.0).collect()
}

#[test]
fn the_exact_gelu_chain_is_one_activation() {
    let fused = gelu_torch(&[]);
    let lw = compile(&fused);
    assert_eq!(rows(&lw), [row("Div_u", "Gelu (5 nodes)")]);
    assert_eq!(lw.merged, 4);
    // Against the unfused chain (its erf also a graph output, so nothing fuses): the fused
    // step rounds once, the chain five times; they agree to a few fp32 units.
    let apart = gelu_torch(&["e"]);
    assert_eq!(compile(&apart).nodes.len(), 5);
    let x = gelu_input();
    let a = run(&fused, &[("x", x.clone())]);
    let b = run(&apart, &[("x", x.clone())]);
    let want: Vec<f64> = b[0].iter().map(|&v| f64::from(v)).collect();
    close(&a[0], &want, 2e-6);
    // gelu(x) ≈ x for large x, ≈ 0 for very negative x, x/2 at small x.
    for (&xi, &yi) in x.iter().zip(&a[0]) {
        if xi > 5.0 {
            assert!((yi - xi).abs() <= 1e-5 * xi, "{xi}: {yi}");
        }
        if xi < -5.0 {
            assert!(yi <= 0.0 && yi > -1e-5, "{xi}: {yi}");
        }
    }
}

#[test]
fn the_gelu_chain_in_the_other_order_fuses_too() {
    // `(x · 0.5) · (1 + erf(x · (1/√2)))`, as Hugging Face's `gelu` exports.
    let bytes = model(
        vec![
            node("Mul", &["x", "half"], &["h"], vec![]),
            node("Mul", &["x", "rsqrt2"], &["u"], vec![]),
            node("Erf", &["u"], &["e"], vec![]),
            node("Add", &["one", "e"], &["p"], vec![]),
            node("Mul", &["h", "p"], &["y"], vec![]),
        ],
        &[("x", &[4, 96])],
        &["y"],
        vec![
            floats("rsqrt2", &[], &[std::f32::consts::FRAC_1_SQRT_2]),
            floats("one", &[], &[1.0]),
            floats("half", &[], &[0.5]),
        ],
        13,
    );
    let lw = compile(&bytes);
    assert_eq!(rows(&lw), [row("Mul_h", "Gelu (5 nodes)")]);
    let x = gelu_input();
    let a = run(&bytes, &[("x", x.clone())]);
    let b = run(&gelu_torch(&["e"]), &[("x", x)]);
    let want: Vec<f64> = b[0].iter().map(|&v| f64::from(v)).collect();
    close(&a[0], &want, 2e-6);
}

#[test]
fn a_gelu_chain_with_another_scale_is_left_alone() {
    let bytes = model(
        vec![
            node("Div", &["x", "two"], &["u"], vec![]),
            node("Erf", &["u"], &["e"], vec![]),
            node("Add", &["e", "one"], &["p"], vec![]),
            node("Mul", &["x", "p"], &["q"], vec![]),
            node("Mul", &["q", "half"], &["y"], vec![]),
        ],
        &[("x", &[4, 96])],
        &["y"],
        vec![
            floats("two", &[], &[2.0]),
            floats("one", &[], &[1.0]),
            floats("half", &[], &[0.5]),
        ],
        13,
    );
    let lw = compile(&bytes);
    assert_eq!(lw.nodes.len(), 5);
    assert_eq!(lw.merged, 0);
}

#[test]
fn linear_then_gelu_is_one_matmul() {
    let mut nodes = vec![
        node("MatMul", &["x", "w"], &["h"], vec![]),
        node("Add", &["h", "b"], &["z"], vec![]),
        node("Div", &["z", "sqrt2"], &["u"], vec![]),
        node("Erf", &["u"], &["e"], vec![]),
        node("Add", &["e", "one"], &["p"], vec![]),
        node("Mul", &["z", "p"], &["q"], vec![]),
    ];
    nodes.push(node("Mul", &["q", "half"], &["y"], vec![]));
    let inits = vec![
        floats("w", &[K, N], &data(K * N, 1)),
        floats("b", &[N], &data(N, 2)),
        floats("sqrt2", &[], &[std::f32::consts::SQRT_2]),
        floats("one", &[], &[1.0]),
        floats("half", &[], &[0.5]),
    ];
    let bytes = model(nodes.clone(), &[("x", &[M, K])], &["y"], inits.clone(), 13);
    let lw = compile(&bytes);
    assert_eq!(rows(&lw), [row("MatMul_h", "MatMul+Add+Gelu (5 nodes)")]);
    assert_eq!(lw.merged, 6);
    // The same computed as the linear layer and the fused GELU separately (the sum also a
    // graph output): the epilogue's activation sees the same fp32 sums.
    let apart = model(nodes, &[("x", &[M, K])], &["y", "z"], inits, 13);
    assert_eq!(
        rows(&compile(&apart)),
        [
            row("MatMul_h", "MatMul+Add"),
            row("Div_u", "Gelu (5 nodes)")
        ]
    );
    let x = data(M * K, 3);
    let a = run(&bytes, &[("x", x.clone())]);
    let b = run(&apart, &[("x", x)]);
    assert_eq!(bits(&a[0]), bits(&b[0]));
}

const R: usize = 6;
const C: usize = 48;

/// PyTorch's LayerNorm before opset 17; `square` is `Pow` or `Mul`; `extra` graph outputs.
fn layer_norm_chain(square: &str, axes: i64, extra: &[&str]) -> Vec<u8> {
    let sq = if square == "Pow" {
        node("Pow", &["d", "two"], &["s"], vec![])
    } else {
        node("Mul", &["d", "d"], &["s"], vec![])
    };
    let mut outs = vec!["y"];
    outs.extend_from_slice(extra);
    model(
        vec![
            node(
                "ReduceMean",
                &["x"],
                &["mean"],
                vec![("axes", A::Is(vec![axes])), ("keepdims", A::I(1))],
            ),
            node("Sub", &["x", "mean"], &["d"], vec![]),
            sq,
            node(
                "ReduceMean",
                &["s"],
                &["var"],
                vec![("axes", A::Is(vec![axes])), ("keepdims", A::I(1))],
            ),
            node("Add", &["var", "eps"], &["ve"], vec![]),
            node("Sqrt", &["ve"], &["std"], vec![]),
            node("Div", &["d", "std"], &["n"], vec![]),
            node("Mul", &["n", "gamma"], &["g"], vec![]),
            node("Add", &["g", "beta"], &["y"], vec![]),
        ],
        &[("x", &[R, C])],
        &outs,
        vec![
            floats("two", &[], &[2.0]),
            floats("eps", &[], &[1e-5]),
            floats(
                "gamma",
                &[C],
                &data(C, 4).iter().map(|v| 1.0 + 0.2 * v).collect::<Vec<_>>(),
            ),
            floats("beta", &[C], &data(C, 5)),
        ],
        13,
    )
}

#[test]
fn the_decomposed_layer_norm_is_the_layer_norm_op() {
    let x: Vec<f32> = data(R * C, 6).iter().map(|v| 3.0 * v + 0.5).collect();
    // The LayerNormalization operator (opset 17) with the same γ, β and ε.
    let op = model(
        vec![node(
            "LayerNormalization",
            &["x", "gamma", "beta"],
            &["y"],
            vec![("axis", A::I(-1)), ("epsilon", A::F(1e-5))],
        )],
        &[("x", &[R, C])],
        &["y"],
        vec![
            floats(
                "gamma",
                &[C],
                &data(C, 4).iter().map(|v| 1.0 + 0.2 * v).collect::<Vec<_>>(),
            ),
            floats("beta", &[C], &data(C, 5)),
        ],
        17,
    );
    let want = run(&op, &[("x", x.clone())]);
    for square in ["Pow", "Mul"] {
        let bytes = layer_norm_chain(square, -1, &[]);
        let lw = compile(&bytes);
        assert_eq!(
            rows(&lw),
            [row("ReduceMean_mean", "LayerNormalization (9 nodes)")],
            "{square}"
        );
        assert_eq!(lw.merged, 8);
        let got = run(&bytes, &[("x", x.clone())]);
        assert_eq!(bits(&got[0]), bits(&want[0]), "{square}");
    }
    // The unfused chain computes the same to fp32 rounding.
    let apart = layer_norm_chain("Pow", -1, &["var"]);
    assert_eq!(compile(&apart).nodes.len(), 9);
    let b = run(&apart, &[("x", x)]);
    let w: Vec<f64> = b[0].iter().map(|&v| f64::from(v)).collect();
    close(&want[0], &w, 1e-5);
}

#[test]
fn a_layer_norm_chain_over_another_axis_is_left_alone() {
    let lw = compile(&layer_norm_chain("Pow", 0, &[]));
    assert_eq!(lw.nodes.len(), 9);
    assert_eq!(lw.merged, 0);
}

/// GPT-2's `gelu_new` as exported: `(x · 0.5) · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.
fn gelu_tanh_chain(extra: &[&str]) -> Vec<u8> {
    let mut outs = vec!["y"];
    outs.extend_from_slice(extra);
    model(
        vec![
            node("Pow", &["x", "three"], &["x3"], vec![]),
            node("Mul", &["x3", "c"], &["m"], vec![]),
            node("Add", &["x", "m"], &["inner"], vec![]),
            node("Mul", &["inner", "k"], &["s"], vec![]),
            node("Tanh", &["s"], &["t"], vec![]),
            node("Add", &["t", "one"], &["p"], vec![]),
            node("Mul", &["x", "half"], &["h"], vec![]),
            node("Mul", &["h", "p"], &["y"], vec![]),
        ],
        &[("x", &[4, 96])],
        &outs,
        vec![
            floats("three", &[], &[3.0]),
            floats("c", &[], &[0.044_715]),
            floats("k", &[], &[(2.0f64 / std::f64::consts::PI).sqrt() as f32]),
            floats("one", &[], &[1.0]),
            floats("half", &[], &[0.5]),
        ],
        13,
    )
}

#[test]
fn the_tanh_gelu_chain_is_one_activation() {
    let fused = gelu_tanh_chain(&[]);
    let lw = compile(&fused);
    assert_eq!(rows(&lw), [row("Pow_x3", "Gelu tanh (8 nodes)")]);
    assert_eq!(lw.merged, 7);
    // Against the chain left apart (its tanh also a graph output).
    let apart = gelu_tanh_chain(&["t"]);
    assert_eq!(compile(&apart).nodes.len(), 8);
    let x = gelu_input();
    let a = run(&fused, &[("x", x.clone())]);
    let b = run(&apart, &[("x", x.clone())]);
    let want: Vec<f64> = b[0].iter().map(|&v| f64::from(v)).collect();
    close(&a[0], &want, 2e-6);
    // The tanh form against its definition in binary64.
    let def: Vec<f64> = x
        .iter()
        .map(|&v| {
            let v = f64::from(v);
            let u = (2.0 / std::f64::consts::PI).sqrt() * (v + 0.044_715 * v * v * v);
            0.5 * v * (1.0 + u.tanh())
        })
        .collect();
    close(&a[0], &def, 1e-6);
}
