//! Graph inputs and outputs beyond fp32 tensors: float inputs bound at build time when an
//! operator needs them constant, float16 inputs and outputs, Casts to narrower floats, empty
//! tensors, LayerNormalization's statistics outputs, host folding of constants.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;

use common::{A, floats, model, node};
use nrt_onnx::proto::{ModelProto, data_type};
use nrt_onnx::{Elem, HostTensor, Lowered, Precision};
use nrt_sim::Instance;
use nrt_sim::engine::{DType, Device, ExecOptions, decode_f32, encode_f32};
use prost::Message;

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

/// Compiles with float input values known at build time.
fn compile_values(bytes: &[u8], values: &[(&str, &[usize], &[f64])]) -> nrt_onnx::Result<Lowered> {
    let m = nrt_onnx::import(bytes).unwrap();
    let values: HashMap<String, HostTensor> = values
        .iter()
        .map(|(n, s, v)| {
            (
                (*n).to_owned(),
                HostTensor::floats(Elem::F32, s.to_vec(), v.to_vec()),
            )
        })
        .collect();
    nrt_onnx::compile_values(
        &m,
        &HashMap::new(),
        &HashMap::new(),
        &values,
        Precision::Fp32,
    )
}

/// Runs a lowered model: inputs in their kernel tensors' dtypes, outputs decoded from theirs.
fn exec(lw: Lowered, inputs: &[(&str, Vec<f32>)]) -> Vec<Vec<f32>> {
    let ins: Vec<(String, Vec<u8>)> = inputs
        .iter()
        .map(|(n, v)| {
            let io = lw.inputs.iter().find(|i| i.name == *n).expect("input");
            (n.to_string(), encode_f32(nrt_onnx::io_dtype(io.elem), v))
        })
        .collect();
    let outs: Vec<(String, DType)> = lw
        .outputs
        .iter()
        .map(|o| (o.name.clone(), nrt_onnx::io_dtype(o.elem)))
        .collect();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, lw.program).expect("load");
    let refs: Vec<(&str, &[u8])> = ins.iter().map(|(n, b)| (n.as_str(), &b[..])).collect();
    let (got, report) = dev.run(&lp, &refs, &ExecOptions::default()).expect("run");
    assert!(report.hazards.is_empty(), "hazards: {:?}", report.hazards);
    outs.iter()
        .map(|(n, dt)| {
            let (_, b) = got.iter().find(|(o, _)| o == n).expect("output");
            decode_f32(*dt, b)
        })
        .collect()
}

#[test]
fn float_inputs_an_operator_needs_constant_are_bound_when_given() {
    // y = Gemm(x, B, C): C a graph input; z = Clip(y, lo, hi): bounds graph inputs.
    let b: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let m = model(
        vec![
            node("Gemm", &["x", "B", "C"], &["y"], vec![]),
            node("Clip", &["y", "lo", "hi"], &["z"], vec![]),
        ],
        &[("x", &[2, 3]), ("C", &[2]), ("lo", &[]), ("hi", &[])],
        &["z"],
        vec![floats("B", &[3, 2], &b)],
        13,
    );
    // Not given: the first operator needing one says so.
    let e = compile_values(&m, &[]).unwrap_err().to_string();
    assert_eq!(
        e,
        "node 'Gemm_y' (Gemm): unsupported: C (input 2) computed at run time; only constants \
         (supported operators: docs/ONNX.md, \"Supported operators\")"
    );
    // Given: C, lo and hi bound in the order the analysis needs them; x stays an input.
    let lw = compile_values(
        &m,
        &[
            ("C", &[2], &[10.0, -10.0]),
            ("lo", &[], &[0.0]),
            ("hi", &[], &[30.0]),
            ("x", &[2, 3], &[0.0; 6]),
        ],
    )
    .unwrap();
    assert_eq!(lw.bound, vec!["C", "lo", "hi"]);
    assert_eq!(
        lw.inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["x"]
    );
    let x = vec![1.0, 0.0, -1.0, 2.0, 1.0, 1.0];
    // x·B = [[1-5, 2-6], [2+3+5, 4+4+6]] = [[-4, -4], [10, 14]]; + C; clipped to [0, 30].
    assert_eq!(exec(lw, &[("x", x)]), vec![vec![6.0, 0.0, 20.0, 4.0]]);
}

