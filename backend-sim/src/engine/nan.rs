//! The one NaN engine arithmetic produces, and the function that puts it in place of any other.

/// The canonical quiet NaN (`0x7FC0_0000`; `bf16` 0x7FC0, `fp16` 0x7E00 once narrowed): every
/// NaN that engine arithmetic produces, in either format. IEEE-754 and Rust leave the sign and
/// payload of an arithmetic NaN open (x86 makes `∞ − ∞` negative, AArch64 positive; RISC-V never
/// propagates payloads), so every arithmetic result that is NaN is replaced by this one.
pub const CANONICAL_NAN: f32 = f32::from_bits(0x7FC0_0000);

/// `v`, or [`CANONICAL_NAN`] when `v` is a NaN.
///
/// The test is on the bits, not `f32::is_nan` + a float select: Rust's float semantics let an
/// operation that produces a NaN produce *any* NaN, so an optimiser may treat
/// `if v.is_nan() { CANONICAL_NAN } else { v }` as `v` (LLVM does, at `opt-level` 2, for
/// `sqrt` of a negative number). An integer comparison of the bit pattern cannot be folded
/// that way.
#[inline]
pub(crate) fn canon(v: f32) -> f32 {
    if v.to_bits() & 0x7FFF_FFFF > 0x7F80_0000 {
        CANONICAL_NAN
    } else {
        v
    }
}
