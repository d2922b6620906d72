//! Element types and their conversions.
//!
//! Every narrowing conversion rounds to nearest, ties to even (RNE). Conversions to `int32`
//! round to nearest even, saturate at the type's bounds and map NaN to 0. Nothing here depends
//! on the host's floating-point environment beyond IEEE-754 binary32 arithmetic.

use core::fmt;

/// An element type of a tensor or an access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// bfloat16: the upper half of a binary32.
    Bf16,
    /// IEEE-754 binary16.
    F16,
    /// Two's-complement 32-bit integer.
    I32,
}

impl DType {
    /// Every element type, in code order.
    pub const ALL: [DType; 4] = [DType::F32, DType::Bf16, DType::F16, DType::I32];

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::Bf16 | DType::F16 => 2,
        }
    }

    /// The code used by the program format.
    pub const fn code(self) -> u8 {
        match self {
            DType::F32 => 0,
            DType::Bf16 => 1,
            DType::F16 => 2,
            DType::I32 => 3,
        }
    }

    /// The element type with this program-format code.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(DType::F32),
            1 => Some(DType::Bf16),
            2 => Some(DType::F16),
            3 => Some(DType::I32),
            _ => None,
        }
    }

    /// Lower-case name (`"fp32"`, `"bf16"`, `"fp16"`, `"int32"`).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "fp32",
            DType::Bf16 => "bf16",
            DType::F16 => "fp16",
            DType::I32 => "int32",
        }
    }

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        !matches!(self, DType::I32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// binary32 → bfloat16, round to nearest even; NaN stays a (quiet) NaN.
pub fn f32_to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) as u16) | 0x0040;
    }
    let round = ((bits >> 16) & 1) + 0x7FFF;
    (bits.wrapping_add(round) >> 16) as u16
}

/// bfloat16 → binary32 (exact).
pub fn bf16_to_f32(v: u16) -> f32 {
    f32::from_bits(u32::from(v) << 16)
}

/// binary32 → binary16, round to nearest even, with subnormals, overflow to infinity and
/// quiet NaN.
pub fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xFF) as i32;
    let man = bits & 0x007F_FFFF;
    if exp == 0xFF {
        if man != 0 {
            return sign | 0x7E00 | ((man >> 13) as u16);
        }
        return sign | 0x7C00;
    }
    // Unbiased exponent, rebias for binary16.
    let e = exp - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    if e <= 0 {
        // Subnormal or zero in binary16.
        if e < -10 {
            return sign;
        }
        let m = man | 0x0080_0000; // implicit bit
        let shift = (14 - e) as u32; // 13 + (1 - e)
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && (out & 1) == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let mut out = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1FFF;
    if rest > 0x1000 || (rest == 0x1000 && (out & 1) == 1) {
        out += 1; // may carry into the exponent, and up to infinity: both correct
    }
    sign | out as u16
}

