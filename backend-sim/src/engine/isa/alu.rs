//! The ALU operations ([`AluOp`]) of the elementwise, reduction, select and scan instructions:
//! codes, classes (arithmetic, comparison, logical, bitvec), which may reduce, and their exact
//! semantics on binary32 and int32, NaN included.
//!
//! NaN rule: every operation, in every instruction of either format ([`AluOp::eval_f32`]), is
//! deterministic on every machine: NaN results are the canonical quiet NaN `0x7FC0_0000`, and
//! max/min are IEEE 754-2019 maximumNumber/minimumNumber with −0 ordered below +0.

use crate::engine::act::pow_f64;
use crate::engine::dtype::f32_to_i32;
use crate::engine::nan::canon;

/// A binary ALU operation (the `nki.language` operator it corresponds to in parentheses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    /// a + b (`add`)
    Add,
    /// a − b (`subtract`)
    Sub,
    /// a × b (`multiply`)
    Mul,
    /// max(a, b) (`maximum`): maximumNumber, a NaN operand yields the other operand; −0 < +0.
    Max,
    /// min(a, b) (`minimum`): IEEE minNum, a NaN operand yields the other operand; −0 < +0.
    Min,
    /// a ÷ b (`divide`): IEEE division in binary32; on int32 truncating, `a ÷ 0 = 0`,
    /// wrapping (`MIN ÷ −1 = MIN`).
    Divide,
    /// aᵇ (`power`): IEEE `pow` special cases, see [`crate::engine::pow_f64`]; on int32 exact
    /// wrapping powers, a negative exponent truncates toward zero (`0⁻ⁿ = 0`).
    Power,
    /// a == b → 1 else 0 (`equal`; NaN is equal to nothing).
    Equal,
    /// a ≠ b → 1 else 0 (`not_equal`; true when either is NaN).
    NotEqual,
    /// a > b → 1 else 0 (`greater`; false with a NaN).
    Greater,
    /// a ≥ b → 1 else 0 (`greater_equal`; false with a NaN).
    GreaterEqual,
    /// a < b → 1 else 0 (`less`; false with a NaN).
    Less,
    /// a ≤ b → 1 else 0 (`less_equal`; false with a NaN).
    LessEqual,
    /// (a ≠ 0) ∧ (b ≠ 0) → 1 else 0 (`logical_and`; NaN counts as true).
    LogicalAnd,
    /// (a ≠ 0) ∨ (b ≠ 0) → 1 else 0 (`logical_or`).
    LogicalOr,
    /// (a ≠ 0) ⊕ (b ≠ 0) → 1 else 0 (`logical_xor`).
    LogicalXor,
    /// a & b on int32 bit patterns (`bitwise_and`; bitvec: int32 operands only).
    BitwiseAnd,
    /// a | b (`bitwise_or`; bitvec).
    BitwiseOr,
    /// a ^ b (`bitwise_xor`; bitvec).
    BitwiseXor,
    /// a << b, zero-filling (`left_shift`; bitvec); a shift outside 0..=31 gives 0.
    LeftShift,
    /// a >> b, logical (zero-filling; NKI has no arithmetic right shift) (`right_shift`;
    /// bitvec); a shift outside 0..=31 gives 0.
    RightShift,
}

impl AluOp {
    /// Every operation, in code order.
    pub const ALL: [AluOp; 21] = [
        AluOp::Add,
        AluOp::Sub,
        AluOp::Mul,
        AluOp::Max,
        AluOp::Min,
        AluOp::Divide,
        AluOp::Power,
        AluOp::Equal,
        AluOp::NotEqual,
        AluOp::Greater,
        AluOp::GreaterEqual,
        AluOp::Less,
        AluOp::LessEqual,
        AluOp::LogicalAnd,
        AluOp::LogicalOr,
        AluOp::LogicalXor,
        AluOp::BitwiseAnd,
        AluOp::BitwiseOr,
        AluOp::BitwiseXor,
        AluOp::LeftShift,
        AluOp::RightShift,
    ];

