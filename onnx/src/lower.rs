//! Lowering: one `nrt_kernel::Kernel` for the whole model. Graph inputs are kernel inputs,
//! constants read by device steps are kernel constants (in the compute dtype), every
//! intermediate is a view of one scratch arena planned by `plan.rs`, graph outputs are
//! kernel outputs (the producing step writes into them directly when it can).

use std::collections::HashMap;

use nrt_kernel::{DType, Kernel, View};

use crate::error::{Error, Result};
use crate::graph::Model;
use crate::ir::{Analysis, Kind, Operand, Val};
use crate::lower_ctx::{Lower, io_dtype, kerr, kshape};
use crate::lower_ops;
use crate::plan::Arena;
use crate::tensor::Elem;
use crate::timing::{self, Markers};

/// Compute precision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// fp32 everywhere (the default: results compare with CPU runtimes).
    #[default]
    Fp32,
    /// bf16 operands and intermediates, fp32 accumulation; inputs and outputs stay fp32.
    Bf16,
}

/// A graph input or output of the built kernel. An integer or boolean output is a kernel
/// tensor of the same byte size holding the ONNX elements' bytes (little-endian, `bool` one
/// byte): int32 words when the size is a multiple of 4, else fp16 halves (the DMA that
/// writes it moves bits unchanged); a NEFF describes it with its ONNX type and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct Io {
    /// ONNX name (also the kernel tensor's name).
    pub name: String,
    /// ONNX element type.
    pub elem: Elem,
    /// Shape.
    pub shape: Vec<usize>,
}

/// What one device step of the model is, for the per-node table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// ONNX node name.
    pub name: String,
    /// Operator (with `+BatchNormalization` when one was folded into it).
    pub op: String,
}

/// The number of temporaries (each of the step's first output's size) a step needs.
fn temps_of(kind: &Kind) -> usize {
    match kind {
        Kind::PRelu | Kind::Elu { .. } | Kind::Sign => 1,
        Kind::Shrink { .. } => 2,
        _ => 0,
    }
}

/// The result of lowering.
#[derive(Debug)]
pub struct Lowered {
    /// The simulator program.
    pub program: nrt_kernel::Program,
    /// Kernel inputs.
    pub inputs: Vec<Io>,
    /// Kernel outputs.
    pub outputs: Vec<Io>,
    /// Graph outputs with no elements (not kernel outputs: a runner writes them empty).
    pub empty_outputs: Vec<Io>,
    /// Graph outputs whose values were folded on the host at build time (in graph order):
    /// the program copies them from constants into the outputs. Integer and boolean ones
    /// are copied as raw bytes (see [`Io`]).
    pub folded_outputs: Vec<String>,
    /// Device steps, in order (with `(inputs)` / `(outputs)` for the conversions and copies
    /// around them when there are any): what [`attribute`](crate::attribute) times.
    pub nodes: Vec<NodeInfo>,
    /// Peak device memory: inputs, outputs, constants and the planned scratch, in bytes.
    pub peak_bytes: u64,
    /// Planned scratch (intermediates), in bytes.
    pub scratch_bytes: u64,
    /// What the intermediates would take without reuse, in bytes.
    pub unplanned_bytes: u64,
    /// Constant (weight) bytes baked in.
    pub weight_bytes: u64,
    /// Nodes folded on the host.
    pub folded: usize,
    /// Batch normalisations folded into convolutions.
    pub fused: usize,
    /// Nodes merged into another node's step (bias adds and activations into matmuls, the
    /// GELU and layer-norm chains into one step each; docs/ONNX.md, "Fusions").
    pub merged: usize,
    /// Graph inputs bound at build time by [`compile_values`](crate::compile_values): float
    /// inputs an operator needs constant (in the order they were bound), then inputs with no
    /// elements (empty constants). Integer inputs bound by the caller are not listed.
    pub bound: Vec<String>,
}

