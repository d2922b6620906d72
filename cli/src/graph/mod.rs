//! Graph specs: layers that name their inputs and their output,
//!
//! ```toml
//! [[layers]]
//! op = "matmul"
//! inputs = ["x", "w1"]
//! output = "h"
//! transpose_b = false          # per-op attributes
//! ```
//!
//! any sequence of library operations over named tensors. [`parse_layer`] reads a layer
//! table (the op, its inputs, its output, its attributes: `ops.rs`, `attrs.rs`); [`build`]
//! checks the graph — every input a declared tensor or an earlier layer's output, every
//! output new, every shape inferred and checked, every intermediate used — and lowers the
//! whole graph into one kernel program (`lower.rs`): declared tensors are kernel inputs (the
//! spec bakes the weights in afterwards), the model's outputs kernel outputs, the other
//! intermediates HBM scratch tensors (a reshape or flatten of one is a view of it, no copy).

mod attrs;
mod lower;
mod ops;

use std::collections::BTreeMap;

use nrt_core::Error;
use nrt_kernel::{DType, Kernel, Program, View};

use crate::error::{CliError, Result, bail};
use attrs::Attrs;
pub(crate) use ops::Op;

/// A kernel's program, (kernel tensor → spec name) pairs, and a description.
pub(crate) type Plan = (Program, Vec<(String, String)>, String);

/// One graph layer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    /// `layer N (op)`, for messages.
    label: String,
    /// The op's name as written.
    name: String,
    op: Op,
    inputs: Vec<String>,
    output: String,
}

/// Reads one graph layer table (the `i`-th, from 0): `op`, `inputs` (a list of tensor
/// names), `output` (a name), the op's attributes. Errors name the layer.
pub(crate) fn parse_layer(i: usize, t: &toml::Table) -> Result<Node> {
    let op_name = match t.get("op") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => bail!("layer {}: 'op' must be a string", i + 1),
        None => bail!("layer {}: missing 'op'", i + 1),
    };
    let label = format!("layer {} ({op_name})", i + 1);
    let inputs = match t.get("inputs") {
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| CliError::new(format!("{label}: 'inputs' must be a list of names")))?,
        Some(_) => bail!("{label}: 'inputs' must be a list of names"),
        None => bail!("{label}: missing 'inputs' (a graph layer names its inputs and its output)"),
    };
    let output = match t.get("output") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => bail!("{label}: 'output' must be a name"),
        None => bail!("{label}: missing 'output' (a graph layer names its inputs and its output)"),
    };
    let mut rest = t.clone();
    for k in ["op", "inputs", "output"] {
        rest.remove(k);
    }
    let mut a = Attrs::new(&rest);
    let in_label = |e: CliError| CliError::new(format!("{label}: {e}"));
    let op = Op::parse(&op_name, &mut a)
        .map_err(in_label)?
        .ok_or_else(|| {
            CliError::new(format!(
                "{label}: unknown op '{op_name}' (expected one of: {})",
                ops::names()
            ))
        })?;
    a.finish().map_err(in_label)?;
    let (lo, hi) = op.arity();
    if inputs.len() < lo || inputs.len() > hi {
        let want = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo} to {hi}")
        };
        let plural = if hi == 1 { "input" } else { "inputs" };
        bail!("{label}: takes {want} {plural}, got {}", inputs.len());
    }
    Ok(Node {
        label,
        name: op_name,
        op,
        inputs,
        output,
    })
}

