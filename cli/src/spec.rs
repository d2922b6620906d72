//! Model specs: a small TOML description of a model, compiled into a simulator NEFF (`nrt
//! build`, and `nrt run SPEC.toml`). Two kinds of layer list:
//!
//! * **Fixed patterns** (layers with operands `a`, `b`, `x`, `bias`), built by the
//!   `nrt_sim::engine::kernels` builders;
//! * **Graphs** (layers with `inputs` and `output`; see [`crate::graph`]): any sequence of
//!   `nrt_kernel::library` ops over named tensors, lowered into one kernel.
//!
//! ```toml
//! name = "mlp"
//! dtype = "bf16"                 # fp32 | bf16 | fp16 (int32 for add / mul)
//! output = "y_t"                 # name of the model's output (default "out")
//!
//! [tensors.x_t]
//! kind = "input"                 # input: given at run time; weight: baked into the NEFF
//! shape = [64, 32]
//! seed = 1                       # sample data (inputs) or the data (weights); or file = "x.npy"
//!
//! [[layers]]
//! op = "matmul"                  # out[M, N] = a[K, M]ᵀ · b[K, N]
//! a = "w1"
//! b = "x_t"                      # an omitted operand is the previous layer's output
//! ```
//!
//! Fixed-pattern layers: `matmul` (`a`, `b`), `add` / `mul` (`a`, `b`), `bias_activation` (`x`,
//! `bias`, `activation` = identity | relu | exp | tanh | gelu). The builders are fixed kernels,
//! so the layer list must be one of: a single `matmul`, `add`, `mul` or `bias_activation`, or
//! the two-layer MLP `matmul → bias_activation → matmul → bias_activation(identity)`
//! (feature-major: `x [d_in, batch]`, `w1 [d_in, hidden]`, `b1 [hidden]`, `w2 [hidden,
//! d_out]`, `b2 [d_out]`).
//!
//! Graph layers name their inputs and their output (`op = "matmul"`, `inputs = ["x", "w1"]`,
//! `output = "h"`, plus the op's attributes); intermediates are inferred, the model's outputs
//! are `outputs = [...]` (default `[output]`), and a tensor may feed several layers. The ops
//! and their attributes are listed in `examples/README.md`.
//!
//! Seeded data: element `i` of a tensor with seed `s` is `(2·u − 1)·scale` rounded to the
//! tensor's type (nearest even), where `u = (splitmix64(s, i) >> 40) / 2²⁴` and
//! `splitmix64(s, i)` is SplitMix64's output for state `s + (i + 1)·0x9E3779B97F4A7C15`:
//! `z = (z ^ z>>30)·0xBF58476D1CE4E5B9; z = (z ^ z>>27)·0x94D049BB133111EB; z ^ z>>31`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nrt_core::io::TensorInfo;
use nrt_sim::engine::{ActFunc, DType, Program, TensorKind, encode_f32, kernels};
use nrt_sim::neff::{neff_from_programs, nrt_dtype};
use serde::Deserialize;
use toml::Spanned;

use crate::error::{CliError, Context, Result, bail};
use crate::graph::{self, Plan};
use crate::tensors;

/// A parsed spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Spec {
    /// Model name (the NEFF's name).
    pub(crate) name: String,
    /// Free text, shown by `nrt build`.
    #[serde(default)]
    pub(crate) description: Option<String>,
    /// Element type of every tensor.
    #[serde(default = "default_dtype")]
    dtype: String,
    /// Element type of a matmul's output (default: `dtype`).
    #[serde(default)]
    output_dtype: Option<String>,
    /// Name of the model's output tensor.
    #[serde(default = "default_output")]
    output: String,
    /// Declared tensors by name.
    tensors: BTreeMap<String, TensorSpec>,
    /// Names of a graph spec's outputs (default: `[output]`).
    #[serde(default)]
    outputs: Option<Vec<String>>,
    /// The layers, in order, as written: classified by [`parse`] into `layers`.
    #[serde(rename = "layers")]
    raw_layers: Vec<Spanned<toml::Table>>,
    /// The layers: the fixed patterns, or a graph (layers with `inputs` and `output`).
    #[serde(skip)]
    layers: Layers,
}