/// Lowers an analysed model.
pub(crate) fn lower(m: &Model, an: &Analysis, prec: Precision) -> Result<Lowered> {
    let dt = match prec {
        Precision::Fp32 => DType::F32,
        Precision::Bf16 => DType::Bf16,
    };
    let mut k = Kernel::new(&m.name);
    let mut markers = Markers::new(&mut k)?;
    markers.mark(&mut k)?;
    let nv = an.values.len();
    let mut views: Vec<Option<View>> = vec![None; nv];
    let mut inputs = Vec::new();
    let mut in_tensors = Vec::new();
    for (name, elem, shape) in &an.inputs {
        let t = k
            .input(name, io_dtype(*elem), &kshape(shape))
            .map_err(kerr)?;
        inputs.push(Io {
            name: name.clone(),
            elem: *elem,
            shape: shape.clone(),
        });
        in_tensors.push(t);
    }
    // Outputs: claim the producing step's buffer where possible.
    let mut outputs = Vec::new();
    let mut out_tensors = Vec::new();
    let mut claimed: HashMap<usize, usize> = HashMap::new();
    let mut final_copies: Vec<(usize, Val)> = Vec::new();
    let mut empty_outputs = Vec::new();
    let mut folded_outputs = Vec::new();
    let mut raw_copies: Vec<(usize, Vec<u8>)> = Vec::new();
    let producer: HashMap<usize, usize> = an
        .steps
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.outs.iter().map(move |&o| (o, i)))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for (name, v) in &an.outputs {
        // Kernel (and NEFF) tensors are named once each.
        if !seen.insert(name.as_str()) {
            return Err(Error::Invalid(format!(
                "graph output '{name}' is listed twice"
            )));
        }
        if an.inputs.iter().any(|(n, _, _)| n == name) {
            return Err(Error::Unsupported {
                node: format!("output {name}"),
                op: "graph output".into(),
                what: "a graph output that is a graph input itself (a NEFF names each tensor \
                       once; read the input, or give the output its own name with an Identity \
                       node)"
                    .into(),
            });
        }
        let (shape, elem) = match v {
            Val::Const(t) => (t.shape.clone(), t.elem),
            Val::Dyn(d) => (an.values[*d].shape.clone(), an.values[*d].elem),
        };
        // A float value (a comparison's 1 / 0) for an output declared integer or boolean
        // takes the declared type.
        let elem = match m.outputs.iter().find(|o| &o.name == name) {
            Some(o) if !o.elem.is_float() => o.elem,
            _ => elem,
        };
        if shape.contains(&0) {
            // No elements: written by the host (a kernel tensor cannot be empty).
            empty_outputs.push(Io {
                name: name.clone(),
                elem,
                shape: shape.clone(),
            });
            continue;
        }
        if let Val::Const(_) = v {
            folded_outputs.push(name.clone());
        }
        if !elem.is_float() {
            let (carrier, bytes) = int_output(m, an, &producer, name, v, elem)?;
            let t = k
                .output(name, carrier, &[bytes.len() / carrier.size()])
                .map_err(kerr)?;
            raw_copies.push((out_tensors.len(), bytes));
            outputs.push(Io {
                name: name.clone(),
                elem,
                shape: shape.clone(),
            });
            out_tensors.push(t);
            continue;
        }
        let odt = io_dtype(elem);
        let oi = out_tensors.len();
        let t = k.output(name, odt, &kshape(&shape)).map_err(kerr)?;
        outputs.push(Io {
            name: name.clone(),
            elem,
            shape: shape.clone(),
        });
        let direct = match v {
            Val::Dyn(d) => {
                let root = an.values[*d].alias_of.unwrap_or(*d);
                (dt == odt && producer.contains_key(&root) && !claimed.contains_key(&root))
                    .then_some(root)
            }
            Val::Const(_) => None,
        };
        match direct {
            Some(root) => {
                claimed.insert(root, oi);
                let rs = kshape(&an.values[root].shape);
                views[root] = Some(t.reshape(&rs).map_err(kerr)?);
            }
            None => final_copies.push((oi, v.clone())),
        }
        out_tensors.push(t);
    }
    // Liveness: the last step reading each root buffer.
    let root = |d: usize| an.values[d].alias_of.unwrap_or(d);
    let n = an.steps.len();
    let mut last: Vec<usize> = vec![0; nv];
    for (i, s) in an.steps.iter().enumerate() {
        for o in &s.ins {
            if let Operand::Dyn(d) = o {
                last[root(*d)] = last[root(*d)].max(i);
            }
        }
        for &o in &s.outs {
            last[o] = last[o].max(i);
        }
        if let Kind::MatMul {
            bias: Some(Operand::Dyn(d)),
            ..
        } = &s.kind
        {
            last[root(*d)] = last[root(*d)].max(i);
        }
    }
    for (_, v) in &final_copies {
        if let Val::Dyn(d) = v {
            last[root(*d)] = n;
        }
    }
    // Inputs in bf16: a converted copy in the arena, live from the start.
    let mut arena = Arena::default();
    let mut offsets: Vec<Option<(usize, usize)>> = vec![None; nv];
    let mut unplanned = 0usize;
    let mut frees: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    let numel = |d: usize| an.values[d].shape.iter().product::<usize>().max(1);
    let converted = |i: usize| io_dtype(an.inputs[i].1) != dt;
    for (d, v) in an.values.iter().enumerate() {
        if v.input.is_some_and(converted) {
            let off = arena.alloc(numel(d));
            offsets[d] = Some((off, numel(d)));
            unplanned += numel(d);
            frees[last[d].min(n)].push(d);
        }
    }
    let mut temp_need = 0usize;
    for (i, s) in an.steps.iter().enumerate() {
        for &o in &s.outs {
            if claimed.contains_key(&o) || an.values[o].shape.contains(&0) {
                continue;
            }
            let off = arena.alloc(numel(o));
            offsets[o] = Some((off, numel(o)));
            unplanned += numel(o);
            frees[last[o].min(n)].push(o);
        }
        let t = temps_of(&s.kind);
        if t > 0 {
            temp_need =
                temp_need.max(t * s.outs.first().map_or(1, |&o| numel(o)).div_ceil(16) * 16);
        }
        for d in std::mem::take(&mut frees[i]) {
            if let Some((off, len)) = offsets[d] {
                arena.free(off, len);
            }
        }
    }
    let esize = dt.size();
    let arena_t = if arena.peak > 0 {
        Some(k.scratch("arena", dt, &[arena.peak]).map_err(kerr)?)
    } else {
        None
    };
    let temp = if temp_need > 0 {
        Some(k.scratch("temp", dt, &[temp_need]).map_err(kerr)?)
    } else {
        None
    };
    for d in 0..nv {
        if let (Some((off, len)), Some(a)) = (offsets[d], &arena_t) {
            views[d] = Some(
                a.slice(0, off..off + len)
                    .and_then(|v| v.reshape(&kshape(&an.values[d].shape)))
                    .map_err(kerr)?,
            );
        }
    }
    let mut lw = Lower {
        k,
        dt,
        an,
        views,
        consts: HashMap::new(),
        temp,
        temps: Vec::new(),
        weight_bytes: 0,
        n_consts: 0,
        keep: Vec::new(),
    };
    // Inputs: fp32 straight from the kernel input, or converted into the arena.
    let mut nodes = Vec::with_capacity(n + 2);
    for (d, v) in an.values.iter().enumerate() {
        if let Some(i) = v.input {
            let src = in_tensors[i].view().clone();
            if !converted(i) {
                lw.views[d] = Some(src);
            } else {
                let dst = lw.val(d)?;
                nrt_kernel::library::activation::copy(&mut lw.k, &dst, &src).map_err(kerr)?;
            }
        }
    }
    if (0..an.inputs.len()).any(converted) {
        nodes.push(NodeInfo {
            name: "(inputs)".into(),
            op: format!("Cast to {}", dt.name()),
        });
        markers.mark(&mut lw.k)?;
    }
    // Aliases: views of their roots.
    for (d, v) in an.values.iter().enumerate() {
        if let Some(r) = v.alias_of {
            let rv = lw.val(r)?;
            lw.views[d] = Some(rv.reshape(&kshape(&v.shape)).map_err(kerr)?);
        }
    }
    for s in &an.steps {
        let node = &m.nodes[s.node];
        let t = temps_of(&s.kind);
        let each = s.outs.first().map_or(1, |&o| numel(o)).div_ceil(16) * 16;
        lw.temps = (0..t).map(|i| (i * each, each)).collect();
        lower_ops::step(&mut lw, s).map_err(|e| match e {
            Error::Kernel(msg) => node.unsupported(msg),
            e => e,
        })?;
        let fused = matches!(&s.kind, Kind::Conv { bn: true, .. });
        nodes.push(NodeInfo {
            name: node.name.clone(),
            op: match &s.label {
                Some(l) => l.clone(),
                None if fused => format!("{}+BatchNormalization", node.op),
                None => node.op.clone(),
            },
        });
        markers.mark(&mut lw.k)?;
    }
    let mut any_copy = !final_copies.is_empty();
    for (oi, v) in &final_copies {
        let dst = out_tensors[*oi].view().clone();
        let src = match v {
            Val::Dyn(d) => lw.val(*d)?,
            Val::Const(t) => lw.konst(t, dst.dtype())?,
        };
        let src = src.reshape(&dst.shape()).map_err(kerr)?;
        nrt_kernel::library::activation::copy(&mut lw.k, &dst, &src).map_err(kerr)?;
    }
    for (oi, bytes) in raw_copies {
        let dst = out_tensors[oi].view().clone();
        let name = format!("const{}", lw.n_consts);
        lw.n_consts += 1;
        lw.weight_bytes += bytes.len() as u64;
        let c =
            lw.k.constant(&name, dst.dtype(), &dst.shape(), bytes)
                .map_err(kerr)?;
        nrt_kernel::library::activation::copy(&mut lw.k, &dst, c.view()).map_err(kerr)?;
        any_copy = true;
    }
    if any_copy {
        nodes.push(NodeInfo {
            name: "(outputs)".into(),
            op: "Copy".into(),
        });
        markers.mark(&mut lw.k)?;
    }
    let weight_bytes = lw.weight_bytes;
    let program = timing::finish(lw.k.build_unrolled().map_err(kerr)?, markers.count)?;
    let io_bytes: usize = inputs
        .iter()
        .chain(&outputs)
        .map(|t| {
            let size = if t.elem.is_float() {
                io_dtype(t.elem).size()
            } else {
                t.elem.size()
            };
            t.shape.iter().product::<usize>().max(1) * size
        })
        .sum();
    let scratch_bytes = ((arena.peak + temp_need) * esize) as u64;
    Ok(Lowered {
        program,
        inputs,
        outputs,
        empty_outputs,
        folded_outputs,
        nodes,
        peak_bytes: scratch_bytes + io_bytes as u64 + weight_bytes,
        scratch_bytes,
        unplanned_bytes: (unplanned * esize) as u64,
        weight_bytes,
        folded: an.folded,
        fused: an.fused,
        merged: an.merged,
        bound: Vec::new(),
    })
}

