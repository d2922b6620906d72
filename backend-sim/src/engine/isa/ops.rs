//! Operand vocabulary of the data-path instructions: the activation functions of format 1.1
//! ([`ActFn`]) and their evaluation ([`activate`]), immediate-or-per-partition operands
//! ([`Bias`], [`Operand`]), one step of a tensor–scalar chain ([`ScalarStep`]) and the
//! reduction an `Activate` may fold its output into ([`ActReduce`]).

use super::actfunc::ActFunc;
use super::alu::AluOp;
use super::pattern::AccessPattern;
use crate::engine::act::{
    erf_f64, gelu_erf_f64, log_f64, rsqrt_f64, sigmoid_f64, silu_f64, softplus_f64,
};
use crate::engine::math::activation;
use crate::engine::nan::canon;

/// The function of a format-1.1 `Activate`. Codes 0–4 are [`ActFunc`]'s functions, evaluated
/// exactly as there; the others are built from IEEE `+ − × /` and `sqrt` in binary64 (see
/// `engine::act`), rounded once, NaN results canonical. The `nki.language` name is in
/// parentheses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFn {
    /// x (`copy`); NaN passes through.
    Identity,
    /// max(x, 0) (`relu`); NaN passes through.
    Relu,
    /// eˣ (`exp`).
    Exp,
    /// tanh x (`tanh`).
    Tanh,
    /// GELU, tanh approximation (`gelu_apprx_tanh`; format 1.0's `gelu`).
    Gelu,
    /// GELU, exact: `x·Φ(x) = ½·x·(1 + erf(x/√2))` (`gelu`).
    GeluErf,
    /// `1/(1 + e^(−x))` (`sigmoid`).
    Sigmoid,
    /// `x·sigmoid(x)` (`silu`).
    Silu,
    /// `ln(1 + eˣ)` (`softplus`).
    Softplus,
    /// ln x (`log`): −∞ at ±0, NaN below 0.
    Log,
    /// √x (`sqrt`), correctly rounded: −0 at −0, NaN below 0.
    Sqrt,
    /// 1/√x (`rsqrt`): +∞ at +0, −∞ at −0, NaN below 0.
    Rsqrt,
    /// 1/x (`reciprocal`), correctly rounded.
    Reciprocal,
    /// x² (`square`), correctly rounded.
    Square,
    /// |x| (`abs`).
    Abs,
    /// erf x (`erf`).
    Erf,
}

impl ActFn {
    /// Every function, in code order.
    pub const ALL: [ActFn; 16] = [
        ActFn::Identity,
        ActFn::Relu,
        ActFn::Exp,
        ActFn::Tanh,
        ActFn::Gelu,
        ActFn::GeluErf,
        ActFn::Sigmoid,
        ActFn::Silu,
        ActFn::Softplus,
        ActFn::Log,
        ActFn::Sqrt,
        ActFn::Rsqrt,
        ActFn::Reciprocal,
        ActFn::Square,
        ActFn::Abs,
        ActFn::Erf,
    ];

    /// Program-format code.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// From the program-format code.
    pub const fn from_code(c: u8) -> Option<Self> {
        if (c as usize) < Self::ALL.len() {
            Some(Self::ALL[c as usize])
        } else {
            None
        }
    }

    /// The `nki.language` name.
    pub const fn name(self) -> &'static str {
        match self {
            ActFn::Identity => "copy",
            ActFn::Relu => "relu",
            ActFn::Exp => "exp",
            ActFn::Tanh => "tanh",
            ActFn::Gelu => "gelu_apprx_tanh",
            ActFn::GeluErf => "gelu",
            ActFn::Sigmoid => "sigmoid",
            ActFn::Silu => "silu",
            ActFn::Softplus => "softplus",
            ActFn::Log => "log",
            ActFn::Sqrt => "sqrt",
            ActFn::Rsqrt => "rsqrt",
            ActFn::Reciprocal => "reciprocal",
            ActFn::Square => "square",
            ActFn::Abs => "abs",
            ActFn::Erf => "erf",
        }
    }

    /// The format-1.0 function with the same code, if any.
    pub const fn legacy(self) -> Option<ActFunc> {
        ActFunc::from_code(self.code())
    }
}

