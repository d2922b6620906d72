//! Integer and boolean graph outputs: folded on the host at build time, stored as NEFF
//! constants and copied into the output tensors by DMA (bits unchanged); Dropout's mask at
//! inference; Pad's edge / reflect / wrap modes folded on the host; the errors for what the
//! device cannot produce.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use common::{A, ints, model, node};
use nrt_onnx::proto::{ModelProto, data_type};
use nrt_onnx::{Elem, HostTensor, Lowered, Precision};
use nrt_sim::Instance;
use nrt_sim::engine::{DType, Device, ExecOptions, encode_f32};
use prost::Message;

const LIST: &str = " (supported operators: docs/ONNX.md, \"Supported operators\")";

/// `bytes` with the element types of the named graph inputs and outputs changed.
fn typed(bytes: &[u8], types: &[(&str, i32)]) -> Vec<u8> {
    let mut p = ModelProto::decode(bytes).unwrap();
    let g = p.graph.as_mut().unwrap();
    for v in g.input.iter_mut().chain(g.output.iter_mut()) {
        if let Some((_, t)) = types.iter().find(|(n, _)| v.name.as_deref() == Some(n))
            && let Some(tt) = v.r#type.as_mut().and_then(|t| t.tensor_type.as_mut())
        {
            tt.elem_type = Some(*t);
        }
    }
    p.encode_to_vec()
}

/// Compiles with integer inputs `bound` and float input `values` known at build time.
fn compile(
    bytes: &[u8],
    bound: &[(&str, HostTensor)],
    values: &[(&str, HostTensor)],
) -> nrt_onnx::Result<Lowered> {
    let m = nrt_onnx::import(bytes).unwrap();
    let map = |v: &[(&str, HostTensor)]| -> HashMap<String, HostTensor> {
        v.iter()
            .map(|(n, t)| ((*n).to_owned(), t.clone()))
            .collect()
    };
    nrt_onnx::compile_values(
        &m,
        &HashMap::new(),
        &map(bound),
        &map(values),
        Precision::Fp32,
    )
}

/// The error message of a compilation.
fn err(r: nrt_onnx::Result<Lowered>) -> String {
    match r {
        Ok(_) => panic!("compiled"),
        Err(e) => e.to_string(),
    }
}

/// Runs `lw` on the simulator with fp32 `inputs`; every output's bytes, in graph order.
fn run_raw(lw: &Lowered, inputs: &[(&str, Vec<f32>)]) -> Vec<Vec<u8>> {
    let enc: Vec<(String, Vec<u8>)> = inputs
        .iter()
        .map(|(n, v)| (n.to_string(), encode_f32(DType::F32, v)))
        .collect();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, lw.program.clone()).expect("load");
    let refs: Vec<(&str, &[u8])> = enc.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    let (outs, report) = dev.run(&lp, &refs, &ExecOptions::default()).expect("run");
    assert!(report.hazards.is_empty(), "hazards: {:?}", report.hazards);
    lw.outputs
        .iter()
        .map(|o| {
            let (_, b) = outs.iter().find(|(n, _)| *n == o.name).expect("output");
            b.clone()
        })
        .collect()
}

/// The kernel dtype and shape of the program's tensor `name`.
fn kernel_tensor(lw: &Lowered, name: &str) -> (DType, Vec<u64>) {
    let t = lw
        .program
        .tensors
        .iter()
        .find(|t| t.name == name)
        .expect("tensor");
    (t.dtype, t.shape.clone())
}

fn int8(v: &[i64]) -> HostTensor {
    HostTensor::ints(Elem::OtherInt(data_type::INT8), vec![v.len()], v.to_vec())
}

#[test]
fn int8_sums_wrap_and_are_copied_as_int32_words() {
    let m = typed(
        &model(
            vec![node("Add", &["a", "b"], &["z"], vec![])],
            &[("a", &[4]), ("b", &[4])],
            &["z"],
            vec![],
            14,
        ),
        &[
            ("a", data_type::INT8),
            ("b", data_type::INT8),
            ("z", data_type::INT8),
        ],
    );
    let lw = compile(
        &m,
        &[
            ("a", int8(&[100, -100, 127, 1])),
            ("b", int8(&[100, -100, 1, 2])),
        ],
        &[],
    )
    .unwrap();
    assert!(lw.inputs.is_empty());
    assert_eq!(lw.outputs[0].elem, Elem::OtherInt(data_type::INT8));
    assert_eq!(lw.outputs[0].shape, vec![4]);
    assert_eq!(lw.folded_outputs, vec!["z"]);
    // 4 bytes: one int32 word.
    assert_eq!(kernel_tensor(&lw, "z"), (DType::I32, vec![1]));
    let got = run_raw(&lw, &[]);
    // 200 → -56, -200 → 56, 128 → -128, 3.
    assert_eq!(got, vec![[-56i8, 56, -128, 3].map(|x| x as u8).to_vec()]);
}

