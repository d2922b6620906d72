//! Builds small ONNX models with the crate's prost messages and runs them on the simulator.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::collections::HashMap;

use nrt_onnx::Precision;
use nrt_onnx::proto::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto, attr_type, data_type,
};
use nrt_sim::Instance;
use nrt_sim::engine::{DType, Device, ExecOptions, decode_f32, encode_f32};
use prost::Message;

/// An attribute.
pub enum A {
    I(i64),
    F(f32),
    Is(Vec<i64>),
    S(&'static str),
}

/// A node.
pub fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<(&str, A)>) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_{}", outs.first().copied().unwrap_or(""))),
        op_type: Some(op.into()),
        domain: None,
        attribute: attrs
            .into_iter()
            .map(|(n, a)| {
                let mut p = AttributeProto {
                    name: Some(n.into()),
                    ..AttributeProto::default()
                };
                match a {
                    A::I(i) => {
                        p.r#type = Some(attr_type::INT);
                        p.i = Some(i);
                    }
                    A::F(f) => {
                        p.r#type = Some(attr_type::FLOAT);
                        p.f = Some(f);
                    }
                    A::Is(v) => {
                        p.r#type = Some(attr_type::INTS);
                        p.ints = v;
                    }
                    A::S(s) => {
                        p.r#type = Some(attr_type::STRING);
                        p.s = Some(s.as_bytes().to_vec());
                    }
                }
                p
            })
            .collect(),
    }
}

/// An fp32 initializer.
pub fn floats(name: &str, shape: &[usize], v: &[f32]) -> TensorProto {
    TensorProto {
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(data_type::FLOAT),
        float_data: v.to_vec(),
        name: Some(name.into()),
        ..TensorProto::default()
    }
}

/// An int64 initializer (as raw data).
pub fn ints(name: &str, shape: &[usize], v: &[i64]) -> TensorProto {
    TensorProto {
        dims: shape.iter().map(|&d| d as i64).collect(),
        data_type: Some(data_type::INT64),
        raw_data: Some(v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        name: Some(name.into()),
        ..TensorProto::default()
    }
}

/// A float value info; `None` dims are dynamic.
pub fn vi(name: &str, shape: &[Option<usize>]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(data_type::FLOAT),
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|d| Dimension {
                            dim_value: d.map(|v| v as i64),
                            dim_param: if d.is_none() { Some("N".into()) } else { None },
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

/// A model's bytes.
pub fn model(
    nodes: Vec<NodeProto>,
    inputs: &[(&str, &[usize])],
    outputs: &[&str],
    inits: Vec<TensorProto>,
    opset: i64,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        producer_name: Some("nrt-onnx tests".into()),
        producer_version: None,
        graph: Some(GraphProto {
            node: nodes,
            name: Some("test".into()),
            initializer: inits,
            input: inputs
                .iter()
                .map(|(n, s)| vi(n, &s.iter().map(|&d| Some(d)).collect::<Vec<_>>()))
                .collect(),
            output: outputs.iter().map(|n| vi(n, &[])).collect(),
            value_info: Vec::new(),
        }),
    }
    .encode_to_vec()
}

/// Compiles and runs `bytes` with `inputs`; the outputs in graph order.
pub fn run_with(bytes: &[u8], inputs: &[(&str, Vec<f32>)], prec: Precision) -> Vec<Vec<f32>> {
    let m = nrt_onnx::import(bytes).expect("import");
    let lw = nrt_onnx::compile(&m, &HashMap::new(), prec).expect("compile");
    let names: Vec<String> = lw.outputs.iter().map(|o| o.name.clone()).collect();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, lw.program).expect("load");
    let enc: Vec<(String, Vec<u8>)> = inputs
        .iter()
        .map(|(n, v)| (n.to_string(), encode_f32(DType::F32, v)))
        .collect();
    let refs: Vec<(&str, &[u8])> = enc.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    let (outs, report) = dev.run(&lp, &refs, &ExecOptions::default()).expect("run");
    assert!(report.hazards.is_empty(), "hazards: {:?}", report.hazards);
    names
        .iter()
        .map(|n| {
            let (_, b) = outs.iter().find(|(o, _)| o == n).expect("output");
            decode_f32(DType::F32, b)
        })
        .collect()
}

/// [`run_with`] in fp32.
pub fn run(bytes: &[u8], inputs: &[(&str, Vec<f32>)]) -> Vec<Vec<f32>> {
    run_with(bytes, inputs, Precision::Fp32)
}

/// Deterministic data in [-1, 1).
pub fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (i as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed.wrapping_mul(40_503));
            ((v >> 8) % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// Asserts `got` is within `tol` of `want`, relative to max(|want|, 1).
pub fn close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let e = (f64::from(g) - w).abs() / w.abs().max(1.0);
        assert!(
            e <= tol,
            "element {i}: got {g}, want {w} (error {e:e} > {tol:e})"
        );
    }
}
