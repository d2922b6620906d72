//! `nrt build|run|bench MODEL.onnx`: a small model written with the ONNX protobuf messages,
//! its outputs checked against a plain reference, the output file names sanitised, inputs
//! checked, unsupported operators reported in one line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{nrt, read_f32_npy, write_npy};
use nrt_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto, attr_type, data_type,
};
use prost::Message;

fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(data_type::FLOAT),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

fn node(op: &str, name: &str, ins: &[&str], outs: &[&str], axis: Option<i64>) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(name.into()),
        op_type: Some(op.into()),
        domain: None,
        attribute: axis
            .map(|a| AttributeProto {
                name: Some("axis".into()),
                r#type: Some(attr_type::INT),
                i: Some(a),
                ..AttributeProto::default()
            })
            .into_iter()
            .collect(),
    }
}

/// `gpu_0/softmax_1 = Softmax(x · w + b)`, x `[2, 3]`, w `[3, 4]`.
fn mlp(op: &str) -> Vec<u8> {
    let w: Vec<f32> = (0..12).map(|i| i as f32 / 8.0 - 0.5).collect();
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(13),
        }],
        producer_name: None,
        producer_version: None,
        graph: Some(GraphProto {
            node: vec![
                node("MatMul", "mm", &["x", "w"], &["h"], None),
                node("Add", "bias", &["h", "b"], &["z"], None),
                node(op, "sm", &["z"], &["gpu_0/softmax_1"], Some(-1)),
            ],
            name: Some("mlp".into()),
            initializer: vec![
                TensorProto {
                    dims: vec![3, 4],
                    data_type: Some(data_type::FLOAT),
                    float_data: w,
                    name: Some("w".into()),
                    ..TensorProto::default()
                },
                TensorProto {
                    dims: vec![4],
                    data_type: Some(data_type::FLOAT),
                    float_data: vec![0.1, -0.2, 0.3, 0.0],
                    name: Some("b".into()),
                    ..TensorProto::default()
                },
            ],
            input: vec![vi("x", &[2, 3])],
            output: vec![vi("gpu_0/softmax_1", &[2, 4])],
            value_info: vec![],
        }),
    }
    .encode_to_vec()
}

#[test]
fn run_writes_sanitised_outputs_matching_a_reference() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("mlp.onnx");
    std::fs::write(&model, mlp("Softmax")).unwrap();
    let x: Vec<f32> = vec![0.5, -1.0, 2.0, 1.5, 0.25, -0.75];
    let xb: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let xf = dir.path().join("x.npy");
    write_npy(&xf, "<f4", &[2, 3], &xb);
    let out = dir.path().join("out");
    let o = nrt()
        .args(["run", model.to_str().unwrap(), "--input"])
        .arg(format!("x={}", xf.display()))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("ONNX nodes"), "{text}");
    // The bias add is fused into the matmul's epilogue: one row for both, named after the
    // matmul, and the summary counts the merged node.
    assert!(
        text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.first() == Some(&"mm") && w.get(1) == Some(&"MatMul+Add")
        }),
        "mm row missing: {text}"
    );
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("sm ")),
        "sm row missing: {text}"
    );
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("bias ")),
        "{text}"
    );
    assert!(text.contains("for the model (2 nodes)"), "{text}");
    assert!(text.contains("1 merged by fusions"), "{text}");
    let (descr, y) = read_f32_npy(&out.join("gpu_0_softmax_1.npy"));
    assert!(
        descr.contains("'descr': '<f4'") && descr.contains("(2, 4, )"),
        "{descr}"
    );
    let b = [0.1f64, -0.2, 0.3, 0.0];
    for r in 0..2 {
        let z: Vec<f64> = (0..4)
            .map(|j| {
                b[j] + (0..3)
                    .map(|k| f64::from(x[r * 3 + k]) * ((k * 4 + j) as f64 / 8.0 - 0.5))
                    .sum::<f64>()
            })
            .collect();
        let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
        for j in 0..4 {
            let want = (z[j] - m).exp() / s;
            assert!(
                (f64::from(y[r * 4 + j]) - want).abs() < 1e-6,
                "{r},{j}: {} vs {want}",
                y[r * 4 + j]
            );
        }
    }
}

