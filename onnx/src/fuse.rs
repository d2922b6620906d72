//! Fusions over the analysed steps, where they are plainly profitable and keep the meaning:
//!
//! * **GELU**: the chain exporters write for the exact GELU, `x·0.5·(1 + erf(x/√2))` (a
//!   `Div` by √2 or a `Mul` by 1/√2, `Erf`, `Add` 1, and the two products in either order),
//!   becomes one ScalarE activation (`ActFn::GeluErf`, evaluated once in binary64 and
//!   rounded once instead of five fp32 roundings); likewise GPT-2's tanh approximation,
//!   `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` (8 nodes), becomes `ActFn::Gelu`.
//! * **LayerNorm**: the chain PyTorch exports for `nn.LayerNorm` before opset 17
//!   (`ReduceMean`, `Sub`, `Pow` 2 (or `Mul` by itself), `ReduceMean`, `Add` ε, `Sqrt`, `Div`,
//!   `Mul` γ, `Add` β, over the last axis) becomes the kernel library's layer norm.
//! * **Bias**: `MatMul` followed by an `Add` of a constant row vector becomes a matmul whose
//!   epilogue adds it as each tile leaves PSUM (bit-identical in fp32).
//! * **Activation**: a `MatMul` (with its bias) followed by a single-function activation
//!   becomes a matmul whose epilogue applies it (bit-identical in fp32).
//!
//! A chain is fused only when each intermediate is read by the chain alone (no other step,
//! no graph output, no view of it). The fused step takes the first node's name and says what
//! it holds (`MatMul+Add`, `Gelu (5 nodes)`, ...); `Analysis::merged` counts the nodes that
//! no longer have a step of their own.

use std::sync::Arc;

use nrt_kernel::library::reduce::ReduceOp;
use nrt_kernel::{ActFn, AluOp};

use crate::graph::Model;
use crate::ir::{Analysis, Kind, Operand, Step};
use crate::tensor::HostTensor;

/// Readers and producers of the device values of an analysis.
struct Uses {
    /// Per value: how many operands of steps read it (a matmul's bias included).
    readers: Vec<usize>,
    /// Per value: a graph output, a graph input, or viewed by another value.
    pinned: Vec<bool>,
    /// Per value: the index of the step producing it.
    producer: Vec<Option<usize>>,
}

impl Uses {
    fn of(an: &Analysis, steps: &[Option<Step>]) -> Uses {
        let nv = an.values.len();
        let mut u = Uses {
            readers: vec![0; nv],
            pinned: vec![false; nv],
            producer: vec![None; nv],
        };
        for (i, s) in steps.iter().enumerate() {
            let Some(s) = s else { continue };
            for o in operands(s) {
                if let Operand::Dyn(d) = o
                    && let Some(r) = u.readers.get_mut(*d)
                {
                    *r += 1;
                }
            }
            for &o in &s.outs {
                if let Some(p) = u.producer.get_mut(o) {
                    *p = Some(i);
                }
            }
        }
        for (d, v) in an.values.iter().enumerate() {
            if v.input.is_some() {
                u.pinned[d] = true;
            }
            if let Some(r) = v.alias_of {
                u.pinned[d] = true;
                if let Some(p) = u.pinned.get_mut(r) {
                    *p = true;
                }
            }
        }
        for (_, v) in &an.outputs {
            if let crate::ir::Val::Dyn(d) = v {
                let root = an.values[*d].alias_of.unwrap_or(*d);
                u.pinned[*d] = true;
                u.pinned[root] = true;
            }
        }
        u
    }

    /// Whether `d` is read exactly `n` times and only by steps (so a fusion that consumes
    /// those reads can drop it).
    fn private(&self, d: usize, n: usize) -> bool {
        self.readers.get(d) == Some(&n) && self.pinned.get(d) == Some(&false)
    }
}

/// Every operand a step reads.
fn operands(s: &Step) -> impl Iterator<Item = &Operand> {
    let bias = match &s.kind {
        Kind::MatMul { bias: Some(b), .. } => Some(b),
        _ => None,
    };
    s.ins.iter().chain(bias)
}

