//! Unit tests of `spec.rs` (the fixed-pattern specs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

const MLP: &str = r#"
name = "mlp"
dtype = "bf16"
output = "y"
[tensors.x]
kind = "input"
shape = [8, 4]
seed = 1
[tensors.w1]
kind = "weight"
shape = [8, 6]
seed = 2
[tensors.b1]
kind = "weight"
shape = [6]
seed = 3
[tensors.w2]
kind = "weight"
shape = [6, 3]
seed = 4
[tensors.b2]
kind = "weight"
shape = [3]
seed = 5
[[layers]]
op = "matmul"
a = "w1"
b = "x"
[[layers]]
op = "bias_activation"
bias = "b1"
activation = "relu"
[[layers]]
op = "matmul"
a = "w2"
[[layers]]
op = "bias_activation"
bias = "b2"
"#;

fn try_build(text: &str) -> Result<Built> {
    build(&parse(text, "t.toml")?, Path::new("."))
}

#[test]
fn builds_the_mlp_with_weights_baked_in() {
    let b = try_build(MLP).unwrap();
    assert!(
        b.kernel.starts_with("mlp batch=4 d_in=8 hidden=6 d_out=3"),
        "{}",
        b.kernel
    );
    let kinds: Vec<(&str, TensorKind)> = b
        .program
        .tensors
        .iter()
        .map(|t| (t.name.as_str(), t.kind))
        .collect();
    assert!(kinds.contains(&("x", TensorKind::Input)));
    assert!(kinds.contains(&("w1", TensorKind::Const)));
    assert!(kinds.contains(&("y", TensorKind::Output)));
    assert_eq!(b.sample_inputs.len(), 1);
    assert_eq!(b.sample_inputs["x"].len(), 8 * 4 * 2);
    assert_eq!(b.weights.len(), 4);
    let neff = nrt_core::neff::parse(&b.neff, &Default::default()).unwrap();
    let names: Vec<&str> = neff.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["x", "y"]);
}

#[test]
fn seeded_values_are_documented_splitmix() {
    // SplitMix64 from state 0: first output 0xE220A8397B1DCDAF.
    assert_eq!(splitmix64(0, 0), 0xE220_A839_7B1D_CDAF);
    let v = seeded_values(0, 1, 1.0);
    let u = (0xE220_A839_7B1D_CDAFu64 >> 40) as f64 / 16_777_216.0;
    assert_eq!(v[0], (2.0 * u - 1.0) as f32);
    assert!(
        seeded_values(9, 1000, 2.0)
            .iter()
            .all(|x| (-2.0..2.0).contains(x))
    );
}

#[test]
fn refuses_bad_specs_with_clear_messages() {
    let cases = [
        (
            MLP.replace("activation = \"relu\"", "activation = \"swish\""),
            "t.toml:",
        ),
        (
            MLP.replace("a = \"w2\"", "a = \"w3\""),
            "operand a = 'w3' is not a declared tensor",
        ),
        (
            MLP.replace("shape = [6, 3]", "shape = [7, 3]"),
            "'w2' must be [6, d_out]",
        ),
        (
            MLP.replace("dtype = \"bf16\"", "dtype = \"fp64\""),
            "unknown dtype 'fp64'",
        ),
        (
            MLP.replace(
                "op = \"bias_activation\"\nbias = \"b2\"\n",
                "op = \"add\"\nb = \"b2\"\n",
            ),
            "unsupported layer sequence [matmul, bias_activation, matmul, add]",
        ),
        (
            MLP.replace("seed = 4\n", ""),
            "weight 'w2' needs a seed or a file",
        ),
        (
            MLP.replace("output = \"y\"", "output = \"x\""),
            "has the name of a declared tensor",
        ),
        (
            MLP.replace("name = \"mlp\"", "name = \"mlp\"\ncolour = 1"),
            "unknown field",
        ),
        (
            MLP.replace(
                "[[layers]]\nop = \"matmul\"\na = \"w1\"\nb = \"x\"",
                "[[layers]]\nop = \"matmul\"\na = \"w1\"",
            ),
            "operand 'b' must name a tensor",
        ),
    ];
    for (text, want) in cases {
        let e = try_build(&text).unwrap_err().to_string();
        assert!(e.contains(want), "{e:?} should contain {want:?}");
    }
}