#[test]
fn inputs_not_given_are_seeded_and_said_so_and_build_writes_a_neff() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("mlp.onnx");
    std::fs::write(&model, mlp("Softmax")).unwrap();
    let o = nrt()
        .args(["run", model.to_str().unwrap(), "--dtype", "bf16"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("not given: seeded random data, uniform in [-1, 1)"),
        "{text}"
    );
    assert!(text.contains("bf16 (fp32 accumulation) compute"), "{text}");
    let neff = dir.path().join("mlp.neff");
    let o = nrt()
        .args([
            "build",
            model.to_str().unwrap(),
            "-o",
            neff.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nrt()
        .args(["info", neff.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("gpu_0/softmax_1"),
        "{text}"
    );
}

#[test]
fn wrong_input_shape_and_unsupported_ops_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("mlp.onnx");
    std::fs::write(&model, mlp("Softmax")).unwrap();
    let xf = dir.path().join("x.npy");
    write_npy(&xf, "<f4", &[3, 2], &[0u8; 24]);
    let o = nrt()
        .args(["run", model.to_str().unwrap(), "--input"])
        .arg(format!("x={}", xf.display()))
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!(
            "error: {}: invalid model: input 'x': dimension 0 is 3, the model declares 2",
            model.display()
        )
    );
    std::fs::write(&model, mlp("Hardmax")).unwrap();
    let o = nrt()
        .args(["run", model.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!(
            "error: {}: node 'sm' (Hardmax): unsupported: this operator is not supported \
             (supported operators: docs/ONNX.md, \"Supported operators\")",
            model.display()
        )
    );
}

fn tvi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let mut v = vi(name, dims);
    if let Some(t) = v.r#type.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.elem_type = Some(elem);
    }
    v
}

/// The header and data bytes of a `.npy` file.
fn read_npy(path: &std::path::Path) -> (String, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8(b[10..10 + hlen].to_vec()).unwrap();
    (header, b[10 + hlen..].to_vec())
}

#[test]
fn float64_and_float16_io_bound_bounds_and_empty_outputs() {
    // y = Clip(x, lo, hi) in float64 (lo, hi graph inputs: bound at build time),
    // g = Relu(h) in float16, q = Split(h, [2, 0])[1] (empty), s = ReduceMax(y) (a scalar).
    let mut split = node("Split", "split", &["h"], &["q0", "q"], Some(0));
    split.attribute.push(AttributeProto {
        name: Some("split".into()),
        r#type: Some(attr_type::INTS),
        ints: vec![2, 0],
        ..AttributeProto::default()
    });
    let m = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(11),
        }],
        producer_name: None,
        producer_version: None,
        graph: Some(GraphProto {
            node: vec![
                node("Clip", "clip", &["x", "lo", "hi"], &["y"], None),
                node("Relu", "relu", &["h"], &["g"], None),
                split,
                {
                    let mut r = node("ReduceMax", "max", &["y"], &["s"], None);
                    r.attribute.push(AttributeProto {
                        name: Some("keepdims".into()),
                        r#type: Some(attr_type::INT),
                        i: Some(0),
                        ..AttributeProto::default()
                    });
                    r
                },
            ],
            name: Some("types".into()),
            initializer: vec![],
            input: vec![
                tvi("x", data_type::DOUBLE, &[3]),
                tvi("lo", data_type::DOUBLE, &[]),
                tvi("hi", data_type::DOUBLE, &[]),
                tvi("h", data_type::FLOAT16, &[2]),
            ],
            output: vec![
                tvi("y", data_type::DOUBLE, &[3]),
                tvi("g", data_type::FLOAT16, &[2]),
                tvi("q", data_type::FLOAT16, &[0]),
                tvi("s", data_type::DOUBLE, &[]),
            ],
            value_info: vec![],
        }),
    };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("types.onnx");
    std::fs::write(&model, m.encode_to_vec()).unwrap();
    let f64s = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let files = [
        ("x", "<f8", vec![3u64], f64s(&[0.1, -5.0, 7.0])),
        ("lo", "<f8", vec![], f64s(&[-1.0])),
        ("hi", "<f8", vec![], f64s(&[2.0])),
        // float16 1.5 = 0x3e00, -2 = 0xc000
        ("h", "<f2", vec![2], vec![0x00, 0x3e, 0x00, 0xc0]),
    ];
    let mut cmd = nrt();
    cmd.args(["run", model.to_str().unwrap(), "-o"])
        .arg(dir.path().join("out"));
    for (n, d, s, b) in &files {
        let p = dir.path().join(format!("{n}.npy"));
        write_npy(&p, d, s, b);
        cmd.arg("--input").arg(format!("{n}={}", p.display()));
    }
    let o = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("(float64, rounded to fp32)"), "{text}");
    assert!(
        text.contains("lo (float64 (<f8) [] from ") && text.contains("; needed as a constant)"),
        "{text}"
    );
    let (h, y) = read_npy(&dir.path().join("out/y.npy"));
    assert!(h.contains("'<f8'"), "{h}");
    // 0.1 rounded to fp32, then widened exactly; -5 and 7 clipped to [-1, 2].
    assert_eq!(y, f64s(&[f64::from(0.1f32), -1.0, 2.0]));
    let (h, g) = read_npy(&dir.path().join("out/g.npy"));
    assert!(h.contains("'<f2'"), "{h}");
    assert_eq!(g, vec![0x00, 0x3e, 0x00, 0x00]);
    let (h, q) = read_npy(&dir.path().join("out/q.npy"));
    assert!(h.contains("'<f2'") && h.contains("'shape': (0, )"), "{h}");
    assert!(q.is_empty());
    // A scalar output is a 0-d array.
    let (h, v) = read_npy(&dir.path().join("out/s.npy"));
    assert!(h.contains("'<f8'") && h.contains("'shape': ()"), "{h}");
    assert_eq!(v, f64s(&[2.0]));
}