/// The kernel dtype and bytes of an integer or boolean graph output `name`: its value must
/// be known at build time (a constant folded on the host), as the device computes in
/// floating point; its byte size must be even (the device's smallest element is 2 bytes).
fn int_output(
    m: &Model,
    an: &Analysis,
    producer: &HashMap<usize, usize>,
    name: &str,
    v: &Val,
    elem: Elem,
) -> Result<(DType, Vec<u8>)> {
    let t = match v {
        Val::Const(t) => crate::fold::cast(t, elem),
        Val::Dyn(d) => {
            let val = &an.values[*d];
            let root = val.alias_of.unwrap_or(*d);
            let what = format!(
                "graph output '{name}' of element type {} computed on the device (the device \
                 computes in floating point; integer and boolean outputs must fold to \
                 constants on the host)",
                elem.name()
            );
            return Err(
                match producer.get(&root).map(|&s| &m.nodes[an.steps[s].node]) {
                    Some(node) => node.unsupported(what),
                    None => Error::Unsupported {
                        node: format!("output {name}"),
                        op: "graph output".into(),
                        what,
                    },
                },
            );
        }
    };
    let bytes = t.int_bytes().unwrap_or_default();
    let carrier = match bytes.len() {
        n if n % 4 == 0 => DType::I32,
        n if n % 2 == 0 => DType::F16,
        n => {
            return Err(Error::Unsupported {
                node: format!("output {name}"),
                op: "graph output".into(),
                what: format!(
                    "element type {}, {n} byte{} (an odd size: device tensors hold whole 2- or \
                     4-byte elements)",
                    elem.name(),
                    if n == 1 { "" } else { "s" }
                ),
            });
        }
    };
    Ok((carrier, bytes))
}