    /// Program-format code (0–3 are format 1.0's; 4–20 need format 1.1).
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
            AluOp::Add => "add",
            AluOp::Sub => "subtract",
            AluOp::Mul => "multiply",
            AluOp::Max => "maximum",
            AluOp::Min => "minimum",
            AluOp::Divide => "divide",
            AluOp::Power => "power",
            AluOp::Equal => "equal",
            AluOp::NotEqual => "not_equal",
            AluOp::Greater => "greater",
            AluOp::GreaterEqual => "greater_equal",
            AluOp::Less => "less",
            AluOp::LessEqual => "less_equal",
            AluOp::LogicalAnd => "logical_and",
            AluOp::LogicalOr => "logical_or",
            AluOp::LogicalXor => "logical_xor",
            AluOp::BitwiseAnd => "bitwise_and",
            AluOp::BitwiseOr => "bitwise_or",
            AluOp::BitwiseXor => "bitwise_xor",
            AluOp::LeftShift => "left_shift",
            AluOp::RightShift => "right_shift",
        }
    }

    /// Whether format 1.0 has this operation (codes 0–3).
    pub const fn in_format_1_0(self) -> bool {
        matches!(self, AluOp::Add | AluOp::Sub | AluOp::Mul | AluOp::Max)
    }

    /// Whether this is a bitvec operation (int32 bit patterns only).
    pub const fn is_bitvec(self) -> bool {
        matches!(
            self,
            AluOp::BitwiseAnd
                | AluOp::BitwiseOr
                | AluOp::BitwiseXor
                | AluOp::LeftShift
                | AluOp::RightShift
        )
    }

    /// Whether this is a comparison (result 1 or 0).
    pub const fn is_comparison(self) -> bool {
        matches!(
            self,
            AluOp::Equal
                | AluOp::NotEqual
                | AluOp::Greater
                | AluOp::GreaterEqual
                | AluOp::Less
                | AluOp::LessEqual
        )
    }

    /// Whether NKI lists the operation as a legal reduction operator (add, subtract,
    /// multiply, max, min, the logical and the bitwise and/or/xor).
    pub const fn is_reduction(self) -> bool {
        matches!(
            self,
            AluOp::Add
                | AluOp::Sub
                | AluOp::Mul
                | AluOp::Max
                | AluOp::Min
                | AluOp::LogicalAnd
                | AluOp::LogicalOr
                | AluOp::LogicalXor
                | AluOp::BitwiseAnd
                | AluOp::BitwiseOr
                | AluOp::BitwiseXor
        )
    }

    /// Applies the operation to binary32 values: the same as [`AluOp::eval_f32`] (kept for
    /// callers of format 1.0's API).
    #[inline]
    pub fn apply_f32(self, a: f32, b: f32) -> f32 {
        self.eval_f32(a, b)
    }

    /// Applies the operation to binary32 values, deterministically on every machine: one
    /// IEEE operation rounded to binary32 (power: see [`crate::engine::pow_f64`]), NaN results
    /// canonical, max/min with −0 < +0. Bitvec operations act on the values converted to
    /// int32 (validation keeps them off float operands).
    #[inline]
    pub fn eval_f32(self, a: f32, b: f32) -> f32 {
        let bit = |c: bool| if c { 1.0 } else { 0.0 };
        match self {
            AluOp::Add => canon(a + b),
            AluOp::Sub => canon(a - b),
            AluOp::Mul => canon(a * b),
            AluOp::Max => max_num(a, b),
            AluOp::Min => min_num(a, b),
            AluOp::Divide => canon(a / b),
            AluOp::Power => canon(pow_f64(f64::from(a), f64::from(b)) as f32),
            AluOp::Equal => bit(a == b),
            AluOp::NotEqual => bit(a != b),
            AluOp::Greater => bit(a > b),
            AluOp::GreaterEqual => bit(a >= b),
            AluOp::Less => bit(a < b),
            AluOp::LessEqual => bit(a <= b),
            AluOp::LogicalAnd => bit(a != 0.0 && b != 0.0),
            AluOp::LogicalOr => bit(a != 0.0 || b != 0.0),
            AluOp::LogicalXor => bit((a != 0.0) != (b != 0.0)),
            AluOp::BitwiseAnd
            | AluOp::BitwiseOr
            | AluOp::BitwiseXor
            | AluOp::LeftShift
            | AluOp::RightShift => self.apply_i32(f32_to_i32(a), f32_to_i32(b)) as f32,
        }
    }

    /// Applies the operation to int32 values: wrapping arithmetic, comparisons and logical
    /// operations give 1 or 0, bitvec operations act on the bit patterns.
    #[inline]
    pub fn apply_i32(self, a: i32, b: i32) -> i32 {
        let bit = |c: bool| i32::from(c);
        match self {
            AluOp::Add => a.wrapping_add(b),
            AluOp::Sub => a.wrapping_sub(b),
            AluOp::Mul => a.wrapping_mul(b),
            AluOp::Max => a.max(b),
            AluOp::Min => a.min(b),
            AluOp::Divide => {
                if b == 0 {
                    0
                } else {
                    a.wrapping_div(b)
                }
            }
            AluOp::Power => ipow(a, b),
            AluOp::Equal => bit(a == b),
            AluOp::NotEqual => bit(a != b),
            AluOp::Greater => bit(a > b),
            AluOp::GreaterEqual => bit(a >= b),
            AluOp::Less => bit(a < b),
            AluOp::LessEqual => bit(a <= b),
            AluOp::LogicalAnd => bit(a != 0 && b != 0),
            AluOp::LogicalOr => bit(a != 0 || b != 0),
            AluOp::LogicalXor => bit((a != 0) != (b != 0)),
            AluOp::BitwiseAnd => a & b,
            AluOp::BitwiseOr => a | b,
            AluOp::BitwiseXor => a ^ b,
            AluOp::LeftShift => {
                if (0..32).contains(&b) {
                    ((a as u32) << b) as i32
                } else {
                    0
                }
            }
            AluOp::RightShift => {
                if (0..32).contains(&b) {
                    ((a as u32) >> b) as i32
                } else {
                    0
                }
            }
        }
    }
}