#[test]
fn weights_and_inputs_from_npy_files() {
    let dir = tempfile::tempdir().unwrap();
    let npy = |name: &str, shape: Vec<u64>, vals: &[f32]| {
        let a = crate::npy::NpyArray {
            descr: "<f4".into(),
            shape,
            data: vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        std::fs::write(dir.path().join(name), crate::npy::to_bytes(&a).unwrap()).unwrap();
    };
    npy("a.npy", vec![2, 2], &[1.0, 2.0, 3.0, 4.0]);
    npy("b.npy", vec![2, 2], &[0.5, 0.5, 0.5, 0.5]);
    let text = r#"
name = "add"
[tensors.x]
kind = "input"
file = "a.npy"
[tensors.w]
kind = "weight"
file = "b.npy"
[[layers]]
op = "add"
a = "x"
b = "w"
"#;
    let b = build(&parse(text, "s.toml").unwrap(), dir.path()).unwrap();
    let x: Vec<f32> = b.sample_inputs["x"]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(x, [1.0, 2.0, 3.0, 4.0]);
    let w = &b.program.tensors[b.program.tensor_index("w").unwrap()];
    assert_eq!(w.kind, TensorKind::Const);
    assert_eq!(w.data.len(), 16);
    let wrong = text.replace("file = \"a.npy\"", "file = \"a.npy\"\nshape = [4]");
    let e = build(&parse(&wrong, "s.toml").unwrap(), dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("has shape [2, 2], the spec says [4]"), "{e}");
    let missing = text.replace("b.npy", "c.npy");
    let e = build(&parse(&missing, "s.toml").unwrap(), dir.path())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot read") && e.contains("c.npy"), "{e}");
}

#[test]
fn parse_errors_name_line_and_column() {
    let e = parse("name = \"x\"\nlayers = 3\n", "s.toml")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("s.toml:2:"), "{e}");
    assert!(!e.contains('\n'));
}

#[test]
fn builds_single_layer_kernels() {
    let mm = r#"
name = "mm"
dtype = "bf16"
output_dtype = "fp32"
[tensors.a]
kind = "input"
shape = [4, 3]
[tensors.b]
kind = "weight"
shape = [4, 5]
seed = 1
[[layers]]
op = "matmul"
a = "a"
b = "b"
"#;
    let b = try_build(mm).unwrap();
    assert!(b.sample_inputs.is_empty());
    let out = &b.program.tensors[b.program.tensor_index("out").unwrap()];
    assert_eq!((out.dtype, out.shape.clone()), (DType::F32, vec![3, 5]));
    let add = mm
        .replace("op = \"matmul\"", "op = \"add\"")
        .replace("output_dtype = \"fp32\"\n", "")
        .replace("shape = [4, 5]", "shape = [4, 3]");
    assert!(
        try_build(&add)
            .unwrap()
            .kernel
            .starts_with("elementwise add 4×3")
    );
    let unused = mm.replace("b = \"b\"\n", "b = \"a\"\n");
    let e = try_build(&unused).unwrap_err().to_string();
    assert!(e.contains("tensor 'a' is used by 2 operands"), "{e}");
    let unused = mm.replace(
        "[[layers]]",
        "[tensors.c]\nkind = \"input\"\nshape = [1]\n[[layers]]",
    );
    let e = try_build(&unused).unwrap_err().to_string();
    assert!(
        e.contains("tensor 'c' is declared but no layer uses it"),
        "{e}"
    );
}