#[test]
fn float16_inputs_and_outputs_are_fp16_kernel_tensors() {
    let m = typed(
        &model(
            vec![node("Relu", &["x"], &["y"], vec![])],
            &[("x", &[4])],
            &["y"],
            vec![],
            13,
        ),
        &[("x", data_type::FLOAT16), ("y", data_type::FLOAT16)],
    );
    let lw = compile_values(&m, &[]).unwrap();
    assert_eq!(
        (lw.inputs[0].elem, lw.outputs[0].elem),
        (Elem::F16, Elem::F16)
    );
    assert_eq!(lw.nodes[0].op, "Cast to fp32");
    let y = exec(lw, &[("x", vec![1.5, -2.25, 65504.0, 0.000_061_035_156])]);
    assert_eq!(y, vec![vec![1.5, 0.0, 65504.0, 0.000_061_035_156]]);
}

#[test]
fn casts_to_float16_round_and_float_casts_change_the_declared_type() {
    // y = Cast(Cast(x, f16), f32): rounded to float16 on the device; z = Cast(x, f64).
    let m = typed(
        &model(
            vec![
                node("Cast", &["x"], &["h"], vec![("to", A::I(10))]),
                node("Cast", &["h"], &["y"], vec![("to", A::I(1))]),
                node("Cast", &["x"], &["z"], vec![("to", A::I(11))]),
            ],
            &[("x", &[3])],
            &["y", "z"],
            vec![],
            13,
        ),
        &[("z", data_type::DOUBLE)],
    );
    let lw = compile_values(&m, &[]).unwrap();
    assert_eq!(lw.outputs[1].elem, Elem::F64);
    let x = vec![1.0001, 0.1, -3.0];
    let got = exec(lw, &[("x", x.clone())]);
    // float16 has 10 fraction bits: 1.0001 → 1, 0.1 → 0.0999755859375.
    assert_eq!(got[0], vec![1.0, 0.099_975_586, -3.0]);
    // float64 outputs are the fp32 results (widened by a runner).
    assert_eq!(got[1], x);
}

#[test]
fn empty_tensors_are_constants_and_empty_outputs_are_listed() {
    // s = ReduceSum(e) over its empty axis, q = Split(x, [3, 0]) then Concat(q0, q1, q1).
    let mut p = ModelProto::decode(
        &model(
            vec![
                node("ReduceSum", &["e"], &["s"], vec![("keepdims", A::I(1))]),
                node(
                    "Split",
                    &["x"],
                    &["q0", "q1"],
                    vec![("axis", A::I(0)), ("split", A::Is(vec![3, 0]))],
                ),
                node(
                    "Concat",
                    &["q1", "q0", "q1"],
                    &["c"],
                    vec![("axis", A::I(0))],
                ),
            ],
            &[("e", &[2, 0]), ("x", &[3])],
            &["s", "c", "q1"],
            vec![],
            11,
        )[..],
    )
    .unwrap();
    p.graph.as_mut().unwrap().node[0]
        .attribute
        .push(nrt_onnx::proto::AttributeProto {
            name: Some("axes".into()),
            r#type: Some(nrt_onnx::proto::attr_type::INTS),
            ints: vec![1],
            ..Default::default()
        });
    let lw = compile_values(&p.encode_to_vec(), &[]).unwrap();
    assert_eq!(
        lw.inputs
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>(),
        ["x"]
    );
    assert_eq!(lw.bound, vec!["e"]);
    assert_eq!(lw.empty_outputs.len(), 1);
    assert_eq!(
        (
            lw.empty_outputs[0].name.as_str(),
            &lw.empty_outputs[0].shape
        ),
        ("q1", &vec![0])
    );
    let got = exec(lw, &[("x", vec![1.0, 2.0, 3.0])]);
    assert_eq!(got, vec![vec![0.0, 0.0], vec![1.0, 2.0, 3.0]]);
}

