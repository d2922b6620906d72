//! The activation functions of format 1.0's `Activation` ([`ActFunc`]); their evaluation is
//! `engine::math::activation`.

/// The function of a format-1.0 `Activation`: `out = func(in * scale + bias)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFunc {
    /// x
    Identity,
    /// max(x, 0)
    Relu,
    /// eˣ
    Exp,
    /// tanh x
    Tanh,
    /// GELU, tanh approximation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
    Gelu,
}

impl ActFunc {
    /// Program-format code.
    pub const fn code(self) -> u8 {
        self as u8
    }
    /// From the program-format code.
    pub const fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(ActFunc::Identity),
            1 => Some(ActFunc::Relu),
            2 => Some(ActFunc::Exp),
            3 => Some(ActFunc::Tanh),
            4 => Some(ActFunc::Gelu),
            _ => None,
        }
    }
    /// Name.
    pub const fn name(self) -> &'static str {
        match self {
            ActFunc::Identity => "identity",
            ActFunc::Relu => "relu",
            ActFunc::Exp => "exp",
            ActFunc::Tanh => "tanh",
            ActFunc::Gelu => "gelu",
        }
    }
}