/// A spec's layers: fixed-pattern layers (operands `a`, `b`, `x`, `bias`), or graph layers
/// (`inputs`, `output`; see [`crate::graph`]).
#[derive(Debug)]
enum Layers {
    Fixed(Vec<Layer>),
    Graph(Vec<graph::Node>),
}

impl Default for Layers {
    fn default() -> Self {
        Layers::Fixed(Vec::new())
    }
}

/// Classifies the raw layer tables: graph layers when any of them has `inputs` or `output`.
/// Errors start with `path:line:col` of the layer's table.
fn classify(raw: &[Spanned<toml::Table>], text: &str, path: &str) -> Result<Layers> {
    let at = |t: &Spanned<toml::Table>, e: CliError| {
        CliError::new(format!("{path}{}: {e}", position(text, t.span().start)))
    };
    if raw
        .iter()
        .any(|t| t.get_ref().contains_key("inputs") || t.get_ref().contains_key("output"))
    {
        return raw
            .iter()
            .enumerate()
            .map(|(i, t)| graph::parse_layer(i, t.get_ref()).map_err(|e| at(t, e)))
            .collect::<Result<Vec<graph::Node>>>()
            .map(Layers::Graph);
    }
    raw.iter()
        .enumerate()
        .map(|(i, t)| {
            Layer::deserialize(toml::Value::Table(t.get_ref().clone())).map_err(|e| {
                at(
                    t,
                    CliError::new(format!("layer {}: {}", i + 1, e.message().trim())),
                )
            })
        })
        .collect::<Result<Vec<Layer>>>()
        .map(Layers::Fixed)
}

/// `:line:col` of byte `offset` of `text`.
fn position(text: &str, offset: usize) -> String {
    let before = text.get(..offset).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!(":{line}:{col}")
}

fn default_dtype() -> String {
    "fp32".into()
}

fn default_output() -> String {
    "out".into()
}

fn default_scale() -> f64 {
    1.0
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Role {
    Input,
    Weight,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TensorSpec {
    kind: Role,
    #[serde(default)]
    shape: Option<Vec<u64>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    file: Option<PathBuf>,
    #[serde(default = "default_scale")]
    scale: f64,
}

#[derive(Debug, Deserialize, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Activation {
    #[default]
    Identity,
    Relu,
    Exp,
    Tanh,
    Gelu,
}

impl Activation {
    fn func(self) -> ActFunc {
        match self {
            Activation::Identity => ActFunc::Identity,
            Activation::Relu => ActFunc::Relu,
            Activation::Exp => ActFunc::Exp,
            Activation::Tanh => ActFunc::Tanh,
            Activation::Gelu => ActFunc::Gelu,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Layer {
    Matmul {
        a: Option<String>,
        b: Option<String>,
    },
    Add {
        a: Option<String>,
        b: Option<String>,
    },
    Mul {
        a: Option<String>,
        b: Option<String>,
    },
    BiasActivation {
        x: Option<String>,
        bias: Option<String>,
        #[serde(default)]
        activation: Activation,
    },
}

impl Layer {
    fn op(&self) -> &'static str {
        match self {
            Layer::Matmul { .. } => "matmul",
            Layer::Add { .. } => "add",
            Layer::Mul { .. } => "mul",
            Layer::BiasActivation { .. } => "bias_activation",
        }
    }
}

/// A layer operand: a declared tensor, or the previous layer's output.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Operand {
    Tensor(String),
    Prev,
}

/// A spec compiled to a program and a NEFF.
#[derive(Debug)]
pub(crate) struct Built {
    /// The simulator program.
    pub(crate) program: Program,
    /// The NEFF carrying it.
    pub(crate) neff: Vec<u8>,
    /// Which builder made it, with its dimensions.
    pub(crate) kernel: String,
    /// Sample data of the inputs that have a seed or a file, in the tensor's type.
    pub(crate) sample_inputs: BTreeMap<String, Vec<u8>>,
    /// Weights baked into the NEFF: name, type, shape.
    pub(crate) weights: Vec<(String, DType, Vec<u64>)>,
}

/// Parses a spec file's text; `path` names it in messages.
pub(crate) fn parse(text: &str, path: &str) -> Result<Spec> {
    let mut spec = toml::from_str::<Spec>(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| position(text, s.start))
            .unwrap_or_default();
        CliError::new(format!("{path}{at}: {}", e.message().trim()))
    })?;
    spec.layers = classify(&spec.raw_layers, text, path)?;
    Ok(spec)
}