/// The single output of step `i` when it has exactly one.
fn out1(steps: &[Option<Step>], i: usize) -> Option<usize> {
    match steps.get(i)?.as_ref()?.outs.as_slice() {
        [o] => Some(*o),
        _ => None,
    }
}

/// The device value an operand is.
fn dyn_of(o: &Operand) -> Option<usize> {
    match o {
        Operand::Dyn(d) => Some(*d),
        Operand::Const(_) => None,
    }
}

/// A one-element constant's value.
fn scalar(o: &Operand) -> Option<f64> {
    match o {
        Operand::Const(t) if t.len() == 1 => t.as_f64().first().copied(),
        _ => None,
    }
}

/// `a` within a few fp32 rounding steps of `b`.
fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= b.abs() * 4e-7
}

/// A constant whose shape is all ones but its last dimension `n` (or exactly `[n]`),
/// reshaped to `[n]`.
fn row_vector(o: &Operand, n: usize) -> Option<Arc<HostTensor>> {
    let Operand::Const(t) = o else { return None };
    let (last, lead) = t.shape.split_last()?;
    if *last != n || lead.iter().any(|&d| d != 1) || t.len() != n {
        return None;
    }
    let mut c = (**t).clone();
    c.shape = vec![n];
    Some(Arc::new(c))
}

/// The two operands of a step as `(device value, constant row vector of n)`, in either
/// order (`n` from the device value's last dimension when `None`).
fn value_and_row(
    an: &Analysis,
    ins: &[Operand],
    n: Option<usize>,
) -> Option<(usize, Arc<HostTensor>)> {
    let [a, b] = ins else { return None };
    let (d, c) = match (dyn_of(a), dyn_of(b)) {
        (Some(d), None) => (d, b),
        (None, Some(d)) => (d, a),
        _ => return None,
    };
    let n = match n {
        Some(n) => n,
        None => *an.values.get(d)?.shape.last()?,
    };
    Some((d, row_vector(c, n)?))
}

/// Applies every fusion; returns how many nodes were merged into other steps.
pub(crate) fn fuse(an: &mut Analysis, m: &Model) -> usize {
    let mut steps: Vec<Option<Step>> = std::mem::take(&mut an.steps)
        .into_iter()
        .map(Some)
        .collect();
    let mut merged = 0;
    // Chains first (their results may then join a matmul's epilogue).
    let mut i = 0;
    while i < steps.len() {
        let uses = Uses::of(an, &steps);
        if let Some(n) =
            gelu(an, &mut steps, &uses, i).or_else(|| layer_norm(an, &mut steps, &uses, i))
        {
            merged += n;
        }
        i += 1;
    }
    let mut i = 0;
    while i < steps.len() {
        let uses = Uses::of(an, &steps);
        if epilogue(an, m, &mut steps, &uses, i) {
            merged += 1;
            continue; // the same matmul may take an activation next
        }
        i += 1;
    }
    an.steps = steps.into_iter().flatten().collect();
    merged
}

/// The step of kind `Act { f, scale, bias }` producing `d`, when `d` is private to one
/// reader: `(step index, input value)`.
fn act_of(
    steps: &[Option<Step>],
    uses: &Uses,
    d: usize,
    ok: impl Fn(ActFn, f32, f32) -> bool,
) -> Option<(usize, usize)> {
    let p = (*uses.producer.get(d)?)?;
    let s = steps[p].as_ref()?;
    match (&s.kind, s.ins.as_slice()) {
        (Kind::Act { f, scale, bias }, [x]) if ok(*f, *scale, *bias) && uses.private(d, 1) => {
            Some((p, dyn_of(x)?))
        }
        _ => None,
    }
}

/// The binary step `op` producing `d` (private to `reads` readers): `(step, operands)`.
fn binary_of<'s>(
    steps: &'s [Option<Step>],
    uses: &Uses,
    d: usize,
    op: AluOp,
    reads: usize,
) -> Option<(usize, &'s [Operand])> {
    let p = (*uses.producer.get(d)?)?;
    let s = steps[p].as_ref()?;
    match &s.kind {
        Kind::Binary(o) if *o == op && s.ins.len() == 2 && uses.private(d, reads) => {
            Some((p, s.ins.as_slice()))
        }
        _ => None,
    }
}

