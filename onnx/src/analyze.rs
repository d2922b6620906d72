//! Static analysis of a model for given input shapes: every value's shape, constants folded
//! on the host (initializers, `Constant`, shape arithmetic, any node whose inputs are all
//! constant and that the host evaluator covers), and the remaining nodes as [`Step`]s with
//! their attributes resolved (opset differences handled here) — what lowering consumes.

use std::collections::HashMap;
use std::sync::Arc;

use nrt_kernel::library::conv::Conv2dConfig;
use nrt_kernel::library::conv_transpose::ConvTransposeConfig;
use nrt_kernel::library::lrn::LrnOpts;
use nrt_kernel::library::pool::{Pool2dConfig, PoolExt};
use nrt_kernel::library::reduce::ReduceOp;
use nrt_kernel::{ActFn, AluOp};

use crate::error::{Error, Result, invalid};
use crate::graph::{Dim, Model, Node};
use crate::ops;
use crate::tensor::{Elem, HostTensor, MAX_ELEMS, numel};

/// A value of the graph during analysis.
#[derive(Clone, Debug)]
pub(crate) enum Val {
    /// Known on the host.
    Const(Arc<HostTensor>),
    /// Computed on the device: an index into [`Analysis::values`].
    Dyn(usize),
}

/// An operand of a step.
#[derive(Clone, Debug)]
pub(crate) enum Operand {
    /// A device value.
    Dyn(usize),
    /// A host constant (baked into the NEFF when a step reads it).
    Const(Arc<HostTensor>),
}

/// A device value.
#[derive(Clone, Debug)]
pub(crate) struct DynVal {
    /// ONNX name.
    pub(crate) name: String,
    /// Shape.
    pub(crate) shape: Vec<usize>,
    /// ONNX element type (float types only on the device).
    pub(crate) elem: Elem,
    /// The value whose buffer this one is a reshaped view of.
    pub(crate) alias_of: Option<usize>,
    /// The graph input it is (index into the model's inputs).
    pub(crate) input: Option<usize>,
}

/// A slicing of one dimension: `start, step, len` (step ≥ 1).
pub(crate) type DimSlice = (usize, usize, usize);

/// What a step computes; operands are the step's `ins`, in the documented order.
#[derive(Clone, Debug)]
pub(crate) enum Kind {
    /// `ins = [x]`; weights and bias constant, already folded with a following
    /// BatchNormalization; rank-3 (1-D) convolutions as 2-D with `H = 1`.
    Conv {
        cfg: Conv2dConfig,
        w: Arc<HostTensor>,
        b: Option<Arc<HostTensor>>,
        relu: bool,
        bn: bool,
    },
    /// `ins = [x]`.
    Pool(Pool2dConfig, PoolExt),
    /// `ins = [x]`; weights `[C, O/groups, KH, KW]` and bias constant.
    ConvTranspose {
        cfg: ConvTransposeConfig,
        w: Arc<HostTensor>,
        b: Option<Arc<HostTensor>>,
    },
    /// `ins = [x]`.
    Lrn(LrnOpts),
    /// `ins = [cond, a, b]`.
    Where,
    /// `ins = [x]`: mean or max over all dimensions after the second.
    GlobalPool(ReduceOp),
    /// `ins = [a, b]` (batched, broadcasting); `bias` added after (Gemm's C).
    MatMul { a_t: bool, bias: Option<Operand> },
    /// `ins = [a, b]`.
    Binary(AluOp),
    /// `ins = [x]`: `f(x·scale + bias)`.
    Act { f: ActFn, scale: f32, bias: f32 },
    /// `ins = [x, slope]`: `max(x, 0) + slope·min(x, 0)` (LeakyRelu, PRelu).
    PRelu,
    /// `ins = [x]`: `gamma·(max(x, 0) + alpha·(exp(min(x, 0)) − 1))` (Elu, Selu).
    Elu { alpha: f32, gamma: f32 },
    /// `ins = [x]`: `min(max(x·scale + bias, lo), hi)` (Clip, HardSigmoid).
    Clip {
        lo: Option<f32>,
        hi: Option<f32>,
        scale: f32,
        bias: f32,
    },
    /// `ins = [x]`: `(x > 0) − (x < 0)`.
    Sign,
    /// `ins = [x]`: `x − bias` where `x > lambd`, `x + bias` where `x < −lambd`, else 0.
    Shrink { lambd: f32, bias: f32 },
    /// `ins = [x]`, along `axis` (before opset 13: `x` viewed as `[rows, cols]`, axis 1).
    Softmax { log: bool, axis: usize, cols: usize },
    /// `ins = [x, gamma?, beta?]`, viewed as `[rows, cols]`.
    LayerNorm { eps: f32, cols: usize },
    /// `ins = [x, scale, bias]`: per-channel, over the spatial dimensions.
    InstanceNorm { eps: f32 },
    /// `ins = [x]`: `x·scale[c] + shift[c]`.
    BatchNorm {
        scale: Arc<HostTensor>,
        shift: Arc<HostTensor>,
    },
    /// `ins = [x]`: over `axes` (sorted), keeping dimensions when `keepdims`.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        keepdims: bool,
    },
    /// `ins = [x]`: `out = x` permuted.
    Transpose(Vec<usize>),
    /// `ins = [x]`: `out = x` sliced.
    Slice(Vec<DimSlice>),
    /// `ins = [x]`: broadcast to the output's shape (Expand).
    Expand,
    /// `ins = [x]`: repeated.
    Tile(Vec<usize>),
    /// `ins = inputs`: concatenated along `axis`.
    Concat(usize),
    /// `ins = [x]`: `outs[i] = x[.., offsets[i]..offsets[i] + size_i, ..]` along `axis`.
    Split { axis: usize, offsets: Vec<usize> },
    /// `ins = [x]`: `x` gathered at constant indices along `axis`.
    Gather { axis: usize, idx: Vec<usize> },
    /// `ins = [x]`: constant padding.
    Pad {
        pads: Vec<(usize, usize)>,
        value: f32,
    },
}

