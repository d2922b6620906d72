//! `nrt_get_version`: the runtime's version written into a caller buffer at fixed offsets.
//!
//! Layout (the C `nrt_version_t`, 224 bytes): four native-endian `u64` components at +0
//! (major, minor, patch, maintenance), the NUL-terminated detail string at +32 (at most 127
//! bytes with its NUL), the NUL-terminated git hash at +160 (at most 64 bytes with its NUL).

use crate::error::Result;

/// The libnrt release whose ABI and behaviour this implementation follows.
pub const RT_VERSION: &str = "2.31.24.0";

/// This implementation's own name and version.
pub const IMPLEMENTATION: &str = concat!("nrt-rs ", env!("CARGO_PKG_VERSION"));

/// The git revision this crate was built from (40 hex digits), or `"unknown"`.
pub const GIT_HASH: &str = match option_env!("NRT_GIT_HASH") {
    Some(h) => h,
    None => "unknown",
};

/// Smallest buffer `nrt_get_version` accepts.
pub const MIN_SIZE: usize = 160;
/// Offset of the detail string.
pub const DETAIL_OFFSET: usize = 32;
/// Room for the detail string, NUL included (`snprintf(buf + 32, 127, ...)`).
pub const DETAIL_CAPACITY: usize = 127;
/// Offset of the git hash.
pub const GIT_HASH_OFFSET: usize = 160;
/// Room for the git hash, NUL included.
pub const GIT_HASH_CAPACITY: usize = 64;
/// The git hash is written only when the buffer is larger than this.
pub const GIT_HASH_MIN_SIZE: usize = 200;
/// `sizeof(nrt_version_t)`.
pub const STRUCT_SIZE: usize = 224;

/// One version component: an all-digit, non-empty component is its decimal value; anything
/// else (including a value that overflows `u64`) is 0.
pub fn parse_component(s: &str) -> u64 {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return 0;
    }
    s.parse::<u64>().unwrap_or(0)
}

/// Splits a dotted version into at most four components; missing components are 0.
pub fn split_version(v: &str) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (slot, part) in out.iter_mut().zip(v.split('.')) {
        *slot = parse_component(part);
    }
    out
}

/// Copies `s` plus a NUL into `dst`, truncating like `snprintf` so the NUL always fits.
fn put_cstr(dst: &mut [u8], s: &str) {
    let Some(room) = dst.len().checked_sub(1) else {
        return;
    };
    let n = s.len().min(room);
    if let (Some(d), Some(src)) = (dst.get_mut(..n), s.as_bytes().get(..n)) {
        d.copy_from_slice(src);
    }
    if let Some(nul) = dst.get_mut(n) {
        *nul = 0;
    }
}

/// Fills `buf` (the caller's buffer; its length is the C `size` argument) with the version.
///
/// Fails with `NRT_FAILURE` and "Size is < 160" when the buffer is smaller than 160 bytes. The
/// git hash is written only when the buffer is larger than 200 bytes.
pub fn write_version(buf: &mut [u8]) -> Result<()> {
    if buf.len() < MIN_SIZE {
        return Err(err!(Failure, "Size is < {}", MIN_SIZE));
    }
    for (i, c) in split_version(RT_VERSION).iter().enumerate() {
        if let Some(dst) = buf.get_mut(i * 8..i * 8 + 8) {
            dst.copy_from_slice(&c.to_ne_bytes());
        }
    }
    let detail = crate::error::Message::from_fmt(format_args!(
        "libnrt version {RT_VERSION} ({IMPLEMENTATION})"
    ));
    if let Some(dst) = buf.get_mut(DETAIL_OFFSET..DETAIL_OFFSET + DETAIL_CAPACITY) {
        put_cstr(dst, detail.as_str());
    }
    if buf.len() > GIT_HASH_MIN_SIZE {
        let end = buf.len().min(GIT_HASH_OFFSET + GIT_HASH_CAPACITY);
        if let Some(dst) = buf.get_mut(GIT_HASH_OFFSET..end) {
            put_cstr(dst, GIT_HASH);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_numeric_component_parses_as_zero() {
        assert_eq!(split_version("2.31.24.0"), [2, 31, 24, 0]);
        assert_eq!(split_version("2.x.24.0"), [2, 0, 24, 0]);
        assert_eq!(split_version("2.31"), [2, 31, 0, 0]);
        assert_eq!(
            split_version("-1.+2. 3.99999999999999999999999"),
            [0, 0, 0, 0]
        );
        assert_eq!(split_version("1.2.3.4.5"), [1, 2, 3, 4]);
    }
}