/// IEEE maxNum with −0 < +0 and a canonical NaN when both operands are NaN.
#[inline]
pub(crate) fn max_num(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return canon(b);
    }
    if b.is_nan() || a > b {
        return a;
    }
    if b > a {
        return b;
    }
    // Equal: only ±0 can differ.
    if a.is_sign_positive() { a } else { b }
}

/// IEEE minNum with −0 < +0 and a canonical NaN when both operands are NaN.
#[inline]
pub(crate) fn min_num(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return canon(b);
    }
    if b.is_nan() || a < b {
        return a;
    }
    if b < a {
        return b;
    }
    if a.is_sign_negative() { a } else { b }
}

/// `aᵇ` on int32: wrapping square-and-multiply; a negative exponent gives the truncated
/// reciprocal power (1 for a = 1, ±1 for a = −1, 0 otherwise, including a = 0).
fn ipow(a: i32, b: i32) -> i32 {
    if b < 0 {
        return match a {
            1 => 1,
            -1 => {
                if b % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut base, mut e, mut acc) = (a, b as u32, 1i32);
    while e > 0 {
        if e & 1 == 1 {
            acc = acc.wrapping_mul(base);
        }
        base = base.wrapping_mul(base);
        e >>= 1;
    }
    acc
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn codes_round_trip_and_1_0_codes_are_unchanged() {
        for op in AluOp::ALL {
            assert_eq!(AluOp::from_code(op.code()), Some(op));
        }
        assert_eq!(AluOp::Add.code(), 0);
        assert_eq!(AluOp::Sub.code(), 1);
        assert_eq!(AluOp::Mul.code(), 2);
        assert_eq!(AluOp::Max.code(), 3);
        assert_eq!(AluOp::from_code(21), None);
    }

    #[test]
    fn integer_edge_cases() {
        assert_eq!(AluOp::Divide.apply_i32(7, -2), -3);
        assert_eq!(AluOp::Divide.apply_i32(7, 0), 0);
        assert_eq!(AluOp::Divide.apply_i32(i32::MIN, -1), i32::MIN);
        assert_eq!(AluOp::Power.apply_i32(3, 4), 81);
        assert_eq!(AluOp::Power.apply_i32(-1, -3), -1);
        assert_eq!(AluOp::Power.apply_i32(0, -1), 0);
        assert_eq!(AluOp::RightShift.apply_i32(-1, 28), 0xF);
        assert_eq!(AluOp::LeftShift.apply_i32(1, 32), 0);
        assert_eq!(AluOp::LeftShift.apply_i32(1, -1), 0);
    }

    #[test]
    fn min_max_order_signed_zeros() {
        assert!(max_num(-0.0, 0.0).is_sign_positive());
        assert!(max_num(0.0, -0.0).is_sign_positive());
        assert!(min_num(0.0, -0.0).is_sign_negative());
        assert_eq!(max_num(f32::NAN, 1.0), 1.0);
        assert_eq!(min_num(2.0, f32::NAN), 2.0);
        assert_eq!(max_num(f32::NAN, -f32::NAN).to_bits(), 0x7FC0_0000);
    }
}