/// Replaces the steps `gone` by `s` placed at the last of them.
fn replace(steps: &mut [Option<Step>], gone: &[usize], s: Step) {
    let at = gone.iter().copied().max().unwrap_or(0);
    for &g in gone {
        steps[g] = None;
    }
    steps[at] = Some(s);
}

/// The exact-GELU chain ending at step `i` (its last product): returns the nodes merged.
fn gelu(an: &Analysis, steps: &mut [Option<Step>], uses: &Uses, i: usize) -> Option<usize> {
    let last = steps.get(i)?.as_ref()?;
    let y = out1(steps, i)?;
    // The `1 + erf(x/√2)` factor: Add 1 ← Erf ← (Div √2 | Mul 1/√2) ← x; or the tanh form's
    // `1 + tanh(√(2/π)·(x + 0.044715·x³))`: Add 1 ← Tanh ← Mul √(2/π) ← Add(x, Mul 0.044715
    // ← Pow(x, 3)). Gives x, the function, and the chain's steps.
    let one_plus = |p: usize| -> Option<(usize, ActFn, Vec<usize>)> {
        let (add, e) = act_of(steps, uses, p, |f, s, b| {
            f == ActFn::Identity && s == 1.0 && b == 1.0
        })?;
        if let Some((erf, u)) = act_of(steps, uses, e, |f, s, b| {
            f == ActFn::Erf && s == 1.0 && b == 0.0
        }) {
            let up = (*uses.producer.get(u)?)?;
            let us = steps[up].as_ref()?;
            let x = match (&us.kind, us.ins.as_slice()) {
                (Kind::Binary(AluOp::Divide), [x, c])
                    if near(scalar(c)?, std::f64::consts::SQRT_2) =>
                {
                    dyn_of(x)?
                }
                (
                    Kind::Act {
                        f: ActFn::Identity,
                        scale,
                        bias,
                    },
                    [x],
                ) if *bias == 0.0 && near(f64::from(*scale), std::f64::consts::FRAC_1_SQRT_2) => {
                    dyn_of(x)?
                }
                _ => return None,
            };
            return uses
                .private(u, 1)
                .then(|| (x, ActFn::GeluErf, vec![up, erf, add]));
        }
        let (tanh, s) = act_of(steps, uses, e, |f, s, b| {
            f == ActFn::Tanh && s == 1.0 && b == 0.0
        })?;
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let (ks, inner) = act_of(steps, uses, s, |f, s, b| {
            f == ActFn::Identity && b == 0.0 && near(f64::from(s), k)
        })?;
        let (sum, ins) = binary_of(steps, uses, inner, AluOp::Add, 1)?;
        let [a, b] = ins else { return None };
        let (a, b) = (dyn_of(a)?, dyn_of(b)?);
        // One operand is x, the other 0.044715·x³ of that same x.
        let cube_of = |m: usize| -> Option<(usize, [usize; 2])> {
            let (cs, x3) = act_of(steps, uses, m, |f, s, b| {
                f == ActFn::Identity && b == 0.0 && near(f64::from(s), 0.044_715)
            })?;
            let pp = (*uses.producer.get(x3)?)?;
            let ps = steps[pp].as_ref()?;
            match (&ps.kind, ps.ins.as_slice()) {
                (Kind::Binary(AluOp::Power), [x, c])
                    if scalar(c)? == 3.0 && uses.private(x3, 1) =>
                {
                    Some((dyn_of(x)?, [pp, cs]))
                }
                _ => None,
            }
        };
        let (x, [pow, cs]) = match (cube_of(b), cube_of(a)) {
            (Some((x, c)), _) if x == a => (x, c),
            (_, Some((x, c))) if x == b => (x, c),
            _ => return None,
        };
        Some((x, ActFn::Gelu, vec![pow, cs, sum, ks, tanh, add]))
    };
    let half = |f: ActFn, s: f32, b: f32| f == ActFn::Identity && s == 0.5 && b == 0.0;
    let (x, f, chain) = match (&last.kind, last.ins.as_slice()) {
        // (x · (1 + erf)) · 0.5
        (Kind::Act { f, scale, bias }, [q]) if half(*f, *scale, *bias) => {
            let q = dyn_of(q)?;
            let (mul, ins) = binary_of(steps, uses, q, AluOp::Mul, 1)?;
            let [a, b] = ins else { return None };
            let (a, b) = (dyn_of(a)?, dyn_of(b)?);
            let ((x, f, mut c), other_x) = match (one_plus(b), one_plus(a)) {
                (Some(r), _) => (r, a),
                (None, Some(r)) => (r, b),
                _ => return None,
            };
            if other_x != x {
                return None;
            }
            c.extend([mul, i]);
            (x, f, c)
        }
        // (x · 0.5) · (1 + erf)
        (Kind::Binary(AluOp::Mul), [a, b]) => {
            let (a, b) = (dyn_of(a)?, dyn_of(b)?);
            let try_pair = |h: usize, p: usize| -> Option<(usize, ActFn, Vec<usize>)> {
                let (hs, hx) = act_of(steps, uses, h, half)?;
                let (x, f, mut c) = one_plus(p)?;
                c.extend([hs, i]);
                (hx == x).then_some((x, f, c))
            };
            try_pair(a, b).or_else(|| try_pair(b, a))?
        }
        _ => return None,
    };
    // x is read by the chain twice (the division and the product) and maybe elsewhere; its
    // shape must be the output's (no broadcasting in the products).
    if an.values.get(x)?.shape != an.values.get(y)?.shape {
        return None;
    }
    let first = chain.iter().copied().min()?;
    let node = steps[first].as_ref()?.node;
    let s = Step {
        node,
        kind: Kind::Act {
            f,
            scale: 1.0,
            bias: 0.0,
        },
        ins: vec![Operand::Dyn(x)],
        outs: vec![y],
        label: Some(match f {
            ActFn::GeluErf => format!("Gelu ({} nodes)", chain.len()),
            _ => format!("Gelu tanh ({} nodes)", chain.len()),
        }),
    };
    let merged = chain.len() - 1;
    replace(steps, &chain, s);
    Some(merged)
}