#[test]
fn uint16_outputs_are_fp16_halves_whose_nan_patterns_survive() {
    // 6 bytes: three fp16 halves; 0xffff and 0xfffe are fp16 NaNs, moved unchanged.
    let m = typed(
        &model(
            vec![node("Sub", &["a", "b"], &["z"], vec![])],
            &[("a", &[3]), ("b", &[3])],
            &["z"],
            vec![],
            14,
        ),
        &[
            ("a", data_type::UINT16),
            ("b", data_type::UINT16),
            ("z", data_type::UINT16),
        ],
    );
    let u16s = |v: &[i64]| HostTensor::ints(Elem::OtherInt(data_type::UINT16), vec![3], v.to_vec());
    let lw = compile(&m, &[("a", u16s(&[1, 2, 3])), ("b", u16s(&[2, 0, 5]))], &[]).unwrap();
    assert_eq!(kernel_tensor(&lw, "z"), (DType::F16, vec![3]));
    let got = run_raw(&lw, &[]);
    let want: Vec<u8> = [65535u16, 2, 65534]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    assert_eq!(got, vec![want]);
}

#[test]
fn shape_and_size_are_int64_outputs_next_to_device_results() {
    let m = typed(
        &model(
            vec![
                node("Relu", &["x"], &["y"], vec![]),
                node("Shape", &["x"], &["s"], vec![("start", A::I(1))]),
                node("Size", &["x"], &["n"], vec![]),
            ],
            &[("x", &[2, 3, 5])],
            &["y", "s", "n"],
            vec![],
            15,
        ),
        &[("s", data_type::INT64), ("n", data_type::INT64)],
    );
    let lw = compile(&m, &[], &[]).unwrap();
    assert_eq!(lw.folded_outputs, vec!["s", "n"]);
    assert_eq!(lw.outputs[1].elem, Elem::I64);
    assert_eq!(lw.outputs[2].shape, Vec::<usize>::new());
    assert_eq!(kernel_tensor(&lw, "s"), (DType::I32, vec![4]));
    assert_eq!(kernel_tensor(&lw, "n"), (DType::I32, vec![2]));
    let x: Vec<f32> = (0..30).map(|i| i as f32 - 15.0).collect();
    let got = run_raw(&lw, &[("x", x.clone())]);
    let relu: Vec<u8> = x.iter().flat_map(|v| v.max(0.0).to_le_bytes()).collect();
    let i64s = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    assert_eq!(got, vec![relu, i64s(&[3, 5]), i64s(&[30])]);
}

#[test]
fn dropout_at_inference_has_an_all_true_mask() {
    let m = typed(
        &model(
            vec![node("Dropout", &["x", "r", "t"], &["y", "mask"], vec![])],
            &[("x", &[2, 3]), ("r", &[]), ("t", &[])],
            &["y", "mask"],
            vec![],
            13,
        ),
        &[("t", data_type::BOOL), ("mask", data_type::BOOL)],
    );
    let ratio = |r: f64| HostTensor::floats(Elem::F32, vec![], vec![r]);
    let training = |t: i64| HostTensor::ints(Elem::Bool, vec![], vec![t]);
    let x = vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
    let xb: Vec<u8> = x.iter().flat_map(|v: &f32| v.to_le_bytes()).collect();
    // Inference (training_mode false), and training with a ratio of 0: nothing dropped.
    for (r, t) in [(0.5, 0), (0.0, 1)] {
        let lw = compile(&m, &[("t", training(t))], &[("r", ratio(r))]).unwrap();
        assert_eq!(lw.outputs[1].elem, Elem::Bool);
        assert_eq!(lw.folded_outputs, vec!["mask"]);
        assert_eq!(kernel_tensor(&lw, "mask"), (DType::F16, vec![3]));
        let got = run_raw(&lw, &[("x", x.clone())]);
        assert_eq!(got, vec![xb.clone(), vec![1u8; 6]]);
    }
    // Training with a nonzero ratio is random: refused.
    assert_eq!(
        err(compile(&m, &[("t", training(1))], &[("r", ratio(0.5))])),
        format!(
            "node 'Dropout_y' (Dropout): unsupported: training mode with ratio 0.5 (random; \
             inference, or a ratio of 0, only){LIST}"
        )
    );
}