/// Reads and compiles the spec at `path`.
pub(crate) fn build_file(path: &Path) -> Result<(Spec, Built)> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).context(|| format!("cannot read '{shown}'"))?;
    let spec = parse(&text, &shown)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let built = build(&spec, dir).map_err(|e| CliError::new(format!("{shown}: {e}")))?;
    Ok((spec, built))
}

fn dtype(s: &str) -> Result<DType> {
    Ok(match s {
        "fp32" | "float32" => DType::F32,
        "bf16" | "bfloat16" => DType::Bf16,
        "fp16" | "float16" => DType::F16,
        "int32" => DType::I32,
        other => bail!("unknown dtype '{other}' (expected fp32, bf16, fp16 or int32)"),
    })
}

/// SplitMix64's output for state `seed + (i + 1)·γ`.
pub(crate) fn splitmix64(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add(i.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeded values of a tensor (before rounding to its type): uniform in `[-scale, scale)`.
pub(crate) fn seeded_values(seed: u64, n: u64, scale: f64) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let u = (splitmix64(seed, i) >> 40) as f64 / (1u64 << 24) as f64;
            ((2.0 * u - 1.0) * scale) as f32
        })
        .collect()
}

/// Compiles `spec`; files named in it are relative to `dir`.
pub(crate) fn build(spec: &Spec, dir: &Path) -> Result<Built> {
    let dt = dtype(&spec.dtype)?;
    let out_dt = match &spec.output_dtype {
        Some(s) => dtype(s)?,
        None => dt,
    };
    if spec.raw_layers.is_empty() {
        bail!("the spec has no layers");
    }
    // Shapes: declared, or taken from the tensor's file.
    let mut shapes: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    let mut file_data: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    for (name, t) in &spec.tensors {
        if t.seed.is_some() && t.file.is_some() {
            bail!("tensor '{name}': give a seed or a file, not both");
        }
        if t.kind == Role::Weight && t.seed.is_none() && t.file.is_none() {
            bail!("weight '{name}' needs a seed or a file");
        }
        if !t.scale.is_finite() {
            bail!("tensor '{name}': scale must be a finite number");
        }
        let shape = match (&t.shape, &t.file) {
            (_, Some(f)) => {
                let path = dir.join(f);
                let shown = path.display().to_string();
                let bytes = std::fs::read(&path).context(|| format!("cannot read '{shown}'"))?;
                let a = crate::npy::parse(&bytes)
                    .map_err(|e| CliError::new(format!("tensor '{name}': {shown}: {e}")))?;
                if let Some(s) = &t.shape {
                    if *s != a.shape {
                        bail!(
                            "tensor '{name}': {shown} has shape {}, the spec says {}",
                            tensors::shape_str(&a.shape),
                            tensors::shape_str(s)
                        );
                    }
                }
                let info = tensor_info(name, dt, &a.shape)?;
                let data = tensors::from_npy(&info, &a, &shown)?;
                file_data.insert(name, data);
                a.shape
            }
            (Some(s), None) => s.clone(),
            (None, None) => bail!("tensor '{name}' needs a shape"),
        };
        shapes.insert(name, shape);
    }
    if spec.outputs.is_none() && spec.tensors.contains_key(&spec.output) {
        bail!(
            "the output '{}' has the name of a declared tensor",
            spec.output
        );
    }

    let (mut program, renames, kernel) = match &spec.layers {
        Layers::Fixed(layers) => {
            if spec.outputs.is_some() {
                bail!("'outputs' is for graph specs (layers with inputs and output)");
            }
            plan(spec, layers, dt, out_dt, &shapes)?
        }
        Layers::Graph(nodes) => {
            if spec.output_dtype.is_some() {
                bail!("output_dtype is only supported for a single matmul layer");
            }
            let outputs = match &spec.outputs {
                Some(o) => o.clone(),
                None => vec![spec.output.clone()],
            };
            graph::build(&spec.name, nodes, &outputs, dt, &shapes)?
        }
    };
    let graph = matches!(spec.layers, Layers::Graph(_));

    // Every declared tensor must be used, and (fixed patterns) used once: the kernels'
    // tensors are distinct.
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, spec_name) in &renames {
        *used.entry(spec_name.as_str()).or_default() += 1;
    }
    for name in spec.tensors.keys() {
        match used.get(name.as_str()) {
            None => bail!("tensor '{name}' is declared but no layer uses it"),
            Some(&n) if n > 1 && !graph => {
                bail!("tensor '{name}' is used by {n} operands; each operand needs its own tensor")
            }
            Some(_) => {}
        }
    }

    // Rename the kernel's tensors to the spec's names and bake the weights in.
    let mut sample_inputs = BTreeMap::new();
    let mut weights = Vec::new();
    for (kernel_name, spec_name) in &renames {
        let Some(idx) = program.tensor_index(kernel_name) else {
            bail!("internal: the {kernel} kernel has no tensor '{kernel_name}'");
        };
        let Some(decl) = program.tensors.get_mut(idx) else {
            bail!("internal: tensor index {idx} out of range");
        };
        decl.name.clone_from(spec_name);
        if decl.kind == TensorKind::Output {
            continue;
        }
        let Some(t) = spec.tensors.get(spec_name) else {
            continue;
        };
        let n = decl.shape.iter().product::<u64>();
        let data = match (t.seed, file_data.remove(spec_name.as_str())) {
            (_, Some(d)) => Some(d),
            (Some(seed), None) => Some(encode_f32(decl.dtype, &seeded_values(seed, n, t.scale))),
            (None, None) => None,
        };
        match (t.kind, data) {
            (Role::Weight, Some(d)) => {
                decl.kind = TensorKind::Const;
                decl.data = d;
                weights.push((spec_name.clone(), decl.dtype, decl.shape.clone()));
            }
            (Role::Input, Some(d)) => {
                sample_inputs.insert(spec_name.clone(), d);
            }
            _ => {}
        }
    }
    program.name.clone_from(&spec.name);
    program
        .validate()
        .map_err(|e| CliError::new(format!("the built program is invalid: {}", e.message())))?;
    let neff = neff_from_programs(&spec.name, std::slice::from_ref(&program))
        .map_err(|e| CliError::new(format!("cannot write the NEFF: {}", e.message())))?;
    Ok(Built {
        program,
        neff,
        kernel,
        sample_inputs,
        weights,
    })
}