/// The decomposed layer norm ending at step `i` (the `Add` of β): returns the nodes merged.
fn layer_norm(an: &Analysis, steps: &mut [Option<Step>], uses: &Uses, i: usize) -> Option<usize> {
    let out = out1(steps, i)?;
    let last = steps.get(i)?.as_ref()?;
    let Kind::Binary(AluOp::Add) = last.kind else {
        return None;
    };
    let cols = *an.values.get(out)?.shape.last()?;
    // Add β ← Mul γ ← Div ← (Sub, Sqrt ← Add ε ← ReduceMean ← Pow 2 ← Sub).
    let (g, beta) = value_and_row(an, &last.ins, Some(cols))?;
    let (mul, ins) = binary_of(steps, uses, g, AluOp::Mul, 1)?;
    let (y, gamma) = value_and_row(an, ins, Some(cols))?;
    let (div, ins) = binary_of(steps, uses, y, AluOp::Divide, 1)?;
    let [d, std] = ins else { return None };
    let (d, std) = (dyn_of(d)?, dyn_of(std)?);
    let (sqrt, ve) = act_of(steps, uses, std, |f, s, b| {
        f == ActFn::Sqrt && s == 1.0 && b == 0.0
    })?;
    let (add_eps, var) = act_of(steps, uses, ve, |f, s, _| f == ActFn::Identity && s == 1.0)?;
    let Kind::Act { bias: eps, .. } = steps[add_eps].as_ref()?.kind else {
        return None;
    };
    let mean_last = |v: usize, readers: usize| -> Option<(usize, usize)> {
        let p = (*uses.producer.get(v)?)?;
        let s = steps[p].as_ref()?;
        let r = an.values.get(v)?.shape.len();
        match (&s.kind, s.ins.as_slice()) {
            (
                Kind::Reduce {
                    op: ReduceOp::Mean,
                    axes,
                    keepdims: true,
                },
                [x],
            ) if axes.as_slice() == [r.checked_sub(1)?] && uses.private(v, readers) => {
                Some((p, dyn_of(x)?))
            }
            _ => None,
        }
    };
    let (rm2, sq) = mean_last(var, 1)?;
    // The square: Pow 2 (an exact Square) or Mul of d by itself.
    let p = (*uses.producer.get(sq)?)?;
    let ss = steps[p].as_ref()?;
    let sq_ok = uses.private(sq, 1)
        && match (&ss.kind, ss.ins.as_slice()) {
            (
                Kind::Act {
                    f: ActFn::Square,
                    scale,
                    bias,
                },
                [a],
            ) => *scale == 1.0 && *bias == 0.0 && dyn_of(a) == Some(d),
            (Kind::Binary(AluOp::Mul), [a, b]) => dyn_of(a) == Some(d) && dyn_of(b) == Some(d),
            _ => false,
        };
    if !sq_ok {
        return None;
    }
    // d = x − mean, read by the square (once or twice) and the division.
    let d_reads = if matches!(ss.kind, Kind::Binary(_)) {
        3
    } else {
        2
    };
    let (sub, ins) = binary_of(steps, uses, d, AluOp::Sub, d_reads)?;
    let [x, mean] = ins else { return None };
    let (x, mean) = (dyn_of(x)?, dyn_of(mean)?);
    let (rm1, mx) = mean_last(mean, 1)?;
    if mx != x || an.values.get(x)?.shape != an.values.get(out)?.shape {
        return None;
    }
    let chain = [rm1, sub, p, rm2, add_eps, sqrt, div, mul, i];
    let node = steps[rm1].as_ref()?.node;
    let s = Step {
        node,
        kind: Kind::LayerNorm { eps, cols },
        ins: vec![Operand::Dyn(x), Operand::Const(gamma), Operand::Const(beta)],
        outs: vec![out],
        label: Some("LayerNormalization (9 nodes)".into()),
    };
    replace(steps, &chain, s);
    Some(8)
}