#[test]
fn pad_edge_reflect_and_wrap_fold_exactly_on_an_int32_constant() {
    let x = HostTensor::ints(Elem::I32, vec![2, 3], vec![1, 2, 3, 4, 5, -6]);
    for (mode, row0, row1) in [
        ("edge", [1, 1, 1, 2, 3, 3, 3], [4, 4, 4, 5, -6, -6, -6]),
        ("reflect", [3, 2, 1, 2, 3, 2, 1], [-6, 5, 4, 5, -6, 5, 4]),
        ("wrap", [2, 3, 1, 2, 3, 1, 2], [5, -6, 4, 5, -6, 4, 5]),
    ] {
        let m = typed(
            &model(
                vec![node("Pad", &["x", "p"], &["y"], vec![("mode", A::S(mode))])],
                &[("x", &[2, 3])],
                &["y"],
                vec![ints("p", &[4], &[0, 2, 0, 2])],
                19,
            ),
            &[("x", data_type::INT32), ("y", data_type::INT32)],
        );
        let lw = compile(&m, &[("x", x.clone())], &[]).unwrap();
        assert_eq!(lw.outputs[0].shape, vec![2, 7]);
        assert_eq!(kernel_tensor(&lw, "y"), (DType::I32, vec![14]));
        let want: Vec<u8> = row0
            .iter()
            .chain(&row1)
            .flat_map(|v: &i32| v.to_le_bytes())
            .collect();
        assert_eq!(run_raw(&lw, &[]), vec![want], "{mode}");
    }
}

#[test]
fn an_empty_bool_max_is_false_and_an_empty_int8_min_is_127() {
    let m = typed(
        &model(
            vec![
                node("ReduceMax", &["b"], &["mx"], vec![("axes", A::Is(vec![1]))]),
                node("ReduceMin", &["i"], &["mn"], vec![("axes", A::Is(vec![1]))]),
            ],
            &[("b", &[2, 0]), ("i", &[2, 0])],
            &["mx", "mn"],
            vec![],
            13,
        ),
        &[
            ("b", data_type::BOOL),
            ("mx", data_type::BOOL),
            ("i", data_type::INT8),
            ("mn", data_type::INT8),
        ],
    );
    let lw = compile(
        &m,
        &[
            ("b", HostTensor::ints(Elem::Bool, vec![2, 0], vec![])),
            (
                "i",
                HostTensor::ints(Elem::OtherInt(data_type::INT8), vec![2, 0], vec![]),
            ),
        ],
        &[],
    )
    .unwrap();
    assert_eq!(run_raw(&lw, &[]), vec![vec![0u8, 0], vec![127u8, 127]]);
}

#[test]
fn outputs_the_device_cannot_hold_are_errors_naming_them() {
    // Three int8 values are 3 bytes: device tensors hold 2- or 4-byte elements.
    let m = typed(
        &model(
            vec![node("Max", &["a", "b"], &["z"], vec![])],
            &[("a", &[3]), ("b", &[3])],
            &["z"],
            vec![],
            13,
        ),
        &[
            ("a", data_type::INT8),
            ("b", data_type::INT8),
            ("z", data_type::INT8),
        ],
    );
    assert_eq!(
        err(compile(
            &m,
            &[("a", int8(&[1, 2, 3])), ("b", int8(&[3, 2, 1]))],
            &[]
        )),
        format!(
            "node 'output z' (graph output): unsupported: element type int8, 3 bytes (an odd \
             size: device tensors hold whole 2- or 4-byte elements){LIST}"
        )
    );
    // A comparison of run-time floats: a bool computed on the device.
    let m = typed(
        &model(
            vec![node("Greater", &["x", "y"], &["z"], vec![])],
            &[("x", &[4]), ("y", &[4])],
            &["z"],
            vec![],
            13,
        ),
        &[("z", data_type::BOOL)],
    );
    assert_eq!(
        err(compile(&m, &[], &[])),
        format!(
            "node 'Greater_z' (Greater): unsupported: graph output 'z' of element type bool \
             computed on the device (the device computes in floating point; integer and \
             boolean outputs must fold to constants on the host){LIST}"
        )
    );
}