fn tensor_info(name: &str, dt: DType, shape: &[u64]) -> Result<TensorInfo> {
    let shape32 = shape
        .iter()
        .map(|&d| {
            u32::try_from(d).map_err(|_| CliError::new(format!("tensor '{name}' is too large")))
        })
        .collect::<Result<Vec<u32>>>()?;
    let elems = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    Ok(TensorInfo {
        name: name.into(),
        size: elems
            .and_then(|e| e.checked_mul(dt.size() as u64))
            .ok_or_else(|| CliError::new(format!("tensor '{name}' is too large")))?,
        dtype: nrt_dtype(dt),
        shape: shape32,
    })
}

/// The (kernel tensor → spec name) pairs with owned names.
fn names(v: Vec<(&str, String)>) -> Vec<(String, String)> {
    v.into_iter().map(|(k, s)| (k.to_owned(), s)).collect()
}

/// Chooses the kernel for the layer list. Returns the program, (kernel tensor → spec name)
/// for every operand and the output, and a description of the kernel.
fn plan(
    spec: &Spec,
    layers: &[Layer],
    dt: DType,
    out_dt: DType,
    shapes: &BTreeMap<&str, Vec<u64>>,
) -> Result<Plan> {
    let operand = |layer: usize, field: &str, v: &Option<String>| -> Result<Operand> {
        match v {
            Some(name) if shapes.contains_key(name.as_str()) => Ok(Operand::Tensor(name.clone())),
            Some(name) => bail!(
                "layer {} ({}): operand {field} = '{name}' is not a declared tensor",
                layer + 1,
                layers.get(layer).map_or("?", Layer::op)
            ),
            None if layer == 0 => bail!(
                "layer 1 ({}): operand '{field}' must name a tensor (there is no previous layer)",
                layers.first().map_or("?", Layer::op)
            ),
            None => Ok(Operand::Prev),
        }
    };
    let tensor = |layer: usize, field: &str, v: &Option<String>| -> Result<String> {
        match operand(layer, field, v)? {
            Operand::Tensor(n) => Ok(n),
            Operand::Prev => bail!(
                "layer {} ({}): operand '{field}' must name a tensor",
                layer + 1,
                layers.get(layer).map_or("?", Layer::op)
            ),
        }
    };
    let shape = |name: &str| shapes.get(name).cloned().unwrap_or_default();
    let dims2 = |name: &str, what: &str| -> Result<(u64, u64)> {
        match shape(name).as_slice() {
            [a, b] => Ok((*a, *b)),
            s => bail!(
                "{what} '{name}' must have 2 dimensions, it has shape {}",
                tensors::shape_str(s)
            ),
        }
    };
    let dims1 = |name: &str, what: &str| -> Result<u64> {
        match shape(name).as_slice() {
            [a] => Ok(*a),
            s => bail!(
                "{what} '{name}' must have 1 dimension, it has shape {}",
                tensors::shape_str(s)
            ),
        }
    };
    let sim = |e: nrt_core::Error| CliError::new(e.message().to_owned());
    let out = spec.output.clone();
    if out_dt != dt && !matches!(layers, [Layer::Matmul { .. }]) {
        bail!("output_dtype is only supported for a single matmul layer");
    }

    match layers {
        [Layer::Matmul { a, b }] => {
            let (a, b) = (tensor(0, "a", a)?, tensor(0, "b", b)?);
            let (k, m) = dims2(&a, "matmul operand a")?;
            let (k2, n) = dims2(&b, "matmul operand b")?;
            if k != k2 {
                bail!(
                    "matmul: a '{a}' is [K={k}, M={m}] and b '{b}' is [{k2}, {n}]: their first \
                     dimensions (K) must agree"
                );
            }
            let p = kernels::matmul(m, k, n, dt, out_dt).map_err(sim)?;
            let desc = format!("matmul M={m} K={k} N={n} ({dt} → {out_dt})");
            Ok((p, names(vec![("lhs_t", a), ("rhs", b), ("out", out)]), desc))
        }
        [Layer::Add { a, b }] | [Layer::Mul { a, b }] => {
            let op = if matches!(layers.first(), Some(Layer::Add { .. })) {
                kernels::Elementwise::Add
            } else {
                kernels::Elementwise::Mul
            };
            let (a, b) = (tensor(0, "a", a)?, tensor(0, "b", b)?);
            let (rows, cols) = dims2(&a, "operand a")?;
            if shape(&b) != [rows, cols] {
                bail!(
                    "operands '{a}' {} and '{b}' {} must have the same shape",
                    tensors::shape_str(&shape(&a)),
                    tensors::shape_str(&shape(&b))
                );
            }
            let p = kernels::elementwise(op, rows, cols, dt).map_err(sim)?;
            let desc = format!("elementwise {op:?} {rows}×{cols} ({dt})").to_lowercase();
            Ok((p, names(vec![("a", a), ("b", b), ("out", out)]), desc))
        }
        [
            Layer::BiasActivation {
                x,
                bias,
                activation,
            },
        ] => {
            let (x, bias) = (tensor(0, "x", x)?, tensor(0, "bias", bias)?);
            let (f, n) = dims2(&x, "operand x")?;
            if dims1(&bias, "bias")? != f {
                bail!("bias '{bias}' must have shape [{f}] (one value per row of '{x}')");
            }
            let p = kernels::bias_activation(activation.func(), f, n, dt).map_err(sim)?;
            let desc = format!("bias_activation {activation:?} {f}×{n} ({dt})").to_lowercase();
            Ok((p, names(vec![("x", x), ("bias", bias), ("out", out)]), desc))
        }
        [
            Layer::Matmul { a: w1, b: x },
            Layer::BiasActivation {
                x: h1,
                bias: b1,
                activation,
            },
            Layer::Matmul { a: w2, b: h2 },
            Layer::BiasActivation {
                x: y1,
                bias: b2,
                activation: last,
            },
        ] => {
            let w1 = tensor(0, "a", w1)?;
            let x = tensor(0, "b", x)?;
            let b1 = tensor(1, "bias", b1)?;
            let w2 = tensor(2, "a", w2)?;
            let b2 = tensor(3, "bias", b2)?;
            for (layer, field, v) in [(1, "x", h1), (2, "b", h2), (3, "x", y1)] {
                if operand(layer, field, v)? != Operand::Prev {
                    bail!(
                        "layer {} ({}): the MLP takes operand '{field}' from the previous layer; \
                         leave it out",
                        layer + 1,
                        layers.get(layer).map_or("?", Layer::op)
                    );
                }
            }
            if *last != Activation::Identity {
                bail!(
                    "layer 4 (bias_activation): the MLP builder's last layer has no activation \
                     (use activation = \"identity\")"
                );
            }
            let (d_in, batch) = dims2(&x, "MLP input")?;
            let (k1, hidden) = dims2(&w1, "weight")?;
            let (k2, d_out) = dims2(&w2, "weight")?;
            if k1 != d_in {
                bail!("'{w1}' must be [{d_in}, hidden] to multiply '{x}' [{d_in}, {batch}]");
            }
            if k2 != hidden {
                bail!("'{w2}' must be [{hidden}, d_out] (its first dimension is the hidden size)");
            }
            if dims1(&b1, "bias")? != hidden {
                bail!("bias '{b1}' must have shape [{hidden}]");
            }
            if dims1(&b2, "bias")? != d_out {
                bail!("bias '{b2}' must have shape [{d_out}]");
            }
            let p = kernels::mlp(batch, d_in, hidden, d_out, dt, activation.func()).map_err(sim)?;
            let desc = format!(
                "mlp batch={batch} d_in={d_in} hidden={hidden} d_out={d_out} {activation:?} ({dt})"
            )
            .to_lowercase();
            Ok((
                p,
                names(vec![
                    ("x_t", x),
                    ("w1", w1),
                    ("b1", b1),
                    ("w2", w2),
                    ("b2", b2),
                    ("y_t", out),
                ]),
                desc,
            ))
        }
        layers => {
            let ops: Vec<&str> = layers.iter().map(Layer::op).collect();
            bail!(
                "unsupported layer sequence [{}]: the builders support a single matmul, add, mul \
                 or bias_activation layer, or the two-layer MLP [matmul, bias_activation, matmul, \
                 bias_activation]; other sequences are written as a graph (layers with inputs and \
                 output)",
                ops.join(", ")
            )
        }
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
