//! The model as this crate sees it: decoded from protobuf bytes, checked, with attributes
//! typed. [`import`] never panics on any input.

use std::collections::HashMap;
use std::sync::Arc;

use prost::Message;

use crate::error::{Error, Result, invalid};
use crate::proto::{self, ModelProto, attr_type};
use crate::tensor::{Elem, HostTensor};

/// A dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named or unnamed dynamic dimension (resolved from the given inputs).
    Dynamic(String),
}

/// A graph input or output as declared.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueDecl {
    /// The tensor's name.
    pub name: String,
    /// Element type.
    pub elem: Elem,
    /// Declared shape (`None`: unknown rank).
    pub shape: Option<Vec<Dim>>,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// `f`.
    Float(f32),
    /// `i`.
    Int(i64),
    /// `s`.
    Str(String),
    /// `t`.
    Tensor(HostTensor),
    /// `floats`.
    Floats(Vec<f32>),
    /// `ints`.
    Ints(Vec<i64>),
    /// `strings`.
    Strings(Vec<String>),
    /// A graph (control flow: never lowered).
    Graph,
}

/// A node.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The node's name, or `#index` when the model gives none.
    pub name: String,
    /// Operator type.
    pub op: String,
    /// Domain (`""` for the default ONNX domain).
    pub domain: String,
    /// Input names (`""`: an omitted optional input).
    pub inputs: Vec<String>,
    /// Output names (`""`: an omitted optional output).
    pub outputs: Vec<String>,
    /// Attributes by name.
    pub attrs: Vec<(String, Attr)>,
}

/// An imported model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The graph's name (`"model"` when empty).
    pub name: String,
    /// The default domain's opset version.
    pub opset: i64,
    /// Producer, for display.
    pub producer: String,
    /// Graph inputs that are not initializers.
    pub inputs: Vec<ValueDecl>,
    /// Graph outputs.
    pub outputs: Vec<ValueDecl>,
    /// Initializers by name.
    pub initializers: HashMap<String, Arc<HostTensor>>,
    /// Nodes, in the file's (topological) order.
    pub nodes: Vec<Node>,
}

/// Parses an ONNX model from its bytes. Any byte string gives a model or an error, never a
/// panic.
pub fn import(bytes: &[u8]) -> Result<Model> {
    let m = ModelProto::decode(bytes).map_err(|e| Error::Parse(e.to_string()))?;
    let Some(g) = m.graph else {
        return Err(Error::Parse("the model has no graph".into()));
    };
    let mut opset = None;
    for o in &m.opset_import {
        match o.domain.as_deref().unwrap_or("") {
            "" | "ai.onnx" => opset = o.version,
            _ => {}
        }
    }
    // IR version 1 and 2 models may carry no opset import: opset 1.
    let opset = opset.unwrap_or(1);
    let mut initializers = HashMap::new();
    for (i, t) in g.initializer.iter().enumerate() {
        let name = t.name.clone().unwrap_or_default();
        if name.is_empty() {
            return invalid!("initializer {i} has no name");
        }
        let v = HostTensor::from_proto(t, &format!("initializer '{name}'"))?;
        initializers.insert(name, Arc::new(v));
    }
    let mut inputs = Vec::new();
    for v in &g.input {
        let d = decl(v)?;
        if !initializers.contains_key(&d.name) {
            inputs.push(d);
        }
    }
    let outputs = g.output.iter().map(decl).collect::<Result<Vec<_>>>()?;
    if outputs.is_empty() {
        return invalid!("the graph has no outputs");
    }
    let mut nodes = Vec::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        nodes.push(node(n, i)?);
    }
    let name = g
        .name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "model".into());
    Ok(Model {
        name,
        opset,
        producer: m.producer_name.unwrap_or_default(),
        inputs,
        outputs,
        initializers,
        nodes,
    })
}

fn decl(v: &proto::ValueInfoProto) -> Result<ValueDecl> {
    let name = v.name.clone().unwrap_or_default();
    if name.is_empty() {
        return invalid!("a graph input or output has no name");
    }
    let Some(tt) = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref()) else {
        return invalid!("graph value '{name}' is not a tensor");
    };
    let code = tt.elem_type.unwrap_or(0);
    let Some(elem) = Elem::from_code(code) else {
        return invalid!("graph value '{name}': unsupported element type {code}");
    };
    let shape = tt.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .enumerate()
            .map(|(i, d)| match (d.dim_value, &d.dim_param) {
                (Some(v), _) if v >= 0 => Dim::Fixed(v as usize),
                (_, Some(p)) if !p.is_empty() => Dim::Dynamic(p.clone()),
                _ => Dim::Dynamic(format!("{name}[{i}]")),
            })
            .collect()
    });
    Ok(ValueDecl { name, elem, shape })
}