/// A node that runs on the device.
#[derive(Clone, Debug)]
pub(crate) struct Step {
    /// Index of the ONNX node (for timing and messages).
    pub(crate) node: usize,
    /// What it computes.
    pub(crate) kind: Kind,
    /// Operands.
    pub(crate) ins: Vec<Operand>,
    /// Output values.
    pub(crate) outs: Vec<usize>,
}

/// The analysis of a model.
#[derive(Debug)]
pub(crate) struct Analysis {
    /// Device values.
    pub(crate) values: Vec<DynVal>,
    /// Steps, in order.
    pub(crate) steps: Vec<Step>,
    /// Graph outputs, in order: their values.
    pub(crate) outputs: Vec<(String, Val)>,
    /// Graph inputs with their resolved shapes.
    pub(crate) inputs: Vec<(String, Elem, Vec<usize>)>,
    /// Nodes folded on the host.
    pub(crate) folded: usize,
    /// Batch normalisations folded into convolutions.
    pub(crate) fused: usize,
    /// How many times each value name is read (by nodes and as a graph output).
    pub(crate) uses: HashMap<String, usize>,
}

/// The context of one node's analysis.
pub(crate) struct Ctx<'a> {
    pub(crate) node: &'a Node,
    pub(crate) opset: i64,
    pub(crate) ins: Vec<Option<Val>>,
    pub(crate) an: &'a mut Analysis,
}

/// What a node turned into.
pub(crate) enum Outcome {
    /// Host values for its outputs.
    Folded(Vec<HostTensor>),
    /// A device step producing outputs of these shapes (element type: the first input's).
    Step(Kind, Vec<Operand>, Vec<Vec<usize>>),
    /// Its outputs are views of input 0 with these shapes.
    Alias(Vec<usize>),
}

