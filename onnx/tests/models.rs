//! Errors with their exact messages, malformed bytes, and small models end to end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use common::{A, close, data, floats, model, node, run};
use nrt_onnx::{Error, Precision};

fn err(bytes: &[u8]) -> String {
    match nrt_onnx::import_and_compile(bytes, Precision::Fp32) {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unsupported_op_is_one_line_naming_node_op_and_list() {
    let m = model(
        vec![node("NonMaxSuppression", &["x"], &["y"], vec![])],
        &[("x", &[4])],
        &["y"],
        vec![],
        13,
    );
    assert_eq!(
        err(&m),
        "node 'NonMaxSuppression_y' (NonMaxSuppression): unsupported: this operator is not supported \
         (supported operators: docs/ONNX.md, \"Supported operators\")"
    );
    // An unsupported output of a supported operator.
    let m = model(
        vec![node(
            "MaxPool",
            &["x"],
            &["y", "i"],
            vec![("kernel_shape", A::Is(vec![2, 2]))],
        )],
        &[("x", &[1, 1, 4, 4])],
        &["y", "i"],
        vec![],
        13,
    );
    assert_eq!(
        err(&m),
        "node 'MaxPool_y' (MaxPool): unsupported: the Indices output (supported operators: \
         docs/ONNX.md, \"Supported operators\")"
    );
}

#[test]
fn malformed_bytes_are_errors_never_panics() {
    let good = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        &[("x", &[4])],
        &["y"],
        vec![],
        13,
    );
    assert!(nrt_onnx::import(&good).is_ok());
    for cut in 0..good.len() {
        let _ = nrt_onnx::import_and_compile(&good[..cut], Precision::Fp32);
    }
    let mut x = 0x1234_5678u32;
    for len in [1usize, 7, 64, 500] {
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            let _ = nrt_onnx::import_and_compile(&bytes, Precision::Fp32);
        }
        // Flipped bytes of a valid model.
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x5a;
            let _ = nrt_onnx::import_and_compile(&b, Precision::Fp32);
        }
    }
    assert!(matches!(
        nrt_onnx::import(&[0xff, 0xff, 0xff]),
        Err(Error::Parse(_))
    ));
    assert_eq!(err(&[]), "not an ONNX model: the model has no graph");
}

#[test]
fn dynamic_dimensions_resolve_from_the_given_shapes_or_say_how() {
    let mut m = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        &[("x", &[4])],
        &["y"],
        vec![],
        13,
    );
    // Re-declare x with a dynamic first dimension.
    {
        use prost::Message;
        let mut p = nrt_onnx::proto::ModelProto::decode(&m[..]).unwrap();
        let g = p.graph.as_mut().unwrap();
        g.input[0] = common::vi("x", &[None, Some(3)]);
        m = p.encode_to_vec();
    }
    assert_eq!(
        err(&m),
        "invalid model: input 'x' has the dynamic dimension 'N': give the input with --input x=FILE.npy to fix it"
    );
    let model = nrt_onnx::import(&m).unwrap();
    let shapes = HashMap::from([("x".to_owned(), vec![5, 3])]);
    let lw = nrt_onnx::compile(&model, &shapes, Precision::Fp32).unwrap();
    assert_eq!(lw.outputs[0].shape, vec![5, 3]);
    let bad = HashMap::from([("x".to_owned(), vec![5, 4])]);
    assert_eq!(
        nrt_onnx::compile(&model, &bad, Precision::Fp32)
            .unwrap_err()
            .to_string(),
        "invalid model: input 'x': dimension 1 is 4, the model declares 3"
    );
}

#[test]
fn mismatched_shapes_name_the_node() {
    let m = model(
        vec![node("Add", &["a", "b"], &["y"], vec![])],
        &[("a", &[3]), ("b", &[4])],
        &["y"],
        vec![],
        13,
    );
    assert_eq!(
        err(&m),
        "invalid model: node 'Add_y' (Add): shapes [3] and [4] do not broadcast"
    );
}