impl From<ActFunc> for ActFn {
    fn from(f: ActFunc) -> Self {
        match f {
            ActFunc::Identity => ActFn::Identity,
            ActFunc::Relu => ActFn::Relu,
            ActFunc::Exp => ActFn::Exp,
            ActFunc::Tanh => ActFn::Tanh,
            ActFunc::Gelu => ActFn::Gelu,
        }
    }
}

/// Applies a format-1.1 activation function to a binary32 argument (what `Activate` does to
/// each `x·scale + bias`): the five functions of format 1.0 exactly as `Activation` evaluates
/// them, the others in binary64 rounded once to binary32; every NaN result canonical.
#[inline]
pub fn activate(func: ActFn, t: f32) -> f32 {
    let x = f64::from(t);
    match func {
        ActFn::Identity => activation(ActFunc::Identity, t),
        ActFn::Relu => activation(ActFunc::Relu, t),
        ActFn::Exp => activation(ActFunc::Exp, t),
        ActFn::Tanh => activation(ActFunc::Tanh, t),
        ActFn::Gelu => activation(ActFunc::Gelu, t),
        ActFn::GeluErf => canon(gelu_erf_f64(x) as f32),
        ActFn::Sigmoid => canon(sigmoid_f64(x) as f32),
        ActFn::Silu => canon(silu_f64(x) as f32),
        ActFn::Softplus => canon(softplus_f64(x) as f32),
        ActFn::Log => canon(log_f64(x) as f32),
        ActFn::Sqrt => canon(t.sqrt()),
        ActFn::Rsqrt => canon(rsqrt_f64(x) as f32),
        ActFn::Reciprocal => canon(1.0 / t),
        ActFn::Square => canon(t * t),
        ActFn::Abs => canon(t.abs()),
        ActFn::Erf => canon(erf_f64(x) as f32),
    }
}

/// The bias of an `Activation` / `Activate`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bias {
    /// One value for every element.
    Imm(f32),
    /// One value per partition: a `[partitions, 1]` access with the same partitions as the
    /// input.
    PerPartition(AccessPattern),
}

/// A scalar operand of a format-1.1 instruction: an immediate, or one value per partition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// A binary32 immediate (converted to int32 with RNE and saturation when the instruction
    /// computes in int32).
    Imm(f32),
    /// An int32 immediate (converted to binary32 with RNE when the instruction computes in
    /// binary32): exact masks and shift counts for int32 data.
    Int(i32),
    /// One value per partition: a `[partitions, 1]` access with the output's partitions.
    PerPartition(AccessPattern),
}

impl Operand {
    /// The access of a per-partition operand.
    pub const fn pattern(&self) -> Option<AccessPattern> {
        match self {
            Operand::PerPartition(ap) => Some(*ap),
            Operand::Imm(_) | Operand::Int(_) => None,
        }
    }
}

/// One step `x ← x op operand` (`x ← operand op x` when `reverse`) of a tensor–scalar chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScalarStep {
    /// Operation.
    pub op: AluOp,
    /// The scalar operand.
    pub operand: Operand,
    /// Swap the operands: the scalar is the left one.
    pub reverse: bool,
}

impl ScalarStep {
    /// `x op operand` (or reversed), operand value `s`, binary32.
    #[inline]
    pub(crate) fn f32(&self, x: f32, s: f32) -> f32 {
        if self.reverse {
            self.op.eval_f32(s, x)
        } else {
            self.op.eval_f32(x, s)
        }
    }

    /// `x op operand` (or reversed), operand value `s`, int32.
    #[inline]
    pub(crate) fn i32(&self, x: i32, s: i32) -> i32 {
        if self.reverse {
            self.op.apply_i32(s, x)
        } else {
            self.op.apply_i32(x, s)
        }
    }
}

/// The free-axis reduction of an `Activate` (NKI `activation_reduce`): the activated values
/// of each partition folded with `op` into `out`, a `[partitions, 1]` access.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActReduce {
    /// `Add` (NeuronCore-v2) or `Max`.
    pub op: AluOp,
    /// The `[partitions, 1]` result.
    pub out: AccessPattern,
}