impl Ctx<'_> {
    /// Input `i`, required.
    pub(crate) fn val(&self, i: usize) -> Result<&Val> {
        self.ins
            .get(i)
            .and_then(Option::as_ref)
            .ok_or_else(|| self.node.invalid(format!("input {i} is missing")))
    }

    /// The shape of input `i`.
    pub(crate) fn shape(&self, i: usize) -> Result<Vec<usize>> {
        Ok(match self.val(i)? {
            Val::Const(t) => t.shape.clone(),
            Val::Dyn(d) => self.an.values[*d].shape.clone(),
        })
    }

    /// The element type of input `i`.
    pub(crate) fn elem(&self, i: usize) -> Result<Elem> {
        Ok(match self.val(i)? {
            Val::Const(t) => t.elem,
            Val::Dyn(d) => self.an.values[*d].elem,
        })
    }

    /// Input `i` as a constant, when it is one (`None` when absent or computed).
    pub(crate) fn konst(&self, i: usize) -> Option<Arc<HostTensor>> {
        match self.ins.get(i) {
            Some(Some(Val::Const(t))) => Some(t.clone()),
            _ => None,
        }
    }

    /// Input `i` as a constant, required to be one (`what` says what it is).
    pub(crate) fn need_const(&self, i: usize, what: &str) -> Result<Arc<HostTensor>> {
        match self.ins.get(i) {
            Some(Some(Val::Const(t))) => Ok(t.clone()),
            Some(Some(Val::Dyn(_))) => Err(self.node.unsupported(format!(
                "{what} (input {i}) computed at run time; only constants"
            ))),
            _ => Err(self.node.invalid(format!("input {i} ({what}) is missing"))),
        }
    }

    /// Whether input `i` is present.
    pub(crate) fn has(&self, i: usize) -> bool {
        matches!(self.ins.get(i), Some(Some(_)))
    }

    /// Whether every present input is constant.
    pub(crate) fn all_const(&self) -> bool {
        self.ins
            .iter()
            .flatten()
            .all(|v| matches!(v, Val::Const(_)))
    }

    /// Input `i` as an operand.
    pub(crate) fn operand(&self, i: usize) -> Result<Operand> {
        Ok(match self.val(i)? {
            Val::Const(t) => Operand::Const(t.clone()),
            Val::Dyn(d) => Operand::Dyn(*d),
        })
    }

    /// The device value of input `i`, if computed.
    pub(crate) fn dyn_id(&self, i: usize) -> Option<usize> {
        match self.ins.get(i) {
            Some(Some(Val::Dyn(d))) => Some(*d),
            _ => None,
        }
    }
}

/// Analyses `m` with the graph inputs of `shapes` (name → shape; inputs not named take their
/// declared shape, which must then be fixed).
pub(crate) fn analyze(m: &Model, shapes: &HashMap<String, Vec<usize>>) -> Result<Analysis> {
    let mut an = Analysis {
        values: Vec::new(),
        steps: Vec::new(),
        outputs: Vec::new(),
        inputs: Vec::new(),
        folded: 0,
        fused: 0,
        uses: HashMap::new(),
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
        env.insert(name.clone(), Val::Const(Arc::new(t.clone())));
    }
    for (i, d) in m.inputs.iter().enumerate() {
        let shape = resolve_input(d, shapes.get(&d.name))?;
        if !d.elem.is_float() {
            return Err(Error::Unsupported {
                node: format!("input {}", d.name),
                op: "graph input".into(),
                what: format!(
                    "element type {} (device tensors are float; integer inputs are supported only as constants)",
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
    for name in shapes.keys() {
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
        let outcome = ops::eval(&mut cx)?;
        let outs: Vec<&String> = node.outputs.iter().collect();
        match outcome {
            Outcome::Folded(ts) => {
                an.folded += 1;
                for (o, t) in outs.iter().zip(ts) {
                    if !o.is_empty() {
                        env.insert((*o).clone(), Val::Const(Arc::new(t)));
                    }
                }
            }
            Outcome::Alias(shape) => {
                let src = match env.get(node.inputs.first().map_or("", String::as_str)) {
                    Some(Val::Dyn(d)) => *d,
                    _ => return Err(node.invalid("aliases a value that is not computed")),
                };
                check_elems(node, &shape)?;
                let root = an.values[src].alias_of.unwrap_or(src);
                let elem = an.values[src].elem;
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
            }
            Outcome::Step(kind, operands, shapes_out) => {
                let elem = match operands.iter().find_map(|o| match o {
                    Operand::Dyn(d) => Some(an.values[*d].elem),
                    Operand::Const(_) => None,
                }) {
                    Some(e) => e,
                    None => Elem::F32,
                };
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
                        env.insert(name, Val::Dyn(id));
                    }
                }
                an.steps.push(Step {
                    node: ni,
                    kind,
                    ins: operands,
                    outs: ids,
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
    Ok(an)
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