/// Checks the graph and lowers it into one kernel: `declared` are the spec's tensors and
/// shapes, `outputs` the model's outputs, `dt` every tensor's type. Returns the program, the
/// (kernel tensor → spec name) pairs (identity: the kernel uses the spec's names) and a
/// description.
pub(crate) fn build(
    name: &str,
    nodes: &[Node],
    outputs: &[String],
    dt: DType,
    declared: &BTreeMap<&str, Vec<u64>>,
) -> Result<Plan> {
    if dt == DType::I32 {
        bail!("graph specs compute in floating point: dtype int32 is not supported");
    }
    let shapes = infer(nodes, outputs, declared)?;
    let mut k = Kernel::new(name);
    let sim = |e: Error| CliError::new(e.message().to_owned());
    let mut views: BTreeMap<String, View> = BTreeMap::new();
    let mut renames = Vec::new();
    for (n, s) in declared {
        let used = nodes.iter().any(|nd| nd.inputs.iter().any(|i| i == n));
        if !used {
            continue;
        }
        let dims: Vec<usize> = s.iter().map(|&d| d as usize).collect();
        let t = k.input(n, dt, &dims).map_err(sim)?;
        views.insert((*n).to_owned(), t.view().clone());
        renames.push(((*n).to_owned(), (*n).to_owned()));
    }
    for nd in nodes {
        let shape = shapes.get(&nd.output).cloned().unwrap_or_default();
        let is_out = outputs.contains(&nd.output);
        let ins: Vec<View> = nd
            .inputs
            .iter()
            .filter_map(|i| views.get(i).cloned())
            .collect();
        let fail = |e: Error| CliError::new(format!("{}: {}", nd.label, e.message()));
        let out = if is_out {
            renames.push((nd.output.clone(), nd.output.clone()));
            k.output(&nd.output, dt, &shape)
                .map_err(fail)?
                .view()
                .clone()
        } else if let (Op::Reshape(_) | Op::Flatten { .. }, Some(x)) = (&nd.op, ins.first()) {
            // A view of the input: nothing to compute.
            views.insert(nd.output.clone(), x.reshape(&shape).map_err(fail)?);
            continue;
        } else {
            k.scratch(&nd.output, dt, &shape)
                .map_err(fail)?
                .view()
                .clone()
        };
        lower::lower(&mut k, &nd.op, &out, &ins).map_err(fail)?;
        views.insert(nd.output.clone(), out);
    }
    let program = k.build().map_err(sim)?;
    let ops: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let desc = format!(
        "graph of {} layers [{}] in one kernel ({dt})",
        nodes.len(),
        ops.join(", ")
    );
    Ok((program, renames, desc))
}

/// Checks names and order and infers every layer output's shape.
fn infer(
    nodes: &[Node],
    outputs: &[String],
    declared: &BTreeMap<&str, Vec<u64>>,
) -> Result<BTreeMap<String, Vec<usize>>> {
    let mut shapes: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (n, s) in declared {
        let dims: Vec<usize> = s
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
            .collect();
        if elements(&dims).is_none() {
            bail!("tensor '{n}' is too large (more than 2^32 elements)");
        }
        shapes.insert((*n).to_owned(), dims);
    }
    let defined_by = |name: &str| nodes.iter().position(|n| n.output == name);
    for (i, nd) in nodes.iter().enumerate() {
        let mut ins = Vec::new();
        for input in &nd.inputs {
            match (shapes.get(input), defined_by(input)) {
                (Some(s), _) => ins.push(s.clone()),
                (None, Some(j)) => bail!(
                    "{}: input '{input}' is used before it is defined (by layer {}; layers run \
                     in order, so the graph must not have cycles)",
                    nd.label,
                    j + 1
                ),
                (None, None) => bail!(
                    "{}: unknown tensor '{input}' (neither declared nor the output of a layer)",
                    nd.label
                ),
            }
        }
        if declared.contains_key(nd.output.as_str()) {
            bail!(
                "{}: output '{}' has the name of a declared tensor",
                nd.label,
                nd.output
            );
        }
        if let Some(j) = nodes
            .get(..i)
            .and_then(|p| p.iter().position(|n| n.output == nd.output))
        {
            bail!(
                "{}: output '{}' is already the output of layer {}",
                nd.label,
                nd.output,
                j + 1
            );
        }
        let shape = nd
            .op
            .infer(&ins, &nd.inputs)
            .map_err(|e| CliError::new(format!("{}: {e}", nd.label)))?;
        if shape.contains(&0) {
            bail!("{}: the output would be empty", nd.label);
        }
        if elements(&shape).is_none() {
            bail!(
                "{}: the output {} would be too large (more than 2^32 elements)",
                nd.label,
                crate::tensors::shape_str(&ops::u64s(&shape))
            );
        }
        shapes.insert(nd.output.clone(), shape);
    }
    for o in outputs {
        if defined_by(o).is_none() {
            bail!("the model output '{o}' is not the output of any layer");
        }
    }
    for nd in nodes {
        let used = nodes.iter().any(|n| n.inputs.contains(&nd.output));
        if !used && !outputs.contains(&nd.output) {
            bail!(
                "{}: output '{}' is never used (not an input of a later layer, nor one of the \
                 model's outputs)",
                nd.label,
                nd.output
            );
        }
    }
    Ok(shapes)
}

/// The element count of `shape`, `None` past 2³² (what the ops' size arithmetic assumes).
fn elements(shape: &[usize]) -> Option<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= 1 << 32)
}
