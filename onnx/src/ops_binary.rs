//! The element-wise binary and variadic operators (`Add` `Sub` `Mul` `Div` `Pow` `Max` `Min`
//! `Sum` `Mean` and the comparisons): folded on the host when every input is constant, one
//! activation instruction when one operand is a scalar constant and that is exact, else a
//! broadcasting device step.

use nrt_kernel::{ActFn, AluOp};

use crate::error::Result;
use crate::fold::{self, broadcast};
use crate::ir::{Ctx, Kind, Operand, Outcome, elems, step};
use crate::tensor::{Data, Elem};

pub(crate) fn binary(cx: &mut Ctx<'_>) -> Result<Outcome> {
    let n = cx.node;
    let op = n.op.as_str();
    let count = cx.ins.iter().flatten().count();
    if count == 0 || (count == 1 && !matches!(op, "Max" | "Min" | "Sum" | "Mean")) {
        return Err(n.invalid("needs two inputs"));
    }
    let mut shape = cx.shape(0)?;
    for i in 1..cx.ins.len() {
        if cx.has(i) {
            let s = cx.shape(i)?;
            shape = broadcast(&shape, &s)
                .ok_or_else(|| n.invalid(format!("shapes {shape:?} and {s:?} do not broadcast")))?;
        }
    }
    elems(&shape, n)?;
    if cx.all_const() {
        let mut acc = (*cx.need_const(0, "A")?).clone();
        for i in 1..cx.ins.len() {
            if !cx.has(i) {
                continue;
            }
            let b = cx.need_const(i, "B")?;
            let r = match op {
                "Add" | "Sum" | "Mean" => fold::binary(&acc, &b, |x, y| x + y, i64::wrapping_add),
                "Sub" => fold::binary(&acc, &b, |x, y| x - y, i64::wrapping_sub),
                "Mul" => fold::binary(&acc, &b, |x, y| x * y, i64::wrapping_mul),
                "Div" => fold::binary(
                    &acc,
                    &b,
                    |x, y| x / y,
                    |x, y| if y == 0 { 0 } else { x.wrapping_div(y) },
                ),
                // The output has the base's type (an integer base: truncated, as NumPy's
                // astype does).
                "Pow" => fold::binary(&acc, &b, f64::powf, |x, y| {
                    x.wrapping_pow(y.clamp(0, 63) as u32)
                })
                .map(|t| {
                    if acc.elem.is_float() {
                        t
                    } else {
                        fold::cast(&t, acc.elem)
                    }
                }),
                "Max" => fold::binary(&acc, &b, f64::max, i64::max),
                "Min" => fold::binary(&acc, &b, f64::min, i64::min),
                _ => {
                    let cmp = |x: f64, y: f64| -> bool {
                        match op {
                            "Equal" => x == y,
                            "Less" => x < y,
                            "Greater" => x > y,
                            "LessOrEqual" => x <= y,
                            _ => x >= y,
                        }
                    };
                    fold::binary(
                        &acc,
                        &b,
                        |x, y| f64::from(u8::from(cmp(x, y))),
                        |x, y| i64::from(cmp(x as f64, y as f64)),
                    )
                    .map(|t| fold::cast(&t, Elem::Bool))
                }
            };
            acc = r.ok_or_else(|| n.invalid("shapes do not broadcast"))?;
        }
        if op == "Mean" {
            let k = count as f64;
            acc = fold::cast(&acc, acc.elem);
            if let Data::F(v) = &mut acc.data {
                v.iter_mut().for_each(|x| *x /= k);
            }
        }
        if acc.elem.is_float() {
            acc = fold::cast(&acc, acc.elem);
        }
        return Ok(Outcome::Folded(vec![acc]));
    }
    for i in 0..cx.ins.len() {
        if cx.has(i) && cx.dyn_id(i).is_some() && !cx.elem(i)?.is_float() {
            return Err(n.unsupported(format!(
                "{} operands computed at run time",
                cx.elem(i)?.name()
            )));
        }
    }
    let alu = match op {
        "Add" | "Sum" | "Mean" => AluOp::Add,
        "Sub" => AluOp::Sub,
        "Mul" => AluOp::Mul,
        "Div" => AluOp::Divide,
        "Max" => AluOp::Max,
        "Min" => AluOp::Min,
        "Pow" => {
            // Common exponents as exact activations.
            if let Some(e) = cx.konst(1).filter(|t| t.len() == 1) {
                let f = match e.as_f64()[0] {
                    2.0 => Some(ActFn::Square),
                    0.5 => Some(ActFn::Sqrt),
                    1.0 => Some(ActFn::Identity),
                    -1.0 => Some(ActFn::Reciprocal),
                    _ => None,
                };
                if let (Some(f), true) = (f, cx.shape(1)?.len() <= cx.shape(0)?.len()) {
                    return step(
                        cx,
                        Kind::Act {
                            f,
                            scale: 1.0,
                            bias: 0.0,
                        },
                        vec![cx.operand(0)?],
                        vec![shape],
                    );
                }
            }
            AluOp::Power
        }
        // Comparisons give 1 / 0 in the compute dtype (the device has no bool).
        "Equal" => AluOp::Equal,
        "Less" => AluOp::Less,
        "Greater" => AluOp::Greater,
        "LessOrEqual" => AluOp::LessEqual,
        _ => AluOp::GreaterEqual,
    };
    // x op scalar-constant as one activation where exact (and scalar-constant + x,
    // scalar-constant · x: the same, as fp32 addition and multiplication commute). Not Mean,
    // which divides the sum by the count after.
    let scalar_at = |i: usize| -> Result<Option<f32>> {
        let x = 1 - i;
        Ok(match (cx.konst(i).filter(|t| t.len() == 1), cx.dyn_id(x)) {
            (Some(c), Some(_)) if cx.shape(x)? == shape => Some(c.as_f64()[0] as f32),
            _ => None,
        })
    };
    // c − x is −1·x + c: the product exact, the sum the subtraction's one rounding.
    let konst_first =
        count == 2 && matches!(alu, AluOp::Add | AluOp::Mul | AluOp::Sub) && op != "Mean";
    let (c, x) = match (count == 2 && op != "Mean", scalar_at(1)?, konst_first) {
        (true, Some(c), _) => (Some(c), 0),
        (_, None, true) => (scalar_at(0)?, 1),
        _ => (None, 0),
    };
    if let Some(c) = c {
        let act = match alu {
            AluOp::Add => Some((1.0, c)),
            AluOp::Sub if x == 0 => Some((1.0, -c)),
            AluOp::Sub => Some((-1.0, c)),
            AluOp::Mul => Some((c, 0.0)),
            // x / 2^k is x · 2^−k: the same real number, so the same rounding (both
            // normal powers of two, the reciprocal exact).
            AluOp::Divide if x == 0 && pow2_reciprocal(c).is_some() => {
                pow2_reciprocal(c).map(|r| (r, 0.0))
            }
            _ => None,
        };
        if let Some((scale, bias)) = act {
            return step(
                cx,
                Kind::Act {
                    f: ActFn::Identity,
                    scale,
                    bias,
                },
                vec![cx.operand(x)?],
                vec![shape],
            );
        }
    }
    let ins: Vec<Operand> = (0..cx.ins.len())
        .filter(|&i| cx.has(i))
        .map(|i| cx.operand(i))
        .collect::<Result<_>>()?;
    if op == "Mean" {
        // Sum, then divide by the count (one more step over the sum).
        return step(cx, Kind::Binary(AluOp::Add), ins, vec![shape]).map(mean_of);
    }
    step(cx, Kind::Binary(alu), ins, vec![shape])
}

/// `1/c` when `c` is a power of two whose reciprocal is a normal fp32 (so `x / c` and
/// `x · (1/c)` are the same real number, rounded once either way).
fn pow2_reciprocal(c: f32) -> Option<f32> {
    let r = 1.0 / c;
    (c.is_normal() && r.is_normal() && c.to_bits() & 0x007F_FFFF == 0).then_some(r)
}

fn mean_of(o: Outcome) -> Outcome {
    match o {
        Outcome::Step(Kind::Binary(AluOp::Add), ins, shapes) => {
            Outcome::Step(Kind::Mean, ins, shapes)
        }
        o => o,
    }
}
