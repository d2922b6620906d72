//! Field tables ([`Field`], [`Layout`]) and an argument struct decoded through one ([`Rec`]).
//!
//! The emulator never casts user memory to a Rust struct: it copies `sizeof` bytes of the
//! target's argument and reads or writes each field at its table offset, little-endian.

/// One field of a driver argument struct: its C name, byte offset and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// The C field name.
    pub name: &'static str,
    /// Byte offset in the struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// The layout of one driver argument struct (x86_64 LP64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The C struct name, without `struct `.
    pub name: &'static str,
    /// `sizeof`.
    pub sizeof: usize,
    /// Every field, in declaration order.
    pub fields: &'static [Field],
}

/// An argument struct's bytes, read and written through its [`Layout`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    layout: &'static Layout,
    bytes: Vec<u8>,
}

impl Rec {
    /// All zeros.
    pub(crate) fn zeroed(layout: &'static Layout) -> Self {
        Self {
            layout,
            bytes: vec![0; layout.sizeof],
        }
    }

    /// From `bytes` (padded with zeros or cut to `sizeof`).
    pub(crate) fn from_bytes(layout: &'static Layout, bytes: &[u8]) -> Self {
        let mut rec = Self::zeroed(layout);
        let n = bytes.len().min(layout.sizeof);
        if let (Some(dst), Some(src)) = (rec.bytes.get_mut(..n), bytes.get(..n)) {
            dst.copy_from_slice(src);
        }
        rec
    }

    /// The layout.
    pub(crate) fn layout(&self) -> &'static Layout {
        self.layout
    }

    /// The raw bytes (`sizeof` of them).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Field `f` as an unsigned little-endian integer (fields of 1, 2, 4 or 8 bytes; wider
    /// fields read their first 8 bytes).
    pub(crate) fn get(&self, f: Field) -> u64 {
        let mut word = [0u8; 8];
        let n = f.size.min(8);
        if let (Some(dst), Some(src)) = (
            word.get_mut(..n),
            self.bytes.get(f.offset..f.offset.saturating_add(n)),
        ) {
            dst.copy_from_slice(src);
        }
        u64::from_le_bytes(word)
    }

    /// Field `f` as a `u32` (its low 32 bits).
    pub(crate) fn get32(&self, f: Field) -> u32 {
        self.get(f) as u32
    }

    /// Stores `value` in field `f` (truncated to the field's size, at most 8 bytes).
    pub(crate) fn set(&mut self, f: Field, value: u64) {
        let n = f.size.min(8);
        let src = value.to_le_bytes();
        if let (Some(dst), Some(src)) = (
            self.bytes.get_mut(f.offset..f.offset.saturating_add(n)),
            src.get(..n),
        ) {
            dst.copy_from_slice(src);
        }
    }

    /// The bytes of field `f`.
    pub(crate) fn field_bytes(&self, f: Field) -> &[u8] {
        self.bytes
            .get(f.offset..f.offset.saturating_add(f.size))
            .unwrap_or(&[])
    }

    /// Overwrites field `f` with `data` (cut or zero-padded to the field's size).
    pub(crate) fn set_field_bytes(&mut self, f: Field, data: &[u8]) {
        if let Some(dst) = self
            .bytes
            .get_mut(f.offset..f.offset.saturating_add(f.size))
        {
            dst.fill(0);
            let n = data.len().min(dst.len());
            if let (Some(d), Some(s)) = (dst.get_mut(..n), data.get(..n)) {
                d.copy_from_slice(s);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const A: Field = Field {
        name: "a",
        offset: 0,
        size: 4,
    };
    const B: Field = Field {
        name: "b",
        offset: 8,
        size: 8,
    };
    const W: Field = Field {
        name: "w",
        offset: 16,
        size: 16,
    };
    static L: Layout = Layout {
        name: "t",
        sizeof: 32,
        fields: &[A, B, W],
    };

    #[test]
    fn fields_round_trip_little_endian() {
        let mut r = Rec::zeroed(&L);
        r.set(A, 0x1_2345_6789);
        r.set(B, 0x0102_0304_0506_0708);
        assert_eq!(r.get(A), 0x2345_6789);
        assert_eq!(r.get32(A), 0x2345_6789);
        assert_eq!(r.get(B), 0x0102_0304_0506_0708);
        assert_eq!(&r.bytes()[..4], &[0x89, 0x67, 0x45, 0x23]);
        assert_eq!(r.bytes()[8], 0x08);
        r.set_field_bytes(W, &[7; 20]);
        assert_eq!(r.field_bytes(W), &[7; 16]);
        let again = Rec::from_bytes(&L, r.bytes());
        assert_eq!(again, r);
        assert_eq!(Rec::from_bytes(&L, &[1, 2]).get(A), 0x0201);
    }
}
