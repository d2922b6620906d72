//! `nrt run|build MODEL.onnx` with integer and boolean graph outputs folded at build time:
//! `.npy` files in the graph's types with the exact values, the NEFF declaring the ONNX
//! types, the `folded` line; a model whose every output is empty is an error saying why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{nrt, write_npy};
use nrt_onnx::proto::{
    Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto,
    TypeProtoTensor, ValueInfoProto, data_type,
};
use prost::Message;

fn tvi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(elem),
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

fn node(op: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(op.to_lowercase()),
        op_type: Some(op.into()),
        domain: None,
        attribute: Vec::new(),
    }
}

fn model(
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> Vec<u8> {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(15),
        }],
        producer_name: None,
        producer_version: None,
        graph: Some(GraphProto {
            node: nodes,
            name: Some("ints".into()),
            initializer: vec![],
            input: inputs,
            output: outputs,
            value_info: vec![],
        }),
    }
    .encode_to_vec()
}

/// The header and data bytes of a `.npy` file.
fn read_npy(path: &std::path::Path) -> (String, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8(b[10..10 + hlen].to_vec()).unwrap();
    (header, b[10 + hlen..].to_vec())
}

#[test]
fn integer_and_bool_outputs_are_written_in_their_types_with_exact_values() {
    // y, mask = Dropout(x); s = Shape(x); z = a - b (int16, bound at build time).
    let m = model(
        vec![
            node("Dropout", &["x"], &["y", "mask"]),
            node("Shape", &["x"], &["s"]),
            node("Sub", &["a", "b"], &["z"]),
        ],
        vec![
            tvi("x", data_type::FLOAT, &[2, 2]),
            tvi("a", data_type::INT16, &[2]),
            tvi("b", data_type::INT16, &[2]),
        ],
        vec![
            tvi("y", data_type::FLOAT, &[2, 2]),
            tvi("mask", data_type::BOOL, &[2, 2]),
            tvi("s", data_type::INT64, &[2]),
            tvi("z", data_type::INT16, &[2]),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ints.onnx");
    std::fs::write(&path, m).unwrap();
    let i16s = |v: &[i16]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let x: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    write_npy(&dir.path().join("x.npy"), "<f4", &[2, 2], &x);
    write_npy(&dir.path().join("a.npy"), "<i2", &[2], &i16s(&[-32768, 7]));
    write_npy(&dir.path().join("b.npy"), "<i2", &[2], &i16s(&[1, 9]));
    let mut cmd = nrt();
    cmd.args(["run", path.to_str().unwrap(), "-o"])
        .arg(dir.path().join("out"));
    for n in ["x", "a", "b"] {
        cmd.arg("--input").arg(format!(
            "{n}={}",
            dir.path().join(format!("{n}.npy")).display()
        ));
    }
    let o = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains(
            "folded     mask, s, z: constants computed on the host at build time; the program \
             copies them into the outputs (integer and boolean ones as raw bytes)"
        ),
        "{text}"
    );
    assert!(text.contains("  mask  bool (uint8)  [2, 2]"), "{text}");
    assert!(text.contains("  s     int64"), "{text}");
    let (h, y) = read_npy(&dir.path().join("out/y.npy"));
    assert!(h.contains("'<f4'"), "{h}");
    assert_eq!(y, x);
    let (h, mask) = read_npy(&dir.path().join("out/mask.npy"));
    assert!(
        h.contains("'|b1'") && h.contains("'shape': (2, 2, )"),
        "{h}"
    );
    assert_eq!(mask, vec![1u8; 4]);
    let (h, s) = read_npy(&dir.path().join("out/s.npy"));
    assert!(h.contains("'<i8'"), "{h}");
    assert_eq!(
        s,
        [2i64, 2]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<_>>()
    );
    let (h, z) = read_npy(&dir.path().join("out/z.npy"));
    assert!(h.contains("'<i2'"), "{h}");
    // -32768 - 1 wraps to 32767.
    assert_eq!(z, i16s(&[32767, -2]));

    // The NEFF `nrt build` writes declares the ONNX types (a model without the integer
    // inputs, which `nrt build` has no values for).
    let m = model(
        vec![
            node("Dropout", &["x"], &["y", "mask"]),
            node("Shape", &["x"], &["s"]),
        ],
        vec![tvi("x", data_type::FLOAT, &[2, 2])],
        vec![
            tvi("y", data_type::FLOAT, &[2, 2]),
            tvi("mask", data_type::BOOL, &[2, 2]),
            tvi("s", data_type::INT64, &[2]),
        ],
    );
    std::fs::write(&path, m).unwrap();
    let neff = dir.path().join("ints.neff");
    let o = nrt()
        .args(["build", path.to_str().unwrap(), "-o"])
        .arg(&neff)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = nrt().arg("info").arg(&neff).output().unwrap();
    let info = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{info}");
    for (name, t) in [("s", "int64"), ("mask", "uint8")] {
        assert!(
            info.lines().any(|l| l.contains(name) && l.contains(t)),
            "{name} {t}: {info}"
        );
    }
    // Run from the NEFF alone: the same values, in the NEFF's types (bool as uint8).
    let o = nrt()
        .args(["run", neff.to_str().unwrap(), "-o"])
        .arg(dir.path().join("neff_out"))
        .arg("--input")
        .arg(format!("x={}", dir.path().join("x.npy").display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (h, s2) = read_npy(&dir.path().join("neff_out/s.npy"));
    assert!(h.contains("'<i8'"), "{h}");
    assert_eq!(s2, s);
    let (h, mask) = read_npy(&dir.path().join("neff_out/mask.npy"));
    assert!(h.contains("'|u1'"), "{h}");
    assert_eq!(mask, vec![1u8; 4]);
}

#[test]
fn a_model_whose_every_output_is_empty_is_an_error_saying_why() {
    let m = model(
        vec![node("Relu", &["x"], &["y"])],
        vec![tvi("x", data_type::FLOAT, &[0, 3])],
        vec![tvi("y", data_type::FLOAT, &[0, 3])],
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.onnx");
    std::fs::write(&path, m).unwrap();
    let o = nrt()
        .args(["run", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim(),
        format!(
            "error: {}: nothing to run on the device: every output has no elements (y [0, 3]) \
             — a NEFF needs at least one input or output tensor",
            path.display()
        )
    );
}