fn node(n: &proto::NodeProto, i: usize) -> Result<Node> {
    let name = n
        .name
        .clone()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("#{i}"));
    let op = n.op_type.clone().unwrap_or_default();
    if op.is_empty() {
        return invalid!("node '{name}' has no op_type");
    }
    let mut attrs = Vec::with_capacity(n.attribute.len());
    for a in &n.attribute {
        let an = a.name.clone().unwrap_or_default();
        if a.ref_attr_name.as_deref().is_some_and(|s| !s.is_empty()) {
            return invalid!("node '{name}': attribute '{an}' refers to a function attribute");
        }
        let what = format!("node '{name}' attribute '{an}'");
        let v = match a.r#type.unwrap_or(0) {
            attr_type::FLOAT => Attr::Float(a.f.unwrap_or(0.0)),
            attr_type::INT => Attr::Int(a.i.unwrap_or(0)),
            attr_type::STRING => {
                Attr::Str(String::from_utf8_lossy(a.s.as_deref().unwrap_or(&[])).into_owned())
            }
            attr_type::TENSOR => match &a.t {
                Some(t) => Attr::Tensor(HostTensor::from_proto(t, &what)?),
                None => return invalid!("{what}: no tensor"),
            },
            attr_type::GRAPH => Attr::Graph,
            attr_type::FLOATS => Attr::Floats(a.floats.clone()),
            attr_type::INTS => Attr::Ints(a.ints.clone()),
            attr_type::STRINGS => Attr::Strings(
                a.strings
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
            ),
            // IR version 1 files leave `type` unset: infer it from the field present.
            _ => {
                if let Some(f) = a.f {
                    Attr::Float(f)
                } else if let Some(i) = a.i {
                    Attr::Int(i)
                } else if let Some(s) = &a.s {
                    Attr::Str(String::from_utf8_lossy(s).into_owned())
                } else if let Some(t) = &a.t {
                    Attr::Tensor(HostTensor::from_proto(t, &what)?)
                } else if !a.floats.is_empty() {
                    Attr::Floats(a.floats.clone())
                } else if !a.ints.is_empty() {
                    Attr::Ints(a.ints.clone())
                } else {
                    Attr::Ints(Vec::new())
                }
            }
        };
        attrs.push((an, v));
    }
    Ok(Node {
        name,
        op,
        domain: n.domain.clone().unwrap_or_default(),
        inputs: n.input.clone(),
        outputs: n.output.clone(),
        attrs,
    })
}

impl Node {
    /// The attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// An int attribute, or `default`.
    pub fn int(&self, name: &str, default: i64) -> Result<i64> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attr::Int(i)) => Ok(*i),
            Some(_) => Err(self.bad_attr(name, "an int")),
        }
    }

    /// A float attribute, or `default`.
    pub fn float(&self, name: &str, default: f32) -> Result<f32> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attr::Float(f)) => Ok(*f),
            Some(Attr::Int(i)) => Ok(*i as f32),
            Some(_) => Err(self.bad_attr(name, "a float")),
        }
    }

    /// An ints attribute (`None` when absent).
    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v.clone())),
            Some(Attr::Int(i)) => Ok(Some(vec![*i])),
            Some(_) => Err(self.bad_attr(name, "ints")),
        }
    }

    /// A floats attribute (`None` when absent).
    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Floats(v)) => Ok(Some(v.clone())),
            Some(_) => Err(self.bad_attr(name, "floats")),
        }
    }

    /// A string attribute, or `default`.
    pub fn string(&self, name: &str, default: &str) -> Result<String> {
        match self.attr(name) {
            None => Ok(default.to_owned()),
            Some(Attr::Str(s)) => Ok(s.clone()),
            Some(_) => Err(self.bad_attr(name, "a string")),
        }
    }

    fn bad_attr(&self, name: &str, want: &str) -> Error {
        Error::Invalid(format!(
            "node '{}' ({}): attribute '{name}' must be {want}",
            self.name, self.op
        ))
    }

    /// The operator as shown in messages: `op`, or `domain:op` outside the default domain.
    pub fn op_name(&self) -> String {
        if self.domain.is_empty() || self.domain == "ai.onnx" {
            self.op.clone()
        } else {
            format!("{}:{}", self.domain, self.op)
        }
    }

    /// An "unsupported" error for this node.
    pub fn unsupported(&self, what: impl Into<String>) -> Error {
        Error::Unsupported {
            node: self.name.clone(),
            op: self.op_name(),
            what: what.into(),
        }
    }

    /// An "invalid" error for this node.
    pub fn invalid(&self, what: impl core::fmt::Display) -> Error {
        Error::Invalid(format!("node '{}' ({}): {what}", self.name, self.op_name()))
    }

    /// Input `i` when present (not omitted).
    pub fn input(&self, i: usize) -> Option<&str> {
        self.inputs
            .get(i)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }
}
