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
    for n in ["mm", "bias", "sm"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(n)),
            "{n} missing: {text}"
        );
    }
    assert!(text.contains("for the model (3 nodes)"), "{text}");
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