/// A bias add or an activation after the matmul producing step `i`'s input, folded into its
/// epilogue: whether it was.
fn epilogue(an: &Analysis, m: &Model, steps: &mut [Option<Step>], uses: &Uses, i: usize) -> bool {
    let Some(s) = steps.get(i).and_then(Option::as_ref) else {
        return false;
    };
    let Some(out) = out1(steps, i) else {
        return false;
    };
    // The step's matmul operand and what it adds.
    enum Add {
        Bias(Arc<HostTensor>),
        Act(ActFn, String),
    }
    let (a, what) = match (&s.kind, s.ins.as_slice()) {
        (Kind::Binary(AluOp::Add), ins) => {
            let Some((av, b)) = value_and_row(an, ins, None) else {
                return false;
            };
            (av, Add::Bias(b))
        }
        (Kind::Act { f, scale, bias }, [x])
            if *scale == 1.0 && *bias == 0.0 && *f != ActFn::Identity =>
        {
            let Some(av) = dyn_of(x) else { return false };
            let label = s
                .label
                .clone()
                .unwrap_or_else(|| m.nodes[s.node].op.clone());
            (av, Add::Act(*f, label))
        }
        _ => return false,
    };
    let Some(p) = uses.producer.get(a).copied().flatten() else {
        return false;
    };
    if !uses.private(a, 1)
        || an.values.get(a).map(|v| &v.shape) != an.values.get(out).map(|v| &v.shape)
    {
        return false;
    }
    let Some(mm) = steps[p].as_mut() else {
        return false;
    };
    let Kind::MatMul { bias, act, .. } = &mut mm.kind else {
        return false;
    };
    let base = mm
        .label
        .clone()
        .unwrap_or_else(|| m.nodes[mm.node].op.clone());
    match what {
        Add::Bias(b) if bias.is_none() && act.is_none() => {
            *bias = Some(Operand::Const(b));
            mm.label = Some(format!("{base}+Add"));
        }
        Add::Act(f, label) if act.is_none() => {
            *act = Some(f);
            mm.label = Some(format!("{base}+{label}"));
        }
        _ => return false,
    }
    mm.outs = vec![out];
    steps[i] = None;
    true
}