#[test]
fn layernorm_mean_and_inv_std_dev_outputs() {
    let m = model(
        vec![node(
            "LayerNormalization",
            &["x"],
            &["y", "mean", "inv"],
            vec![("axis", A::I(-1)), ("epsilon", A::F(0.0))],
        )],
        &[("x", &[2, 4])],
        &["y", "mean", "inv"],
        vec![],
        17,
    );
    let lw = compile_values(&m, &[]).unwrap();
    assert_eq!(lw.outputs[1].shape, vec![2, 1]);
    let got = exec(lw, &[("x", vec![1.0, 3.0, 1.0, 3.0, 0.0, 4.0, 0.0, 4.0])]);
    assert_eq!(
        got,
        vec![
            vec![-1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0],
            vec![2.0, 2.0],
            vec![1.0, 0.5],
        ]
    );
}

#[test]
fn activations_and_reductions_of_constants_fold_on_the_host() {
    let m = model(
        vec![
            node("Neg", &["k"], &["n"], vec![]),
            node(
                "Clip",
                &["n"],
                &["c"],
                vec![("min", A::F(-2.5)), ("max", A::F(1.0))],
            ),
            node("ReduceMax", &["c"], &["r"], vec![("keepdims", A::I(0))]),
            node("Add", &["x", "r"], &["y"], vec![]),
        ],
        &[("x", &[3])],
        &["y", "c"],
        vec![floats("k", &[3], &[-4.0, 0.5, 3.0])],
        6,
    );
    let lw = compile_values(&m, &[]).unwrap();
    assert_eq!(lw.folded, 3);
    // Neg → [4, -0.5, -3]; clipped → [1, -0.5, -2.5]; max → 1.
    let got = exec(lw, &[("x", vec![0.0, 1.0, 2.0])]);
    assert_eq!(got, vec![vec![1.0, 2.0, 3.0], vec![1.0, -0.5, -2.5]]);
}

#[test]
fn pow_takes_the_base_type_so_an_integer_base_gives_an_integer_output() {
    // z = Pow(b, e): b an int64 input (bound at build time), e a float input. The output is
    // int64 (the base's type), which the device cannot produce: a clear error, not floats.
    let m = typed(
        &model(
            vec![node("Pow", &["b", "e"], &["z"], vec![])],
            &[("b", &[2]), ("e", &[2])],
            &["z"],
            vec![],
            15,
        ),
        &[("b", data_type::INT64), ("z", data_type::INT64)],
    );
    let model = nrt_onnx::import(&m).unwrap();
    let bound = HashMap::from([(
        "b".to_owned(),
        HostTensor::ints(Elem::I64, vec![2], vec![2, 3]),
    )]);
    let e = nrt_onnx::compile_bound(&model, &HashMap::new(), &bound, Precision::Fp32)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "node 'Pow_z' (Pow): unsupported: graph output 'z' of element type int64 computed on \
         the device (the device computes in floating point; integer and boolean outputs must \
         fold to constants on the host) (supported operators: docs/ONNX.md, \"Supported \
         operators\")"
    );
}

#[test]
fn an_output_that_is_an_input_or_listed_twice_is_refused_by_name() {
    let compile_err = |bytes: Vec<u8>| -> String {
        let m = nrt_onnx::import(&bytes).unwrap();
        match nrt_onnx::compile(&m, &HashMap::new(), Precision::Fp32) {
            Ok(_) => panic!("compiled"),
            Err(e) => e.to_string(),
        }
    };
    let passthrough = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        &[("x", &[2, 3])],
        &["y", "x"],
        vec![],
        13,
    );
    assert_eq!(
        compile_err(passthrough),
        "node 'output x' (graph output): unsupported: a graph output that is a graph input \
         itself (a NEFF names each tensor once; read the input, or give the output its own \
         name with an Identity node) (supported operators: docs/ONNX.md, \"Supported operators\")"
    );
    let twice = model(
        vec![node("Relu", &["x"], &["y"], vec![])],
        &[("x", &[2, 3])],
        &["y", "y"],
        vec![],
        13,
    );
    assert_eq!(
        compile_err(twice),
        "invalid model: graph output 'y' is listed twice"
    );
}