#[test]
fn small_cnn_end_to_end() {
    // Conv 3→4 (3×3, pad 1) + bias, Relu, MaxPool 2×2, GlobalAveragePool, Flatten, Gemm 4→3.
    let x = data(3 * 8 * 8, 20);
    let w = data(4 * 3 * 9, 21);
    let b = data(4, 22);
    let fw = data(3 * 4, 23);
    let fb = data(3, 24);
    let m = model(
        vec![
            node(
                "Conv",
                &["x", "w", "b"],
                &["c"],
                vec![("pads", A::Is(vec![1, 1, 1, 1]))],
            ),
            node("Relu", &["c"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["p"],
                vec![
                    ("kernel_shape", A::Is(vec![2, 2])),
                    ("strides", A::Is(vec![2, 2])),
                ],
            ),
            node("GlobalAveragePool", &["p"], &["g"], vec![]),
            node("Flatten", &["g"], &["f"], vec![]),
            node(
                "Gemm",
                &["f", "fw", "fb"],
                &["out/logits"],
                vec![("transB", A::I(1))],
            ),
        ],
        &[("x", &[1, 3, 8, 8])],
        &["out/logits"],
        vec![
            floats("w", &[4, 3, 3, 3], &w),
            floats("b", &[4], &b),
            floats("fw", &[3, 4], &fw),
            floats("fb", &[3], &fb),
        ],
        13,
    );
    let y = run(&m, &[("x", x.clone())]);
    let mut conv = vec![0.0f64; 4 * 64];
    for o in 0..4 {
        for r in 0..8i64 {
            for q in 0..8i64 {
                let mut s = f64::from(b[o]);
                for c in 0..3 {
                    for kh in 0..3i64 {
                        for kw in 0..3i64 {
                            let (ih, iw) = (r + kh - 1, q + kw - 1);
                            if (0..8).contains(&ih) && (0..8).contains(&iw) {
                                s += f64::from(x[(c * 8 + ih as usize) * 8 + iw as usize])
                                    * f64::from(
                                        w[((o * 3 + c) * 3 + kh as usize) * 3 + kw as usize],
                                    );
                            }
                        }
                    }
                }
                conv[(o * 8 + r as usize) * 8 + q as usize] = s.max(0.0);
            }
        }
    }
    let gap: Vec<f64> = (0..4)
        .map(|o| {
            let mut s = 0.0;
            for r in 0..4 {
                for q in 0..4 {
                    let v = [(0, 0), (0, 1), (1, 0), (1, 1)]
                        .iter()
                        .map(|(a, c)| conv[(o * 8 + 2 * r + a) * 8 + 2 * q + c])
                        .fold(f64::NEG_INFINITY, f64::max);
                    s += v;
                }
            }
            s / 16.0
        })
        .collect();
    let want: Vec<f64> = (0..3)
        .map(|j| {
            f64::from(fb[j])
                + (0..4)
                    .map(|k| gap[k] * f64::from(fw[j * 4 + k]))
                    .sum::<f64>()
        })
        .collect();
    close(&y[0], &want, 1e-5);
}

#[test]
fn causal_attention_block_end_to_end() {
    // One head: q = x·Wq, k = x·Wk, v = x·Wv; s = q·kᵀ/√d + mask; softmax; ·v; LayerNorm(x + ·).
    let (t, d) = (6usize, 8usize);
    let x = data(t * d, 30);
    let (wq, wk, wv) = (data(d * d, 31), data(d * d, 32), data(d * d, 33));
    let mask: Vec<f32> = (0..t * t)
        .map(|i| if i % t > i / t { -1e9 } else { 0.0 })
        .collect();
    let scale = 1.0 / (d as f32).sqrt();
    let m = model(
        vec![
            node("MatMul", &["x", "wq"], &["q"], vec![]),
            node("MatMul", &["x", "wk"], &["k"], vec![]),
            node("MatMul", &["x", "wv"], &["v"], vec![]),
            node(
                "Transpose",
                &["k"],
                &["kt"],
                vec![("perm", A::Is(vec![1, 0]))],
            ),
            node("MatMul", &["q", "kt"], &["s0"], vec![]),
            node("Mul", &["s0", "scale"], &["s1"], vec![]),
            node("Add", &["s1", "mask"], &["s"], vec![]),
            node("Softmax", &["s"], &["p"], vec![("axis", A::I(-1))]),
            node("MatMul", &["p", "v"], &["a"], vec![]),
            node("Add", &["x", "a"], &["h"], vec![]),
            node("LayerNormalization", &["h", "g", "be"], &["y"], vec![]),
        ],
        &[("x", &[t, d])],
        &["y"],
        vec![
            floats("wq", &[d, d], &wq),
            floats("wk", &[d, d], &wk),
            floats("wv", &[d, d], &wv),
            floats("scale", &[], &[scale]),
            floats("mask", &[t, t], &mask),
            floats("g", &[d], &vec![1.0; d]),
            floats("be", &[d], &vec![0.0; d]),
        ],
        17,
    );
    let y = run(&m, &[("x", x.clone())]);
    let mm = |a: &[f64], b: &[f64], n: usize, k: usize, p: usize| -> Vec<f64> {
        (0..n * p)
            .map(|i| (0..k).map(|j| a[(i / p) * k + j] * b[j * p + i % p]).sum())
            .collect()
    };
    let f = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
    let (xd, q, k, v) = (
        f(&x),
        mm(&f(&x), &f(&wq), t, d, d),
        mm(&f(&x), &f(&wk), t, d, d),
        mm(&f(&x), &f(&wv), t, d, d),
    );
    let mut h = vec![0.0; t * d];
    for i in 0..t {
        let s: Vec<f64> = (0..=i)
            .map(|j| (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f64>() * f64::from(scale))
            .collect();
        let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|v| (v - mx).exp()).collect();
        let tot: f64 = e.iter().sum();
        for c in 0..d {
            h[i * d + c] = xd[i * d + c] + (0..=i).map(|j| e[j] / tot * v[j * d + c]).sum::<f64>();
        }
    }
    let mut want = Vec::new();
    for r in h.chunks(d) {
        let mean = r.iter().sum::<f64>() / d as f64;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
        want.extend(r.iter().map(|v| (v - mean) / (var + 1e-5).sqrt()));
    }
    close(&y[0], &want, 1e-4);
}

#[test]
fn intermediates_share_planned_memory() {
    // A chain of 6 element-wise nodes: two buffers suffice.
    let mut nodes = Vec::new();
    let names = ["a", "b", "c", "d", "e", "y"];
    let mut prev = "x";
    for n in names {
        nodes.push(node("Relu", &[prev], &[n], vec![]));
        prev = n;
    }
    let m = model(nodes, &[("x", &[1024])], &["y"], vec![], 13);
    let lw = nrt_onnx::import_and_compile(&m, Precision::Fp32).unwrap();
    assert_eq!(lw.unplanned_bytes, 5 * 4096);
    assert_eq!(lw.scratch_bytes, 2 * 4096);
    let x = data(1024, 40);
    let y = run(&m, &[("x", x.clone())]);
    assert_eq!(y[0], x.iter().map(|v| v.max(0.0)).collect::<Vec<_>>());
}

#[test]
fn integer_inputs_bound_at_build_time_fold_like_constants() {
    use prost::Message;
    let m = model(
        vec![node("Reshape", &["x", "s"], &["y"], vec![])],
        &[("x", &[2, 3])],
        &["y"],
        vec![],
        13,
    );
    let mut p = nrt_onnx::proto::ModelProto::decode(&m[..]).unwrap();
    let mut s = common::vi("s", &[Some(2)]);
    if let Some(tt) = s.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        tt.elem_type = Some(nrt_onnx::proto::data_type::INT64);
    }
    p.graph.as_mut().unwrap().input.push(s);
    let model = nrt_onnx::import(&p.encode_to_vec()).unwrap();
    assert_eq!(
        nrt_onnx::compile(&model, &HashMap::new(), Precision::Fp32)
            .unwrap_err()
            .to_string(),
        "node 'input s' (graph input): unsupported: element type int64 (device tensors are float: \
         give integer inputs with --input, which binds them at build time) (supported operators: \
         docs/ONNX.md, \"Supported operators\")"
    );
    let bound = HashMap::from([(
        "s".to_owned(),
        nrt_onnx::HostTensor::ints(nrt_onnx::Elem::I64, vec![2], vec![3, -1]),
    )]);
    let lw = nrt_onnx::compile_bound(&model, &HashMap::new(), &bound, Precision::Fp32).unwrap();
    assert_eq!(lw.inputs.len(), 1);
    assert_eq!(lw.outputs[0].shape, vec![3, 2]);
}