/// binary16 → binary32 (exact).
pub fn f16_to_f32(v: u16) -> f32 {
    let sign = u32::from(v & 0x8000) << 16;
    let exp = u32::from((v >> 10) & 0x1F);
    let man = u32::from(v & 0x03FF);
    let bits = if exp == 0 {
        if man == 0 {
            sign
        } else {
            // Subnormal: normalise.
            let mut e: i32 = -14;
            let mut m = man;
            while m & 0x0400 == 0 {
                m <<= 1;
                e -= 1;
            }
            let m = m & 0x03FF;
            sign | (((e + 127) as u32) << 23) | (m << 13)
        }
    } else if exp == 0x1F {
        sign | 0x7F80_0000 | (man << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (man << 13)
    };
    f32::from_bits(bits)
}

/// binary32 → int32: round to nearest even, saturate, NaN → 0.
pub fn f32_to_i32(v: f32) -> i32 {
    if v.is_nan() {
        return 0;
    }
    let r = v.round_ties_even();
    if r >= 2_147_483_648.0 {
        i32::MAX
    } else if r <= -2_147_483_648.0 {
        i32::MIN
    } else {
        r as i32
    }
}

/// Reads one element of `dtype` from the first bytes of `b` (little-endian) as binary32.
/// `int32` converts with round-to-nearest-even. Short input reads as 0.
#[inline]
pub(crate) fn load_f32(dtype: DType, b: &[u8]) -> f32 {
    match dtype {
        DType::F32 => match b.get(..4) {
            Some(&[a, c, d, e]) => f32::from_le_bytes([a, c, d, e]),
            _ => 0.0,
        },
        DType::Bf16 => match b.get(..2) {
            Some(&[a, c]) => bf16_to_f32(u16::from_le_bytes([a, c])),
            _ => 0.0,
        },
        DType::F16 => match b.get(..2) {
            Some(&[a, c]) => f16_to_f32(u16::from_le_bytes([a, c])),
            _ => 0.0,
        },
        DType::I32 => load_i32(b) as f32,
    }
}

/// Reads one little-endian `int32` from the first bytes of `b`; short input reads as 0.
#[inline]
pub(crate) fn load_i32(b: &[u8]) -> i32 {
    match b.get(..4) {
        Some(&[a, c, d, e]) => i32::from_le_bytes([a, c, d, e]),
        _ => 0,
    }
}

/// Writes `v` as one element of `dtype` into the first bytes of `out` (little-endian).
#[inline]
pub(crate) fn store_f32(dtype: DType, v: f32, out: &mut [u8]) {
    match dtype {
        DType::F32 => put(out, &v.to_le_bytes()),
        DType::Bf16 => put(out, &f32_to_bf16(v).to_le_bytes()),
        DType::F16 => put(out, &f32_to_f16(v).to_le_bytes()),
        DType::I32 => put(out, &f32_to_i32(v).to_le_bytes()),
    }
}

/// Writes `v` as one element of `dtype`; floats convert from the integer with RNE.
#[inline]
pub(crate) fn store_i32(dtype: DType, v: i32, out: &mut [u8]) {
    match dtype {
        DType::I32 => put(out, &v.to_le_bytes()),
        other => store_f32(other, v as f32, out),
    }
}

#[inline]
fn put(out: &mut [u8], b: &[u8]) {
    if let Some(dst) = out.get_mut(..b.len()) {
        dst.copy_from_slice(b);
    }
}

/// Encodes binary32 values as a little-endian byte buffer of `dtype` (with RNE narrowing).
pub fn encode_f32(dtype: DType, values: &[f32]) -> Vec<u8> {
    let mut out = vec![0u8; values.len() * dtype.size()];
    for (v, chunk) in values.iter().zip(out.chunks_exact_mut(dtype.size())) {
        store_f32(dtype, *v, chunk);
    }
    out
}

/// Decodes a little-endian byte buffer of `dtype` into binary32 values (a trailing partial
/// element is ignored).
pub fn decode_f32(dtype: DType, bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(dtype.size())
        .map(|c| load_f32(dtype, c))
        .collect()
}

/// Rounds `v` through `dtype` and back (the value a store-then-load yields).
pub fn round_through(dtype: DType, v: f32) -> f32 {
    let mut b = [0u8; 4];
    store_f32(dtype, v, &mut b);
    load_f32(dtype, &b)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // 1 + 2^-8 is exactly half-way between two bf16 values: ties to even (down).
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        // 1 + 3*2^-8 is half-way: ties to even (up).
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8001)), 0x3F81);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80); // rounds up to infinity
    }

    #[test]
    fn f16_round_trip_every_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#06x}");
            }
        }
    }

    #[test]
    fn f16_rounds_to_nearest_even() {
        // Half-way between 1 and 1 + 2^-10.
        assert_eq!(f32_to_f16(1.0 + f32::powi(2.0, -11)), 0x3C00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * f32::powi(2.0, -11)), 0x3C02);
        assert_eq!(f32_to_f16(65520.0), 0x7C00); // rounds to infinity
        assert_eq!(f32_to_f16(65519.0), 0x7BFF);
        // Smallest subnormal and half of it (ties to even: zero).
        assert_eq!(f32_to_f16(f32::powi(2.0, -24)), 0x0001);
        assert_eq!(f32_to_f16(f32::powi(2.0, -25)), 0x0000);
        assert_eq!(f32_to_f16(1.5 * f32::powi(2.0, -24)), 0x0002);
    }

    #[test]
    fn int_conversions_saturate_and_round_even() {
        assert_eq!(f32_to_i32(2.5), 2);
        assert_eq!(f32_to_i32(3.5), 4);
        assert_eq!(f32_to_i32(-2.5), -2);
        assert_eq!(f32_to_i32(1e20), i32::MAX);
        assert_eq!(f32_to_i32(-1e20), i32::MIN);
        assert_eq!(f32_to_i32(f32::NAN), 0);
    }
}
