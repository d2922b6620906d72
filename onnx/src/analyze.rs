//! Static analysis of a model for given input shapes: every value's shape, constants folded
//! on the host (initializers, `Constant`, shape arithmetic, any node whose inputs are all
//! constant and that the host evaluator covers), and the remaining nodes as device steps
//! with their attributes resolved (opset differences handled in `ops*.rs`).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use nrt_kernel::AluOp;

use crate::error::{Error, Result, invalid};
use crate::graph::{Dim, Model, Node};
use crate::ir::{Analysis, Ctx, DynVal, Kind, Operand, Outcome, Step, Val};
use crate::ops;
use crate::tensor::{Elem, HostTensor, MAX_ELEMS, numel};

/// The result of one analysis.
pub(crate) enum Analyzed {
    /// Every node analysed.
    Done(Analysis),
    /// A node needs this graph input (one of `bindable`) as a constant: bind it and rerun.
    Bind(String),
}

/// Analyses `m` with the graph inputs of `shapes` (name → shape; inputs not named take their
/// declared shape, which must then be fixed) and those of `bound` fixed to their values.
/// Graph inputs with no elements are bound too (empty constants: they hold no values).
/// When a node needs a value as a constant that is a graph input named in `bindable`
/// (directly or through views of it), the result is [`Analyzed::Bind`] with its name.
pub(crate) fn analyze(
    m: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    bound: &HashMap<String, HostTensor>,
    bindable: &dyn Fn(&str) -> bool,
) -> Result<Analyzed> {
    let mut an = Analysis {
        values: Vec::new(),
        steps: Vec::new(),
        outputs: Vec::new(),
        inputs: Vec::new(),
        folded: 0,
        fused: 0,
        merged: 0,
        uses: HashMap::new(),
        wanted: Cell::new(None),
    };
    for name in m
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter())
        .chain(m.outputs.iter().map(|o| &o.name))
    {
        *an.uses.entry(name.clone()).or_insert(0) += 1;
    }
    let mut env: HashMap<String, Val> = HashMap::new();
    for (name, t) in &m.initializers {
        env.insert(name.clone(), Val::Const(t.clone()));
    }
    for d in m.inputs.iter() {
        if let Some(t) = bound.get(&d.name) {
            // Bound at build time: a constant of the given value.
            resolve_input(d, Some(&t.shape))?;
            let mut t = t.clone();
            t.elem = d.elem;
            env.insert(d.name.clone(), Val::Const(Arc::new(t)));
            continue;
        }
        let i = an.inputs.len();
        let shape = resolve_input(d, shapes.get(&d.name))?;
        if shape.contains(&0) {
            env.insert(d.name.clone(), Val::Const(Arc::new(empty(d.elem, shape))));
            continue;
        }
        if !d.elem.is_float() {
            return Err(Error::Unsupported {
                node: format!("input {}", d.name),
                op: "graph input".into(),
                what: format!(
                    "element type {} (device tensors are float: give integer inputs with --input, which binds them at build time)",
                    d.elem.name()
                ),
            });
        }
        an.values.push(DynVal {
            name: d.name.clone(),
            shape: shape.clone(),
            elem: d.elem,
            alias_of: None,
            input: Some(i),
        });
        env.insert(d.name.clone(), Val::Dyn(an.values.len() - 1));
        an.inputs.push((d.name.clone(), d.elem, shape));
    }
    for name in shapes.keys().chain(bound.keys()) {
        if !m.inputs.iter().any(|d| &d.name == name) {
            return invalid!("the model has no input named '{name}'");
        }
    }
    for (ni, node) in m.nodes.iter().enumerate() {
        let ins = node
            .inputs
            .iter()
            .map(|n| {
                if n.is_empty() {
                    Ok(None)
                } else {
                    env.get(n).cloned().map(Some).ok_or_else(|| {
                        node.invalid(format!(
                            "input '{n}' is not produced by an earlier node, an initializer or a graph input"
                        ))
                    })
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let mut cx = Ctx {
            node,
            opset: m.opset,
            ins,
            an: &mut an,
        };
        cx.an.wanted.set(None);
        let outcome = match ops::eval(&mut cx) {
            Ok(o) => o,
            Err(e) => {
                if let Some(d) = an.wanted.get() {
                    let root = an.values[d].alias_of.unwrap_or(d);
                    if let Some(i) = an.values[root].input {
                        let name = &an.inputs[i].0;
                        if bindable(name) {
                            return Ok(Analyzed::Bind(name.clone()));
                        }
                    }
                }
                return Err(e);
            }
        };
        let outs: Vec<&String> = node.outputs.iter().collect();
        let outcome = empty_folded(outcome, &cx_elem(&an, &env, node));
        match outcome {
            Outcome::Folded(ts) => {
                an.folded += 1;
                for (o, t) in outs.iter().zip(ts) {
                    if !o.is_empty() {
                        env.insert((*o).clone(), Val::Const(Arc::new(t)));
                    }
                }
            }
            Outcome::Alias(shape, to) => {
                alias(&mut an, &mut env, node, &outs, shape, to, Vec::new())?;
            }
            Outcome::AliasWith(shape, extra) => {
                alias(&mut an, &mut env, node, &outs, shape, None, extra)?;
            }
            Outcome::Step(kind, operands, shapes_out) => {
                let elem = step_elem(&an, &kind, &operands);
                let mut ids = Vec::new();
                for (i, s) in shapes_out.into_iter().enumerate() {
                    check_elems(node, &s)?;
                    let name = outs
                        .get(i)
                        .map(|o| (*o).clone())
                        .filter(|o| !o.is_empty())
                        .unwrap_or_else(|| format!("{}:{i}", node.name));
                    an.values.push(DynVal {
                        name: name.clone(),
                        shape: s,
                        elem,
                        alias_of: None,
                        input: None,
                    });
                    let id = an.values.len() - 1;
                    ids.push(id);
                    if outs.get(i).is_some_and(|o| !o.is_empty()) {
                        // An output with no elements is an empty constant to its readers.
                        let v = if an.values[id].shape.contains(&0) {
                            Val::Const(Arc::new(empty(elem, an.values[id].shape.clone())))
                        } else {
                            Val::Dyn(id)
                        };
                        env.insert(name, v);
                    }
                }
                an.steps.push(Step {
                    node: ni,
                    kind,
                    ins: operands,
                    outs: ids,
                    label: None,
                });
            }
        }
    }
    for d in &m.outputs {
        let Some(v) = env.get(&d.name) else {
            return invalid!("graph output '{}' is not produced by any node", d.name);
        };
        an.outputs.push((d.name.clone(), v.clone()));
    }
    // An integer or boolean output must be known at build time (the device computes in
    // floating point): bind the float inputs it depends on when their values are given, so
    // that it folds on the host.
    for (_, v) in &an.outputs {
        if let Val::Dyn(d) = v
            && !an.values[*d].elem.is_float()
            && let Some(name) = upstream_bindable(&an, *d, bindable)
        {
            return Ok(Analyzed::Bind(name));
        }
    }
    an.merged = crate::fuse::fuse(&mut an, m);
    Ok(Analyzed::Done(an))
}

/// The first graph input value `d` is computed from (through aliases and steps) that
/// `bindable` says can be bound.
fn upstream_bindable(an: &Analysis, d: usize, bindable: &dyn Fn(&str) -> bool) -> Option<String> {
    let mut stack = vec![d];
    let mut seen = vec![false; an.values.len()];
    while let Some(v) = stack.pop() {
        let root = an.values[v].alias_of.unwrap_or(v);
        if std::mem::replace(&mut seen[root], true) {
            continue;
        }
        if let Some(i) = an.values[root].input {
            let name = &an.inputs[i].0;
            if bindable(name) {
                return Some(name.clone());
            }
        }
        if let Some(s) = an.steps.iter().find(|s| s.outs.contains(&root)) {
            stack.extend(s.ins.iter().filter_map(|o| match o {
                Operand::Dyn(x) => Some(*x),
                Operand::Const(_) => None,
            }));
        }
    }
    None
}

/// The element type of a step's outputs: a Cast's target; Pow's base's (ONNX: the output
/// has the base's type); else the first computed operand's, or the first constant's when
/// every operand is constant (fp32 when there is none).
fn step_elem(an: &Analysis, kind: &Kind, operands: &[Operand]) -> Elem {
    let of = |o: &Operand| match o {
        Operand::Dyn(d) => an.values[*d].elem,
        Operand::Const(t) => t.elem,
    };
    match kind {
        Kind::Round(to) => *to,
        Kind::Binary(AluOp::Power) if !operands.is_empty() => of(&operands[0]),
        _ => operands
            .iter()
            .find(|o| matches!(o, Operand::Dyn(_)))
            .or(operands.first())
            .map_or(Elem::F32, of),
    }
}

/// The element type of a node's first computed input (fp32 when none is).
fn cx_elem(an: &Analysis, env: &HashMap<String, Val>, node: &Node) -> Elem {
    node.inputs
        .iter()
        .find_map(|n| match env.get(n) {
            Some(Val::Dyn(d)) => Some(an.values[*d].elem),
            _ => None,
        })
        .unwrap_or(Elem::F32)
}

/// A step or view whose every output has no elements, as empty constants (they hold no
/// values, so nothing needs computing).
fn empty_folded(o: Outcome, elem: &Elem) -> Outcome {
    let empty = |shape: Vec<usize>| empty(*elem, shape);
    match o {
        Outcome::Alias(s, _) if s.contains(&0) => Outcome::Folded(vec![empty(s)]),
        Outcome::AliasWith(s, extra) if s.contains(&0) => {
            Outcome::Folded(std::iter::once(empty(s)).chain(extra).collect())
        }
        Outcome::Step(_, _, shapes)
            if !shapes.is_empty() && shapes.iter().all(|s| s.contains(&0)) =>
        {
            Outcome::Folded(shapes.into_iter().map(empty).collect())
        }
        o => o,
    }
}

/// A tensor of `shape` (which has a zero dimension) with no elements.
fn empty(elem: Elem, shape: Vec<usize>) -> HostTensor {
    if elem.is_float() {
        HostTensor::floats(elem, shape, Vec::new())
    } else {
        HostTensor::ints(elem, shape, Vec::new())
    }
}

fn check_elems(node: &Node, shape: &[usize]) -> Result<()> {
    match numel(shape) {
        Some(n) if n <= MAX_ELEMS => Ok(()),
        _ => Err(node.invalid(format!("output shape {shape:?} is too large"))),
    }
}

fn resolve_input(d: &crate::graph::ValueDecl, given: Option<&Vec<usize>>) -> Result<Vec<usize>> {
    let Some(decl) = &d.shape else {
        return match given {
            Some(s) => Ok(s.clone()),
            None => invalid!(
                "input '{}' has no declared shape: give it with --input {}=FILE.npy",
                d.name,
                d.name
            ),
        };
    };
    match given {
        Some(s) => {
            if s.len() != decl.len() {
                return invalid!(
                    "input '{}': shape {s:?} has rank {}, the model declares rank {}",
                    d.name,
                    s.len(),
                    decl.len()
                );
            }
            for (i, (g, want)) in s.iter().zip(decl).enumerate() {
                if let Dim::Fixed(w) = want
                    && w != g
                {
                    return invalid!(
                        "input '{}': dimension {i} is {g}, the model declares {w}",
                        d.name
                    );
                }
            }
            Ok(s.clone())
        }
        None => decl
            .iter()
            .map(|x| match x {
                Dim::Fixed(v) => Ok(*v),
                Dim::Dynamic(p) => invalid!(
                    "input '{}' has the dynamic dimension '{p}': give the input with --input {}=FILE.npy to fix it",
                    d.name,
                    d.name
                ),
            })
            .collect(),
    }
}

/// A node whose output 0 is a view of its input 0 (`shape`, element type `to` or the
/// input's); its other outputs are the host values `extra`.
fn alias(
    an: &mut Analysis,
    env: &mut HashMap<String, Val>,
    node: &Node,
    outs: &[&String],
    shape: Vec<usize>,
    to: Option<Elem>,
    extra: Vec<HostTensor>,
) -> Result<()> {
    for (o, t) in outs.iter().skip(1).zip(extra) {
        if !o.is_empty() {
            env.insert((*o).clone(), Val::Const(Arc::new(t)));
        }
    }
    let src = match env.get(node.inputs.first().map_or("", String::as_str)) {
        Some(Val::Dyn(d)) => *d,
        _ => return Err(node.invalid("aliases a value that is not computed")),
    };
    check_elems(node, &shape)?;
    let root = an.values[src].alias_of.unwrap_or(src);
    let elem = to.unwrap_or(an.values[src].elem);
    if let Some(o) = outs.first() {
        an.values.push(DynVal {
            name: (*o).clone(),
            shape,
            elem,
            alias_of: Some(root),
            input: None,
        });
        env.insert((*o).clone(), Val::Dyn(an.values.len() - 1));
    }
    Ok(())
}
